/*
 * tf/diag.h - the detail behind a failing status, for the core and its faces.
 *
 * A failing function records one message naming the file, line, key or
 * tensor, then returns its status:
 *
 *     return tf_diag_set(TF_ERR_FORMAT, "%s: header length %llu exceeds file", path, n);
 *
 * The message is per thread and is replaced by the next failure; callers that
 * add context use tf_diag_prefix() or tf_diag_note().  A face records its own
 * failures here too, so that one message reaches the user whichever side
 * failed.  Plugins link nothing from the core: they record theirs through
 * the host's error service (tf_host.error in tf/plugin.h), which lands here.
 */
#ifndef TF_DIAG_H
#define TF_DIAG_H

#include "tf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

int tf_diag_set(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepend "context: " to the current message; returns status. */
int tf_diag_prefix(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append " (note)" to the current message; returns status. */
int tf_diag_note(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The current message, or "" when none (tf_engine_errmsg() is the same). */
const char *tf_diag_msg(void);
void tf_diag_clear(void);

#ifdef __cplusplus
}
#endif
#endif /* TF_DIAG_H */

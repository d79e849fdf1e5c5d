/*
 * tf/stopstr.h - stop sequences: a streaming matcher over generated text.
 *
 * Text arrives in pieces (one token's text at a time).  The matcher passes
 * on what can no longer be part of a stop string and holds back the
 * longest tail that is the start of one.  When a stop string completes,
 * the text before it is passed on and the stop string and anything after
 * it are dropped: the stop string itself is never emitted.  With several
 * stop strings, the first to complete wins (of two ending together, the
 * longer), so how the text is cut into pieces never changes the result.
 * tfrun's --stop and the OpenAI server's "stop" use it.
 */
#ifndef TF_STOPSTR_H
#define TF_STOPSTR_H

#include <stdbool.h>
#include <stddef.h>

#include "tf/text.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Its fields are the matcher's own but `stopped`. */
typedef struct tf_stopstr {
	tf_bytes *stops;                /* the stop strings */
	int n;
	tf_bytes hold;                  /* the tail that may start a stop string */
	tf_bytes out;                   /* what the last push or flush released */
	bool stopped;                   /* a stop string completed */
} tf_stopstr;

/* Zero-initialise, add stop strings, then push the reply's text. */
void tf_stopstr_init(tf_stopstr *m);
void tf_stopstr_free(tf_stopstr *m);
/* An empty stop string fails with TF_ERR_INVALID. */
int tf_stopstr_add(tf_stopstr *m, const char *s, size_t len);

/*
 * Feed text.  *out, *out_len: the text now safe to show (valid until the
 * next call).  After a stop string completes, m->stopped is set, *out is
 * the text before it, and later pushes release nothing.
 */
int tf_stopstr_push(tf_stopstr *m, const char *text, size_t len, const char **out,
		    size_t *out_len);
/* The reply ended without a stop string: release the held tail. */
void tf_stopstr_flush(tf_stopstr *m, const char **out, size_t *out_len);
/* For the next reply: nothing held, not stopped; the stop strings stay. */
void tf_stopstr_reset(tf_stopstr *m);

#ifdef __cplusplus
}
#endif
#endif /* TF_STOPSTR_H */

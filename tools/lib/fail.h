/*
 * fail.h - the detail behind a failing tfquant status: the tool records its
 * own failures here, the core's are tf_checkpoint_errmsg().  The first
 * failure ends the run, so whichever was recorded is the one to show.
 */
#ifndef TFQ_FAIL_H
#define TFQ_FAIL_H

/* Record the message; returns status. */
int tfq_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The tool's message when one was recorded, else the core's. */
const char *tfq_errmsg(void);

#endif /* TFQ_FAIL_H */

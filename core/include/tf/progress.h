/*
 * tf/progress.h - a one-line progress bar on stderr while weights load or a
 * long prompt is prefilled.
 *
 * It draws only when stderr is a terminal, so logs and pipes stay clean, and
 * redraws at most every 100 ms (and at the end), so updating it per tensor
 * or per chunk costs nothing.
 *
 *     loading weights  [##########----------]  52%  1.4/2.7 GiB  3.1 s
 */
#ifndef TF_PROGRESS_H
#define TF_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_progress_unit { TF_PROGRESS_BYTES, TF_PROGRESS_TOKENS } tf_progress_unit;

typedef struct tf_progress {
	FILE *out;              /* NULL: not drawing (stderr is no terminal) */
	const char *label;
	tf_progress_unit unit;
	uint64_t total, done;
	double t0, last;        /* start and last redraw, seconds */
} tf_progress;

void tf_progress_init(tf_progress *p, const char *label, uint64_t total, tf_progress_unit unit);
/* Sets the amount done so far (not an increment). */
void tf_progress_update(tf_progress *p, uint64_t done);
/* Draws the final state and ends the line. */
void tf_progress_finish(tf_progress *p);

#ifdef __cplusplus
}
#endif
#endif /* TF_PROGRESS_H */

/*
 * pool.h - a persistent thread pool for the CPU backend's parallel_for.
 *
 * Workers are created once; between jobs they poll briefly, then sleep on a
 * condition variable.  The thread that submits a job works on it too, as
 * worker 0, and returns when every item is done.  Chunks are handed out from an atomic counter, so
 * a slow worker does not hold up the rest.
 *
 * Jobs from different threads are run one after another.  A job submitted
 * from inside a running job (a nested parallel_for) runs inline on the
 * submitting worker under its own id, so nesting cannot deadlock and a
 * worker id is never used by two running chunks at once.
 */
#ifndef TF_CPU_POOL_H
#define TF_CPU_POOL_H

#include "tf/backend.h"

typedef struct tf_pool tf_pool;

/* n_threads counts the caller: 1 means no worker threads at all. */
int tf_pool_init(tf_pool **out, int n_threads);
void tf_pool_free(tf_pool *p);

/* Threads that run work, the caller included (n_threads of init). */
int tf_pool_size(const tf_pool *p);

/* Split [0, n) into chunks of whole multiples of `grain` items (the last
 * may be shorter) and run fn on each; returns when all are done.  Kernels
 * that work in groups of `grain` never see a group cut in two. */
void tf_pool_run(tf_pool *p, int64_t n, int64_t grain, tf_range_fn fn,
		 void *arg);

/* Wait until no job is running. */
void tf_pool_quiesce(tf_pool *p);

#endif /* TF_CPU_POOL_H */

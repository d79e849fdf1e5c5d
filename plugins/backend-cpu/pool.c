/* pool.c - see pool.h. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Chunks per thread when the grain allows: enough to even out uneven
 * cores without paying for many hand-outs. */
#define TF_POOL_CHUNKS_PER_THREAD 4

struct tf_pool_worker {
	tf_pool *pool;
	int id;
	pthread_t thread;
};

struct tf_pool {
	int n_threads;
	struct tf_pool_worker *workers;         /* n_threads - 1 of them */
	int n_started;

	pthread_mutex_t submit;                 /* one job at a time */
	pthread_mutex_t lock;                   /* guards everything below */
	pthread_cond_t wake, done;
	uint64_t generation;                    /* bumped per job */
	int stop;
	int n_active;                           /* threads on this job, caller included */
	int n_busy;                             /* workers not yet finished */

	/* The current job; read by workers only after seeing `generation`. */
	tf_range_fn fn;
	void *arg;
	int64_t n, chunk;
	atomic_int_fast64_t next;
};

/* The worker id of the job this thread is running, -1 outside jobs: a
 * nested job runs inline under the same id. */
static _Thread_local int tf_pool_self = -1;

static void pool_work(tf_pool *p, int id)
{
	tf_pool_self = id;
	for (;;) {
		int64_t begin = atomic_fetch_add(&p->next, p->chunk);
		if (begin >= p->n)
			break;
		int64_t end = begin + p->chunk < p->n ? begin + p->chunk : p->n;
		p->fn(p->arg, begin, end, id);
	}
	tf_pool_self = -1;
}

static void *pool_main(void *arg)
{
	struct tf_pool_worker *w = arg;
	tf_pool *p = w->pool;
	uint64_t seen = 0;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (p->generation == seen && !p->stop)
			pthread_cond_wait(&p->wake, &p->lock);
		if (p->stop)
			break;
		seen = p->generation;
		if (w->id >= p->n_active)
			continue;               /* job too small to need us */
		pthread_mutex_unlock(&p->lock);
		pool_work(p, w->id);
		pthread_mutex_lock(&p->lock);
		if (--p->n_busy == 0)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int tf_pool_init(tf_pool **out, int n_threads)
{
	*out = NULL;
	if (n_threads < 1)
		return TF_ERR_INVALID;
	tf_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return TF_ERR_NOMEM;
	p->n_threads = n_threads;
	pthread_mutex_init(&p->submit, NULL);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->done, NULL);
	atomic_init(&p->next, 0);
	if (n_threads > 1) {
		p->workers = calloc((size_t)n_threads - 1, sizeof(*p->workers));
		if (!p->workers)
			goto fail;
	}
	for (int i = 1; i < n_threads; i++) {
		struct tf_pool_worker *w = &p->workers[i - 1];
		w->pool = p;
		w->id = i;
		if (pthread_create(&w->thread, NULL, pool_main, w) != 0)
			goto fail;
		p->n_started++;
	}
	*out = p;
	return TF_OK;
fail:
	tf_pool_free(p);
	return TF_ERR_NOMEM;
}

void tf_pool_free(tf_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; i < p->n_started; i++)
		pthread_join(p->workers[i].thread, NULL);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->submit);
	free(p->workers);
	free(p);
}

int tf_pool_size(const tf_pool *p)
{
	return p->n_threads;
}

void tf_pool_run(tf_pool *p, int64_t n, int64_t grain, tf_range_fn fn,
		 void *arg)
{
	if (n <= 0)
		return;
	if (grain < 1)
		grain = 1;
	int64_t chunk = (n + (int64_t)p->n_threads * TF_POOL_CHUNKS_PER_THREAD - 1) /
			((int64_t)p->n_threads * TF_POOL_CHUNKS_PER_THREAD);
	if (chunk < grain)
		chunk = grain;
	int64_t n_chunks = (n + chunk - 1) / chunk;
	if (tf_pool_self >= 0) {
		fn(arg, 0, n, tf_pool_self);
		return;
	}

	/* Small jobs run inline, but still one at a time: worker 0's
	 * scratch must not be shared by two callers. */
	pthread_mutex_lock(&p->submit);
	if (n_chunks == 1 || p->n_threads == 1) {
		fn(arg, 0, n, 0);
		pthread_mutex_unlock(&p->submit);
		return;
	}
	pthread_mutex_lock(&p->lock);
	p->fn = fn;
	p->arg = arg;
	p->n = n;
	p->chunk = chunk;
	atomic_store(&p->next, 0);
	p->n_active = n_chunks < p->n_threads ? (int)n_chunks : p->n_threads;
	p->n_busy = p->n_active - 1;
	p->generation++;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);

	pool_work(p, 0);

	pthread_mutex_lock(&p->lock);
	while (p->n_busy > 0)
		pthread_cond_wait(&p->done, &p->lock);
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&p->submit);
}

void tf_pool_quiesce(tf_pool *p)
{
	pthread_mutex_lock(&p->submit);
	pthread_mutex_unlock(&p->submit);
}

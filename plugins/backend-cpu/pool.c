/*
 * pool.c - see pool.h.
 *
 * A job is published by bumping `ticket`, which packs the job's sequence
 * number with how many threads it wants, so a worker learns both in one
 * atomic read and never reads a later job's fields by mistake.  Chunks
 * are guided: each takes a share of what is left, so they shrink towards
 * the end of the job and the last one, which the other threads may wait
 * for, is a single grain, while the count stays low.  Workers
 * spin on the ticket for a short while after each job (decode runs
 * hundreds of small jobs per token, and a futex wake-up costs more than
 * most of them), then sleep on `wake`.  The submitter signals only when
 * some worker sleeps.
 */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

/* A chunk takes 1/(TF_POOL_SHARE x threads) of the items left: the first
 * is a quarter of a two-thread job, and each one after it smaller. */
#define TF_POOL_SHARE 2
/* Polls of the ticket before sleeping: a few hundred microseconds.  After
 * the first TF_POOL_SPIN_HOT, each poll yields the CPU, so a pool with more
 * threads than free cores does not starve the thread it waits for. */
#define TF_POOL_SPIN 1024
#define TF_POOL_SPIN_HOT 256
/* Low ticket bits: threads on the job (TF_CPU_MAX_THREADS fits). */
#define TF_POOL_ACTIVE_BITS 13

#if defined(__x86_64__) || defined(__i386__)
#define pool_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define pool_relax() __asm__ __volatile__("yield")
#else
#define pool_relax() ((void)0)
#endif

static inline void pool_spin(int i)
{
	if (i < TF_POOL_SPIN_HOT)
		pool_relax();
	else
		sched_yield();
}

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
	atomic_uint_fast64_t ticket;            /* sequence << ACTIVE_BITS | n_active */
	atomic_int n_busy;                      /* workers yet to finish the job */
	atomic_int n_sleeping;                  /* workers waiting on `wake` */
	atomic_int stop;

	pthread_mutex_t lock;                   /* for the two condition variables */
	pthread_cond_t wake, done;

	/* The current job: written before the ticket is published, read by
	 * the workers it names until they report done. */
	tf_range_fn fn;
	void *arg;
	int64_t n, grain;
	int64_t share;                  /* TF_POOL_SHARE x threads on the job */
	atomic_int_fast64_t next;
};

/* The worker id of the job this thread is running, -1 outside jobs: a
 * nested job runs inline under the same id. */
static _Thread_local int tf_pool_self = -1;

/* The next chunk: whole grains, at least one, at most what is left. */
static int pool_take(tf_pool *p, int64_t *begin, int64_t *end)
{
	int_fast64_t at = atomic_load(&p->next);
	int64_t size;
	do {
		if (at >= p->n)
			return 0;
		size = (p->n - at) / p->share / p->grain * p->grain;
		if (size < p->grain)
			size = p->grain;
	} while (!atomic_compare_exchange_weak(&p->next, &at, at + size));
	*begin = at;
	*end = at + size < p->n ? at + size : p->n;
	return 1;
}

static void pool_work(tf_pool *p, int id)
{
	int64_t begin, end;

	tf_pool_self = id;
	while (pool_take(p, &begin, &end))
		p->fn(p->arg, begin, end, id);
	tf_pool_self = -1;
}

/* Wait for a ticket other than `seen`: spin, then sleep.  The sleeper
 * counts itself before its last look at the ticket, and the submitter
 * publishes before it looks at the count, so one of them sees the other. */
static uint64_t pool_wait_ticket(tf_pool *p, uint64_t seen)
{
	uint64_t t;
	for (int i = 0; i < TF_POOL_SPIN; i++) {
		t = atomic_load(&p->ticket);
		if (t != seen || atomic_load(&p->stop))
			return t;
		pool_spin(i);
	}
	pthread_mutex_lock(&p->lock);
	atomic_fetch_add(&p->n_sleeping, 1);
	while ((t = atomic_load(&p->ticket)) == seen && !atomic_load(&p->stop))
		pthread_cond_wait(&p->wake, &p->lock);
	atomic_fetch_sub(&p->n_sleeping, 1);
	pthread_mutex_unlock(&p->lock);
	return t;
}

static void *pool_main(void *arg)
{
	struct tf_pool_worker *w = arg;
	tf_pool *p = w->pool;
	uint64_t seen = 0;              /* no job can precede tf_pool_init's return */

	for (;;) {
		seen = pool_wait_ticket(p, seen);
		if (atomic_load(&p->stop))
			break;
		int n_active = (int)(seen & ((1u << TF_POOL_ACTIVE_BITS) - 1));
		if (w->id >= n_active)
			continue;               /* job too small to need us */
		pool_work(p, w->id);
		if (atomic_fetch_sub(&p->n_busy, 1) == 1) {
			pthread_mutex_lock(&p->lock);
			pthread_cond_signal(&p->done);
			pthread_mutex_unlock(&p->lock);
		}
	}
	return NULL;
}

int tf_pool_init(tf_pool **out, int n_threads)
{
	*out = NULL;
	if (n_threads < 1 || n_threads >= 1 << TF_POOL_ACTIVE_BITS)
		return TF_ERR_INVALID;
	tf_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return TF_ERR_NOMEM;
	p->n_threads = n_threads;
	pthread_mutex_init(&p->submit, NULL);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->done, NULL);
	atomic_init(&p->ticket, 0);
	atomic_init(&p->n_busy, 0);
	atomic_init(&p->n_sleeping, 0);
	atomic_init(&p->stop, 0);
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
	atomic_store(&p->stop, 1);
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
	int64_t n_grains = (n + grain - 1) / grain;
	if (tf_pool_self >= 0) {
		fn(arg, 0, n, tf_pool_self);
		return;
	}

	/* Small jobs run inline, but still one at a time: worker 0's
	 * scratch must not be shared by two callers. */
	pthread_mutex_lock(&p->submit);
	if (n_grains == 1 || p->n_threads == 1) {
		fn(arg, 0, n, 0);
		pthread_mutex_unlock(&p->submit);
		return;
	}

	int n_active = n_grains < p->n_threads ? (int)n_grains : p->n_threads;
	p->fn = fn;
	p->arg = arg;
	p->n = n;
	p->grain = grain;
	p->share = (int64_t)TF_POOL_SHARE * n_active;
	atomic_store(&p->next, 0);
	atomic_store(&p->n_busy, n_active - 1);
	uint64_t seq = (atomic_load(&p->ticket) >> TF_POOL_ACTIVE_BITS) + 1;
	atomic_store(&p->ticket, seq << TF_POOL_ACTIVE_BITS | (uint64_t)n_active);
	if (atomic_load(&p->n_sleeping) > 0) {
		pthread_mutex_lock(&p->lock);
		pthread_cond_broadcast(&p->wake);
		pthread_mutex_unlock(&p->lock);
	}

	pool_work(p, 0);

	for (int i = 0; i < TF_POOL_SPIN && atomic_load(&p->n_busy) > 0; i++)
		pool_spin(i);
	if (atomic_load(&p->n_busy) > 0) {
		pthread_mutex_lock(&p->lock);
		while (atomic_load(&p->n_busy) > 0)
			pthread_cond_wait(&p->done, &p->lock);
		pthread_mutex_unlock(&p->lock);
	}
	pthread_mutex_unlock(&p->submit);
}

void tf_pool_quiesce(tf_pool *p)
{
	pthread_mutex_lock(&p->submit);
	pthread_mutex_unlock(&p->submit);
}

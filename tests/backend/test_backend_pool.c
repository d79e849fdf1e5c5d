/*
 * test_backend_pool.c - parallel_for through the ABI: every index exactly
 * once for many (n, grain) pairs in chunks of whole grains, worker ids in
 * range and unique while running, the pool reused across calls, callers on
 * several threads, nested calls, and the [runtime] threads key.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cpu_fixture.h"

/* A pool bug shows as a hang: fail it instead. */
TestSuite(backend_pool, .timeout = 20.0);

#define MAX_N 20000
#define MAX_WORKERS 16

struct cover {
	atomic_int hits[MAX_N];
	atomic_int running[MAX_WORKERS];        /* chunks running per worker id */
	atomic_int bad;                         /* id out of range, clash, bad range */
	atomic_int chunks;
	atomic_int used[MAX_WORKERS];
	int64_t n, grain;
	int n_threads;
	int sleep_us;
};

static void cover_fn(void *arg, int64_t begin, int64_t end, int worker)
{
	struct cover *c = arg;
	if (worker < 0 || worker >= c->n_threads || begin < 0 || end > c->n ||
	    begin >= end) {
		atomic_fetch_add(&c->bad, 1);
		return;
	}
	if (atomic_fetch_add(&c->running[worker], 1) != 0)
		atomic_fetch_add(&c->bad, 1);
	/* Chunks are whole grains; only the last may be shorter. */
	if (begin % c->grain || ((end - begin) % c->grain && end != c->n))
		atomic_fetch_add(&c->bad, 1);
	atomic_fetch_add(&c->chunks, 1);
	atomic_store(&c->used[worker], 1);
	for (int64_t i = begin; i < end; i++)
		atomic_fetch_add(&c->hits[i], 1);
	if (c->sleep_us)
		usleep((useconds_t)c->sleep_us);
	atomic_fetch_sub(&c->running[worker], 1);
}

static void run_cover(const tf_backend *be, void *ctx, struct cover *c,
		      int64_t n, int64_t grain)
{
	memset(c, 0, sizeof(*c));
	c->n = n;
	c->grain = grain < 1 ? 1 : grain;
	c->n_threads = be->n_threads(ctx);
	be->parallel_for(ctx, n, grain, cover_fn, c);
	cr_assert_eq(atomic_load(&c->bad), 0, "n %lld grain %lld", (long long)n,
		     (long long)grain);
	for (int64_t i = 0; i < n; i++)
		cr_assert_eq(atomic_load(&c->hits[i]), 1, "n %lld grain %lld: index %lld ran %d times",
			     (long long)n, (long long)grain, (long long)i,
			     atomic_load(&c->hits[i]));
}

Test(backend_pool, every_index_exactly_once)
{
	static const int64_t ns[] = { 0, 1, 2, 3, 7, 64, 100, 1000, 4097, MAX_N };
	static const int64_t grains[] = { 0, 1, 3, 64, 1000, 1 << 20 };
	static const int threads[] = { 1, 2, 5 };
	struct cover *c = malloc(sizeof(*c));
	for (int t = 0; t < 3; t++) {
		cpu_fixture f;
		cpu_fixture_open(&f, threads[t]);
		cr_assert_eq(f.be[CPU_FAST]->n_threads(f.ctx[CPU_FAST]), threads[t]);
		for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			for (size_t g = 0; g < sizeof(grains) / sizeof(grains[0]); g++)
				run_cover(f.be[CPU_FAST], f.ctx[CPU_FAST], c, ns[i], grains[g]);
		cpu_fixture_close(&f);
	}
	free(c);
}

Test(backend_pool, reused_across_calls_and_workers_take_part)
{
	struct cover *c = malloc(sizeof(*c));
	cpu_fixture f;
	cpu_fixture_open(&f, 4);
	for (int round = 0; round < 2000; round++)
		run_cover(f.be[CPU_FAST], f.ctx[CPU_FAST], c, 64 + round % 50, 8);
	/* Slow chunks: the workers must pick some up, not just the caller. */
	memset(c, 0, sizeof(*c));
	c->n = 64;
	c->grain = 1;
	c->n_threads = 4;
	c->sleep_us = 2000;
	f.be[CPU_FAST]->parallel_for(f.ctx[CPU_FAST], 64, 1, cover_fn, c);
	int used = 0;
	for (int w = 0; w < 4; w++)
		used += atomic_load(&c->used[w]);
	cr_assert_gt(used, 1, "only the calling thread did any work");
	cr_assert_eq(atomic_load(&c->bad), 0);
	cpu_fixture_close(&f);
	free(c);
}

static double cpu_seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Between jobs the workers poll for a moment, then must sleep: an idle
 * pool burns no CPU. */
Test(backend_pool, idle_workers_sleep)
{
	struct cover *c = malloc(sizeof(*c));
	cpu_fixture f;
	cpu_fixture_open(&f, 4);
	run_cover(f.be[CPU_FAST], f.ctx[CPU_FAST], c, 1000, 1);
	usleep(100 * 1000);             /* past the polling */
	double t0 = cpu_seconds();
	usleep(300 * 1000);
	double busy = cpu_seconds() - t0;
	cr_assert_lt(busy, 0.03, "idle pool used %.3f s of CPU in 0.3 s", busy);
	run_cover(f.be[CPU_FAST], f.ctx[CPU_FAST], c, 1000, 1);   /* and wakes up */
	cpu_fixture_close(&f);
	free(c);
}

struct caller {
	const tf_backend *be;
	void *ctx;
	struct cover *c;
	int failures;
};

static void *caller_main(void *arg)
{
	struct caller *cl = arg;
	for (int round = 0; round < 200; round++) {
		struct cover *c = cl->c;
		int64_t n = 500 + round;
		memset(c, 0, sizeof(*c));
		c->n = n;
		c->grain = 16;
		c->n_threads = cl->be->n_threads(cl->ctx);
		cl->be->parallel_for(cl->ctx, n, 16, cover_fn, c);
		cl->failures += atomic_load(&c->bad) != 0;
		for (int64_t i = 0; i < n; i++)
			cl->failures += atomic_load(&c->hits[i]) != 1;
	}
	return NULL;
}

Test(backend_pool, callers_on_several_threads)
{
	enum { CALLERS = 4 };
	cpu_fixture f;
	pthread_t t[CALLERS];
	struct caller cl[CALLERS];
	cpu_fixture_open(&f, 3);
	for (int i = 0; i < CALLERS; i++) {
		cl[i] = (struct caller){ f.be[CPU_FAST], f.ctx[CPU_FAST],
					 malloc(sizeof(struct cover)), 0 };
		cr_assert_eq(pthread_create(&t[i], NULL, caller_main, &cl[i]), 0);
	}
	for (int i = 0; i < CALLERS; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(cl[i].failures, 0, "caller %d", i);
		free(cl[i].c);
	}
	cpu_fixture_close(&f);
}

struct nested {
	const tf_backend *be;
	void *ctx;
	atomic_int hits[32 * 32];
	atomic_int bad;
};

struct nested_row {
	struct nested *ns;
	int64_t row;
	int worker;
};

static void nested_inner(void *arg, int64_t begin, int64_t end, int worker)
{
	struct nested_row *nr = arg;
	if (worker != nr->worker)       /* inline, under the caller's own id */
		atomic_fetch_add(&nr->ns->bad, 1);
	for (int64_t i = begin; i < end; i++)
		atomic_fetch_add(&nr->ns->hits[nr->row * 32 + i], 1);
}

static void nested_outer(void *arg, int64_t begin, int64_t end, int worker)
{
	struct nested *ns = arg;
	for (int64_t r = begin; r < end; r++) {
		struct nested_row nr = { ns, r, worker };
		ns->be->parallel_for(ns->ctx, 32, 1, nested_inner, &nr);
	}
}

Test(backend_pool, nested_parallel_for_runs_inline)
{
	cpu_fixture f;
	struct nested *ns = calloc(1, sizeof(*ns));
	cpu_fixture_open(&f, 4);
	ns->be = f.be[CPU_FAST];
	ns->ctx = f.ctx[CPU_FAST];
	f.be[CPU_FAST]->parallel_for(f.ctx[CPU_FAST], 32, 1, nested_outer, ns);
	for (int i = 0; i < 32 * 32; i++)
		cr_assert_eq(atomic_load(&ns->hits[i]), 1, "index %d", i);
	cr_assert_eq(atomic_load(&ns->bad), 0);
	cpu_fixture_close(&f);
	free(ns);
}

Test(backend_pool, threads_key_is_read_through_the_host)
{
	/* The host reads and checks [runtime] threads (its range is the INI
	 * schema's, tests/core); a read that fails fails init with it. */
	const tf_backend *be = cpu_fixture_descriptor(0);
	tf_testhost *th = tf_testhost_new(NULL, 1);
	tf_testhost_set_conf(th, "runtime", "threads", "4x");
	void *ctx = (void *)1;
	cr_assert_eq(be->init(tf_testhost_host(th), &ctx), TF_ERR_INVALID);
	cr_assert_null(ctx);
	cr_assert(strstr(tf_testhost_last_error(th), "[runtime] threads"),
		  "error does not name the key: %s", tf_testhost_last_error(th));
	tf_testhost_set_conf(th, "runtime", "threads", "3");
	cr_assert_eq(be->init(tf_testhost_host(th), &ctx), TF_OK);
	cr_assert_eq(be->n_threads(ctx), 3);
	be->fini(ctx);
	tf_testhost_free(th);

	/* 0 and unset mean one per online CPU. */
	th = tf_testhost_new(NULL, 0);
	cr_assert_eq(be->init(tf_testhost_host(th), &ctx), TF_OK);
	cr_assert_eq(be->n_threads(ctx), (int)sysconf(_SC_NPROCESSORS_ONLN));
	be->fini(ctx);
	tf_testhost_set_conf(th, "runtime", "threads", "0");
	cr_assert_eq(be->init(tf_testhost_host(th), &ctx), TF_OK);
	cr_assert_eq(be->n_threads(ctx), (int)sysconf(_SC_NPROCESSORS_ONLN));
	be->fini(ctx);
	tf_testhost_free(th);
}

Test(backend_pool, probe_scores_fast_above_reference)
{
	const char *reason = NULL;
	tf_testhost *th = tf_testhost_new(NULL, 1);
	const tf_backend *fast = cpu_fixture_descriptor(0), *ref = cpu_fixture_descriptor(1);
	cr_assert_null(cpu_fixture_descriptor(2));
	cr_assert_eq(fast->hdr.kind, TF_KIND_BACKEND);
	cr_assert_eq(fast->hdr.abi_major, TF_ABI_MAJOR);
	cr_assert_eq(fast->hdr.struct_size, sizeof(tf_backend));
	cr_assert_gt(ref->hdr.probe(tf_testhost_host(th), &reason), 0);
	cr_assert_gt(fast->hdr.probe(tf_testhost_host(th), &reason),
		     ref->hdr.probe(tf_testhost_host(th), &reason));
	tf_testhost_free(th);
}

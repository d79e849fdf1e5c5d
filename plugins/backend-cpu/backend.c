/*
 * backend.c - the CPU backend: descriptors, lifecycle, memory and threads.
 *
 * Two descriptors share everything but their kernels: index 0 "cpu" runs
 * the build's vector kernels (AVX2, NEON, or the reference on a scalar
 * build), index 1 "cpu-ref" always runs the plain reference, so the whole
 * pipeline can be checked against it.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"
#include "tf/version.h"

/* More online CPUs than this is a typo, not a machine: [runtime] threads
 * allows no more (docs/ini.md). */
#define TF_CPU_MAX_THREADS 4096

/* [runtime] threads, which the host checked (0..4096): unset or 0 means
 * one per online CPU, as it does under a host too old to read it. */
static int cpu_threads(const tf_host *h, int *out)
{
	int64_t n = 0;

	if (TF_HAS_SLOT(h, tf_host, conf_int)) {
		int rc = h->conf_int(h, "runtime", "threads", 0, &n);
		if (rc)
			return rc;
	}
	if (n == 0) {
		n = sysconf(_SC_NPROCESSORS_ONLN);
		if (n < 1)
			n = 1;
		if (n > TF_CPU_MAX_THREADS)
			n = TF_CPU_MAX_THREADS;
	}
	*out = (int)n;
	return TF_OK;
}

static int cpu_init_with(const tf_host *h, const tf_cpu_kernels *k, void **ctx)
{
	int n_threads = 1, rc;
	tf_cpu *c;

	*ctx = NULL;
	rc = cpu_threads(h, &n_threads);
	if (rc)
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c)
		return h->error(h, TF_ERR_NOMEM, "backend-cpu: out of memory");
	c->host = h;
	c->k = k;
	rc = tf_pool_init(&c->pool, n_threads);
	if (rc) {
		free(c);
		return h->error(h, rc, "backend-cpu: cannot start %d worker threads",
				n_threads - 1);
	}
	h->log(h, TF_LOG_INFO, "backend-cpu", "%d threads, %s kernels",
	       n_threads, k->isa);
	*ctx = c;
	return TF_OK;
}

static int cpu_init_fast(const tf_host *h, void **ctx)
{
	return cpu_init_with(h, TF_CPU_FAST, ctx);
}

static int cpu_init_ref(const tf_host *h, void **ctx)
{
	return cpu_init_with(h, &tf_cpu_ref, ctx);
}

static void cpu_quiesce(void *ctx)
{
	tf_cpu *c = ctx;
	tf_pool_quiesce(c->pool);
}

static void cpu_fini(void *ctx)
{
	tf_cpu *c = ctx;
	if (!c)
		return;
	tf_pool_free(c->pool);
	free(c);
}

/* Sizes are rounded up to the alignment, as aligned_alloc requires; a
 * zero-byte request still gets a unique pointer. */
static void *cpu_alloc(void *ctx, size_t bytes)
{
	if (bytes > SIZE_MAX - 63)
		return NULL;
	return aligned_alloc(64, bytes ? (bytes + 63) & ~(size_t)63 : 64);
}

static void cpu_free(void *ctx, void *p)
{
	free(p);
}

/* Host memory is the backend's memory: moving it is a copy. */
static int cpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
	memmove(dst, src, bytes);
	return TF_OK;
}

static int cpu_sync(void *ctx)
{
	return TF_OK;                   /* every op returns when it is done */
}

static int cpu_n_threads(void *ctx)
{
	tf_cpu *c = ctx;
	return tf_pool_size(c->pool);
}

static void cpu_parallel_for(void *ctx, int64_t n, int64_t grain,
			     tf_range_fn fn, void *arg)
{
	tf_cpu *c = ctx;
	tf_pool_run(c->pool, n, grain, fn, arg);
}

/* A vector build refuses a CPU without its instructions; the reference
 * descriptor runs anywhere. */
static int cpu_probe_fast(const tf_host *h, const char **reason)
{
#if defined(TF_SIMD_AVX2)
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
	    !__builtin_cpu_supports("f16c")) {
		*reason = "CPU lacks AVX2, FMA or F16C (use cpu-ref)";
		return 0;
	}
#endif
	return 100;
}

static int cpu_probe_ref(const tf_host *h, const char **reason)
{
	return 10;
}

#define TF_CPU_BACKEND(name_, desc_, probe_, init_)                              \
	{                                                                        \
		.hdr = TF_PLUGIN_HEADER(tf_backend, TF_KIND_BACKEND, name_,      \
					TF_VERSION_STRING, desc_, probe_),       \
		.init = init_,                                           \
		.quiesce = cpu_quiesce,                                  \
		.fini = cpu_fini,                                        \
		.alloc = cpu_alloc,                                      \
		.free = cpu_free,                                        \
		.upload = cpu_copy,                                      \
		.download = cpu_copy,                                    \
		.sync = cpu_sync,                                        \
		.n_threads = cpu_n_threads,                              \
		.parallel_for = cpu_parallel_for,                        \
		.rmsnorm = tf_cpu_rmsnorm,                               \
		.add = tf_cpu_add,                                       \
		.swiglu = tf_cpu_swiglu,                                 \
		.rope = tf_cpu_rope,                                     \
		.softmax = tf_cpu_softmax,                               \
		.embed = tf_cpu_embed,                                   \
		.convert = tf_cpu_convert,                               \
		.argmax = tf_cpu_argmax,                                 \
	}

static const tf_backend cpu_backends[] = {
	TF_CPU_BACKEND("cpu", "host memory, thread pool, SIMD kernels",
		       cpu_probe_fast, cpu_init_fast),
	TF_CPU_BACKEND("cpu-ref", "host memory, thread pool, plain C reference kernels",
		       cpu_probe_ref, cpu_init_ref),
};

TF_EXPORT const tf_backend *tf_plugin_backend_v1(unsigned index)
{
	return index < sizeof(cpu_backends) / sizeof(cpu_backends[0]) ?
	       &cpu_backends[index] : NULL;
}

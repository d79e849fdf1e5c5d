/*
 * test_backend_cuda.c - backend-cuda.so loads without libcudart or a GPU
 * and says why it cannot run; on a machine with a GPU, its kernels match
 * the CPU reference ("cpu-ref") on random data, host and device embedding
 * tables and conversion sources alike, and op failures surface at sync();
 * steps recorded between graph_begin and graph_end give the bits of the
 * same calls launched, build a graph again only when their nodes change,
 * copy host sources aside, hold frees until the step has run and refuse
 * waits in between.
 *
 * Built a second time against the SIMT harness (tests/simt/), where
 * TF_CUDA_BACKEND names the harness build of the plugin and the "GPU"
 * tests run its kernels on the CPU.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_fixture.h"

#ifndef TF_CUDA_BACKEND
#define TF_CUDA_BACKEND TF_PLUGIN_DIR "/backend-cuda.so"
#define TF_CUDA_BACKEND_NAME "cuda"
#endif

static const tf_backend *cuda_descriptor(void)
{
	void *so = dlopen(TF_CUDA_BACKEND, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(so, "%s", dlerror());
	const tf_backend *(*entry)(unsigned) =
		(const tf_backend *(*)(unsigned))dlsym(so, "tf_plugin_backend_v1");
	cr_assert_not_null(entry);
	cr_assert_null(entry(1));
	return entry(0);
}

Test(backend_cuda, descriptor_and_probe)
{
	const tf_backend *be = cuda_descriptor();
	tf_testhost *th = tf_testhost_new(NULL, 1);
	const char *reason = NULL;

	cr_assert_str_eq(be->hdr.name, TF_CUDA_BACKEND_NAME);
	cr_assert_eq(be->hdr.kind, TF_KIND_BACKEND);
	cr_assert_eq(be->hdr.struct_size, sizeof(tf_backend));
	/* Host threading is not a device backend's business. */
	cr_assert_null(be->parallel_for);
	cr_assert_null(be->n_threads);
	cr_assert_not_null(be->rmsnorm);
	cr_assert_not_null(be->embed);
	/* The engine's ops, convert among them (pipeline.c check_backend). */
	cr_assert_not_null(be->convert);
	/* Device plugins queue on its stream (ABI 1.7). */
	cr_assert_not_null(be->stream);

	int score = be->hdr.probe(tf_testhost_host(th), &reason);
	if (score == 0) {
		cr_assert_str_eq(reason, "no CUDA device");
		void *ctx = (void *)1;
		cr_assert_eq(be->init(tf_testhost_host(th), &ctx), TF_ERR_DEVICE);
		cr_assert_null(ctx);
		cr_assert(strstr(tf_testhost_last_error(th), "no CUDA device"), "%s",
			  tf_testhost_last_error(th));
	}
	tf_testhost_free(th);
}

/* The rest needs a GPU. */
static cpu_fixture fx;
static const tf_backend *gpu;
static void *gctx;

static void gpu_setup(void)
{
	const char *reason;
	cpu_fixture_open(&fx, 2);
	gpu = cuda_descriptor();
	if (gpu->hdr.probe(fx.host, &reason) == 0)
		return;
	cr_assert_eq(gpu->init(fx.host, &gctx), TF_OK, "%s", tf_testhost_last_error(fx.th));
}

static void gpu_teardown(void)
{
	if (gctx)
		gpu->fini(gctx);
	gctx = NULL;
	cpu_fixture_close(&fx);
}

TestSuite(backend_cuda_gpu, .init = gpu_setup, .fini = gpu_teardown);

static void *to_device(const void *src, size_t bytes)
{
	void *d = gpu->alloc(gctx, bytes);
	cr_assert_not_null(d);
	cr_assert_eq(gpu->upload(gctx, d, src, bytes), TF_OK);
	return d;
}

static float *from_device(const void *d, size_t n)
{
	float *h = malloc(n * sizeof(float));
	cr_assert_eq(gpu->sync(gctx), TF_OK, "%s", tf_testhost_last_error(fx.th));
	cr_assert_eq(gpu->download(gctx, h, d, n * sizeof(float)), TF_OK);
	return h;
}

/* Fresh device buffer filled with NaN, so unwritten outputs show. */
static float *poisoned_device(size_t n)
{
	float *h = cpu_fixture_poisoned(&fx, n);
	float *d = to_device(h, n * sizeof(float));
	cpu_fixture_release(&fx, h);
	return d;
}

static float *random_floats(size_t n, float scale, uint64_t seed)
{
	float *x = malloc(n * sizeof(float));
	tf_test_fill_uniform(x, n, scale, &seed);
	return x;
}

Test(backend_cuda_gpu, rmsnorm_add_swiglu_match_reference)
{
	if (!gctx)
		cr_skip_test("no CUDA device");
	const tf_backend *ref = fx.be[CPU_REF];
	void *rctx = fx.ctx[CPU_REF];
	static const int64_t dims[] = { 1, 7, 255, 257, 4099 };
	for (int di = 0; di < 5; di++) {
		int64_t dim = dims[di], rows = 13, n = rows * dim;
		float *x = random_floats((size_t)n, 3.0f, 1 + di);
		float *w = random_floats((size_t)dim, 1.5f, 2 + di);
		float *u = random_floats((size_t)n, 9.0f, 3 + di);
		float *want = malloc((size_t)n * sizeof(float));
		float *dx = to_device(x, (size_t)n * 4), *dw = to_device(w, (size_t)dim * 4);
		float *du = to_device(u, (size_t)n * 4), *dy = poisoned_device((size_t)n);

		ref->rmsnorm(rctx, want, x, w, rows, dim, 1e-6f);
		gpu->rmsnorm(gctx, dy, dx, dw, rows, dim, 1e-6f);
		float *got = from_device(dy, (size_t)n);
		cr_assert_lt(tf_test_rel_err(got, want, (size_t)n, 1e-6), 1e-5, "rmsnorm dim %lld",
			     (long long)dim);
		free(got);

		ref->add(rctx, want, x, u, n);
		gpu->add(gctx, dy, dx, du, n);
		got = from_device(dy, (size_t)n);
		cr_assert_lt(tf_test_rel_err(got, want, (size_t)n, 1e-6), 1e-6, "add");
		free(got);

		ref->swiglu(rctx, want, u, x, n, 2.5f);
		gpu->swiglu(gctx, dy, du, dx, n, 2.5f);
		got = from_device(dy, (size_t)n);
		cr_assert_lt(tf_test_rel_err(got, want, (size_t)n, 1e-6), 1e-5, "swiglu");
		free(got);

		gpu->free(gctx, dx);
		gpu->free(gctx, dw);
		gpu->free(gctx, du);
		gpu->free(gctx, dy);
		free(x);
		free(w);
		free(u);
		free(want);
	}
}

Test(backend_cuda_gpu, embed_host_and_device_tables)
{
	if (!gctx)
		cr_skip_test("no CUDA device");
	static const tf_dtype types[] = { TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16 };
	const int64_t vocab = 500, dim = 129, n = 37;
	int32_t ids[37];
	for (int i = 0; i < n; i++)
		ids[i] = (int32_t)((i * 89 + 5) % vocab);
	float *src = random_floats((size_t)(vocab * dim), 4.0f, 9);
	void *table = malloc((size_t)(vocab * dim) * 4);
	float *want = malloc((size_t)(n * dim) * sizeof(float));
	for (int t = 0; t < 3; t++) {
		cr_assert_eq(fx.be[CPU_REF]->convert(fx.ctx[CPU_REF], table, types[t], src,
						     TF_DTYPE_F32, vocab * dim), TF_OK);
		fx.be[CPU_REF]->embed(fx.ctx[CPU_REF], want, table, types[t], dim, ids, n);
		size_t bytes = (size_t)(vocab * dim) * tf_dtype_size(types[t]);
		void *dtable = to_device(table, bytes);
		const void *where[2] = { table, dtable };
		for (int w = 0; w < 2; w++) {
			float *dy = poisoned_device((size_t)(n * dim));
			gpu->embed(gctx, dy, where[w], types[t], dim, ids, n);
			float *got = from_device(dy, (size_t)(n * dim));
			cr_assert(memcmp(got, want, (size_t)(n * dim) * sizeof(float)) == 0,
				  "%s table in %s memory", tf_dtype_name(types[t]),
				  w ? "device" : "host");
			free(got);
			gpu->free(gctx, dy);
		}
		gpu->free(gctx, dtable);
	}
	free(src);
	free(table);
	free(want);
}

Test(backend_cuda_gpu, op_failures_surface_at_sync)
{
	if (!gctx)
		cr_skip_test("no CUDA device");
	float table[8] = { 0 };
	int32_t ids[2] = { 0, 1 }, neg[2] = { 0, -1 };
	float *dy = poisoned_device(8);
	gpu->embed(gctx, dy, table, TF_DTYPE_I32, 4, ids, 2);
	cr_assert_eq(gpu->sync(gctx), TF_ERR_UNSUPPORTED);
	cr_assert(strstr(tf_testhost_last_error(fx.th), "embed"));
	gpu->embed(gctx, dy, table, TF_DTYPE_F32, 4, neg, 2);
	cr_assert_eq(gpu->sync(gctx), TF_ERR_INVALID);
	cr_assert_eq(gpu->sync(gctx), TF_OK, "the failure is reported once");
	gpu->free(gctx, dy);
}

/* Element i of an F32, F16 or BF16 array as float. */
static float elem_f32(const void *p, tf_dtype t, int64_t i)
{
	if (t == TF_DTYPE_F32)
		return ((const float *)p)[i];
	uint16_t h = ((const uint16_t *)p)[i];
	return t == TF_DTYPE_F16 ? tf_f16_to_f32(h) : tf_bf16_to_f32(h);
}

/* Random values with the edges planted among them: NaNs (a payload, both
 * signs), infinities, signed zeros, F16 subnormals and the halfway points
 * around them, F16's overflow edge, BF16 ties both ways, huge and tiny. */
static float *convert_inputs(int64_t n, uint64_t seed)
{
	static const uint32_t edge[] = {
		0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7f800000u, 0xff800000u, 0x00000000u,
		0x80000000u, 0x33000000u, 0x33000001u, 0x337fffffu, 0x38800000u, 0x387fe000u,
		0x387ff000u, 0x477fefffu, 0x477ff000u, 0x3f808000u, 0x3f818000u, 0xbf808000u,
		0x7f7fffffu, 0x00000001u, 0x3fffffffu,
	};
	float *x = random_floats((size_t)n, 40000.0f, seed);
	for (int64_t i = 0; i < n; i++) {
		if (i % 5 == 1)
			x[i] *= 1e-7f;          /* the F16 subnormal range */
		if (i % 3 == 2) {
			uint32_t u = edge[(size_t)(i / 3) % (sizeof(edge) / sizeof(edge[0]))];
			memcpy(&x[i], &u, 4);
		}
	}
	return x;
}

/* Every pair of F32, F16 and BF16 on ragged lengths, from device memory
 * and from host memory (the engine converts norm weights straight from
 * the mapped checkpoint), into poisoned device memory: the bits cpu-ref
 * gives, except that a NaN need only stay a NaN (payloads may differ). */
Test(backend_cuda_gpu, convert_matches_reference)
{
	if (!gctx)
		cr_skip_test("no CUDA device");
	static const tf_dtype types[] = { TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16 };
	static const int64_t lens[] = { 1, 7, 255, 257, 4099 };
	const tf_backend *ref = fx.be[CPU_REF];
	void *rctx = fx.ctx[CPU_REF];
	for (int li = 0; li < 5; li++) {
		int64_t n = lens[li];
		float *x = convert_inputs(n, 40 + li);
		void *src = malloc((size_t)n * 4), *want = malloc((size_t)n * 4);
		void *got = malloc((size_t)n * 4);
		for (int s = 0; s < 3; s++)
			for (int d = 0; d < 3; d++) {
				size_t sb = (size_t)n * tf_dtype_size(types[s]);
				size_t db = (size_t)n * tf_dtype_size(types[d]);
				cr_assert_eq(ref->convert(rctx, src, types[s], x, TF_DTYPE_F32, n), TF_OK);
				cr_assert_eq(ref->convert(rctx, want, types[d], src, types[s], n), TF_OK);
				void *dsrc = to_device(src, sb);
				for (int w = 0; w < 2; w++) {
					float *dy = poisoned_device((size_t)n);
					cr_assert_eq(gpu->convert(gctx, dy, types[d], w ? dsrc : src,
								  types[s], n), TF_OK, "%s",
						     tf_testhost_last_error(fx.th));
					if (!w)         /* a host source is the caller's again */
						memset(src, 0x5a, sb);
					cr_assert_eq(gpu->sync(gctx), TF_OK);
					cr_assert_eq(gpu->download(gctx, got, dy, db), TF_OK);
					for (int64_t i = 0; i < n; i++) {
						float g = elem_f32(got, types[d], i);
						float e = elem_f32(want, types[d], i);
						size_t z = tf_dtype_size(types[d]);
						bool same = isnan(e) ? isnan(g) :
							    !memcmp((char *)got + i * z, (char *)want + i * z, z);
						cr_assert(same, "%s -> %s, %lld elements from %s memory: "
							  "element %lld is %g, cpu-ref %g",
							  tf_dtype_name(types[s]), tf_dtype_name(types[d]),
							  (long long)n, w ? "device" : "host", (long long)i,
							  (double)g, (double)e);
					}
					if (!w)
						cr_assert_eq(ref->convert(rctx, src, types[s], x,
									  TF_DTYPE_F32, n), TF_OK);
					gpu->free(gctx, dy);
				}
				gpu->free(gctx, dsrc);
			}
		free(x);
		free(src);
		free(want);
		free(got);
	}
}

/* Refusals come back from the call, naming the types; nothing is queued. */
Test(backend_cuda_gpu, convert_refuses_bad_input)
{
	if (!gctx)
		cr_skip_test("no CUDA device");
	float *dy = poisoned_device(64);
	cr_assert_eq(gpu->convert(gctx, dy, TF_DTYPE_F32, dy + 8, TF_DTYPE_I32, 4),
		     TF_ERR_UNSUPPORTED);
	cr_assert(strstr(tf_testhost_last_error(fx.th), "I32"), "%s",
		  tf_testhost_last_error(fx.th));
	cr_assert_eq(gpu->convert(gctx, dy, TF_DTYPE_F16, dy + 8, TF_DTYPE_F32, -1),
		     TF_ERR_INVALID);
	/* F32 -> F16 over [0, 16) from [4, 20): one thread's element would be
	 * another's source. */
	cr_assert_eq(gpu->convert(gctx, dy, TF_DTYPE_F16, dy + 4, TF_DTYPE_F32, 16),
		     TF_ERR_INVALID);
	cr_assert(strstr(tf_testhost_last_error(fx.th), "overlap"), "%s",
		  tf_testhost_last_error(fx.th));
	cr_assert_eq(gpu->convert(gctx, dy, TF_DTYPE_F16, dy + 8, TF_DTYPE_F32, 0), TF_OK);
	cr_assert_eq(gpu->sync(gctx), TF_OK, "a refused convert leaves no failure behind");
	gpu->free(gctx, dy);
}

/* One step: x = embed(ids) (a host table), pos uploaded, y = rmsnorm(x) * w
 * (+ x once more when `extra`). */
static void graph_step(float *dx, float *dy, int32_t *dpos, const void *table, const float *dw,
		       int64_t dim, int32_t *ids, int32_t *pos, int n, bool extra)
{
	gpu->embed(gctx, dx, table, TF_DTYPE_BF16, dim, ids, n);
	cr_assert_eq(gpu->upload(gctx, dpos, pos, (size_t)n * sizeof(int32_t)), TF_OK);
	/* The sources may be reused on return: a recorded step copied them. */
	memset(ids, 0, (size_t)n * sizeof(int32_t));
	memset(pos, 0, (size_t)n * sizeof(int32_t));
	gpu->rmsnorm(gctx, dy, dx, dw, n, dim, 1e-6f);
	if (extra)
		gpu->add(gctx, dy, dy, dx, (int64_t)n * dim);
}

Test(backend_cuda_gpu, graph_steps_give_the_bits_of_launches)
{
	if (!gctx)
		cr_skip_test("no CUDA device");
	cr_assert(tf_backend_has_graph(gpu));
	enum { N = 3 };
	const int64_t vocab = 300, dim = 65;
	float *src = random_floats((size_t)(vocab * dim), 2.0f, 21);
	float *w = random_floats((size_t)dim, 1.0f, 22);
	void *table = malloc((size_t)(vocab * dim) * 2);
	cr_assert_eq(fx.be[CPU_REF]->convert(fx.ctx[CPU_REF], table, TF_DTYPE_BF16, src,
					     TF_DTYPE_F32, vocab * dim), TF_OK);
	float *dw = to_device(w, (size_t)dim * sizeof(float));
	float *dx = poisoned_device((size_t)(N * dim)), *dy = poisoned_device((size_t)(N * dim));
	int32_t *dpos = gpu->alloc(gctx, N * sizeof(int32_t));

	for (int step = 0; step < 4; step++) {
		const bool extra = step == 3;   /* other nodes: a new graph */
		int32_t ids[N], pos[N], want_pos[N];
		for (int i = 0; i < N; i++) {
			ids[i] = (int32_t)((step * 97 + i * 31 + 7) % vocab);
			want_pos[i] = pos[i] = step * N + i;
		}
		int32_t ids2[N], pos2[N];
		memcpy(ids2, ids, sizeof(ids));
		memcpy(pos2, pos, sizeof(pos));
		graph_step(dx, dy, dpos, table, dw, dim, ids2, pos2, N, extra);
		float *want = from_device(dy, (size_t)(N * dim));

		int reused = -1;
		float *gone = poisoned_device((size_t)(N * dim));
		cr_assert_eq(gpu->graph_begin(gctx), TF_OK, "%s", tf_testhost_last_error(fx.th));
		graph_step(dx, gone, dpos, table, dw, dim, ids, pos, N, extra);
		gpu->rmsnorm(gctx, dy, dx, dw, N, dim, 1e-6f);
		if (extra)
			gpu->add(gctx, dy, dy, dx, N * dim);
		gpu->free(gctx, gone);  /* the step writes it: held until the step has run */
		gpu->quiesce(gctx);                     /* returns: nothing recorded has run */
		float h;
		cr_assert_eq(gpu->download(gctx, &h, dy, sizeof(h)), TF_ERR_INTERNAL);
		cr_assert(strstr(tf_testhost_last_error(fx.th), "recorded as a graph"));
		cr_assert_eq(gpu->sync(gctx), TF_ERR_INTERNAL);
		cr_assert_eq(gpu->graph_end(gctx, 1, &reused), TF_OK, "%s",
			     tf_testhost_last_error(fx.th));
		cr_assert_eq(reused, step == 1 || step == 2, "step %d reused %d", step, reused);
		float *got = from_device(dy, (size_t)(N * dim));
		int32_t got_pos[N];
		cr_assert_eq(gpu->download(gctx, got_pos, dpos, sizeof(got_pos)), TF_OK);
		cr_assert(memcmp(got, want, (size_t)(N * dim) * sizeof(float)) == 0, "step %d", step);
		cr_assert(memcmp(got_pos, want_pos, sizeof(got_pos)) == 0, "step %d", step);
		free(want);
		free(got);
	}

	/* A dropped recording runs nothing. */
	float *dz = poisoned_device((size_t)dim);
	int reused = -1;
	cr_assert_eq(gpu->graph_begin(gctx), TF_OK);
	gpu->rmsnorm(gctx, dz, dx, dw, 1, dim, 1e-6f);
	cr_assert_eq(gpu->graph_end(gctx, 0, &reused), TF_OK);
	float *z = from_device(dz, (size_t)dim);
	for (int64_t i = 0; i < dim; i++)
		cr_assert(isnan(z[i]), "a dropped step wrote element %lld", (long long)i);
	free(z);
	gpu->free(gctx, dz);
	gpu->free(gctx, dx);
	gpu->free(gctx, dy);
	gpu->free(gctx, dw);
	gpu->free(gctx, dpos);
	free(src);
	free(w);
	free(table);
}

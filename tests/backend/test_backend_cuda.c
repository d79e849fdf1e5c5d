/*
 * test_backend_cuda.c - backend-cuda.so loads without libcudart or a GPU
 * and says why it cannot run; on a machine with a GPU, its kernels match
 * the CPU reference ("cpu-ref") on random data, host and device embedding
 * tables and conversion sources alike, rope's positions and frequencies
 * from host and device memory, softmax and argmax on rows with NaN, -inf
 * and ties; its sample slot picks core's sampler's tokens and declines
 * what it cannot reproduce; op failures surface at sync(); and steps
 * recorded between graph_begin and graph_end give the bits of the same
 * calls launched, build a graph again only when their nodes change, copy
 * host sources aside, hold frees until the step has run and refuse waits
 * in between; a step in parts around a host wait keeps a graph for each
 * part's place, and two kinds of step share a place.
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
#include "engine/sampler.h"

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
	/* Every op, and sampling where the logits are (ABI 1.9). */
	cr_assert_not_null(be->rope);
	cr_assert_not_null(be->softmax);
	cr_assert_not_null(be->argmax);
	cr_assert(tf_backend_can_sample(be));

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

/* RoPE over rows with padding past their heads, a rot_dim short of the
 * head, YaRN's factor, positions to 2^20; positions and frequencies from
 * host memory (as mla.c passes them) and device memory (as mla-cuda).
 * Everything outside the rotated pairs keeps its bits. */
Test(backend_cuda_gpu, rope_matches_reference)
{
	if (!gctx)
		cr_skip_test("no CUDA device");
	const tf_backend *ref = fx.be[CPU_REF];
	static const struct { int64_t rows, heads, head, rot, pad; } cases[] = {
		{ 1, 1, 64, 64, 0 }, { 5, 3, 24, 16, 7 }, { 33, 4, 40, 40, 1 }, { 2, 11, 6, 2, 3 },
	};
	double worst = 0;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (int mode = 0; mode < 4; mode++) {
			int interleaved = mode & 1, dev_par = mode >> 1;
			int64_t rs = cases[c].heads * cases[c].head + cases[c].pad;
			size_t n = (size_t)(cases[c].rows * rs), pairs = (size_t)cases[c].rot / 2;
			float *x = random_floats(n, 3.0f, 40 + c), *want = malloc(n * sizeof(float));
			float *freq = malloc(pairs * sizeof(float));
			int32_t *pos = malloc((size_t)cases[c].rows * sizeof(int32_t));
			for (size_t j = 0; j < pairs; j++)
				freq[j] = powf(10000.0f, -2.0f * (float)j / (float)cases[c].rot);
			for (int64_t r = 0; r < cases[c].rows; r++)
				pos[r] = (int32_t)((r * 7919 + c * 131071) % (1 << 20));
			memcpy(want, x, n * sizeof(float));
			ref->rope(fx.ctx[CPU_REF], want, cases[c].rows, cases[c].heads, rs,
				  cases[c].head, cases[c].rot, pos, freq, 0.7f, interleaved);
			float *dx = to_device(x, n * sizeof(float));
			void *dpos = dev_par ? to_device(pos, (size_t)cases[c].rows * 4) : pos;
			void *dfreq = dev_par ? to_device(freq, pairs * 4) : freq;
			gpu->rope(gctx, dx, cases[c].rows, cases[c].heads, rs, cases[c].head,
				  cases[c].rot, dpos, dfreq, 0.7f, interleaved);
			float *got = from_device(dx, n);
			worst = fmax(worst, tf_test_rel_err(got, want, n, 1e-6));
			cr_assert_lt(tf_test_rel_err(got, want, n, 1e-6), 1e-5,
				     "rope case %zu, %s pairs, parameters in %s memory", c,
				     interleaved ? "interleaved" : "split", dev_par ? "device" : "host");
			for (size_t i = 0; i < n; i++)
				if (want[i] == x[i])    /* not rotated (or a fixed point) */
					cr_assert_eq(got[i], x[i], "rope case %zu: element %zu moved",
						     c, i);
			if (dev_par) {
				gpu->free(gctx, dpos);
				gpu->free(gctx, dfreq);
			}
			gpu->free(gctx, dx);
			free(got);
			free(x);
			free(want);
			free(freq);
			free(pos);
		}
	cr_log_info("rope: largest error %g against cpu-ref", worst);
}

/* Rows of random values, row r of kind r % 6: plain, one NaN, all -inf,
 * some -inf, a huge spread, all equal. */
static float *special_rows(int64_t rows, int64_t n, uint64_t seed)
{
	float *x = random_floats((size_t)(rows * n), 8.0f, seed);
	for (int64_t r = 0; r < rows; r++) {
		float *row = x + r * n;
		for (int64_t i = 0; i < n; i++)
			switch (r % 6) {
			case 1: row[i] = i == n / 2 ? NAN : row[i]; break;
			case 2: row[i] = -INFINITY; break;
			case 3: row[i] = i % 3 ? row[i] : -INFINITY; break;
			case 4: row[i] *= 1e4f; break;
			case 5: row[i] = 1.5f; break;
			}
	}
	return x;
}

/* softmax: NaN exactly where cpu-ref has NaN (a row with one, or of
 * -inf); the rest against softmax in float64 within 1e-6 of the row's
 * largest probability (cpu-ref's own sequential float sum drifts further
 * on long rows: 6e-5 at 70001). */
Test(backend_cuda_gpu, softmax_matches_reference)
{
	if (!gctx)
		cr_skip_test("no CUDA device");
	static const int64_t ns[] = { 1, 8, 255, 257, 4099, 70001 };
	double worst_all = 0;
	for (int ni = 0; ni < 6; ni++) {
		int64_t n = ns[ni], rows = ni == 5 ? 6 : 13;
		size_t total = (size_t)(rows * n);
		float *x = special_rows(rows, n, 50 + ni), *want = malloc(total * sizeof(float));
		memcpy(want, x, total * sizeof(float));
		fx.be[CPU_REF]->softmax(fx.ctx[CPU_REF], want, rows, n);
		float *dx = to_device(x, total * sizeof(float));
		gpu->softmax(gctx, dx, rows, n);
		float *got = from_device(dx, total);
		for (int64_t r = 0; r < rows; r++) {
			const float *g = got + r * n, *w = want + r * n, *xr = x + r * n;
			double mx = -INFINITY, z = 0, worst = 0;
			for (int64_t i = 0; i < n; i++)
				mx = fmax(mx, xr[i]);
			for (int64_t i = 0; i < n; i++)
				z += exp((double)xr[i] - mx);
			for (int64_t i = 0; i < n; i++) {
				cr_assert_eq(isnan(g[i]), isnan(w[i]), "softmax n %lld row %lld [%lld]: "
					     "%g, cpu-ref %g", (long long)n, (long long)r, (long long)i,
					     (double)g[i], (double)w[i]);
				if (!isnan(w[i]))
					worst = fmax(worst, fabs(g[i] - exp((double)xr[i] - mx) / z));
			}
			worst = worst > 0 ? worst * z : 0;      /* over the top, 1 / z */
			cr_assert_leq(worst, 1e-6, "softmax n %lld row %lld: error %g",
				      (long long)n, (long long)r, worst);
			worst_all = fmax(worst_all, worst);
		}
		gpu->free(gctx, dx);
		free(got);
		free(x);
		free(want);
	}
	cr_log_info("softmax: largest error %g of the row's top probability", worst_all);
}

/* argmax against cpu-ref exactly: the same special rows, the row's largest
 * value copied to a later and an earlier index (ties: the lower wins), a
 * row of NaN (0), NaN before -inf; into a poisoned output. */
Test(backend_cuda_gpu, argmax_matches_reference)
{
	if (!gctx)
		cr_skip_test("no CUDA device");
	static const int64_t ns[] = { 1, 7, 256, 4099, 70001 };
	for (int ni = 0; ni < 5; ni++) {
		int64_t n = ns[ni], rows = 14;
		float *x = special_rows(rows, n, 60 + ni);
		for (int64_t r = 0; r < rows; r++) {
			float *row = x + r * n;
			int64_t best = 0;
			for (int64_t i = 1; i < n; i++)
				best = row[i] > row[best] ? i : best;
			if (r % 6 == 0 && n > 2) {      /* ties after and before */
				row[(best + n / 2) % n] = row[best];
				row[best / 2] = row[best];
			}
			if (r == 12)
				for (int64_t i = 0; i < n; i++)
					row[i] = NAN;
			if (r == 13)
				for (int64_t i = 0; i < n; i++)
					row[i] = i < n / 2 ? NAN : -INFINITY;
		}
		int32_t want[14], *got = malloc(sizeof(want));
		fx.be[CPU_REF]->argmax(fx.ctx[CPU_REF], want, x, rows, n);
		float *dx = to_device(x, (size_t)(rows * n) * sizeof(float));
		int32_t *dout = (int32_t *)poisoned_device((size_t)rows);
		gpu->argmax(gctx, dout, dx, rows, n);
		cr_assert_eq(gpu->sync(gctx), TF_OK);
		cr_assert_eq(gpu->download(gctx, got, dout, sizeof(want)), TF_OK);
		for (int64_t r = 0; r < rows; r++)
			cr_assert_eq(got[r], want[r], "argmax n %lld row %lld: %d, cpu-ref %d",
				     (long long)n, (long long)r, got[r], want[r]);
		gpu->free(gctx, dx);
		gpu->free(gctx, dout);
		free(got);
		free(x);
	}
}

/* The sample slot against core's sampler (tf_sampler_sample, the engine's
 * host path) on rows ld floats apart in device memory, the first V of
 * each sampled, each at its own (seq, pos), into poisoned host tokens. */
static void check_slot(const tf_sampler_params *sp, int rows, int V, int ld, uint64_t seed)
{
	float *l = special_rows(rows, ld, seed);
	uint64_t seq[8], pos[8];
	int32_t tok[8];
	tf_sampler smp;
	cr_assert_leq(rows, 8);
	for (int r = 0; r < rows; r++) {
		for (int i = V; i < ld; i++)    /* lanes past V: never picked */
			l[(size_t)r * ld + i] = 1e30f;
		seq[r] = (uint64_t)r % 2;
		pos[r] = 7 + (uint64_t)r * 5;
		tok[r] = 0x7f7f7f7f;
	}
	float *dl = to_device(l, (size_t)rows * ld * sizeof(float));
	cr_assert_eq(gpu->sample(gctx, sp, dl, rows, V, ld, seq, pos, tok), TF_OK, "%s",
		     tf_testhost_last_error(fx.th));
	cr_assert_eq(tf_sampler_init(&smp, sp, V), TF_OK);
	for (int r = 0; r < rows; r++) {
		int32_t want = -1;
		int rc = tf_sampler_sample(&smp, l + (size_t)r * ld, NULL, 0, seq[r], pos[r], &want);
		/* A row of -inf: the sampler's error, the slot's -1. */
		cr_assert_eq(tok[r], rc == TF_OK ? want : -1,
			     "t %g top_k %d V %d ld %d row %d: token %d, sampler %d (%d)",
			     (double)sp->temperature, sp->top_k, V, ld, r, tok[r], want, rc);
	}
	tf_sampler_free(&smp);
	gpu->free(gctx, dl);
	free(l);
}

Test(backend_cuda_gpu, sample_slot_picks_the_samplers_tokens)
{
	if (!gctx)
		cr_skip_test("no CUDA device");
	tf_sampler_params p;
	tf_sampler_params_default(&p);
	check_slot(&p, 6, 300, 300, 71);                /* greedy: row 2 all -inf */
	check_slot(&p, 4, 1000, 1040, 72);
	p.temperature = 0.8f;
	p.top_k = 40;
	p.top_p = 0.9f;
	p.seed = 5;
	check_slot(&p, 8, 3000, 3000, 73);
	p.top_k = 64;
	p.top_p = 1;
	p.min_p = 0.05f;
	check_slot(&p, 3, 5000, 5003, 74);
}

Test(backend_cuda_gpu, sample_slot_declines_what_it_cannot_reproduce)
{
	if (!gctx)
		cr_skip_test("no CUDA device");
	tf_sampler_params p;
	uint64_t seq = 0, pos = 0;
	int32_t tok = 12345;
	float *dl = poisoned_device(100);
	tf_sampler_params_default(&p);
	p.repeat_penalty = 1.1f;        /* needs the history */
	cr_assert_eq(gpu->sample(gctx, &p, dl, 1, 100, 100, &seq, &pos, &tok), TF_ERR_UNSUPPORTED);
	p.repeat_penalty = 1;
	p.presence_penalty = 0.5f;
	cr_assert_eq(gpu->sample(gctx, &p, dl, 1, 100, 100, &seq, &pos, &tok), TF_ERR_UNSUPPORTED);
	p.presence_penalty = 0;
	p.temperature = 1;              /* top-k off: the whole vocabulary */
	cr_assert_eq(gpu->sample(gctx, &p, dl, 1, 100, 100, &seq, &pos, &tok), TF_ERR_UNSUPPORTED);
	p.top_k = 65;
	cr_assert_eq(gpu->sample(gctx, &p, dl, 1, 100, 100, &seq, &pos, &tok), TF_ERR_UNSUPPORTED);
	p.top_k = 40;                   /* the whole vocabulary: summed in token order */
	cr_assert_eq(gpu->sample(gctx, &p, dl, 1, 40, 100, &seq, &pos, &tok), TF_ERR_UNSUPPORTED);
	cr_assert_eq(tok, 12345, "nothing written");
	p.top_k = 4;                    /* rows closer than the vocabulary: a caller's bug */
	cr_assert_eq(gpu->sample(gctx, &p, dl, 1, 100, 50, &seq, &pos, &tok), TF_ERR_INVALID);
	cr_assert(strstr(tf_testhost_last_error(fx.th), "sample"));
	cr_assert_eq(gpu->sync(gctx), TF_OK, "declining records nothing");
	gpu->free(gctx, dl);
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

/* What the graph tests' steps read and write: a random BF16 embedding
 * table [vocab, dim] on the host, random norm weights w, and x and y
 * [rows, dim] on the device, NaN until written. */
typedef struct graph_io {
	void *table;
	float *dw, *dx, *dy;
} graph_io;

static graph_io graph_io_open(int64_t vocab, int64_t dim, int64_t rows, uint64_t seed)
{
	graph_io g;
	float *src = random_floats((size_t)(vocab * dim), 2.0f, seed);
	float *w = random_floats((size_t)dim, 1.0f, seed + 1);
	g.table = malloc((size_t)(vocab * dim) * 2);
	cr_assert_eq(fx.be[CPU_REF]->convert(fx.ctx[CPU_REF], g.table, TF_DTYPE_BF16, src,
					     TF_DTYPE_F32, vocab * dim), TF_OK);
	g.dw = to_device(w, (size_t)dim * sizeof(float));
	g.dx = poisoned_device((size_t)(rows * dim));
	g.dy = poisoned_device((size_t)(rows * dim));
	free(src);
	free(w);
	return g;
}

static void graph_io_close(graph_io *g)
{
	gpu->free(gctx, g->dx);
	gpu->free(gctx, g->dy);
	gpu->free(gctx, g->dw);
	free(g->table);
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
	graph_io io = graph_io_open(vocab, dim, N, 21);
	const void *table = io.table;
	float *dw = io.dw, *dx = io.dx, *dy = io.dy;
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
	gpu->free(gctx, dpos);
	graph_io_close(&io);
}

/* A step in two parts around a host wait, as tensor parallelism's
 * all-reduce makes them: x = embed(ids), y = rmsnorm(x) * w; y downloaded
 * and halved on the host; uploaded, y += x.  `other` is another kind of
 * step (one op more in each part).  `record`: each part as a graph, its
 * graph_end's reuse in reused[part]. */
static void parts_step(const graph_io *io, int64_t dim, const int32_t *ids, int n, bool other,
		       bool record, int reused[2])
{
	float *dx = io->dx, *dy = io->dy;
	int32_t *src = malloc((size_t)n * sizeof(int32_t));
	float *h = malloc((size_t)(n * dim) * sizeof(float));
	memcpy(src, ids, (size_t)n * sizeof(int32_t));
	if (record)
		cr_assert_eq(gpu->graph_begin(gctx), TF_OK, "%s", tf_testhost_last_error(fx.th));
	gpu->embed(gctx, dx, io->table, TF_DTYPE_BF16, dim, src, n);
	memset(src, 0, (size_t)n * sizeof(int32_t));    /* reusable on return */
	gpu->rmsnorm(gctx, dy, dx, io->dw, n, dim, 1e-6f);
	if (other)
		gpu->add(gctx, dy, dy, dx, (int64_t)n * dim);
	if (record)
		cr_assert_eq(gpu->graph_end(gctx, TF_GRAPH_PART, &reused[0]), TF_OK, "%s",
			     tf_testhost_last_error(fx.th));
	cr_assert_eq(gpu->download(gctx, h, dy, (size_t)(n * dim) * sizeof(float)), TF_OK);
	for (int64_t i = 0; i < n * dim; i++)
		h[i] *= 0.5f;
	if (record)
		cr_assert_eq(gpu->graph_begin(gctx), TF_OK, "%s", tf_testhost_last_error(fx.th));
	cr_assert_eq(gpu->upload(gctx, dy, h, (size_t)(n * dim) * sizeof(float)), TF_OK);
	memset(h, 0xFF, (size_t)(n * dim) * sizeof(float));     /* reusable on return */
	gpu->add(gctx, dy, dy, dx, (int64_t)n * dim);
	if (other)
		gpu->add(gctx, dy, dy, dx, (int64_t)n * dim);
	if (record)
		cr_assert_eq(gpu->graph_end(gctx, TF_GRAPH_RUN, &reused[1]), TF_OK, "%s",
			     tf_testhost_last_error(fx.th));
	free(h);
	free(src);
}

Test(backend_cuda_gpu, graph_parts_keep_a_graph_per_place)
{
	if (!gctx)
		cr_skip_test("no CUDA device");
	enum { N = 2 };
	const int64_t vocab = 200, dim = 37;
	graph_io io = graph_io_open(vocab, dim, N, 31);

	/* Kinds A A B A B, then A again after an A whose second part was
	 * dropped (the next step starts at the first place again): each part
	 * builds once per kind at its place and replays after. */
	static const struct { bool other, drop; int reused[2]; } steps[] = {
		{ false, false, { 0, 0 } }, { false, false, { 1, 1 } }, { true, false, { 0, 0 } },
		{ false, false, { 1, 1 } }, { true, false, { 1, 1 } }, { false, true, { 0, 0 } },
		{ false, false, { 1, 1 } },
	};
	for (int k = 0; k < (int)(sizeof(steps) / sizeof(steps[0])); k++) {
		int32_t ids[N];
		for (int i = 0; i < N; i++)
			ids[i] = (int32_t)((k * 53 + i * 17 + 3) % vocab);
		if (steps[k].drop) {
			int reused[2] = { -1, 0 };
			cr_assert_eq(gpu->graph_begin(gctx), TF_OK);
			gpu->embed(gctx, io.dx, io.table, TF_DTYPE_BF16, dim, ids, N);
			cr_assert_eq(gpu->graph_end(gctx, TF_GRAPH_PART, &reused[0]), TF_OK);
			cr_assert_eq(reused[0], 0, "step %d: an embed alone is a new graph", k);
			cr_assert_eq(gpu->graph_begin(gctx), TF_OK);
			gpu->add(gctx, io.dy, io.dy, io.dx, N * dim);
			cr_assert_eq(gpu->graph_end(gctx, TF_GRAPH_DROP, &reused[1]), TF_OK);
			continue;
		}
		parts_step(&io, dim, ids, N, steps[k].other, false, NULL);
		float *want = from_device(io.dy, (size_t)(N * dim));
		int reused[2] = { -1, -1 };
		float *nan = cpu_fixture_poisoned(&fx, (size_t)(N * dim));
		cr_assert_eq(gpu->upload(gctx, io.dy, nan, (size_t)(N * dim) * sizeof(float)), TF_OK);
		cpu_fixture_release(&fx, nan);
		parts_step(&io, dim, ids, N, steps[k].other, true, reused);
		float *got = from_device(io.dy, (size_t)(N * dim));
		cr_assert(memcmp(got, want, (size_t)(N * dim) * sizeof(float)) == 0, "step %d", k);
		cr_assert(reused[0] == steps[k].reused[0] && reused[1] == steps[k].reused[1],
			  "step %d reused %d %d", k, reused[0], reused[1]);
		free(want);
		free(got);
	}
	graph_io_close(&io);
}

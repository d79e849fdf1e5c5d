/*
 * test_exl3_lin.c - the "exl3" linear of exl3.so end to end: random
 * trellises for every K and codebook, forward and dequant against the
 * spec's formula W = diag(suh)·H·Ŵ·H·diag(svh) evaluated in float64 with an
 * explicit Hadamard matrix, logical sizes below the padded ones, and the
 * refusal of every malformed tensor set.  The forward runs the fused
 * kernel, whose weights skip the final fp16 rounding (half an ulp, 2^-11
 * relative), hence the 1e-3 tolerance; dequant is the bit-exact path.
 * "exl3-int" (integer activations for MUL1 products, ~5e-5 more error,
 * matmul_int.h) is held to the same bound and refuses the same inputs.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support/testhost.h"
#include "codebook.h"
#include "trellis.h"

struct lin_case {
	int64_t k, n, in, out;
	int K;
	tf_exl3_cb cb;
	int bias;
};

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 16;
}

/* Add a random EXL3 layer "m.proj" and return its float64 W [k][n]. */
static double *add_layer(tf_testhost *th, const struct lin_case *c, uint64_t *seed,
			 float *bias)
{
	int64_t k = c->k, n = c->n, nt = (k / 16) * (n / 16) * 16 * c->K;
	int64_t ts[3] = { k / 16, n / 16, 16 * c->K }, ks[1] = { k }, ns[1] = { n };
	uint16_t *tr = malloc(sizeof(uint16_t) * nt);
	float *suh = malloc(sizeof(float) * k), *svh = malloc(sizeof(float) * n);
	double *what = malloc(sizeof(double) * k * n), *w = calloc(k * n, sizeof(double));
	double *tmp = calloc(k * n, sizeof(double));
	uint16_t tile[TF_EXL3_TILE_N];

	for (int64_t i = 0; i < nt; i++)
		tr[i] = (uint16_t)lcg(seed);
	for (int64_t i = 0; i < k; i++)
		suh[i] = (lcg(seed) & 1 ? -1.0f : 1.0f) * (0.5f + (float)(lcg(seed) % 1000) / 1000.0f);
	for (int64_t i = 0; i < n; i++)
		svh[i] = (lcg(seed) & 1 ? -1.0f : 1.0f) * (0.5f + (float)(lcg(seed) % 1000) / 1000.0f);
	tf_testhost_add_tensor(th, "m.proj.trellis", TF_DTYPE_I16, 3, ts, tr);
	tf_testhost_add_f32(th, "m.proj.suh", TF_DTYPE_F16, 1, ks, suh);
	tf_testhost_add_f32(th, "m.proj.svh", TF_DTYPE_F16, 1, ns, svh);
	if (c->bias)
		tf_testhost_add_f32(th, "m.proj.bias", TF_DTYPE_F16, 1, ns, bias);
	if (c->cb != TF_EXL3_CB_3INST) {
		int32_t marker = c->cb == TF_EXL3_CB_MCG ? TF_EXL3_MCG_MARKER : TF_EXL3_MUL1_MARKER;
		tf_testhost_add_tensor(th, c->cb == TF_EXL3_CB_MCG ? "m.proj.mcg" : "m.proj.mul1",
				       TF_DTYPE_I32, 0, NULL, &marker);
	}

	for (int64_t i = 0; i < k / 16; i++)
		for (int64_t j = 0; j < n / 16; j++) {
			tf_exl3_tile_decode_ref(tr + (i * (n / 16) + j) * 16 * c->K, c->K, c->cb, tile);
			for (int e = 0; e < TF_EXL3_TILE_N; e++)
				what[(16 * i + e / 16) * n + 16 * j + e % 16] = tf_f16_to_f32(tile[e]);
		}
	/* tmp = Hbd · Ŵ, then w = tmp · Hbd, with the stored (fp16) scales. */
	for (int64_t i = 0; i < k; i++)
		for (int64_t q = 0; q < 128; q++) {
			int64_t src = (i / 128) * 128 + q;
			double h = (__builtin_popcountll((uint64_t)(i % 128) & (uint64_t)q) & 1 ? -1 : 1) / sqrt(128.0);
			for (int64_t j = 0; j < n; j++)
				tmp[i * n + j] += h * what[src * n + j];
		}
	for (int64_t i = 0; i < k; i++)
		for (int64_t j = 0; j < n; j++) {
			double s = 0;
			for (int64_t q = 0; q < 128; q++) {
				int64_t src = (j / 128) * 128 + q;
				s += tmp[i * n + src] * (__builtin_popcountll((uint64_t)(j % 128) & (uint64_t)q) & 1 ? -1 : 1);
			}
			w[i * n + j] = s / sqrt(128.0) * tf_f16_to_f32(tf_f32_to_f16(suh[i])) *
				       tf_f16_to_f32(tf_f32_to_f16(svh[j]));
		}
	free(tr); free(suh); free(svh); free(what); free(tmp);
	return w;
}

/* exl3.so's descriptor `name` (the testhost opens by match score only). */
static const tf_plugin_quant *quant_named(const char *name)
{
	void *so = dlopen(TF_PLUGIN_DIR "/exl3.so", RTLD_NOW | RTLD_LOCAL);
	cr_assert(so, "%s", dlerror());
	const tf_plugin_quant *(*entry)(unsigned) =
		(const tf_plugin_quant *(*)(unsigned))dlsym(so, "tf_plugin_quant_v1");
	cr_assert(entry);
	for (unsigned i = 0; entry(i); i++)
		if (!strcmp(entry(i)->hdr.name, name))
			return entry(i);        /* the testhost keeps exl3.so loaded */
	cr_assert_fail("exl3.so has no quant descriptor \"%s\"", name);
	return NULL;
}

/* Open m.proj through descriptor `name`, as [plugins] quant would. */
static int open_as(const tf_host *h, const char *name, int64_t in, int64_t out, tf_lin *lin)
{
	if (!strcmp(name, "exl3-int"))          /* the default */
		return h->lin_open(h, "m.proj", in, out, lin);
	lin->ops = quant_named(name);
	cr_assert_gt(lin->ops->match(h, "m.proj"), 0);
	cr_assert_lt(lin->ops->match(h, "m.proj"), quant_named("exl3-int")->match(h, "m.proj"));
	return lin->ops->open(h, "m.proj", in, out, &lin->impl, &lin->info);
}

/* The slice products on every whole 128-output slice against float64 W
 * (no bias), into NaN-poisoned outputs; a slice past `out` is refused. */
static void check_slices(const tf_lin *lin, const struct lin_case *c, const double *w,
			 const float *x, uint64_t *seed)
{
	float y[128], u[128], *z = malloc(sizeof(float) * c->in), ry[128];
	float *rz = malloc(sizeof(float) * c->in);

	cr_assert(tf_lin_has_slices(lin, 128));
	cr_assert(!tf_lin_has_slices(lin, 64));
	for (int64_t c0 = 0; c0 + 128 <= c->out; c0 += 128) {
		tf_test_fill_uniform(u, 128, 1.0f, seed);
		for (int o = 0; o < 128; o++) {
			double s = 0;
			for (int64_t i = 0; i < c->in; i++)
				s += (double)x[i] * w[i * c->n + c0 + o];
			ry[o] = (float)s;
			y[o] = NAN;
		}
		for (int64_t i = 0; i < c->in; i++) {
			double s = 0;
			for (int o = 0; o < 128; o++)
				s += (double)u[o] * w[i * c->n + c0 + o];
			rz[i] = (float)s;
			z[i] = NAN;
		}
		cr_assert_eq(lin->ops->forward_slice(lin->impl, x, c0, c0 + 128, y), TF_OK);
		cr_assert_eq(lin->ops->backward_slice(lin->impl, u, c0, c0 + 128, z), TF_OK);
		double ey = tf_test_rel_err(y, ry, 128, 1e-3), ez = tf_test_rel_err(z, rz, c->in, 1e-3);
		cr_expect_lt(ey, 1e-3, "forward_slice %lld K=%d %s: rel err %g", (long long)c0, c->K,
			     tf_exl3_cb_name(c->cb), ey);
		cr_expect_lt(ez, 1e-3, "backward_slice %lld K=%d %s: rel err %g", (long long)c0, c->K,
			     tf_exl3_cb_name(c->cb), ez);
	}
	const int64_t past = (c->out + 127) / 128 * 128;
	cr_expect_eq(lin->ops->forward_slice(lin->impl, x, past, past + 128, y), TF_ERR_INVALID);
	cr_expect_eq(lin->ops->backward_slice(lin->impl, u, 64, 192, z), TF_ERR_INVALID);
	free(z);
	free(rz);
}

static void check_lin_as(const char *name, const struct lin_case *c, int64_t rows, int threads,
			 uint64_t seed)
{
	tf_testhost *th = tf_testhost_new(NULL, threads);
	const tf_host *h = tf_testhost_host(th);
	float *bias = malloc(sizeof(float) * c->n);
	tf_test_fill_uniform(bias, c->n, 1.0f, &seed);
	double *w = add_layer(th, c, &seed, bias);
	float *x = malloc(sizeof(float) * rows * c->in), *y = malloc(sizeof(float) * rows * c->out);
	float *ref = malloc(sizeof(float) * rows * c->out);
	float *wd = malloc(sizeof(float) * c->in * c->out), *wref = malloc(sizeof(float) * c->in * c->out);
	tf_lin lin = { 0 };

	tf_test_fill_uniform(x, rows * c->in, 1.0f, &seed);
	cr_assert_eq(open_as(h, name, c->in, c->out, &lin), TF_OK, "%s",
		     tf_testhost_last_error(th));
	cr_assert_str_eq(lin.ops->hdr.name, name);
	cr_expect_eq(lin.info.bits, c->K);
	/* The layout is the only copy read from here on: the host's trellis
	 * now reads 0xFF (tf_testhost_released), so the checks below also
	 * catch any read of it. */
	cr_expect_eq(tf_testhost_released(th, "m.proj.trellis"), 1, "%s: trellis not released",
		     name);
	for (int64_t r = 0; r < rows; r++)
		for (int64_t o = 0; o < c->out; o++) {
			double s = c->bias ? tf_f16_to_f32(tf_f32_to_f16(bias[o])) : 0.0;
			for (int64_t i = 0; i < c->in; i++)
				s += (double)x[r * c->in + i] * w[i * c->n + o];
			ref[r * c->out + o] = (float)s;
		}
	for (int64_t i = 0; i < rows * c->out; i++)
		y[i] = NAN;
	cr_assert_eq(tf_lin_forward(&lin, x, rows, y), TF_OK);
	double err = tf_test_rel_err(y, ref, rows * c->out, 1e-3);
	cr_expect_lt(err, 1e-3, "%s K=%d %s %lldx%lld (in %lld out %lld) rows %lld: rel err %g",
		     name, c->K, tf_exl3_cb_name(c->cb), (long long)c->k, (long long)c->n,
		     (long long)c->in, (long long)c->out, (long long)rows, err);

	for (int64_t o = 0; o < c->out; o++)
		for (int64_t i = 0; i < c->in; i++)
			wref[o * c->in + i] = (float)w[i * c->n + o];
	for (int64_t i = 0; i < c->in * c->out; i++)
		wd[i] = NAN;
	cr_assert_eq(lin.ops->dequant(lin.impl, wd), TF_OK);
	err = tf_test_rel_err(wd, wref, c->in * c->out, 1e-3);
	cr_expect_lt(err, 1e-5, "dequant K=%d %s: rel err %g", c->K, tf_exl3_cb_name(c->cb), err);

	check_slices(&lin, c, w, x, &seed);
	h->lin_close(h, &lin);
	free(bias); free(w); free(x); free(y); free(ref); free(wd); free(wref);
	tf_testhost_free(th);
}

static void check_lin(const struct lin_case *c, int64_t rows, int threads, uint64_t seed)
{
	check_lin_as("exl3", c, rows, threads, seed);
	check_lin_as("exl3-int", c, rows, threads, seed);
}

Test(exl3_lin, every_k_and_codebook)
{
	uint64_t seed = 1;
	for (int K = 1; K <= 8; K++)
		for (int cb = 0; cb < TF_EXL3_CB_COUNT; cb++) {
			struct lin_case c = { 128, 256, 128, 256, K, (tf_exl3_cb)cb, (K + cb) & 1 };
			check_lin(&c, 1 + (K + cb) % 5, 1, seed++);
		}
}

Test(exl3_lin, padded_sizes_and_threads)
{
	struct lin_case c = { 256, 384, 200, 300, 3, TF_EXL3_CB_MUL1, 1 };
	check_lin(&c, 1, 2, 77);
	check_lin(&c, 9, 2, 78);
	check_lin(&c, 8, 2, 80);        /* the most rows the integer path takes */
	c.cb = TF_EXL3_CB_MCG;
	c.K = 4;
	check_lin(&c, 5, 2, 79);
}

/* A layer built from parts; each field left 0 takes the valid default. */
struct bad {
	int64_t ts[3];          /* trellis shape */
	int64_t suh, svh;       /* vector lengths; -1: absent */
	int mcg, mul1, legacy_su;
	int64_t in, out;
	const char *needle;     /* expected in the error */
};

static void check_bad(const struct bad *b)
{
	tf_testhost *th = tf_testhost_new(NULL, 1);
	const tf_host *h = tf_testhost_host(th);
	int64_t nt = b->ts[0] * b->ts[1] * b->ts[2];
	uint16_t *tr = calloc(nt > 0 ? nt : 1, 2);
	static const float ones[1024] = { 1.0f };
	int32_t marker = 1;
	tf_lin lin = { 0 };

	for (int64_t i = 0; i < nt; i++)
		tr[i] = (uint16_t)(i * 40503u);
	tf_testhost_add_tensor(th, "m.proj.trellis", TF_DTYPE_I16, 3, b->ts, tr);
	if (b->suh >= 0)
		tf_testhost_add_f32(th, "m.proj.suh", TF_DTYPE_F16, 1, &b->suh, ones);
	if (b->svh >= 0)
		tf_testhost_add_f32(th, "m.proj.svh", TF_DTYPE_F16, 1, &b->svh, ones);
	if (b->mcg)
		tf_testhost_add_tensor(th, "m.proj.mcg", TF_DTYPE_I32, 0, NULL, &marker);
	if (b->mul1)
		tf_testhost_add_tensor(th, "m.proj.mul1", TF_DTYPE_I32, 0, NULL, &marker);
	if (b->legacy_su) {
		int64_t s = 8;
		tf_testhost_add_tensor(th, "m.proj.su", TF_DTYPE_I16, 1, &s, tr);
	}
	for (int d = 0; d < 2; d++) {
		const char *name = d ? "exl3-int" : "exl3";
		int rc = open_as(h, name, b->in, b->out, &lin);
		cr_expect_neq(rc, TF_OK, "%s: '%s' case opened", name, b->needle);
		if (rc == TF_OK)
			h->lin_close(h, &lin);
		cr_expect(strstr(tf_testhost_last_error(th), b->needle), "%s: error '%s' lacks '%s'",
			  name, tf_testhost_last_error(th), b->needle);
	}
	free(tr);
	tf_testhost_free(th);
}

Test(exl3_lin, refuses_malformed)
{
	const struct bad cases[] = {
		{ { 8, 8, 48 }, 64, 128, 0, 0, 0, 128, 128, "m.proj.suh" },     /* k disagrees */
		{ { 8, 8, 48 }, 128, 256, 0, 0, 0, 128, 128, "m.proj.svh" },    /* n disagrees */
		{ { 8, 8, 0 }, 128, 128, 0, 0, 0, 128, 128, "m.proj.trellis" }, /* K = 0 */
		{ { 8, 8, 144 }, 128, 128, 0, 0, 0, 128, 128, "m.proj.trellis" }, /* K = 9 */
		{ { 8, 8, 47 }, 128, 128, 0, 0, 0, 128, 128, "m.proj.trellis" }, /* not 16·K */
		{ { 8, 8, 48 }, 128, 128, 1, 1, 0, 128, 128, "both" },
		{ { 9, 8, 48 }, 144, 128, 0, 0, 0, 128, 128, "multiples of 128" },
		{ { 8, 8, 48 }, 128, 128, 0, 0, 0, 129, 128, "does not fit" },
		{ { 8, 8, 48 }, 128, -1, 0, 0, 0, 128, 128, "m.proj.svh: tensor not found" },
		{ { 8, 8, 48 }, -1, 128, 0, 0, 1, 128, 128, "legacy" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_bad(&cases[i]);
}

/*
 * Tensor-parallel parts (open_part) against the float64 W: an output part
 * gives those columns of x·W + b; input parts give partial sums whose total
 * is x·W + b (the bias from the first part only).  Each part reads its own
 * tiles, so every part of a 384 x 512 layer, cut at each Hadamard block,
 * is checked; a cut inside a block is refused naming the tensor.
 */
static void check_part(const struct lin_case *c, tf_lin_axis axis, int64_t lo, int64_t hi,
		       int64_t rows, uint64_t seed)
{
	tf_testhost *th = tf_testhost_new(NULL, 2);
	const tf_host *h = tf_testhost_host(th);
	float *bias = malloc(sizeof(float) * c->n);
	tf_test_fill_uniform(bias, c->n, 1.0f, &seed);
	double *w = add_layer(th, c, &seed, bias);
	const bool cols = axis == TF_LIN_PART_IN;
	const int64_t in = cols ? hi - lo : c->in, out = cols ? c->out : hi - lo;
	float *x = malloc(sizeof(float) * rows * in), *y = malloc(sizeof(float) * rows * out);
	float *ref = malloc(sizeof(float) * rows * out);
	const tf_lin_part part = { .axis = axis, .lo = lo, .hi = hi };
	tf_lin lin = { 0 };

	tf_test_fill_uniform(x, rows * in, 1.0f, &seed);
	cr_assert_eq(h->lin_open_part(h, "m.proj", c->in, c->out, &part, &lin), TF_OK, "%s",
		     tf_testhost_last_error(th));
	cr_expect_eq(lin.info.in, in);
	cr_expect_eq(lin.info.out, out);
	for (int64_t r = 0; r < rows; r++)
		for (int64_t o = 0; o < out; o++) {
			int64_t go = cols ? o : lo + o, gi0 = cols ? lo : 0;
			double s = c->bias && (!cols || lo == 0) ? tf_f16_to_f32(tf_f32_to_f16(bias[go]))
								 : 0.0;
			for (int64_t i = 0; i < in; i++)
				s += (double)x[r * in + i] * w[(gi0 + i) * c->n + go];
			ref[r * out + o] = (float)s;
		}
	for (int64_t i = 0; i < rows * out; i++)
		y[i] = NAN;
	cr_assert_eq(tf_lin_forward(&lin, x, rows, y), TF_OK);
	double err = tf_test_rel_err(y, ref, rows * out, 1e-3);
	cr_expect_lt(err, 1e-3, "%s part [%lld, %lld): rel err %g", cols ? "input" : "output",
		     (long long)lo, (long long)hi, err);
	h->lin_close(h, &lin);
	free(bias); free(w); free(x); free(y); free(ref);
	tf_testhost_free(th);
}

Test(exl3_lin, parts_of_a_layer)
{
	const struct lin_case c = { 384, 512, 384, 512, 3, TF_EXL3_CB_MUL1, 1 };
	uint64_t seed = 40;
	for (int64_t lo = 0; lo < 512; lo += 128)
		check_part(&c, TF_LIN_PART_OUT, lo, lo + 128 * (1 + (lo == 0)), 3, seed++);
	for (int64_t lo = 0; lo < 384; lo += 128)
		check_part(&c, TF_LIN_PART_IN, lo, lo + 128, 1 + (int)(lo / 128), seed++);
}

Test(exl3_lin, part_inside_a_block_is_refused)
{
	const struct lin_case c = { 256, 256, 256, 256, 2, TF_EXL3_CB_3INST, 0 };
	tf_testhost *th = tf_testhost_new(NULL, 1);
	const tf_host *h = tf_testhost_host(th);
	uint64_t seed = 3;
	free(add_layer(th, &c, &seed, NULL));
	const tf_lin_part part = { .axis = TF_LIN_PART_OUT, .lo = 0, .hi = 64 };
	tf_lin lin = { 0 };
	cr_assert_eq(h->lin_open_part(h, "m.proj", 256, 256, &part, &lin), TF_ERR_UNSUPPORTED);
	const char *msg = tf_testhost_last_error(th);
	cr_expect(strstr(msg, "m.proj.trellis") && strstr(msg, "Hadamard block of 128"), "%s", msg);
	tf_testhost_free(th);
}

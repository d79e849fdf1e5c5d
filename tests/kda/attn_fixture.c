/* attn_fixture.c - see attn_fixture.h. */
#include "attn_fixture.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const tf_plugin_attention *attn_fixture_plugin_at(const char *path, const char *layer_type)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	cr_assert(h, "%s", dlerror());
	const tf_plugin_attention *(*entry)(unsigned) =
		(const tf_plugin_attention *(*)(unsigned))dlsym(h, "tf_plugin_attention_v1");
	cr_assert(entry && entry(0) && !entry(1), "%s: one attention descriptor", path);
	cr_assert_str_eq(entry(0)->layer_type, layer_type);
	cr_assert_eq(entry(0)->hdr.abi_major, TF_ABI_MAJOR);
	return entry(0);
}

const tf_plugin_attention *attn_fixture_plugin(const char *so, const char *layer_type)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", TF_PLUGIN_DIR, so);
	return attn_fixture_plugin_at(path, layer_type);
}

tf_testhost *attn_fixture_device_host(attn_fixture_host_fn make, const void *arg,
				      const char *backend, const char *quant)
{
	setenv("TF_TEST_BACKEND", backend, 1);
	setenv("TF_TEST_QUANT", quant, 1);
	tf_testhost *th = make(arg);
	unsetenv("TF_TEST_BACKEND");
	unsetenv("TF_TEST_QUANT");
	return th;
}

void *attn_fixture_open(const tf_plugin_attention *p, tf_testhost *th, const char *prefix,
			int64_t max_ctx)
{
	const char *reason = NULL;
	cr_assert_gt(p->hdr.probe(tf_testhost_host(th), &reason), 0, "probe: %s", reason);
	void *inst = NULL;
	int rc = p->layer_init(tf_testhost_host(th), 0, prefix, max_ctx, &inst);
	cr_assert_eq(rc, TF_OK, "layer_init: %s", tf_testhost_last_error(th));
	return inst;
}

void *attn_fixture_state(const tf_plugin_attention *p, void *inst, int64_t max_ctx)
{
	cr_assert(p->state_new && p->forward_batch, "%s: no ABI 1.5 state slots", p->hdr.name);
	void *state = NULL;
	cr_assert_eq(p->state_new(inst, max_ctx, &state), TF_OK, "state_new");
	cr_assert(state);
	cr_assert_eq(p->state_len(inst, state), 0);
	return state;
}

int attn_fixture_run_batch(const tf_plugin_attention *p, void *inst, void *const *state,
			   const int64_t *rows, int n_seq, const float *x, int hidden, float *y)
{
	tf_attn_seg *seg = calloc((size_t)n_seq + 1, sizeof(*seg));
	int64_t n = 0;
	cr_assert(seg);
	for (int k = 0; k < n_seq; k++) {
		seg[k] = (tf_attn_seg){ .state = state[k], .row0 = n, .n = rows[k] };
		n += rows[k];
	}
	int32_t *pos = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
	cr_assert(pos);
	for (int k = 0; k < n_seq; k++)
		for (int64_t i = 0, t = p->state_len(inst, state[k]); i < rows[k]; i++)
			pos[seg[k].row0 + i] = (int32_t)(t + i);
	tf_attn_batch b = { .n = n, .pos = pos, .n_seg = n_seq, .seg = seg };
	int rc = p->forward_batch(inst, x, &b, y);
	free(pos);
	free(seg);
	return rc;
}

void attn_fixture_run(const tf_plugin_attention *p, void *inst, void *state, const float *x,
		      int64_t n, int hidden, const int *split, int nsplit, float *y)
{
	for (int64_t t = 0, s = 0; t < n; s++) {
		int64_t m = split[s % nsplit];
		if (m > n - t)
			m = n - t;
		cr_assert_eq(attn_fixture_run_batch(p, inst, &state, &m, 1, x + t * hidden, hidden,
						    y + t * hidden),
			     TF_OK, "forward of %lld tokens at %lld", (long long)m, (long long)t);
		t += m;
	}
}

void *attn_fixture_snapshot(const tf_plugin_attention *p, void *inst, const void *state)
{
	void *buf = malloc(p->state_snapshot_size(inst, state));
	cr_assert(buf);
	cr_assert_eq(p->state_snapshot(inst, state, buf), TF_OK);
	return buf;
}

void *attn_fixture_expect_replay(const tf_plugin_attention *p, void *inst, void *state,
				 int hidden, int n, int m, int piece)
{
	const size_t H = (size_t)hidden;
	float *x = malloc((n + 2 * (size_t)m) * H * sizeof(float));
	float *y1 = malloc((size_t)m * H * sizeof(float));
	float *y2 = malloc((size_t)m * H * sizeof(float));
	float *junk = malloc(((size_t)n + m) * H * sizeof(float));
	uint64_t seed = 5;
	const int one[] = { 1 };

	cr_assert(x && y1 && y2 && junk);
	tf_test_fill_uniform(x, (n + 2 * (size_t)m) * H, 1.0f, &seed);
	attn_fixture_run(p, inst, state, x, n, hidden, &piece, 1, junk);
	void *snap = attn_fixture_snapshot(p, inst, state);
	attn_fixture_run(p, inst, state, x + n * H, m, hidden, one, 1, y1);
	/* A different continuation in between must not leak into the replay. */
	cr_assert_eq(p->state_rollback(inst, state, snap), TF_OK);
	attn_fixture_run(p, inst, state, x + (n + m) * H, m, hidden, &piece, 1, junk);
	cr_assert_eq(p->state_rollback(inst, state, snap), TF_OK);
	cr_expect_eq(p->state_len(inst, state), n);
	for (size_t i = 0; i < (size_t)m * H; i++)
		y2[i] = NAN;
	attn_fixture_run(p, inst, state, x + n * H, m, hidden, one, 1, y2);
	cr_expect(!memcmp(y1, y2, (size_t)m * H * sizeof(float)), "replay after rollback differs");
	free(x);
	free(y1);
	free(y2);
	free(junk);
	return snap;
}

void attn_fixture_expect_init_error(const tf_plugin_attention *p, tf_testhost *th,
				    const char *prefix, int status, const char *needle)
{
	void *inst = NULL;
	int rc = p->layer_init(tf_testhost_host(th), 0, prefix, 16, &inst);
	cr_expect_eq(rc, status, "status %d, want %d (%s)", rc, status,
		     tf_testhost_last_error(th));
	cr_expect(!inst);
	cr_expect(strstr(tf_testhost_last_error(th), needle), "error \"%s\" does not name %s",
		  tf_testhost_last_error(th), needle);
}

/* A host of make(arg) playing rank r of `ranks`. */
static tf_testhost *rank_host(attn_fixture_host_fn make, const void *arg, int r, int ranks)
{
	tf_testhost *th = make(arg);
	tf_host *h = (tf_host *)tf_testhost_host(th);  /* the test owns it */
	h->tp_rank = r;
	h->tp_size = ranks;
	return th;
}

void attn_fixture_expect_shards(const tf_plugin_attention *p, attn_fixture_host_fn make,
				const void *arg, const char *prefix, int hidden, int ranks,
				int uneven, const char *key, double tol, uint64_t seed)
{
	enum { N = 24 };
	static const int plan[] = { N - 4, 1 };
	const size_t bytes = (size_t)N * hidden * sizeof(float);
	float *x = malloc(bytes), *y = malloc(bytes), *whole = malloc(bytes);
	float *sum = calloc((size_t)N * hidden, sizeof(float));
	cr_assert(x && y && whole && sum);
	tf_test_fill_uniform(x, (size_t)N * hidden, 1.0f, &seed);

	for (int r = -1; r < ranks; r++) {     /* -1: the whole layer */
		tf_testhost *th = r < 0 ? make(arg) : rank_host(make, arg, r, ranks);
		const tf_host *h = tf_testhost_host(th);
		const tf_backend *be = h->backend;
		void *inst = attn_fixture_open(p, th, prefix, 64);
		void *st = attn_fixture_state(p, inst, 64);
		float *out = r < 0 ? whole : y;
		/* Backend memory: a device plugin's layer reads and writes there. */
		float *xb = be->alloc(h->backend_ctx, bytes), *yb = be->alloc(h->backend_ctx, bytes);
		cr_assert(xb && yb);
		for (int64_t i = 0; i < (int64_t)N * hidden; i++)
			out[i] = NAN;
		cr_assert_eq(be->upload(h->backend_ctx, xb, x, bytes), TF_OK);
		cr_assert_eq(be->upload(h->backend_ctx, yb, out, bytes), TF_OK);
		attn_fixture_run(p, inst, st, xb, N, hidden, plan, 2, yb);
		cr_assert_eq(be->sync(h->backend_ctx), TF_OK);
		cr_assert_eq(be->download(h->backend_ctx, out, yb, bytes), TF_OK);
		for (int64_t i = 0; r >= 0 && i < (int64_t)N * hidden; i++)
			sum[i] += y[i];
		p->state_free(inst, st);
		p->layer_fini(inst);
		be->free(h->backend_ctx, xb);
		be->free(h->backend_ctx, yb);
		tf_testhost_free(th);
	}
	double e = tf_test_rel_err(sum, whole, (size_t)N * hidden, 1e-3);
	cr_log_info("%s: %d ranks' outputs summed vs the whole layer: rel err %.3g", p->hdr.name,
		    ranks, e);
	cr_expect(e < tol, "%d ranks' outputs summed vs the whole layer: rel err %.3g", ranks, e);

	tf_testhost *th = rank_host(make, arg, 0, uneven);
	attn_fixture_expect_init_error(p, th, prefix, TF_ERR_UNSUPPORTED, key);
	tf_testhost_free(th);
	free(x);
	free(y);
	free(sum);
	free(whole);
}

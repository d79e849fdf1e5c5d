/* test_example_plugin.c - the example plugin of docs/plugins.md, loaded
 * through the registry and run on backend-cpu against a double reference. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "plugin/registry.h"
#include "support/testhost.h"
#include "tf/diag.h"
#include "tf/drafter.h"
#include "tf/quant.h"

#define IN 53
#define OUT 37
#define ROWS 3

static tf_registry *reg;
static const tf_plugin_quant *q;
static tf_testhost *th;
static const tf_host *h;

static void setup(void)
{
	cr_assert_eq(tf_registry_init(&reg), TF_OK);
	cr_assert_eq(tf_registry_load(reg, TF_PLUGIN_DIR "/example.so"), TF_OK,
		     "%s", tf_diag_msg());
	th = tf_testhost_new(NULL, 2);
	h = tf_testhost_host(th);
	tf_registry_probe(reg, TF_KIND_QUANT, h);
	const tf_candidate *c;
	cr_assert_eq(tf_registry_select(reg, TF_KIND_QUANT, NULL, "example-int8", &c),
		     TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(c->score, 10);
	q = (const tf_plugin_quant *)c->desc;
}

static void teardown(void)
{
	tf_testhost_free(th);
	tf_registry_free(reg);
}

/* The timeout turns a stuck thread pool into a failure, not a hang. */
TestSuite(example, .init = setup, .fini = teardown, .timeout = 20);

/* Random int8 weights, scales and (optionally) bias under `prefix`. */
static void add_layer(const char *prefix, int8_t *w, float *scale, float *bias,
		      uint64_t seed)
{
	float u[IN * OUT];
	char name[128];
	tf_test_fill_uniform(u, IN * OUT, 127.0f, &seed);
	for (int i = 0; i < IN * OUT; i++)
		w[i] = (int8_t)lrintf(u[i]);
	tf_test_fill_uniform(scale, OUT, 0.01f, &seed);
	snprintf(name, sizeof(name), "%s.qweight", prefix);
	tf_testhost_add_tensor(th, name, TF_DTYPE_I8, 2, (int64_t[]){ OUT, IN }, w);
	snprintf(name, sizeof(name), "%s.scale", prefix);
	tf_testhost_add_f32(th, name, TF_DTYPE_F32, 1, (int64_t[]){ OUT }, scale);
	if (bias) {
		tf_test_fill_uniform(bias, OUT, 1.0f, &seed);
		snprintf(name, sizeof(name), "%s.bias", prefix);
		tf_testhost_add_f32(th, name, TF_DTYPE_F32, 1, (int64_t[]){ OUT }, bias);
	}
}

static void check_forward(const char *prefix, bool with_bias)
{
	int8_t w[IN * OUT];
	float scale[OUT], bias[OUT], x[ROWS * IN], y[ROWS * OUT], ref[ROWS * OUT];
	uint64_t seed = with_bias ? 7 : 11;
	add_layer(prefix, w, scale, with_bias ? bias : NULL, seed);
	tf_test_fill_uniform(x, ROWS * IN, 1.0f, &seed);

	cr_assert_eq(q->match(h, prefix), 10);
	tf_lin lin = { .ops = q };
	cr_assert_eq(q->open(h, prefix, IN, OUT, &lin.impl, &lin.info), TF_OK, "%s",
		     tf_testhost_last_error(th));
	cr_assert_eq(lin.info.bits, 8);

	for (int r = 0; r < ROWS; r++)
		for (int o = 0; o < OUT; o++) {
			double acc = with_bias ? bias[o] : 0.0;
			for (int i = 0; i < IN; i++)
				acc += (double)x[r * IN + i] * w[o * IN + i] * scale[o];
			ref[r * OUT + o] = (float)acc;
		}
	for (int i = 0; i < ROWS * OUT; i++)
		y[i] = NAN;
	cr_assert_eq(tf_lin_forward(&lin, x, ROWS, y), TF_OK);
	double err = tf_test_rel_err(y, ref, ROWS * OUT, 1e-6);
	cr_assert_lt(err, 1e-5, "relative error %g", err);

	float dq[IN * OUT];
	cr_assert_eq(q->dequant(lin.impl, dq), TF_OK);
	for (int i = 0; i < IN * OUT; i++)
		cr_assert_float_eq(dq[i], w[i] * scale[i / IN], 1e-6f * fabsf(scale[i / IN]));
	q->close(lin.impl);
}

Test(example, forward_matches_reference_with_bias)
{
	check_forward("m.with_bias", true);
}

Test(example, forward_matches_reference_without_bias)
{
	check_forward("m.no_bias", false);
}

Test(example, match_declines_other_formats)
{
	float wf[4] = { 1, 2, 3, 4 };
	tf_testhost_add_f32(th, "m.f.qweight", TF_DTYPE_F32, 2, (int64_t[]){ 2, 2 }, wf);
	tf_testhost_add_f32(th, "m.f.scale", TF_DTYPE_F32, 1, (int64_t[]){ 2 }, wf);
	tf_testhost_add_f32(th, "m.w.weight", TF_DTYPE_F32, 2, (int64_t[]){ 2, 2 }, wf);
	cr_assert_eq(q->match(h, "m.f"), 0);
	cr_assert_eq(q->match(h, "m.w"), 0);
	cr_assert_eq(q->match(h, "m.absent"), 0);
}

Test(example, open_names_the_bad_tensor)
{
	int8_t w[IN * OUT];
	float scale[OUT];
	add_layer("m.bad", w, scale, NULL, 3);
	void *impl;
	tf_lin_info info;
	cr_assert_eq(q->open(h, "m.bad", IN - 1, OUT, &impl, &info), TF_ERR_FORMAT);
	cr_assert(strstr(tf_testhost_last_error(th),
			 "m.bad.qweight (<testhost>): expected I8 [37, 52], found I8 [37, 53]"),
		  "%s", tf_testhost_last_error(th));

	float s2[OUT + 1] = { 1 };
	tf_testhost_add_f32(th, "m.bad2.scale", TF_DTYPE_F32, 1, (int64_t[]){ OUT + 1 }, s2);
	tf_testhost_add_tensor(th, "m.bad2.qweight", TF_DTYPE_I8, 2,
			       (int64_t[]){ OUT, IN }, w);
	cr_assert_eq(q->open(h, "m.bad2", IN, OUT, &impl, &info), TF_ERR_FORMAT);
	cr_assert(strstr(tf_testhost_last_error(th), "m.bad2.scale"), "%s",
		  tf_testhost_last_error(th));
	cr_assert_eq(q->open(h, "m.bad", 0, OUT, &impl, &info), TF_ERR_INVALID);
}

Test(example, probe_wants_a_host_memory_backend)
{
	const tf_host bare = { .struct_size = sizeof(tf_host) };
	const char *reason = NULL;
	cr_assert_eq(q->hdr.probe(&bare, &reason), 0);
	cr_assert_str_eq(reason, "needs a backend");
}

/*
 * The example drafter: each token's last successor, chained from next;
 * learnt again after the sequence is cut shorter; as deep as its recent
 * steps kept, plus one.  (That its drafts never change what is generated
 * is the conformance suite's part, as for any drafter.)
 */
static int succ_propose(const tf_plugin_drafter *d, void *inst, void *seq,
			const int32_t *tok, int64_t n, int32_t next, int max, int32_t *draft)
{
	const tf_draft_req req = { .tokens = tok, .n_tokens = n, .next = next, .vocab = 16,
				   .max = max };
	int got = -1;
	for (int i = 0; i < 8; i++)
		draft[i] = -7;
	cr_assert_eq(d->propose(inst, seq, &req, draft, &got), TF_OK);
	return got;
}

Test(example, successor_drafter)
{
	tf_model_config cfg = { .vocab_size = 16 };
	tf_testhost *dh = tf_testhost_new(&cfg, 1);
	const tf_host *hh = tf_testhost_host(dh);
	const tf_candidate *c;
	tf_registry_probe(reg, TF_KIND_DRAFTER, hh);
	cr_assert_eq(tf_registry_select(reg, TF_KIND_DRAFTER, NULL, "example-successor", &c),
		     TF_OK, "%s", tf_diag_msg());
	const tf_plugin_drafter *d = (const tf_plugin_drafter *)c->desc;
	void *inst, *seq;
	int32_t draft[8];
	cr_assert_eq(d->init(hh, &inst), TF_OK);
	cr_assert_eq(d->max_depth(inst), 4);
	cr_assert_eq(d->seq_new(inst, &seq), TF_OK);

	/* 1 2 3 1 2 then 3: 3 was followed by 1, 1 by 2, 2 by 3 (just now). */
	const int32_t t[] = { 1, 2, 3, 1, 2, 9, 5 };
	cr_assert_eq(succ_propose(d, inst, seq, t, 5, 3, 4, draft), 4);
	cr_assert(draft[0] == 1 && draft[1] == 2 && draft[2] == 3 && draft[3] == 1);
	cr_assert_eq(succ_propose(d, inst, seq, t, 5, 3, 2, draft), 2);
	cr_assert_eq(draft[2], -7);
	/* Since, 2 was followed by 9, 9 by 5, and 5 now by 2. */
	cr_assert_eq(succ_propose(d, inst, seq, t, 7, 2, 4, draft), 4);
	cr_assert(draft[0] == 9 && draft[1] == 5 && draft[2] == 2 && draft[3] == 9);
	/* 7 never came: nothing. */
	cr_assert_eq(succ_propose(d, inst, seq, t, 7, 7, 4, draft), 0);
	cr_assert_eq(draft[0], -7);
	/* Cut shorter: learnt again from 1 2 alone; 4 never came. */
	cr_assert_eq(succ_propose(d, inst, seq, t, 2, 4, 4, draft), 0);
	cr_assert_eq(succ_propose(d, inst, seq, t, 2, 1, 3, draft), 3);
	cr_assert(draft[0] == 2 && draft[1] == 1 && draft[2] == 2);

	tf_draft_plan plan = { .max = 3 };
	cr_assert_eq(d->depth(inst, seq, &plan), 1);
	for (int i = 0; i < 8; i++)
		d->observe(inst, seq, &(tf_draft_outcome){ .asked = 3, .drafted = 3, .accepted = 3 });
	cr_assert_eq(d->depth(inst, seq, &plan), 3);
	d->seq_free(inst, seq);
	d->fini(inst);
	tf_testhost_free(dh);
}

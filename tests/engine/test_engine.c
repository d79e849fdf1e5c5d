/*
 * test_engine.c - the library API against itself, through tf/engine.h
 * only: a batch of interleaved sequences against each sequence alone,
 * forks, snapshots and truncation against fresh sequences, and refused
 * calls that must leave every sequence as it was.
 *
 * Every output buffer is poisoned with NaN before each call and holds one
 * row more than the call asks for, which must stay NaN: a row not written,
 * or one too many, shows.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/tmpfile.h"
#include "tf/engine.h"
#include "tf/error.h"

#define CONTEXT 256
#define CHUNK 16                /* [runtime] prefill_chunk: batches span steps */
#define MAX_SEQS 4

/*
 * Batched against alone.  A sequence's rows go through the same kernels
 * either way, but beside other rows: a linear over 4 rows may sum in
 * another order than over 1, the MoE runs an expert over the rows of
 * every sequence routed to it, and the steps cut a prompt at other places
 * (KDA's chunked form against its recurrence).  So only fp32 rounding
 * differs: with an f32 MLA cache, measured at most 4.1e-7 of the row's
 * largest value on ling-tiny (logits and hidden), as tests/model measures
 * against the float64 reference; 1e-5 keeps a 24x margin for near-tied
 * expert choices.  A bf16 cache rounds each latent once when written, and
 * a latent whose fp32 value differs in its last bit may round to the other
 * bf16 neighbour (2^-8 apart): measured 2.5e-5, bounded at 2.5e-4 (10x).  Any
 * real mixing of sequences moves logits by O(1).
 */
#define BATCH_MAX_REL_F32 1e-5
#define BATCH_MAX_REL_BF16 2.5e-4

static char ini[64];

static void write_ini(void)
{
	char text[1024];
	int n = snprintf(text, sizeof(text),
			 "[model]\npath = %s\n\n[plugins]\npath = %s\n\n"
			 "[runtime]\ncontext = %d\nthreads = 2\nmemory_limit = 1G\n"
			 "prefill_chunk = %d\nsequences = %d\n\n[mtp]\nenabled = false\n",
			 TF_ENGINE_MODEL, TF_PLUGIN_DIR, CONTEXT, CHUNK, MAX_SEQS);

	strcpy(ini, "/tmp/tf-engine-XXXXXX.ini");
	tf_test_tmpfile(ini, 4, text, (size_t)n);
}

static void remove_ini(void)
{
	unlink(ini);
}

TestSuite(engine, .init = write_ini, .fini = remove_ini, .timeout = 240);

/* An engine on the INI, with kv_cache ("runtime.kv_cache=...") or not. */
static tf_engine *engine_open(const char *kv_cache)
{
	tf_engine *e = NULL;
	int rc = tf_engine_open(ini, &kv_cache, kv_cache != NULL, &e);

	cr_assert_eq(rc, TF_OK, "open %s: %s", ini, tf_engine_errmsg());
	cr_assert_eq(tf_engine_context(e), CONTEXT);
	cr_assert_eq(tf_engine_max_seqs(e), MAX_SEQS);
	cr_assert_eq(tf_engine_prefill_chunk(e), CHUNK);
	/* the description it opened, overrides applied, for a face's own keys */
	const char *kv = tf_conf_get(tf_engine_conf(e), "runtime", "kv_cache");
	cr_assert(kv_cache ? kv && !strcmp(kv, strchr(kv_cache, '=') + 1) : !kv,
		  "[runtime] kv_cache: %s", kv ? kv : "unset");
	return e;
}

static tf_seq_id seq_new(tf_engine *e)
{
	tf_seq_id s;
	int rc = tf_seq_new(e, &s);

	cr_assert_eq(rc, TF_OK, "tf_seq_new: %s", tf_engine_errmsg());
	cr_assert_eq(tf_seq_len(e, s), 0);
	return s;
}

/* n token ids in [0, vocab), the same for the same seed. */
static int32_t *tokens(uint64_t seed, int64_t n, int vocab)
{
	int32_t *t = malloc((size_t)n * sizeof(*t));

	cr_assert_not_null(t);
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		t[i] = (int32_t)((seed >> 33) % (uint64_t)vocab);
	}
	return t;
}

/* Room for rows of width w and one guard row. */
static float *rows_alloc(int64_t rows, int w)
{
	float *p = malloc((size_t)(rows + 1) * (size_t)w * sizeof(*p));

	cr_assert_not_null(p);
	return p;
}

static void poison(float *p, int64_t rows, int w)
{
	for (int64_t i = 0; i < (rows + 1) * w; i++)
		p[i] = NAN;
}

/* rows written (finite), the guard row after them not. */
static void check_rows(const float *p, int64_t rows, int w, const char *what)
{
	for (int64_t i = 0; i < rows * w; i++)
		cr_assert(isfinite(p[i]), "%s: row %ld col %ld is %g", what, (long)(i / w),
			  (long)(i % w), p[i]);
	for (int64_t i = rows * w; i < (rows + 1) * w; i++)
		cr_assert(isnan(p[i]), "%s: written past its %ld rows", what, (long)rows);
}

/*
 * Run b asking for every token's output; logits [n, vocab] and hidden
 * [n, hidden] (either NULL) receive them in batch order.
 */
static void forward_all(tf_engine *e, tf_batch b, float *logits, float *hidden)
{
	int V = tf_engine_vocab(e), H = tf_engine_hidden_size(e);
	uint8_t *out = malloc((size_t)b.n);
	float *lg = rows_alloc(b.n, V), *hd = rows_alloc(b.n, H);

	cr_assert_not_null(out);
	memset(out, 1, (size_t)b.n);
	b.out = out;
	cr_assert_eq(tf_batch_outputs(&b), b.n);
	poison(lg, b.n, V);
	poison(hd, b.n, H);
	int rc = tf_engine_forward(e, &b, lg, hd);
	cr_assert_eq(rc, TF_OK, "forward of %ld tokens: %s", (long)b.n, tf_engine_errmsg());
	check_rows(lg, b.n, V, "logits");
	check_rows(hd, b.n, H, "hidden");
	if (logits)
		memcpy(logits, lg, (size_t)b.n * (size_t)V * sizeof(*lg));
	if (hidden)
		memcpy(hidden, hd, (size_t)b.n * (size_t)H * sizeof(*hd));
	free(out);
	free(lg);
	free(hd);
}

/* Feed s n tokens in calls of `call` tokens; every token's logits (and
 * hidden state) into logits [n, vocab] (hidden [n, hidden]), either NULL. */
static void feed(tf_engine *e, tf_seq_id s, const int32_t *tok, int64_t n, int64_t call,
		 float *logits, float *hidden)
{
	int V = tf_engine_vocab(e), H = tf_engine_hidden_size(e);
	int64_t len = tf_seq_len(e, s);

	for (int64_t i = 0; i < n; i += call) {
		int64_t m = n - i < call ? n - i : call;
		tf_batch b = { .n = m, .token = tok + i, .one_seq = s };
		forward_all(e, b, logits ? logits + i * V : NULL, hidden ? hidden + i * H : NULL);
	}
	cr_assert_eq(tf_seq_len(e, s), len + n);
	cr_assert_eq(memcmp(tf_seq_tokens(e, s) + len, tok, (size_t)n * sizeof(*tok)), 0);
}

/* max |a - b| over max |a|, of n values. */
static double rel_diff(const float *a, const float *b, int64_t n)
{
	double d = 0, m = 0;

	for (int64_t i = 0; i < n; i++) {
		d = fmax(d, fabs((double)a[i] - b[i]));
		m = fmax(m, fabs((double)a[i]));
	}
	return d / m;
}

/* Row a (alone) and row b (batched), width w, agree within bound. */
static double check_close(const float *a, const float *b, int w, double bound, const char *what)
{
	double d = rel_diff(a, b, w);

	cr_assert_leq(d, bound, "%s: batched differs from alone by %g", what, d);
	return d;
}

/*
 * ---- (a), (e): a batch of interleaved sequences equals each alone ----
 *
 * Logits and hidden states alike: not bit for bit, since the steps hold
 * other rows (BATCH_MAX_REL_*).  Where the steps are the same, as for a
 * fork and the prefix run again, they are equal bit for bit.
 */

#define N_SEQ 4
#define N_DECODE 5

static void batched_vs_alone(const char *kv_cache, double bound)
{
	static const int64_t plen[N_SEQ] = { 1, 7, 33, 70 };
	tf_engine *e = engine_open(kv_cache);
	int V = tf_engine_vocab(e), H = tf_engine_hidden_size(e);
	int32_t *prompt[N_SEQ], *dec[N_SEQ];
	float *alone_lg[N_SEQ], *alone_hd[N_SEQ];
	int64_t total = 0;

	for (int k = 0; k < N_SEQ; k++) {
		prompt[k] = tokens(100 + k, plen[k], V);
		dec[k] = tokens(200 + k, N_DECODE, V);
		alone_lg[k] = rows_alloc(plen[k] + N_DECODE, V);
		alone_hd[k] = rows_alloc(plen[k] + N_DECODE, H);
		total += plen[k];
	}

	/* Alone: one sequence alive at a time, the prompt in one call (the
	 * engine steps it in CHUNK rows), then one token per call. */
	for (int k = 0; k < N_SEQ; k++) {
		tf_seq_id s = seq_new(e);
		feed(e, s, prompt[k], plen[k], plen[k], alone_lg[k], alone_hd[k]);
		feed(e, s, dec[k], N_DECODE, 1, alone_lg[k] + plen[k] * V,
		     alone_hd[k] + plen[k] * H);
		cr_assert_eq(tf_seq_free(e, s), TF_OK);
	}

	/* Batched: the prompts' tokens dealt round-robin into one batch, so
	 * no two neighbours share a sequence while two remain. */
	tf_seq_id s[N_SEQ];
	for (int k = 0; k < N_SEQ; k++)
		s[k] = seq_new(e);
	int32_t *tok = malloc((size_t)total * sizeof(*tok));
	tf_seq_id *who = malloc((size_t)total * sizeof(*who));
	int *from = malloc((size_t)total * sizeof(*from));
	int64_t *at = malloc((size_t)total * sizeof(*at));
	float *lg = rows_alloc(total, V), *hd = rows_alloc(total, H);
	int64_t n = 0;
	for (int64_t j = 0; n < total; j++)
		for (int k = 0; k < N_SEQ; k++)
			if (j < plen[k]) {
				tok[n] = prompt[k][j];
				who[n] = s[k];
				from[n] = k;
				at[n++] = j;
			}
	forward_all(e, (tf_batch){ .n = total, .token = tok, .seq = who }, lg, hd);
	double worst_lg = 0, worst_hd = 0;
	for (int64_t i = 0; i < total; i++) {
		int k = from[i];
		worst_lg = fmax(worst_lg, check_close(alone_lg[k] + at[i] * V, lg + i * V, V,
						      bound, "prompt logits"));
		worst_hd = fmax(worst_hd, check_close(alone_hd[k] + at[i] * H, hd + i * H, H,
						      bound, "prompt hidden"));
	}
	for (int k = 0; k < N_SEQ; k++)
		cr_assert_eq(tf_seq_len(e, s[k]), plen[k]);

	/* Decode: one token each per step, the sequences in another order
	 * every step. */
	for (int t = 0; t < N_DECODE; t++) {
		int32_t dt[N_SEQ];
		tf_seq_id dw[N_SEQ];
		for (int r = 0; r < N_SEQ; r++) {
			int k = (r + t) % N_SEQ;
			dt[r] = dec[k][t];
			dw[r] = s[k];
		}
		forward_all(e, (tf_batch){ .n = N_SEQ, .token = dt, .seq = dw }, lg, hd);
		for (int r = 0; r < N_SEQ; r++) {
			int k = (r + t) % N_SEQ;
			int64_t p = plen[k] + t;
			worst_lg = fmax(worst_lg, check_close(alone_lg[k] + p * V, lg + r * V, V,
							      bound, "decode logits"));
			worst_hd = fmax(worst_hd, check_close(alone_hd[k] + p * H, hd + r * H, H,
							      bound, "decode hidden"));
		}
	}
	cr_log_info("batched vs alone, %s: logits %.3g, hidden %.3g of the row's largest",
		    kv_cache, worst_lg, worst_hd);

	for (int k = 0; k < N_SEQ; k++) {
		cr_assert_eq(tf_seq_free(e, s[k]), TF_OK);
		free(prompt[k]);
		free(dec[k]);
		free(alone_lg[k]);
		free(alone_hd[k]);
	}
	free(tok);
	free(who);
	free(from);
	free(at);
	free(lg);
	free(hd);
	tf_engine_close(e);
}

Test(engine, batched_equals_alone_f32_cache)
{
	batched_vs_alone("runtime.kv_cache=f32", BATCH_MAX_REL_F32);
}

Test(engine, batched_equals_alone_bf16_cache)
{
	batched_vs_alone("runtime.kv_cache=bf16", BATCH_MAX_REL_BF16);
}

/* out NULL asks for each sequence's last token, in batch order. */
Test(engine, default_outputs_are_each_last_token)
{
	tf_engine *e = engine_open(NULL);
	int V = tf_engine_vocab(e);
	int32_t *t = tokens(300, 5, V);
	tf_seq_id a = seq_new(e), b = seq_new(e);
	/* Rows of a, b, a, a, b: last of b is token 4, last of a token 3. */
	const tf_seq_id who[5] = { a, b, a, a, b };
	float *all = rows_alloc(5, V), *lg = rows_alloc(2, V);
	tf_batch bt = { .n = 5, .token = t, .seq = who };

	cr_assert_eq(tf_batch_outputs(&bt), 2);
	poison(lg, 2, V);
	cr_assert_eq(tf_engine_forward(e, &bt, lg, NULL), TF_OK, "%s", tf_engine_errmsg());
	check_rows(lg, 2, V, "logits");

	/* The same tokens again on fresh sequences, every output asked for. */
	tf_seq_id a2 = seq_new(e), b2 = seq_new(e);
	const tf_seq_id who2[5] = { a2, b2, a2, a2, b2 };
	forward_all(e, (tf_batch){ .n = 5, .token = t, .seq = who2 }, all, NULL);
	cr_assert_eq(memcmp(lg, all + 3 * V, (size_t)V * sizeof(*lg)), 0);
	cr_assert_eq(memcmp(lg + V, all + 4 * V, (size_t)V * sizeof(*lg)), 0);
	free(t);
	free(all);
	free(lg);
	tf_engine_close(e);
}

/* The MoE counts: one pass per MoE layer and step, its union of experts
 * between one token's top-k and the whole batch's slots. */
Test(engine, moe_stats_count_each_pass)
{
	tf_engine *e = engine_open(NULL);
	const tf_model_config *c = tf_engine_model(e);
	int V = tf_engine_vocab(e), moe_layers = 0;
	for (int i = 0; i < c->num_hidden_layers; i++)
		moe_layers += !strcmp(c->ffn_type[i], "moe");
	cr_assert_gt(moe_layers, 0, "ling-tiny has MoE layers");
	int32_t *t = tokens(301, 6, V);
	tf_seq_id s[3] = { seq_new(e), seq_new(e), seq_new(e) };
	const tf_seq_id who[6] = { s[0], s[1], s[2], s[0], s[1], s[2] };
	float *lg = rows_alloc(3, V);

	tf_engine_stats_reset(e);
	cr_assert_eq(tf_engine_moe_stats(e).passes, 0);
	tf_batch one = { .n = 1, .token = t, .one_seq = s[0] };
	cr_assert_eq(tf_engine_forward(e, &one, lg, NULL), TF_OK, "%s", tf_engine_errmsg());
	tf_moe_stats m = tf_engine_moe_stats(e);
	cr_expect_eq(m.passes, (uint64_t)moe_layers);
	cr_expect_eq(m.slots, (uint64_t)moe_layers * c->num_experts_per_tok);
	cr_expect_eq(m.experts, m.slots, "one token's experts are distinct");

	tf_engine_stats_reset(e);
	tf_batch all = { .n = 5, .token = t + 1, .seq = who + 1 };
	cr_assert_eq(tf_engine_forward(e, &all, lg, NULL), TF_OK, "%s", tf_engine_errmsg());
	m = tf_engine_moe_stats(e);
	cr_expect_eq(m.passes, (uint64_t)moe_layers);
	cr_expect_eq(m.slots, (uint64_t)moe_layers * 5 * c->num_experts_per_tok);
	cr_expect_geq(m.experts, (uint64_t)moe_layers * c->num_experts_per_tok);
	cr_expect_leq(m.experts, m.slots);
	cr_expect_leq(m.experts, (uint64_t)moe_layers * c->num_experts);
	free(t);
	free(lg);
	tf_engine_close(e);
}

/* ---- (b): a fork continues as the prefix run again would ---- */

Test(engine, fork_reuses_the_prefix)
{
	enum { NP = 37, NS1 = 9, NS2 = 12, CALL = 10 };
	tf_engine *e = engine_open(NULL);
	int V = tf_engine_vocab(e), H = tf_engine_hidden_size(e);
	int32_t *p = tokens(400, NP, V), *s1 = tokens(401, NS1, V), *s2 = tokens(402, NS2, V);
	float *a_lg = rows_alloc(NS1, V), *b_lg = rows_alloc(NS2, V), *c_lg = rows_alloc(NS2, V);
	float *d_lg = rows_alloc(NS1, V);
	float *b_hd = rows_alloc(NS2, H), *c_hd = rows_alloc(NS2, H);

	tf_seq_id a = seq_new(e), b;
	feed(e, a, p, NP, CALL, NULL, NULL);
	cr_assert_eq(tf_seq_fork(e, a, &b), TF_OK, "fork: %s", tf_engine_errmsg());
	cr_assert_neq(b, a);
	cr_assert_eq(tf_seq_len(e, b), NP);
	cr_assert_eq(memcmp(tf_seq_tokens(e, b), p, NP * sizeof(*p)), 0);
	/* a moves on first: b's copy must not share its state. */
	feed(e, a, s1, NS1, CALL, a_lg, NULL);
	feed(e, b, s2, NS2, CALL, b_lg, b_hd);
	cr_assert_eq(tf_seq_len(e, a), NP + NS1);

	/* C runs the prefix itself, with the same calls. */
	tf_seq_id c = seq_new(e);
	feed(e, c, p, NP, CALL, NULL, NULL);
	feed(e, c, s2, NS2, CALL, c_lg, c_hd);
	cr_assert_eq(memcmp(b_lg, c_lg, (size_t)NS2 * V * sizeof(*b_lg)), 0,
		     "the fork's logits differ from the prefix run again");
	cr_assert_eq(memcmp(b_hd, c_hd, (size_t)NS2 * H * sizeof(*b_hd)), 0,
		     "the fork's hidden states differ from the prefix run again");

	/* And the source went on as if never forked. */
	tf_seq_id d = seq_new(e);
	feed(e, d, p, NP, CALL, NULL, NULL);
	feed(e, d, s1, NS1, CALL, d_lg, NULL);
	cr_assert_eq(memcmp(a_lg, d_lg, (size_t)NS1 * V * sizeof(*a_lg)), 0,
		     "the fork's source changed");
	free(p);
	free(s1);
	free(s2);
	free(a_lg);
	free(b_lg);
	free(c_lg);
	free(d_lg);
	free(b_hd);
	free(c_hd);
	tf_engine_close(e);
}

/* ---- (c): snapshot, rollback, truncate ---- */

/*
 * One sequence alive at a time.  Truncation replays the kept tokens after
 * the mark (or from the start) as one call, so the fresh sequence it is
 * compared with is fed them as one call too: the same steps, the same
 * bits.
 */
Test(engine, snapshot_rollback_truncate)
{
	enum { NP = 30, ND = 6, NE = 4, AFTER = NP + 3, BEFORE = 20 };
	tf_engine *e = engine_open(NULL);
	int V = tf_engine_vocab(e);
	int32_t *p = tokens(500, NP, V), *d = tokens(501, ND, V), *x = tokens(502, NE, V);
	float *l1 = rows_alloc(ND, V), *l2 = rows_alloc(ND, V);
	float *l3 = rows_alloc(NE, V), *l4 = rows_alloc(NE, V);

	/* The fresh sequences first. */
	tf_seq_id f = seq_new(e);
	feed(e, f, p, NP, NP, NULL, NULL);
	feed(e, f, d, AFTER - NP, AFTER - NP, NULL, NULL);
	feed(e, f, x, NE, 1, l3, NULL);
	cr_assert_eq(tf_seq_free(e, f), TF_OK);
	f = seq_new(e);
	feed(e, f, p, BEFORE, BEFORE, NULL, NULL);
	feed(e, f, x, NE, 1, l4, NULL);
	cr_assert_eq(tf_seq_free(e, f), TF_OK);

	tf_seq_id s = seq_new(e);
	feed(e, s, p, NP, NP, NULL, NULL);
	cr_assert_eq(tf_seq_snapshot(e, s), TF_OK, "%s", tf_engine_errmsg());
	feed(e, s, d, ND, 1, l1, NULL);
	cr_assert_eq(tf_seq_rollback(e, s), TF_OK, "%s", tf_engine_errmsg());
	cr_assert_eq(tf_seq_len(e, s), NP);
	feed(e, s, d, ND, 1, l2, NULL);
	cr_assert_eq(memcmp(l1, l2, (size_t)ND * V * sizeof(*l1)), 0,
		     "decode after rollback differs");

	/* After the mark: back to it, tokens NP..AFTER-1 run again. */
	float *lt = rows_alloc(NE, V);
	cr_assert_eq(tf_seq_truncate(e, s, AFTER), TF_OK, "%s", tf_engine_errmsg());
	cr_assert_eq(tf_seq_len(e, s), AFTER);
	cr_assert_eq(memcmp(tf_seq_tokens(e, s) + NP, d, (AFTER - NP) * sizeof(*d)), 0);
	feed(e, s, x, NE, 1, lt, NULL);
	cr_assert_eq(memcmp(lt, l3, (size_t)NE * V * sizeof(*lt)), 0,
		     "truncate after the snapshot differs from a fresh sequence");

	/* Before the mark: from the start, tokens 0..BEFORE-1 run again. */
	cr_assert_eq(tf_seq_truncate(e, s, BEFORE), TF_OK, "%s", tf_engine_errmsg());
	cr_assert_eq(tf_seq_len(e, s), BEFORE);
	cr_assert_eq(memcmp(tf_seq_tokens(e, s), p, BEFORE * sizeof(*p)), 0);
	feed(e, s, x, NE, 1, lt, NULL);
	cr_assert_eq(memcmp(lt, l4, (size_t)NE * V * sizeof(*lt)), 0,
		     "truncate before the snapshot differs from a fresh sequence");

	/* To its own length: nothing moves. */
	cr_assert_eq(tf_seq_truncate(e, s, BEFORE + NE), TF_OK, "%s", tf_engine_errmsg());
	cr_assert_eq(tf_seq_len(e, s), BEFORE + NE);
	free(p);
	free(d);
	free(x);
	free(l1);
	free(l2);
	free(l3);
	free(l4);
	free(lt);
	tf_engine_close(e);
}

/* ---- (d): refused calls name what is wrong and move nothing ---- */

struct twins {
	tf_engine *e;
	tf_seq_id a, t;                 /* a sees the bad calls, t never does */
	int32_t next;                   /* a fresh token for each check */
};

/* Refused with status, the message holding every one of want (up to 3). */
static void refused(int rc, int status, const char *want0, const char *want1,
		    const char *want2)
{
	const char *want[3] = { want0, want1, want2 };
	const char *msg = tf_engine_errmsg();

	cr_assert_eq(rc, status, "status %d (%s), wanted %d; message '%s'", rc,
		     tf_strerror(rc), status, msg);
	for (int i = 0; i < 3; i++)
		cr_assert(!want[i] || strstr(msg, want[i]), "'%s' lacks '%s'", msg, want[i]);
}

/* a is where t is: same length and tokens, and the same next logits. */
static void twins_agree(struct twins *w)
{
	tf_engine *e = w->e;
	int V = tf_engine_vocab(e);
	int64_t len = tf_seq_len(e, w->t);
	float *la = rows_alloc(1, V), *lt = rows_alloc(1, V);
	int32_t tok = w->next++ % V;

	cr_assert_eq(tf_seq_len(e, w->a), len);
	cr_assert_eq(memcmp(tf_seq_tokens(e, w->a), tf_seq_tokens(e, w->t),
			    (size_t)len * sizeof(int32_t)), 0);
	feed(e, w->a, &tok, 1, 1, la, NULL);
	feed(e, w->t, &tok, 1, 1, lt, NULL);
	cr_assert_eq(memcmp(la, lt, (size_t)V * sizeof(*la)), 0,
		     "a refused call changed the sequence");
	free(la);
	free(lt);
}

/* f with v in it, into buf [64]: a message part to look for. */
static char *fmt(char *buf, const char *f, long v)
{
	snprintf(buf, 64, f, v);
	return buf;
}

Test(engine, refusals_move_nothing)
{
	enum { NP = 21 };
	struct twins w = { .e = engine_open(NULL), .next = 7 };
	tf_engine *e = w.e;
	int V = tf_engine_vocab(e);
	int32_t *p = tokens(600, NP, V);
	float *lg = rows_alloc(2, V);
	char s0[64], s1[64], s2[64];

	w.a = seq_new(e);
	w.t = seq_new(e);
	feed(e, w.a, p, NP, 8, NULL, NULL);
	feed(e, w.t, p, NP, 8, NULL, NULL);
	twins_agree(&w);

	/* A freed sequence beside a live one. */
	tf_seq_id gone = seq_new(e);
	cr_assert_eq(tf_seq_free(e, gone), TF_OK);
	int32_t two[2] = { 1, 2 };
	tf_seq_id who[2] = { w.a, gone };
	tf_batch b = { .n = 2, .token = two, .seq = who };
	poison(lg, 2, V);
	refused(tf_engine_forward(e, &b, lg, NULL), TF_ERR_INVALID,
		fmt(s0, "sequence %ld", gone), "freed", "batch token 1");
	cr_assert_eq(tf_seq_len(e, gone), -1);
	refused(tf_seq_free(e, gone), TF_ERR_INVALID, fmt(s0, "sequence %ld", gone), NULL, NULL);
	twins_agree(&w);

	/* One never made. */
	who[1] = 12345;
	refused(tf_engine_forward(e, &b, lg, NULL), TF_ERR_INVALID, "sequence 12345",
		"batch token 1", NULL);
	who[1] = -1;
	refused(tf_engine_forward(e, &b, lg, NULL), TF_ERR_INVALID, "sequence -1", NULL, NULL);
	twins_agree(&w);

	/* A gap and an overlap in the stated positions. */
	long len = (long)tf_seq_len(e, w.a);
	int32_t pos[2] = { (int32_t)len, (int32_t)len + 2 };
	b = (tf_batch){ .n = 2, .token = two, .one_seq = w.a, .pos = pos };
	refused(tf_engine_forward(e, &b, lg, NULL), TF_ERR_INVALID,
		fmt(s0, "position %ld", len + 2), fmt(s1, "continues at %ld", len + 1), "a gap");
	pos[1] = (int32_t)len;
	refused(tf_engine_forward(e, &b, lg, NULL), TF_ERR_INVALID,
		fmt(s0, "position %ld", len), fmt(s1, "continues at %ld", len + 1), "an overlap");
	pos[0] = (int32_t)len - 1;
	refused(tf_engine_forward(e, &b, lg, NULL), TF_ERR_INVALID,
		fmt(s0, "position %ld", len - 1), fmt(s1, "continues at %ld", len),
		"an overlap");
	twins_agree(&w);

	/* Tokens outside the vocabulary, after a good one. */
	b = (tf_batch){ .n = 2, .token = two, .one_seq = w.a };
	two[1] = V;
	refused(tf_engine_forward(e, &b, lg, NULL), TF_ERR_INVALID,
		fmt(s0, "token id %ld", V), fmt(s1, "[0, %ld)", V), "batch token 1");
	two[1] = -3;
	refused(tf_engine_forward(e, &b, lg, NULL), TF_ERR_INVALID, "token id -3",
		fmt(s1, "[0, %ld)", V), NULL);
	twins_agree(&w);

	/* Past the context: exactly full is fine, one more is not. */
	len = (long)tf_seq_len(e, w.a);
	int64_t room = CONTEXT - len;
	int32_t *many = tokens(601, room + 1, V);
	b = (tf_batch){ .n = room + 1, .token = many, .one_seq = w.a };
	refused(tf_engine_forward(e, &b, lg, NULL), TF_ERR_RANGE,
		fmt(s0, "sequence %ld", w.a), fmt(s1, "context of %ld tokens", CONTEXT),
		fmt(s2, "after %ld", len));
	twins_agree(&w);

	/* More sequences than [runtime] sequences: a and t are alive. */
	tf_seq_id extra[MAX_SEQS];
	for (int k = 2; k < MAX_SEQS; k++)
		extra[k] = seq_new(e);
	tf_seq_id over;
	refused(tf_seq_new(e, &over), TF_ERR_RANGE, fmt(s0, "all %ld sequences", MAX_SEQS),
		"[runtime] sequences", NULL);
	refused(tf_seq_fork(e, w.a, &over), TF_ERR_RANGE, "[runtime] sequences", NULL, NULL);
	cr_assert_eq(tf_seq_free(e, extra[2]), TF_OK);
	extra[2] = seq_new(e);          /* a freed slot is taken again */
	for (int k = 2; k < MAX_SEQS; k++)
		cr_assert_eq(tf_seq_free(e, extra[k]), TF_OK);
	twins_agree(&w);

	/* An empty batch, and none. */
	b = (tf_batch){ .n = 0, .token = two, .one_seq = w.a };
	refused(tf_engine_forward(e, &b, lg, NULL), TF_ERR_INVALID, "empty batch", NULL, NULL);
	refused(tf_engine_forward(e, NULL, lg, NULL), TF_ERR_INVALID, "empty batch", NULL, NULL);

	/* Truncation past the length, rollback without a snapshot. */
	len = (long)tf_seq_len(e, w.a);
	refused(tf_seq_truncate(e, w.a, len + 1), TF_ERR_INVALID, fmt(s0, "sequence %ld", w.a),
		fmt(s1, "holds %ld tokens", len), fmt(s2, "keep %ld", len + 1));
	refused(tf_seq_truncate(e, w.a, -1), TF_ERR_INVALID, fmt(s0, "sequence %ld", w.a),
		NULL, NULL);
	refused(tf_seq_rollback(e, w.a), TF_ERR_INVALID, fmt(s0, "sequence %ld", w.a),
		"no snapshot", NULL);
	twins_agree(&w);

	/* Nothing was written for any refused batch. */
	for (int64_t i = 0; i < 3 * V; i++)
		cr_assert(isnan(lg[i]), "a refused batch wrote logits");

	/* And the twins fill the context to its last token. */
	len = (long)tf_seq_len(e, w.a);
	feed(e, w.a, many, CONTEXT - len, CONTEXT - len, NULL, NULL);
	int32_t one = 0;
	b = (tf_batch){ .n = 1, .token = &one, .one_seq = w.a };
	refused(tf_engine_forward(e, &b, NULL, NULL), TF_ERR_RANGE,
		fmt(s1, "context of %ld tokens", CONTEXT), NULL, NULL);
	free(many);
	free(p);
	free(lg);
	tf_engine_close(e);
}

/*
 * ---- the MTP layer: its state moves with the sequence ----
 *
 * Each sequence holds the MTP layer's state too: a fork, a rollback and a
 * truncation to the mark give the drafts and their logits of the sequence
 * they copy or return to, bit for bit (the same steps ran).  A speculative
 * step leaves the sequence as serial decoding does: the same tokens, and
 * then the same drafts.
 */
Test(engine, mtp_state_moves_with_the_sequence)
{
	enum { NP = 40, DEPTH = 3, NE = 5, NS = 24 };
	const char *sets[] = { "mtp.enabled=true", "mtp.max_depth=3", "runtime.kv_cache=f32" };
	tf_engine *e = NULL;
	cr_assert_eq(tf_engine_open(ini, sets, 3, &e), TF_OK, "%s", tf_engine_errmsg());
	cr_assert_eq(tf_engine_draft_depth(e), DEPTH);
	int V = tf_engine_vocab(e);
	int32_t *p = tokens(900, NP + 1, V), *x = tokens(901, NE, V);
	int32_t d1[DEPTH], d2[DEPTH], spec[DEPTH + 1];
	float *l1 = rows_alloc(DEPTH, V), *l2 = rows_alloc(DEPTH, V);
	float *la = rows_alloc(1, V), *lb = rows_alloc(1, V);

	tf_seq_id a = seq_new(e), b;
	feed(e, a, p, NP, CHUNK, NULL, NULL);
	cr_assert_eq(tf_seq_draft(e, a, p[NP], DEPTH, d1, l1), TF_OK, "%s", tf_engine_errmsg());
	cr_assert_eq(tf_seq_len(e, a), NP);

	/* Drafting again: the first left no trace. */
	cr_assert_eq(tf_seq_draft(e, a, p[NP], DEPTH, d2, l2), TF_OK);
	cr_assert_eq(memcmp(l1, l2, (size_t)DEPTH * V * sizeof(float)), 0);

	cr_assert_eq(tf_seq_fork(e, a, &b), TF_OK, "%s", tf_engine_errmsg());
	cr_assert_eq(tf_seq_draft(e, b, p[NP], DEPTH, d2, l2), TF_OK);
	cr_assert_eq(memcmp(l1, l2, (size_t)DEPTH * V * sizeof(float)), 0, "fork");

	cr_assert_eq(tf_seq_snapshot(e, a), TF_OK);
	feed(e, a, x, NE, 1, NULL, NULL);
	cr_assert_eq(tf_seq_rollback(e, a), TF_OK);
	cr_assert_eq(tf_seq_draft(e, a, p[NP], DEPTH, d2, l2), TF_OK);
	cr_assert_eq(memcmp(l1, l2, (size_t)DEPTH * V * sizeof(float)), 0, "rollback");

	feed(e, a, x, NE, NE, NULL, NULL);
	cr_assert_eq(tf_seq_truncate(e, a, NP), TF_OK);
	cr_assert_eq(tf_seq_draft(e, a, p[NP], DEPTH, d2, l2), TF_OK);
	cr_assert_eq(memcmp(l1, l2, (size_t)DEPTH * V * sizeof(float)), 0, "truncate");

	/* a speculates, b decodes one token at a time, greedily. */
	tf_sampler_params greedy;
	tf_sampler_params_default(&greedy);
	greedy.temperature = 0;
	cr_assert_eq(tf_seq_set_sampling(e, a, &greedy, 0), TF_OK);
	cr_assert_eq(tf_seq_set_sampling(e, b, &greedy, 0), TF_OK);
	tf_batch last = { .n = 1, .token = p + NP - 1, .one_seq = a };
	cr_assert_eq(tf_seq_truncate(e, a, NP - 1), TF_OK);
	cr_assert_eq(tf_engine_forward(e, &last, la, NULL), TF_OK);
	memcpy(lb, la, (size_t)V * sizeof(float));
	while (tf_seq_len(e, a) < NP + NS) {
		int n;
		cr_assert_eq(tf_seq_speculate(e, a, DEPTH, la, spec, &n), TF_OK, "%s",
			     tf_engine_errmsg());
		cr_assert(n >= 1 && n <= DEPTH + 1);
		for (int i = 0; i < n; i++) {
			int32_t t;
			cr_assert_eq(tf_seq_sample(e, b, lb, &t), TF_OK);
			cr_assert_eq(t, spec[i], "token %ld", (long)tf_seq_len(e, b));
			tf_batch one = { .n = 1, .token = &t, .one_seq = b };
			cr_assert_eq(tf_engine_forward(e, &one, lb, NULL), TF_OK);
		}
		cr_assert_eq(tf_seq_len(e, a), tf_seq_len(e, b));
		cr_assert_lt(rel_diff(lb, la, V), BATCH_MAX_REL_F32);
	}
	cr_assert_eq(tf_seq_draft(e, a, 0, DEPTH, d1, NULL), TF_OK);
	cr_assert_eq(tf_seq_draft(e, b, 0, DEPTH, d2, NULL), TF_OK);
	cr_assert_eq(memcmp(d1, d2, sizeof(d1)), 0, "the MTP state after speculating");

	/* Refused: depths outside 1..max_depth, past the context. */
	cr_assert_eq(tf_seq_speculate(e, a, 0, la, spec, &(int){ 0 }), TF_ERR_RANGE);
	cr_assert_eq(tf_seq_speculate(e, a, DEPTH + 1, la, spec, &(int){ 0 }), TF_ERR_RANGE);
	cr_assert(strstr(tf_engine_errmsg(), "drafter mtp's max_depth"), "%s", tf_engine_errmsg());
	cr_assert_eq(tf_seq_len(e, a), tf_seq_len(e, b));
	free(p);
	free(x);
	free(l1);
	free(l2);
	free(la);
	free(lb);
	tf_engine_close(e);

	/* Without a drafter nothing drafts. */
	e = engine_open(NULL);
	a = seq_new(e);
	feed(e, a, (int32_t[]){ 1, 2 }, 2, 2, NULL, NULL);
	cr_assert_eq(tf_seq_draft(e, a, 3, 1, d1, NULL), TF_ERR_INVALID);
	cr_assert(strstr(tf_engine_errmsg(), "[mtp] enabled"), "%s", tf_engine_errmsg());
	tf_engine_close(e);
}

/*
 * ---- undoing rejected drafts ----
 *
 * A speculative step that rejects drafts goes back to its snapshot and
 * runs the attention of the kept rows again from the inputs its verify
 * computed.  Its twin does it the long way: the same verify, then a
 * truncation that replays the kept tokens through the whole model.  Both
 * must leave every layer in the same state, bit for bit: the next
 * token's logits and the MTP layer's drafts after it are compared with
 * memcmp.  ling-tiny's random MTP head makes most drafts rejected, at
 * every position.
 */
Test(engine, mtp_undo_equals_a_full_replay)
{
	enum { NP = 40, DEPTH = 3, NS = 12 };
	const char *sets[] = { "mtp.enabled=true", "mtp.max_depth=3", "runtime.kv_cache=f32" };
	tf_engine *e = NULL;
	cr_assert_eq(tf_engine_open(ini, sets, 3, &e), TF_OK, "%s", tf_engine_errmsg());
	int V = tf_engine_vocab(e);
	int32_t *p = tokens(910, NP, V), *x = tokens(911, NS, V);
	int32_t spec[DEPTH + 1], draft[DEPTH], verify[DEPTH + 1];
	float *la = rows_alloc(1, V), *lb = rows_alloc(1, V), *lv = rows_alloc(DEPTH + 1, V);
	float *l1 = rows_alloc(DEPTH, V), *l2 = rows_alloc(DEPTH, V);
	tf_sampler_params greedy;
	tf_sampler_params_default(&greedy);
	greedy.temperature = 0;

	tf_seq_id a = seq_new(e), b, c;
	cr_assert_eq(tf_seq_set_sampling(e, a, &greedy, 0), TF_OK);
	feed(e, a, p, NP - 1, CHUNK, NULL, NULL);
	feed(e, a, p + NP - 1, 1, 1, la, NULL);
	int rejected_at[DEPTH + 1] = { 0 };
	for (int step = 0; step < NS; step++) {
		int64_t len = tf_seq_len(e, a);
		int n;
		cr_assert_eq(tf_seq_fork(e, a, &b), TF_OK, "%s", tf_engine_errmsg());
		memcpy(lb, la, (size_t)V * sizeof(float));
		cr_assert_eq(tf_seq_speculate(e, a, DEPTH, la, spec, &n), TF_OK, "%s",
			     tf_engine_errmsg());
		rejected_at[n - 1] += n <= DEPTH;

		/* b: the same verify, then a truncation. */
		cr_assert_eq(tf_seq_sample(e, b, lb, &verify[0]), TF_OK);
		cr_assert_eq(verify[0], spec[0]);
		cr_assert_eq(tf_seq_draft(e, b, verify[0], DEPTH, draft, NULL), TF_OK);
		memcpy(verify + 1, draft, sizeof(draft));
		cr_assert_eq(tf_seq_snapshot(e, b), TF_OK);
		feed(e, b, verify, DEPTH + 1, DEPTH + 1, lv, NULL);
		cr_assert_eq(memcmp(la, lv + (size_t)(n - 1) * V, (size_t)V * sizeof(float)), 0,
			     "step %d: the logits speculation returned", step);
		cr_assert_eq(tf_seq_truncate(e, b, len + n), TF_OK, "%s", tf_engine_errmsg());
		cr_assert_eq(memcmp(tf_seq_tokens(e, a), tf_seq_tokens(e, b),
				    (size_t)(len + n) * sizeof(int32_t)), 0);

		/* The next token on a copy of a and on b: the same bits. */
		cr_assert_eq(tf_seq_fork(e, a, &c), TF_OK, "%s", tf_engine_errmsg());
		feed(e, c, x + step, 1, 1, l1, NULL);
		feed(e, b, x + step, 1, 1, l2, NULL);
		cr_assert_eq(memcmp(l1, l2, (size_t)V * sizeof(float)), 0,
			     "step %d (%d kept): logits after undoing", step, n);
		cr_assert_eq(tf_seq_draft(e, c, x[(step + 1) % NS], DEPTH, draft, l1), TF_OK);
		cr_assert_eq(tf_seq_draft(e, b, x[(step + 1) % NS], DEPTH, draft, l2), TF_OK);
		cr_assert_eq(memcmp(l1, l2, (size_t)DEPTH * V * sizeof(float)), 0,
			     "step %d (%d kept): the MTP layer after undoing", step, n);
		cr_assert_eq(tf_seq_free(e, b), TF_OK);
		cr_assert_eq(tf_seq_free(e, c), TF_OK);
	}
	cr_assert_gt(rejected_at[0], 0, "no step rejected its first draft");
	free(p);
	free(x);
	free(la);
	free(lb);
	free(lv);
	free(l1);
	free(l2);
	tf_engine_close(e);
}

/*
 * ---- speculation in batched steps ----
 *
 * Every drafter's batched steps against serial decoding are the
 * conformance suite's (tests/conformance/drafter_cases.c).  Here: a step
 * with a sequence that does not exist and one given twice, which fail on
 * their own, naming why, while the others step; and the caller's
 * snapshot, which speculation leaves alone.
 */
enum { SP_PROMPT = 24, SP_DEPTH = 3, SP_SMALL = 8 };

/* Greedy, or seeded draws; with `small` over the first SP_SMALL ids only:
 * a random model soon repeats itself there, and ngram drafts that. */
static void sp_sampling(tf_engine *e, tf_seq_id s, int i, bool small)
{
	tf_sampler_params p;
	tf_sampler_params_default(&p);
	p.temperature = i ? 0.8f : 0;
	p.seed = 7 + (uint64_t)i;
	cr_assert_eq(tf_seq_set_sampling(e, s, &p, small ? SP_SMALL : 0), TF_OK);
}

Test(engine, a_batched_steps_failures_stay_its_own)
{
	const char *sets[] = { "plugins.drafter=ngram", "ngram.max_depth=3", "ngram.min_n=1" };
	tf_engine *e = NULL;
	cr_assert_eq(tf_engine_open(ini, sets, 3, &e), TF_OK, "%s", tf_engine_errmsg());
	int V = tf_engine_vocab(e);
	int32_t *p = tokens(950, SP_PROMPT, SP_SMALL), spec[4][SP_DEPTH + 1];
	float *lg = rows_alloc(4, V);
	tf_seq_id a = seq_new(e), gone = seq_new(e);
	feed(e, a, p, SP_PROMPT, CHUNK, NULL, NULL);
	feed(e, gone, p, 2, 2, NULL, NULL);
	feed(e, a, p, 1, 1, lg, NULL);
	memcpy(lg + V, lg, (size_t)V * sizeof(*lg));
	cr_assert_eq(tf_seq_free(e, gone), TF_OK);
	int64_t len = tf_seq_len(e, a);
	tf_spec_step st[3] = {
		{ .seq = gone, .max_depth = 1, .logits = lg + V, .tokens = spec[0] },
		{ .seq = a, .max_depth = SP_DEPTH, .logits = lg, .tokens = spec[1] },
		{ .seq = a, .max_depth = SP_DEPTH, .logits = lg + 2 * V, .tokens = spec[2] },
	};
	cr_assert_eq(tf_engine_step(e, st, 3), TF_OK, "%s", tf_engine_errmsg());
	cr_assert_eq(st[0].status, TF_ERR_INVALID);
	cr_assert(strstr(st[0].error, "was freed"), "%s", st[0].error);
	cr_assert_eq(st[1].status, TF_OK, "%s", st[1].error);
	cr_assert_eq(tf_seq_len(e, a), len + st[1].n);
	cr_assert_eq(st[2].status, TF_ERR_INVALID);
	cr_assert(strstr(st[2].error, "twice in one step"), "%s", st[2].error);
	cr_assert_eq(st[0].n + st[2].n, 0);
	/* A depth past the drafter's most fails that sequence alone. */
	st[1].max_depth = SP_DEPTH + 1;
	cr_assert_eq(tf_engine_step(e, st + 1, 1), TF_OK);
	cr_assert_eq(st[1].status, TF_ERR_RANGE, "%s", st[1].error);
	cr_assert_eq(tf_engine_step(e, st, 0), TF_ERR_INVALID);
	free(p);
	free(lg);
	tf_engine_close(e);
}

/* The verify's snapshot is its own: speculative steps that undo drafts
 * leave the caller's (tf_seq_snapshot) where it was, and rolling back to
 * it gives what it gave before, bit for bit. */
Test(engine, speculation_leaves_the_callers_snapshot)
{
	const char *sets[] = { "mtp.enabled=true", "mtp.max_depth=3", "mtp.adaptive=false",
			       "runtime.kv_cache=f32" };
	tf_engine *e = NULL;
	cr_assert_eq(tf_engine_open(ini, sets, 4, &e), TF_OK, "%s", tf_engine_errmsg());
	int V = tf_engine_vocab(e), n, drafted, undone = 0;
	int32_t *p = tokens(960, SP_PROMPT, V), spec[SP_DEPTH + 1];
	float *la = rows_alloc(1, V), *lb = rows_alloc(1, V);
	tf_seq_id a = seq_new(e);
	sp_sampling(e, a, 0, false);
	feed(e, a, p, SP_PROMPT - 1, CHUNK, NULL, NULL);
	cr_assert_eq(tf_seq_snapshot(e, a), TF_OK);
	feed(e, a, p + SP_PROMPT - 1, 1, 1, la, NULL);
	memcpy(lb, la, (size_t)V * sizeof(*la));
	for (int k = 0; k < 6; k++) {
		cr_assert_eq(tf_seq_step(e, a, SP_DEPTH, lb, spec, &n, &drafted), TF_OK, "%s",
			     tf_engine_errmsg());
		undone += n - 1 < drafted;
	}
	tf_spec_step st = { .seq = a, .max_depth = SP_DEPTH, .logits = lb, .tokens = spec };
	cr_assert_eq(tf_engine_step(e, &st, 1), TF_OK);
	cr_assert_eq(st.status, TF_OK, "%s", st.error);
	undone += st.n - 1 < st.drafted;
	cr_assert_gt(undone, 0, "no step undid drafts");
	cr_assert_eq(tf_seq_rollback(e, a), TF_OK, "%s", tf_engine_errmsg());
	cr_assert_eq(tf_seq_len(e, a), SP_PROMPT - 1);
	feed(e, a, p + SP_PROMPT - 1, 1, 1, lb, NULL);
	cr_assert_eq(memcmp(la, lb, (size_t)V * sizeof(*la)), 0);
	free(p);
	free(la);
	free(lb);
	tf_engine_close(e);
}

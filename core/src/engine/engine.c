/*
 * engine.c - the library API of tf/engine.h: the sequence table, batches
 * checked, grouped by sequence and cut into pipeline steps.
 *
 * A batch is checked whole before any step runs (ids, tokens, positions,
 * room), so a refused batch moves nothing.  Its tokens are then grouped by
 * sequence, in order of first appearance, and run in steps of at most
 * [runtime] prefill_chunk rows; the hidden states asked for are gathered
 * in batch order and lm_head runs once over all of them.
 *
 * Each sequence keeps its tokens: truncation replays them after the last
 * snapshot, because recurrent (KDA) state cannot be cut.
 *
 * Speculation asks the drafter plugin for drafts (tf/drafter.h; it may run
 * the MTP layer, pipeline.h, through the host), verifies them in one
 * batch, and keeps the accepted ones: back to the snapshot taken before
 * the verify, then only the attention of the accepted rows again, from
 * the inputs the verify computed (the verify's tape).
 *
 * Tensor parallel ([tp] size > 1): the engine opens the communicator
 * (its handshake comparing the ranks' fingerprints) before the layers;
 * rank 0 sends each state-changing call to the others (tpsync.h), which
 * replay them in tf_engine_follow.  A speculative step's parts travel so
 * too: its MTP rows (the drafter runs on rank 0, which tells the
 * followers each row's token), its verify (which tapes on every rank) and
 * the undoing of rejected drafts (each rank from its own tape).
 */
#include "tf/engine.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pipeline.h"
#include "engine/runtime.h"
#include "engine/sampler.h"
#include "engine/seqstate.h"
#include "tf/backend.h"
#include "tf/diag.h"
#include "tf/drafter.h"
#include "tf/tp.h"
#include "engine/tpsync.h"

/* An id is the slot in the low bits and the slot's generation above, so a
 * freed id stays refused after its slot is reused; [runtime] sequences
 * is at most 1 << SEQ_SLOT_BITS. */
#define SEQ_SLOT_BITS 12
#define SEQ_GEN_MASK ((1u << (31 - SEQ_SLOT_BITS)) - 1)

/* The most rows a verify's tape keeps (engine_open_drafter): 16 sequences
 * drafting 3 deep. */
#define TAPE_ROWS 64

struct tf_seq {
	uint32_t gen;
	bool alive;
	bool broken;                    /* a step failed part way: truncate it */
	tf_seqstate *st;
	int64_t len, mark;              /* mark: the snapshot's length, or -1 */
	int32_t *tok;                   /* [len] of [cap] */
	int64_t cap;
	tf_sampler smp;                 /* smp.par and the vocabulary limit hold */
	void *dseq;                     /* the drafter's state of it */
	int32_t pending;                /* the next token, chosen already, or -1 */
	tf_mask_fn mask;                /* the caller's constraint, or NULL */
	void *mask_ctx;

	/* While a batch is checked and run. */
	int64_t nb, row0, fill, last;
};

struct tf_engine {
	tf_runtime *rt;
	tf_pipeline *p;
	const tf_backend *be;
	void *bctx;
	int max_seqs, vocab, hidden;
	int64_t context, rows;
	struct tf_seq *seq;             /* [max_seqs] */
	int *touched;                   /* [max_seqs]: slots of the batch, first seen first */
	float *masked;                  /* [vocab]: logits a constraint masked */

	/* One step: [rows] each. */
	int32_t *step_tok, *step_pos;
	tf_pipe_seg *step_seg;
	int64_t *step_row, *step_at;

	/* One batch, grown as needed. */
	int64_t *order, *out_at;        /* [n]: grouped row -> batch index; batch index -> output */
	int64_t batch_cap;
	float *hid;                     /* [hid_cap, hidden] backend memory */
	int64_t hid_cap;

	/* The drafter, its instance and its most drafts (0: none); the MTP
	 * rows' hidden [hidden] (backend memory) and logits [vocab]; a
	 * verify's logits [depth + 1, vocab]; for [draft] accept = standard
	 * the verify's distribution pd [vocab] and the drafts' qd [depth,
	 * vocab], dense, qset[i] where draft i was drawn (else certain). */
	const tf_plugin_drafter *dr;
	void *dinst;
	bool dinit;                     /* dinst made: fini it */
	int depth;
	bool mtp;                       /* the drafter runs the MTP layer */
	bool standard;                  /* [draft] accept = standard */
	float *dhid, *dlog, *vlog, *pd, *qd;
	uint8_t *qset;
	uint8_t *vout;                  /* [depth + 1] ones: a verify wants every row */
	int spec_cap;                   /* sequences tf_engine_step's buffers hold */
	int32_t *btok;                  /* tf_engine_step's batch: [spec_cap * (depth + 1)] */
	tf_seq_id *bseq;
	struct spec *specs;             /* [spec_cap] */

	/* [tp] size > 1: the communicator, this rank, the forward calls so
	 * far (errors name the step), and a follower's received batch and
	 * the logits its lm_head share gathers. */
	tf_tp *tp;
	int rank;
	bool leading;                   /* rank 0, open, its peers reachable: close tells them */
	int64_t steps;
	tf_tpsync_buf tbuf;
	tf_tpsync_beat *beat;           /* rank 0: the heartbeat while idle */
	float *flog;
	int64_t flog_rows;

	/* tf_engine_defer_logits: the logits a forward owes its caller's
	 * buffer `host` [n, vocab] are rows row0.. of the pipeline's kept
	 * logits (n 0: none owed); samples: the tokens picked there. */
	bool defer;
	struct {
		float *host;
		int64_t row0, n;
	} owed;
	int64_t samples;
	uint64_t *draw_seq, *draw_pos;  /* [depth + 1]: a device pick's (seq, pos) */
	int32_t *draw_tok;              /* [depth + 1]: a verify's picks */
};

const char *tf_engine_errmsg(void) { return tf_diag_msg(); }

uint64_t tf_engine_active_bytes(const tf_engine *e)
{
	return tf_runtime_plan(e->rt)->rank_active;
}

void tf_engine_close(tf_engine *e)
{
	if (!e)
		return;
	tf_tpsync_beat_stop(e->beat);
	if (e->leading)                 /* the followers' loops end */
		tf_tpsync_send(e->tp, (tf_tpsync_msg){ .op = TF_TPSYNC_CLOSE }, NULL);
	tf_tp_close(e->tp);
	tf_tpsync_buf_free(&e->tbuf);
	free(e->flog);
	for (int i = 0; e->seq && i < e->max_seqs; i++) {
		if (e->seq[i].alive && e->dr && e->dr->seq_free)
			e->dr->seq_free(e->dinst, e->seq[i].dseq);
		tf_seqstate_free(e->seq[i].st);
		tf_sampler_free(&e->seq[i].smp);
		free(e->seq[i].tok);
	}
	if (e->hid)
		e->be->free(e->bctx, e->hid);
	if (e->dhid)
		e->be->free(e->bctx, e->dhid);
	free(e->masked);
	free(e->dlog);
	free(e->vlog);
	free(e->pd);
	free(e->qd);
	free(e->qset);
	free(e->vout);
	free(e->btok);
	free(e->bseq);
	free(e->specs);
	if (e->dinit)
		e->dr->fini(e->dinst);
	free(e->draw_seq);
	free(e->draw_pos);
	free(e->draw_tok);
	tf_pipeline_free(e->p);
	tf_runtime_close(e->rt);
	free(e->seq);
	free(e->touched);
	free(e->step_tok);
	free(e->step_pos);
	free(e->step_seg);
	free(e->step_row);
	free(e->step_at);
	free(e->order);
	free(e->out_at);
	free(e);
}

/* The drafter's instance and what its steps need: [draft] accept, the
 * verify's buffers and tape, and the MTP rows' when it runs the layer. */
static int engine_open_drafter(tf_engine *e)
{
	const tf_conf *c = tf_runtime_conf(e->rt);
	int accept, rc;
	if (tf_conf_get(c, "mtp", "accept"))
		return tf_conf_fail(c, TF_ERR_INVALID, "mtp", "accept",
				    "moved: write [draft] accept, which judges any drafter's drafts");
	if ((rc = tf_conf_get_enum(c, "draft", "accept", 0, &accept)) != TF_OK)
		return rc;
	e->standard = accept == 1;
	if (!(e->dr = tf_runtime_drafter(e->rt)))
		return TF_OK;
	if ((rc = e->dr->init(tf_runtime_host(e->rt), &e->dinst)) != TF_OK)
		return tf_diag_prefix(rc, "drafter %s", e->dr->hdr.name);
	e->dinit = true;
	e->depth = e->dr->max_depth(e->dinst);
	if (e->depth < 1 || e->depth > TF_DRAFT_MAX_DEPTH)
		return tf_diag_set(TF_ERR_INVALID, "drafter %s: its max_depth is %d, outside 1..%d",
				   e->dr->hdr.name, e->depth, TF_DRAFT_MAX_DEPTH);
	e->mtp = tf_pipeline_has_mtp(e->p);
	size_t v = (size_t)e->vocab * sizeof(float);
	if (e->mtp && !(e->dhid = e->be->alloc(e->bctx, (size_t)e->hidden * sizeof(float))))
		return tf_diag_set(TF_ERR_NOMEM, "engine: out of memory for the MTP rows");
	e->dlog = malloc(v);
	e->vlog = malloc((size_t)(e->depth + 1) * v);
	e->pd = malloc(v);
	e->qd = malloc((size_t)e->depth * v);
	e->qset = malloc((size_t)e->depth);
	e->vout = malloc((size_t)e->depth + 1);
	if (!e->dlog || !e->vlog || !e->pd || !e->qd || !e->qset || !e->vout)
		return tf_diag_set(TF_ERR_NOMEM, "engine: out of memory for drafts");
	memset(e->vout, 1, (size_t)e->depth + 1);
	/* A verify of several sequences (tf_engine_step) tapes up to TAPE_ROWS
	 * rows; a longer one undoes by replaying through the whole model. */
	int64_t tape = (int64_t)(e->depth + 1) * e->max_seqs;
	return tf_pipeline_tape_open(e->p, tape < TAPE_ROWS ? tape : TAPE_ROWS);
}

/* [tp] size > 1: connect to the other ranks before loading the layers,
 * so disagreeing ranks are refused at once. */
static int engine_open_tp(tf_engine *e, const char *ini_path, const char *const *overrides,
			  int n_overrides)
{
	const tf_host *h = tf_runtime_host(e->rt);
	char fp[TF_TPSYNC_FP_LEN];
	int rc;
	e->rank = h->tp_rank;
	if (h->tp_size <= 1)
		return TF_OK;
	if ((rc = tf_tpsync_fingerprint(e->rt, fp)) != TF_OK)
		return rc;
	return tf_tp_open(ini_path, overrides, n_overrides, fp, &e->tp);
}

/* Beats three to a [tp] timeout keep the followers waiting. */
static int engine_start_beat(tf_engine *e)
{
	double timeout;
	int rc = tf_conf_get_float(tf_runtime_conf(e->rt), "tp", "timeout",
				   TF_TP_DEFAULT_TIMEOUT_S, &timeout);
	return rc ? rc : tf_tpsync_beat_start(e->tp, timeout / 3, &e->beat);
}

int tf_engine_open(const char *ini_path, const char *const *overrides, int n_overrides,
		   tf_engine **out)
{
	tf_engine *e = calloc(1, sizeof(*e));
	int rc;
	if (!e)
		return tf_diag_set(TF_ERR_NOMEM, "engine: out of memory");
	if ((rc = tf_runtime_open(ini_path, overrides, n_overrides, &e->rt)) != TF_OK ||
	    (rc = engine_open_tp(e, ini_path, overrides, n_overrides)) != TF_OK ||
	    (rc = tf_pipeline_init(e->rt, &e->p)) != TF_OK)
		goto fail;
	const tf_model_config *m = tf_runtime_model(e->rt);
	if ((rc = tf_runtime_check_router_pins(e->rt, tf_pipeline_has_mtp(e->p) ?
					       m->n_layers_total : m->num_hidden_layers)))
		goto fail;
	if (e->tp)
		tf_pipeline_attach_tp(e->p, e->tp);
	const tf_host *h = tf_runtime_host(e->rt);
	e->be = h->backend;
	e->bctx = h->backend_ctx;
	e->max_seqs = tf_runtime_sequences(e->rt);
	e->vocab = tf_pipeline_vocab(e->p);
	e->hidden = tf_pipeline_hidden_size(e->p);
	e->context = tf_runtime_context(e->rt);
	e->rows = tf_pipeline_rows(e->p);
	e->seq = calloc((size_t)e->max_seqs, sizeof(*e->seq));
	e->touched = malloc((size_t)e->max_seqs * sizeof(*e->touched));
	e->step_tok = malloc((size_t)e->rows * sizeof(*e->step_tok));
	e->step_pos = malloc((size_t)e->rows * sizeof(*e->step_pos));
	e->step_seg = malloc((size_t)e->rows * sizeof(*e->step_seg));
	e->step_row = malloc((size_t)e->rows * sizeof(*e->step_row));
	e->step_at = malloc((size_t)e->rows * sizeof(*e->step_at));
	e->masked = malloc((size_t)e->vocab * sizeof(*e->masked));
	if (!e->seq || !e->touched || !e->step_tok || !e->step_pos || !e->step_seg ||
	    !e->step_row || !e->step_at || !e->masked) {
		rc = tf_diag_set(TF_ERR_NOMEM, "engine: out of memory");
		goto fail;
	}
	if ((rc = engine_open_drafter(e)) != TF_OK)
		goto fail;
	/* A device pick takes one row, or a verify's rows. */
	e->draw_seq = malloc((size_t)(e->depth + 1) * sizeof(*e->draw_seq));
	e->draw_pos = malloc((size_t)(e->depth + 1) * sizeof(*e->draw_pos));
	e->draw_tok = malloc((size_t)(e->depth + 1) * sizeof(*e->draw_tok));
	if (!e->draw_seq || !e->draw_pos || !e->draw_tok) {
		rc = tf_diag_set(TF_ERR_NOMEM, "engine: out of memory");
		goto fail;
	}
	e->leading = e->tp && e->rank == 0;
	if (e->leading && (rc = engine_start_beat(e)) != TF_OK)
		goto fail;
	*out = e;
	return TF_OK;
fail:
	tf_engine_close(e);
	return rc;
}

const tf_model_config *tf_engine_model(const tf_engine *e) { return tf_runtime_model(e->rt); }
int tf_engine_vocab(const tf_engine *e) { return e->vocab; }
int tf_engine_hidden_size(const tf_engine *e) { return e->hidden; }
int64_t tf_engine_context(const tf_engine *e) { return e->context; }
int64_t tf_engine_prefill_chunk(const tf_engine *e) { return tf_runtime_prefill_chunk(e->rt); }
int tf_engine_max_seqs(const tf_engine *e) { return e->max_seqs; }
const tf_conf *tf_engine_conf(const tf_engine *e) { return tf_runtime_conf(e->rt); }
int tf_engine_draft_depth(const tf_engine *e) { return e->depth; }
bool tf_engine_has_mtp(const tf_engine *e) { return e->mtp; }
const char *tf_engine_drafter(const tf_engine *e) { return e->dr ? e->dr->hdr.name : "none"; }

/* ---- sequences ---- */

/* Rank 0 sends a call to the followers before running it; a call with
 * collectives holds the heartbeat's lock from here to their end. */
static int tp_send(tf_engine *e, tf_tpsync_msg m, const tf_batch *b)
{
	if (!e->tp || e->rank != 0)
		return TF_OK;
	if (b) {
		m.seq = b->one_seq;
		m.n = b->n;
	}
	int rc = tf_tpsync_send(e->tp, m, b);
	if (rc == TF_ERR_PEER)
		e->leading = false;
	return rc;
}

/* A call without collectives: only its send. */
static int tp_call(tf_engine *e, tf_tpsync_op op, tf_seq_id s)
{
	tf_tpsync_beat_lock(e->beat);
	int rc = tp_send(e, (tf_tpsync_msg){ .op = op, .seq = s }, NULL);
	tf_tpsync_beat_unlock(e->beat);
	return rc;
}

static tf_seq_id seq_id(const tf_engine *e, int slot)
{
	return (tf_seq_id)((e->seq[slot].gen << SEQ_SLOT_BITS) | (uint32_t)slot);
}

/* The live slot of id s, or NULL (a failure naming s recorded). */
static struct tf_seq *seq_get(const tf_engine *e, tf_seq_id s)
{
	uint32_t slot = (uint32_t)s & ((1u << SEQ_SLOT_BITS) - 1);
	if (s >= 0 && slot < (uint32_t)e->max_seqs) {
		const struct tf_seq *q = &e->seq[slot];
		if (q->alive && q->gen == (uint32_t)s >> SEQ_SLOT_BITS)
			return (struct tf_seq *)q;
		if (q->gen != (uint32_t)s >> SEQ_SLOT_BITS || !q->alive) {
			tf_diag_set(TF_ERR_INVALID, "sequence %d was freed or never made", s);
			return NULL;
		}
	}
	tf_diag_set(TF_ERR_INVALID, "sequence %d is not a sequence of this engine", s);
	return NULL;
}

/* Room for `need` tokens in q's history (at most the context). */
static int seq_reserve(struct tf_seq *q, int64_t need)
{
	if (need <= q->cap)
		return TF_OK;
	int64_t cap = q->cap ? q->cap : 256;
	while (cap < need)
		cap *= 2;
	int32_t *t = realloc(q->tok, (size_t)cap * sizeof(*t));
	if (!t)
		return tf_diag_set(TF_ERR_NOMEM, "out of memory for %" PRId64 " tokens of history",
				   cap);
	q->tok = t;
	q->cap = cap;
	return TF_OK;
}

static int seq_new(tf_engine *e, tf_seq_id *out)
{
	int slot = 0;
	while (slot < e->max_seqs && e->seq[slot].alive)
		slot++;
	if (slot == e->max_seqs)
		return tf_diag_set(TF_ERR_RANGE,
				   "all %d sequences are in use ([runtime] sequences)", e->max_seqs);
	struct tf_seq *q = &e->seq[slot];
	tf_sampler_params par;
	tf_sampler_params_default(&par);
	int rc = tf_sampler_init(&q->smp, &par, e->vocab);
	if (rc == TF_OK && (rc = tf_seqstate_new(e->p, e->context, &q->st)) != TF_OK)
		tf_sampler_free(&q->smp);
	if (rc != TF_OK)
		return rc;
	q->alive = true;
	q->broken = false;
	q->len = 0;
	q->mark = -1;
	q->pending = -1;
	q->dseq = NULL;
	q->mask = NULL;
	q->mask_ctx = NULL;
	if (e->dr && e->dr->seq_new && (rc = e->dr->seq_new(e->dinst, &q->dseq)) != TF_OK) {
		tf_seqstate_free(q->st);
		tf_sampler_free(&q->smp);
		q->st = NULL;
		q->alive = false;
		return tf_diag_prefix(rc, "drafter %s: a new sequence", e->dr->hdr.name);
	}
	*out = seq_id(e, slot);
	return TF_OK;
}

int tf_seq_new(tf_engine *e, tf_seq_id *out)
{
	int rc = tp_call(e, TF_TPSYNC_SEQ_NEW, -1);
	return rc == TF_OK ? seq_new(e, out) : rc;
}

static int seq_free(tf_engine *e, tf_seq_id s)
{
	struct tf_seq *q = seq_get(e, s);
	if (!q)
		return TF_ERR_INVALID;
	if (e->dr && e->dr->seq_free)
		e->dr->seq_free(e->dinst, q->dseq);
	q->dseq = NULL;
	tf_seqstate_free(q->st);
	tf_sampler_free(&q->smp);
	q->st = NULL;
	q->alive = false;
	q->gen = (q->gen + 1) & SEQ_GEN_MASK;
	return TF_OK;
}

int tf_seq_free(tf_engine *e, tf_seq_id s)
{
	int rc = tp_call(e, TF_TPSYNC_SEQ_FREE, s);
	return rc == TF_OK ? seq_free(e, s) : rc;
}

int64_t tf_seq_len(const tf_engine *e, tf_seq_id s)
{
	const struct tf_seq *q = seq_get(e, s);
	return q ? q->len : -1;
}

const int32_t *tf_seq_tokens(const tf_engine *e, tf_seq_id s)
{
	const struct tf_seq *q = seq_get(e, s);
	return q ? q->tok : NULL;
}

/* A broken sequence's state is not what its tokens say. */
static int seq_usable(const struct tf_seq *q, tf_seq_id s)
{
	if (!q->broken)
		return TF_OK;
	return tf_diag_set(TF_ERR_INVALID,
			   "sequence %d: a step failed part way through it; truncate it first", s);
}

int tf_seq_fork(tf_engine *e, tf_seq_id src, tf_seq_id *out)
{
	struct tf_seq *q = seq_get(e, src);
	tf_seq_id id;
	int rc;
	if (!q)
		return TF_ERR_INVALID;
	if ((rc = tp_call(e, TF_TPSYNC_SEQ_FORK, src)) != TF_OK ||
	    (rc = seq_usable(q, src)) != TF_OK || (rc = seq_new(e, &id)) != TF_OK)
		return rc;
	struct tf_seq *d = seq_get(e, id);
	if ((rc = seq_reserve(d, q->len)) != TF_OK ||
	    (rc = tf_seqstate_copy(d->st, q->st)) != TF_OK ||
	    (rc = tf_seq_set_sampling(e, id, &q->smp.par, q->smp.n_vocab)) != TF_OK) {
		seq_free(e, id);
		return tf_diag_prefix(rc, "fork of sequence %d", src);
	}
	if (q->len)
		memcpy(d->tok, q->tok, (size_t)q->len * sizeof(*d->tok));
	d->len = q->len;
	d->pending = q->pending;
	*out = id;
	return TF_OK;
}

int tf_seq_snapshot(tf_engine *e, tf_seq_id s)
{
	struct tf_seq *q = seq_get(e, s);
	int rc;
	if (!q)
		return TF_ERR_INVALID;
	if ((rc = tp_call(e, TF_TPSYNC_SEQ_SNAPSHOT, s)) != TF_OK ||
	    (rc = seq_usable(q, s)) != TF_OK)
		return rc;
	q->mark = -1;
	if ((rc = tf_seqstate_snapshot(q->st, TF_SNAP_USER)) != TF_OK)
		return tf_diag_prefix(rc, "sequence %d", s);
	q->mark = q->len;
	return TF_OK;
}

int tf_seq_rollback(tf_engine *e, tf_seq_id s)
{
	struct tf_seq *q = seq_get(e, s);
	int rc;
	if (!q)
		return TF_ERR_INVALID;
	if ((rc = tp_call(e, TF_TPSYNC_SEQ_ROLLBACK, s)) != TF_OK)
		return rc;
	if (q->mark < 0)
		return tf_diag_set(TF_ERR_INVALID, "sequence %d has no snapshot to roll back to", s);
	if ((rc = tf_seqstate_rollback(q->st, TF_SNAP_USER)) != TF_OK) {
		q->broken = true;
		return tf_diag_prefix(rc, "sequence %d", s);
	}
	q->len = q->mark;
	q->broken = false;
	q->pending = -1;
	return TF_OK;
}

static int engine_run(tf_engine *e, const tf_batch *b, float *logits, float *hidden,
		      bool no_out, bool verify);

/* Run q's tokens from..len again through the whole model, its state at
 * from (q->len is from). */
static int seq_replay(tf_engine *e, struct tf_seq *q, tf_seq_id s, int64_t from, int64_t len)
{
	if (from == len)
		return TF_OK;
	/* The replayed tokens are rewritten in place; run a copy. */
	int32_t *again = malloc((size_t)(len - from) * sizeof(*again));
	if (!again) {
		q->broken = true;
		return tf_diag_set(TF_ERR_NOMEM, "sequence %d: out of memory to replay", s);
	}
	memcpy(again, q->tok + from, (size_t)(len - from) * sizeof(*again));
	const tf_batch b = { .n = len - from, .token = again, .one_seq = s };
	int rc = engine_run(e, &b, NULL, NULL, true, false);
	free(again);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "sequence %d: replaying %" PRId64 " tokens", s, len - from);
	return TF_OK;
}

static int seq_truncate(tf_engine *e, tf_seq_id s, int64_t len)
{
	struct tf_seq *q = seq_get(e, s);
	int rc;
	if (!q)
		return TF_ERR_INVALID;
	if (len < 0 || len > q->len)
		return tf_diag_set(TF_ERR_INVALID,
				   "sequence %d holds %" PRId64 " tokens: cannot keep %" PRId64,
				   s, q->len, len);
	if (len == q->len && !q->broken)
		return TF_OK;
	int64_t from = 0;
	if (q->mark >= 0 && q->mark <= len) {
		if ((rc = tf_seqstate_rollback(q->st, TF_SNAP_USER)) != TF_OK) {
			q->broken = true;
			return tf_diag_prefix(rc, "sequence %d", s);
		}
		from = q->mark;
	} else {
		tf_seqstate_reset(q->st);
		q->mark = -1;           /* the cache cannot roll forward to it */
	}
	q->len = from;
	q->broken = false;
	q->pending = -1;
	return seq_replay(e, q, s, from, len);
}

int tf_seq_truncate(tf_engine *e, tf_seq_id s, int64_t len)
{
	tf_tpsync_beat_lock(e->beat);
	int rc = tp_send(e, (tf_tpsync_msg){ .op = TF_TPSYNC_SEQ_TRUNCATE, .seq = s, .arg = len },
			 NULL);
	if (rc == TF_OK)
		rc = seq_truncate(e, s, len);
	tf_tpsync_beat_unlock(e->beat);
	return rc;
}

int tf_seq_set_sampling(tf_engine *e, tf_seq_id s, const tf_sampler_params *p, int n_vocab)
{
	struct tf_seq *q = seq_get(e, s);
	tf_sampler fresh;
	if (!q)
		return TF_ERR_INVALID;
	if (n_vocab < 0 || n_vocab > e->vocab)
		return tf_diag_set(TF_ERR_INVALID, "sequence %d: sampling vocabulary %d outside 0..%d",
				   s, n_vocab, e->vocab);
	int rc = tf_sampler_init(&fresh, p, n_vocab ? n_vocab : e->vocab);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "sequence %d", s);
	tf_sampler_free(&q->smp);
	q->smp = fresh;
	return TF_OK;
}

/* ---- logits left on the device ---- */

void tf_engine_defer_logits(tf_engine *e, bool on)
{
	e->defer = on && tf_pipeline_can_sample(e->p);
}

int64_t tf_engine_device_samples(const tf_engine *e) { return e->samples; }

/* Write what is owed into its buffer; nothing is owed after. */
static int owed_pay(tf_engine *e)
{
	int64_t n = e->owed.n;
	e->owed.n = 0;
	return n ? tf_pipeline_kept_logits(e->p, e->owed.row0, n, e->owed.host) : TF_OK;
}

int tf_engine_logits_wait(tf_engine *e) { return owed_pay(e); }

/* A head is about to replace the kept logits, its rows going to dst:
 * what is owed elsewhere is paid first; what is owed to dst, which the
 * head overwrites anyway, is dropped. */
static int owed_settle(tf_engine *e, const float *dst)
{
	if (e->owed.n && e->owed.host == dst)
		e->owed.n = 0;
	return owed_pay(e);
}

/* The kept row that host row `logits` is owed from, or -1. */
static int64_t owed_row(const tf_engine *e, const float *logits)
{
	if (!e->owed.n || logits < e->owed.host ||
	    logits >= e->owed.host + e->owed.n * (int64_t)e->vocab)
		return -1;
	ptrdiff_t at = logits - e->owed.host;
	return at % e->vocab ? -1 : e->owed.row0 + at / e->vocab;
}

/* The sampler's choices after the first len, len + 1, ... len + n - 1
 * tokens of q, from n rows of logits [n, vocab] still owed from the
 * device, picked there: TF_ERR_UNSUPPORTED when they are not all owed or
 * the backend does not reproduce q's sampler; -1 for a row it finds all
 * -inf. */
static int seq_pick_dev(tf_engine *e, struct tf_seq *q, const float *logits, int64_t len,
			int64_t n, int32_t *token)
{
	const tf_sampler_params *par = &q->smp.par;
	int64_t row = owed_row(e, logits);
	if (row < 0 || owed_row(e, logits + (n - 1) * (int64_t)e->vocab) != row + n - 1 ||
	    par->frequency_penalty != 0.0f || par->n_logit_bias || q->mask)
		return TF_ERR_UNSUPPORTED;      /* the host's alone: see tf/sampler.h */
	for (int64_t i = 0; i < n; i++) {
		e->draw_seq[i] = 0;
		e->draw_pos[i] = (uint64_t)(len + i);
	}
	int rc = tf_pipeline_sample(e->p, par, row, n, q->smp.n_vocab, e->draw_seq,
				    e->draw_pos, token);
	for (int64_t i = 0; rc == TF_OK && i < n; i++)
		e->samples += token[i] >= 0;
	return rc;
}

/* The sampler's choice after the first len tokens of q, from logits: on
 * the device where it can (seq_pick_dev), else on the host, downloading
 * owed logits first (a row the device finds all -inf gets the sampler's
 * error there). */
static int seq_pick(tf_engine *e, struct tf_seq *q, tf_seq_id s, const float *logits,
		    int64_t len, int32_t *token)
{
	int rc = seq_pick_dev(e, q, logits, len, 1, token);
	if (rc == TF_OK && *token >= 0)
		return TF_OK;
	if ((rc == TF_OK || rc == TF_ERR_UNSUPPORTED) && (rc = owed_pay(e)) == TF_OK && q->mask) {
		memcpy(e->masked, logits, (size_t)e->vocab * sizeof(*e->masked));
		logits = e->masked;
		rc = q->mask(q->mask_ctx, e->masked);
	}
	if (rc == TF_OK)
		rc = tf_sampler_sample(&q->smp, logits, q->tok, (size_t)len, 0, (uint64_t)len,
				       token);
	return rc == TF_OK ? TF_OK : tf_diag_prefix(rc, "sequence %d", s);
}

int tf_seq_constrain(tf_engine *e, tf_seq_id s, tf_mask_fn mask, void *ctx)
{
	struct tf_seq *q = seq_get(e, s);
	if (!q)
		return TF_ERR_INVALID;
	q->mask = mask;
	q->mask_ctx = mask ? ctx : NULL;
	return TF_OK;
}

int tf_seq_sample(tf_engine *e, tf_seq_id s, const float *logits, int32_t *token)
{
	struct tf_seq *q = seq_get(e, s);
	if (!q)
		return TF_ERR_INVALID;
	if (q->pending < 0)
		return seq_pick(e, q, s, logits, q->len, token);
	*token = q->pending;            /* a rejected draft's replacement */
	return TF_OK;
}

/* ---- batches ---- */

static tf_seq_id batch_seq(const tf_batch *b, int64_t i)
{
	return b->seq ? b->seq[i] : b->one_seq;
}

int64_t tf_batch_outputs(const tf_batch *b)
{
	int64_t n = 0;
	if (b->out) {
		for (int64_t i = 0; i < b->n; i++)
			n += b->out[i] != 0;
		return n;
	}
	if (!b->seq)
		return b->n > 0;
	/* A token is its sequence's last when none after it shares it. */
	for (int64_t i = 0; i < b->n; i++) {
		int64_t j = i + 1;
		while (j < b->n && b->seq[j] != b->seq[i])
			j++;
		n += j == b->n;
	}
	return n;
}

/* Forget the per-batch counts of the slots a batch touched. */
static void batch_clear(tf_engine *e, int n_touched)
{
	for (int k = 0; k < n_touched; k++)
		e->seq[e->touched[k]].nb = 0;
}

/*
 * Check every token of b (sequence alive and usable, in the vocabulary,
 * at its sequence's next position, within the context) and count each
 * sequence's tokens; *n_touched slots were touched, first seen first.
 */
static int batch_check(tf_engine *e, const tf_batch *b, int *n_touched)
{
	int rc;
	*n_touched = 0;
	for (int64_t i = 0; i < b->n; i++) {
		tf_seq_id s = batch_seq(b, i);
		struct tf_seq *q = seq_get(e, s);
		if (!q)
			return tf_diag_prefix(TF_ERR_INVALID, "batch token %" PRId64, i);
		if (q->nb == 0) {
			if ((rc = seq_usable(q, s)) != TF_OK)
				return rc;
			e->touched[(*n_touched)++] = (int)(q - e->seq);
		}
		int64_t at = q->len + q->nb;
		if (b->token[i] < 0 || b->token[i] >= e->vocab)
			return tf_diag_set(TF_ERR_INVALID,
					   "batch token %" PRId64 ": token id %d of sequence %d is outside the vocabulary [0, %d)",
					   i, b->token[i], s, e->vocab);
		if (b->pos && b->pos[i] != at)
			return tf_diag_set(TF_ERR_INVALID,
					   "batch token %" PRId64 " of sequence %d: position %d, but the sequence continues at %" PRId64 " (%s)",
					   i, s, b->pos[i], at, b->pos[i] > at ? "a gap" : "an overlap");
		if (at >= e->context)
			return tf_diag_set(TF_ERR_RANGE,
					   "sequence %d: %" PRId64 " tokens after %" PRId64 " exceed the context of %" PRId64 " tokens ([runtime] context)",
					   s, q->nb + 1, q->len, e->context);
		q->nb++;
		q->last = i;
	}
	for (int k = 0; k < *n_touched; k++) {
		struct tf_seq *q = &e->seq[e->touched[k]];
		if ((rc = seq_reserve(q, q->len + q->nb)) != TF_OK)
			return rc;
	}
	return TF_OK;
}

/* Grow the batch arrays to n tokens and the hidden buffer to n_out rows. */
static int batch_reserve(tf_engine *e, int64_t n, int64_t n_out)
{
	if (n > e->batch_cap) {
		int64_t *o = realloc(e->order, (size_t)n * sizeof(*o));
		if (o)
			e->order = o;
		int64_t *a = o ? realloc(e->out_at, (size_t)n * sizeof(*a)) : NULL;
		if (!a)
			return tf_diag_set(TF_ERR_NOMEM, "engine: out of memory for a batch of %" PRId64
					   " tokens", n);
		e->out_at = a;
		e->batch_cap = n;
	}
	if (n_out > e->hid_cap) {
		float *h = e->be->alloc(e->bctx, (size_t)n_out * (size_t)e->hidden * sizeof(float));
		if (!h)
			return tf_diag_set(TF_ERR_NOMEM, "engine: out of memory for %" PRId64
					   " hidden rows", n_out);
		if (e->hid)
			e->be->free(e->bctx, e->hid);
		e->hid = h;
		e->hid_cap = n_out;
	}
	return TF_OK;
}

/* Grouped rows [r0, r0 + m) through one pipeline step. */
static int batch_step(tf_engine *e, const tf_batch *b, int64_t r0, int64_t m)
{
	int n_seg = 0;
	int64_t n_out = 0;
	for (int64_t j = 0; j < m; j++) {
		int64_t i = e->order[r0 + j];
		struct tf_seq *q = seq_get(e, batch_seq(b, i));
		if (!n_seg || e->step_seg[n_seg - 1].state != q->st)
			e->step_seg[n_seg++] = (tf_pipe_seg){ .state = q->st, .row0 = j };
		e->step_seg[n_seg - 1].n++;
		e->step_tok[j] = b->token[i];
		e->step_pos[j] = (int32_t)(q->len + (r0 + j - q->row0));
		if (e->out_at[i] >= 0) {
			e->step_row[n_out] = j;
			e->step_at[n_out++] = e->out_at[i];
		}
	}
	const tf_pipe_out out = { .row = e->step_row, .at = e->step_at, .n = n_out };
	return tf_pipeline_step(e->p, e->step_tok, e->step_pos, m, e->step_seg, n_seg, &out,
				e->hid);
}

/* A batch's rows through the pipeline; `verify`: each sequence with
 * several rows in it is snapshot first (TF_SNAP_VERIFY), to undo drafts
 * from. */
static int engine_run(tf_engine *e, const tf_batch *b, float *logits, float *hidden,
		      bool no_out, bool verify)
{
	int n_touched = 0, rc;
	int64_t n_out = 0;

	if (!b || b->n < 1 || !b->token)
		return tf_diag_set(TF_ERR_INVALID, "engine: an empty batch");
	if ((rc = batch_check(e, b, &n_touched)) != TF_OK ||
	    (rc = batch_reserve(e, b->n, no_out ? 0 : tf_batch_outputs(b))) != TF_OK)
		goto out;
	for (int k = 0; verify && k < n_touched; k++) {
		struct tf_seq *q = &e->seq[e->touched[k]];
		if (q->nb > 1 && (rc = tf_seqstate_snapshot(q->st, TF_SNAP_VERIFY)) != TF_OK) {
			rc = tf_diag_prefix(rc, "sequence %d: before a verify",
					    seq_id(e, e->touched[k]));
			goto out;
		}
	}

	/* Group rows by sequence, first seen first; number the outputs. */
	for (int k = 0, row = 0; k < n_touched; k++) {
		struct tf_seq *q = &e->seq[e->touched[k]];
		q->row0 = row;
		q->fill = 0;
		row += (int)q->nb;
	}
	for (int64_t i = 0; i < b->n; i++) {
		struct tf_seq *q = seq_get(e, batch_seq(b, i));
		e->order[q->row0 + q->fill++] = i;
		bool want = !no_out && (b->out ? b->out[i] != 0 : q->last == i);
		e->out_at[i] = want ? n_out++ : -1;
	}

	for (int64_t r0 = 0; r0 < b->n; r0 += e->rows) {
		int64_t m = b->n - r0 < e->rows ? b->n - r0 : e->rows;
		if ((rc = batch_step(e, b, r0, m)) != TF_OK) {
			/* Sequences of this step may have moved part way. */
			for (int64_t j = r0; j < r0 + m; j++)
				seq_get(e, batch_seq(b, e->order[j]))->broken = true;
			goto out;
		}
		/* The rows ran: their sequences hold them now. */
		for (int64_t j = r0; j < r0 + m; j++) {
			int64_t i = e->order[j];
			struct tf_seq *q = seq_get(e, batch_seq(b, i));
			q->tok[q->len + (j - q->row0)] = b->token[i];
			q->pending = -1;
		}
		for (int k = 0; k < n_touched; k++) {
			struct tf_seq *q = &e->seq[e->touched[k]];
			int64_t lo = q->row0 > r0 ? q->row0 : r0;
			int64_t hi = q->row0 + q->nb < r0 + m ? q->row0 + q->nb : r0 + m;
			if (hi > lo) {  /* its rows left start at row0 + (hi - lo) */
				q->len += hi - lo;
				q->row0 += hi - lo;
				q->nb -= hi - lo;
			}
		}
	}
	if (n_out && logits && (rc = owed_settle(e, logits)) == TF_OK) {
		if (e->defer) {
			rc = tf_pipeline_head_keep(e->p, e->hid, n_out);
			e->owed.host = logits;
			e->owed.row0 = 0;
			e->owed.n = rc == TF_OK ? n_out : 0;
		} else {
			rc = tf_pipeline_head(e->p, e->hid, n_out, logits);
		}
	}
	if (rc != TF_OK)
		goto out;
	if (n_out && hidden && (rc = e->be->download(e->bctx, hidden, e->hid, (size_t)n_out *
						     (size_t)e->hidden * sizeof(float))) != TF_OK)
		rc = tf_diag_set(rc, "backend %s: downloading %" PRId64 " hidden rows failed",
				 e->be->hdr.name, n_out);
out:
	batch_clear(e, n_touched);
	return rc;
}

/* tf_engine_forward; `tape`: a verify's, which keeps its tape (pipeline.h)
 * on every rank. */
static int engine_forward(tf_engine *e, const tf_batch *b, float *logits, float *hidden,
			  bool tape)
{
	if (!b || b->n < 1 || !b->token)
		return tf_diag_set(TF_ERR_INVALID, "engine: an empty batch");
	tf_tpsync_beat_lock(e->beat);
	int rc = tp_send(e, (tf_tpsync_msg){ .op = TF_TPSYNC_FORWARD,
					     .arg = (logits ? TF_TPSYNC_LOGITS : 0) |
						    (tape ? TF_TPSYNC_TAPE : 0) }, b);
	if (rc == TF_OK) {
		if (tape)
			tf_pipeline_tape(e->p);
		rc = engine_run(e, b, logits, hidden, false, tape);
	}
	tf_tpsync_beat_unlock(e->beat);
	e->steps++;
	if (rc == TF_ERR_PEER)          /* the ranks are out of step for good */
		e->leading = false;
	if (rc != TF_OK && e->tp)
		return tf_diag_prefix(rc, "rank %d, step %" PRId64, e->rank, e->steps);
	return rc;
}

int tf_engine_forward(tf_engine *e, const tf_batch *b, float *logits, float *hidden)
{
	return engine_forward(e, b, logits, hidden, false);
}

/* ---- following rank 0 ---- */

int tf_engine_tp_rank(const tf_engine *e) { return e->rank; }

/* A follower's forward: lm_head runs when rank 0's did (its all-gather
 * needs every rank), into logits of its own. */
static int follow_forward(tf_engine *e, const tf_batch *b, int64_t flags)
{
	int64_t rows = flags & TF_TPSYNC_LOGITS ? tf_batch_outputs(b) : 0;
	if (rows > e->flog_rows) {
		float *f = realloc(e->flog, (size_t)rows * (size_t)e->vocab * sizeof(float));
		if (!f)
			return tf_diag_set(TF_ERR_NOMEM, "out of memory for %" PRId64 " logit rows",
					   rows);
		e->flog = f;
		e->flog_rows = rows;
	}
	return engine_forward(e, b, rows ? e->flog : NULL, NULL, (flags & TF_TPSYNC_TAPE) != 0);
}

static int seq_draft(tf_engine *e, tf_seq_id s, int32_t next, int depth, int32_t *draft,
		     float *logits);
static int mtp_begin(tf_engine *e, struct tf_seq *q, tf_seq_id s);
static int mtp_end(struct tf_seq *q, tf_seq_id s, int rc);
static int mtp_row(tf_engine *e, struct tf_seq *q, int i, int32_t tok, float *row);
static int draft_tell(tf_engine *e, int32_t *tok);
static int mtp_open(const tf_engine *e, tf_seq_id s);
static int seq_undo(tf_engine *e, struct tf_seq *q, tf_seq_id s, int64_t len, int64_t n,
		    int64_t verified, int64_t row0);

/* SEQ_DRAFT: tf_seq_draft's greedy drafts, picked alike. */
static int follow_draft(tf_engine *e, tf_seq_id s, int32_t next, int64_t depth)
{
	if (depth < 1 || depth > e->context)
		return tf_diag_set(TF_ERR_PEER, "rank 0 asked for %" PRId64 " drafts", depth);
	int32_t *draft = malloc((size_t)depth * sizeof(*draft));
	if (!draft)
		return tf_diag_set(TF_ERR_NOMEM, "out of memory for %" PRId64 " drafts", depth);
	int rc = seq_draft(e, s, next, (int)depth, draft, NULL);
	free(draft);
	return rc;
}

/* SEQ_DRAFT_TOLD: the MTP rows of rank 0's drafter, the first fed tok,
 * each later one the token rank 0 tells, until it tells -1. */
static int follow_rows(tf_engine *e, tf_seq_id s, int32_t tok, int64_t max)
{
	struct tf_seq *q = seq_get(e, s);
	int rc;
	if (!q)
		return TF_ERR_INVALID;
	if (max < 1 || max > e->depth || tok < 0 || tok >= e->vocab)
		return tf_diag_set(TF_ERR_PEER, "rank %d: rank 0 asked for %" PRId64 " MTP rows "
				   "from token %d", e->rank, max, tok);
	if ((rc = seq_usable(q, s)) != TF_OK || (rc = mtp_open(e, s)) != TF_OK ||
	    (rc = mtp_begin(e, q, s)) != TF_OK)
		return rc;
	for (int i = 0; rc == TF_OK; i++) {
		if (i == max) {
			rc = tf_diag_set(TF_ERR_PEER, "rank %d: rank 0 ran more than %" PRId64
					 " MTP rows", e->rank, max);
			break;
		}
		if ((rc = mtp_row(e, q, i, tok, e->dlog)) != TF_OK ||
		    (rc = draft_tell(e, &tok)) != TF_OK || tok < 0)
			break;
	}
	return mtp_end(q, s, rc);
}

/* SEQ_UNDO: keep the first `kept` tokens of s, which its last call, a
 * verify of `verified` rows from the step's row row0 on, left longer. */
static int follow_undo(tf_engine *e, tf_seq_id s, int64_t kept, int64_t verified, int64_t row0)
{
	struct tf_seq *q = seq_get(e, s);
	if (!q)
		return TF_ERR_INVALID;
	int64_t len = q->len - verified;
	if (verified < 2 || len < 1 || kept <= len || kept >= q->len)
		return tf_diag_set(TF_ERR_PEER, "rank %d: rank 0 undid sequence %d of %" PRId64
				   " tokens to %" PRId64 " after a verify of %" PRId64,
				   e->rank, s, q->len, kept, verified);
	return seq_undo(e, q, s, len, kept - len, verified, row0);
}

int tf_engine_follow(tf_engine *e)
{
	tf_tpsync_msg m;
	tf_batch b;
	tf_seq_id id;
	if (!e->tp || e->rank == 0)
		return tf_diag_set(TF_ERR_INVALID, "tf_engine_follow: this engine is not a tensor-"
				   "parallel rank other than 0");
	for (;;) {
		int rc = tf_tpsync_recv(e->tp, &m, &b, &e->tbuf);
		if (rc != TF_OK)
			return tf_diag_prefix(rc, "rank %d: waiting for rank 0's call after step %"
					      PRId64, e->rank, e->steps);
		switch ((tf_tpsync_op)m.op) {
		case TF_TPSYNC_CLOSE: return TF_OK;
		case TF_TPSYNC_SEQ_NEW: rc = tf_seq_new(e, &id); break;
		case TF_TPSYNC_SEQ_FREE: rc = tf_seq_free(e, m.seq); break;
		case TF_TPSYNC_SEQ_FORK: rc = tf_seq_fork(e, m.seq, &id); break;
		case TF_TPSYNC_SEQ_SNAPSHOT: rc = tf_seq_snapshot(e, m.seq); break;
		case TF_TPSYNC_SEQ_ROLLBACK: rc = tf_seq_rollback(e, m.seq); break;
		case TF_TPSYNC_SEQ_TRUNCATE: rc = tf_seq_truncate(e, m.seq, m.arg); break;
		case TF_TPSYNC_FORWARD: rc = follow_forward(e, &b, m.arg); break;
		case TF_TPSYNC_SEQ_DRAFT: rc = follow_draft(e, m.seq, (int32_t)m.arg, m.n); break;
		case TF_TPSYNC_SEQ_DRAFT_TOLD:
			rc = follow_rows(e, m.seq, (int32_t)m.arg, m.n);
			break;
		case TF_TPSYNC_SEQ_UNDO: rc = follow_undo(e, m.seq, m.arg, m.n, m.row0); break;
		case TF_TPSYNC_BEAT: break;
		default:
			return tf_diag_set(TF_ERR_PEER, "rank %d: rank 0 sent call %d, which this "
					   "build does not know", e->rank, m.op);
		}
		/* Rank 0 refused the same call the same way and goes on; a
		 * peer's failure ends the ranks. */
		if (rc == TF_ERR_PEER)
			return rc;
	}
}

/* ---- speculation ---- */

/* The first of the n largest, over the sampler's vocabulary. */
static int32_t argmax(const float *x, int n)
{
	int32_t best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static int mtp_open(const tf_engine *e, tf_seq_id s)
{
	if (e->mtp)
		return TF_OK;
	return tf_diag_set(TF_ERR_INVALID, "sequence %d: the MTP layer is not open: no drafter "
			   "runs it ([plugins] drafter, [mtp] enabled)", s);
}

static int drafter_open(const tf_engine *e, tf_seq_id s)
{
	if (e->dr)
		return TF_OK;
	return tf_diag_set(TF_ERR_INVALID, "sequence %d: no drafts: no drafter ([plugins] "
			   "drafter, [mtp] enabled)", s);
}

/*
 * Tensor parallel: rank 0 sends the token of the MTP row it runs next
 * (-1: no more rows), the followers take it for theirs.  The drafter runs
 * on rank 0 alone, so what it feeds the layer is rank 0's to say.
 */
static int draft_tell(tf_engine *e, int32_t *tok)
{
	int rc = tf_tp_broadcast(e->tp, tok, sizeof(*tok), 0);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "rank %d: a draft's token", e->rank);
	if (*tok < -1 || *tok >= e->vocab)
		return tf_diag_set(TF_ERR_PEER, "rank %d: rank 0 sent draft token %d, outside the "
				   "vocabulary [0, %d)", e->rank, *tok, e->vocab);
	return TF_OK;
}

/* Before s's first MTP row: the layer catches up with s's rows and marks
 * its state, which mtp_end goes back to. */
static int mtp_begin(tf_engine *e, struct tf_seq *q, tf_seq_id s)
{
	int rc = tf_pipeline_mtp_catch_up(e->p, q->st);
	if (rc != TF_OK) {
		q->broken = true;
		return tf_diag_prefix(rc, "sequence %d", s);
	}
	rc = tf_seqstate_mtp_mark(q->st);
	return rc == TF_OK ? TF_OK : tf_diag_prefix(rc, "sequence %d", s);
}

/* After s's MTP rows, whose outcome was rc: its MTP state as it was. */
static int mtp_end(struct tf_seq *q, tf_seq_id s, int rc)
{
	int back = tf_seqstate_mtp_back(q->st);
	if (back != TF_OK) {
		q->broken = true;
		rc = rc == TF_OK ? back : rc;
	}
	return rc == TF_OK ? TF_OK : tf_diag_prefix(rc, "sequence %d: drafting", s);
}

/* MTP row i of s, fed tok at position len - 1 + i after row i - 1's
 * output (row 0: after s's last row), and the head: logits [vocab] into
 * row.  A collective: every rank runs it. */
static int mtp_row(tf_engine *e, struct tf_seq *q, int i, int32_t tok, float *row)
{
	int rc = tf_pipeline_mtp(e->p, q->st, tok, (int32_t)(q->len - 1 + i), i ? e->dhid : NULL,
				 e->dhid);
	if (rc == TF_OK)
		rc = owed_settle(e, row);
	return rc == TF_OK ? tf_pipeline_head(e->p, e->dhid, 1, row) : rc;
}

/*
 * A sampled draft at position pos: the sequence's sampler's distribution
 * over the MTP logits `row`, dense into qd [vocab] for the accept rule,
 * drawn at a number of its own (stream 3; the verify's draws are streams
 * 0-2).
 */
static int seq_draw(tf_engine *e, struct tf_seq *q, tf_seq_id s, const float *row, int64_t pos,
		    float *qd, int32_t *token)
{
	const tf_sampler_cand *c;
	size_t m;
	int rc = tf_sampler_dist(&q->smp, row, q->tok, (size_t)q->len, &c, &m);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "sequence %d: a draft's distribution", s);
	double u = tf_sampler_uniform(q->smp.par.seed, 3, (uint64_t)pos), acc = 0;
	memset(qd, 0, (size_t)e->vocab * sizeof(*qd));
	*token = c[m - 1].id;
	for (size_t i = 0; i < m; i++)
		qd[c[i].id] = c[i].p;
	for (size_t i = 0; i < m; i++)
		if ((acc += c[i].p) > u) {
			*token = c[i].id;
			break;
		}
	return TF_OK;
}

/* One proposal in flight: tf_draft_req.ctx. */
struct draft_run {
	tf_engine *e;
	struct tf_seq *q;
	tf_seq_id s;
	int max;
	bool sampled;
	float *qd;                      /* [max, vocab]: drawn drafts' distributions */
	uint8_t *qset;                  /* [max]: which were drawn */
	int rows;                       /* MTP rows run */
	bool begun;                     /* mtp_begin ran: mtp_end owed */
};

/* tf_draft_req.mtp_row.  Under tensor parallelism row 0 is a SEQ_DRAFT_TOLD
 * call and each later row's token is told first. */
static int draft_mtp_row(void *ctx, int i, int32_t tok, const float **logits)
{
	struct draft_run *r = ctx;
	tf_engine *e = r->e;
	int rc;
	if (i != r->rows || i >= r->max)
		return tf_diag_set(TF_ERR_INVALID, "drafter %s asked for MTP row %d after %d rows "
				   "(rows go in order, at most %d)", e->dr->hdr.name, i, r->rows,
				   r->max);
	if (tok < 0 || tok >= e->vocab)
		return tf_diag_set(TF_ERR_INVALID, "drafter %s fed the MTP layer token %d, outside "
				   "the vocabulary [0, %d)", e->dr->hdr.name, tok, e->vocab);
	if (i == 0) {
		rc = tp_send(e, (tf_tpsync_msg){ .op = TF_TPSYNC_SEQ_DRAFT_TOLD, .seq = r->s,
						 .arg = tok, .n = r->max }, NULL);
		if (rc != TF_OK || (rc = mtp_begin(e, r->q, r->s)) != TF_OK)
			return rc;
		r->begun = true;
	} else if (e->tp && (rc = draft_tell(e, &tok)) != TF_OK) {
		return rc;
	}
	r->rows++;
	*logits = e->dlog;
	return mtp_row(e, r->q, i, tok, e->dlog);
}

/* tf_draft_req.draw: draft i from the sequence's sampler, its
 * distribution kept for the accept rule. */
static int draft_draw(void *ctx, int i, const float *logits, int32_t *tok)
{
	struct draft_run *r = ctx;
	tf_engine *e = r->e;
	if (!r->sampled || i < 0 || i >= r->max)
		return tf_diag_set(TF_ERR_INVALID, "drafter %s drew draft %d (%s)", e->dr->hdr.name,
				   i, r->sampled ? "outside the drafts asked for" :
				   "the step judges no drawn drafts");
	int rc = seq_draw(e, r->q, r->s, logits, r->q->len + 1 + i,
			  r->qd + (size_t)i * (size_t)e->vocab, tok);
	if (rc == TF_OK)
		r->qset[i] = 1;
	return rc;
}

/* One sequence's speculative step (seq_spec, tf_engine_step). */
struct spec {
	struct tf_seq *q;
	tf_seq_id s;
	int64_t len;                    /* its length before the step */
	bool sampled;                   /* drafts judged by standard's rule, drawn */
	int32_t *tokens;                /* [depth + 1]: the sampled token, then the drafts */
	int got;                        /* drafts */
	float *qd;                      /* [depth, vocab]: drawn drafts' distributions */
	uint8_t *qset;                  /* [depth]: which drafts were drawn */
	int64_t row0;                   /* its first row in the verify */
	int32_t fix;                    /* standard: a rejected draft's replacement */
};

/*
 * Up to depth drafts after sp's sampled token, from the drafter, checked.
 * The sequence is left as it was: its MTP state back at its mark, the
 * followers told that the rows are over.
 */
static int seq_propose(tf_engine *e, struct spec *sp, int depth)
{
	struct tf_seq *q = sp->q;
	struct draft_run r = { .e = e, .q = q, .s = sp->s, .max = depth, .sampled = sp->sampled,
			       .qd = sp->qd, .qset = sp->qset };
	const tf_draft_req req = {
		.tokens = q->tok, .n_tokens = q->len, .next = sp->tokens[0],
		.vocab = q->smp.n_vocab, .max = depth, .sampled = sp->sampled, .ctx = &r,
		.mtp_row = e->mtp ? draft_mtp_row : NULL, .draw = draft_draw,
	};
	const char *name = e->dr->hdr.name;
	int32_t *draft = sp->tokens + 1;
	int n = 0, rc;
	sp->got = 0;
	if (!depth)
		return TF_OK;
	memset(sp->qset, 0, (size_t)depth);
	tf_tpsync_beat_lock(e->beat);
	rc = e->dr->propose(e->dinst, q->dseq, &req, draft, &n);
	if (r.begun) {
		int32_t end = -1;
		int tr = e->tp && e->rank == 0 ? draft_tell(e, &end) : TF_OK;
		rc = mtp_end(q, sp->s, rc == TF_OK ? tr : rc);
	}
	tf_tpsync_beat_unlock(e->beat);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "sequence %d: drafter %s", sp->s, name);
	if (n < 0 || n > depth)
		return tf_diag_set(TF_ERR_INVALID, "sequence %d: drafter %s proposed %d drafts, "
				   "asked for at most %d", sp->s, name, n, depth);
	for (int i = 0; i < n; i++)
		if (draft[i] < 0 || draft[i] >= req.vocab)
			return tf_diag_set(TF_ERR_INVALID, "sequence %d: drafter %s proposed token "
					   "%d, outside the vocabulary [0, %d)", sp->s, name, draft[i],
					   req.vocab);
	sp->got = n;
	return TF_OK;
}

/* tf_seq_draft: greedy MTP drafts after s's last token and next, every
 * rank alike (the same logits, the same argmax). */
static int seq_draft(tf_engine *e, tf_seq_id s, int32_t next, int depth, int32_t *draft,
		     float *logits)
{
	struct tf_seq *q = seq_get(e, s);
	int rc;
	if (!q)
		return TF_ERR_INVALID;
	if ((rc = seq_usable(q, s)) != TF_OK || (rc = mtp_open(e, s)) != TF_OK)
		return rc;
	if (q->len < 1)
		return tf_diag_set(TF_ERR_INVALID, "sequence %d is empty: nothing to draft after", s);
	if (next < 0 || next >= e->vocab)
		return tf_diag_set(TF_ERR_INVALID, "sequence %d: token id %d is outside the vocabulary [0, %d)",
				   s, next, e->vocab);
	if (depth < 1 || q->len - 1 + depth > e->context)
		return tf_diag_set(TF_ERR_RANGE, "sequence %d: %d drafts after %" PRId64
				   " tokens: outside 1..%" PRId64 " ([runtime] context)",
				   s, depth, q->len, e->context - q->len + 1);
	if ((rc = mtp_begin(e, q, s)) != TF_OK)
		return rc;
	for (int i = 0; i < depth; i++) {
		float *row = logits ? logits + (size_t)i * (size_t)e->vocab : e->dlog;
		if ((rc = mtp_row(e, q, i, i ? draft[i - 1] : next, row)) != TF_OK)
			break;
		draft[i] = argmax(row, q->smp.n_vocab);
	}
	return mtp_end(q, s, rc);
}

/*
 * Keep the first n of the `verified` rows s just ran after its first len
 * tokens, rows row0.. of the verify: back to the snapshot the verify took
 * (TF_SNAP_VERIFY; the caller's own stays), then the attention of those
 * rows again from the verify's tape (pipeline.h), without the FFNs and
 * the head.  A verify the tape could not hold (longer than a step, say)
 * runs the kept rows through the whole model again instead.
 */
static int seq_undo(tf_engine *e, struct tf_seq *q, tf_seq_id s, int64_t len, int64_t n,
		    int64_t verified, int64_t row0)
{
	bool taped = row0 + verified <= tf_pipeline_taped(e->p);
	int rc = tf_seqstate_rollback(q->st, TF_SNAP_VERIFY);
	if (rc == TF_OK && !taped) {
		q->len = len;
		q->pending = -1;
		return seq_replay(e, q, s, len, len + n);
	}
	if (rc == TF_OK)
		rc = tf_pipeline_replay(e->p, q->st, row0, (int32_t)len, n);
	if (rc != TF_OK) {
		q->broken = true;
		return tf_diag_prefix(rc, "sequence %d: undoing drafts", s);
	}
	q->len = len + n;
	return TF_OK;
}

/* Rank 0's seq_undo, sent: each follower undoes from its own tape, which
 * its own run of the verify left (follow_undo). */
static int spec_undo(tf_engine *e, struct tf_seq *q, tf_seq_id s, int64_t len, int64_t n,
		     int64_t verified, int64_t row0)
{
	tf_tpsync_beat_lock(e->beat);
	int rc = tp_send(e, (tf_tpsync_msg){ .op = TF_TPSYNC_SEQ_UNDO, .seq = s, .arg = len + n,
					     .n = verified, .row0 = (uint32_t)row0 }, NULL);
	if (rc == TF_OK)
		rc = seq_undo(e, q, s, len, n, verified, row0);
	tf_tpsync_beat_unlock(e->beat);
	return rc;
}

/*
 * [draft] accept = standard at a temperature: draft i of sp, at position
 * pos, against the verify's row: the sampler's distribution there (dense
 * into e->pd) and the draft's (drawn; or certain: all on the draft)
 * through the accept rule, at numbers of streams 1 and 2.  *token: the
 * draft, or the residual's draw.
 */
static int seq_judge(tf_engine *e, struct spec *sp, const float *row, int i, int64_t pos,
		     bool *kept, int32_t *token)
{
	struct tf_seq *q = sp->q;
	int32_t draft = sp->tokens[i + 1];
	const tf_sampler_cand *c;
	size_t m;
	int rc = tf_sampler_dist(&q->smp, row, q->tok, (size_t)pos, &c, &m);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "sequence %d", sp->s);
	memset(e->pd, 0, (size_t)e->vocab * sizeof(*e->pd));
	for (size_t j = 0; j < m; j++)
		e->pd[c[j].id] = c[j].p;
	float *qd = sp->qd + (size_t)i * (size_t)e->vocab;
	if (!sp->qset[i]) {
		memset(qd, 0, (size_t)e->vocab * sizeof(*qd));
		qd[draft] = 1;
	}
	uint64_t seed = q->smp.par.seed;
	*kept = tf_sampler_accept(e->pd, qd, q->smp.n_vocab,
				  draft, tf_sampler_uniform(seed, 1, (uint64_t)pos),
				  tf_sampler_uniform(seed, 2, (uint64_t)pos), token);
	return TF_OK;
}

/* The first half of sp's step: the next token from logits, then up to
 * depth drafts after it. */
static int spec_draft(tf_engine *e, struct spec *sp, const float *logits, int depth,
		      bool standard)
{
	int rc;
	sp->sampled = standard && sp->q->smp.par.temperature > 0;
	sp->len = sp->q->len;
	sp->fix = -1;
	sp->got = 0;
	if ((rc = tf_seq_sample(e, sp->s, logits, &sp->tokens[0])) != TF_OK)
		return rc;
	/* logits is written again after the verify: nothing of it is owed
	 * any more. */
	if (e->owed.host == logits)
		e->owed.n = 0;
	return seq_propose(e, sp, depth);
}

/*
 * The second half, after the verify ran sp's rows into rows [got + 1,
 * vocab] (host memory, or still owed from the device): the drafts kept,
 * *kept of them, up to the first one the accept rule refuses, the rest
 * undone.  Exact: a draft is kept when the sampler picks it at its
 * position.  Standard with sampling: a draft rejected is replaced by the
 * residual's draw, the token to feed next (q->pending).
 */
static int spec_judge(tf_engine *e, struct spec *sp, const float *rows, int *kept)
{
	struct tf_seq *q = sp->q;
	int a = 0, rc;
	/* Exact: the sampler's picks at every draft's position at once, on
	 * the device where it can; the rest, and standard's distributions,
	 * on the host. */
	bool dev = false;
	if (!sp->sampled) {
		rc = seq_pick_dev(e, q, rows, sp->len + 1, sp->got, e->draw_tok);
		if (rc != TF_OK && rc != TF_ERR_UNSUPPORTED)
			return tf_diag_prefix(rc, "sequence %d", sp->s);
		dev = rc == TF_OK;
	}
	if (!dev && (rc = owed_pay(e)) != TF_OK)
		return rc;
	for (; a < sp->got; a++) {
		const float *row = rows + (size_t)a * (size_t)e->vocab;
		int32_t *pick = &e->draw_tok[a];
		int64_t pos = sp->len + 1 + a;
		bool ok = false;
		if (sp->sampled)
			rc = seq_judge(e, sp, row, a, pos, &ok, &sp->fix);
		else if ((dev && *pick >= 0) || (rc = seq_pick(e, q, sp->s, row, pos, pick)) == TF_OK)
			ok = *pick == sp->tokens[a + 1];
		if (rc != TF_OK)
			return rc;
		if (!ok)
			break;
	}
	if (a < sp->got &&
	    (rc = spec_undo(e, q, sp->s, sp->len, a + 1, sp->got + 1, sp->row0)) != TF_OK)
		return rc;
	q->pending = a < sp->got ? sp->fix : -1;
	*kept = a;
	return TF_OK;
}

/* One step of s (spec_draft, one verify, spec_judge); no drafts is a
 * plain step. */
static int seq_spec(tf_engine *e, struct tf_seq *q, tf_seq_id s, int depth, bool standard,
		    float *logits, int32_t *tokens, int *n, int *drafted)
{
	struct spec sp = { .q = q, .s = s, .tokens = tokens, .qd = e->qd, .qset = e->qset };
	int a = 0, rc = spec_draft(e, &sp, logits, depth, standard);
	if (rc != TF_OK)
		return rc;
	*drafted = sp.got;
	if (!sp.got) {
		const tf_batch b = { .n = 1, .token = tokens, .one_seq = s };
		*n = 1;
		return tf_engine_forward(e, &b, logits, NULL);
	}
	const tf_batch b = { .n = sp.got + 1, .token = tokens, .one_seq = s, .out = e->vout };
	if ((rc = engine_forward(e, &b, e->vlog, NULL, true)) != TF_OK ||
	    (rc = spec_judge(e, &sp, e->vlog, &a)) != TF_OK)
		return rc;
	if (e->owed.n) {                /* row a is owed to logits now */
		e->owed.host = logits;
		e->owed.row0 += a;
		e->owed.n = 1;
	} else {
		memcpy(logits, e->vlog + (size_t)a * (size_t)e->vocab,
		       (size_t)e->vocab * sizeof(float));
	}
	*n = a + 1;
	return TF_OK;
}

/* Room after s for a step of depth drafts, min..the drafter's most. */
static int spec_check(const tf_engine *e, const struct tf_seq *q, tf_seq_id s, int depth,
		      int min)
{
	int rc = seq_usable(q, s);
	if (rc != TF_OK || (rc = drafter_open(e, s)) != TF_OK)
		return rc;
	if (depth < min || depth > e->depth)
		return tf_diag_set(TF_ERR_RANGE, "sequence %d: depth %d outside %d..%d (drafter "
				   "%s's max_depth)", s, depth, min, e->depth, e->dr->hdr.name);
	if (q->len < 1)
		return tf_diag_set(TF_ERR_INVALID, "sequence %d is empty: nothing to draft after", s);
	if (q->len + 1 + depth > e->context)
		return tf_diag_set(TF_ERR_RANGE, "sequence %d: %d tokens after %" PRId64
				   " exceed the context of %" PRId64 " tokens ([runtime] context)",
				   s, depth + 1, q->len, e->context);
	return TF_OK;
}

/* The MTP layer's rows and the drafts' logits are collectives: the
 * followers draft too (the same drafts: every rank holds the same logits). */
int tf_seq_draft(tf_engine *e, tf_seq_id s, int32_t next, int depth, int32_t *draft,
		 float *logits)
{
	tf_tpsync_beat_lock(e->beat);
	int rc = tp_send(e, (tf_tpsync_msg){ .op = TF_TPSYNC_SEQ_DRAFT, .seq = s, .arg = next,
					     .n = depth }, NULL);
	if (rc == TF_OK)
		rc = seq_draft(e, s, next, depth, draft, logits);
	tf_tpsync_beat_unlock(e->beat);
	return rc;
}

int tf_seq_speculate(tf_engine *e, tf_seq_id s, int depth, float *logits, int32_t *tokens,
		     int *n)
{
	struct tf_seq *q = seq_get(e, s);
	int rc, drafted;
	if (!q)
		return TF_ERR_INVALID;
	if ((rc = spec_check(e, q, s, depth, 1)) != TF_OK)
		return rc;
	return seq_spec(e, q, s, depth, false, logits, tokens, n, &drafted);
}

/*
 * *k, the depth of s's next step: the drafter's choice, 0..max, or max
 * where it has no policy or the caller fixed it.  While the drafter
 * expects to decode plainly, the MTP layer is not fed the rows kept past
 * a step's (feeding it cost ling-nano 1.6-3% of plain decoding): a later
 * draft catches up the recent ones and its attention skips the rest.
 * Drafts are proposals, the verify keeps the output exact.
 * Tensor-parallel ranks feed every row, alike.
 */
static int seq_plan(tf_engine *e, struct tf_seq *q, tf_seq_id s, int max, bool fixed, int *k)
{
	if (q->mask) {                  /* a draft would need the constraint's every state */
		max = 0;
		fixed = true;
	}
	tf_draft_plan plan = { .max = max, .pending = e->mtp ? tf_seqstate_pending_n(q->st) : 0 };
	*k = e->dr->depth && !fixed ? e->dr->depth(e->dinst, q->dseq, &plan) : max;
	if (*k < 0 || *k > max)
		return tf_diag_set(TF_ERR_INVALID, "sequence %d: drafter %s chose depth %d, outside "
				   "0..%d", s, e->dr->hdr.name, *k, max);
	if (e->mtp)
		tf_seqstate_mtp_skip(q->st, plan.idle && !e->tp);
	return TF_OK;
}

int tf_seq_step(tf_engine *e, tf_seq_id s, int max_depth, float *logits, int32_t *tokens,
		int *n, int *drafted)
{
	struct tf_seq *q = seq_get(e, s);
	int rc;
	if (!q)
		return TF_ERR_INVALID;
	if ((rc = spec_check(e, q, s, max_depth, 0)) != TF_OK)
		return rc;
	int k;
	if ((rc = seq_plan(e, q, s, max_depth, false, &k)) != TF_OK)
		return rc;
	/* The step's seconds, and of them the MTP layer's catching up (before
	 * drafts, or a plain step's when the rows kept would pass a step's). */
	double t = tf_pipeline_clock(), c0, c1;
	int64_t r0, r1;
	tf_pipeline_mtp_caught(e->p, &c0, &r0);
	rc = seq_spec(e, q, s, k, e->standard, logits, tokens, n, drafted);
	t = tf_pipeline_clock() - t;
	tf_pipeline_mtp_caught(e->p, &c1, &r1);
	if (rc == TF_OK && e->dr->observe)
		e->dr->observe(e->dinst, q->dseq, &(tf_draft_outcome){
			.asked = k, .drafted = *drafted, .accepted = *n - 1, .seconds = t,
			.catch_seconds = c1 - c0, .caught = r1 - r0 });
	return rc;
}

/* Room for a batched step of n sequences: its verify's logits, its drafts'
 * distributions, its tokens. */
static int spec_reserve(tf_engine *e, int n)
{
	if (n <= e->spec_cap)
		return TF_OK;
	size_t d = (size_t)e->depth, v = (size_t)e->vocab, m = (size_t)n;
	float *vlog = realloc(e->vlog, m * (d + 1) * v * sizeof(*vlog));
	if (vlog)
		e->vlog = vlog;
	float *qd = vlog ? realloc(e->qd, m * (d ? d : 1) * v * sizeof(*qd)) : NULL;
	if (qd)
		e->qd = qd;
	uint8_t *qset = qd ? realloc(e->qset, m * (d ? d : 1)) : NULL;
	if (qset)
		e->qset = qset;
	uint8_t *vout = qset ? realloc(e->vout, m * (d + 1)) : NULL;
	if (vout)
		e->vout = vout;
	int32_t *btok = vout ? realloc(e->btok, m * (d + 1) * sizeof(*btok)) : NULL;
	if (btok)
		e->btok = btok;
	tf_seq_id *bseq = btok ? realloc(e->bseq, m * (d + 1) * sizeof(*bseq)) : NULL;
	if (bseq)
		e->bseq = bseq;
	struct spec *sp = bseq ? realloc(e->specs, m * sizeof(*sp)) : NULL;
	if (!sp)
		return tf_diag_set(TF_ERR_NOMEM, "engine: out of memory for a step of %d sequences",
				   n);
	e->specs = sp;
	memset(e->vout, 1, m * (d + 1));
	e->spec_cap = n;
	return TF_OK;
}

/* A sequence of the step failed: its status and message. */
static void step_fail(tf_spec_step *st, int rc)
{
	st->status = rc;
	snprintf(st->error, sizeof(st->error), "%s", tf_diag_msg());
}

/* What a step's sequence tells its drafter afterwards. */
struct step_acct {
	int asked;                      /* the depth the drafter chose */
	double catch_s;                 /* the MTP layer's catching up while drafting */
	int64_t caught;
};

/* The first half of st's step (spec_draft) into sp, its drafts'
 * distributions into qd and qset, checked. */
static int step_draft(tf_engine *e, tf_spec_step *st, struct spec *sp, float *qd,
		      uint8_t *qset, struct step_acct *acct)
{
	struct tf_seq *q = seq_get(e, st->seq);
	int rc, k = 0;
	if (!q)
		return TF_ERR_INVALID;
	if (q->nb)
		return tf_diag_set(TF_ERR_INVALID, "sequence %d is twice in one step", st->seq);
	if (e->dr || st->max_depth)
		rc = spec_check(e, q, st->seq, st->max_depth, 0);
	else
		rc = seq_usable(q, st->seq);
	if (rc != TF_OK)
		return rc;
	if (st->max_depth) {
		if ((rc = seq_plan(e, q, st->seq, st->max_depth, st->fixed, &k)) != TF_OK)
			return rc;
	}
	*sp = (struct spec){ .q = q, .s = st->seq, .tokens = st->tokens, .qd = qd, .qset = qset };
	double c0, c1;
	int64_t r0, r1;
	tf_pipeline_mtp_caught(e->p, &c0, &r0);
	rc = spec_draft(e, sp, st->logits, k, e->standard);
	tf_pipeline_mtp_caught(e->p, &c1, &r1);
	*acct = (struct step_acct){ .asked = k, .catch_s = c1 - c0, .caught = r1 - r0 };
	if (rc != TF_OK)
		return rc;
	q->nb = 1;                      /* in the step: once */
	return rc;
}

int tf_engine_step(tf_engine *e, tf_spec_step *steps, int n)
{
	double t = tf_pipeline_clock();
	int64_t rows = 0;
	int live = 0, rc;
	if (n < 1 || n > e->max_seqs)
		return tf_diag_set(TF_ERR_INVALID, "a step of %d sequences: 1..%d ([runtime] "
				   "sequences)", n, e->max_seqs);
	if ((rc = spec_reserve(e, n)) != TF_OK || (rc = owed_pay(e)) != TF_OK)
		return rc;
	struct step_acct *acct = calloc((size_t)n, sizeof(*acct));
	if (!acct)
		return tf_diag_set(TF_ERR_NOMEM, "engine: out of memory for a step");
	size_t d = (size_t)(e->depth ? e->depth : 1);
	for (int i = 0; i < n; i++) {
		tf_spec_step *st = &steps[i];
		struct spec *sp = &e->specs[i];
		st->status = TF_OK;
		st->error[0] = 0;
		st->n = st->drafted = 0;
		sp->q = NULL;
		if ((rc = step_draft(e, st, sp, e->qd + (size_t)i * d * (size_t)e->vocab,
				     e->qset + (size_t)i * d, &acct[i])) != TF_OK) {
			step_fail(st, rc);
			sp->q = NULL;
			continue;
		}
		sp->row0 = rows;
		for (int j = 0; j <= sp->got; j++) {
			e->btok[rows] = sp->tokens[j];
			e->bseq[rows++] = sp->s;
		}
		st->drafted = sp->got;
		live++;
	}
	for (int i = 0; i < n; i++)
		if (e->specs[i].q)
			e->specs[i].q->nb = 0;
	rc = TF_OK;
	if (live) {
		const tf_batch b = { .n = rows, .token = e->btok, .seq = e->bseq, .out = e->vout };
		rc = engine_forward(e, &b, e->vlog, NULL, rows > live);
	}
	for (int i = 0; i < n; i++) {
		tf_spec_step *st = &steps[i];
		struct spec *sp = &e->specs[i];
		int a = 0;
		if (!sp->q)
			continue;
		if (rc != TF_OK) {
			step_fail(st, rc);
			continue;
		}
		int sr = sp->got ? spec_judge(e, sp, e->vlog + (size_t)sp->row0 * (size_t)e->vocab,
					      &a) : TF_OK;
		if (sr == TF_OK)
			sr = owed_pay(e);
		if (sr != TF_OK) {
			step_fail(st, sr);
			continue;
		}
		memcpy(st->logits, e->vlog + (size_t)(sp->row0 + a) * (size_t)e->vocab,
		       (size_t)e->vocab * sizeof(float));
		st->n = a + 1;
		if (e->dr && e->dr->observe && st->max_depth && !st->fixed)
			e->dr->observe(e->dinst, sp->q->dseq, &(tf_draft_outcome){
				.asked = acct[i].asked, .drafted = sp->got, .accepted = a,
				.seconds = tf_pipeline_clock() - t, .catch_seconds = acct[i].catch_s,
				.caught = acct[i].caught });
	}
	free(acct);
	return rc;
}

/* ---- stages ---- */

int tf_engine_stage_count(void) { return TF_STAGE_COUNT; }
const char *tf_engine_stage_name(int stage) { return tf_stage_name((tf_stage)stage); }

double tf_engine_stage_seconds(const tf_engine *e, int stage)
{
	return tf_pipeline_stage_seconds(e->p, (tf_stage)stage);
}

tf_moe_stats tf_engine_moe_stats(const tf_engine *e) { return tf_runtime_moe_stats(e->rt); }

tf_graph_stats tf_engine_graph_stats(const tf_engine *e)
{
	tf_graph_stats s;
	tf_pipeline_graph_stats(e->p, &s.steps, &s.runs, &s.built);
	return s;
}

void tf_engine_stats_reset(tf_engine *e)
{
	tf_pipeline_stats_reset(e->p);
	tf_runtime_moe_stats_reset(e->rt);
}

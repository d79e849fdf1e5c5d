/* seqstate.c - see seqstate.h. */
#include "engine/seqstate.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tf/diag.h"

/* Final-normed hidden rows [n, hidden_size] and the tokens at positions
 * pos0 .. pos0 + n - 1, host memory, room for cap rows. */
struct ss_pend {
	float *hidden;
	int32_t *tok;
	int64_t n, cap;
	int32_t pos0;
};

struct tf_seqstate {
	tf_pipeline *p;
	int n;                          /* layers */
	void **state;                   /* [n]: the plugin's state, or its instance */
	/* The snapshots, each with its buffers (once taken) and the MTP
	 * layer's rows not fed yet at the time. */
	struct ss_snap {
		void **buf;             /* [n] */
		size_t *cap;            /* [n] */
		bool has;
		struct ss_pend pend;
	} snap[TF_SNAP_SLOTS];

	/* With the MTP layer: the rows it has not been fed; and the MTP
	 * layer's own mark while drafting. */
	struct ss_pend pend;
	bool skip;                      /* tf_seqstate_mtp_skip */
	size_t bytes;                   /* a hidden row's */
	void *mark;
	size_t mark_cap;
};

void tf_seqstate_free(tf_seqstate *s)
{
	if (!s)
		return;
	for (int i = 0; s->state && i < s->n; i++) {
		void *inst;
		const tf_plugin_attention *a = tf_pipeline_attn(s->p, i, &inst);
		if (s->state[i] && tf_pipeline_attn_batched(s->p, i))
			a->state_free(inst, s->state[i]);
		for (int k = 0; k < TF_SNAP_SLOTS; k++)
			free(s->snap[k].buf ? s->snap[k].buf[i] : NULL);
	}
	tf_pipeline_legacy_release(s->p, s);
	free(s->pend.hidden);
	free(s->pend.tok);
	for (int k = 0; k < TF_SNAP_SLOTS; k++) {
		free(s->snap[k].pend.hidden);
		free(s->snap[k].pend.tok);
		free(s->snap[k].buf);
		free(s->snap[k].cap);
	}
	free(s->mark);
	free(s->state);
	free(s);
}

int tf_seqstate_new(tf_pipeline *p, int64_t max_ctx, tf_seqstate **out)
{
	tf_seqstate *s = calloc(1, sizeof(*s));
	int rc;
	if (!s)
		return tf_diag_set(TF_ERR_NOMEM, "sequence state: out of memory");
	s->p = p;
	s->n = tf_pipeline_layers(p);
	s->state = calloc((size_t)s->n, sizeof(*s->state));
	bool ok = s->state != NULL;
	for (int k = 0; k < TF_SNAP_SLOTS; k++) {
		s->snap[k].buf = calloc((size_t)s->n, sizeof(*s->snap[k].buf));
		s->snap[k].cap = calloc((size_t)s->n, sizeof(*s->snap[k].cap));
		ok = ok && s->snap[k].buf && s->snap[k].cap;
	}
	if (tf_pipeline_has_mtp(p))
		s->bytes = (size_t)tf_pipeline_hidden_size(p) * sizeof(float);
	if (!ok) {
		rc = tf_diag_set(TF_ERR_NOMEM, "sequence state: out of memory");
		goto fail;
	}
	if ((rc = tf_pipeline_legacy_claim(p, s)) != TF_OK)
		goto fail;
	for (int i = 0; i < s->n; i++) {
		void *inst;
		const tf_plugin_attention *a = tf_pipeline_attn(s->p, i, &inst);
		if (!tf_pipeline_attn_batched(p, i)) {
			a->reset(inst);
			s->state[i] = inst;
		} else if ((rc = a->state_new(inst, max_ctx, &s->state[i])) != TF_OK) {
			rc = tf_diag_prefix(rc, "layer %d (%s): new sequence state", i, a->hdr.name);
			goto fail;
		}
	}
	*out = s;
	return TF_OK;
fail:
	tf_seqstate_free(s);
	return rc;
}

void tf_seqstate_reset(tf_seqstate *s)
{
	s->pend.n = 0;
	s->pend.pos0 = 0;
	for (int i = 0; i < s->n; i++) {
		void *inst;
		const tf_plugin_attention *a = tf_pipeline_attn(s->p, i, &inst);
		if (tf_pipeline_attn_batched(s->p, i))
			a->state_reset(inst, s->state[i]);
		else
			a->reset(inst);
	}
}

/* Room for n rows in d. */
static int pend_grow(struct ss_pend *d, int64_t n, size_t bytes)
{
	if (n <= d->cap)
		return TF_OK;
	int64_t cap = d->cap ? d->cap : 8;
	while (cap < n)
		cap *= 2;
	float *h = realloc(d->hidden, (size_t)cap * bytes);
	if (h)
		d->hidden = h;
	int32_t *t = realloc(d->tok, (size_t)cap * sizeof(*t));
	if (t)
		d->tok = t;
	if (!h || !t)
		return tf_diag_set(TF_ERR_NOMEM, "MTP layer: out of memory for %" PRId64
				   " rows to feed it", n);
	d->cap = cap;
	return TF_OK;
}

static int pend_copy(struct ss_pend *d, const struct ss_pend *s, size_t bytes)
{
	int rc = pend_grow(d, s->n, bytes);
	if (rc != TF_OK)
		return rc;
	if (s->n) {
		memcpy(d->hidden, s->hidden, (size_t)s->n * bytes);
		memcpy(d->tok, s->tok, (size_t)s->n * sizeof(*s->tok));
	}
	d->n = s->n;
	d->pos0 = s->pos0;
	return TF_OK;
}

int tf_seqstate_copy(tf_seqstate *dst, const tf_seqstate *src)
{
	for (int i = 0; i < src->n; i++) {
		void *inst;
		const tf_plugin_attention *a = tf_pipeline_attn(src->p, i, &inst);
		if (!tf_pipeline_attn_batched(src->p, i))
			return tf_diag_set(TF_ERR_UNSUPPORTED,
					   "layer %d's attention plugin '%s' predates ABI 1.5: its sequence cannot be copied",
					   i, a->hdr.name);
		int rc = a->state_copy(inst, dst->state[i], src->state[i]);
		if (rc != TF_OK)
			return tf_diag_prefix(rc, "layer %d (%s): copy", i, a->hdr.name);
	}
	return pend_copy(&dst->pend, &src->pend, src->bytes);
}

/* Layer i's snapshot size and the calls that take and restore it, old
 * slots or new. */
static size_t ss_snap_size(const tf_seqstate *s, int i)
{
	void *inst;
	const tf_plugin_attention *a = tf_pipeline_attn(s->p, i, &inst);
	return tf_pipeline_attn_batched(s->p, i) ? a->state_snapshot_size(inst, s->state[i])
						 : a->snapshot_size(inst);
}

static int ss_take(const tf_seqstate *s, int i, void *buf)
{
	void *inst;
	const tf_plugin_attention *a = tf_pipeline_attn(s->p, i, &inst);
	int rc = tf_pipeline_attn_batched(s->p, i) ? a->state_snapshot(inst, s->state[i], buf)
						   : a->snapshot(inst, buf);
	return rc == TF_OK ? TF_OK : tf_diag_prefix(rc, "layer %d (%s): snapshot", i, a->hdr.name);
}

static int ss_back(tf_seqstate *s, int i, const void *buf)
{
	void *inst;
	const tf_plugin_attention *a = tf_pipeline_attn(s->p, i, &inst);
	int rc = tf_pipeline_attn_batched(s->p, i) ? a->state_rollback(inst, s->state[i], buf)
						   : a->rollback(inst, buf);
	return rc == TF_OK ? TF_OK : tf_diag_prefix(rc, "layer %d (%s): rollback", i, a->hdr.name);
}

int tf_seqstate_snapshot(tf_seqstate *s, tf_snap_slot slot)
{
	struct ss_snap *sn = &s->snap[slot];
	for (int i = 0; i < s->n; i++) {
		size_t need = ss_snap_size(s, i);
		if (need > sn->cap[i]) {
			void *b = realloc(sn->buf[i], need);
			if (!b)
				return tf_diag_set(TF_ERR_NOMEM,
						   "layer %d: out of memory for a %zu-byte snapshot",
						   i, need);
			sn->buf[i] = b;
			sn->cap[i] = need;
		}
	}
	sn->has = false;                /* until every layer has taken it */
	int rc = pend_copy(&sn->pend, &s->pend, s->bytes);
	for (int i = 0; rc == TF_OK && i < s->n; i++)
		rc = ss_take(s, i, sn->buf[i]);
	if (rc != TF_OK)
		return rc;
	sn->has = true;
	return TF_OK;
}

int tf_seqstate_rollback(tf_seqstate *s, tf_snap_slot slot)
{
	struct ss_snap *sn = &s->snap[slot];
	if (!sn->has)
		return tf_diag_set(TF_ERR_INVALID, "no snapshot to roll back to");
	for (int i = 0; i < s->n; i++) {
		int rc = ss_back(s, i, sn->buf[i]);
		if (rc != TF_OK)
			return rc;
	}
	return pend_copy(&s->pend, &sn->pend, s->bytes);
}

int tf_seqstate_mtp_mark(tf_seqstate *s)
{
	size_t need = ss_snap_size(s, s->n - 1);
	if (need > s->mark_cap) {
		void *b = realloc(s->mark, need);
		if (!b)
			return tf_diag_set(TF_ERR_NOMEM, "MTP layer: out of memory for a mark");
		s->mark = b;
		s->mark_cap = need;
	}
	return ss_take(s, s->n - 1, s->mark);
}

int tf_seqstate_mtp_back(tf_seqstate *s)
{
	return ss_back(s, s->n - 1, s->mark);
}

int64_t tf_seqstate_pending(const tf_seqstate *s, float **hidden, int32_t **tokens,
			    int32_t *pos0)
{
	*hidden = s->pend.hidden;
	*tokens = s->pend.tok;
	*pos0 = s->pend.pos0;
	return s->pend.n;
}

int64_t tf_seqstate_pending_n(const tf_seqstate *s)
{
	return s->pend.n;
}

int tf_seqstate_pend_add(tf_seqstate *s, int32_t pos, const int32_t *tokens, int64_t n,
			 float **rows)
{
	struct ss_pend *d = &s->pend;
	if (!d->n)
		d->pos0 = pos;
	else if (pos != d->pos0 + d->n)
		return tf_diag_set(TF_ERR_INTERNAL, "MTP layer: rows at %d after %" PRId64
				   " kept from %d", pos, d->n, d->pos0);
	int rc = pend_grow(d, d->n + n, s->bytes);
	if (rc != TF_OK)
		return rc;
	memcpy(d->tok + d->n, tokens, (size_t)n * sizeof(*tokens));
	*rows = d->hidden + (size_t)d->n * (s->bytes / sizeof(float));
	d->n += n;
	return TF_OK;
}

void tf_seqstate_mtp_skip(tf_seqstate *s, bool skip)
{
	s->skip = skip;
}

bool tf_seqstate_mtp_skips(const tf_seqstate *s)
{
	return s->skip;
}

void tf_seqstate_pend_drop(tf_seqstate *s, int64_t n)
{
	struct ss_pend *d = &s->pend;
	size_t row = s->bytes / sizeof(float);
	memmove(d->hidden, d->hidden + (size_t)n * row, (size_t)(d->n - n) * s->bytes);
	memmove(d->tok, d->tok + n, (size_t)(d->n - n) * sizeof(*d->tok));
	d->n -= n;
	d->pos0 += (int32_t)n;
}

void *tf_seqstate_layer(const tf_seqstate *s, int i)
{
	return s->state[i];
}

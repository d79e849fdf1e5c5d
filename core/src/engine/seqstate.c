/* seqstate.c - see seqstate.h. */
#include "seqstate.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"

struct tf_seqstate {
	tf_pipeline *p;
	int n;                          /* layers */
	void **state;                   /* [n]: the plugin's state, or its instance */
	void **snap;                    /* [n]: snapshot buffers, once taken */
	size_t *snap_cap;               /* [n]: their sizes */
	bool has_snap;

	/* With the MTP layer: the final-normed hidden of the last position,
	 * its row not fed yet (pipeline.h), as now and at the snapshot; and
	 * the MTP layer's own mark while drafting. */
	float *hidden, *snap_hidden;    /* [hidden_size] host memory */
	size_t bytes;
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
		free(s->snap ? s->snap[i] : NULL);
	}
	tf_pipeline_legacy_release(s->p, s);
	free(s->hidden);
	free(s->snap_hidden);
	free(s->mark);
	free(s->state);
	free(s->snap);
	free(s->snap_cap);
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
	s->snap = calloc((size_t)s->n, sizeof(*s->snap));
	s->snap_cap = calloc((size_t)s->n, sizeof(*s->snap_cap));
	if (tf_pipeline_has_mtp(p)) {
		s->bytes = (size_t)tf_pipeline_hidden_size(p) * sizeof(float);
		s->hidden = calloc(1, s->bytes);
		s->snap_hidden = calloc(1, s->bytes);
	}
	if (!s->state || !s->snap || !s->snap_cap || (s->bytes && (!s->hidden || !s->snap_hidden))) {
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
	for (int i = 0; i < s->n; i++) {
		void *inst;
		const tf_plugin_attention *a = tf_pipeline_attn(s->p, i, &inst);
		if (tf_pipeline_attn_batched(s->p, i))
			a->state_reset(inst, s->state[i]);
		else
			a->reset(inst);
	}
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
	if (src->bytes)
		memcpy(dst->hidden, src->hidden, src->bytes);
	return TF_OK;
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

int tf_seqstate_snapshot(tf_seqstate *s)
{
	for (int i = 0; i < s->n; i++) {
		size_t need = ss_snap_size(s, i);
		if (need > s->snap_cap[i]) {
			void *b = realloc(s->snap[i], need);
			if (!b)
				return tf_diag_set(TF_ERR_NOMEM,
						   "layer %d: out of memory for a %zu-byte snapshot",
						   i, need);
			s->snap[i] = b;
			s->snap_cap[i] = need;
		}
	}
	s->has_snap = false;            /* until every layer has taken it */
	for (int i = 0; i < s->n; i++) {
		int rc = ss_take(s, i, s->snap[i]);
		if (rc != TF_OK)
			return rc;
	}
	if (s->bytes)
		memcpy(s->snap_hidden, s->hidden, s->bytes);
	s->has_snap = true;
	return TF_OK;
}

int tf_seqstate_rollback(tf_seqstate *s)
{
	if (!s->has_snap)
		return tf_diag_set(TF_ERR_INVALID, "no snapshot to roll back to");
	for (int i = 0; i < s->n; i++) {
		int rc = ss_back(s, i, s->snap[i]);
		if (rc != TF_OK)
			return rc;
	}
	if (s->bytes)
		memcpy(s->hidden, s->snap_hidden, s->bytes);
	return TF_OK;
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

float *tf_seqstate_hidden(tf_seqstate *s)
{
	return s->hidden;
}

void *tf_seqstate_layer(const tf_seqstate *s, int i)
{
	return s->state[i];
}

/* pipeline.c - see pipeline.h. */
#include "engine/pipeline.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/seqstate.h"
#include "tf/backend.h"
#include "tf/diag.h"
#include "tf/progress.h"
#include "tf/quant.h"
#include "tf/tp.h"

struct tf_layer {
	const tf_plugin_attention *attn;
	void *attn_inst;
	bool batched;                   /* state apart (ABI 1.5) */
	bool appends;                   /* state_append (ABI 1.8) */
	const tf_plugin_ffn *ffn;
	void *ffn_inst;
	tf_stage attn_stage, ffn_stage;
	float *in_norm, *post_norm;     /* [hidden] */
};

struct tf_pipeline {
	tf_runtime *rt;
	const tf_host *h;
	const tf_model_config *cfg;
	const tf_backend *be;
	void *bctx;

	int n_layers;
	struct tf_layer *layers;
	tf_tensor embed;
	float *final_norm;
	tf_lin head;                    /* this rank's vpart vocabulary rows, from vpart x rank */
	int64_t vpart;
	float *gbuf;                    /* [ranks, rows, vpart]: gathered logits */
	int64_t gbuf_rows;
	float *lbuf;                    /* [lbuf_rows, vpart]: a device backend's logits */
	int64_t lbuf_rows;
	tf_tp *tp;                      /* [tp] size > 1: the ranks' communicator */
	float *rbuf;                    /* [chunk, hidden]: a device backend's sums, host */

	int64_t hidden, vocab, chunk;
	float *hbuf, *xbuf, *ybuf;      /* [chunk, hidden] each */
	tf_attn_seg *segbuf;            /* [chunk]: a step's segments, per layer */

	/* The MTP layer, layers[n_layers], when [mtp] enabled. */
	bool mtp;
	float *enorm, *hnorm, *mtp_norm;        /* [hidden] */
	tf_lin eh_proj;                         /* [embedding; hidden] -> hidden */
	float *fbuf;                    /* [chunk, hidden]: a step's final-normed rows */
	float *pbuf;                    /* [chunk, hidden]: kept rows, uploaded */
	float *cbuf;                    /* [chunk, 2 hidden]: eh_proj's input */
	double caught_s;                /* tf_pipeline_mtp_catch_up's seconds, */
	int64_t caught;                 /* and rows, since the pipeline began */
	const float **mhid;             /* [chunk]: each MTP row's hidden input */
	int32_t *mtok, *mpos;           /* [chunk]: each MTP row's token and position */

	/* A verify's tape (tf_pipeline_tape): each layer's attention input
	 * rows, then the final-normed rows; backend memory, copied there
	 * within the step (no host wait: a graphed verify stays whole),
	 * [n_layers + 1][tape_cap, hidden]; and the step's tokens. */
	float *tape;
	int64_t tape_cap, tape_n;       /* tape_n: rows taped, 0: none */
	int32_t *tpos, *ttok;           /* [tape_cap]: a replay's positions, the tokens */
	bool taping;                    /* armed for the next step */
	int first_legacy;               /* a pre-1.5 attention layer, or -1 */
	const void *legacy_owner;       /* the seqstate its instances hold */
	double stage_s[TF_STAGE_COUNT];

	/* [runtime] cuda_graph on a backend with graph slots: decode steps
	 * and MTP drafts run as graphs, a part of the step between each two
	 * host waits; `recording` while a part is.  How many steps ran so,
	 * how many graphs (parts) ran, and how many of those were built. */
	bool graph, recording;
	uint64_t graph_steps, graph_runs, graph_built;
};

double tf_pipeline_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *tf_stage_name(tf_stage s)
{
	static const char *const name[TF_STAGE_COUNT] = {
		[TF_STAGE_EMBED] = "embed", [TF_STAGE_KDA] = "kda",
		[TF_STAGE_MLA] = "mla", [TF_STAGE_DENSE] = "dense",
		[TF_STAGE_MOE] = "moe", [TF_STAGE_NORM] = "norm+residual",
		[TF_STAGE_HEAD] = "lm_head", [TF_STAGE_OTHER] = "other",
		[TF_STAGE_TP] = "tp-comm",
	};
	return (unsigned)s < TF_STAGE_COUNT ? name[s] : "?";
}

/* The stage a layer type's time counts under. */
static tf_stage stage_of(const char *type)
{
	static const tf_stage typed[] = { TF_STAGE_KDA, TF_STAGE_MLA, TF_STAGE_DENSE,
					  TF_STAGE_MOE };
	for (size_t i = 0; i < sizeof(typed) / sizeof(typed[0]); i++)
		if (!strcmp(type, tf_stage_name(typed[i])))
			return typed[i];
	return TF_STAGE_OTHER;
}

/* A norm weight [hidden] as float32, whatever its stored type. */
static int load_norm(tf_pipeline *p, const char *name, float **out)
{
	tf_tensor t;
	if (p->h->weight_get(p->h, name, &t) != TF_OK)
		return tf_diag_set(TF_ERR_NOT_FOUND, "checkpoint has no tensor %s", name);
	if (t.ndim != 1 || t.shape[0] != p->hidden)
		return tf_diag_set(TF_ERR_FORMAT, "%s: shape must be [%" PRId64 "]",
				   name, p->hidden);
	*out = p->be->alloc(p->bctx, (size_t)p->hidden * sizeof(float));
	if (!*out)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", name);
	int rc = p->be->convert(p->bctx, *out, TF_DTYPE_F32, t.data, t.dtype, p->hidden);
	if (rc != TF_OK)
		return tf_diag_set(rc, "%s: cannot convert %s to F32", name,
				   tf_dtype_name(t.dtype));
	return TF_OK;
}

/* Layer i's norm "model.layers.<i>.<leaf>". */
static int load_layer_norm(tf_pipeline *p, int i, const char *leaf, float **out)
{
	char name[256];
	snprintf(name, sizeof(name), "model.layers.%d.%s", i, leaf);
	return load_norm(p, name, out);
}

static int init_layer(tf_pipeline *p, int i)
{
	struct tf_layer *l = &p->layers[i];
	char name[256];
	int rc;

	l->attn = tf_runtime_attention(p->rt, i);
	l->ffn = tf_runtime_ffn(p->rt, i);
	if (!l->attn || !l->ffn)
		return tf_diag_set(TF_ERR_NOT_FOUND, "layer %d: no %s plugin chosen", i,
				   l->attn ? "ffn" : "attention");
	l->attn_stage = stage_of(l->attn->layer_type);
	/* The registry took all of the 1.5 state slots or none. */
	l->batched = l->attn->hdr.struct_size >= offsetof(tf_plugin_attention, forward_batch) +
						  sizeof(l->attn->forward_batch) &&
		     l->attn->forward_batch;
	l->appends = l->batched &&
		     l->attn->hdr.struct_size >= offsetof(tf_plugin_attention, state_append) +
						  sizeof(l->attn->state_append) &&
		     l->attn->state_append;
	if (!l->batched && p->first_legacy < 0)
		p->first_legacy = i;
	l->ffn_stage = stage_of(l->ffn->layer_type);

	if ((rc = load_layer_norm(p, i, "input_layernorm.weight", &l->in_norm)) != TF_OK ||
	    (rc = load_layer_norm(p, i, "post_attention_layernorm.weight", &l->post_norm)) != TF_OK)
		return rc;

	snprintf(name, sizeof(name), "model.layers.%d.attention", i);
	rc = l->attn->layer_init(p->h, i, name, tf_runtime_context(p->rt), &l->attn_inst);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "layer %d (%s)", i, l->attn->hdr.name);
	snprintf(name, sizeof(name), "model.layers.%d.mlp", i);
	rc = l->ffn->layer_init(p->h, i, name, &l->ffn_inst);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "layer %d (%s)", i, l->ffn->hdr.name);
	return TF_OK;
}

/* The MTP layer (spec 1.10): a layer like the others at index
 * num_hidden_layers, and its own norms and eh_proj around it. */
static int init_mtp(tf_pipeline *p)
{
	int L = p->n_layers, rc;
	char name[256];
	size_t rowbytes = (size_t)p->chunk * (size_t)p->hidden * sizeof(float);

	if ((rc = init_layer(p, L)) != TF_OK)
		return tf_diag_prefix(rc, "[mtp] enabled");
	if ((rc = load_layer_norm(p, L, "enorm.weight", &p->enorm)) != TF_OK ||
	    (rc = load_layer_norm(p, L, "hnorm.weight", &p->hnorm)) != TF_OK ||
	    (rc = load_layer_norm(p, L, "final_layernorm.weight", &p->mtp_norm)) != TF_OK)
		return rc;
	snprintf(name, sizeof(name), "model.layers.%d.eh_proj", L);
	if ((rc = p->h->lin_open(p->h, name, 2 * p->hidden, p->hidden, &p->eh_proj)) != TF_OK)
		return rc;
	p->fbuf = p->be->alloc(p->bctx, rowbytes);
	p->pbuf = p->be->alloc(p->bctx, rowbytes);
	p->cbuf = p->be->alloc(p->bctx, 2 * rowbytes);
	p->mhid = malloc((size_t)p->chunk * sizeof(*p->mhid));
	p->mtok = malloc((size_t)p->chunk * sizeof(*p->mtok));
	p->mpos = malloc((size_t)p->chunk * sizeof(*p->mpos));
	if (!p->fbuf || !p->pbuf || !p->cbuf || !p->mhid || !p->mtok || !p->mpos)
		return tf_diag_set(TF_ERR_NOMEM, "pipeline: out of memory for the MTP layer");
	return TF_OK;
}

/*
 * Read every weight page once, with a progress bar.  The checkpoint is
 * mmap'd, so otherwise the first prompt would pay the disk reads inside
 * its prefill time, and a cold multi-GB model would look frozen.
 */
static void prefault_weights(const tf_weights *w)
{
	uint64_t total = 0, done = 0;
	size_t n = tf_weights_count(w);
	volatile unsigned char sink = 0;
	long page = sysconf(_SC_PAGESIZE);
	tf_progress bar;

	if (page <= 0)
		page = 4096;

	for (size_t i = 0; i < n; i++)
		total += tf_weights_at(w, i)->nbytes;
	tf_progress_init(&bar, "loading weights", total, TF_PROGRESS_BYTES);
	for (size_t i = 0; i < n; i++) {
		const tf_tensor *t = tf_weights_at(w, i);
		const unsigned char *b = t->data;
		for (size_t off = 0; off < t->nbytes; off += (size_t)page)
			sink ^= b[off];
		done += t->nbytes;
		tf_progress_update(&bar, done);
	}
	tf_progress_finish(&bar);
	(void)sink;
}

/* lm_head, or with several ranks this rank's rows of the vocabulary;
 * its messages name lm_head's tensors. */
static int head_open(tf_pipeline *p)
{
	const tf_host *h = p->h;
	int n = h->tp_size > 1 ? h->tp_size : 1;
	p->vpart = p->vocab / n;
	if (n == 1)
		return h->lin_open(h, "lm_head", p->hidden, p->vocab, &p->head);
	if (p->vocab % n)
		return tf_diag_set(TF_ERR_UNSUPPORTED,
				   "lm_head: vocab_size = %" PRId64 " does not split evenly over [tp] size %d",
				   p->vocab, n);
	const tf_lin_part part = { .axis = TF_LIN_PART_OUT, .lo = p->vpart * h->tp_rank,
				   .hi = p->vpart * (h->tp_rank + 1) };
	return h->lin_open_part(h, "lm_head", p->hidden, p->vocab, &part, &p->head);
}

/* The pipeline, its weights paged in first when `prefault`. */
/*
 * The pipeline runs its own steps (embedding, norms, residual adds) with
 * the backend's ops on backend memory, and copies out only through
 * download (the head's logits, a verify's tape, the MTP hidden), so any
 * backend with those ops runs it, a device one (cuda, cuda-sim) too.
 * One without is refused by name here rather than crashing in a NULL slot.
 */
static int check_backend(const tf_backend *be)
{
	static const struct { const char *name; size_t at; } ops[] = {
		{ "rmsnorm", offsetof(tf_backend, rmsnorm) },
		{ "add", offsetof(tf_backend, add) },
		{ "embed", offsetof(tf_backend, embed) },
		{ "convert", offsetof(tf_backend, convert) },
	};
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		void *slot;
		memcpy(&slot, (const char *)be + ops[k].at, sizeof(slot));
		if (!slot)
			return tf_diag_set(TF_ERR_UNSUPPORTED,
					   "[plugins] backend %s has no %s, which the engine's "
					   "layer pipeline needs", be->hdr.name, ops[k].name);
	}
	return TF_OK;
}

static int pipeline_open(tf_runtime *rt, bool prefault, tf_pipeline **out)
{
	tf_pipeline *p = calloc(1, sizeof(*p));
	int rc = TF_ERR_NOMEM;
	if (!p)
		return tf_diag_set(TF_ERR_NOMEM, "pipeline: out of memory");
	p->rt = rt;
	p->h = tf_runtime_host(rt);
	p->cfg = tf_runtime_model(rt);
	p->be = p->h->backend;
	p->bctx = p->h->backend_ctx;
	if ((rc = check_backend(p->be)) != TF_OK)
		goto fail;
	p->n_layers = p->cfg->num_hidden_layers;
	p->hidden = p->cfg->hidden_size;
	p->vocab = p->cfg->vocab_size;
	p->chunk = tf_runtime_prefill_chunk(rt);
	p->first_legacy = -1;
	p->mtp = tf_runtime_mtp(rt);
	if ((rc = tf_conf_get_bool(tf_runtime_conf(rt), "runtime", "cuda_graph", true, &p->graph)))
		goto fail;
	p->graph = p->graph && tf_backend_has_graph(p->be);
	/* A rank of several reads only its share: paging the whole
	 * checkpoint in would defeat that. */
	if (prefault && p->h->tp_size <= 1)
		prefault_weights(tf_runtime_weights(rt));

	if (p->h->weight_get(p->h, "model.word_embeddings.weight", &p->embed) != TF_OK) {
		rc = tf_diag_set(TF_ERR_NOT_FOUND,
				 "checkpoint has no tensor model.word_embeddings.weight");
		goto fail;
	}
	if (p->embed.ndim != 2 || p->embed.shape[0] < p->vocab ||
	    p->embed.shape[1] != p->hidden) {
		rc = tf_diag_set(TF_ERR_FORMAT,
				 "model.word_embeddings.weight: shape must be [%" PRId64
				 ", %" PRId64 "] (vocab_size, hidden_size)", p->vocab, p->hidden);
		goto fail;
	}
	/* The backends' embed gathers float rows only: refused here, so that
	 * --check sees it, not the first prefill. */
	if (p->embed.dtype != TF_DTYPE_F32 && p->embed.dtype != TF_DTYPE_F16 &&
	    p->embed.dtype != TF_DTYPE_BF16) {
		rc = tf_diag_set(TF_ERR_FORMAT, "model.word_embeddings.weight: dtype %s, expected "
				 "F32, F16 or BF16", tf_dtype_name(p->embed.dtype));
		goto fail;
	}

	size_t rowbytes = (size_t)p->chunk * (size_t)p->hidden * sizeof(float);
	p->hbuf = p->be->alloc(p->bctx, rowbytes);
	p->xbuf = p->be->alloc(p->bctx, rowbytes);
	p->ybuf = p->be->alloc(p->bctx, rowbytes);
	p->segbuf = malloc((size_t)p->chunk * sizeof(*p->segbuf));
	p->layers = calloc((size_t)p->n_layers + 1, sizeof(*p->layers));
	if (!p->hbuf || !p->xbuf || !p->ybuf || !p->segbuf || !p->layers) {
		rc = tf_diag_set(TF_ERR_NOMEM, "pipeline: out of memory for %" PRId64
				 "-token activation buffers", p->chunk);
		goto fail;
	}

	for (int i = 0; i < p->n_layers; i++)
		if ((rc = init_layer(p, i)) != TF_OK)
			goto fail;
	if (p->mtp && (rc = init_mtp(p)) != TF_OK)
		goto fail;
	if ((rc = load_norm(p, "model.norm.weight", &p->final_norm)) != TF_OK)
		goto fail;
	if ((rc = head_open(p)) != TF_OK)
		goto fail;
	*out = p;
	return TF_OK;
fail:
	tf_pipeline_free(p);
	return rc;
}

int tf_pipeline_init(tf_runtime *rt, tf_pipeline **out)
{
	return pipeline_open(rt, true, out);
}

int tf_pipeline_check(tf_runtime *rt)
{
	tf_pipeline *p;
	int rc = pipeline_open(rt, false, &p);
	if (rc == TF_OK)
		tf_pipeline_free(p);
	return rc;
}

void tf_pipeline_free(tf_pipeline *p)
{
	if (!p)
		return;
	p->be->quiesce(p->bctx);
	for (int i = 0; p->layers && i < p->n_layers + p->mtp; i++) {
		struct tf_layer *l = &p->layers[i];
		if (l->attn_inst)
			l->attn->layer_fini(l->attn_inst);
		if (l->ffn_inst)
			l->ffn->layer_fini(l->ffn_inst);
		p->be->free(p->bctx, l->in_norm);
		p->be->free(p->bctx, l->post_norm);
	}
	if (p->head.impl)
		p->h->lin_close(p->h, &p->head);
	if (p->eh_proj.impl)
		p->h->lin_close(p->h, &p->eh_proj);
	p->be->free(p->bctx, p->enorm);
	p->be->free(p->bctx, p->hnorm);
	p->be->free(p->bctx, p->mtp_norm);
	p->be->free(p->bctx, p->fbuf);
	p->be->free(p->bctx, p->pbuf);
	p->be->free(p->bctx, p->cbuf);
	free(p->mhid);
	free(p->mtok);
	free(p->mpos);
	p->be->free(p->bctx, p->tape);
	free(p->tpos);
	free(p->ttok);
	p->be->free(p->bctx, p->final_norm);
	free(p->gbuf);
	free(p->rbuf);
	p->be->free(p->bctx, p->lbuf);
	p->be->free(p->bctx, p->hbuf);
	p->be->free(p->bctx, p->xbuf);
	p->be->free(p->bctx, p->ybuf);
	free(p->segbuf);
	free(p->layers);
	free(p);
}

void tf_pipeline_attach_tp(tf_pipeline *p, tf_tp *tp) { p->tp = tp; }

/* Charge the time since *t to stage s. */
static void lap(tf_pipeline *p, tf_stage s, double *t)
{
	double t2 = tf_pipeline_clock();
	p->stage_s[s] += t2 - *t;
	*t = t2;
}

/* Record what is queued on the stream from here as a part of a step's
 * graphs (backend.h: graph_begin). */
static int graph_part_begin(tf_pipeline *p)
{
	int rc = p->be->graph_begin(p->bctx);
	p->recording = rc == TF_OK;
	return rc == TF_OK ? TF_OK : tf_diag_prefix(rc, "pipeline: a step's graph");
}

/* Run the part recorded since graph_part_begin (TF_GRAPH_RUN: the step's
 * last, TF_GRAPH_PART: a host wait and another part follow) or drop it. */
static int graph_part_end(tf_pipeline *p, int run)
{
	int reused = 0;
	p->recording = false;
	int rc = p->be->graph_end(p->bctx, run, &reused);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "pipeline: a step's graph");
	if (run != TF_GRAPH_DROP) {
		p->graph_runs++;
		p->graph_built += !reused;
	}
	return TF_OK;
}

/*
 * On a backend with graph slots ([runtime] cuda_graph) the work between
 * graph_part_begin and graph_close is recorded and run as graphs, one part
 * between each two host waits (tp_sum ends one and begins the next):
 * the backend replays the graph it keeps for each part's place in the
 * step with this step's parameters when their nodes match.  graph_close
 * ends the last part, or drops it when the step failed (rc).
 */
static int graph_close(tf_pipeline *p, int rc)
{
	if (!p->recording)      /* a part failed to begin: rc says why */
		return rc;
	int end = graph_part_end(p, rc == TF_OK ? TF_GRAPH_RUN : TF_GRAPH_DROP);
	if (rc == TF_OK && end == TF_OK)
		p->graph_steps++;
	return rc != TF_OK ? rc : end;
}

/* Sum the ranks' partial block outputs ybuf [n, hidden] (rank order, so
 * every rank holds the same bits); nothing with one rank.  The transports
 * take host buffers: a device backend's (one with a stream) rows are
 * downloaded to rbuf, which waits for the block's kernels (their time
 * counts under the block's `stage`), summed there and uploaded back.  A
 * step recorded as graphs runs its part so far before the download and
 * records the next from the upload on, even when the sum failed (the
 * step's end then drops it). */
static int tp_sum(tf_pipeline *p, int i, const char *block, tf_stage stage, int64_t n,
		  double *t)
{
	if (!p->tp)
		return TF_OK;
	const size_t count = (size_t)(n * p->hidden), bytes = count * sizeof(float);
	const bool recording = p->recording;
	float *buf = p->ybuf;
	int rc = recording ? graph_part_end(p, TF_GRAPH_PART) : TF_OK;
	if (rc == TF_OK && tf_backend_stream(p->be, p->bctx)) {
		if (!p->rbuf && !(p->rbuf = malloc((size_t)(p->chunk * p->hidden) * sizeof(float))))
			rc = tf_diag_set(TF_ERR_NOMEM, "out of memory");
		buf = p->rbuf;
		if (rc == TF_OK)
			rc = p->be->download(p->bctx, buf, p->ybuf, bytes);
	}
	lap(p, stage, t);
	if (rc == TF_OK)
		rc = tf_tp_all_reduce(p->tp, buf, count, TF_DTYPE_F32);
	if (recording && !p->recording) {
		int rb = graph_part_begin(p);
		rc = rc == TF_OK ? rb : rc;
	}
	if (rc == TF_OK && buf != p->ybuf)
		rc = p->be->upload(p->bctx, p->ybuf, buf, bytes);
	lap(p, TF_STAGE_TP, t);
	return rc == TF_OK ? TF_OK : tf_diag_prefix(rc, "layer %d: %s all-reduce", i, block);
}

/* Layer l's token mixer over the step's segments. */
/* `state_only`: the output in ybuf is not read, only the states move. */
static int attend(tf_pipeline *p, int i, const int32_t *pos, int64_t n, const tf_pipe_seg *seg,
		  int n_seg, bool state_only)
{
	struct tf_layer *l = &p->layers[i];
	if (!l->batched)        /* one sequence, held by the instance */
		return l->attn->forward(l->attn_inst, p->xbuf, n, pos, p->ybuf);
	for (int k = 0; k < n_seg; k++)
		p->segbuf[k] = (tf_attn_seg){ .state = tf_seqstate_layer(seg[k].state, i),
					      .row0 = seg[k].row0, .n = seg[k].n };
	const tf_attn_batch b = { .n = n, .pos = pos, .n_seg = n_seg, .seg = p->segbuf };
	if (state_only && l->appends)
		return l->attn->state_append(l->attn_inst, p->xbuf, &b);
	return l->attn->forward_batch(l->attn_inst, p->xbuf, &b, p->ybuf);
}

/* Slot k of an armed tape <- rows [0, n) of x, both backend memory (a
 * copy: convert between equal types). */
static int tape_keep(tf_pipeline *p, int k, const float *x, int64_t n)
{
	if (!p->taping)
		return TF_OK;
	int rc = p->be->convert(p->bctx, p->tape + (size_t)k * (size_t)p->tape_cap *
				(size_t)p->hidden, TF_DTYPE_F32, x, TF_DTYPE_F32, n * p->hidden);
	return rc == TF_OK ? TF_OK : tf_diag_prefix(rc, "pipeline: a verify's tape");
}

/*
 * The MTP layer over n rows set up in mtok, mpos and mhid, of the
 * sequence seg names: eh_proj([enorm(embed(token)); hnorm(hidden)]), then the
 * layer's attention, which appends to each sequence's MTP state.  With
 * `out` the FFN and final_layernorm follow, out [n, hidden] receiving
 * the rows; without, only the attention state was wanted.
 */
static int mtp_rows(tf_pipeline *p, int64_t n, const tf_pipe_seg *seg, int n_seg, float *out)
{
	const tf_backend *be = p->be;
	struct tf_layer *l = &p->layers[p->n_layers];
	int64_t hd = p->hidden;
	float eps = p->cfg->rms_norm_eps;
	double t = tf_pipeline_clock();
	int rc;

	be->embed(p->bctx, p->ybuf, p->embed.data, p->embed.dtype, hd, p->mtok, n);
	lap(p, TF_STAGE_EMBED, &t);
	for (int64_t r = 0; r < n; r++) {       /* the embedding first */
		be->rmsnorm(p->bctx, p->cbuf + 2 * r * hd, p->ybuf + r * hd, p->enorm, 1, hd, eps);
		be->rmsnorm(p->bctx, p->cbuf + (2 * r + 1) * hd, p->mhid[r], p->hnorm, 1, hd, eps);
	}
	lap(p, TF_STAGE_NORM, &t);
	if ((rc = tf_lin_forward(&p->eh_proj, p->cbuf, n, p->hbuf)) != TF_OK)
		return tf_diag_prefix(rc, "MTP layer %d: eh_proj", p->n_layers);
	lap(p, TF_STAGE_OTHER, &t);
	be->rmsnorm(p->bctx, p->xbuf, p->hbuf, l->in_norm, n, hd, eps);
	lap(p, TF_STAGE_NORM, &t);
	if ((rc = attend(p, p->n_layers, p->mpos, n, seg, n_seg, !out)) != TF_OK)
		return tf_diag_prefix(rc, "MTP layer %d (%s)", p->n_layers, l->attn->hdr.name);
	lap(p, l->attn_stage, &t);
	if (!out)
		return TF_OK;
	if ((rc = tp_sum(p, p->n_layers, "attention", l->attn_stage, n, &t)) != TF_OK)
		return rc;
	be->add(p->bctx, p->hbuf, p->hbuf, p->ybuf, n * hd);
	be->rmsnorm(p->bctx, p->xbuf, p->hbuf, l->post_norm, n, hd, eps);
	lap(p, TF_STAGE_NORM, &t);
	if ((rc = l->ffn->forward(l->ffn_inst, p->xbuf, n, p->ybuf)) != TF_OK)
		return tf_diag_prefix(rc, "MTP layer %d (%s)", p->n_layers, l->ffn->hdr.name);
	lap(p, l->ffn_stage, &t);
	if ((rc = tp_sum(p, p->n_layers, "FFN", l->ffn_stage, n, &t)) != TF_OK)
		return rc;
	be->add(p->bctx, p->hbuf, p->hbuf, p->ybuf, n * hd);
	be->rmsnorm(p->bctx, out, p->hbuf, p->mtp_norm, n, hd, eps);
	lap(p, TF_STAGE_NORM, &t);
	return TF_OK;
}

/*
 * Keep a step's final-normed rows (fbuf) with their sequences, for the MTP
 * layer to be fed when it is wanted (tf_pipeline_mtp_catch_up).
 */
static int mtp_keep(tf_pipeline *p, const int32_t *tokens, const int32_t *pos,
		    const tf_pipe_seg *seg, int n_seg)
{
	for (int k = 0; k < n_seg; k++) {
		const tf_pipe_seg *g = &seg[k];
		float *rows;
		int rc = tf_seqstate_pend_add(g->state, pos[g->row0], tokens + g->row0, g->n, &rows);
		if (rc != TF_OK)
			return rc;
		rc = p->be->download(p->bctx, rows, p->fbuf + g->row0 * p->hidden,
				     (size_t)(g->n * p->hidden) * sizeof(float));
		if (rc != TF_OK)
			return tf_diag_set(rc, "MTP layer: download failed");
	}
	return TF_OK;
}

/*
 * The MTP row at position t takes the final-normed hidden of t and the
 * token of t + 1: every kept row but the last has both.  They go through
 * the layer's attention a step's rows at a time.
 */
int tf_pipeline_mtp_catch_up(tf_pipeline *p, tf_seqstate *s)
{
	float *hid;
	int32_t *tok, pos0;
	int64_t m = tf_seqstate_pending(s, &hid, &tok, &pos0) - 1, done = 0;
	int rc = TF_OK;
	double t = tf_pipeline_clock();

	while (done < m) {
		int64_t n = m - done < p->chunk ? m - done : p->chunk;
		/* The rows a verify kept run as a graph; more (a prompt's) not. */
		if (p->graph && n <= p->tape_cap && (rc = graph_part_begin(p)) != TF_OK)
			break;
		rc = p->be->upload(p->bctx, p->pbuf, hid + done * p->hidden,
				   (size_t)(n * p->hidden) * sizeof(float));
		if (rc != TF_OK)
			rc = tf_diag_set(rc, "MTP layer: upload failed");
		for (int64_t r = 0; r < n; r++) {
			p->mhid[r] = p->pbuf + r * p->hidden;
			p->mtok[r] = tok[done + r + 1];
			p->mpos[r] = pos0 + (int32_t)(done + r);
		}
		const tf_pipe_seg seg = { .state = s, .row0 = 0, .n = n };
		if (rc == TF_OK)
			rc = mtp_rows(p, n, &seg, 1, NULL);
		if ((rc = graph_close(p, rc)) != TF_OK)
			break;
		done += n;
	}
	if (done)
		tf_seqstate_pend_drop(s, done);
	p->caught_s += tf_pipeline_clock() - t;
	p->caught += done;
	return rc;
}

void tf_pipeline_mtp_caught(const tf_pipeline *p, double *seconds, int64_t *rows)
{
	*seconds = p->caught_s;
	*rows = p->caught;
}

int tf_pipeline_mtp(tf_pipeline *p, tf_seqstate *s, int32_t token, int32_t pos,
		    const float *hidden, float *out)
{
	if (!p->mtp)
		return tf_diag_set(TF_ERR_INVALID, "[mtp] enabled is false: no MTP layer is open");
	float *kept = NULL;
	int32_t *tok, at;
	if (!hidden && (tf_seqstate_pending(s, &kept, &tok, &at) != 1 || at != pos))
		return tf_diag_set(TF_ERR_INTERNAL, "MTP layer: a draft at %d, not caught up", pos);
	/* A draft is a decode step of the MTP layer: one row, as graphs. */
	int rc = p->graph ? graph_part_begin(p) : TF_OK;
	if (rc != TF_OK)
		return rc;
	if (!hidden) {
		if ((rc = p->be->upload(p->bctx, p->pbuf, kept, (size_t)p->hidden *
					sizeof(float))) != TF_OK)
			return graph_close(p, tf_diag_set(rc, "MTP layer: upload failed"));
		hidden = p->pbuf;
	}
	p->mhid[0] = hidden;
	p->mtok[0] = token;
	p->mpos[0] = pos;
	const tf_pipe_seg seg = { .state = s, .row0 = 0, .n = 1 };
	return graph_close(p, mtp_rows(p, 1, &seg, 1, out));
}

/* tf_pipeline_step's work on the device: its checks and the rows kept
 * for the MTP layer aside. */
static int step_layers(tf_pipeline *p, const int32_t *tokens, const int32_t *pos, int64_t n,
		       const tf_pipe_seg *seg, int n_seg, const tf_pipe_out *out, float *hidden)
{
	const tf_backend *be = p->be;
	int64_t hd = p->hidden;
	double t = tf_pipeline_clock();
	int rc;

	be->embed(p->bctx, p->hbuf, p->embed.data, p->embed.dtype, hd, tokens, n);
	lap(p, TF_STAGE_EMBED, &t);

	for (int i = 0; i < p->n_layers; i++) {
		struct tf_layer *l = &p->layers[i];
		be->rmsnorm(p->bctx, p->xbuf, p->hbuf, l->in_norm, n, hd, p->cfg->rms_norm_eps);
		lap(p, TF_STAGE_NORM, &t);
		if ((rc = tape_keep(p, i, p->xbuf, n)) != TF_OK)
			return rc;
		if ((rc = attend(p, i, pos, n, seg, n_seg, false)) != TF_OK)
			return tf_diag_prefix(rc, "layer %d (%s)", i, l->attn->hdr.name);
		lap(p, l->attn_stage, &t);
		if ((rc = tp_sum(p, i, "attention", l->attn_stage, n, &t)) != TF_OK)
			return rc;
		be->add(p->bctx, p->hbuf, p->hbuf, p->ybuf, n * hd);
		be->rmsnorm(p->bctx, p->xbuf, p->hbuf, l->post_norm, n, hd, p->cfg->rms_norm_eps);
		lap(p, TF_STAGE_NORM, &t);
		rc = l->ffn->forward(l->ffn_inst, p->xbuf, n, p->ybuf);
		if (rc != TF_OK)
			return tf_diag_prefix(rc, "layer %d (%s)", i, l->ffn->hdr.name);
		lap(p, l->ffn_stage, &t);
		if ((rc = tp_sum(p, i, "FFN", l->ffn_stage, n, &t)) != TF_OK)
			return rc;
		be->add(p->bctx, p->hbuf, p->hbuf, p->ybuf, n * hd);
	}
	/* Only the rows asked for need the final norm, and the MTP layer. */
	for (int64_t k = 0; k < out->n; k++)
		be->rmsnorm(p->bctx, hidden + out->at[k] * hd, p->hbuf + out->row[k] * hd,
			    p->final_norm, 1, hd, p->cfg->rms_norm_eps);
	if (p->mtp)
		be->rmsnorm(p->bctx, p->fbuf, p->hbuf, p->final_norm, n, hd, p->cfg->rms_norm_eps);
	lap(p, TF_STAGE_NORM, &t);
	return p->mtp ? tape_keep(p, p->n_layers, p->fbuf, n) : TF_OK;
}

/*
 * Decode-shaped steps run as graphs: a row a sequence (a decode step, a
 * batch of them, a prompt fed a row at a time) or a verify's rows (a
 * draft's depth + 1, taped), whose shapes repeat from step to step.  A
 * prefill's rows change with every step and would only build graphs.
 */
static bool step_graphed(const tf_pipeline *p, const tf_pipe_seg *seg, int n_seg)
{
	if (!p->graph)
		return false;
	if (p->taping)
		return true;
	for (int k = 0; k < n_seg; k++)
		if (seg[k].n != 1)
			return false;
	return true;
}

static int step_run(tf_pipeline *p, const int32_t *tokens, const int32_t *pos, int64_t n,
		    const tf_pipe_seg *seg, int n_seg, const tf_pipe_out *out, float *hidden)
{
	int rc = TF_OK;
	if (step_graphed(p, seg, n_seg))
		rc = graph_part_begin(p);
	if (rc == TF_OK)
		rc = step_layers(p, tokens, pos, n, seg, n_seg, out, hidden);
	rc = graph_close(p, rc);
	/* The MTP layer's rows to the host, after the step's graphs. */
	if (rc == TF_OK && p->mtp)
		rc = mtp_keep(p, tokens, pos, seg, n_seg);
	return rc;
}

int tf_pipeline_step(tf_pipeline *p, const int32_t *tokens, const int32_t *pos, int64_t n,
		     const tf_pipe_seg *seg, int n_seg, const tf_pipe_out *out, float *hidden)
{
	int rc;

	if (n < 1 || n > p->chunk || n_seg < 1 || (p->first_legacy >= 0 && n_seg > 1))
		return tf_diag_set(TF_ERR_INTERNAL, "pipeline: a step of %" PRId64
				   " rows in %d segments", n, n_seg);
	/* What a sequence keeps for the MTP layer stays within a step's rows
	 * fed at once, and the one whose next token is not known: fed, or, while
	 * the sequence skips, dropped down to the recent half a step's room
	 * leaves (the MTP layer's attention goes without the rest). */
	for (int k = 0; p->mtp && k < n_seg; k++) {
		tf_seqstate *s = seg[k].state;
		int64_t have = tf_seqstate_pending_n(s), n_k = seg[k].n;
		if (have + n_k <= p->chunk + 1)
			continue;
		if (tf_seqstate_mtp_skips(s)) {
			int64_t keep = p->chunk + 1 - n_k < p->chunk / 2 ? p->chunk + 1 - n_k
									 : p->chunk / 2;
			tf_seqstate_pend_drop(s, have - keep);
		} else if ((rc = tf_pipeline_mtp_catch_up(p, s)) != TF_OK) {
			return rc;
		}
	}
	/* An armed tape takes this step only, and only a verify's shape:
	 * sequences that continue. */
	p->tape_n = 0;
	p->taping = p->taping && n <= p->tape_cap;
	for (int k = 0; p->taping && k < n_seg; k++)
		p->taping = pos[seg[k].row0] > 0;
	if (p->taping)
		memcpy(p->ttok, tokens, (size_t)n * sizeof(*tokens));
	rc = step_run(p, tokens, pos, n, seg, n_seg, out, hidden);
	if (rc == TF_OK && p->taping)
		p->tape_n = n;
	p->taping = false;
	return rc;
}

int tf_pipeline_tape_open(tf_pipeline *p, int64_t rows)
{
	if (rows > p->chunk)
		rows = p->chunk;
	p->tape = p->be->alloc(p->bctx, (size_t)(p->n_layers + 1) * (size_t)rows *
			       (size_t)p->hidden * sizeof(float));
	p->tpos = malloc((size_t)rows * sizeof(*p->tpos));
	p->ttok = malloc((size_t)rows * sizeof(*p->ttok));
	if (!p->tape || !p->tpos || !p->ttok)
		return tf_diag_set(TF_ERR_NOMEM, "pipeline: out of memory for a verify's tape");
	p->tape_cap = rows;
	return TF_OK;
}

void tf_pipeline_tape(tf_pipeline *p)
{
	p->taping = p->tape_cap > 0;
}

int64_t tf_pipeline_taped(const tf_pipeline *p) { return p->tape_n; }

int tf_pipeline_replay(tf_pipeline *p, tf_seqstate *s, int64_t row0, int32_t pos, int64_t n)
{
	size_t slot = (size_t)p->tape_cap * (size_t)p->hidden;
	size_t at = (size_t)row0 * (size_t)p->hidden;
	size_t bytes = (size_t)n * (size_t)p->hidden * sizeof(float);
	const tf_pipe_seg seg = { .state = s, .row0 = 0, .n = n };
	double t = tf_pipeline_clock();
	int rc;

	if (row0 < 0 || n < 1 || row0 + n > p->tape_n)
		return tf_diag_set(TF_ERR_INTERNAL, "pipeline: replay of rows %" PRId64 "..%" PRId64
				   " from a tape of %" PRId64, row0, row0 + n - 1, p->tape_n);
	for (int64_t r = 0; r < n; r++)
		p->tpos[r] = pos + (int32_t)r;
	for (int i = 0; i < p->n_layers; i++) {
		struct tf_layer *l = &p->layers[i];
		if ((rc = p->be->convert(p->bctx, p->xbuf, TF_DTYPE_F32, p->tape + (size_t)i * slot + at,
					 TF_DTYPE_F32, n * p->hidden)) != TF_OK)
			return tf_diag_prefix(rc, "pipeline: a verify's tape");
		if ((rc = attend(p, i, p->tpos, n, &seg, 1, true)) != TF_OK)
			return tf_diag_prefix(rc, "layer %d (%s): replay", i, l->attn->hdr.name);
		lap(p, l->attn_stage, &t);
	}
	if (!p->mtp)
		return TF_OK;
	float *rows;
	if ((rc = tf_seqstate_pend_add(s, pos, p->ttok + row0, n, &rows)) != TF_OK)
		return rc;
	rc = p->be->download(p->bctx, rows, p->tape + (size_t)p->n_layers * slot + at, bytes);
	return rc == TF_OK ? TF_OK : tf_diag_set(rc, "pipeline: tape download failed");
}

/* logits [n, vocab] from every rank's [n, vpart] columns, in rank order. */
static int head_gather(tf_pipeline *p, int64_t n, float *logits)
{
	int ranks = tf_tp_size(p->tp);
	size_t part = (size_t)(n * p->vpart);
	if (n > p->gbuf_rows) {
		float *g = realloc(p->gbuf, (size_t)ranks * part * sizeof(float));
		if (!g)
			return tf_diag_set(TF_ERR_NOMEM, "lm_head: out of memory for %" PRId64
					   " gathered rows", n);
		p->gbuf = g;
		p->gbuf_rows = n;
	}
	int rc = tf_tp_all_gather(p->tp, logits, p->gbuf, part * sizeof(float));
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "lm_head: all-gather");
	for (int r = 0; r < ranks; r++)
		for (int64_t i = 0; i < n; i++)
			memcpy(logits + i * p->vocab + r * p->vpart, p->gbuf + r * part + i * p->vpart,
			       (size_t)p->vpart * sizeof(float));
	return TF_OK;
}

/* lm_head's rows into the device backend's logits buffer (lbuf), grown
 * to n rows first; then sync, which reports any op that failed during
 * the step. */
static int head_keep(tf_pipeline *p, const float *hidden, int64_t n)
{
	size_t bytes = (size_t)n * (size_t)p->vpart * sizeof(float);
	int rc;

	if (n > p->lbuf_rows) {
		p->be->quiesce(p->bctx);
		p->be->free(p->bctx, p->lbuf);
		p->lbuf_rows = 0;
		if (!(p->lbuf = p->be->alloc(p->bctx, bytes)))
			return tf_diag_set(TF_ERR_NOMEM, "out of backend memory for %" PRId64
					   " rows of logits", n);
		p->lbuf_rows = n;
	}
	if ((rc = tf_lin_forward(&p->head, hidden, n, p->lbuf)) != TF_OK)
		return rc;
	return p->be->sync(p->bctx);
}

/* lm_head's rows into host logits [n, vpart].  A device backend (one
 * with a stream) writes them to backend memory and downloads them. */
static int head_rows(tf_pipeline *p, const float *hidden, int64_t n, float *logits)
{
	int rc;

	if (!tf_backend_stream(p->be, p->bctx))
		return tf_lin_forward(&p->head, hidden, n, logits);
	if ((rc = head_keep(p, hidden, n)) != TF_OK)
		return rc;
	return p->be->download(p->bctx, logits, p->lbuf,
			       (size_t)n * (size_t)p->vpart * sizeof(float));
}

int tf_pipeline_head(tf_pipeline *p, const float *hidden, int64_t n, float *logits)
{
	double t = tf_pipeline_clock();
	int rc = head_rows(p, hidden, n, logits);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "lm_head");
	lap(p, TF_STAGE_HEAD, &t);
	if (p->tp && (rc = head_gather(p, n, logits)) != TF_OK)
		return rc;
	if (p->tp)
		lap(p, TF_STAGE_TP, &t);
	return TF_OK;
}

bool tf_pipeline_can_sample(const tf_pipeline *p)
{
	return !p->tp && tf_backend_stream(p->be, p->bctx) && tf_backend_can_sample(p->be);
}

int tf_pipeline_head_keep(tf_pipeline *p, const float *hidden, int64_t n)
{
	double t = tf_pipeline_clock();
	int rc = head_keep(p, hidden, n);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "lm_head");
	lap(p, TF_STAGE_HEAD, &t);
	return TF_OK;
}

int tf_pipeline_kept_logits(tf_pipeline *p, int64_t row0, int64_t n, float *logits)
{
	int rc = p->be->download(p->bctx, logits, p->lbuf + row0 * p->vpart,
				 (size_t)n * (size_t)p->vpart * sizeof(float));
	return rc == TF_OK ? TF_OK : tf_diag_prefix(rc, "lm_head: logits download");
}

int tf_pipeline_sample(tf_pipeline *p, const tf_sampler_params *par, int64_t row0, int64_t n,
		       int n_vocab, const uint64_t *seq, const uint64_t *pos, int32_t *token)
{
	double t = tf_pipeline_clock();
	int rc = p->be->sample(p->bctx, par, p->lbuf + row0 * p->vpart, n, n_vocab, p->vpart,
			       seq, pos, token);
	if (rc == TF_ERR_UNSUPPORTED)
		return rc;
	if (rc == TF_OK)
		rc = p->be->sync(p->bctx);
	if (rc != TF_OK)
		return tf_diag_prefix(rc, "%s: sampling on the device", p->be->hdr.name);
	lap(p, TF_STAGE_HEAD, &t);
	return TF_OK;
}

int64_t tf_pipeline_rows(const tf_pipeline *p) { return p->chunk; }
int tf_pipeline_vocab(const tf_pipeline *p) { return (int)p->vocab; }
int tf_pipeline_hidden_size(const tf_pipeline *p) { return (int)p->hidden; }
const tf_host *tf_pipeline_host(const tf_pipeline *p) { return p->h; }
int tf_pipeline_layers(const tf_pipeline *p) { return p->n_layers + p->mtp; }
bool tf_pipeline_has_mtp(const tf_pipeline *p) { return p->mtp; }

const tf_plugin_attention *tf_pipeline_attn(const tf_pipeline *p, int i, void **inst)
{
	*inst = p->layers[i].attn_inst;
	return p->layers[i].attn;
}

bool tf_pipeline_attn_batched(const tf_pipeline *p, int i) { return p->layers[i].batched; }

int tf_pipeline_legacy_claim(tf_pipeline *p, const void *owner)
{
	if (p->first_legacy < 0 || !p->legacy_owner || p->legacy_owner == owner) {
		p->legacy_owner = p->first_legacy < 0 ? NULL : owner;
		return TF_OK;
	}
	int i = p->first_legacy;
	return tf_diag_set(TF_ERR_UNSUPPORTED,
			   "layer %d's attention plugin '%s' predates ABI 1.5 and holds one sequence, which is in use ([runtime] sequences = 1 for this model)",
			   i, p->layers[i].attn->hdr.name);
}

void tf_pipeline_legacy_release(tf_pipeline *p, const void *owner)
{
	if (p->legacy_owner == owner)
		p->legacy_owner = NULL;
}

void tf_pipeline_stats_reset(tf_pipeline *p)
{
	memset(p->stage_s, 0, sizeof(p->stage_s));
	p->graph_steps = p->graph_runs = p->graph_built = 0;
}

void tf_pipeline_graph_stats(const tf_pipeline *p, uint64_t *steps, uint64_t *runs,
			     uint64_t *built)
{
	*steps = p->graph_steps;
	*runs = p->graph_runs;
	*built = p->graph_built;
}

double tf_pipeline_stage_seconds(const tf_pipeline *p, tf_stage s)
{
	return (unsigned)s < TF_STAGE_COUNT ? p->stage_s[s] : 0.0;
}

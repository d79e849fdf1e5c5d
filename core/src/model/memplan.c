/* memplan.c - weight bytes by class, per-sequence state, budget check. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model/memplan.h"
#include "tf/diag.h"
#include "tf/router.h"

static const char *const wclass_names[TF_WCLASS_COUNT] = {
	[TF_WCLASS_ROUTED] = "routed experts",
	[TF_WCLASS_SHARED] = "shared experts",
	[TF_WCLASS_KDA]    = "KDA attention",
	[TF_WCLASS_MLA]    = "MLA attention",
	[TF_WCLASS_DENSE]  = "dense MLP",
	[TF_WCLASS_EMBED]  = "embeddings",
	[TF_WCLASS_HEAD]   = "lm_head",
	[TF_WCLASS_MTP]    = "MTP layer",
	[TF_WCLASS_ROUTER] = "routers",
	[TF_WCLASS_NORM]   = "norms",
	[TF_WCLASS_OTHER]  = "other",
};

const char *tf_wclass_name(tf_wclass c)
{
	return (unsigned)c < TF_WCLASS_COUNT ? wclass_names[c] : "invalid";
}

static bool has_prefix(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* The class of "<rest>" inside model.layers.<layer>. */
static tf_wclass wclass_in_layer(const tf_model_config *cfg, int layer, const char *rest)
{
	if (layer >= cfg->num_hidden_layers)
		return TF_WCLASS_MTP;
	if (has_prefix(rest, "attention."))
		return cfg->layer_attn[layer] == TF_ATTN_MLA ? TF_WCLASS_MLA : TF_WCLASS_KDA;
	if (has_prefix(rest, "mlp.experts."))
		return TF_WCLASS_ROUTED;
	if (has_prefix(rest, "mlp.shared_experts."))
		return TF_WCLASS_SHARED;
	if (has_prefix(rest, "mlp.gate."))
		return TF_WCLASS_ROUTER;
	if (has_prefix(rest, "mlp.") && cfg->layer_ffn[layer] == TF_FFN_DENSE)
		return TF_WCLASS_DENSE;
	if (has_prefix(rest, "input_layernorm.") || has_prefix(rest, "post_attention_layernorm."))
		return TF_WCLASS_NORM;
	return TF_WCLASS_OTHER;
}

tf_wclass tf_wclass_of(const tf_model_config *cfg, const char *name)
{
	static const char layers[] = "model.layers.";
	if (has_prefix(name, "model.word_embeddings.") || has_prefix(name, "model.embed_tokens."))
		return TF_WCLASS_EMBED;
	if (has_prefix(name, "lm_head."))
		return TF_WCLASS_HEAD;
	if (has_prefix(name, "model.norm."))
		return TF_WCLASS_NORM;
	if (!has_prefix(name, layers))
		return TF_WCLASS_OTHER;

	const char *p = name + sizeof(layers) - 1;
	int layer = 0;
	if (*p < '0' || *p > '9')
		return TF_WCLASS_OTHER;
	for (; *p >= '0' && *p <= '9'; p++) {
		layer = layer * 10 + (*p - '0');
		if (layer >= cfg->n_layers_total)
			return TF_WCLASS_OTHER;
	}
	return *p == '.' ? wclass_in_layer(cfg, layer, p + 1) : TF_WCLASS_OTHER;
}

/* Saturating arithmetic: an absurd config or context must read as "too
 * big", never wrap to something that fits. */
static uint64_t mp_mul(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t mp_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t mp_max(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Widest float32 intermediate of one row across the layer kinds. */
static uint64_t mp_row_floats(const tf_model_config *c)
{
	uint64_t P = (uint64_t)c->num_attention_heads * (uint64_t)c->head_dim;
	uint64_t kda = 5 * P + (uint64_t)c->num_attention_heads;
	uint64_t mla = (uint64_t)c->num_attention_heads *
			       (uint64_t)(c->qk_nope_head_dim + c->qk_rope_head_dim +
					  c->qk_nope_head_dim + c->v_head_dim + 1) +
		       (uint64_t)(c->kv_lora_rank + c->qk_rope_head_dim);
	uint64_t dense = 2 * (uint64_t)c->intermediate_size;
	uint64_t moe = 2 * (uint64_t)c->num_experts_per_tok * (uint64_t)c->moe_intermediate_size +
		       2 * (uint64_t)c->num_shared_experts *
			       (uint64_t)c->moe_shared_expert_intermediate_size +
		       (uint64_t)c->num_experts;
	return mp_max(mp_max(kda, mla), mp_max(dense, moe));
}

/* Rank r's share of n units divided over tp ranks: the first n % tp
 * ranks get one more. */
static uint64_t mp_share(uint64_t n, int tp, int r)
{
	return n / (uint64_t)tp + ((uint64_t)r < n % (uint64_t)tp);
}

static void mp_state(const tf_model_config *c, const tf_memplan_opts *o, tf_memplan *p)
{
	uint64_t heads = (uint64_t)c->num_attention_heads, hd = (uint64_t)c->head_dim;
	uint64_t per_token = (uint64_t)(c->kv_lora_rank + c->qk_rope_head_dim) *
			     (uint64_t)o->cache_elem;
	p->mla_cache = mp_mul(mp_mul(per_token, (uint64_t)o->context), (uint64_t)p->n_mla);
	p->mla_cache_other = p->mla_cache / (uint64_t)o->cache_elem * (o->cache_elem == 2 ? 4 : 2);
	uint64_t kda_layers = (uint64_t)p->n_kda * sizeof(float);
	for (int r = 0; r < o->tp_size; r++) {
		uint64_t h = mp_share(heads, o->tp_size, r);
		p->ranks[r].kda_state = mp_mul(mp_mul(kda_layers, h), hd * hd);
		p->ranks[r].kda_conv = mp_mul(mp_mul(kda_layers, h * hd),
					      3 * (uint64_t)(c->short_conv_kernel_size - 1));
	}
	uint64_t cap = 8;               /* seqstate.c's growth */
	while (o->mtp && cap < (uint64_t)o->chunk + 1)
		cap *= 2;
	p->mtp_rows = o->mtp ? mp_mul(2 * cap, (uint64_t)c->hidden_size * sizeof(float) +
					       sizeof(int32_t)) : 0;
	uint64_t rows = mp_mul((uint64_t)o->chunk,
			       3 * (uint64_t)c->hidden_size + mp_row_floats(c));
	uint64_t scores = mp_mul(heads, (uint64_t)o->context);
	p->scratch = mp_mul(mp_add(mp_add(rows, scores), (uint64_t)c->vocab_size), sizeof(float));
}

/* How tensor parallelism divides a module's tensors (memplan.h). */
typedef enum mp_par { MP_REP, MP_COL, MP_ROW, MP_CHANNEL } mp_par;

/* First match wins: the row-parallel and replicated modules before the
 * "_proj." that every other projection ends in. */
static const struct mp_rule {
	const char *part;
	mp_par par;
} mp_rules[] = {
	{ ".o_proj.", MP_ROW },       { ".dense.", MP_ROW },       { ".down_proj.", MP_ROW },
	{ ".kv_a_proj_with_mqa.", MP_REP }, { ".q_a_proj.", MP_REP }, { "layernorm.", MP_REP },
	{ ".o_norm.", MP_REP },       { ".mlp.gate.", MP_REP },    { ".eh_proj.", MP_REP },
	{ ".enorm.", MP_REP },        { ".hnorm.", MP_REP },       { ".A_log", MP_CHANNEL },
	{ ".dt_bias", MP_CHANNEL },   { "_conv1d.", MP_CHANNEL },  { "_proj.", MP_COL },
};

static mp_par mp_par_of(tf_wclass k, const char *name)
{
	switch (k) {
	case TF_WCLASS_HEAD:
		return MP_COL;
	case TF_WCLASS_ROUTED: case TF_WCLASS_SHARED: case TF_WCLASS_KDA:
	case TF_WCLASS_MLA: case TF_WCLASS_DENSE: case TF_WCLASS_MTP:
		for (size_t i = 0; i < sizeof(mp_rules) / sizeof(mp_rules[0]); i++)
			if (strstr(name, mp_rules[i].part))
				return mp_rules[i].par;
		return MP_REP;
	default:
		return MP_REP;
	}
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

/*
 * The dimension of t that par divides, and its block size in that
 * dimension's units; -1 when t is whole on every rank.  A linear's tensors:
 * .weight/.qweight [out, in], EXL3 .trellis [in/16, out/16, 16K], .suh [in],
 * .svh/.bias/.scale [out], scalar markers.
 */
static int mp_split_dim(const tf_tensor *t, mp_par par, int64_t *block)
{
	bool col = par == MP_COL;
	int d = -1;
	*block = 128;
	if (par == MP_REP || t->ndim == 0)
		return -1;
	if (par == MP_CHANNEL)
		d = 0;
	else if (has_suffix(t->name, ".trellis") && t->ndim == 3) {
		d = col ? 1 : 0;
		*block = 8;                     /* tiles of 16: one Hadamard block */
	} else if (has_suffix(t->name, ".weight") || has_suffix(t->name, ".qweight"))
		d = t->ndim == 2 ? (col ? 0 : 1) : 0;
	else if (has_suffix(t->name, ".suh"))
		d = col ? -1 : 0;
	else if (has_suffix(t->name, ".svh") || has_suffix(t->name, ".bias") ||
		 has_suffix(t->name, ".scale"))
		d = col ? 0 : -1;
	if (d >= 0 && t->shape[d] % *block)
		*block = 1;
	return d;
}

/* The expert index of a routed expert's tensor, -1 for any other. */
static int mp_expert_of(const char *name)
{
	const char *p = strstr(name, ".mlp.experts.");
	return p ? atoi(p + strlen(".mlp.experts.")) : -1;
}

/* Add t's bytes to each rank's share. */
static void mp_tensor_ranks(const tf_model_config *c, const tf_tensor *t, tf_wclass k,
			    tf_memplan *p)
{
	int tp = p->opts.tp_size, e = mp_expert_of(t->name);
	int64_t block;
	int d = mp_split_dim(t, mp_par_of(k, t->name), &block);
	uint64_t blocks = d >= 0 ? (uint64_t)(t->shape[d] / block) : 0;

	for (int r = 0; r < tp; r++) {
		uint64_t b = t->nbytes;
		if (p->opts.moe_experts && e >= 0 && e < c->num_experts && tp <= c->num_experts)
			b = tf_router_block_rank(e, c->num_experts, tp) == r ? b : 0;
		else if (tp > 1 && d >= 0 && blocks >= (uint64_t)tp)
			b = b / blocks * mp_share(blocks, tp, r);
		p->ranks[r].weights[k] = mp_add(p->ranks[r].weights[k], b);
		p->ranks[r].weights_total = mp_add(p->ranks[r].weights_total, b);
	}
}

/* The elements of the matrix t encodes: an EXL3 trellis [in/16, out/16,
 * 16K] holds in x out weights, any other tensor its own elements. */
static uint64_t mp_params(const tf_tensor *t)
{
	if (has_suffix(t->name, ".trellis") && t->ndim == 3)
		return mp_mul(mp_mul((uint64_t)t->shape[0], (uint64_t)t->shape[1]), 16 * 16);
	return (uint64_t)tf_tensor_numel(t);
}

static void mp_weights(const tf_model_config *c, const tf_weights *w, tf_memplan *p)
{
	size_t n = w ? tf_weights_count(w) : 0;
	for (size_t i = 0; i < n; i++) {
		const tf_tensor *t = tf_weights_at(w, i);
		tf_wclass k = tf_wclass_of(c, t->name);
		p->weights[k] = mp_add(p->weights[k], t->nbytes);
		p->params[k] = mp_add(p->params[k], mp_params(t));
		p->weights_total = mp_add(p->weights_total, t->nbytes);
		mp_tensor_ranks(c, t, k, p);
	}
}

/* Weights a decoded token reads: the non-expert main stack, top-k of each
 * MoE layer's experts and one embedding row (of w: the whole checkpoint's
 * class bytes or one rank's). */
static uint64_t mp_active(const tf_model_config *c, const uint64_t *w, uint64_t embed_row)
{
	uint64_t a = 0;
	for (int k = 0; k < TF_WCLASS_COUNT; k++)
		if (k != TF_WCLASS_ROUTED && k != TF_WCLASS_EMBED && k != TF_WCLASS_MTP)
			a = mp_add(a, w[k]);
	uint64_t routed = mp_mul(w[TF_WCLASS_ROUTED], (uint64_t)c->num_experts_per_tok) /
			  (uint64_t)c->num_experts;
	return mp_add(a, mp_add(routed, embed_row));
}

/* Each rank's total, and the largest rank's figures in the plan's fields. */
static void mp_totals(const tf_model_config *c, tf_memplan *p)
{
	const tf_memplan_opts *o = &p->opts;
	uint64_t row = p->weights[TF_WCLASS_EMBED] / (uint64_t)c->vocab_size;
	for (int r = 0; r < o->tp_size; r++) {
		tf_memplan_rank *k = &p->ranks[r];
		uint64_t state = mp_add(mp_add(p->mla_cache, p->mtp_rows),
					mp_add(k->kda_state, k->kda_conv));
		k->total = mp_add(mp_add(k->weights_total, p->scratch),
				  mp_mul(state, (uint64_t)o->sequences));
		if (k->total > p->ranks[p->largest].total)
			p->largest = r;
	}
	const tf_memplan_rank *big = &p->ranks[p->largest];
	p->rank_weights = big->weights_total;
	p->kda_state = big->kda_state;
	p->kda_conv = big->kda_conv;
	p->seq_state = mp_add(mp_add(p->mla_cache, p->mtp_rows),
			      mp_add(p->kda_state, p->kda_conv));
	p->rank_total = big->total;
	p->active = mp_active(c, p->weights, row);
	p->active_params = mp_active(c, p->params, (uint64_t)c->hidden_size);
	p->rank_active = mp_active(c, big->weights, row);
}

int tf_memplan_compute_opts(const tf_model_config *cfg, const tf_weights *w,
			    const tf_memplan_opts *o, tf_memplan *p)
{
	memset(p, 0, sizeof(*p));
	if (o->context < 1 || o->tp_size < 1 || o->tp_size > TF_MEMPLAN_MAX_TP || o->chunk < 1 ||
	    o->sequences < 1 || (o->cache_elem != 2 && o->cache_elem != 4))
		return tf_diag_set(TF_ERR_INVALID,
				   "memory plan: context %lld, tp size %d (at most %d), chunk %lld and sequences %d must all be >= 1, cache elements 2 or 4 bytes (not %d)",
				   (long long)o->context, o->tp_size, TF_MEMPLAN_MAX_TP,
				   (long long)o->chunk, o->sequences, o->cache_elem);
	p->opts = *o;
	for (int i = 0; i < cfg->n_layers_total; i++) {
		p->n_kda += cfg->layer_attn[i] == TF_ATTN_KDA;
		p->n_mla += cfg->layer_attn[i] == TF_ATTN_MLA;
	}
	mp_weights(cfg, w, p);
	mp_state(cfg, o, p);
	mp_totals(cfg, p);
	return TF_OK;
}

void tf_memplan_add_state(tf_memplan *p, uint64_t bytes)
{
	uint64_t all = mp_mul(bytes, (uint64_t)p->opts.sequences);
	p->n_other++;
	p->other_state = mp_add(p->other_state, bytes);
	p->seq_state = mp_add(p->seq_state, bytes);
	p->rank_total = mp_add(p->rank_total, all);
	for (int r = 0; r < p->opts.tp_size; r++)
		p->ranks[r].total = mp_add(p->ranks[r].total, all);
}

int tf_memplan_compute(const tf_model_config *cfg, const tf_weights *w, int64_t context,
		       int tp_size, tf_memplan *out)
{
	tf_memplan_opts o = { .context = context, .tp_size = tp_size, .chunk = TF_MEMPLAN_CHUNK,
			      .cache_elem = sizeof(float), .sequences = 1 };
	return tf_memplan_compute_opts(cfg, w, &o, out);
}

/* "35.7 MiB": sizes from a tiny test model to a 560B one read alike. */
static const char *mp_human(uint64_t b, char buf[16])
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)b;
	int u = 0;
	while (v >= 1024 && u < 6)
		v /= 1024, u++;
	snprintf(buf, 16, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

static void mp_line(FILE *f, const char *what, uint64_t bytes, const char *note)
{
	char h[16];
	fprintf(f, "  %-16s %20llu %10s%s%s\n", what, (unsigned long long)bytes,
		mp_human(bytes, h), *note ? "  " : "", note);
}

/* One line per rank: what it holds, as the budget check adds it up. */
static void mp_print_ranks(const tf_memplan *p, FILE *f)
{
	fprintf(f, "  each rank: weights + %d x (MLA cache + KDA state and conv) + scratch = total\n",
		p->opts.sequences);
	for (int r = 0; r < p->opts.tp_size; r++) {
		const tf_memplan_rank *k = &p->ranks[r];
		char h[5][16];
		fprintf(f, "  rank %-3d %10s + %d x (%s + %s) + %s = %s (%llu bytes)\n", r,
			mp_human(k->weights_total, h[0]), p->opts.sequences,
			mp_human(p->mla_cache, h[1]), mp_human(mp_add(k->kda_state, k->kda_conv), h[2]),
			mp_human(p->scratch, h[3]), mp_human(k->total, h[4]),
			(unsigned long long)k->total);
	}
}

void tf_memplan_print(const tf_memplan *p, FILE *f)
{
	char note[64];
	int tp = p->opts.tp_size;
	fprintf(f, "memory plan: context %lld tokens, %d sequence%s, %d rank%s, prefill chunk %lld\n",
		(long long)p->opts.context, p->opts.sequences, p->opts.sequences > 1 ? "s" : "",
		tp, tp > 1 ? "s" : "", (long long)p->opts.chunk);
	fprintf(f, "  %-16s %20s%s\n", "weights", "bytes", tp > 1 ? "             per rank" : "");
	for (int k = 0; k < TF_WCLASS_COUNT; k++) {
		uint64_t b = p->weights[k];
		if (!b)
			continue;
		note[0] = 0;
		if (tp > 1)
			mp_human(p->ranks[p->largest].weights[k], note);
		mp_line(f, wclass_names[k], b, note);
	}
	note[0] = 0;
	if (tp > 1)
		mp_human(p->rank_weights, note);
	mp_line(f, "total", p->weights_total, note);
	fprintf(f, "  per sequence on %s:\n", tp > 1 ? "the largest rank" : "one rank");
	char other[16];
	int bf16 = p->opts.cache_elem == 2;
	snprintf(note, sizeof(note), "%d layers, %s (%s: %s)", p->n_mla, bf16 ? "bf16" : "f32",
		 bf16 ? "f32" : "bf16", mp_human(p->mla_cache_other, other));
	mp_line(f, "MLA cache", p->mla_cache, note);
	snprintf(note, sizeof(note), "%d layers", p->n_kda);
	mp_line(f, "KDA state", p->kda_state, note);
	mp_line(f, "KDA conv", p->kda_conv, "");
	if (p->mtp_rows)
		mp_line(f, "MTP rows", p->mtp_rows, "kept for the MTP layer");
	if (p->n_other) {
		snprintf(note, sizeof(note), "%d layer%s of plugin types", p->n_other,
			 p->n_other > 1 ? "s" : "");
		mp_line(f, "other state", p->other_state, note);
	}
	snprintf(note, sizeof(note), "x %d sequence%s", p->opts.sequences,
		 p->opts.sequences > 1 ? "s" : "");
	mp_line(f, "all sequences", mp_mul(p->seq_state, (uint64_t)p->opts.sequences), note);
	mp_line(f, "scratch", p->scratch, "estimate");
	mp_line(f, "rank total", p->rank_total, "");
	mp_human(p->rank_active, note);
	mp_line(f, "active/token", p->active, tp > 1 ? note : "weights read per decoded token");
	if (tp > 1)
		mp_print_ranks(p, f);
	if (p->limit && p->rank_total <= p->limit) {
		char h[16];
		snprintf(note, sizeof(note), "%s, %s to spare", p->limit_from,
			 mp_human(p->limit - p->rank_total, h));
		mp_line(f, tp > 1 ? "limit per rank" : "limit", p->limit, note);
	}
}

/* MemAvailable from /proc/meminfo, in bytes; false when unreadable. */
static bool mp_mem_available(uint64_t *bytes)
{
	FILE *fp = fopen("/proc/meminfo", "r");
	char line[256];
	bool found = false;
	unsigned long long kib;
	while (fp && !found && fgets(line, sizeof(line), fp))
		found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
	if (fp)
		fclose(fp);
	if (found)
		*bytes = mp_mul(kib, 1024);
	return found;
}

int tf_memplan_check(tf_memplan *p, uint64_t limit)
{
	const char *what = "[runtime] memory_limit";
	if (!limit) {
		if (!mp_mem_available(&limit))
			return TF_OK;
		what = "MemAvailable in /proc/meminfo";
	}
	p->limit = limit;
	p->limit_from = what;
	if (p->rank_total <= limit)
		return TF_OK;
	char h[5][16];
	return tf_diag_set(TF_ERR_RANGE,
			   "memory plan needs %llu bytes (%s: weights %s, state %s per sequence x %d sequences, scratch %s) on rank %d of %d for a context of %lld tokens, but %s allows %llu bytes (%s)",
			   (unsigned long long)p->rank_total, mp_human(p->rank_total, h[0]),
			   mp_human(p->rank_weights, h[1]), mp_human(p->seq_state, h[2]),
			   p->opts.sequences, mp_human(p->scratch, h[3]), p->largest,
			   p->opts.tp_size, (long long)p->opts.context, what,
			   (unsigned long long)limit, mp_human(limit, h[4]));
}

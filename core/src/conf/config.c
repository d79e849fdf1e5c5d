/* config.c - read a bailing_hybrid config.json and derive the layer schedule. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "conf/config.h"
#include "tf/diag.h"
#include "tf/text.h"

/* Real configs are a few KB; this bounds what a hostile path can make us read. */
#define CFG_MAX_FILE (16u << 20)
/* Bound on any width: keeps products of two sizes well inside int64. */
#define CFG_MAX_DIM (1 << 24)

typedef enum cfg_type { CFG_INT, CFG_FLOAT, CFG_DOUBLE, CFG_BOOL } cfg_type;

/* One scalar key: where it goes, whether it must be present, its default
 * and its valid range.  null counts as absent. */
typedef struct cfg_key {
	const char *key;
	cfg_type type;
	size_t off;
	bool required;
	double def, min, max;
} cfg_key;

#define CFG_REQ_INT(k, field, lo, hi) \
	{ .key = k, .type = CFG_INT, .off = offsetof(tf_model_config, field), \
	  .required = true, .min = lo, .max = hi }
#define CFG_OPT_INT(k, field, d, lo, hi) \
	{ .key = k, .type = CFG_INT, .off = offsetof(tf_model_config, field), \
	  .def = d, .min = lo, .max = hi }
#define CFG_OPT_REAL(k, t, field, d, lo, hi) \
	{ .key = k, .type = t, .off = offsetof(tf_model_config, field), \
	  .def = d, .min = lo, .max = hi }
#define CFG_OPT_BOOL(k, field, d) \
	{ .key = k, .type = CFG_BOOL, .off = offsetof(tf_model_config, field), .def = d }

/* Defaults of 0 on keys with a minimum of 1 mean "derived from other keys"
 * (cfg_derive). */
static const cfg_key cfg_keys[] = {
	CFG_REQ_INT("vocab_size", vocab_size, 1, CFG_MAX_DIM),
	CFG_REQ_INT("hidden_size", hidden_size, 1, CFG_MAX_DIM),
	CFG_OPT_INT("intermediate_size", intermediate_size, 0, 1, CFG_MAX_DIM),
	CFG_REQ_INT("num_hidden_layers", num_hidden_layers, 1, TF_CONFIG_MAX_LAYERS),
	CFG_REQ_INT("num_attention_heads", num_attention_heads, 1, CFG_MAX_DIM),
	CFG_OPT_INT("num_key_value_heads", num_key_value_heads, 0, 1, CFG_MAX_DIM),
	CFG_OPT_INT("head_dim", head_dim, 0, 1, CFG_MAX_DIM),
	CFG_REQ_INT("layer_group_size", layer_group_size, 1, TF_CONFIG_MAX_LAYERS),
	CFG_OPT_INT("first_k_dense_replace", first_k_dense_replace, 0, 0, TF_CONFIG_MAX_LAYERS),

	CFG_REQ_INT("num_experts", num_experts, 1, CFG_MAX_DIM),
	CFG_REQ_INT("num_experts_per_tok", num_experts_per_tok, 1, CFG_MAX_DIM),
	CFG_OPT_INT("num_shared_experts", num_shared_experts, 0, 0, CFG_MAX_DIM),
	CFG_REQ_INT("moe_intermediate_size", moe_intermediate_size, 1, CFG_MAX_DIM),
	CFG_OPT_INT("moe_shared_expert_intermediate_size", moe_shared_expert_intermediate_size,
		    0, 1, CFG_MAX_DIM),
	CFG_OPT_INT("n_group", n_group, 1, 1, CFG_MAX_DIM),
	CFG_OPT_INT("topk_group", topk_group, 1, 1, CFG_MAX_DIM),
	CFG_OPT_REAL("routed_scaling_factor", CFG_FLOAT, routed_scaling_factor, 1.0, 0, 1e6),
	CFG_OPT_BOOL("norm_topk_prob", norm_topk_prob, true),
	CFG_OPT_BOOL("moe_router_enable_expert_bias", moe_router_enable_expert_bias, true),

	CFG_OPT_INT("q_lora_rank", q_lora_rank, 0, 0, CFG_MAX_DIM),
	CFG_REQ_INT("kv_lora_rank", kv_lora_rank, 1, CFG_MAX_DIM),
	CFG_REQ_INT("qk_nope_head_dim", qk_nope_head_dim, 1, CFG_MAX_DIM),
	CFG_REQ_INT("qk_rope_head_dim", qk_rope_head_dim, 1, CFG_MAX_DIM),
	CFG_REQ_INT("v_head_dim", v_head_dim, 1, CFG_MAX_DIM),
	CFG_OPT_REAL("rope_theta", CFG_DOUBLE, rope_theta, 10000.0, 1.0, 1e30),
	CFG_OPT_BOOL("rope_interleave", rope_interleave, true),
	CFG_REQ_INT("max_position_embeddings", max_position_embeddings, 1, 1 << 30),

	CFG_OPT_INT("short_conv_kernel_size", short_conv_kernel_size, 4, 1, 1024),
	CFG_OPT_BOOL("no_kda_lora", no_kda_lora, true),
	CFG_OPT_BOOL("kda_safe_gate", kda_safe_gate, true),
	CFG_OPT_REAL("kda_lower_bound", CFG_FLOAT, kda_lower_bound, -5.0, -1e6, 0),

	CFG_OPT_REAL("rms_norm_eps", CFG_FLOAT, rms_norm_eps, 1e-6, 1e-30, 1.0),
	CFG_OPT_BOOL("use_qkv_bias", use_qkv_bias, false),
	CFG_OPT_BOOL("use_bias", use_bias, false),
	CFG_OPT_BOOL("tie_word_embeddings", tie_word_embeddings, false),
	CFG_OPT_INT("num_nextn_predict_layers", num_nextn_predict_layers, 0, 0, 64),
	CFG_OPT_INT("pad_token_id", pad_token_id, -1, -1, 1 << 30),
};

static const char *const cfg_architecture = "BailingMoeV3ForCausalLM";

/* "file:line:column" of byte `at` of the text, for syntax errors. */
static int cfg_syntax_error(const char *path, const char *json, size_t len, const char *at)
{
	size_t off = at && at >= json && at <= json + len ? (size_t)(at - json) : 0;
	int line = 1, col = 1;
	for (size_t i = 0; i < off; i++, col++)
		if (json[i] == '\n')
			line++, col = 0;
	return tf_diag_set(TF_ERR_FORMAT, "%s:%d:%d: JSON syntax error", path, line, col);
}

static int cfg_scalar(const char *path, const cJSON *root, const cfg_key *k,
		      tf_model_config *cfg)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, k->key);
	void *dst = (char *)cfg + k->off;
	double x = k->def;
	if (!v || cJSON_IsNull(v)) {
		if (k->required)
			return tf_diag_set(TF_ERR_NOT_FOUND, "%s: missing required key \"%s\"",
					   path, k->key);
	} else if (k->type == CFG_BOOL) {
		if (!cJSON_IsBool(v))
			return tf_diag_set(TF_ERR_FORMAT, "%s: \"%s\" must be true or false",
					   path, k->key);
		x = cJSON_IsTrue(v);
	} else {
		if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
			return tf_diag_set(TF_ERR_FORMAT, "%s: \"%s\" must be a number", path,
					   k->key);
		x = v->valuedouble;
		if (k->type == CFG_INT && x != floor(x))
			return tf_diag_set(TF_ERR_FORMAT, "%s: \"%s\" must be an integer, not %g",
					   path, k->key, x);
		if (x < k->min || x > k->max)
			return tf_diag_set(TF_ERR_INVALID, "%s: \"%s\" is %g, outside [%g, %g]",
					   path, k->key, x, k->min, k->max);
	}
	switch (k->type) {
	case CFG_INT:    *(int *)dst = (int)x; break;
	case CFG_FLOAT:  *(float *)dst = (float)x; break;
	case CFG_DOUBLE: *(double *)dst = x; break;
	case CFG_BOOL:   *(bool *)dst = x != 0; break;
	}
	return TF_OK;
}

/* A string key: NULL when absent or null, an error when not a string. */
static int cfg_string(const char *path, const cJSON *root, const char *key, const char **out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return TF_OK;
	if (!cJSON_IsString(v))
		return tf_diag_set(TF_ERR_FORMAT, "%s: \"%s\" must be a string", path, key);
	*out = v->valuestring;
	return TF_OK;
}

static int cfg_model_type(const char *path, const cJSON *root, tf_model_config *cfg)
{
	const char *mt;
	int rc = cfg_string(path, root, "model_type", &mt);
	if (rc)
		return rc;
	bool arch_ok = false;
	const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "architectures"), *a;
	if (cJSON_IsArray(arch))
		cJSON_ArrayForEach(a, arch)
			arch_ok |= cJSON_IsString(a) && !strcmp(a->valuestring, cfg_architecture);
	if (mt && !strcmp(mt, "bailing_hybrid")) {
		strcpy(cfg->model_type, mt);
		return TF_OK;
	}
	if (arch_ok) {
		strcpy(cfg->model_type, "bailing_hybrid");
		return TF_OK;
	}
	if (mt)
		return tf_diag_set(TF_ERR_UNSUPPORTED,
				   "%s: model_type \"%s\" is not supported (need \"bailing_hybrid\")",
				   path, mt);
	return tf_diag_set(TF_ERR_UNSUPPORTED,
			   "%s: no model_type \"bailing_hybrid\" nor architectures \"%s\"",
			   path, cfg_architecture);
}

/* The string-valued choices: router scoring and MLA gate granularity. */
static int cfg_choices(const char *path, const cJSON *root, tf_model_config *cfg)
{
	const char *score, *gate;
	const char *score_key = "score_function";
	int rc = cfg_string(path, root, score_key, &score);
	if (!rc && !score)
		rc = cfg_string(path, root, score_key = "scoring_func", &score);
	if (rc)
		return rc;
	if (!score || !strcmp(score, "sigmoid"))
		cfg->score_sigmoid = true;
	else if (strcmp(score, "softmax"))
		return tf_diag_set(TF_ERR_UNSUPPORTED, "%s: %s \"%s\" is not supported",
				   path, score_key, score);

	const char *gate_key = "gated_attention_proj_granularity_type";
	if ((rc = cfg_string(path, root, gate_key, &gate)))
		return rc;
	if (!gate || !strcmp(gate, "head_wise"))
		cfg->gate_head_wise = true;
	else if (strcmp(gate, "element_wise"))
		return tf_diag_set(TF_ERR_UNSUPPORTED, "%s: %s \"%s\" is not supported",
				   path, gate_key, gate);
	return TF_OK;
}

/* An optional number inside rope_scaling. */
static int cfg_rope_num(const char *path, const cJSON *rs, const char *key, double def,
			double *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(rs, key);
	*out = def;
	if (!v || cJSON_IsNull(v))
		return TF_OK;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
		return tf_diag_set(TF_ERR_INVALID,
				   "%s: rope_scaling.%s must be a non-negative number", path, key);
	*out = v->valuedouble;
	return TF_OK;
}

static int cfg_rope_scaling(const char *path, const cJSON *root, tf_model_config *cfg)
{
	tf_rope_scaling *r = &cfg->rope_scaling;
	const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
	const char *type;
	memset(r, 0, sizeof(*r));
	if (!rs || cJSON_IsNull(rs))
		return TF_OK;
	if (!cJSON_IsObject(rs))
		return tf_diag_set(TF_ERR_FORMAT, "%s: \"rope_scaling\" must be null or an object",
				   path);
	int rc = cfg_string(path, rs, "rope_type", &type);
	if (!rc && !type)
		rc = cfg_string(path, rs, "type", &type);
	if (rc)
		return rc;
	if (!type)
		return tf_diag_set(TF_ERR_NOT_FOUND, "%s: rope_scaling has no \"rope_type\"", path);
	if (!strcmp(type, "default")) {
		r->kind = TF_ROPE_DEFAULT;
		return TF_OK;
	}
	if (strcmp(type, "yarn"))
		return tf_diag_set(TF_ERR_UNSUPPORTED, "%s: rope_scaling type \"%s\" is not supported",
				   path, type);
	r->kind = TF_ROPE_YARN;
	if ((rc = cfg_rope_num(path, rs, "factor", 0, &r->factor)) ||
	    (rc = cfg_rope_num(path, rs, "original_max_position_embeddings",
			       cfg->max_position_embeddings,
			       &r->original_max_position_embeddings)) ||
	    (rc = cfg_rope_num(path, rs, "beta_fast", 32, &r->beta_fast)) ||
	    (rc = cfg_rope_num(path, rs, "beta_slow", 1, &r->beta_slow)) ||
	    (rc = cfg_rope_num(path, rs, "mscale", 0, &r->mscale)) ||
	    (rc = cfg_rope_num(path, rs, "mscale_all_dim", 0, &r->mscale_all_dim)))
		return rc;
	if (r->factor < 1)
		return tf_diag_set(TF_ERR_INVALID, "%s: YaRN rope_scaling needs \"factor\" >= 1",
				   path);
	if (r->original_max_position_embeddings < 1 || r->beta_fast <= r->beta_slow)
		return tf_diag_set(TF_ERR_INVALID,
				   "%s: rope_scaling needs original_max_position_embeddings >= 1 and beta_fast > beta_slow",
				   path);
	return TF_OK;
}

static int cfg_eos(const char *path, const cJSON *root, tf_model_config *cfg)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
	cfg->n_eos = 0;
	if (!v || cJSON_IsNull(v))
		return TF_OK;
	if (!cJSON_IsNumber(v) && !cJSON_IsArray(v))
		return tf_diag_set(TF_ERR_FORMAT,
				   "%s: \"eos_token_id\" must be an integer or a list of them", path);
	/* A bare integer is walked as a list of one. */
	for (const cJSON *e = cJSON_IsArray(v) ? v->child : v; e; e = e == v ? NULL : e->next) {
		double x = e->valuedouble;
		if (!cJSON_IsNumber(e) || x != floor(x) || x < 0 || x >= cfg->vocab_size)
			return tf_diag_set(TF_ERR_INVALID,
					   "%s: \"eos_token_id\" entry %d is not a token id below vocab_size %d",
					   path, cfg->n_eos, cfg->vocab_size);
		if (cfg->n_eos == TF_MAX_EOS)
			return tf_diag_set(TF_ERR_RANGE, "%s: more than %d \"eos_token_id\" values",
					   path, TF_MAX_EOS);
		cfg->eos_token_id[cfg->n_eos++] = (int)x;
	}
	return TF_OK;
}

/* A per-layer clamp list into a zero-filled array of n_layers_total. */
static int cfg_limits(const char *path, const cJSON *root, const char *key, int n, float **out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key), *e;
	float *lim = calloc((size_t)n, sizeof(*lim));
	if (!lim)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", path);
	*out = lim;
	if (!v || cJSON_IsNull(v))
		return TF_OK;
	if (!cJSON_IsArray(v))
		return tf_diag_set(TF_ERR_FORMAT, "%s: \"%s\" must be a list or null", path, key);
	if (cJSON_GetArraySize(v) > n)
		return tf_diag_set(TF_ERR_INVALID, "%s: \"%s\" has %d entries for %d layers",
				   path, key, cJSON_GetArraySize(v), n);
	int i = 0;
	cJSON_ArrayForEach(e, v) {
		if (cJSON_IsNumber(e) && isfinite(e->valuedouble) && e->valuedouble >= 0)
			lim[i] = (float)e->valuedouble;
		else if (!cJSON_IsNull(e))
			return tf_diag_set(TF_ERR_INVALID,
					   "%s: \"%s\"[%d] must be a non-negative number or null",
					   path, key, i);
		i++;
	}
	return TF_OK;
}

/* Fill the keys whose defaults come from other keys. */
static int cfg_derive(const char *path, tf_model_config *c)
{
	if (!c->head_dim) {
		if (c->hidden_size % c->num_attention_heads)
			return tf_diag_set(TF_ERR_INVALID,
					   "%s: no \"head_dim\" and hidden_size %d is not a multiple of num_attention_heads %d",
					   path, c->hidden_size, c->num_attention_heads);
		c->head_dim = c->hidden_size / c->num_attention_heads;
	}
	if (!c->num_key_value_heads)
		c->num_key_value_heads = c->num_attention_heads;
	if (!c->moe_shared_expert_intermediate_size)
		c->moe_shared_expert_intermediate_size = c->moe_intermediate_size;
	if (!c->intermediate_size && c->first_k_dense_replace)
		return tf_diag_set(TF_ERR_NOT_FOUND,
				   "%s: missing \"intermediate_size\" with first_k_dense_replace %d",
				   path, c->first_k_dense_replace);
	return TF_OK;
}

/* Values that each parse but together cannot describe a model. */
static int cfg_check(const char *path, const cJSON *root, const tf_model_config *c)
{
#define CFG_REQUIRE(cond, ...) \
	do { if (!(cond)) return tf_diag_set(TF_ERR_INVALID, __VA_ARGS__); } while (0)
	const cJSON *qk = cJSON_GetObjectItemCaseSensitive(root, "qk_head_dim");
	CFG_REQUIRE(!qk || cJSON_IsNull(qk) ||
		    (cJSON_IsNumber(qk) && qk->valuedouble == c->qk_nope_head_dim + c->qk_rope_head_dim),
		    "%s: \"qk_head_dim\" is not qk_nope_head_dim %d + qk_rope_head_dim %d",
		    path, c->qk_nope_head_dim, c->qk_rope_head_dim);
	CFG_REQUIRE(c->qk_rope_head_dim % 2 == 0,
		    "%s: \"qk_rope_head_dim\" %d must be even (rotation pairs)",
		    path, c->qk_rope_head_dim);
	CFG_REQUIRE(c->num_attention_heads % c->num_key_value_heads == 0,
		    "%s: \"num_attention_heads\" %d is not a multiple of num_key_value_heads %d",
		    path, c->num_attention_heads, c->num_key_value_heads);
	CFG_REQUIRE(c->num_experts % c->n_group == 0,
		    "%s: \"n_group\" %d does not divide num_experts %d",
		    path, c->n_group, c->num_experts);
	CFG_REQUIRE(c->topk_group <= c->n_group,
		    "%s: \"topk_group\" %d exceeds n_group %d", path, c->topk_group, c->n_group);
	CFG_REQUIRE(c->num_experts_per_tok <= c->topk_group * (c->num_experts / c->n_group),
		    "%s: \"num_experts_per_tok\" %d exceeds the %d experts of %d kept groups",
		    path, c->num_experts_per_tok, c->topk_group * (c->num_experts / c->n_group),
		    c->topk_group);
	CFG_REQUIRE(c->first_k_dense_replace <= c->num_hidden_layers,
		    "%s: \"first_k_dense_replace\" %d exceeds num_hidden_layers %d",
		    path, c->first_k_dense_replace, c->num_hidden_layers);
	CFG_REQUIRE(c->pad_token_id < c->vocab_size,
		    "%s: \"pad_token_id\" %d is not below vocab_size %d",
		    path, c->pad_token_id, c->vocab_size);
	return TF_OK;
#undef CFG_REQUIRE
}

/* The layer schedule of spec/ling-arch.md §1.3, MTP layers appended. */
static int cfg_schedule(const char *path, tf_model_config *c)
{
	int L = c->num_hidden_layers, g = c->layer_group_size;
	int n = L + c->num_nextn_predict_layers;
	uint8_t *attn = malloc((size_t)n), *ffn = malloc((size_t)n);
	const char **attn_type = malloc((size_t)n * sizeof(char *));
	const char **ffn_type = malloc((size_t)n * sizeof(char *));
	c->layer_attn = attn;
	c->layer_ffn = ffn;
	c->attn_type = attn_type;
	c->ffn_type = ffn_type;
	c->n_layers_total = n;
	if (!attn || !ffn || !attn_type || !ffn_type)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", path);
	for (int i = 0; i < n; i++) {
		bool mtp = i >= L;
		bool mla = mtp || (i + 1) % g == 0 || i >= (L / g) * g;
		bool dense = !mtp && i < c->first_k_dense_replace;
		attn[i] = mla ? TF_ATTN_MLA : TF_ATTN_KDA;
		ffn[i] = dense ? TF_FFN_DENSE : TF_FFN_MOE;
		attn_type[i] = mla ? "mla" : "kda";
		ffn_type[i] = dense ? "dense" : "moe";
	}
	return TF_OK;
}

static int cfg_parse_tree(const char *path, const cJSON *root, tf_model_config *cfg)
{
	int rc;
	if (!cJSON_IsObject(root))
		return tf_diag_set(TF_ERR_FORMAT, "%s: not a JSON object", path);
	if ((rc = cfg_model_type(path, root, cfg)))
		return rc;
	for (size_t i = 0; i < sizeof(cfg_keys) / sizeof(*cfg_keys); i++)
		if ((rc = cfg_scalar(path, root, &cfg_keys[i], cfg)))
			return rc;
	if ((rc = cfg_derive(path, cfg)) || (rc = cfg_check(path, root, cfg)) ||
	    (rc = cfg_choices(path, root, cfg)) || (rc = cfg_rope_scaling(path, root, cfg)) ||
	    (rc = cfg_eos(path, root, cfg)) || (rc = cfg_schedule(path, cfg)))
		return rc;

	float *e, *s;
	rc = cfg_limits(path, root, "expert_swiglu_limit_list", cfg->n_layers_total, &e);
	cfg->expert_swiglu_limit = e;
	if (rc)
		return rc;
	rc = cfg_limits(path, root, "share_expert_swiglu_limit_list", cfg->n_layers_total, &s);
	cfg->shared_swiglu_limit = s;
	return rc;
}

int tf_config_parse(const char *json, size_t len, const char *path, tf_model_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
	if (!root)
		return cfg_syntax_error(path, json, len, end);
	while (end < json + len && strchr(" \t\r\n", *end) && *end)
		end++;
	if (end < json + len) {
		cJSON_Delete(root);
		return cfg_syntax_error(path, json, len, end);
	}
	int rc = cfg_parse_tree(path, root, cfg);
	cJSON_Delete(root);
	if (rc)
		tf_config_free(cfg);
	return rc;
}

int tf_config_load(const char *path, tf_model_config *cfg)
{
	char *text;
	size_t len;
	memset(cfg, 0, sizeof(*cfg));
	int rc = tf_text_read(path, CFG_MAX_FILE, &text, &len);
	if (rc)
		return rc;
	rc = tf_config_parse(text, len, path, cfg);
	free(text);
	return rc;
}

void tf_config_set_layer_type(tf_model_config *c, int layer, bool ffn, const char *type)
{
	if (ffn) {
		((const char **)c->ffn_type)[layer] = type;
		((uint8_t *)c->layer_ffn)[layer] = !strcmp(type, "dense") ? TF_FFN_DENSE :
						  !strcmp(type, "moe") ? TF_FFN_MOE : 0;
	} else {
		((const char **)c->attn_type)[layer] = type;
		((uint8_t *)c->layer_attn)[layer] = !strcmp(type, "kda") ? TF_ATTN_KDA :
						   !strcmp(type, "mla") ? TF_ATTN_MLA : 0;
	}
}

void tf_config_free(tf_model_config *cfg)
{
	free((void *)cfg->expert_swiglu_limit);
	free((void *)cfg->shared_swiglu_limit);
	free((void *)cfg->layer_attn);
	free((void *)cfg->layer_ffn);
	free((void *)cfg->attn_type);
	free((void *)cfg->ffn_type);
	cfg->expert_swiglu_limit = cfg->shared_swiglu_limit = NULL;
	cfg->layer_attn = cfg->layer_ffn = NULL;
	cfg->attn_type = cfg->ffn_type = NULL;
	cfg->n_layers_total = 0;
}

/*
 * toy_mean.c - an attention plugin of a layer type the core has never
 * heard of, "toy": each token's output is the mean of the layer's input
 * over the sequence so far,
 *
 *     y[t] = (x[0] + ... + x[t]) / (t + 1)
 *
 * or with [toy] mode = sum (a key the plugin declares) the sum itself,
 * with no weights.  It proves that a new attention type drops in by INI
 * alone ([model] layer.<N>.attention = toy); docs/plugins.md walks
 * through it.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tf/attention.h"
#include "tf/backend.h"

struct toy {
	const tf_host *h;
	int layer;
	int64_t hidden, max_ctx;
	int64_t len;                    /* tokens so far */
	bool sum;                       /* [toy] mode = sum */
	double *acc;                    /* [hidden]: their inputs, summed */
};

/* x and y are in backend memory; the plugin reads them directly. */
static int toy_probe(const tf_host *h, const char **reason)
{
	if (!h->backend || !h->backend->parallel_for) {
		*reason = "needs a host-memory backend";
		return 0;
	}
	return 1;
}

static int64_t toy_state_bytes(const tf_host *h, int layer, int64_t max_ctx)
{
	return h->model->hidden_size * (int64_t)sizeof(double);
}

static const tf_plugin_key toy_keys[] = {
	{ .section = "toy", .name = "mode", .type = TF_KEY_ENUM, .choices = "mean|sum",
	  .def = "mean", .help = "what a toy layer outputs: the running mean or sum of its input" },
	{ .section = NULL },
};

static int toy_layer_init(const tf_host *h, int layer, const char *prefix,
			  int64_t max_ctx, void **inst)
{
	int mode = 0;
	if (!TF_HAS_SLOT(h, tf_host, conf_enum) || !h->conf_enum)
		return h->error(h, TF_ERR_UNSUPPORTED, "%s: toy needs a host with conf_enum", prefix);
	int rc = h->conf_enum(h, "toy", "mode", 0, &mode);
	if (rc)
		return rc;
	struct toy *t = malloc(sizeof(*t));
	double *acc = calloc((size_t)h->model->hidden_size, sizeof(double));
	if (!t || !acc) {
		free(t);
		free(acc);
		return h->error(h, TF_ERR_NOMEM, "%s: out of memory", prefix);
	}
	*t = (struct toy){ .h = h, .layer = layer, .hidden = h->model->hidden_size,
			   .max_ctx = max_ctx, .sum = mode == 1, .acc = acc };
	*inst = t;
	return TF_OK;
}

static void toy_layer_fini(void *inst)
{
	struct toy *t = inst;
	if (!t)
		return;
	free(t->acc);
	free(t);
}

static int toy_forward(void *inst, const float *x, int64_t n, const int32_t *pos, float *y)
{
	struct toy *t = inst;
	if (n < 0 || t->len + n > t->max_ctx)
		return t->h->error(t->h, TF_ERR_RANGE, "layer %d (toy): %lld tokens after %lld "
				   "exceed the context of %lld", t->layer, (long long)n,
				   (long long)t->len, (long long)t->max_ctx);
	for (int64_t i = 0; i < n; i++) {
		t->len++;
		for (int64_t c = 0; c < t->hidden; c++) {
			t->acc[c] += x[i * t->hidden + c];
			y[i * t->hidden + c] = (float)(t->sum ? t->acc[c] : t->acc[c] / (double)t->len);
		}
	}
	return TF_OK;
}

static void toy_reset(void *inst)
{
	struct toy *t = inst;
	t->len = 0;
	memset(t->acc, 0, (size_t)t->hidden * sizeof(double));
}

static int64_t toy_seq_len(void *inst)
{
	return ((struct toy *)inst)->len;
}

/* A snapshot: len, then acc. */
static size_t toy_snapshot_size(void *inst)
{
	return sizeof(int64_t) + (size_t)((struct toy *)inst)->hidden * sizeof(double);
}

static int toy_snapshot(void *inst, void *buf)
{
	struct toy *t = inst;
	memcpy(buf, &t->len, sizeof(int64_t));
	memcpy((char *)buf + sizeof(int64_t), t->acc, (size_t)t->hidden * sizeof(double));
	return TF_OK;
}

static int toy_rollback(void *inst, const void *buf)
{
	struct toy *t = inst;
	memcpy(&t->len, buf, sizeof(int64_t));
	memcpy(t->acc, (const char *)buf + sizeof(int64_t), (size_t)t->hidden * sizeof(double));
	return TF_OK;
}

#ifdef TOY_HALF_15
/* One ABI 1.5 state slot without the rest: the registry refuses it. */
static int toy_state_new(void *inst, int64_t max_ctx, void **state)
{
	return TF_ERR_UNSUPPORTED;
}
#endif

static const tf_plugin_attention toy = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_attention, TF_KIND_ATTENTION, "toy-mean", "0.1",
				"toy attention: the running mean of the layer input", toy_probe),
	.layer_type = "toy",
	.state_bytes = toy_state_bytes,
	.layer_init = toy_layer_init,
	.layer_fini = toy_layer_fini,
	.forward = toy_forward,
	.reset = toy_reset,
	.seq_len = toy_seq_len,
	.snapshot_size = toy_snapshot_size,
	.snapshot = toy_snapshot,
	.rollback = toy_rollback,
	.keys = toy_keys,
#ifdef TOY_HALF_15
	.state_new = toy_state_new,
#endif
};

TF_EXPORT const tf_plugin_attention *tf_plugin_attention_v1(unsigned index)
{
	return index == 0 ? &toy : NULL;
}

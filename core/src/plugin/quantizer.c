/* quantizer.c - a quant plugin's quantizer for tools (tf/checkpoint.h): the
 * registry scanned with no INI, kept so the plugin stays loaded. */
#include <stdlib.h>
#include <string.h>

#include "plugin/registry.h"
#include "tf/checkpoint.h"
#include "tf/diag.h"

struct tf_quantizer {
	tf_registry *reg;
	tf_quantize_fn fn;
	tf_quant_draw_fn draw;
};

/* The quantizer of the usable quant plugin named format in r. */
static int quantizer_find(const tf_registry *r, const char *format, tf_quantizer *q)
{
	for (size_t i = 0; i < tf_registry_count(r); i++) {
		const tf_candidate *c = tf_registry_at(r, i);
		if (c->kind != TF_KIND_QUANT || c->status || strcmp(c->name, format))
			continue;
		q->fn = tf_quant_quantizer((const tf_plugin_quant *)c->desc);
		q->draw = tf_quant_drawer((const tf_plugin_quant *)c->desc);
		if (!q->fn)
			return tf_diag_set(TF_ERR_UNSUPPORTED, "%s: %s has no quantizer",
					   format, c->file);
		return TF_OK;
	}
	return tf_diag_set(TF_ERR_NOT_FOUND, "%s: no usable quant plugin of that name "
			   "on the plugin path (see tfrun --plugins)", format);
}

int tf_quantizer_open(const char *format, tf_quantizer **out)
{
	tf_quantizer *q = calloc(1, sizeof(*q));
	int rc;

	*out = NULL;
	if (!q)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", format);
	rc = tf_registry_init(&q->reg);
	if (!rc)
		rc = tf_registry_scan(q->reg, NULL);
	if (!rc)
		rc = quantizer_find(q->reg, format, q);
	if (rc) {
		tf_quantizer_close(q);
		return rc;
	}
	*out = q;
	return TF_OK;
}

void tf_quantizer_close(tf_quantizer *q)
{
	if (!q)
		return;
	tf_registry_free(q->reg);
	free(q);
}

tf_quantize_fn tf_quantizer_fn(const tf_quantizer *q)
{
	return q->fn;
}

tf_quant_draw_fn tf_quantizer_draw_fn(const tf_quantizer *q)
{
	return q->draw;
}

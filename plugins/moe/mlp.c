/* mlp.c - see mlp.h. */
#include "mlp.h"

#include "../common/tensor_util.h"
#include "tf/backend.h"

int tf_mlp_init(tf_mlp *m, const tf_host *h, const char *prefix,
		int64_t hidden, int64_t inter, const char *inter_key, float limit, bool split)
{
	char in_keys[128], out_keys[128];
	int64_t lo = 0, hi = inter;
	int rc;

	snprintf(in_keys, sizeof(in_keys), "in hidden_size, out %s", inter_key);
	snprintf(out_keys, sizeof(out_keys), "in %s, out hidden_size", inter_key);
	*m = (tf_mlp){ .hidden = hidden, .limit = limit };
	if (split && (rc = tf_tu_shard(h, inter, prefix, inter_key, &lo, &hi)))
		return rc;
	const tf_lin_part rows = { .axis = TF_LIN_PART_OUT, .lo = lo, .hi = hi };
	const tf_lin_part cols = { .axis = TF_LIN_PART_IN, .lo = lo, .hi = hi };
	m->inter = hi - lo;
	rc = tf_tu_lin_open_part(h, prefix, "gate_proj", hidden, inter, in_keys, &rows, &m->gate);
	if (rc)
		goto fail;
	rc = tf_tu_lin_open_part(h, prefix, "up_proj", hidden, inter, in_keys, &rows, &m->up);
	if (rc)
		goto fail;
	rc = tf_tu_lin_open_part(h, prefix, "down_proj", inter, hidden, out_keys, &cols,
				 &m->down);
	if (rc)
		goto fail;
	return TF_OK;
fail:
	tf_mlp_free(m, h);
	return rc;
}

void tf_mlp_free(tf_mlp *m, const tf_host *h)
{
	tf_tu_lin_close(h, &m->gate);
	tf_tu_lin_close(h, &m->up);
	tf_tu_lin_close(h, &m->down);
	m->inter = 0;
}

/* scratch: gate[rows, inter], up[rows, inter], act[rows, inter]. */
int64_t tf_mlp_scratch(const tf_mlp *m, int64_t rows)
{
	return 3 * rows * m->inter;
}

int tf_mlp_forward(const tf_mlp *m, const tf_host *h, const float *x,
		   int64_t rows, float *y, float *scratch)
{
	float *g = scratch, *u = g + rows * m->inter, *a = u + rows * m->inter;
	int rc;

	rc = tf_lin_forward(&m->gate, x, rows, g);
	if (!rc)
		rc = tf_lin_forward(&m->up, x, rows, u);
	if (rc)
		return rc;
	h->backend->swiglu(h->backend_ctx, a, g, u, rows * m->inter, m->limit);
	return tf_lin_forward(&m->down, a, rows, y);
}

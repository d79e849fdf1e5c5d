/* mlp.c - see mlp.h. */
#include "mlp.h"

#include <stdio.h>

#include "tf/backend.h"

static int open_proj(const tf_host *h, tf_lin *lin, const char *prefix,
		     const char *proj, int64_t in, int64_t out)
{
	char name[512];

	snprintf(name, sizeof(name), "%s.%s", prefix, proj);
	return h->lin_open(h, name, in, out, lin);
}

int tf_mlp_init(tf_mlp *m, const tf_host *h, const char *prefix,
		int64_t hidden, int64_t inter, float limit)
{
	int rc;

	*m = (tf_mlp){ .hidden = hidden, .inter = inter, .limit = limit };
	rc = open_proj(h, &m->gate, prefix, "gate_proj", hidden, inter);
	if (rc)
		goto fail;
	rc = open_proj(h, &m->up, prefix, "up_proj", hidden, inter);
	if (rc)
		goto fail;
	rc = open_proj(h, &m->down, prefix, "down_proj", inter, hidden);
	if (rc)
		goto fail;
	return TF_OK;
fail:
	tf_mlp_free(m, h);
	return rc;
}

void tf_mlp_free(tf_mlp *m, const tf_host *h)
{
	tf_lin *lins[] = { &m->gate, &m->up, &m->down };

	for (int i = 0; i < 3; i++)
		if (lins[i]->impl)
			h->lin_close(h, lins[i]);
	*m = (tf_mlp){ 0 };
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

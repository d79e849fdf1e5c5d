/*
 * plant_router.c - a router planted for `tfrun bench`'s A/B tests: each
 * token takes experts 0..k-1 (its position's rotation of them), with
 * weights 1/k, then [plant] sleep_us microseconds of sleep per call (a
 * slow kernel) and [plant] skew times the weights' spread (an inexact
 * one: slot j's weight is (1 + skew (j - (k-1)/2)) / k).  Both default
 * to 0: then it is exact and as fast as it can be.
 */
#include <stdlib.h>
#include <time.h>

#include "tf/router.h"

static const tf_plugin_key plant_keys[] = {
	{ .section = "plant", .name = "sleep_us", .type = TF_KEY_INT, .min = 0, .max = 100000,
	  .def = "0", .help = "Microseconds each routing call sleeps." },
	{ .section = "plant", .name = "skew", .type = TF_KEY_FLOAT, .min = 0, .max = 1,
	  .def = "0", .help = "How far the weights lean from 1/k." },
	{ .section = NULL },
};

struct plant {
	const tf_host *h;
	int64_t sleep_us;
	double skew;
};

static int plant_probe(const tf_host *h, const char **reason)
{
	if (!TF_HAS_SLOT(h, tf_host, conf_float)) {
		*reason = "host too old: needs conf_float (ABI 1.12)";
		return 0;
	}
	return 1;
}

/* One instance a layer: two engines in one process (bench's A and B) load
 * this .so once, each with its own keys. */
static int plant_init(const tf_host *h, int layer, const char *prefix, void **inst)
{
	struct plant *p = calloc(1, sizeof(*p));
	int rc;

	(void)layer;
	(void)prefix;
	if (!p)
		return TF_ERR_NOMEM;
	p->h = h;
	if ((rc = h->conf_int(h, "plant", "sleep_us", 0, &p->sleep_us)) != TF_OK ||
	    (rc = h->conf_float(h, "plant", "skew", 0, &p->skew)) != TF_OK) {
		free(p);
		return rc;
	}
	*inst = p;
	return TF_OK;
}

static void plant_fini(void *inst)
{
	free(inst);
}

static int plant_route(void *inst, const float *x, int64_t n, int32_t *idx, float *w)
{
	const struct plant *p = inst;
	int k = p->h->model->num_experts_per_tok, e = p->h->model->num_experts;

	(void)x;
	for (int64_t i = 0; i < n; i++)
		for (int j = 0; j < k; j++) {
			idx[i * k + j] = (int32_t)((i + j) % e);
			w[i * k + j] = (float)((1 + p->skew * (j - (k - 1) / 2.0)) / k);
		}
	if (p->sleep_us) {
		struct timespec ts = { .tv_sec = p->sleep_us / 1000000,
				       .tv_nsec = (p->sleep_us % 1000000) * 1000 };
		nanosleep(&ts, NULL);
	}
	return TF_OK;
}

static const tf_plugin_router plant = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_router, TF_KIND_ROUTER, "plant", "0",
				"a router planted for bench's A/B: slow or inexact on demand",
				plant_probe),
	.layer_init = plant_init,
	.layer_fini = plant_fini,
	.route = plant_route,
	.keys = plant_keys,
};

TF_EXPORT const tf_plugin_router *tf_plugin_router_v1(unsigned index)
{
	return index == 0 ? &plant : NULL;
}

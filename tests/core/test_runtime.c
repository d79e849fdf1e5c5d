/* test_runtime.c - opening the generated tiny model: plugin choice per
 * layer, INI pins and overrides, the host services, and refusals. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/runtime.h"
#include "tf/backend.h"
#include "tf/diag.h"
#include "tf/quant.h"
#include "tf/transport.h"

/* An INI beside nothing: the model path is absolute. */
static char ini[64];

static void write_ini(void)
{
	strcpy(ini, "/tmp/tf-runtime-XXXXXX.ini");
	int fd = mkstemps(ini, 4);
	cr_assert_geq(fd, 0);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "[model]\npath = %s\n[runtime]\ncontext = 256\nthreads = 1\n"
		"[plugins]\nquant = plain\n", TF_TEST_MODEL);
	fclose(f);
}

static void remove_ini(void)
{
	unlink(ini);
}

TestSuite(runtime, .init = write_ini, .fini = remove_ini, .timeout = 30);

static tf_runtime *open_ok(const char *const *ov, int n)
{
	tf_runtime *rt = NULL;
	int rc = tf_runtime_open(ini, ov, n, &rt);
	cr_assert_eq(rc, TF_OK, "%s", tf_diag_msg());
	return rt;
}

static void open_fails(const char *const *ov, int n, int status, const char *msg)
{
	tf_runtime *rt = NULL;
	tf_diag_clear();
	int rc = tf_runtime_open(ini, ov, n, &rt);
	cr_assert_eq(rc, status, "got %d: %s", rc, tf_diag_msg());
	cr_assert_null(rt);
	cr_assert(strstr(tf_diag_msg(), msg), "'%s' lacks '%s'", tf_diag_msg(), msg);
}

Test(runtime, every_layer_gets_a_plugin_of_its_type)
{
	tf_runtime *rt = open_ok(NULL, 0);
	const tf_model_config *m = tf_runtime_model(rt);
	cr_assert_gt(m->n_layers_total, m->num_hidden_layers);
	for (int i = 0; i < m->n_layers_total; i++) {
		const tf_plugin_attention *a = tf_runtime_attention(rt, i);
		const tf_plugin_ffn *f = tf_runtime_ffn(rt, i);
		cr_assert_not_null(a, "layer %d", i);
		cr_assert_not_null(f, "layer %d", i);
		cr_assert_str_eq(a->layer_type, m->layer_attn[i] == TF_ATTN_KDA ? "kda" : "mla");
		cr_assert_str_eq(f->layer_type, m->layer_ffn[i] == TF_FFN_MOE ? "moe" : "dense");
	}
	cr_assert_null(tf_runtime_attention(rt, m->n_layers_total));
	cr_assert_null(tf_runtime_ffn(rt, -1));
	cr_assert_null(tf_runtime_drafter(rt));
	cr_assert_null(tf_runtime_transport(rt));
	cr_assert_eq(tf_runtime_context(rt), 256);
	cr_assert_eq(tf_runtime_prefill_chunk(rt), TF_DEFAULT_PREFILL_CHUNK);
	cr_assert_gt(tf_runtime_plan(rt)->rank_total, tf_runtime_plan(rt)->rank_weights);
	tf_runtime_close(rt);
}

Test(runtime, host_services)
{
	tf_runtime *rt = open_ok(NULL, 0);
	const tf_host *h = tf_runtime_host(rt);
	cr_assert_str_eq(h->backend->hdr.name, "cpu");
	cr_assert_not_null(h->backend_ctx);
	cr_assert_eq(h->tp_size, 1);
	cr_assert_str_eq(h->conf_get(h, "runtime", "threads"), "1");
	cr_assert_null(h->conf_get(h, "sampling", "seed"));

	/* typed reads: the value as the schema types it, or the default */
	int64_t v;
	uint64_t u;
	bool b;
	int e;
	cr_assert_eq(h->conf_int(h, "runtime", "threads", 7, &v), TF_OK);
	cr_assert_eq(v, 1);
	cr_assert_eq(h->conf_int(h, "sampling", "seed", -5, &v), TF_OK);
	cr_assert_eq(v, -5);
	cr_assert_eq(h->conf_size(h, "runtime", "memory_limit", 9, &u), TF_OK);
	cr_assert_eq(u, 9);
	cr_assert_eq(h->conf_bool(h, "mtp", "enabled", true, &b), TF_OK);
	cr_assert_eq(b, true);
	cr_assert_eq(h->conf_enum(h, "runtime", "log_level", 3, &e), TF_OK);
	cr_assert_eq(e, 3);
	cr_assert_neq(h->conf_int(h, "runtime", "log_level", 0, &v), TF_OK);
	cr_assert(strstr(tf_diag_msg(), "[runtime] log_level"), "%s", tf_diag_msg());

	tf_tensor t;
	cr_assert_eq(h->weight_get(h, "lm_head.weight", &t), TF_OK);
	cr_assert_eq(t.shape[1], h->model->hidden_size);
	cr_assert_eq(h->weight_get(h, "no.such.tensor", &t), TF_ERR_NOT_FOUND);

	/* a linear opens through the pinned plain quant and computes */
	const tf_model_config *m = h->model;
	tf_lin lin = { 0 };
	int rc = h->lin_open(h, "model.layers.0.mlp.gate_proj", m->hidden_size,
			     m->intermediate_size, &lin);
	cr_assert_eq(rc, TF_OK, "%s", tf_diag_msg());
	cr_assert_str_eq(lin.ops->hdr.name, "plain");
	float *x = h->backend->alloc(h->backend_ctx, sizeof(float) * m->hidden_size);
	float *y = h->backend->alloc(h->backend_ctx, sizeof(float) * m->intermediate_size);
	for (int i = 0; i < m->hidden_size; i++)
		x[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
	for (int i = 0; i < m->intermediate_size; i++)
		y[i] = NAN;
	cr_assert_eq(tf_lin_forward(&lin, x, 1, y), TF_OK);
	double norm = 0;
	for (int i = 0; i < m->intermediate_size; i++)
		norm += (double)y[i] * y[i];
	cr_assert(norm > 0 && norm < 1e30, "output norm %g", norm);
	h->backend->free(h->backend_ctx, x);
	h->backend->free(h->backend_ctx, y);
	h->lin_close(h, &lin);
	cr_assert_null(lin.impl);

	cr_assert_eq(h->lin_open(h, "model.layers.0.mlp.nothing", 4, 4, &lin),
		     TF_ERR_NOT_FOUND);
	cr_assert(strstr(tf_diag_msg(), "model.layers.0.mlp.nothing: no quant plugin "
			 "recognises its tensors"), "%s", tf_diag_msg());
	cr_assert_eq(h->error(h, TF_ERR_FORMAT, "tensor %s", "w"), TF_ERR_FORMAT);
	cr_assert_str_eq(tf_diag_msg(), "tensor w");
	tf_runtime_close(rt);
}

Test(runtime, typed_conf_reads_of_set_values)
{
	const char *ov[] = { "runtime.log_level=info", "runtime.memory_limit=2G",
			     "mtp.enabled=no" };
	tf_runtime *rt = open_ok(ov, 3);
	const tf_host *h = tf_runtime_host(rt);
	int e;
	uint64_t u;
	bool b;
	cr_assert_eq(h->conf_enum(h, "runtime", "log_level", 0, &e), TF_OK);
	cr_assert_eq(e, 2);
	cr_assert_eq(h->conf_size(h, "runtime", "memory_limit", 0, &u), TF_OK);
	cr_assert_eq(u, (uint64_t)2 << 30);
	cr_assert_eq(h->conf_bool(h, "mtp", "enabled", true, &b), TF_OK);
	cr_assert_eq(b, false);
	tf_runtime_close(rt);
}

Test(runtime, plugin_keys_are_declared_checked_and_read)
{
	/* toy-mean declares [toy] mode (mean|sum, default mean) */
	const char *path = "plugins.path=" TF_TEST_PLUGINS "/toy";
	const char *unset[] = { path };
	tf_runtime *rt = open_ok(unset, 1);
	const tf_host *h = tf_runtime_host(rt);
	int e = -1;
	cr_assert_eq(h->conf_enum(h, "toy", "mode", 7, &e), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(e, 0, "the declared default, not the caller's");
	tf_runtime_close(rt);

	const char *set[] = { path, "toy.mode=sum" };
	rt = open_ok(set, 2);
	h = tf_runtime_host(rt);
	cr_assert_eq(h->conf_enum(h, "toy", "mode", 0, &e), TF_OK);
	cr_assert_eq(e, 1);
	tf_runtime_close(rt);

	const char *bad_value[] = { path, "toy.mode=median" };
	open_fails(bad_value, 2, TF_ERR_INVALID, "--set: [toy] mode: 'median' is not one of mean|sum");
	const char *unknown[] = { path, "toy.moed=sum" };
	open_fails(unknown, 2, TF_ERR_INVALID, "--set [toy] moed: unknown key");
	/* without the plugin on the path nobody declares it */
	const char *absent[] = { "toy.mode=sum" };
	open_fails(absent, 1, TF_ERR_INVALID, "[toy] mode: unknown key");
}

/* tf/conf.h for a face that reads the INI before or without an engine:
 * tf_conf_open keeps a key it does not know for the engine to check,
 * tf_conf_open_checked scans the plugins and checks it there. */
Test(runtime, faces_open_the_ini_checked_or_not)
{
	const char *path = "plugins.path=" TF_TEST_PLUGINS "/toy";
	const char *ov[] = { path, "toy.mode=sum", "sampling.top_k=7" };
	tf_conf *c = NULL;
	int64_t k;
	int e = -1;

	cr_assert_eq(tf_conf_open(ini, ov, 3, &c), TF_OK, "%s", tf_diag_msg());
	cr_assert_str_eq(tf_conf_get(c, "toy", "mode"), "sum");
	cr_assert_eq(tf_conf_get_int(c, "sampling", "top_k", 0, &k), TF_OK);
	cr_assert_eq(k, 7);
	tf_conf_free(c);

	cr_assert_eq(tf_conf_open_checked(ini, ov, 3, &c), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_conf_get_enum(c, "toy", "mode", 0, &e), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(e, 1, "typed by the plugin's declaration");
	tf_conf_free(c);

	/* a misspelt plugin key passes the unchecked open, not the checked one */
	const char *typo[] = { path, "toy.moed=sum" };
	cr_assert_eq(tf_conf_open(ini, typo, 2, &c), TF_OK, "%s", tf_diag_msg());
	tf_conf_free(c);
	c = (tf_conf *)1;
	cr_assert_eq(tf_conf_open_checked(ini, typo, 2, &c), TF_ERR_INVALID);
	cr_assert_null(c);
	cr_assert(strstr(tf_diag_msg(), "--set [toy] moed: unknown key"), "%s", tf_diag_msg());
	/* a core key is checked by both */
	const char *bad[] = { "sampling.top_k=many" };
	cr_assert_eq(tf_conf_open(ini, bad, 1, &c), TF_ERR_INVALID);
	cr_assert_null(c);
	cr_assert(strstr(tf_diag_msg(), "[sampling] top_k"), "%s", tf_diag_msg());
	/* no INI: every key unset */
	cr_assert_eq(tf_conf_open(NULL, NULL, 0, &c), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_conf_count(c), 0);
	tf_conf_free(c);
}

Test(runtime, plugin_layer_state_is_planned)
{
	/* toy-mean keeps hidden_size doubles per layer and sequence */
	const char *ov[] = { "plugins.path=" TF_TEST_PLUGINS "/toy", "runtime.sequences=3",
			     "model.layer.0.attention=toy", "model.layer.1.attention=toy" };
	tf_runtime *rt = open_ok(ov, 4);
	const tf_model_config *m = tf_runtime_model(rt);
	const tf_memplan *p = tf_runtime_plan(rt);
	uint64_t toy = (uint64_t)m->hidden_size * sizeof(double);
	tf_memplan core;
	cr_assert_eq(tf_memplan_compute_opts(m, tf_runtime_weights(rt), &p->opts, &core), TF_OK);
	cr_assert_eq(p->n_other, 2);
	cr_assert_eq(p->other_state, 2 * toy);
	cr_assert_eq(p->seq_state, core.seq_state + 2 * toy);
	cr_assert_eq(p->rank_total, core.rank_total + 2 * toy * 3);
	char limit[64];
	snprintf(limit, sizeof(limit), "runtime.memory_limit=%llu",
		 (unsigned long long)p->rank_total - 1);
	tf_runtime_close(rt);

	/* the plan without the toys' state fits; with it, it does not */
	const char *tight[] = { ov[0], ov[1], ov[2], ov[3], limit };
	open_fails(tight, 5, TF_ERR_RANGE, "[runtime] memory_limit allows");
}

Test(runtime, bad_key_declarations_name_plugin_and_key)
{
	const char *core[] = { "plugins.path=" TF_TEST_PLUGINS "/keys-core" };
	open_fails(core, 1, TF_ERR_INVALID,
		   "plugin keys-core declares [runtime] threads, which is a core key");
	const char *twin[] = { "plugins.path=" TF_TEST_PLUGINS "/keys-twin" };
	open_fails(twin, 1, TF_ERR_INVALID, "plugins twin-a and twin-b both declare [twin] depth");
	const char *enumk[] = { "plugins.path=" TF_TEST_PLUGINS "/keys-enum" };
	open_fails(enumk, 1, TF_ERR_INVALID, "plugin keys-enum: [bad] flavour: bad declaration");
}

Test(runtime, overrides_pick_plugins)
{
	const char *ov[] = { "plugins.backend=cpu-ref", "plugins.layer.3.attention=mla",
			     "plugins.quant=exl3", "plugins.exclude=example-int8" };
	tf_runtime *rt = open_ok(ov, 4);
	const tf_host *h = tf_runtime_host(rt);
	cr_assert_str_eq(h->backend->hdr.name, "cpu-ref");
	cr_assert_str_eq(tf_runtime_attention(rt, 3)->hdr.name, "mla");
	/* exl3 is preferred, but a bf16 checkpoint has no trellis: plain opens it */
	tf_lin lin;
	cr_assert_eq(h->lin_open(h, "model.layers.0.mlp.gate_proj", 256, 512, &lin),
		     TF_OK, "%s", tf_diag_msg());
	cr_assert_str_eq(lin.ops->hdr.name, "plain");
	h->lin_close(h, &lin);
	tf_runtime_close(rt);

	/* unpinned, each linear goes to the best match() */
	const char *unpin[] = { "plugins.exclude=cpu" };
	rt = open_ok(unpin, 1);
	h = tf_runtime_host(rt);
	cr_assert_str_eq(h->backend->hdr.name, "cpu-ref");
	tf_runtime_close(rt);
}

Test(runtime, refusals_name_the_key)
{
	const char *wrong_type[] = { "plugins.layer.0.attention=mla" };
	open_fails(wrong_type, 1, TF_ERR_INVALID,
		   "--set [plugins] layer.0.attention: attention plugin 'mla' serves "
		   "mla layers, not kda");
	const char *no_layer[] = { "plugins.layer.99.ffn=moe" };
	open_fails(no_layer, 1, TF_ERR_RANGE,
		   "[plugins] layer.99.ffn: the model has layers 0..");
	const char *long_ctx[] = { "runtime.context=100000" };
	open_fails(long_ctx, 1, TF_ERR_RANGE,
		   "[runtime] context: 100000 exceeds max_position_embeddings");
	const char *small[] = { "runtime.memory_limit=1M" };
	open_fails(small, 1, TF_ERR_RANGE, "[runtime] memory_limit allows 1048576 bytes");
	const char *nobody[] = { "plugins.drafter=nobody" };
	open_fails(nobody, 1, TF_ERR_NOT_FOUND,
		   "--set [plugins] drafter: no drafter plugin named 'nobody'");
	const char *twice[] = { "mtp.enabled=true", "plugins.drafter=ngram" };
	open_fails(twice, 2, TF_ERR_INVALID,
		   "--set [mtp] enabled: true asks for the mtp drafter, but [plugins] drafter "
		   "is 'ngram'");
	const char *rank[] = { "tp.rank=1" };
	open_fails(rank, 1, TF_ERR_INVALID, "[tp] rank: 1 is not below [tp] size 1");
	const char *nobackend[] = { "plugins.backend=warp-drive" };
	open_fails(nobackend, 1, TF_ERR_NOT_FOUND, "no backend plugin named 'warp-drive'");
	const char *bad[] = { "runtime.threads=many" };
	open_fails(bad, 1, TF_ERR_INVALID, "--set: [runtime] threads: 'many' is not an integer");
	const char *path[] = { "model.path=/nonexistent/model" };
	open_fails(path, 1, TF_ERR_NOT_FOUND, "/nonexistent/model/config.json");
}

/* [tp] transport is the one key that picks the transport: the runtime's
 * plan reads it as tf_tp_open does, and [plugins] has no transport key. */
Test(runtime, tp_transport_is_one_key)
{
	const char *tcp[] = { "tp.size=2", "tp.peers=127.0.0.1:1,127.0.0.1:2",
			      "tp.transport=tcp" };
	tf_runtime *rt = open_ok(tcp, 3);
	cr_assert_str_eq(tf_runtime_transport(rt)->hdr.name, "tcp");
	tf_runtime_close(rt);

	const char *nope[] = { tcp[0], tcp[1], "tp.transport=nope" };
	open_fails(nope, 3, TF_ERR_NOT_FOUND,
		   "--set [tp] transport: no transport plugin named 'nope'");
	const char *old[] = { tcp[0], tcp[1], "plugins.transport=tcp" };
	open_fails(old, 3, TF_ERR_INVALID, "[plugins] transport: unknown key");
}

Test(runtime, missing_ini)
{
	tf_runtime *rt = NULL;
	cr_assert_eq(tf_runtime_open("/nonexistent/x.ini", NULL, 0, &rt), TF_ERR_NOT_FOUND);
	cr_assert_null(rt);
	cr_assert(strstr(tf_diag_msg(), "/nonexistent/x.ini"), "%s", tf_diag_msg());
}

Test(runtime, plugins_only_without_an_ini)
{
	tf_runtime *rt = NULL;
	const char *ov[] = { "plugins.exclude=kda" };
	cr_assert_eq(tf_runtime_open_plugins(NULL, ov, 1, &rt), TF_OK, "%s", tf_diag_msg());
	const tf_registry *r = tf_runtime_registry(rt);
	int usable = 0, excluded = 0;
	for (size_t i = 0; i < tf_registry_count(r); i++) {
		const tf_candidate *c = tf_registry_at(r, i);
		usable += !c->status && c->probed;
		excluded += !strcmp(c->name, "kda") && strstr(c->why, "excluded");
	}
	cr_assert_gt(usable, 3);
	cr_assert_eq(excluded, 1);
	cr_assert_null(tf_runtime_weights(rt));
	tf_runtime_close(rt);
}

/*
 * tp.c - tf/tp.h: the transport plugin [tp] names, connected as [tp] says.
 *
 * The runtime's transport-only open (INI, plugin scan, the transports'
 * probes) supplies the registry and the host; this file reads [tp], picks the transport and
 * drives its instance.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/runtime.h"
#include "tf/diag.h"
#include "tf/tp.h"
#include "tf/transport.h"

#define TP_MAX_PEERS 64

struct tf_tp {
	tf_runtime *rt;
	const tf_plugin_transport *t;
	void *inst;
	int rank, size;
	char *peer_text;                /* [tp] peers, split in place */
	const char *peers[TP_MAX_PEERS];
};

/* Split "h:p,h:p" into exactly `size` entries. */
static int tp_split_peers(tf_tp *tp, const tf_conf *conf)
{
	const char *v = tf_conf_get(conf, "tp", "peers");
	int n = 0;

	if (!v)
		return tf_conf_fail(conf, TF_ERR_INVALID, "tp", "peers",
				    "unset: [tp] size %d needs one host:port per rank",
				    tp->size);
	if (!(tp->peer_text = strdup(v)))
		return tf_diag_set(TF_ERR_NOMEM, "[tp] peers: out of memory");
	for (char *save = NULL, *s = strtok_r(tp->peer_text, ",", &save); s;
	     s = strtok_r(NULL, ",", &save)) {
		s += strspn(s, " \t");
		if (n == TP_MAX_PEERS || !strchr(s, ':'))
			return tf_conf_fail(conf, TF_ERR_INVALID, "tp", "peers",
					    "'%s' is not host:port", s);
		tp->peers[n++] = s;
	}
	if (n != tp->size)
		return tf_conf_fail(conf, TF_ERR_INVALID, "tp", "peers",
				    "%d addresses for [tp] size %d", n, tp->size);
	return TF_OK;
}

/* [tp] transport names the plugin; else the best usable one. */
static int tp_choose(tf_tp *tp, const tf_conf *conf)
{
	const tf_candidate *c;
	int rc = tf_registry_choose(tf_runtime_registry(tp->rt), conf, TF_KIND_TRANSPORT,
				    NULL, -1, &c);
	if (rc)
		return tf_conf_get(conf, "tp", "transport") ? rc
			: tf_diag_prefix(rc, "[tp] transport");
	tp->t = (const tf_plugin_transport *)c->desc;
	return TF_OK;
}

/* Keys that may differ between hosts: the rank, where things are (a host
 * may spell the peers' addresses its own way: the handshake checks who
 * answers), how many threads and how much memory this host gives, its log
 * level and server. */
static bool tp_per_host(const char *section, const char *key)
{
	static const char *const keys[][2] = {
		{ "tp", "rank" }, { "tp", "peers" }, { "model", "path" }, { "plugins", "path" },
		{ "runtime", "threads" }, { "runtime", "memory_limit" },
		{ "runtime", "log_level" },
	};
	if (!strcmp(section, "server"))
		return true;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(section, keys[i][0]) && !strcmp(key, keys[i][1]))
			return true;
	return false;
}

static int tp_cmp_entry(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "<caller's>/conf:<hash>": the caller's fingerprint (the checkpoint's)
 * and a hash of every INI key and override but the per-host ones, in key
 * order, so ranks whose settings differ are refused at the handshake. */
static int tp_fingerprint(const tf_conf *conf, const char *caller, char *out, size_t n)
{
	size_t count = tf_conf_count(conf), m = 0;
	char **lines = calloc(count ? count : 1, sizeof(*lines));
	uint64_t h = 0xcbf29ce484222325ull;
	int rc = lines ? TF_OK : tf_diag_set(TF_ERR_NOMEM, "tp: out of memory");

	for (size_t i = 0; !rc && i < count; i++) {
		const char *sec, *key, *val;
		tf_conf_at(conf, i, &sec, &key, &val);
		if (tp_per_host(sec, key))
			continue;
		size_t len = strlen(sec) + strlen(key) + strlen(val) + 3;
		if (!(lines[m] = malloc(len)))
			rc = tf_diag_set(TF_ERR_NOMEM, "tp: out of memory");
		else
			snprintf(lines[m++], len, "%s.%s=%s", sec, key, val);
	}
	qsort(lines, m, sizeof(*lines), tp_cmp_entry);
	for (size_t i = 0; i < m; i++)
		for (const char *p = lines[i]; ; p++) {
			h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
			if (!*p)
				break;
		}
	for (size_t i = 0; i < m; i++)
		free(lines[i]);
	free(lines);
	if (!rc && (size_t)snprintf(out, n, "%s/conf:%016llx", caller,
				    (unsigned long long)h) >= n)
		rc = tf_diag_set(TF_ERR_INVALID, "tp: fingerprint '%s' is too long", caller);
	return rc;
}

static int tp_connect(tf_tp *tp, const char *fingerprint)
{
	const tf_conf *conf = tf_runtime_conf(tp->rt);
	const tf_host *h = tf_runtime_host(tp->rt);
	double timeout;
	char print[256];
	int rc;

	tp->rank = h->tp_rank;
	tp->size = h->tp_size;
	if (tp->size < 2)
		return tf_conf_fail(conf, TF_ERR_INVALID, "tp", "size",
				    "is %d: a communicator needs two ranks or more", tp->size);
	if ((rc = tf_conf_get_float(conf, "tp", "timeout", TF_TP_DEFAULT_TIMEOUT_S,
				    &timeout)) ||
	    (rc = tp_split_peers(tp, conf)) || (rc = tp_choose(tp, conf)) ||
	    (rc = tp_fingerprint(conf, fingerprint, print, sizeof(print))))
		return rc;
	tf_tp_config cfg = {
		.struct_size = sizeof(cfg),
		.rank = tp->rank,
		.size = tp->size,
		.peers = tp->peers,
		.fingerprint = print,
		.timeout_ms = (int)(timeout * 1000.0 + 0.5),
		.rdma_device = tf_conf_get(conf, "tp", "rdma_device"),
	};
	if ((rc = tp->t->init(h, &tp->inst)))
		return tf_diag_prefix(rc, "transport %s", tp->t->hdr.name);
	return tp->t->connect(tp->inst, &cfg);
}

int tf_tp_open(const char *ini, const char *const *overrides, int n_overrides,
	       const char *fingerprint, tf_tp **out)
{
	tf_tp *tp = calloc(1, sizeof(*tp));
	int rc;

	if (!tp)
		return tf_diag_set(TF_ERR_NOMEM, "tp: out of memory");
	rc = tf_runtime_open_transports(ini, overrides, n_overrides, &tp->rt);
	if (!rc)
		rc = tp_connect(tp, fingerprint ? fingerprint : "");
	if (rc) {
		tf_tp_close(tp);
		return rc;
	}
	*out = tp;
	return TF_OK;
}

void tf_tp_close(tf_tp *tp)
{
	if (!tp)
		return;
	if (tp->inst)
		tp->t->fini(tp->inst);
	tf_runtime_close(tp->rt);
	free(tp->peer_text);
	free(tp);
}

int tf_tp_rank(const tf_tp *tp) { return tp->rank; }
int tf_tp_size(const tf_tp *tp) { return tp->size; }
const char *tf_tp_transport(const tf_tp *tp) { return tp->t->hdr.name; }

const char *tf_tp_peer(const tf_tp *tp, int rank)
{
	return rank >= 0 && rank < tp->size ? tp->peers[rank] : NULL;
}

int tf_tp_all_reduce(tf_tp *tp, void *buf, size_t count, tf_dtype dtype)
{
	if (dtype != TF_DTYPE_F32 && dtype != TF_DTYPE_BF16)
		return tf_diag_set(TF_ERR_UNSUPPORTED, "all_reduce: %s: only f32 and bf16 "
				   "are summed", tf_dtype_name(dtype));
	return tp->t->all_reduce(tp->inst, buf, count, dtype);
}

int tf_tp_all_gather(tf_tp *tp, const void *in, void *out, size_t bytes)
{
	return tp->t->all_gather(tp->inst, in, out, bytes);
}

int tf_tp_broadcast(tf_tp *tp, void *buf, size_t bytes, int root)
{
	if (root < 0 || root >= tp->size)
		return tf_diag_set(TF_ERR_INVALID, "broadcast: root %d is not a rank of %d",
				   root, tp->size);
	return tp->t->broadcast(tp->inst, buf, bytes, root);
}

int tf_tp_barrier(tf_tp *tp) { return tp->t->barrier(tp->inst); }

static void tp_emit_line(void *arg, const char *line)
{
	fprintf(arg, "    %s\n", line);
}

int tf_tp_describe(const char *ini, const char *const *overrides, int n_overrides,
		   FILE *f)
{
	tf_runtime *rt;
	int rc = tf_runtime_open_transports(ini, overrides, n_overrides, &rt);
	if (rc)
		return rc;
	const tf_registry *reg = tf_runtime_registry(rt);
	int n = 0;
	for (size_t i = 0; i < tf_registry_count(reg); i++) {
		const tf_candidate *c = tf_registry_at(reg, i);
		if (c->kind != TF_KIND_TRANSPORT || !c->desc)
			continue;
		const tf_plugin_transport *t = (const tf_plugin_transport *)c->desc;
		n++;
		if (c->status)
			fprintf(f, "transport %s: not usable: %s\n", c->name, c->why);
		else
			fprintf(f, "transport %s: usable (score %d)\n", c->name, c->score);
		if (t->hdr.struct_size >= offsetof(tf_plugin_transport, describe) +
					    sizeof(t->describe) && t->describe)
			t->describe(tf_runtime_host(rt), tp_emit_line, f);
	}
	if (!n)
		fprintf(f, "no transport plugin on the plugin path\n");
	tf_runtime_close(rt);
	return TF_OK;
}

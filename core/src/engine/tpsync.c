/* tpsync.c - see tpsync.h. */
#include "engine/tpsync.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conf/conf.h"
#include "tf/diag.h"
#include "tf/text.h"
#include "model/weights.h"

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull
#define FP_DATA_BYTES 64        /* bytes of each tensor's data in the fingerprint */
#define FP_PATH_MAX 4096
#define FP_CONFIG_MAX (16u << 20)

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * FNV_PRIME;
	return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
	return fnv(h, s, strlen(s) + 1);
}

/* config.json's text and every tensor's name, type, shape and first bytes:
 * a page each, not the whole checkpoint. */
static int fp_checkpoint(const tf_runtime *rt, uint64_t *out)
{
	const tf_weights *w = tf_runtime_weights(rt);
	char dir[FP_PATH_MAX], file[FP_PATH_MAX + 16];
	const char *path;
	char *text = NULL;
	size_t len = 0;
	uint64_t h = FNV_OFFSET;
	int rc = tf_conf_get_path(tf_runtime_conf(rt), "model", "path", dir, sizeof(dir), &path);
	if (rc)
		return rc;
	snprintf(file, sizeof(file), "%s/config.json", path ? path : ".");
	if ((rc = tf_text_read(file, FP_CONFIG_MAX, &text, &len)) != TF_OK)
		return rc;
	h = fnv(h, text, len);
	free(text);
	for (size_t i = 0; w && i < tf_weights_count(w); i++) {
		const tf_tensor *t = tf_weights_at(w, i);
		int32_t dt = t->dtype;
		h = fnv_str(h, t->name);
		h = fnv(h, &dt, sizeof(dt));
		h = fnv(h, t->shape, (size_t)t->ndim * sizeof(t->shape[0]));
		h = fnv(h, t->data, t->nbytes < FP_DATA_BYTES ? t->nbytes : FP_DATA_BYTES);
	}
	*out = h;
	return TF_OK;
}

int tf_tpsync_fingerprint(const tf_runtime *rt, char *out)
{
	uint64_t ck;
	int rc = fp_checkpoint(rt, &ck);
	if (rc)
		return tf_diag_prefix(rc, "tp fingerprint");
	snprintf(out, TF_TPSYNC_FP_LEN, "ckpt:%016" PRIx64, ck);
	return TF_OK;
}

enum { HAS_SEQ = 1, HAS_POS = 2, HAS_OUT = 4 };

/* Bytes of a FORWARD's arrays after the message. */
static size_t payload_bytes(const tf_tpsync_msg *m)
{
	size_t n = (size_t)m->n, per = sizeof(int32_t);
	per += m->has & HAS_SEQ ? sizeof(tf_seq_id) : 0;
	per += m->has & HAS_POS ? sizeof(int32_t) : 0;
	per += m->has & HAS_OUT ? 1 : 0;
	return n * per;
}

static unsigned char *put(unsigned char *p, const void *src, size_t n)
{
	memcpy(p, src, n);
	return p + n;
}

int tf_tpsync_send(tf_tp *tp, tf_tpsync_msg m, const tf_batch *b)
{
	int rc;
	if (m.op == TF_TPSYNC_FORWARD)
		m.has = (b->seq ? HAS_SEQ : 0) | (b->pos ? HAS_POS : 0) | (b->out ? HAS_OUT : 0);
	if ((rc = tf_tp_broadcast(tp, &m, sizeof(m), 0)) != TF_OK)
		return tf_diag_prefix(rc, "sending the call to the other ranks");
	if (m.op != TF_TPSYNC_FORWARD)
		return TF_OK;
	size_t bytes = payload_bytes(&m), n = (size_t)m.n;
	unsigned char *buf = malloc(bytes), *p = buf;
	if (!buf)
		return tf_diag_set(TF_ERR_NOMEM, "tp: out of memory for a batch of %zu tokens", n);
	p = put(p, b->token, n * sizeof(int32_t));
	if (b->seq)
		p = put(p, b->seq, n * sizeof(tf_seq_id));
	if (b->pos)
		p = put(p, b->pos, n * sizeof(int32_t));
	if (b->out)
		put(p, b->out, n);
	rc = tf_tp_broadcast(tp, buf, bytes, 0);
	free(buf);
	return rc == TF_OK ? TF_OK : tf_diag_prefix(rc, "sending the batch to the other ranks");
}

int tf_tpsync_recv(tf_tp *tp, tf_tpsync_msg *m, tf_batch *b, tf_tpsync_buf *buf)
{
	int rc = tf_tp_broadcast(tp, m, sizeof(*m), 0);
	if (rc != TF_OK || m->op != TF_TPSYNC_FORWARD)
		return rc;
	if (m->n < 1 || m->n > INT32_MAX)
		return tf_diag_set(TF_ERR_PEER, "rank 0 sent a batch of %" PRId64 " tokens", m->n);
	size_t bytes = payload_bytes(m), n = (size_t)m->n;
	if (bytes > buf->cap) {
		unsigned char *g = realloc(buf->bytes, bytes);
		if (!g)
			return tf_diag_set(TF_ERR_NOMEM, "tp: out of memory for a batch of %zu tokens",
					   n);
		buf->bytes = g;
		buf->cap = bytes;
	}
	if ((rc = tf_tp_broadcast(tp, buf->bytes, bytes, 0)) != TF_OK)
		return rc;
	unsigned char *p = buf->bytes;
	*b = (tf_batch){ .n = m->n, .token = (const int32_t *)p, .one_seq = m->seq };
	p += n * sizeof(int32_t);
	if (m->has & HAS_SEQ) {
		b->seq = (const tf_seq_id *)p;
		p += n * sizeof(tf_seq_id);
	}
	if (m->has & HAS_POS) {
		b->pos = (const int32_t *)p;
		p += n * sizeof(int32_t);
	}
	if (m->has & HAS_OUT)
		b->out = p;
	return TF_OK;
}

void tf_tpsync_buf_free(tf_tpsync_buf *buf)
{
	free(buf->bytes);
	*buf = (tf_tpsync_buf){ 0 };
}

struct tf_tpsync_beat {
	tf_tp *tp;
	pthread_mutex_t lock;
	pthread_cond_t wake;            /* on CLOCK_MONOTONIC */
	pthread_t thread;
	bool stop, failed;
	double interval, last;          /* seconds; last: the end of the last call or beat */
};

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *beat_main(void *arg)
{
	tf_tpsync_beat *b = arg;
	pthread_mutex_lock(&b->lock);
	while (!b->stop) {
		double due = b->last + b->interval;
		if (mono_s() >= due) {
			if (!b->failed && tf_tpsync_send(b->tp, (tf_tpsync_msg){ .op = TF_TPSYNC_BEAT },
							 NULL) != TF_OK)
				b->failed = true;
			b->last = mono_s();
			continue;
		}
		struct timespec ts = { .tv_sec = (time_t)due,
				       .tv_nsec = (long)((due - (double)(time_t)due) * 1e9) };
		pthread_cond_timedwait(&b->wake, &b->lock, &ts);
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

int tf_tpsync_beat_start(tf_tp *tp, double interval, tf_tpsync_beat **out)
{
	tf_tpsync_beat *b = calloc(1, sizeof(*b));
	pthread_condattr_t ca;
	if (!b)
		return tf_diag_set(TF_ERR_NOMEM, "tp: out of memory");
	*b = (tf_tpsync_beat){ .tp = tp, .interval = interval, .last = mono_s() };
	pthread_mutex_init(&b->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&b->thread, NULL, beat_main, b)) {
		pthread_cond_destroy(&b->wake);
		pthread_mutex_destroy(&b->lock);
		free(b);
		return tf_diag_set(TF_ERR_NOMEM, "tp: cannot start the heartbeat thread");
	}
	*out = b;
	return TF_OK;
}

void tf_tpsync_beat_stop(tf_tpsync_beat *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	b->stop = true;
	pthread_cond_signal(&b->wake);
	pthread_mutex_unlock(&b->lock);
	pthread_join(b->thread, NULL);
	pthread_cond_destroy(&b->wake);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

void tf_tpsync_beat_lock(tf_tpsync_beat *b)
{
	if (b)
		pthread_mutex_lock(&b->lock);
}

void tf_tpsync_beat_unlock(tf_tpsync_beat *b)
{
	if (!b)
		return;
	b->last = mono_s();
	pthread_mutex_unlock(&b->lock);
}

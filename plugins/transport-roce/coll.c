/*
 * coll.c - collectives in rounds of slot writes (coll.h, round.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "coll.h"
#include "sum.h"

void tf_coll_init(tf_coll *c, const tf_link_ops *ops, void *link, uint8_t *send_buf,
		  const uint8_t *recv_buf, int rank, int size, int slots, size_t slot_bytes,
		  int timeout_ms)
{
	memset(c, 0, sizeof(*c));
	c->ops = ops;
	c->link = link;
	c->send_buf = send_buf;
	c->recv_buf = recv_buf;
	c->rank = rank;
	c->size = size;
	c->slots = slots;
	c->slot_bytes = slot_bytes;
	c->timeout_ms = timeout_ms;
	c->peer = -1;
	tf_round_init(&c->round, rank, size);
}

static int fail(tf_coll *c, int peer, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(tf_coll *c, int peer, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	c->peer = peer;
	c->failed = true;
	return -1;
}

static uint8_t *send_slot(tf_coll *c)
{
	return c->send_buf + tf_slot_offset(0, c->k, c->slots, c->slot_bytes);
}

static const uint8_t *recv_slot(const tf_coll *c, int p)
{
	return c->recv_buf + tf_slot_offset(p, c->k, c->slots, c->slot_bytes);
}

/* One round: write send_len bytes of the send slot to every peer and wait
 * for every peer's write and our own, within the timeout.  The slots of
 * round k stay readable until round k + 1 begins. */
static int round_run(tf_coll *c, const char *op, size_t send_len)
{
	char why[256];
	tf_completion wc[16];

	snprintf(c->what, sizeof(c->what), "%s round %u", op, c->k);
	if (c->failed)
		return fail(c, -1, "the communicator failed in an earlier step");
	if (tf_round_begin(&c->round, c->k, c->expect, why, sizeof(why)))
		return fail(c, -1, "%s", why);
	for (int p = 0; p < c->size; p++)
		if (p != c->rank && c->ops->write(c->link, p, c->k, send_len, why, sizeof(why)))
			return fail(c, p, "%s", why);
	int64_t deadline = tf_tp_now_ms() + c->timeout_ms;
	for (unsigned spin = 0; !tf_round_done(&c->round); spin++) {
		int n = c->ops->poll(c->link, wc, 16, why, sizeof(why));
		if (n < 0)
			return fail(c, -1, "%s", why);
		for (int i = 0; i < n; i++)
			if (tf_round_complete(&c->round, &wc[i], why, sizeof(why)))
				return fail(c, wc[i].peer, "%s", why);
		if (!n && !(spin & 1023) && tf_tp_now_ms() > deadline)
			return fail(c, tf_round_pending(&c->round), "did not answer within %d ms "
				    "([tp] timeout)", c->timeout_ms);
	}
	return 0;
}

static void expect_all(tf_coll *c, size_t bytes)
{
	for (int p = 0; p < c->size; p++)
		c->expect[p] = (uint32_t)bytes;
}

int tf_coll_all_reduce(tf_coll *c, void *buf, size_t count, tf_dtype dtype)
{
	size_t es = dtype == TF_DTYPE_F32 ? 4 : 2, per = c->slot_bytes / es;
	size_t rounds = tf_round_count(count, per);
	const void *parts[TF_ROUND_MAX];

	for (size_t r = 0; r < rounds; r++, c->k++) {
		size_t off = r * per, n = count - off < per ? count - off : per;
		uint8_t *mine = (uint8_t *)buf + off * es;
		memcpy(send_slot(c), mine, n * es);
		expect_all(c, n * es);
		if (round_run(c, "all_reduce", n * es))
			return -1;
		for (int p = 0; p < c->size; p++)
			parts[p] = p == c->rank ? mine : recv_slot(c, p);
		if (dtype == TF_DTYPE_F32)
			tf_sum_f32((float *)mine, (const float *const *)parts, c->size, n);
		else
			tf_sum_bf16((uint16_t *)mine, (const uint16_t *const *)parts, c->size, n);
	}
	return 0;
}

int tf_coll_all_gather(tf_coll *c, const void *in, void *out, size_t bytes)
{
	size_t rounds = tf_round_count(bytes, c->slot_bytes);
	uint8_t *mine = (uint8_t *)out + (size_t)c->rank * bytes;

	memmove(mine, in, bytes);
	for (size_t r = 0; r < rounds; r++, c->k++) {
		size_t off = r * c->slot_bytes;
		size_t n = bytes - off < c->slot_bytes ? bytes - off : c->slot_bytes;
		memcpy(send_slot(c), mine + off, n);
		expect_all(c, n);
		if (round_run(c, "all_gather", n))
			return -1;
		for (int p = 0; p < c->size; p++)
			if (p != c->rank)
				memcpy((uint8_t *)out + (size_t)p * bytes + off, recv_slot(c, p), n);
	}
	return 0;
}

/* Every rank writes every round (the others an empty write): a rank's
 * write of round k says it is done with round k - 1, which is what makes
 * slot reuse safe (round.h). */
int tf_coll_broadcast(tf_coll *c, void *buf, size_t bytes, int root)
{
	size_t rounds = tf_round_count(bytes, c->slot_bytes);
	bool me = c->rank == root;

	for (size_t r = 0; r < rounds; r++, c->k++) {
		size_t off = r * c->slot_bytes;
		size_t n = bytes - off < c->slot_bytes ? bytes - off : c->slot_bytes;
		if (me)
			memcpy(send_slot(c), (uint8_t *)buf + off, n);
		expect_all(c, 0);
		c->expect[root] = me ? 0 : (uint32_t)n;
		if (round_run(c, "broadcast", me ? n : 0))
			return -1;
		if (!me)
			memcpy((uint8_t *)buf + off, recv_slot(c, root), n);
	}
	return 0;
}

int tf_coll_barrier(tf_coll *c)
{
	expect_all(c, 0);
	int rc = round_run(c, "barrier", 0);
	c->k++;
	return rc;
}

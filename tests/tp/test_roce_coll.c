/*
 * test_roce_coll.c - the roce transport's collectives (coll.c) over a
 * link of threads and shared memory standing in for the RC queue pairs:
 * a write copies the sender's slot into the peer's receive region, then
 * queues the peer's receive completion (immediate = round) and the
 * sender's send completion, as RDMA write with immediate does.  Slots of
 * 64 bytes make every message many rounds, so the double buffering and the
 * early chunks of round.h run thousands of times.  Results are held to the
 * rank-order reference bit for bit on every rank; a stopped rank, a size
 * disagreement and a failed write fail naming the peer.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "../plugins/transport-roce/coll.h"
#include "tp_case.h"

#define MAX_RANKS 4
#define QCAP 4096
#define SLOT 64
#define SLOTS 2

typedef struct fake_net fake_net;

typedef struct fake_rank {
	fake_net *net;
	int rank;
	uint8_t send_buf[SLOTS * SLOT];
	uint8_t recv_buf[MAX_RANKS * SLOTS * SLOT];
	pthread_mutex_t mu;
	tf_completion q[QCAP];
	unsigned head, tail;
	unsigned polls;
	tf_coll coll;
	/* what the rank's thread does and how it ended */
	void (*job)(struct fake_rank *);
	int rc;
	char msg[512];
} fake_rank;

struct fake_net {
	int size;
	int broken;                     /* writes to this rank fail (-1: none) */
	fake_rank r[MAX_RANKS];
};

static void push(fake_rank *r, tf_completion c)
{
	pthread_mutex_lock(&r->mu);
	cr_assert_lt(r->tail - r->head, QCAP);
	r->q[r->tail++ % QCAP] = c;
	pthread_mutex_unlock(&r->mu);
}

static int fake_write(void *link, int p, uint32_t k, size_t len, char *why, size_t n)
{
	fake_rank *me = link, *peer = &me->net->r[p];
	(void)why;
	(void)n;
	if (p == me->net->broken) {
		push(me, (tf_completion){ .peer = p, .ok = false,
					  .status = "transport retry counter exceeded" });
		return 0;
	}
	memcpy(peer->recv_buf + tf_slot_offset(me->rank, k, SLOTS, SLOT),
	       me->send_buf + tf_slot_offset(0, k, SLOTS, SLOT), len);
	push(peer, (tf_completion){ .peer = me->rank, .recv = true, .ok = true, .imm = k,
				    .len = (uint32_t)len });
	push(me, (tf_completion){ .peer = p, .ok = true });
	return 0;
}

static int fake_poll(void *link, tf_completion *out, int max, char *why, size_t n)
{
	fake_rank *me = link;
	int got = 0;
	(void)why;
	(void)n;
	/* Now and then let the other ranks run ahead. */
	if (!(++me->polls % 7))
		sched_yield();
	pthread_mutex_lock(&me->mu);
	while (got < max && me->head != me->tail)
		out[got++] = me->q[me->head++ % QCAP];
	pthread_mutex_unlock(&me->mu);
	return got;
}

static const tf_link_ops fake_ops = { .write = fake_write, .poll = fake_poll };

static void *thread_main(void *arg)
{
	fake_rank *r = arg;
	r->job(r);
	return NULL;
}

static void run(fake_net *net, int size, void (*job)(fake_rank *), int timeout_ms)
{
	memset(net, 0, sizeof(*net));
	net->size = size;
	net->broken = -1;
	for (int i = 0; i < size; i++) {
		fake_rank *r = &net->r[i];
		r->net = net;
		r->rank = i;
		r->job = job;
		pthread_mutex_init(&r->mu, NULL);
		memset(r->recv_buf, 0xff, sizeof(r->recv_buf));
		tf_coll_init(&r->coll, &fake_ops, r, r->send_buf, r->recv_buf, i, size, SLOTS,
			     SLOT, timeout_ms);
	}
}

static void start(fake_net *net, pthread_t *t)
{
	for (int i = 0; i < net->size; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, thread_main, &net->r[i]), 0);
	for (int i = 0; i < net->size; i++)
		pthread_join(t[i], NULL);
}

static const struct { tf_dtype dt; size_t count; } cases[] = {
	{ TF_DTYPE_F32, 1 }, { TF_DTYPE_F32, 15 }, { TF_DTYPE_F32, 16 }, { TF_DTYPE_F32, 17 },
	{ TF_DTYPE_F32, 2048 }, { TF_DTYPE_BF16, 33 }, { TF_DTYPE_BF16, 4096 },
};

static void note(fake_rank *r, const char *fmt, const char *a)
{
	snprintf(r->msg, sizeof(r->msg), fmt, a);
	r->rc = 1;
}

static void job_collectives(fake_rank *r)
{
	enum { gather = 1000 };
	uint8_t buf[4096 * 4], ref[gather], out[MAX_RANKS * gather];
	char msg[256];
	int size = r->net->size;

	for (int c = 0; c < (int)(sizeof(cases) / sizeof(cases[0])); c++) {
		tp_case_fill(buf, cases[c].dt, 7, c, r->rank, cases[c].count);
		if (tf_coll_all_reduce(&r->coll, buf, cases[c].count, cases[c].dt))
			return note(r, "all_reduce: %s", r->coll.why);
		if (tp_case_check_reduce(buf, cases[c].dt, 7, c, size, cases[c].count, msg,
					 sizeof(msg)))
			return note(r, "%s", msg);
	}
	tp_case_fill(buf, TF_DTYPE_F32, 7, 100, r->rank, gather / 4);
	memset(out, 0xff, sizeof(out));
	if (tf_coll_all_gather(&r->coll, buf, out, gather))
		return note(r, "all_gather: %s", r->coll.why);
	for (int p = 0; p < size; p++) {
		tp_case_fill(ref, TF_DTYPE_F32, 7, 100, p, gather / 4);
		if (memcmp(ref, out + (size_t)p * gather, gather))
			return note(r, "all_gather: %s's slice differs", p ? "a peer" : "rank 0");
	}
	for (int root = 0; root < size; root++) {
		size_t n = 777;
		tp_case_fill(ref, TF_DTYPE_BF16, 7, 200 + root, root, n / 2);
		if (r->rank == root)
			memcpy(buf, ref, n);
		else
			memset(buf, 0xff, n);
		if (tf_coll_broadcast(&r->coll, buf, n, root))
			return note(r, "broadcast: %s", r->coll.why);
		if (memcmp(buf, ref, n - 1))    /* 777 is odd: the fill covers 776 */
			return note(r, "%s", "broadcast: the data differs");
	}
	if (tf_coll_barrier(&r->coll))
		return note(r, "barrier: %s", r->coll.why);
}

static void check_ranks(int size)
{
	fake_net net;
	pthread_t t[MAX_RANKS];
	run(&net, size, job_collectives, 10000);
	start(&net, t);
	for (int i = 0; i < size; i++)
		cr_assert_eq(net.r[i].rc, 0, "rank %d: %s", i, net.r[i].msg);
	/* Every rank went through the same rounds. */
	for (int i = 1; i < size; i++)
		cr_assert_eq(net.r[i].coll.k, net.r[0].coll.k);
	cr_assert_gt(net.r[0].coll.k, 200, "small slots should take many rounds");
}

Test(roce_coll, two_ranks) { check_ranks(2); }
Test(roce_coll, three_ranks) { check_ranks(3); }
Test(roce_coll, four_ranks) { check_ranks(4); }

/* Rank 1 never calls: the others time out naming it. */
static void job_one_reduce_unless_rank1(fake_rank *r)
{
	float buf[100] = { 1.0f };
	if (r->rank == 1)
		return;
	r->rc = tf_coll_all_reduce(&r->coll, buf, 100, TF_DTYPE_F32);
}

Test(roce_coll, stopped_rank_times_out)
{
	fake_net net;
	pthread_t t[MAX_RANKS];
	run(&net, 3, job_one_reduce_unless_rank1, 200);
	start(&net, t);
	for (int i = 0; i < 3; i += 2) {
		tf_coll *c = &net.r[i].coll;
		cr_assert_eq(net.r[i].rc, -1);
		cr_assert_eq(c->peer, 1, "rank %d names rank %d", i, c->peer);
		cr_assert(strstr(c->why, "did not answer within 200 ms"), "%s", c->why);
		cr_assert_str_eq(c->what, "all_reduce round 0");
		/* and the communicator stays failed */
		cr_assert_eq(tf_coll_barrier(c), -1);
		cr_assert(strstr(c->why, "failed in an earlier step"), "%s", c->why);
	}
}

/* Rank 2 reduces 10 floats where the others reduce 16. */
static void job_size_mismatch(fake_rank *r)
{
	float buf[16] = { 0 };
	r->rc = tf_coll_all_reduce(&r->coll, buf, r->rank == 2 ? 10 : 16, TF_DTYPE_F32);
}

Test(roce_coll, size_mismatch_names_the_peer)
{
	fake_net net;
	pthread_t t[MAX_RANKS];
	run(&net, 3, job_size_mismatch, 2000);
	start(&net, t);
	tf_coll *c = &net.r[0].coll;
	cr_assert_eq(net.r[0].rc, -1);
	cr_assert_eq(c->peer, 2);
	cr_assert(strstr(c->why, "rank 2 wrote 40 bytes in round 0, this rank expects 64"),
		  "%s", c->why);
	cr_assert_eq(net.r[2].rc, -1, "rank 2 fails too");
}

static void job_reduce(fake_rank *r)
{
	float buf[100] = { 1.0f };
	r->rc = tf_coll_all_reduce(&r->coll, buf, 100, TF_DTYPE_F32);
}

Test(roce_coll, failed_write_names_the_peer)
{
	fake_net net;
	pthread_t t[MAX_RANKS];
	run(&net, 2, job_reduce, 500);
	net.broken = 1;
	start(&net, t);
	tf_coll *c = &net.r[0].coll;
	cr_assert_eq(net.r[0].rc, -1);
	cr_assert_eq(c->peer, 1);
	cr_assert(strstr(c->why, "the write to rank 1 failed: transport retry counter exceeded"),
		  "%s", c->why);
}

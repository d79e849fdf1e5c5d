/*
 * test_roce_proto.c - the roce transport's protocol logic without RDMA
 * hardware: GID choice from synthetic tables, the queue-pair bootstrap
 * message and its agreement (MTU), the round/slot bookkeeping with early,
 * duplicate, misordered and failed completions; and the tcp handshake
 * message every transport shares.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../plugins/transport-roce/boot.h"
#include "../plugins/transport-roce/gid.h"
#include "../plugins/transport-roce/round.h"
#include "../plugins/transport-tcp/hello.h"

static tf_gid_entry gid(int index, tf_gid_type type, const char *ip)
{
	tf_gid_entry e = { .index = index, .type = type };
	unsigned a, b, c, d;
	if (sscanf(ip, "%u.%u.%u.%u", &a, &b, &c, &d) == 4) {
		e.raw[10] = e.raw[11] = 0xff;
		e.raw[12] = (uint8_t)a, e.raw[13] = (uint8_t)b;
		e.raw[14] = (uint8_t)c, e.raw[15] = (uint8_t)d;
	} else {        /* a link-local IPv6 GID */
		e.raw[0] = 0xfe, e.raw[1] = 0x80, e.raw[15] = (uint8_t)index;
	}
	return e;
}

static uint32_t ip4(unsigned a, unsigned b, unsigned c, unsigned d)
{
	return a << 24 | b << 16 | c << 8 | d;
}

/* A Spark-like table: link-local v1/v2 at 0/1, the IPv4 pair at 2/3, and
 * a second address further on. */
static const tf_gid_entry *spark_table(size_t *n)
{
	static tf_gid_entry t[6];
	t[0] = gid(0, TF_GID_ROCE_V1, "fe80");
	t[1] = gid(1, TF_GID_ROCE_V2, "fe80");
	t[2] = gid(2, TF_GID_ROCE_V1, "192.168.200.13");
	t[3] = gid(3, TF_GID_ROCE_V2, "192.168.200.13");
	t[4] = gid(4, TF_GID_ROCE_V1, "10.0.0.7");
	t[5] = gid(5, TF_GID_ROCE_V2, "10.0.0.7");
	*n = 6;
	return t;
}

Test(roce_gid, picks_roce_v2_of_the_address)
{
	size_t n;
	const tf_gid_entry *t = spark_table(&n);
	char why[256];
	cr_assert_eq(tf_gid_choose(t, n, ip4(192, 168, 200, 13), why, sizeof(why)), 3);
	cr_assert_eq(tf_gid_choose(t, n, ip4(10, 0, 0, 7), why, sizeof(why)), 5);
	/* no address given: the first RoCE v2 IPv4 entry, never link-local */
	cr_assert_eq(tf_gid_choose(t, n, 0, why, sizeof(why)), 3);
}

Test(roce_gid, shifted_indices_follow_the_table)
{
	tf_gid_entry t[3] = { gid(7, TF_GID_ROCE_V2, "10.0.0.7"),
			      gid(8, TF_GID_ROCE_V1, "192.168.200.13"),
			      gid(9, TF_GID_ROCE_V2, "192.168.200.13") };
	char why[256];
	int c = tf_gid_choose(t, 3, ip4(192, 168, 200, 13), why, sizeof(why));
	cr_assert_eq(c, 2);
	cr_assert_eq(t[c].index, 9);
}

Test(roce_gid, refusals_say_why)
{
	tf_gid_entry v1only[2] = { gid(0, TF_GID_ROCE_V1, "fe80"),
				   gid(1, TF_GID_ROCE_V1, "10.1.2.3") };
	char why[256];
	cr_assert_eq(tf_gid_choose(v1only, 2, ip4(10, 1, 2, 3), why, sizeof(why)), -1);
	cr_assert(strstr(why, "10.1.2.3 has only a RoCE v1 GID"), "%s", why);
	size_t n;
	const tf_gid_entry *t = spark_table(&n);
	cr_assert_eq(tf_gid_choose(t, n, ip4(10, 9, 9, 9), why, sizeof(why)), -1);
	cr_assert(strstr(why, "no GID carries 10.9.9.9"), "%s", why);
	cr_assert_eq(tf_gid_choose(t, 0, 0, why, sizeof(why)), -1);
	cr_assert(strstr(why, "empty"), "%s", why);
}

Test(roce_gid, text)
{
	char s[64];
	tf_gid_entry a = gid(3, TF_GID_ROCE_V2, "192.168.200.13"), b = gid(1, TF_GID_IB, "fe80");
	tf_gid_text(a.raw, s, sizeof(s));
	cr_assert_str_eq(s, "::ffff:192.168.200.13");
	tf_gid_text(b.raw, s, sizeof(s));
	cr_assert_str_eq(s, "fe80:0:0:0:0:0:0:1");
	cr_assert_eq(tf_gid_ipv4(b.raw), 0);
	cr_assert_str_eq(tf_gid_type_name(TF_GID_ROCE_V2), "RoCE v2");
}

static tf_boot boot_sample(uint32_t seed)
{
	tf_boot b = { .magic = TF_BOOT_MAGIC, .version = TF_BOOT_VERSION,
		      .qpn = 0x1234 + seed, .psn = 0xabcde ^ seed, .lid = (uint16_t)(7 + seed),
		      .link_eth = 1, .mtu = 5, .rkey = 0xdeadbeef ^ seed,
		      .addr = 0x00007f1234567000ull + seed, .slot_bytes = 1 << 20, .slots = 2 };
	for (int i = 0; i < 16; i++)
		b.gid[i] = (uint8_t)(seed * 31 + (uint32_t)i * 17);
	return b;
}

Test(roce_boot, round_trip)
{
	for (uint32_t s = 0; s < 50; s++) {
		tf_boot a = boot_sample(s * 7919), b;
		uint8_t w[TF_BOOT_BYTES];
		memset(&b, 0xa5, sizeof(b));
		tf_boot_encode(&a, w);
		tf_boot_decode(w, &b);
		cr_assert(a.magic == b.magic && a.version == b.version && a.qpn == b.qpn &&
			  a.psn == b.psn && a.lid == b.lid && a.link_eth == b.link_eth &&
			  a.mtu == b.mtu && a.rkey == b.rkey && a.addr == b.addr &&
			  a.slot_bytes == b.slot_bytes && a.slots == b.slots &&
			  !memcmp(a.gid, b.gid, 16), "sample %u", s);
	}
}

Test(roce_boot, agreement)
{
	tf_boot mine = boot_sample(1), theirs = boot_sample(2);
	char why[256];
	int mtu = -1;
	theirs.mtu = 3;                 /* 1024: the peer's interface MTU is 1500 */
	cr_assert_eq(tf_boot_agree(&mine, &theirs, &mtu, why, sizeof(why)), 0);
	cr_assert_eq(mtu, 3);
	cr_assert_eq(tf_boot_mtu_bytes(mtu), 1024);
	cr_assert_eq(tf_boot_mtu_bytes(5), 4096);
	cr_assert_eq(tf_boot_mtu_bytes(0), 0);

	tf_boot bad = theirs;
	bad.slot_bytes = 4096;
	cr_assert_eq(tf_boot_agree(&mine, &bad, &mtu, why, sizeof(why)), 1);
	cr_assert(strstr(why, "slots of 4096 bytes"), "%s", why);
	bad = theirs;
	bad.link_eth = 0;
	cr_assert_eq(tf_boot_agree(&mine, &bad, &mtu, why, sizeof(why)), 1);
	cr_assert(strstr(why, "InfiniBand"), "%s", why);
	bad = theirs;
	bad.magic = 0;
	cr_assert_eq(tf_boot_agree(&mine, &bad, &mtu, why, sizeof(why)), 1);
	bad = theirs;
	bad.qpn = 1u << 24;
	cr_assert_eq(tf_boot_agree(&mine, &bad, &mtu, why, sizeof(why)), 1);
	bad = theirs;
	bad.mtu = 9;
	cr_assert_eq(tf_boot_agree(&mine, &bad, &mtu, why, sizeof(why)), 1);
}

Test(roce_round, slots_do_not_overlap)
{
	const size_t sb = 4096;
	const int size = 5, slots = 2;
	for (int p = 0; p < size; p++)
		for (uint32_t k = 0; k < 4; k++)
			for (int q = 0; q < size; q++)
				for (uint32_t j = 0; j < 4; j++) {
					size_t a = tf_slot_offset(p, k, slots, sb),
					       b = tf_slot_offset(q, j, slots, sb);
					bool same = p == q && k % 2 == j % 2;
					cr_assert(same ? a == b : (a + sb <= b || b + sb <= a));
				}
	cr_assert_eq(tf_slot_offset(size - 1, 1, slots, sb) + sb, (size_t)size * slots * sb);
	cr_assert_eq(tf_round_count(0, sb), 1);
	cr_assert_eq(tf_round_count(sb, sb), 1);
	cr_assert_eq(tf_round_count(sb + 1, sb), 2);
}

static tf_completion recv_c(int p, uint32_t k, uint32_t len)
{
	return (tf_completion){ .peer = p, .recv = true, .ok = true, .imm = k, .len = len };
}

static tf_completion sent_c(int p)
{
	return (tf_completion){ .peer = p, .recv = false, .ok = true };
}

Test(roce_round, a_round_needs_every_write_both_ways)
{
	tf_round r;
	uint32_t expect[3] = { 64, 64, 64 };
	char why[256];
	tf_round_init(&r, 1, 3);
	cr_assert_eq(tf_round_begin(&r, 0, expect, why, sizeof(why)), 0);
	cr_assert_eq(tf_round_pending(&r), 0);
	tf_completion seq[] = { recv_c(0, 0, 64), sent_c(2), sent_c(0) };
	for (size_t i = 0; i < 3; i++) {
		cr_assert_eq(tf_round_complete(&r, &seq[i], why, sizeof(why)), 0, "%s", why);
		cr_assert(!tf_round_done(&r));
	}
	cr_assert_eq(tf_round_pending(&r), 2);
	tf_completion last = recv_c(2, 0, 64);
	cr_assert_eq(tf_round_complete(&r, &last, why, sizeof(why)), 0, "%s", why);
	cr_assert(tf_round_done(&r));
}

/* Rank 0 finished round 0 and wrote round 1 while rank 1 still waits for
 * rank 2's round-0 chunk: rank 1 keeps it and counts it in round 1. */
Test(roce_round, early_chunk_is_kept)
{
	tf_round r;
	uint32_t e0[3] = { 8, 8, 8 }, e1[3] = { 16, 16, 16 };
	char why[256];
	tf_round_init(&r, 1, 3);
	tf_round_begin(&r, 0, e0, why, sizeof(why));
	tf_completion seq[] = { recv_c(0, 0, 8), sent_c(0), sent_c(2), recv_c(0, 1, 16),
				recv_c(2, 0, 8) };
	for (size_t i = 0; i < 5; i++)
		cr_assert_eq(tf_round_complete(&r, &seq[i], why, sizeof(why)), 0, "%s", why);
	cr_assert(tf_round_done(&r));
	cr_assert_eq(tf_round_begin(&r, 1, e1, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(tf_round_pending(&r), 0, "rank 0's chunk of round 1 is counted");
	tf_completion s0 = sent_c(0);
	tf_round_complete(&r, &s0, why, sizeof(why));
	cr_assert_eq(tf_round_pending(&r), 2);
}

Test(roce_round, disagreements_fail)
{
	tf_round r;
	uint32_t e[2] = { 32, 32 };
	char why[256];
	tf_completion c;

	tf_round_init(&r, 0, 2);
	tf_round_begin(&r, 5, e, why, sizeof(why));
	c = recv_c(1, 6, 32);           /* round 6 before round 5 on one QP */
	cr_assert_eq(tf_round_complete(&r, &c, why, sizeof(why)), 1);
	cr_assert(strstr(why, "rank 1 wrote a chunk of round 6 while this rank is in round 5"),
		  "%s", why);

	tf_round_begin(&r, 5, e, why, sizeof(why));
	c = recv_c(1, 5, 31);
	cr_assert_eq(tf_round_complete(&r, &c, why, sizeof(why)), 1);
	cr_assert(strstr(why, "rank 1 wrote 31 bytes in round 5, this rank expects 32"),
		  "%s", why);

	tf_round_begin(&r, 5, e, why, sizeof(why));
	c = recv_c(1, 5, 32);
	tf_round_complete(&r, &c, why, sizeof(why));
	c = recv_c(1, 5, 32);
	cr_assert_eq(tf_round_complete(&r, &c, why, sizeof(why)), 1, "a duplicate");

	tf_round_begin(&r, 5, e, why, sizeof(why));
	c = (tf_completion){ .peer = 1, .ok = false, .status = "transport retry counter exceeded" };
	cr_assert_eq(tf_round_complete(&r, &c, why, sizeof(why)), 1);
	cr_assert(strstr(why, "the write to rank 1 failed: transport retry counter exceeded"),
		  "%s", why);
	c = sent_c(0);
	cr_assert_eq(tf_round_complete(&r, &c, why, sizeof(why)), 1, "not a peer");
}

Test(tcp_hello, round_trip_and_checks)
{
	tf_hello a = { .magic = TF_HELLO_MAGIC, .abi_major = 1, .abi_minor = 6, .rank = 0,
		       .size = 3 }, b, c;
	uint8_t w[TF_HELLO_BYTES];
	bool taken[3] = { true, false, false };
	char why[TF_HELLO_TEXT];

	memset(a.fingerprint, 'x', sizeof(a.fingerprint));      /* no NUL: clipped */
	a.fingerprint[sizeof(a.fingerprint) - 1] = 'x';
	tf_hello_encode(&a, w);
	tf_hello_decode(w, &b);
	cr_assert_eq(strlen(b.fingerprint), TF_HELLO_TEXT - 1);
	snprintf(a.fingerprint, sizeof(a.fingerprint), "ckpt-1");
	c = a;
	c.rank = 2;
	cr_assert_eq(tf_hello_check(&a, &c, -1, taken, why, sizeof(why)), 0);
	taken[2] = true;
	cr_assert_eq(tf_hello_check(&a, &c, -1, taken, why, sizeof(why)), 1);
	cr_assert(strstr(why, "rank 2 connected twice"), "%s", why);
	c.rank = 0;
	cr_assert_eq(tf_hello_check(&a, &c, -1, taken, why, sizeof(why)), 1);
	c.rank = 1;
	cr_assert_eq(tf_hello_check(&a, &c, 2, NULL, why, sizeof(why)), 1);
	cr_assert(strstr(why, "answers as rank 1 where [tp] peers lists rank 2"), "%s", why);
	c.abi_major = 2;
	cr_assert_eq(tf_hello_check(&a, &c, 1, NULL, why, sizeof(why)), 1);
	cr_assert(strstr(why, "ABI 2.6"), "%s", why);
	c = a;
	c.magic = 0x47455420;           /* "GET ": an HTTP client on the port */
	cr_assert_eq(tf_hello_check(&a, &c, 0, NULL, why, sizeof(why)), 1);
	cr_assert(strstr(why, "not a TensorFold rank"), "%s", why);
}

/* A fingerprint refusal says which half differs: the caller's (the
 * checkpoint's) before the last '/', the settings' "conf:<hash>" after. */
Test(tcp_hello, fingerprint_refusal_names_the_half)
{
	static const struct {
		const char *theirs, *want;
	} cases[] = {
		{ "ckpt:2/conf:a", "their checkpoints differ" },
		{ "ckpt:1/conf:b", "their settings differ (other INI keys or --set overrides)" },
		{ "ckpt:22/conf:b", "their checkpoints differ, and their settings" },
		{ "ckpt:1", "their settings differ" },
	};
	tf_hello a = { .magic = TF_HELLO_MAGIC, .abi_major = 1, .rank = 0, .size = 2 }, b;
	char why[TF_HELLO_TEXT];

	snprintf(a.fingerprint, sizeof(a.fingerprint), "ckpt:1/conf:a");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		b = a;
		b.rank = 1;
		snprintf(b.fingerprint, sizeof(b.fingerprint), "%s", cases[i].theirs);
		why[0] = '\0';
		cr_assert_eq(tf_hello_check(&a, &b, 1, NULL, why, sizeof(why)), 1, "%zu", i);
		cr_assert(strstr(why, "rank 1 has fingerprint '") && strstr(why, cases[i].want),
			  "case %zu: %s", i, why);
		if (i == 0)
			cr_assert_null(strstr(why, "settings"), "%s", why);
	}
}

/*
 * round.c - the bookkeeping of round.h.
 */
#include <stdio.h>
#include <string.h>

#include "round.h"

size_t tf_slot_offset(int peer, uint32_t k, int slots, size_t slot_bytes)
{
	return ((size_t)peer * (size_t)slots + k % (uint32_t)slots) * slot_bytes;
}

size_t tf_round_count(size_t bytes, size_t slot_bytes)
{
	return bytes ? (bytes + slot_bytes - 1) / slot_bytes : 1;
}

void tf_round_init(tf_round *r, int rank, int size)
{
	memset(r, 0, sizeof(*r));
	r->rank = rank;
	r->size = size;
}

static int check_len(const tf_round *r, int peer, uint32_t len, char *why, size_t n)
{
	if (len == r->expect[peer])
		return 0;
	snprintf(why, n, "rank %d wrote %u bytes in round %u, this rank expects %u (the "
		 "ranks disagree on the collective or its size?)", peer, len, r->k,
		 r->expect[peer]);
	return 1;
}

int tf_round_begin(tf_round *r, uint32_t k, const uint32_t *expect, char *why, size_t n)
{
	r->k = k;
	r->expect = expect;
	for (int p = 0; p < r->size; p++) {
		r->got[p] = r->sent[p] = p == r->rank;
		if (r->ahead[p]) {
			r->ahead[p] = false;
			r->got[p] = true;
			if (check_len(r, p, r->ahead_len[p], why, n))
				return 1;
		}
	}
	return 0;
}

int tf_round_complete(tf_round *r, const tf_completion *c, char *why, size_t n)
{
	int p = c->peer;
	if (p < 0 || p >= r->size || p == r->rank) {
		snprintf(why, n, "a completion from no peer (%d)", p);
		return 1;
	}
	if (!c->ok) {
		snprintf(why, n, "%s rank %d failed: %s", c->recv ? "a write from" : "the write to",
			 p, c->status ? c->status : "unknown status");
		return 1;
	}
	if (!c->recv) {
		if (r->sent[p]) {
			snprintf(why, n, "two write completions for rank %d in round %u", p, r->k);
			return 1;
		}
		r->sent[p] = true;
		return 0;
	}
	/* RC keeps a queue pair's writes in order: chunk k+1 after chunk k. */
	if (c->imm == r->k + 1 && r->got[p] && !r->ahead[p]) {
		r->ahead[p] = true;
		r->ahead_len[p] = c->len;
		return 0;
	}
	if (c->imm != r->k || r->got[p]) {
		snprintf(why, n, "rank %d wrote a chunk of round %u while this rank is in "
			 "round %u%s", p, c->imm, r->k, r->got[p] ? " and has its chunk" : "");
		return 1;
	}
	r->got[p] = true;
	return check_len(r, p, c->len, why, n);
}

bool tf_round_done(const tf_round *r)
{
	return tf_round_pending(r) < 0;
}

int tf_round_pending(const tf_round *r)
{
	for (int p = 0; p < r->size; p++)
		if (!r->got[p] || !r->sent[p])
			return p;
	return -1;
}

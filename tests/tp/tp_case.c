/*
 * tp_case.c - the collective checks of one rank (tp_case.h).
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tf/dtype.h"
#include "tf/engine.h"
#include "tp_case.h"

int tp_case_open(int rank, int size, const char *peers, const char *fingerprint,
		 double timeout_s, const char *transport, const char *extra, tf_tp **out)
{
	char set[5][1024];
	const char *sets[6];
	snprintf(set[0], sizeof(set[0]), "tp.size=%d", size);
	snprintf(set[1], sizeof(set[1]), "tp.rank=%d", rank);
	snprintf(set[2], sizeof(set[2]), "tp.peers=%s", peers);
	snprintf(set[3], sizeof(set[3]), "tp.timeout=%g", timeout_s);
	snprintf(set[4], sizeof(set[4]), "tp.transport=%s", transport);
	for (int i = 0; i < 5; i++)
		sets[i] = set[i];
	sets[5] = extra;
	return tf_tp_open(NULL, sets, extra ? 6 : 5, fingerprint, out);
}

/* Bind port 0 for each rank at once, so the ports differ; then free them. */
void tp_case_local_peers(int size, char *out, size_t n)
{
	int fd[16];
	size_t len = 0;
	out[0] = '\0';
	for (int r = 0; r < size && r < 16; r++) {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t sl = sizeof(a);
		fd[r] = socket(AF_INET, SOCK_STREAM, 0);
		bind(fd[r], (struct sockaddr *)&a, sizeof(a));
		getsockname(fd[r], (struct sockaddr *)&a, &sl);
		len += (size_t)snprintf(out + len, n - len, "%s127.0.0.1:%d", r ? "," : "",
					ntohs(a.sin_port));
	}
	for (int r = 0; r < size && r < 16; r++)
		close(fd[r]);
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Element i of rank r's input to case c: uniform in [-4, 4), never all 0. */
static float input(uint64_t seed, int c, int r, size_t i)
{
	uint64_t u = mix(seed ^ mix((uint64_t)c << 40 ^ (uint64_t)r << 32 ^ i));
	return (float)((double)(u >> 11) / 9007199254740992.0 * 8.0 - 4.0);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
	return h;
}

void tp_case_fill(void *buf, tf_dtype dt, uint64_t seed, int c, int r, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		float v = input(seed, c, r, i);
		if (dt == TF_DTYPE_F32)
			((float *)buf)[i] = v;
		else
			((uint16_t *)buf)[i] = tf_f32_to_bf16(v);
	}
}

int tp_case_check_reduce(const void *got, tf_dtype dt, uint64_t seed, int c, int size,
			size_t count, char *msg, size_t n)
{
	for (size_t i = 0; i < count; i++) {
		float s = 0.0f;
		for (int r = 0; r < size; r++) {
			float v = input(seed, c, r, i);
			v = dt == TF_DTYPE_F32 ? v : tf_bf16_to_f32(tf_f32_to_bf16(v));
			s = r ? s + v : v;
		}
		uint32_t want = dt == TF_DTYPE_F32 ? tf_f32_bits(s) : tf_f32_to_bf16(s);
		uint32_t have = dt == TF_DTYPE_F32 ? tf_f32_bits(((const float *)got)[i])
						   : ((const uint16_t *)got)[i];
		if (want != have) {
			snprintf(msg, n, "all_reduce case %d (%s, %zu elements): element %zu is "
				 "0x%x, the rank-order sum 0x%x", c, tf_dtype_name(dt), count, i,
				 have, want);
			return TF_ERR_INTERNAL;
		}
	}
	return TF_OK;
}

static int tp_errmsg(int rc, char *msg, size_t n)
{
	snprintf(msg, n, "%s", tf_engine_errmsg());
	return rc;
}

static const struct { tf_dtype dt; size_t count; } reduce_cases[] = {
	{ TF_DTYPE_F32, 1 }, { TF_DTYPE_F32, 7 }, { TF_DTYPE_F32, 2048 },
	{ TF_DTYPE_BF16, 4096 }, { TF_DTYPE_BF16, 33 }, { TF_DTYPE_F32, 262147 },
	{ TF_DTYPE_BF16, 1 << 20 },
};

int tp_case_collectives(tf_tp *tp, uint64_t seed, char digest[17], char *msg, size_t n)
{
	int rank = tf_tp_rank(tp), size = tf_tp_size(tp), rc = TF_OK;
	size_t max = 1 << 20, gather = 1000;
	uint8_t *buf = malloc(max * 4), *out = malloc(gather * 4 * (size_t)size);
	uint64_t h = 0xcbf29ce484222325ull;

	if (!buf || !out) {
		snprintf(msg, n, "out of memory");
		rc = TF_ERR_NOMEM;
		goto done;
	}
	for (int c = 0; c < (int)(sizeof(reduce_cases) / sizeof(reduce_cases[0])); c++) {
		tf_dtype dt = reduce_cases[c].dt;
		size_t count = reduce_cases[c].count, es = dt == TF_DTYPE_F32 ? 4 : 2;
		tp_case_fill(buf, dt, seed, c, rank, count);
		if ((rc = tf_tp_all_reduce(tp, buf, count, dt)))
			goto fail;
		if ((rc = tp_case_check_reduce(buf, dt, seed, c, size, count, msg, n)))
			goto done;
		h = fnv(h, buf, count * es);
	}

	/* all_gather into a poisoned buffer: every rank's slice must land. */
	tp_case_fill(buf, TF_DTYPE_F32, seed, 100, rank, gather);
	memset(out, 0xff, gather * 4 * (size_t)size);
	if ((rc = tf_tp_all_gather(tp, buf, out, gather * 4)))
		goto fail;
	for (int r = 0; r < size; r++) {
		tp_case_fill(buf, TF_DTYPE_F32, seed, 100, r, gather);
		if (memcmp(buf, out + (size_t)r * gather * 4, gather * 4)) {
			snprintf(msg, n, "all_gather: rank %d's slice differs", r);
			rc = TF_ERR_INTERNAL;
			goto done;
		}
	}
	h = fnv(h, out, gather * 4 * (size_t)size);

	/* broadcast from each root into poisoned buffers. */
	for (int root = 0; root < size; root++) {
		if (rank == root)
			tp_case_fill(buf, TF_DTYPE_F32, seed, 200 + root, root, gather);
		else
			memset(buf, 0xff, gather * 4);
		if ((rc = tf_tp_broadcast(tp, buf, gather * 4, root)))
			goto fail;
		tp_case_fill(out, TF_DTYPE_F32, seed, 200 + root, root, gather);
		if (memcmp(buf, out, gather * 4)) {
			snprintf(msg, n, "broadcast from rank %d: the data differs", root);
			rc = TF_ERR_INTERNAL;
			goto done;
		}
		h = fnv(h, buf, gather * 4);
	}
	if ((rc = tf_tp_barrier(tp)))
		goto fail;
	snprintf(digest, 17, "%016llx", (unsigned long long)h);
	goto done;
fail:
	tp_errmsg(rc, msg, n);
done:
	free(buf);
	free(out);
	return rc;
}

/*
 * hello.c - encode, decode and check the handshake message.
 */
#include <stdio.h>
#include <string.h>

#include "hello.h"
#include "wire.h"

/* A text field always ends in NUL on the wire and after decoding. */
static uint8_t *put_text(uint8_t *p, const char *s)
{
	memset(p, 0, TF_HELLO_TEXT);
	memcpy(p, s, strnlen(s, TF_HELLO_TEXT - 1));
	return p + TF_HELLO_TEXT;
}

static void get_text(const uint8_t **p, char *s)
{
	memcpy(s, *p, TF_HELLO_TEXT);
	s[TF_HELLO_TEXT - 1] = '\0';
	*p += TF_HELLO_TEXT;
}

void tf_hello_encode(const tf_hello *m, uint8_t out[TF_HELLO_BYTES])
{
	uint8_t *p = tf_put32(out, m->magic);
	p = tf_put16(p, m->abi_major);
	p = tf_put16(p, m->abi_minor);
	p = tf_put32(p, (uint32_t)m->rank);
	p = tf_put32(p, (uint32_t)m->size);
	p = tf_put32(p, (uint32_t)m->status);
	p = put_text(p, m->fingerprint);
	put_text(p, m->reason);
}

void tf_hello_decode(const uint8_t in[TF_HELLO_BYTES], tf_hello *m)
{
	const uint8_t *p = in;
	m->magic = tf_get32(&p);
	m->abi_major = tf_get16(&p);
	m->abi_minor = tf_get16(&p);
	m->rank = (int32_t)tf_get32(&p);
	m->size = (int32_t)tf_get32(&p);
	m->status = (int32_t)tf_get32(&p);
	get_text(&p, m->fingerprint);
	get_text(&p, m->reason);
}

/* Which half of two differing fingerprints differs: tf/tp.h makes them
 * "<caller's, the checkpoint's>/conf:<hash of the settings>". */
static const char *hello_differs(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
	size_t la = sa ? (size_t)(sa - a) : strlen(a), lb = sb ? (size_t)(sb - b) : strlen(b);
	bool ckpt = la != lb || strncmp(a, b, la);
	bool conf = strcmp(sa ? sa : "", sb ? sb : "") != 0;

	if (ckpt && conf)
		return "their checkpoints differ, and their settings (INI keys or --set overrides)";
	return ckpt ? "their checkpoints differ"
		    : "their settings differ (other INI keys or --set overrides)";
}

int tf_hello_check(const tf_hello *mine, const tf_hello *theirs, int expect,
		   const bool *taken, char *why, size_t why_size)
{
	int t = theirs->rank, me = mine->rank;
	if (theirs->magic != TF_HELLO_MAGIC)
		snprintf(why, why_size, "the peer is not a TensorFold rank (magic 0x%08x)",
			 theirs->magic);
	else if (theirs->abi_major != mine->abi_major)
		snprintf(why, why_size, "rank %d is built for plugin ABI %u.%u, rank %d for "
			 "%u.%u", t, theirs->abi_major, theirs->abi_minor, me,
			 mine->abi_major, mine->abi_minor);
	else if (theirs->size != mine->size)
		snprintf(why, why_size, "rank %d has [tp] size %d, rank %d has size %d", t,
			 theirs->size, me, mine->size);
	else if (expect >= 0 && t != expect)
		snprintf(why, why_size, "the peer answers as rank %d where [tp] peers lists "
			 "rank %d", t, expect);
	else if (expect < 0 && (t <= me || t >= mine->size))
		snprintf(why, why_size, "a peer says it is rank %d, but only ranks %d..%d "
			 "connect to rank %d", t, me + 1, mine->size - 1, me);
	else if (expect < 0 && taken[t])
		snprintf(why, why_size, "rank %d connected twice (the same rank started "
			 "twice?)", t);
	else if (strcmp(theirs->fingerprint, mine->fingerprint))
		snprintf(why, why_size, "rank %d has fingerprint '%.64s', rank %d '%.64s': %s",
			 t, theirs->fingerprint, me, mine->fingerprint,
			 hello_differs(theirs->fingerprint, mine->fingerprint));
	else
		return 0;
	return 1;
}

/* strmap.c - byte-string hash map: dense entries, open-addressed index. */
#include <stdlib.h>
#include <string.h>

#include "strmap.h"
#include "tf/error.h"

/* FNV-1a over 8-byte words, then a final avalanche (from murmur3): fast on
 * the short keys of a vocabulary and well spread in the low bits we mask. */
static uint32_t hash_bytes(const void *key, size_t len)
{
	const uint8_t *p = key;
	uint64_t h = 0xcbf29ce484222325ull, w;

	for (; len >= 8; p += 8, len -= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0x100000001b3ull;
	}
	for (; len; p++, len--)
		h = (h ^ *p) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (uint32_t)h;
}

static int grow_index(tf_strmap *m, size_t size)
{
	int32_t *idx = malloc(size * sizeof(*idx));
	size_t i, j;

	if (!idx)
		return TF_ERR_NOMEM;
	memset(idx, 0xff, size * sizeof(*idx));
	for (i = 0; i < m->n; i++) {
		for (j = m->entries[i].hash & (size - 1); idx[j] >= 0; j = (j + 1) & (size - 1))
			;
		idx[j] = (int32_t)i;
	}
	free(m->index);
	m->index = idx;
	m->mask = size - 1;
	return TF_OK;
}

int tf_strmap_init(tf_strmap *m, size_t expected)
{
	size_t size = 16;

	memset(m, 0, sizeof(*m));
	while (size < 2 * expected)
		size *= 2;
	m->arena_cap = 4096;
	m->arena = malloc(m->arena_cap);
	if (!m->arena)
		return TF_ERR_NOMEM;
	return grow_index(m, size);
}

void tf_strmap_free(tf_strmap *m)
{
	free(m->entries);
	free(m->index);
	free(m->arena);
	memset(m, 0, sizeof(*m));
}

static int32_t find(const tf_strmap *m, const void *key, size_t len, uint32_t h, size_t *slot)
{
	size_t j;

	for (j = h & m->mask; m->index[j] >= 0; j = (j + 1) & m->mask) {
		const tf_strmap_entry *e = &m->entries[m->index[j]];

		if (e->hash == h && e->len == len && !memcmp(m->arena + e->off, key, len))
			break;
	}
	*slot = j;
	return m->index[j];
}

int32_t tf_strmap_get(const tf_strmap *m, const void *key, size_t len)
{
	size_t slot;
	int32_t i;

	if (!m->index)
		return -1;
	i = find(m, key, len, hash_bytes(key, len), &slot);
	return i < 0 ? -1 : m->entries[i].val;
}

int32_t *tf_strmap_slot(tf_strmap *m, const void *key, size_t len, int32_t init, int *added)
{
	uint32_t h = hash_bytes(key, len);
	tf_strmap_entry *e;
	size_t slot;
	int32_t i;

	if (added)
		*added = 0;
	if (len > UINT32_MAX || m->n >= INT32_MAX - 1)
		return NULL;
	i = find(m, key, len, h, &slot);
	if (i >= 0)
		return &m->entries[i].val;
	if (2 * (m->n + 1) > m->mask + 1) {
		if (grow_index(m, 2 * (m->mask + 1)))
			return NULL;
		find(m, key, len, h, &slot);
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 64;

		e = realloc(m->entries, cap * sizeof(*e));
		if (!e)
			return NULL;
		m->entries = e;
		m->cap = cap;
	}
	if (m->arena_len + len > m->arena_cap) {
		size_t cap = m->arena_cap;
		char *a;

		while (cap < m->arena_len + len)
			cap *= 2;
		a = realloc(m->arena, cap);
		if (!a)
			return NULL;
		m->arena = a;
		m->arena_cap = cap;
	}
	if (len)
		memcpy(m->arena + m->arena_len, key, len);
	e = &m->entries[m->n];
	*e = (tf_strmap_entry){ .off = m->arena_len, .len = (uint32_t)len, .hash = h, .val = init };
	m->arena_len += len;
	m->index[slot] = (int32_t)m->n++;
	if (added)
		*added = 1;
	return &e->val;
}

/*
 * strmap.h - a hash map from byte strings to int32 values.
 *
 * Open addressing over an index table, entries kept dense in insertion order
 * (so iteration is deterministic) and keys copied into one arena.  cJSON's
 * object lookup is a linear scan; vocabularies of 150k tokens need this.
 */
#ifndef TF_STRMAP_H
#define TF_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct tf_strmap_entry {
	size_t off;             /* key bytes at arena + off */
	uint32_t len;
	uint32_t hash;
	int32_t val;
} tf_strmap_entry;

typedef struct tf_strmap {
	tf_strmap_entry *entries;
	size_t n, cap;
	int32_t *index;         /* -1 empty, else entry number */
	size_t mask;            /* index size - 1 */
	char *arena;
	size_t arena_len, arena_cap;
} tf_strmap;

/* Sized for about `expected` keys; returns a tf_status. */
int tf_strmap_init(tf_strmap *m, size_t expected);
void tf_strmap_free(tf_strmap *m);
/* The value slot for key, inserted as `init` when absent (*added set then).
 * The pointer stays valid until the next insertion.  NULL: out of memory. */
int32_t *tf_strmap_slot(tf_strmap *m, const void *key, size_t len, int32_t init, int *added);
/* The value for key, or -1 when absent. */
int32_t tf_strmap_get(const tf_strmap *m, const void *key, size_t len);
static inline const char *tf_strmap_key(const tf_strmap *m, size_t i)
{
	return m->arena + m->entries[i].off;
}

#endif /* TF_STRMAP_H */

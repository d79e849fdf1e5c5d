/*
 * gid.h - which GID a RoCE queue pair addresses its peer with.
 *
 * A port's GID table holds, per network address, entries of each type (IB,
 * RoCE v1, RoCE v2); the index of the RoCE v2 one for an IPv4 address moves
 * as addresses come and go (often 3 on a DGX Spark, never to be assumed).
 * tf_gid_choose picks the RoCE v2 entry carrying this rank's IPv4 address
 * (::ffff:a.b.c.d); without an address, the first RoCE v2 IPv4 entry.  The
 * table comes from the device (verbs.c) or, in tests, from a literal.
 */
#ifndef TF_ROCE_GID_H
#define TF_ROCE_GID_H

#include <stddef.h>
#include <stdint.h>

typedef enum tf_gid_type { TF_GID_IB = 0, TF_GID_ROCE_V1, TF_GID_ROCE_V2 } tf_gid_type;

typedef struct tf_gid_entry {
	int index;
	tf_gid_type type;
	uint8_t raw[16];
} tf_gid_entry;

/* "RoCE v2", "RoCE v1", "IB". */
const char *tf_gid_type_name(tf_gid_type t);

/* The GID as text: "::ffff:10.0.0.1" for IPv4-mapped, else the full
 * eight groups. */
void tf_gid_text(const uint8_t raw[16], char *out, size_t n);

/* The IPv4 address (host order) a GID carries, or 0 when it is not
 * IPv4-mapped. */
uint32_t tf_gid_ipv4(const uint8_t raw[16]);

/* The chosen entry's position in t, or -1 with the reason (naming the
 * address and what the table holds) in why.  ipv4 0: any IPv4 entry. */
int tf_gid_choose(const tf_gid_entry *t, size_t n, uint32_t ipv4, char *why, size_t why_n);

#endif /* TF_ROCE_GID_H */

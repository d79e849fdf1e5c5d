/*
 * gid.c - GID text and the RoCE v2 choice.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gid.h"

const char *tf_gid_type_name(tf_gid_type t)
{
	return t == TF_GID_ROCE_V2 ? "RoCE v2" : t == TF_GID_ROCE_V1 ? "RoCE v1" : "IB";
}

uint32_t tf_gid_ipv4(const uint8_t raw[16])
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (memcmp(raw, prefix, sizeof(prefix)))
		return 0;
	return (uint32_t)raw[12] << 24 | (uint32_t)raw[13] << 16 | (uint32_t)raw[14] << 8 |
	       raw[15];
}

static void ipv4_text(uint32_t a, char *out, size_t n)
{
	snprintf(out, n, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

void tf_gid_text(const uint8_t raw[16], char *out, size_t n)
{
	uint32_t a = tf_gid_ipv4(raw);
	if (a) {
		char ip[16];
		ipv4_text(a, ip, sizeof(ip));
		snprintf(out, n, "::ffff:%s", ip);
		return;
	}
	snprintf(out, n, "%x:%x:%x:%x:%x:%x:%x:%x", raw[0] << 8 | raw[1], raw[2] << 8 | raw[3],
		 raw[4] << 8 | raw[5], raw[6] << 8 | raw[7], raw[8] << 8 | raw[9],
		 raw[10] << 8 | raw[11], raw[12] << 8 | raw[13], raw[14] << 8 | raw[15]);
}

int tf_gid_choose(const tf_gid_entry *t, size_t n, uint32_t ipv4, char *why, size_t why_n)
{
	bool v1_match = false;
	char ip[16] = "any IPv4 address";

	if (ipv4)
		ipv4_text(ipv4, ip, sizeof(ip));
	for (size_t i = 0; i < n; i++) {
		uint32_t a = tf_gid_ipv4(t[i].raw);
		if (!a || (ipv4 && a != ipv4))
			continue;
		if (t[i].type == TF_GID_ROCE_V2)
			return (int)i;
		v1_match = true;
	}
	if (!n)
		snprintf(why, why_n, "the GID table is empty: the interface has no address");
	else if (v1_match)
		snprintf(why, why_n, "%s has only a RoCE v1 GID; RoCE v2 is needed (is the "
			 "interface's RoCE mode v1?)", ip);
	else
		snprintf(why, why_n, "no GID carries %s: is the address on this port's "
			 "interface?", ip);
	return -1;
}

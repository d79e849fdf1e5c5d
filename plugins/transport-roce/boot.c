/*
 * boot.c - the queue-pair bootstrap message.
 */
#include <stdio.h>
#include <string.h>

#include "boot.h"
#include "wire.h"

void tf_boot_encode(const tf_boot *b, uint8_t out[TF_BOOT_BYTES])
{
	uint8_t *p = tf_put32(out, b->magic);
	p = tf_put32(p, b->version);
	p = tf_put32(p, b->qpn);
	p = tf_put32(p, b->psn);
	p = tf_put16(p, b->lid);
	*p++ = b->link_eth;
	*p++ = b->mtu;
	memcpy(p, b->gid, 16);
	p = tf_put32(p + 16, b->rkey);
	p = tf_put64(p, b->addr);
	p = tf_put64(p, b->slot_bytes);
	p = tf_put32(p, b->slots);
	memset(p, 0, (size_t)(out + TF_BOOT_BYTES - p));
}

void tf_boot_decode(const uint8_t in[TF_BOOT_BYTES], tf_boot *b)
{
	const uint8_t *p = in;
	b->magic = tf_get32(&p);
	b->version = tf_get32(&p);
	b->qpn = tf_get32(&p);
	b->psn = tf_get32(&p);
	b->lid = tf_get16(&p);
	b->link_eth = *p++;
	b->mtu = *p++;
	memcpy(b->gid, p, 16);
	p += 16;
	b->rkey = tf_get32(&p);
	b->addr = tf_get64(&p);
	b->slot_bytes = tf_get64(&p);
	b->slots = tf_get32(&p);
}

int tf_boot_mtu_bytes(int mtu)
{
	return mtu >= 1 && mtu <= 5 ? 128 << mtu : 0;
}

int tf_boot_agree(const tf_boot *mine, const tf_boot *theirs, int *mtu, char *why,
		  size_t why_n)
{
	if (theirs->magic != TF_BOOT_MAGIC || theirs->version != TF_BOOT_VERSION)
		snprintf(why, why_n, "sent no roce bootstrap (magic 0x%08x version %u)",
			 theirs->magic, theirs->version);
	else if (theirs->link_eth != mine->link_eth)
		snprintf(why, why_n, "is on %s, this rank on %s",
			 theirs->link_eth ? "Ethernet (RoCE)" : "InfiniBand",
			 mine->link_eth ? "Ethernet (RoCE)" : "InfiniBand");
	else if (!tf_boot_mtu_bytes(theirs->mtu))
		snprintf(why, why_n, "reports an invalid MTU code %u", theirs->mtu);
	else if (theirs->slot_bytes != mine->slot_bytes || theirs->slots != mine->slots)
		snprintf(why, why_n, "has %u slots of %llu bytes, this rank %u of %llu",
			 theirs->slots, (unsigned long long)theirs->slot_bytes, mine->slots,
			 (unsigned long long)mine->slot_bytes);
	else if (theirs->qpn == 0 || theirs->qpn > 0xffffff || theirs->psn > 0xffffff)
		snprintf(why, why_n, "sent queue pair %u, packet number %u: out of range",
			 theirs->qpn, theirs->psn);
	else {
		*mtu = theirs->mtu < mine->mtu ? theirs->mtu : mine->mtu;
		return 0;
	}
	return 1;
}

/*
 * boot.h - what two ranks tell each other to connect a queue pair.
 *
 * Sent over the tcp control channel (the mesh's bootstrap exchange), one
 * message each way per pair: the queue pair number and starting packet
 * number, the port's LID (InfiniBand) or GID (RoCE), its active MTU, and
 * the remote key and address of the receive region the peer may write
 * into.  tf_boot_agree checks the pair can talk and settles the MTU both
 * use: the smaller active one.
 */
#ifndef TF_ROCE_BOOT_H
#define TF_ROCE_BOOT_H

#include <stddef.h>
#include <stdint.h>

#define TF_BOOT_MAGIC 0x45434f52u       /* "ROCE" */
#define TF_BOOT_VERSION 1
#define TF_BOOT_BYTES 72

typedef struct tf_boot {
	uint32_t magic, version;
	uint32_t qpn, psn;              /* psn: 24 bits */
	uint16_t lid;
	uint8_t link_eth;               /* 1: RoCE (GID), 0: InfiniBand (LID) */
	uint8_t mtu;                    /* enum ibv_mtu: 1 = 256 ... 5 = 4096 */
	uint8_t gid[16];
	uint32_t rkey;
	uint64_t addr;                  /* the receive region */
	uint64_t slot_bytes;            /* one slot of it */
	uint32_t slots;                 /* slots per peer */
} tf_boot;

void tf_boot_encode(const tf_boot *b, uint8_t out[TF_BOOT_BYTES]);
void tf_boot_decode(const uint8_t in[TF_BOOT_BYTES], tf_boot *b);

/* 0 and the MTU to use in *mtu, or 1 with the disagreement in why. */
int tf_boot_agree(const tf_boot *mine, const tf_boot *theirs, int *mtu, char *why,
		  size_t why_n);

/* The bytes of an enum ibv_mtu value (1 -> 256 ... 5 -> 4096), 0 if bad. */
int tf_boot_mtu_bytes(int mtu);

#endif /* TF_ROCE_BOOT_H */

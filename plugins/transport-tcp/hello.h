/*
 * hello.h - the handshake every pair of ranks swaps when it connects.
 *
 * The rank that connects sends its hello; the one that accepts checks it
 * and answers with its own, whose status and reason say whether it took
 * the connection.  Both sides check what they receive the same way, so
 * each names the disagreement.  The wire form is fixed-size, little-endian.
 */
#ifndef TF_TCP_HELLO_H
#define TF_TCP_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TF_HELLO_MAGIC 0x50544654u      /* "TFTP" */
#define TF_HELLO_TEXT 256
#define TF_HELLO_BYTES (4 + 2 + 2 + 4 + 4 + 4 + 2 * TF_HELLO_TEXT)

typedef struct tf_hello {
	uint32_t magic;
	uint16_t abi_major, abi_minor;
	int32_t rank, size;
	int32_t status;                 /* in an answer: 0 taken, else refused */
	char fingerprint[TF_HELLO_TEXT];
	char reason[TF_HELLO_TEXT];     /* why refused, "" otherwise */
} tf_hello;

void tf_hello_encode(const tf_hello *m, uint8_t out[TF_HELLO_BYTES]);
void tf_hello_decode(const uint8_t in[TF_HELLO_BYTES], tf_hello *m);

/*
 * Check a peer's hello against this rank's.  `expect` is the rank the peer
 * must be (the one this rank dialled), or -1 when this rank accepted it:
 * then any rank above mine not yet in `taken` (size entries) will do.
 * Returns 0, or 1 with the disagreement in why.
 */
int tf_hello_check(const tf_hello *mine, const tf_hello *theirs, int expect,
		   const bool *taken, char *why, size_t why_size);

#endif /* TF_TCP_HELLO_H */

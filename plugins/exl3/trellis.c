/* trellis.c - tile position order, bitstream, reference decode (trellis.h). */
#include "trellis.h"

#include <string.h>

int tf_exl3_perm(int t)
{
	/* Lane `lane` of a warp owns positions 8·lane .. 8·lane+7: its two
	 * B fragments for n-subtiles c0 and c0+8. */
	int lane = t / 8, j = t % 8;
	int r0 = 2 * (lane % 4), c0 = lane / 4;
	static const int dr[4] = { 0, 1, 8, 9 };
	return 16 * (r0 + dr[j % 4]) + c0 + (j >= 4 ? 8 : 0);
}

int tf_exl3_pos(int r, int c)
{
	return 32 * (c % 8) + 8 * ((r % 8) / 2) + (r % 2) + 2 * (r >= 8) + 4 * (c >= 8);
}

/* Word m of a tile as the little-endian uint32 its int16 pair forms. */
static uint32_t tile_word(const uint16_t *tile, int m)
{
	return (uint32_t)tile[2 * m] | (uint32_t)tile[2 * m + 1] << 16;
}

uint16_t tf_exl3_state(const uint16_t *tile, int K, int t)
{
	/* Stream bit p is bit 31 - p%32 of word p/32.  The window ends at
	 * bit b1 (exclusive); +256K keeps the start positive for t = 0. */
	int b1 = (t + 1) * K + 256 * K, nw = 8 * K;
	int i0 = (b1 - 16) / 32, i1 = (b1 - 1) / 32, sh = (i1 + 1) * 32 - b1;
	uint64_t pair = (uint64_t)tile_word(tile, i0 % nw) << 32 | tile_word(tile, i1 % nw);
	return (uint16_t)(pair >> sh);
}

void tf_exl3_tile_decode_ref(const uint16_t *tile, int K, tf_exl3_cb cb,
			     uint16_t out[TF_EXL3_TILE_N])
{
	for (int t = 0; t < TF_EXL3_TILE_N; t++)
		out[tf_exl3_perm(t)] = tf_exl3_cb_half(tf_exl3_state(tile, K, t), cb);
}

void tf_exl3_tile_pack(const uint16_t states[TF_EXL3_TILE_N], int K, uint16_t *tile)
{
	uint32_t w[8 * TF_EXL3_K_MAX];
	int p = 0;

	memset(w, 0, sizeof(w));
	for (int t = 0; t < TF_EXL3_TILE_N; t++)
		for (int b = K - 1; b >= 0; b--, p++)   /* MSB first */
			if (states[t] >> b & 1)
				w[p / 32] |= 1u << (31 - p % 32);
	for (int m = 0; m < 8 * K; m++) {
		tile[2 * m] = (uint16_t)(w[m] & 0xFFFF);
		tile[2 * m + 1] = (uint16_t)(w[m] >> 16);
	}
}

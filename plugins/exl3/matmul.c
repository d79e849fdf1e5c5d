/* matmul.c - tile decode and products with Ŵ, reference and fused (matmul.h). */
#include "matmul.h"

#include <string.h>

#include "vec.h"

#define TILE TF_EXL3_TILE

void tf_exl3_mat_init(tf_exl3_mat *m, const uint16_t *trellis, int64_t k,
		      int64_t n, int K, tf_exl3_cb cb)
{
	*m = (tf_exl3_mat){ .trellis = trellis, .k = k, .n = n, .K = K, .cb = cb };
	/*
	 * Half-row `half` of tile row r holds positions t = 32·c' + base
	 * (c' = 0..7), base = b(r) + 4·half.  Position t's window ends at
	 * stream bit (t+1)·K, i.e. in word c'·K + word at shift `shift`, the
	 * same for all 8 columns: the decode reads one transposed word row.
	 */
	for (int base = 0; base < 32; base++) {
		int end = (base + 1) * K;               /* bits into the column's K words */
		int word = (end - 1) / 32;
		m->hr[base] = (tf_exl3_halfrow){ .word = (uint8_t)word,
						  .shift = (uint8_t)((word + 1) * 32 - end) };
	}
}

static const uint16_t *mat_tile(const tf_exl3_mat *m, int64_t i, int64_t j)
{
	return m->trellis + ((size_t)i * (size_t)(m->n / TILE) + (size_t)j) * 16 * (size_t)m->K;
}

void tf_exl3_mat_tile_ref(const tf_exl3_mat *m, int64_t i, int64_t j,
			  float out[TF_EXL3_TILE_N])
{
	uint16_t h[TF_EXL3_TILE_N];
	tf_exl3_tile_decode_ref(mat_tile(m, i, j), m->K, m->cb, h);
	for (int e = 0; e < TF_EXL3_TILE_N; e++)
		out[e] = tf_f16_to_f32(h[e]);
}

/* Base position of tile row r (positions of columns 0..7 are base + 32·c). */
static int row_base(int r)
{
	return 8 * ((r % 8) / 2) + (r % 2) + 2 * (r >= 8);
}

/*
 * The fused decode, inlined with a constant codebook.  The tile's 8·K words
 * are first transposed so that row w+1 of `tw` holds word w of each of the
 * 8 column groups (row 0: word -1, the previous group's last, cyclically);
 * then every half-row is one vector load (two when its window straddles a
 * word), a shift, and the codebook hash.
 */
static inline __attribute__((always_inline)) void
tile_decode(const tf_exl3_mat *m, const uint16_t *tile, tf_exl3_cb cb,
	    float out[TF_EXL3_TILE_N])
{
	uint32_t tw[(TF_EXL3_K_MAX + 1) * 8];
	const int K = m->K, nw = 8 * K;
	const tf_vi mask = tf_vi_set1(0xFFFF);

	for (int c = 0; c < 8; c++)
		for (int w = -1; w < K; w++) {
			int s = (c * K + w + nw) % nw;
			tw[(w + 1) * 8 + c] = (uint32_t)tile[2 * s] | (uint32_t)tile[2 * s + 1] << 16;
		}

	for (int r = 0; r < TILE; r++)
		for (int half = 0; half < 2; half++) {
			const tf_exl3_halfrow hr = m->hr[row_base(r) + 4 * half];
			const uint32_t *src = tw + (hr.word + 1) * 8;
			float *dst = out + r * TILE + 8 * half;
			for (int v = 0; v < 8; v += TF_VL) {
				tf_vi s = tf_vi_srl(tf_vi_load(src + v), hr.shift);
				if (hr.shift > 16)
					s = tf_vi_or(s, tf_vi_sll(tf_vi_load(src + v - 8), 32 - hr.shift));
				s = tf_vi_and(s, mask);
				tf_vf f;
				if (cb == TF_EXL3_CB_MUL1) {
					tf_vi x = tf_vi_mul(s, tf_vi_set1(TF_EXL3_MUL1_MUL));
					f = tf_vf_fma(tf_vi_bytesum(x), tf_vf_set1(TF_EXL3_MUL1_K_INV),
						      tf_vf_set1(TF_EXL3_MUL1_K_BIAS));
				} else {
					tf_vi x = cb == TF_EXL3_CB_MCG
						? tf_vi_mul(s, tf_vi_set1(TF_EXL3_MCG_MUL))
						: tf_vi_add(tf_vi_mul(s, tf_vi_set1(TF_EXL3_3INST_MUL)),
							    tf_vi_set1(TF_EXL3_3INST_ADD));
					x = tf_vi_xor(tf_vi_and(x, tf_vi_set1(TF_EXL3_LOP_MASK)),
						      tf_vi_set1(TF_EXL3_LOP_XOR));
					f = tf_vi_halfsum(x);
				}
				tf_vf_store(dst + v, f);
			}
		}
}

static void tile_decode_3inst(const tf_exl3_mat *m, const uint16_t *t, float *o)
{
	tile_decode(m, t, TF_EXL3_CB_3INST, o);
}
static void tile_decode_mcg(const tf_exl3_mat *m, const uint16_t *t, float *o)
{
	tile_decode(m, t, TF_EXL3_CB_MCG, o);
}
static void tile_decode_mul1(const tf_exl3_mat *m, const uint16_t *t, float *o)
{
	tile_decode(m, t, TF_EXL3_CB_MUL1, o);
}

typedef void (*tile_decode_fn)(const tf_exl3_mat *m, const uint16_t *t, float *o);

static tile_decode_fn tile_decoder(tf_exl3_cb cb)
{
	return cb == TF_EXL3_CB_MUL1 ? tile_decode_mul1
	     : cb == TF_EXL3_CB_MCG ? tile_decode_mcg : tile_decode_3inst;
}

void tf_exl3_mat_tile(const tf_exl3_mat *m, int64_t i, int64_t j,
		      float out[TF_EXL3_TILE_N])
{
	tile_decoder(m->cb)(m, mat_tile(m, i, j), out);
}

void tf_exl3_mat_mul_ref(const tf_exl3_mat *m, const float *xh, int64_t rows,
			 float *yh, int64_t j0, int64_t j1)
{
	float w[TF_EXL3_TILE_N];

	for (int64_t j = j0; j < j1; j++) {
		for (int64_t row = 0; row < rows; row++)
			memset(yh + row * m->n + j * TILE, 0, TILE * sizeof(float));
		for (int64_t i = 0; i < m->k / TILE; i++) {
			tf_exl3_mat_tile_ref(m, i, j, w);
			for (int64_t row = 0; row < rows; row++) {
				const float *x = xh + row * m->k + i * TILE;
				float *y = yh + row * m->n + j * TILE;
				for (int r = 0; r < TILE; r++)
					for (int c = 0; c < TILE; c++)
						y[c] += x[r] * w[r * TILE + c];
			}
		}
	}
}

void tf_exl3_mat_mul(const tf_exl3_mat *m, const float *xh, int64_t rows,
		     float *yh, int64_t j0, int64_t j1)
{
	float w[TF_EXL3_TILE_N] __attribute__((aligned(64)));
	const tile_decode_fn decode = tile_decoder(m->cb);
	const int64_t tiles_k = m->k / TILE;

	for (int64_t j = j0; j < j1; j++) {
		for (int64_t row = 0; row < rows; row++)
			memset(yh + row * m->n + j * TILE, 0, TILE * sizeof(float));
		for (int64_t i = 0; i < tiles_k; i++) {
			/* Decode once, then apply to every row while in L1. */
			decode(m, mat_tile(m, i, j), w);
			for (int64_t row = 0; row < rows; row++) {
				const float *x = xh + row * m->k + i * TILE;
				float *y = yh + row * m->n + j * TILE;
				tf_vf acc[TILE / TF_VL];
				for (int v = 0; v < TILE / TF_VL; v++)
					acc[v] = tf_vf_load(y + v * TF_VL);
				for (int r = 0; r < TILE; r++) {
					tf_vf xr = tf_vf_set1(x[r]);
					for (int v = 0; v < TILE / TF_VL; v++)
						acc[v] = tf_vf_fma(xr, tf_vf_load(w + r * TILE + v * TF_VL),
								   acc[v]);
				}
				for (int v = 0; v < TILE / TF_VL; v++)
					tf_vf_store(y + v * TF_VL, acc[v]);
			}
		}
	}
}

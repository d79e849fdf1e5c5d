/*
 * test_decode.c - the EXL3 format pieces against the spec's vectors
 * (exl3.md §4.2-4.5): tile position order, bitstream packing and state
 * windows, the three codebooks, the Hadamard transform, and the fused tile
 * decode against the bit-exact reference.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codebook.h"
#include "tf/dtype.h"
#include "hadamard.h"
#include "support/testhost.h"
#include "matmul.h"
#include "trellis.h"

/* The spec's test stream: c_t = ((t·2654435761) mod 2^32 >> 13) mod 2^K. */
static void spec_tile(int K, uint16_t *tile)
{
	uint16_t sym[TF_EXL3_TILE_N];
	for (uint32_t t = 0; t < TF_EXL3_TILE_N; t++)
		sym[t] = (uint16_t)(((t * 2654435761u) >> 13) % (1u << K));
	tf_exl3_tile_pack(sym, K, tile);
}

static void check_vector(int K, const uint16_t words[8], const uint16_t s[4],
			 uint16_t s255, const float row0[4])
{
	uint16_t tile[16 * TF_EXL3_K_MAX], w[TF_EXL3_TILE_N];
	spec_tile(K, tile);
	for (int i = 0; i < 8; i++)
		cr_expect_eq(tile[i], words[i], "K=%d word %d: %04x, expected %04x", K, i,
			     tile[i], words[i]);
	for (int t = 0; t < 4; t++)
		cr_expect_eq(tf_exl3_state(tile, K, t), s[t], "K=%d s_%d: %04x", K, t,
			     tf_exl3_state(tile, K, t));
	cr_expect_eq(tf_exl3_state(tile, K, 255), s255, "K=%d s_255", K);
	tf_exl3_tile_decode_ref(tile, K, TF_EXL3_CB_3INST, w);
	for (int c = 0; c < 4; c++)
		cr_expect(fabsf(tf_f16_to_f32(w[c]) - row0[c]) < 5e-5f,
			  "K=%d row 0 col %d: %f, expected %f", K, c,
			  tf_f16_to_f32(w[c]), row0[c]);
}

Test(exl3_decode, spec_vectors_k2_k3)
{
	check_vector(2, (const uint16_t[]){ 0xa955, 0x3ffa, 0xfaa9, 0x003f, 0x3ffa, 0x5500, 0x003f, 0xa955 },
		     (const uint16_t[]){ 0xaa94, 0xaa53, 0xa94f, 0xa53f }, 0xeaa5,
		     (const float[]){ 1.60938f, -2.27734f, 1.20410f, -0.87109f });
	check_vector(3, (const uint16_t[]){ 0xf2cb, 0x0fbe, 0x8209, 0x1a69, 0x6595, 0xdf7d, 0x040f, 0x34d1 },
		     (const uint16_t[]){ 0x6548, 0x2a43, 0x521f, 0x90fb }, 0x2ca9,
		     (const float[]){ 1.71582f, -0.02698f, 0.51758f, -0.10315f });
}

Test(exl3_decode, codebook_table)
{
	static const struct {
		tf_exl3_cb cb;
		uint16_t at[5];         /* f(0x0000), f(0x0001), f(0x1234), f(0x8000), f(0xFFFF) */
		double mean, rms, min, max;
	} tab[] = {
		{ TF_EXL3_CB_3INST, { 0x3A25, 0xBB5B, 0xC066, 0xB7F8, 0xB110 }, 0.00021, 1.243711, -3.95703, 3.97266 },
		{ TF_EXL3_CB_MCG, { 0x3F60, 0x304E, 0x3E0F, 0xB915, 0x3ACD }, -0.00004, 1.244112, -3.94922, 3.94922 },
		{ TF_EXL3_CB_MUL1, { 0xC2E8, 0x3921, 0xB89E, 0xBAF2, 0xB936 }, -0.00193, 1.000312, -3.45312, 3.34766 },
	};
	static const uint16_t states[5] = { 0x0000, 0x0001, 0x1234, 0x8000, 0xFFFF };

	for (size_t i = 0; i < 3; i++) {
		double sum = 0, sq = 0, lo = INFINITY, hi = -INFINITY;
		for (int s = 0; s < 5; s++)
			cr_expect_eq(tf_exl3_cb_half(states[s], tab[i].cb), tab[i].at[s],
				     "%s f(%04x) = %04x", tf_exl3_cb_name(tab[i].cb), states[s],
				     tf_exl3_cb_half(states[s], tab[i].cb));
		for (uint32_t s = 0; s < 65536; s++) {
			double v = tf_exl3_cb_f32((uint16_t)s, tab[i].cb);
			sum += v;
			sq += v * v;
			lo = fmin(lo, v);
			hi = fmax(hi, v);
		}
		cr_expect(fabs(sum / 65536 - tab[i].mean) < 1e-5, "%s mean %g",
			  tf_exl3_cb_name(tab[i].cb), sum / 65536);
		cr_expect(fabs(sqrt(sq / 65536) - tab[i].rms) < 1e-6, "%s rms %.7f",
			  tf_exl3_cb_name(tab[i].cb), sqrt(sq / 65536));
		cr_expect(fabs(lo - tab[i].min) < 1e-5 && fabs(hi - tab[i].max) < 1e-5,
			  "%s range %g %g", tf_exl3_cb_name(tab[i].cb), lo, hi);
	}
}

Test(exl3_decode, tensor_core_permutation)
{
	static const int first[8] = { 0, 16, 128, 144, 8, 24, 136, 152 };
	int seen[TF_EXL3_TILE_N] = { 0 };
	for (int t = 0; t < 8; t++)
		cr_expect_eq(tf_exl3_perm(t), first[t], "perm[%d]", t);
	for (int c = 0; c < 8; c++) {     /* row 0: 0, 32, ..., 224 then 4, 36, ... */
		cr_expect_eq(tf_exl3_pos(0, c), 32 * c);
		cr_expect_eq(tf_exl3_pos(0, c + 8), 32 * c + 4);
	}
	for (int t = 0; t < TF_EXL3_TILE_N; t++) {
		int e = tf_exl3_perm(t);
		cr_assert(e >= 0 && e < TF_EXL3_TILE_N);
		seen[e]++;
		cr_expect_eq(tf_exl3_pos(e / 16, e % 16), t, "pos(perm(%d))", t);
	}
	for (int e = 0; e < TF_EXL3_TILE_N; e++)
		cr_expect_eq(seen[e], 1, "element %d", e);
}

/* Every valid path survives pack + state extraction, for every K. */
Test(exl3_decode, pack_roundtrip_all_k)
{
	uint64_t seed = 0x1234567;
	for (int K = 1; K <= TF_EXL3_K_MAX; K++)
		for (int rep = 0; rep < 20; rep++) {
			uint16_t sym[TF_EXL3_TILE_N], st[TF_EXL3_TILE_N], tile[16 * TF_EXL3_K_MAX];
			for (int t = 0; t < TF_EXL3_TILE_N; t++) {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				sym[t] = (uint16_t)(seed >> 40) & ((1u << K) - 1);
			}
			/* The state is the 16-bit window ending at symbol t, cyclically. */
			for (int t = 0; t < TF_EXL3_TILE_N; t++) {
				uint32_t s = 0;
				for (int b = 0; b < 16; b++) {
					int bit = (t + 1) * K - 16 + b + 256 * K;   /* stream bit */
					int pos = (bit / K) % TF_EXL3_TILE_N, off = bit % K;
					s = s << 1 | (sym[pos] >> (K - 1 - off) & 1);
				}
				st[t] = (uint16_t)s;
			}
			tf_exl3_tile_pack(st, K, tile);
			for (int t = 0; t < TF_EXL3_TILE_N; t++)
				cr_assert_eq(tf_exl3_state(tile, K, t), st[t], "K=%d t=%d", K, t);
		}
}

/* The fused decode's float values round to the reference's fp16 exactly. */
Test(exl3_decode, fused_tile_matches_reference)
{
	uint16_t trellis[2 * 2 * 16 * TF_EXL3_K_MAX];
	float ref[TF_EXL3_TILE_N], fast[TF_EXL3_TILE_N];
	uint64_t seed = 99;

	for (int K = 1; K <= TF_EXL3_K_MAX; K++)
		for (int cb = 0; cb < TF_EXL3_CB_COUNT; cb++)
			for (int rep = 0; rep < 8; rep++) {
				tf_exl3_mat m;
				for (size_t i = 0; i < sizeof(trellis) / 2; i++) {
					seed = seed * 6364136223846793005ull + 1442695040888963407ull;
					trellis[i] = (uint16_t)(seed >> 48);
				}
				cr_assert_eq(tf_exl3_mat_init(&m, trellis, 32, 32, K, (tf_exl3_cb)cb), TF_OK);
				int64_t i = rep & 1, j = rep >> 1 & 1;
				uint16_t h[TF_EXL3_TILE_N];
				/* The file's tile, decoded without the layout. */
				tf_exl3_tile_decode_ref(trellis + (i * 2 + j) * 16 * K, K, (tf_exl3_cb)cb, h);
				for (int e = 0; e < TF_EXL3_TILE_N; e++) {
					ref[e] = tf_f16_to_f32(h[e]);
					fast[e] = NAN;
				}
				tf_exl3_mat_tile(&m, i, j, fast);
				tf_exl3_mat_free(&m);
				for (int e = 0; e < TF_EXL3_TILE_N; e++)
					cr_assert_eq(tf_f32_to_f16(fast[e]), tf_f32_to_f16(ref[e]),
						     "K=%d %s tile (%lld,%lld) element %d: %g vs %g",
						     K, tf_exl3_cb_name((tf_exl3_cb)cb), (long long)i,
						     (long long)j, e, fast[e], ref[e]);
			}
}

/* Laid out in column-group pieces, last first (as workers may finish),
 * over an odd tile count: every tile reads back as the file's words. */
Test(exl3_decode, layout_in_pieces_matches_file)
{
	const int64_t k = 48, n = 16 * 19;      /* 3 groups, the last 3 tiles */
	for (int K = 1; K <= TF_EXL3_K_MAX; K += 3) {
		const int64_t nt = (k / 16) * (n / 16) * 16 * K;
		uint16_t *tr = malloc(sizeof(uint16_t) * nt), words[16 * TF_EXL3_K_MAX];
		uint64_t seed = 41 + (uint64_t)K;
		tf_exl3_mat m;

		for (int64_t i = 0; i < nt; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			tr[i] = (uint16_t)(seed >> 48);
		}
		cr_assert_eq(tf_exl3_mat_alloc(&m, k, n, K, TF_EXL3_CB_MUL1), TF_OK);
		for (int64_t j1 = n / 16; j1 > 0; j1 = (j1 - 1) / 8 * 8)
			tf_exl3_mat_pack(&m, tr, (j1 - 1) / 8 * 8, j1);
		for (int64_t i = 0; i < k / 16; i++)
			for (int64_t j = 0; j < n / 16; j++) {
				for (int w = 0; w < 16 * K; w++)
					words[w] = (uint16_t)~tr[(i * (n / 16) + j) * 16 * K + w];
				tf_exl3_mat_tile_words(&m, i, j, words);
				cr_assert_arr_eq(words, tr + (i * (n / 16) + j) * 16 * K,
						 sizeof(uint16_t) * 16 * (size_t)K,
						 "K=%d tile (%lld,%lld)", K, (long long)i, (long long)j);
			}
		tf_exl3_mat_free(&m);
		free(tr);
	}
}

Test(exl3_decode, hadamard_matches_matrix)
{
	float v[256], orig[256];
	uint64_t s = 7;
	for (int i = 0; i < 256; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		orig[i] = v[i] = (float)((int64_t)(s >> 33) % 1000) / 250.0f;
	}
	tf_had128(v, 256);
	for (int b = 0; b < 2; b++)
		for (int i = 0; i < 128; i++) {
			double ref = 0;
			for (int j = 0; j < 128; j++)
				ref += (__builtin_popcount(i & j) & 1 ? -1.0 : 1.0) * orig[128 * b + j];
			ref /= sqrt(128.0);
			cr_assert(fabs(v[128 * b + i] - ref) < 1e-5 * (1 + fabs(ref)),
				  "block %d element %d: %g vs %g", b, i, v[128 * b + i], ref);
		}
	tf_had128(v, 256);      /* its own inverse */
	for (int i = 0; i < 256; i++)
		cr_assert(fabsf(v[i] - orig[i]) < 1e-5f);
}

/* The vector butterflies form the plain loop's sums in its order: the same
 * bits, on values of many magnitudes, over several blocks. */
Test(exl3_decode, hadamard_bits_are_the_plain_loops)
{
	enum { N = 8 * TF_HAD_BLOCK };
	static float orig[N], ref[N], got[N];
	uint64_t s = 11;
	for (int i = 0; i < N; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		orig[i] = ldexpf((float)((int64_t)(s >> 40) - (1 << 23)), (int)(s >> 32 & 15) - 30);
	}
	memcpy(ref, orig, sizeof(ref));
	tf_had128_ref(ref, N);
	memcpy(got, orig, sizeof(got));
	tf_had128(got, N);
	cr_assert_arr_eq(got, ref, sizeof(ref), "tf_had128");
}

/* yh = xh · Ŵ in float64 from the reference decode, for tile columns
 * all of m, compared with both product paths. */
static void check_products(int64_t k, int64_t n, int K, tf_exl3_cb cb, int64_t rows,
			   uint64_t seed)
{
	int64_t nt = (k / 16) * (n / 16) * 16 * K;
	uint16_t *tr = malloc(sizeof(uint16_t) * nt);
	float *x = malloc(sizeof(float) * rows * k), *y = malloc(sizeof(float) * rows * n);
	float *ref = malloc(sizeof(float) * rows * n);
	double *acc = calloc(rows * n, sizeof(double));
	float tile[TF_EXL3_TILE_N];
	tf_exl3_mat m;

	for (int64_t i = 0; i < nt; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		tr[i] = (uint16_t)(seed >> 48);
	}
	for (int64_t i = 0; i < rows * k; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = (float)((int64_t)(seed >> 40) - (1 << 23)) / (float)(1 << 23);
	}
	cr_assert_eq(tf_exl3_mat_init(&m, tr, k, n, K, cb), TF_OK);
	for (int64_t i = 0; i < k / 16; i++)
		for (int64_t j = 0; j < n / 16; j++) {
			uint16_t h[TF_EXL3_TILE_N];
			tf_exl3_tile_decode_ref(tr + (i * (n / 16) + j) * 16 * K, K, cb, h);
			for (int e = 0; e < TF_EXL3_TILE_N; e++)
				tile[e] = tf_f16_to_f32(h[e]);
			for (int64_t r = 0; r < rows; r++)
				for (int e = 0; e < TF_EXL3_TILE_N; e++)
					acc[r * n + 16 * j + e % 16] +=
						(double)x[r * k + 16 * i + e / 16] * tile[e];
		}
	for (int64_t i = 0; i < rows * n; i++)
		ref[i] = (float)acc[i];

	struct {
		const char *name;
		void (*mul)(const tf_exl3_mat *, const float *, int64_t, float *, int64_t, int64_t);
		double tol;
	} paths[] = { { "reference", tf_exl3_mat_mul_ref, 1e-5 }, { "fused", tf_exl3_mat_mul, 1e-3 } };
	for (int p = 0; p < 2; p++) {
		for (int64_t i = 0; i < rows * n; i++)
			y[i] = NAN;
		/* Two calls over split column ranges, as two threads would. */
		paths[p].mul(&m, x, rows, y, 0, n / 32);
		paths[p].mul(&m, x, rows, y, n / 32, n / 16);
		double err = tf_test_rel_err(y, ref, rows * n, 1e-3);
		cr_expect_lt(err, paths[p].tol, "%s K=%d %s %lldx%lld rows %lld: rel err %g",
			     paths[p].name, K, tf_exl3_cb_name(cb), (long long)k, (long long)n,
			     (long long)rows, err);
	}
	tf_exl3_mat_free(&m);
	free(tr); free(x); free(y); free(ref); free(acc);
}

Test(exl3_decode, products_every_k_and_codebook)
{
	uint64_t seed = 3;
	for (int K = 1; K <= TF_EXL3_K_MAX; K++)
		for (int cb = 0; cb < TF_EXL3_CB_COUNT; cb++)
			check_products(128, 256, K, (tf_exl3_cb)cb, 1 + (K * 3 + cb) % 6, seed++);
}

Test(exl3_decode, products_expert_shapes)
{
	check_products(4096, 1280, 3, TF_EXL3_CB_MUL1, 1, 17);
	check_products(1280, 4096, 4, TF_EXL3_CB_MCG, 5, 18);
}

/*
 * mma.h (SIMT harness) - nvcuda::wmma for the shape our kernels use:
 * 16x16x16, fp16 A and B, float accumulator.
 *
 * WMMA leaves the element-to-lane mapping unspecified, so the harness
 * picks one: lane L holds elements 8L..8L+7 of the tile in row-major
 * order.  Every call is warp-collective (all 32 lanes must make it, as on
 * the GPU); mma_sync reads the other lanes' fragments through the warp
 * exchange and sums each product in float, in k order.
 */
#ifndef TF_SIMT_MMA_H
#define TF_SIMT_MMA_H

#include "cuda_fp16.h"

namespace nvcuda {
namespace wmma {

struct matrix_a;
struct matrix_b;
struct accumulator;
struct row_major;
struct col_major;
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
	static_assert(M == 16 && N == 16 && K == 16, "the harness has the 16x16x16 shape only");
	static constexpr int num_elements = 8;
	T x[num_elements];
};

/* Row r, column c of a tile from memory with leading dimension ld. */
template <class T> static inline T tile_at(const T *p, unsigned ld, bool row_major_mem, int r, int c)
{
	return row_major_mem ? p[(size_t)r * ld + c] : p[(size_t)c * ld + r];
}

static inline bool is_row_major(row_major *) { return true; }
static inline bool is_row_major(col_major *) { return false; }

template <class Use, class T, class Layout>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p, unsigned ld)
{
	::tf_simt::warp_exchange(0xFFFFFFFFu, 0, "wmma::load_matrix_sync");
	const int base = 8 * ::tf_simt::lane();
	for (int e = 0; e < 8; e++)
		f.x[e] = tile_at(p, ld, is_row_major((Layout *)nullptr), (base + e) / 16, (base + e) % 16);
}

template <class T>
static inline void fill_fragment(fragment<accumulator, 16, 16, 16, T> &f, T v)
{
	::tf_simt::warp_exchange(0xFFFFFFFFu, 0, "wmma::fill_fragment");
	for (int e = 0; e < 8; e++)
		f.x[e] = v;
}

template <class LA, class LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
			    const fragment<matrix_a, 16, 16, 16, __half, LA> &a,
			    const fragment<matrix_b, 16, 16, 16, __half, LB> &b,
			    const fragment<accumulator, 16, 16, 16, float> &c)
{
	struct frags {
		const __half *a, *b;
	} mine = { a.x, b.x };
	/* Each lane lends the address of its fragments ... */
	const uint64_t *all = ::tf_simt::warp_exchange(0xFFFFFFFFu, (uint64_t)(uintptr_t)&mine,
						       "wmma::mma_sync");
	const frags *lanes[32];
	for (int l = 0; l < 32; l++)
		lanes[l] = (const frags *)(uintptr_t)all[l];
	const int base = 8 * ::tf_simt::lane();
	float out[8];
	for (int e = 0; e < 8; e++) {
		const int r = (base + e) / 16, col = (base + e) % 16;
		float s = c.x[e];
		for (int k = 0; k < 16; k++) {
			const int ia = 16 * r + k, ib = 16 * k + col;
			s += __half2float(lanes[ia / 8]->a[ia % 8]) *
			     __half2float(lanes[ib / 8]->b[ib % 8]);
		}
		out[e] = s;
	}
	/* ... and keeps it until every lane has computed. */
	::tf_simt::warp_exchange(0xFFFFFFFFu, 0, "wmma::mma_sync");
	for (int e = 0; e < 8; e++)
		d.x[e] = out[e];
}

template <class T>
static inline void store_matrix_sync(T *p, const fragment<accumulator, 16, 16, 16, T> &f,
				     unsigned ld, layout_t layout)
{
	::tf_simt::warp_exchange(0xFFFFFFFFu, 0, "wmma::store_matrix_sync");
	const int base = 8 * ::tf_simt::lane();
	for (int e = 0; e < 8; e++) {
		const int r = (base + e) / 16, c = (base + e) % 16;
		p[layout == mem_row_major ? (size_t)r * ld + c : (size_t)c * ld + r] = f.x[e];
	}
}

} /* namespace wmma */
} /* namespace nvcuda */

#endif /* TF_SIMT_MMA_H */

/*
 * delta_chunked.cu - the KDA delta rule in its chunked WY form
 * (kda_cuda.h; ling-arch.md §2.4; plugins/kda/delta.c does the same on
 * the CPU), for prefill: one block per (head, segment, column tile), the
 * state in registers (delta_tile.cuh), KDA_CUDA_CHUNK tokens at a time:
 *
 *     E_i  = prod_{s<=i} exp(g_s)                        decay from the chunk start
 *     Akk  = k_i . k_j E_i / E_j  (j < i),  Aqk = q_i . k_j E_i / E_j  (j <= i)
 *     Vn   solves (I + Diag(beta) Akk) Vn = Diag(beta) (v - (E k) S)
 *     O    = (E q) S + Aqk Vn
 *     S   <- Diag(E_last) S + sum_m (k_m E_last / E_m) Vn_m^T
 *
 * Within one 16-token chunk the safe gate (g >= -5) bounds E_j^-1 by e^80,
 * below FLT_MAX, so the scores are plain dot products of E k and k / E.
 * A chunk decaying further (Kimi's unbounded gate) takes each score's
 * decay as an exact product of the per-token factors instead.
 */
#include "delta_tile.cuh"

/* Smallest decay across a chunk that k / E may divide by (as delta.c). */
#define KDA_CUDA_DECAY_MIN 1.8e-35f

/* Scratch of one chunk: 36.6 KiB at the largest K, under the 48 KiB of
 * static shared memory a block may have. */
struct kda_chunk_smem {
	float a[KDA_CUDA_CHUNK][KDA_CUDA_MAX_DIM];      /* exp(g) */
	float Ek[KDA_CUDA_CHUNK][KDA_CUDA_MAX_DIM];     /* E_i k_i */
	float Eq[KDA_CUDA_CHUNK][KDA_CUDA_MAX_DIM];     /* E_i q_i */
	float kr[KDA_CUDA_CHUNK][KDA_CUDA_MAX_DIM];     /* k_j / E_j, then k_j E_last / E_j */
	float Vn[KDA_CUDA_CHUNK][KDA_TILE_COLS];        /* the deltas u_t of the tile's columns */
	float Akk[KDA_CUDA_CHUNK][KDA_CUDA_CHUNK], Aqk[KDA_CUDA_CHUNK][KDA_CUDA_CHUNK];
	float elast[KDA_CUDA_MAX_DIM];                  /* E of the chunk's last token */
	float beta[KDA_CUDA_CHUNK];
};

/* Chunk rows of q, k, g (ldk apart), v and o (ldv apart), beta. */
struct kda_chunk_rows {
	const float *q, *k, *g, *v, *beta;
	float *o;
	int64_t ldk, ldv, ldb;
};

/* a, E k, E q, k / E and E_last, one thread per channel. */
__device__ static void chunk_decays(kda_chunk_smem &w, const kda_chunk_rows &c, int K, int L)
{
	for (int d = threadIdx.x; d < K; d += blockDim.x) {
		float e = 1.0f;
		for (int i = 0; i < L; i++) {
			const float a = expf(c.g[i * c.ldk + d]), k = c.k[i * c.ldk + d];
			e *= a;
			w.a[i][d] = a;
			w.Ek[i][d] = e * k;
			w.Eq[i][d] = e * c.q[i * c.ldk + d];
			w.kr[i][d] = k / e;
		}
		w.elast[d] = e;
	}
	if ((int)threadIdx.x < L)
		w.beta[threadIdx.x] = c.beta[threadIdx.x * c.ldb];
}

/* Akk and Aqk, one thread per pair (i, j <= i); `factored` when every
 * E_j^-1 of the chunk is finite. */
__device__ static void chunk_scores(kda_chunk_smem &w, const kda_chunk_rows &c, int K, int L,
				    bool factored)
{
	for (int p = threadIdx.x; p < L * L; p += blockDim.x) {
		const int i = p / L, j = p % L;
		if (j > i)
			continue;
		float sk = 0.0f, sq = 0.0f;
		if (factored) {
			for (int d = 0; d < K; d++) {
				sk += w.Ek[i][d] * w.kr[j][d];
				sq += w.Eq[i][d] * w.kr[j][d];
			}
		} else {
			const float *ki = c.k + i * c.ldk, *kj = c.k + j * c.ldk;
			const float *qi = c.q + i * c.ldk;
			for (int d = 0; d < K; d++) {
				float e = kj[d];
				for (int s = j + 1; s <= i; s++)
					e *= w.a[s][d];
				sk += ki[d] * e;
				sq += qi[d] * e;
			}
		}
		w.Akk[i][j] = j < i ? sk : 0.0f;
		w.Aqk[i][j] = sq;
	}
}

/* One chunk of L <= KDA_CUDA_CHUNK tokens on the state s[] of this thread. */
__device__ static void delta_chunk(kda_chunk_smem &w, const kda_chunk_rows &c,
				   float s[KDA_TILE_ROWS], kda_tile t, int K, int L)
{
	chunk_decays(w, c, K, L);
	__syncthreads();
	float least = 1.0f;
	for (int d = 0; d < K; d++)
		least = fminf(least, w.elast[d]);
	chunk_scores(w, c, K, L, least >= KDA_CUDA_DECAY_MIN);
	__syncthreads();

	/* (E k) S, the row groups adding their partial sums in turn. */
	for (int r = 0; r < t.groups; r++) {
		if (t.r == r)
			for (int i = 0; i < L; i++) {
				const float x = kda_tile_dot(w.Ek[i], s, t);
				w.Vn[i][t.jl] = r ? w.Vn[i][t.jl] + x : x;
			}
		__syncthreads();
	}
	/* Forward substitution, column by column. */
	if (t.r == 0 && t.live)
		for (int i = 0; i < L; i++) {
			const float b = w.beta[i];
			float x = b * (c.v[i * c.ldv + t.j] - w.Vn[i][t.jl]);
			for (int m = 0; m < i; m++)
				x -= b * w.Akk[i][m] * w.Vn[m][t.jl];
			w.Vn[i][t.jl] = x;
		}
	/* kr's last reads were the scores: now the decay of each key to the
	 * chunk end, a product walking back from it. */
	for (int d = threadIdx.x; d < K; d += blockDim.x) {
		float p = 1.0f;
		for (int m = L - 1; m >= 0; m--) {
			w.kr[m][d] = c.k[m * c.ldk + d] * p;
			p *= w.a[m][d];
		}
	}
	__syncthreads();

	/* O = (E q) S + Aqk Vn, accumulated in o group by group. */
	for (int r = 0; r < t.groups; r++) {
		if (t.r == r && t.live)
			for (int i = 0; i < L; i++) {
				float x = kda_tile_dot(w.Eq[i], s, t);
				float *o = c.o + i * c.ldv + t.j;
				if (r == 0) {
					for (int m = 0; m <= i; m++)
						x += w.Aqk[i][m] * w.Vn[m][t.jl];
					*o = x;
				} else {
					*o += x;
				}
			}
		__syncthreads();
	}

#pragma unroll
	for (int m = 0; m < KDA_TILE_ROWS; m++)
		if (m < t.rows) {
			const int d = t.i0 + m;
			float x = w.elast[d] * s[m];
			for (int i = 0; i < L; i++)
				x += w.kr[i][d] * w.Vn[i][t.jl];
			s[m] = x;
		}
	/* The next chunk overwrites what this one read. */
	__syncthreads();
}

__global__ static void __launch_bounds__(KDA_TILE_THREADS)
delta_chunked_kernel(tf_kda_cuda_io io, const tf_kda_cuda_seg *segs, int K, int V)
{
	__shared__ kda_chunk_smem w;
	const kda_block b = kda_block_of(segs, K, V);
	float s[KDA_TILE_ROWS];

	kda_tile_load(s, b.S, b.t, V);
	for (int64_t c0 = 0; c0 < b.sg.n; c0 += KDA_CUDA_CHUNK) {
		const int64_t row = b.sg.row0 + c0, rk = row * io.ldk + (int64_t)b.h * K;
		const int64_t rv = row * io.ldv + (int64_t)b.h * V;
		const kda_chunk_rows c = {
			io.q + rk, io.k + rk, io.g + rk, io.v + rv, io.beta + row * io.ldb + b.h,
			io.o + rv, io.ldk, io.ldv, io.ldb,
		};
		const int L = b.sg.n - c0 < KDA_CUDA_CHUNK ? (int)(b.sg.n - c0) : KDA_CUDA_CHUNK;
		delta_chunk(w, c, s, b.t, K, L);
	}
	kda_tile_store(b.S, s, b.t, V);
}

extern "C" int tf_kda_cuda_chunked(cudaStream_t stream, const tf_kda_cuda_io *io,
				   const tf_kda_cuda_seg *seg, int n_seg, int heads, int K, int V)
{
	int rc = tf_kda_cuda_check(heads, K, V, n_seg);
	if (rc)
		return rc;
	TF_LAUNCH(kda_tile_grid(heads, n_seg, V), kda_tile_block(K, V), 0, stream,
		  delta_chunked_kernel)(*io, seg, K, V);
	return cudaGetLastError();
}

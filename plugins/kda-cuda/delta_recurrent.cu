/*
 * delta_recurrent.cu - the KDA delta rule token by token (kda_cuda.h), the
 * decode step: one block per (head, segment, column tile), the state in
 * registers (delta_tile.cuh) from the first token of the segment to the
 * last.
 */
#include "delta_tile.cuh"

/*
 * Per token, three barriers: the token's q, k and decay are in shared
 * memory; the partial sums of S^T k are; the partial sums of S^T q are.
 * Each shared buffer is next written only after a barrier that follows
 * its last read, so one set of buffers serves every token.
 */
__global__ static void __launch_bounds__(KDA_TILE_THREADS)
delta_recurrent_kernel(tf_kda_cuda_io io, const tf_kda_cuda_seg *segs, int K, int V)
{
	__shared__ float sq[KDA_CUDA_MAX_DIM], sk[KDA_CUDA_MAX_DIM], sa[KDA_CUDA_MAX_DIM];
	__shared__ float part_k[KDA_TILE_THREADS], part_q[KDA_TILE_THREADS];
	const kda_block b = kda_block_of(segs, K, V);
	const kda_tile t = b.t;
	const int h = b.h;
	float s[KDA_TILE_ROWS];

	kda_tile_load(s, b.S, t, V);
	for (int64_t n = 0; n < b.sg.n; n++) {
		const int64_t row = b.sg.row0 + n, rk = row * io.ldk + (int64_t)h * K;
		const int64_t rv = row * io.ldv + (int64_t)h * V;
		for (int d = threadIdx.x; d < K; d += blockDim.x) {
			sq[d] = io.q[rk + d];
			sk[d] = io.k[rk + d];
			sa[d] = expf(io.g[rk + d]);
		}
		__syncthreads();

		/* Decay the rows, then u_j = beta (v_j - (S^T k)_j). */
		float ks = 0.0f;
#pragma unroll
		for (int m = 0; m < KDA_TILE_ROWS; m++)
			if (m < t.rows) {
				s[m] *= sa[t.i0 + m];
				ks += sk[t.i0 + m] * s[m];
			}
		part_k[threadIdx.x] = ks;
		__syncthreads();
		ks = 0.0f;
		for (int r = 0; r < t.groups; r++)
			ks += part_k[r * t.w + t.jl];
		const float u = t.live ? io.beta[row * io.ldb + h] * (io.v[rv + t.j] - ks) : 0.0f;

		/* Write k u^T, read S^T q from the written rows. */
#pragma unroll
		for (int m = 0; m < KDA_TILE_ROWS; m++)
			if (m < t.rows)
				s[m] += sk[t.i0 + m] * u;
		part_q[threadIdx.x] = kda_tile_dot(sq, s, t);
		__syncthreads();
		if (t.r == 0 && t.live) {
			float qs = 0.0f;
			for (int r = 0; r < t.groups; r++)
				qs += part_q[r * t.w + t.jl];
			io.o[rv + t.j] = qs;
		}
	}
	kda_tile_store(b.S, s, t, V);
}

extern "C" int tf_kda_cuda_recurrent(cudaStream_t stream, const tf_kda_cuda_io *io,
				     const tf_kda_cuda_seg *seg, int n_seg, int heads, int K,
				     int V)
{
	int rc = tf_kda_cuda_check(heads, K, V, n_seg);
	if (rc)
		return rc;
	TF_LAUNCH(kda_tile_grid(heads, n_seg, V), kda_tile_block(K, V), 0, stream,
		  delta_recurrent_kernel)(*io, seg, K, V);
	return cudaGetLastError();
}

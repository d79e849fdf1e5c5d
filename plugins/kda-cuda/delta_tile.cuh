/*
 * delta_tile.cuh - how the KDA delta kernels spread one head's K x V state
 * over blocks, shared by delta_recurrent.cu and delta_chunked.cu.
 *
 * Each column of S evolves on its own: u_j, its write and o_j read only
 * column j (and q, k, g, beta, which every column shares).  So a head's
 * columns are split into tiles of W = min(V, KDA_TILE_COLS), one block
 * each, which keeps a GPU busy when there are few sequences and heads.
 * A block has R x W threads, R = ceil(K / KDA_TILE_ROWS): thread t owns
 * column t % W of its tile, rows [r * KDA_TILE_ROWS, ...) with r = t / W,
 * in registers for the whole launch.  Every product against S is then a
 * sum over rows within one column: each thread sums its rows, and the R
 * partial sums of a column are combined in shared memory in a fixed order,
 * so results do not depend on the schedule.  Threads of the last tile past
 * V own nothing but take part in every barrier.
 */
#ifndef TF_KDA_DELTA_TILE_CUH
#define TF_KDA_DELTA_TILE_CUH

#include "kda_cuda.h"
#include "tf_launch.h"        /* the device model, under the harness */

#define KDA_TILE_ROWS 32
#define KDA_TILE_COLS 32
#define KDA_TILE_GROUPS ((KDA_CUDA_MAX_DIM + KDA_TILE_ROWS - 1) / KDA_TILE_ROWS)
#define KDA_TILE_THREADS (KDA_TILE_GROUPS * KDA_TILE_COLS)

struct kda_tile {
	int j, jl;              /* column in S and in the tile */
	bool live;              /* j < V */
	int w, r, groups;       /* tile width (threads per group), row group, groups */
	int i0, rows;           /* first row and rows owned (0 past K or V) */
};

static inline int kda_tile_groups(int K) { return (K + KDA_TILE_ROWS - 1) / KDA_TILE_ROWS; }
__host__ __device__ static inline int kda_tile_width(int V) { return V < KDA_TILE_COLS ? V : KDA_TILE_COLS; }

/* Blocks for heads x n_seg x column tiles, of R x W threads. */
static inline dim3 kda_tile_grid(int heads, int n_seg, int V)
{
	return dim3(heads, n_seg, (V + KDA_TILE_COLS - 1) / KDA_TILE_COLS);
}

static inline unsigned kda_tile_block(int K, int V)
{
	return (unsigned)(kda_tile_groups(K) * kda_tile_width(V));
}

__device__ static inline kda_tile kda_tile_of(int K, int V)
{
	kda_tile t;
	t.w = kda_tile_width(V);
	t.jl = threadIdx.x % t.w;
	t.j = blockIdx.z * KDA_TILE_COLS + t.jl;
	t.live = t.j < V;
	t.r = threadIdx.x / t.w;
	t.groups = blockDim.x / t.w;
	t.i0 = t.r * KDA_TILE_ROWS;
	t.rows = !t.live ? 0 : K - t.i0 < KDA_TILE_ROWS ? K - t.i0 : KDA_TILE_ROWS;
	return t;
}

/* A block's head of its segment, and this thread's place in its state. */
struct kda_block {
	tf_kda_cuda_seg sg;
	int h;
	float *S;               /* the head's K x V state */
	kda_tile t;
};

/* Block (h, s, c) runs column tile c of head h of segment s. */
__device__ static inline kda_block kda_block_of(const tf_kda_cuda_seg *segs, int K, int V)
{
	kda_block b;
	b.sg = segs[blockIdx.y];
	b.h = blockIdx.x;
	b.S = b.sg.S + (int64_t)b.h * K * V;
	b.t = kda_tile_of(K, V);
	return b;
}

/* The loops over a thread's rows run to the constant KDA_TILE_ROWS, so
 * s[] stays in registers. */
__device__ static inline void kda_tile_load(float s[KDA_TILE_ROWS], const float *S, kda_tile t,
					    int V)
{
#pragma unroll
	for (int m = 0; m < KDA_TILE_ROWS; m++)
		s[m] = m < t.rows ? S[(int64_t)(t.i0 + m) * V + t.j] : 0.0f;
}

__device__ static inline void kda_tile_store(float *S, const float s[KDA_TILE_ROWS], kda_tile t,
					     int V)
{
#pragma unroll
	for (int m = 0; m < KDA_TILE_ROWS; m++)
		if (m < t.rows)
			S[(int64_t)(t.i0 + m) * V + t.j] = s[m];
}

/* sum over the thread's rows i of x[i] S[i][j]; x is K floats. */
__device__ static inline float kda_tile_dot(const float *x, const float s[KDA_TILE_ROWS],
					    kda_tile t)
{
	float acc = 0.0f;
#pragma unroll
	for (int m = 0; m < KDA_TILE_ROWS; m++)
		if (m < t.rows)
			acc += x[t.i0 + m] * s[m];
	return acc;
}

#endif /* TF_KDA_DELTA_TILE_CUH */

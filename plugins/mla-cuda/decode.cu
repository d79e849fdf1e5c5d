/*
 * decode.cu - the absorbed form of MLA attention (mla_cuda.h): queries
 * folded through W_UK, scored against the raw latent cache rows that every
 * head shares, the cache split over parts (split-K) so that one long
 * sequence fills the device, the parts merged and projected through W_UV.
 */
#include <math.h>

#include "cache.cuh"

#define DEC_THREADS 256
/* Heads a split block serves: each cache tile is read once for them. */
#define DEC_HEADS 8
#define DEC_LAT (MLA_CUDA_MAX_R + MLA_CUDA_MAX_DR)
/* Latent channels a thread accumulates: c = threadIdx.x + k DEC_THREADS. */
#define DEC_CH (MLA_CUDA_MAX_R / DEC_THREADS)
/* Threads that share one (head, row) score, each a strided quarter of it. */
#define DEC_SUB (DEC_THREADS / (DEC_HEADS * MLA_CUDA_TILE))
/* A tile row's stride in shared memory: the DEC_SUB threads of a score
 * and the rows of a warp fall in distinct banks. */
#define DEC_TILE_LD (DEC_LAT + DEC_SUB)
/* W_UV rows the combine projects at a time, DEC_THREADS / DEC_OUT threads each. */
#define DEC_OUT 32

/* One block per (head, query): W_UK_h^T q_nope over the dn rows of the
 * head, channels over threads (as mla_absorb_query: row by row, then the
 * scale). */
__global__ static void absorb_kernel(tf_mla_cuda_dims d, const float *wkvb, const float *q,
				     float *qlat)
{
	const int h = blockIdx.x, lat = d.r + d.dr, dq = d.dn + d.dr;
	const int64_t i = blockIdx.y;
	const float *qn = q + (i * d.heads + h) * dq;
	const float *w = wkvb + (int64_t)h * (d.dn + d.dv) * d.r;
	float *ql = qlat + (i * d.heads + h) * lat;
	for (int c = threadIdx.x; c < d.r; c += blockDim.x) {
		float s = 0.0f;
		for (int e = 0; e < d.dn; e++)
			s += qn[e] * w[(int64_t)e * d.r + c];
		ql[c] = s * d.scale;
	}
	for (int e = threadIdx.x; e < d.dr; e += blockDim.x)
		ql[d.r + e] = qn[d.dn + e] * d.scale;
}

extern "C" int tf_mla_cuda_absorb_query(cudaStream_t stream, const tf_mla_cuda_dims *d,
					const float *wkvb, const float *q, int64_t n, float *qlat)
{
	if (tf_mla_cuda_check(d) || n < 0 || n > 65535)
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	TF_LAUNCH(dim3(d->heads, (unsigned)n), 128, 0, stream, absorb_kernel)(*d, wkvb, q, qlat);
	return cudaGetLastError();
}

extern "C" int64_t tf_mla_cuda_part_rows(const tf_mla_cuda_dims *d, int64_t rows, int64_t n,
					 int blocks)
{
	const int64_t groups = (d->heads + DEC_HEADS - 1) / DEC_HEADS;
	int64_t parts = (blocks + n * groups - 1) / (n * groups);
	if (parts < 1)
		parts = 1;
	int64_t pr = (rows + parts - 1) / parts;
	/* a part worth its launch: a page at least */
	if (pr < MLA_CUDA_PAGE_ROWS)
		pr = MLA_CUDA_PAGE_ROWS;
	if (pr < (rows + MLA_CUDA_MAX_PARTS - 1) / MLA_CUDA_MAX_PARTS)
		pr = (rows + MLA_CUDA_MAX_PARTS - 1) / MLA_CUDA_MAX_PARTS;
	return (pr + MLA_CUDA_TILE - 1) / MLA_CUDA_TILE * MLA_CUDA_TILE;
}

/*
 * One block per (part, group of DEC_HEADS heads, query).  Per tile of
 * MLA_CUDA_TILE rows, four barriers: the last tile is done with; this
 * one is in shared memory (as float); DEC_SUB threads per (head, row) have
 * left their partial dot products; the heads' running softmax has taken
 * the tile's scores (turned into weights).  Then every thread rescales and
 * accumulates its channels for each head.  No warp shuffles: few waits
 * per tile, on the GPU and on the SIMT harness alike.
 */
__global__ static void __launch_bounds__(DEC_THREADS)
decode_split_kernel(tf_mla_cuda_dims d, const float *qlat, tf_mla_cuda_cache c, int64_t len,
		    int64_t part_rows, tf_mla_cuda_run *run, float *acc)
{
	__shared__ float sq[DEC_HEADS][DEC_LAT], tile[MLA_CUDA_TILE][DEC_TILE_LD];
	__shared__ float part[DEC_HEADS * MLA_CUDA_TILE][DEC_SUB];
	__shared__ float s[DEC_HEADS][MLA_CUDA_TILE], corr[DEC_HEADS];
	__shared__ tf_mla_cuda_run rs[DEC_HEADS];
	const int lat = d.r + d.dr, pair = threadIdx.x / DEC_SUB, sub = threadIdx.x % DEC_SUB;
	const int ph = pair / MLA_CUDA_TILE, pt = pair % MLA_CUDA_TILE;
	const int h0 = blockIdx.y * DEC_HEADS;
	const int hn = d.heads - h0 < DEC_HEADS ? d.heads - h0 : DEC_HEADS;
	const int64_t i = blockIdx.z, n = gridDim.z, p = blockIdx.x;
	const int64_t rows = len + i + 1, t0 = p * part_rows;
	const int64_t t1 = t0 + part_rows < rows ? t0 + part_rows : rows;
	float a[DEC_HEADS][DEC_CH];

	for (int k = threadIdx.x; k < hn * lat; k += blockDim.x)
		sq[k / lat][k % lat] = qlat[(i * d.heads + h0 + k / lat) * lat + k % lat];
	if (threadIdx.x < DEC_HEADS) {
		rs[threadIdx.x].m = -INFINITY;
		rs[threadIdx.x].l = 0.0f;
	}
#pragma unroll
	for (int hh = 0; hh < DEC_HEADS; hh++)
#pragma unroll
		for (int k = 0; k < DEC_CH; k++)
			a[hh][k] = 0.0f;

	for (int64_t tt = t0; tt < t1; tt += MLA_CUDA_TILE) {
		const int nt = t1 - tt < MLA_CUDA_TILE ? (int)(t1 - tt) : MLA_CUDA_TILE;
		__syncthreads();        /* the last tile's weights and rows are read */
		for (int k = threadIdx.x; k < nt * lat; k += blockDim.x)
			tile[k / lat][k % lat] = mla_cache_get(c, lat, tt + k / lat, k % lat);
		__syncthreads();
		if (ph < hn && pt < nt) {
			float v = 0.0f;
			for (int e = sub; e < lat; e += DEC_SUB)
				v += sq[ph][e] * tile[pt][e];
			part[pair][sub] = v;
		}
		__syncthreads();
		if ((int)threadIdx.x < hn) {
			float *sh = s[threadIdx.x], mx = -INFINITY;
			for (int t = 0; t < nt; t++) {
				const float *pp = part[threadIdx.x * MLA_CUDA_TILE + t];
				float v = 0.0f;
				for (int k = 0; k < DEC_SUB; k++)
					v += pp[k];
				sh[t] = v;
				mx = fmaxf(mx, v);
			}
			corr[threadIdx.x] = mla_run_fold(&rs[threadIdx.x], mx, sh, nt);
		}
		__syncthreads();
#pragma unroll
		for (int hh = 0; hh < DEC_HEADS; hh++) {
			if (hh >= hn)
				break;
#pragma unroll
			for (int k = 0; k < DEC_CH; k++) {
				const int ch = threadIdx.x + k * DEC_THREADS;
				if (ch >= d.r)
					break;
				float v = a[hh][k] * corr[hh];
				for (int t = 0; t < nt; t++)
					v += s[hh][t] * tile[t][ch];
				a[hh][k] = v;
			}
		}
	}
	__syncthreads();                /* rs as the last tile left it */
	const int64_t base = (p * n + i) * d.heads + h0;
	if ((int)threadIdx.x < hn)
		run[base + threadIdx.x] = rs[threadIdx.x];
	for (int hh = 0; hh < hn; hh++)
		for (int k = 0; k < DEC_CH; k++) {
			const int ch = threadIdx.x + k * DEC_THREADS;
			if (ch < d.r)
				acc[(base + hh) * d.r + ch] = a[hh][k];
		}
}

extern "C" int tf_mla_cuda_decode_split(cudaStream_t stream, const tf_mla_cuda_dims *d,
					const float *qlat, int64_t n, const tf_mla_cuda_cache *c,
					int64_t len, int64_t part_rows, int parts,
					tf_mla_cuda_run *run, float *acc)
{
	if (tf_mla_cuda_check(d) || n < 0 || n > 65535 || len < 0 || part_rows < 1 ||
	    part_rows % MLA_CUDA_TILE || parts < 1 || parts > MLA_CUDA_MAX_PARTS ||
	    (int64_t)parts * part_rows < len + n)
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	const unsigned groups = (unsigned)((d->heads + DEC_HEADS - 1) / DEC_HEADS);
	TF_LAUNCH(dim3(parts, groups, (unsigned)n), DEC_THREADS, 0, stream, decode_split_kernel)(
		*d, qlat, *c, len, part_rows, run, acc);
	return cudaGetLastError();
}

/*
 * One block per (head, query), as mla_absorbed_out: the weight of each
 * part against the largest maximum, the merged latent (parts in order),
 * then DEC_OUT rows of W_UV_h at a time, each by DEC_THREADS / DEC_OUT
 * threads over strided channels whose partial sums one thread adds.
 */
__global__ static void __launch_bounds__(DEC_THREADS)
decode_combine_kernel(tf_mla_cuda_dims d, const float *wkvb, const tf_mla_cuda_run *run,
		      const float *acc, int parts, float *o)
{
	enum { SUB = DEC_THREADS / DEC_OUT };
	__shared__ float coef[MLA_CUDA_MAX_PARTS], lat[MLA_CUDA_MAX_R], part[DEC_OUT][SUB], sum;
	const int h = blockIdx.x, row = threadIdx.x / SUB, sub = threadIdx.x % SUB;
	const int64_t i = blockIdx.y, n = gridDim.y;
	const int64_t stride = n * d.heads;     /* between one part's (i, h) and the next's */
	const tf_mla_cuda_run *rh = run + i * d.heads + h;

	float m = -INFINITY;
	for (int p = 0; p < parts; p++)
		m = fmaxf(m, rh[p * stride].m);
	for (int p = threadIdx.x; p < parts; p += blockDim.x)
		coef[p] = rh[p * stride].m == -INFINITY ? 0.0f : expf(rh[p * stride].m - m);
	__syncthreads();
	if (threadIdx.x == 0) {
		float l = 0.0f;
		for (int p = 0; p < parts; p++)
			if (coef[p] != 0.0f)
				l += rh[p * stride].l * coef[p];
		sum = l;
	}
	const float *ah = acc + (i * d.heads + h) * d.r;
	for (int ch = threadIdx.x; ch < d.r; ch += blockDim.x) {
		float v = 0.0f;
		for (int p = 0; p < parts; p++)
			if (coef[p] != 0.0f)
				v += coef[p] * ah[p * stride * d.r + ch];
		lat[ch] = v;
	}
	__syncthreads();
	const float *wuv = wkvb + ((int64_t)h * (d.dn + d.dv) + d.dn) * d.r;
	for (int e0 = 0; e0 < d.dv; e0 += DEC_OUT) {
		const int e = e0 + row;
		if (e < d.dv) {
			float v = 0.0f;
			for (int ch = sub; ch < d.r; ch += SUB)
				v += wuv[(int64_t)e * d.r + ch] * lat[ch];
			part[row][sub] = v;
		}
		__syncthreads();
		if ((int)threadIdx.x < DEC_OUT && e0 + (int)threadIdx.x < d.dv) {
			float v = 0.0f;
			for (int k = 0; k < SUB; k++)
				v += part[threadIdx.x][k];
			o[(i * d.heads + h) * d.dv + e0 + threadIdx.x] = v / sum;
		}
		__syncthreads();        /* part is read before the next rows */
	}
}

extern "C" int tf_mla_cuda_decode_combine(cudaStream_t stream, const tf_mla_cuda_dims *d,
					  const float *wkvb, const tf_mla_cuda_run *run,
					  const float *acc, int parts, int64_t n, float *o)
{
	if (tf_mla_cuda_check(d) || n < 0 || n > 65535 || parts < 1 || parts > MLA_CUDA_MAX_PARTS)
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	TF_LAUNCH(dim3(d->heads, (unsigned)n), DEC_THREADS, 0, stream, decode_combine_kernel)(
		*d, wkvb, run, acc, parts, o);
	return cudaGetLastError();
}

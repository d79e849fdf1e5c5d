/*
 * simt.h - the CUDA execution model on the CPU, so our .cu files compile
 * with the host C++ compiler and their kernels run in ordinary tests.
 * For correctness only: nothing measured here says anything about speed.
 *
 * A launch runs its blocks one after another on the calling thread; the
 * threads of a block are fibers on that thread, switched only where CUDA
 * threads must wait for each other: __syncthreads, the warp intrinsics,
 * the WMMA calls.  So:
 *
 *  - __shared__ is `static`: one copy per kernel, which is one per block
 *    because blocks never overlap.  It is not reset between blocks.
 *  - __syncthreads is a real barrier.  Threads waiting at different
 *    barriers (by source line), or a thread exiting while others wait,
 *    is a fault.
 *  - Warp intrinsics wait for every lane of their mask.  A lane not in
 *    its own mask, a source lane outside the mask, a mask naming a lane
 *    that exited, or lanes that never meet (a deadlock) is a fault.
 *  - Every launch runs under several schedules (TF_SIMT_SCHEDULES,
 *    default "forward,reverse,random": the order fibers and blocks run in
 *    at each wait) from the same device memory; a kernel whose result in
 *    cudaMalloc'd memory differs between schedules has a race: a fault.
 *  - Out-of-bounds reads and writes of cudaMalloc'd and __shared__ memory
 *    are caught by AddressSanitizer, which the harness is built with.
 *
 * A fault prints the kernel, the block and what went wrong, then aborts;
 * with tf_simt_set_abort(0) it is returned by cudaGetLastError instead.
 * README.md lists what is not detected.
 */
#ifndef TF_SIMT_H
#define TF_SIMT_H

#include <math.h>        /* nvcc declares the math library in device code */

#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct uint3 {
	unsigned x, y, z;
};

struct dim3 {
	unsigned x, y, z;
	constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace tf_simt {

/* Where the running fiber stands; set by the scheduler. */
struct place {
	uint3 thread, block;
	dim3 block_dim, grid_dim;
};
/* The harness's thread-locals are initial-exec: in the general model every
 * threadIdx read from a dlopen()ed module is a __tls_get_addr call, which
 * AddressSanitizer intercepts, and those calls were a third of the device
 * tests' time.  A few bytes, within glibc's static TLS reserve for modules
 * loaded later. */
#define TF_SIMT_TLS thread_local __attribute__((tls_model("initial-exec")))
extern TF_SIMT_TLS const place *here;

void syncthreads(const char *file, int line);

/* The caller's lane: its linear thread index modulo 32. */
int lane();

/* A warp-wide exchange: every lane of `mask` deposits `v`; returns the
 * deposits of all 32 lanes (lanes outside the mask read as 0).  `what`
 * names the intrinsic; lanes of one mask must call the same one.  The
 * result stays valid until the caller's next wait. */
const uint64_t *warp_exchange(unsigned mask, uint64_t v, const char *what);
/* Lane `src` of the last exchange, a fault unless it is in `mask`. */
uint64_t warp_lane(const uint64_t *all, unsigned mask, int src, const char *what);

template <class T> static inline uint64_t to_bits(T v)
{
	static_assert(sizeof(T) <= 8, "shuffled values are at most 8 bytes");
	uint64_t b = 0;
	std::memcpy(&b, &v, sizeof(T));
	return b;
}

template <class T> static inline T from_bits(uint64_t b)
{
	T v;
	std::memcpy(&v, &b, sizeof(T));
	return v;
}

/* The lane a shuffle of `what` reads for the caller (CUDA's width rule). */
template <class T> static inline T shuffle(unsigned mask, T v, int src, const char *what)
{
	const uint64_t *all = warp_exchange(mask, to_bits(v), what);
	return from_bits<T>(warp_lane(all, mask, src, what));
}

/* Runs `thread` as every thread of the grid now, or, on a capturing
 * stream, records it (held by value) to run when the graph is launched. */
cudaError_t launch(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
		   const void *kernel, std::function<void()> thread);

template <class... P> struct launcher {
	const char *name;
	dim3 grid, block;
	size_t smem;
	cudaStream_t stream;
	void (*kernel)(P...);

	/* The arguments are copied, as CUDA copies them at the launch (and
	 * at capture: a graph keeps the values the capture saw). */
	template <class... A> void operator()(A &&...a) const
	{
		std::tuple<P...> args(std::forward<A>(a)...);
		void (*k)(P...) = kernel;
		launch(name, grid, block, smem, stream, reinterpret_cast<const void *>(k),
		       [k, args] { std::apply(k, args); });
	}
};

template <class... P>
static inline launcher<P...> make_launcher(const char *name, dim3 grid, dim3 block, size_t smem,
					   cudaStream_t stream, void (*kernel)(P...))
{
	return launcher<P...>{ name, grid, block, smem, stream, kernel };
}

} /* namespace tf_simt */

#define TF_LAUNCH(grid, block, smem, stream, ...) \
	::tf_simt::make_launcher(#__VA_ARGS__, grid, block, smem, stream, __VA_ARGS__)

#define threadIdx (::tf_simt::here->thread)
#define blockIdx (::tf_simt::here->block)
#define blockDim (::tf_simt::here->block_dim)
#define gridDim (::tf_simt::here->grid_dim)
#define warpSize 32
#define __syncthreads() ::tf_simt::syncthreads(__FILE__, __LINE__)

static inline void __syncwarp(unsigned mask = 0xFFFFFFFFu)
{
	::tf_simt::warp_exchange(mask, 0, "__syncwarp");
}

template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
	return ::tf_simt::shuffle(mask, v, (::tf_simt::lane() & ~(width - 1)) + src % width,
				  "__shfl_sync");
}

template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
	const int lane = ::tf_simt::lane(), src = lane ^ lane_mask;
	/* Past the caller's width group, a lane reads its own value. */
	return ::tf_simt::shuffle(mask, v, (src & ~(width - 1)) > (lane & ~(width - 1)) ? lane : src,
				  "__shfl_xor_sync");
}

template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	const int lane = ::tf_simt::lane(), src = lane - (int)delta;
	return ::tf_simt::shuffle(mask, v, src < (lane & ~(width - 1)) ? lane : src,
				  "__shfl_up_sync");
}

template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	const int lane = ::tf_simt::lane(), src = lane + (int)delta;
	return ::tf_simt::shuffle(mask, v, src >= (lane | (width - 1)) + 1 ? lane : src,
				  "__shfl_down_sync");
}

static inline unsigned __ballot_sync(unsigned mask, int pred)
{
	const uint64_t *all = ::tf_simt::warp_exchange(mask, pred != 0, "__ballot_sync");
	unsigned bits = 0;
	for (int l = 0; l < 32; l++)
		if (mask >> l & 1 && all[l])
			bits |= 1u << l;
	return bits;
}

static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }

/* Atomics: fibers switch only at the waits above, so plain operations are
 * atomic here.  Float atomicAdd makes results depend on order: the
 * schedule comparison reports it, as a GPU would vary. */
template <class T> static inline T atomicAdd(T *p, T v)
{
	T old = *p;
	*p = old + v;
	return old;
}

template <class T> static inline T atomicMax(T *p, T v)
{
	T old = *p;
	*p = old > v ? old : v;
	return old;
}

template <class T> static inline T atomicExch(T *p, T v)
{
	T old = *p;
	*p = v;
	return old;
}

template <class T> static inline T atomicCAS(T *p, T compare, T v)
{
	T old = *p;
	if (old == compare)
		*p = v;
	return old;
}

/* Loads and bit casts. */
template <class T> static inline T __ldg(const T *p) { return *p; }

static inline float __uint_as_float(uint32_t u) { return ::tf_simt::from_bits<float>(u); }
static inline unsigned __float_as_uint(float f) { return (unsigned)::tf_simt::to_bits(f); }

static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c)
{
	for (int i = 0; i < 32; i += 8)
		c += (a >> i & 0xFF) * (b >> i & 0xFF);
	return c;
}

#endif /* TF_SIMT_H */

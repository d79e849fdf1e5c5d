/*
 * test_simt.cpp - the harness catches each class of bug it claims to, and
 * runs correct kernels to the right answer.  Each bug is planted in a
 * small kernel beside its correct twin; the twin must pass clean and the
 * bug must be reported, so a check that stopped working fails here.
 * Out-of-bounds accesses abort (AddressSanitizer), so those run in a
 * child process whose report is read back.
 *
 *     test_simt            prints "N passed, N failed"; exit 1 on a failure
 */
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda_fp16.h"
#include "cuda_runtime.h"

static int passed, failed;

static void check(bool ok, const char *what)
{
	if (ok) {
		passed++;
	} else {
		failed++;
		printf("FAIL %s (last fault: %s)\n", what, tf_simt_last_fault());
	}
}

/* Launch status and fault text of the kernel `launch` runs. */
template <class F> static bool faults(F launch, const char *expect)
{
	cudaGetLastError();
	launch();
	cudaError_t e = cudaGetLastError();
	return e == cudaErrorLaunchFailure && strstr(tf_simt_last_fault(), expect);
}

template <class F> static bool clean(F launch)
{
	cudaGetLastError();
	launch();
	return cudaGetLastError() == cudaSuccess;
}

static uint64_t seed = 12345;

static float rnd()
{
	seed = seed * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((int64_t)(seed >> 40) - (1 << 23)) / (float)(1 << 23);
}

static float *device_random(int n, float *host)
{
	float *d;
	cudaMalloc(&d, (size_t)n * 4);
	for (int i = 0; i < n; i++)
		host[i] = rnd();
	cudaMemcpy(d, host, (size_t)n * 4, cudaMemcpyHostToDevice);
	return d;
}

/* ---- a correct block reduction: shuffles, shared memory, barriers ---- */

__global__ static void block_sums(const float *x, int n, float *y)
{
	__shared__ float partial[32];
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	float v = i < n ? x[i] : 0.0f;
	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_down_sync(0xFFFFFFFFu, v, off);
	if (threadIdx.x % 32 == 0)
		partial[threadIdx.x / 32] = v;
	__syncthreads();
	if (threadIdx.x == 0) {
		float s = 0.0f;
		for (unsigned w = 0; w < blockDim.x / 32; w++)
			s += partial[w];
		y[blockIdx.x] = s;
	}
}

static void test_reduction()
{
	const int n = 1000, block = 96, blocks = (n + block - 1) / block;
	float hx[n], hy[blocks];
	float *x = device_random(n, hx), *y;
	cudaMalloc(&y, blocks * 4);
	bool ok = clean([&] { TF_LAUNCH(blocks, block, 0, 0, block_sums)(x, n, y); });
	cudaMemcpy(hy, y, sizeof(hy), cudaMemcpyDeviceToHost);
	for (int b = 0; b < blocks; b++) {
		double s = 0;
		for (int i = b * block; i < n && i < (b + 1) * block; i++)
			s += hx[i];
		ok &= fabs(hy[b] - s) <= 1e-5 * (1 + fabs(s));
	}
	check(ok, "a block reduction matches the plain sum, without a fault");
	cudaFree(x);
	cudaFree(y);
}

/* ---- every warp intrinsic against its definition ---- */

__global__ static void warp_ops(int *out)
{
	const int l = threadIdx.x;
	int *o = out + 8 * l;
	o[0] = __shfl_sync(0xFFFFFFFFu, 100 + l, 7);
	o[1] = __shfl_sync(0xFFFFFFFFu, 100 + l, 3, 8);         /* lane 3 of each group of 8 */
	o[2] = __shfl_xor_sync(0xFFFFFFFFu, 100 + l, 5);
	o[3] = __shfl_up_sync(0xFFFFFFFFu, 100 + l, 2, 16);
	o[4] = __shfl_down_sync(0xFFFFFFFFu, 100 + l, 3);
	o[5] = (int)__ballot_sync(0xFFFFFFFFu, l % 3 == 0);
	o[6] = __any_sync(0xFFFFFFFFu, l == 31) + 2 * __all_sync(0xFFFFFFFFu, l < 31);
	__syncwarp();
	o[7] = atomicAdd(out + 256, 1) >= 0;
}

static void test_warp_ops()
{
	int *d, h[257];
	cudaMalloc(&d, sizeof(h));
	cudaMemset(d, 0, sizeof(h));
	bool ok = clean([&] { TF_LAUNCH(1, 32, 0, 0, warp_ops)(d); });
	cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
	unsigned ballot = 0;
	for (int l = 0; l < 32; l += 3)
		ballot |= 1u << l;
	for (int l = 0; l < 32; l++) {
		const int *o = h + 8 * l;
		ok &= o[0] == 107 && o[1] == 100 + (l & ~7) + 3 && o[2] == 100 + (l ^ 5);
		ok &= o[3] == 100 + (l % 16 < 2 ? l : l - 2);
		ok &= o[4] == 100 + (l + 3 > 31 ? l : l + 3);
		ok &= (unsigned)o[5] == ballot && o[6] == 1 && o[7] == 1;
	}
	check(ok && h[256] == 32, "shuffles, ballot, any/all, syncwarp and atomicAdd give CUDA's results");
	cudaFree(d);
}

/* ---- a race on shared memory ---- */

template <bool BARRIER> __global__ static void rotate(const float *x, float *y)
{
	__shared__ float s[64];
	s[threadIdx.x] = x[threadIdx.x];
	if (BARRIER)
		__syncthreads();
	y[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}

static void test_race()
{
	float hx[64];
	float *x = device_random(64, hx), *y;
	cudaMalloc(&y, 64 * 4);
	check(clean([&] { TF_LAUNCH(1, 64, 0, 0, rotate<true>)(x, y); }),
	      "a rotation through shared memory with its barrier runs clean");
	/* Fresh inputs: __shared__ still holds the last launch's. */
	cudaFree(x);
	x = device_random(64, hx);
	check(faults([&] { TF_LAUNCH(1, 64, 0, 0, rotate<false>)(x, y); }, "a race"),
	      "the same without the barrier is reported as a race");
	cudaFree(x);
	cudaFree(y);
}

/* ---- barriers not reached by every thread ---- */

__global__ static void split_barrier(float *y)
{
	if (threadIdx.x < 16)
		__syncthreads();
	else
		__syncthreads();
	y[threadIdx.x] = 1.0f;
}

__global__ static void early_exit(float *y, int quit)
{
	if ((int)threadIdx.x == quit)
		return;
	__syncthreads();
	y[threadIdx.x] = 1.0f;
}

static void test_divergent_barrier()
{
	float *y;
	cudaMalloc(&y, 64 * 4);
	check(faults([&] { TF_LAUNCH(1, 64, 0, 0, split_barrier)(y); }, "divergent __syncthreads"),
	      "threads at two different __syncthreads are reported");
	check(clean([&] { TF_LAUNCH(1, 64, 0, 0, early_exit)(y, -1); }),
	      "a barrier every thread reaches runs clean");
	check(faults([&] { TF_LAUNCH(1, 64, 0, 0, early_exit)(y, 9); }, "thread 9 exited"),
	      "a thread exiting while the others wait at __syncthreads is reported");
	cudaFree(y);
}

/* ---- shuffles with a lane missing ---- */

__global__ static void shuffle_without(float *y, int missing, unsigned mask)
{
	float v = (float)threadIdx.x;
	if ((int)threadIdx.x != missing)
		v = __shfl_xor_sync(mask, v, 1);
	y[threadIdx.x] = v;
}

__global__ static void shuffle_vs_barrier(float *y)
{
	float v = (float)threadIdx.x;
	if (threadIdx.x == 5)
		__syncthreads();
	else
		v = __shfl_xor_sync(0xFFFFFFFFu, v, 1);
	y[threadIdx.x] = v;
}

static void test_shuffle_lanes()
{
	float *y;
	cudaMalloc(&y, 32 * 4);
	check(clean([&] { TF_LAUNCH(1, 32, 0, 0, shuffle_without)(y, -1, 0xFFFFFFFFu); }),
	      "a full-warp shuffle runs clean");
	check(faults([&] { TF_LAUNCH(1, 32, 0, 0, shuffle_without)(y, 5, 0xFFFFFFFFu); },
		     "lane 5 of warp 0 has exited"),
	      "a shuffle whose mask names a lane that never calls it is reported");
	check(faults([&] { TF_LAUNCH(1, 32, 0, 0, shuffle_without)(y, -1, 0xFFFFFFFEu); },
		     "not in its mask"),
	      "a lane calling a shuffle outside its own mask is reported");
	check(faults([&] { TF_LAUNCH(1, 32, 0, 0, shuffle_without)(y, 4, 0xFFFFFFEFu); },
		     "reads lane 4, outside the mask"),
	      "a shuffle reading a lane outside the mask is reported");
	check(faults([&] { TF_LAUNCH(1, 32, 0, 0, shuffle_vs_barrier)(y); }, "no thread can go on"),
	      "a shuffle waiting for a lane held at __syncthreads is reported as a deadlock");
	cudaFree(y);
}

/* ---- out-of-bounds accesses (AddressSanitizer, in a child) ---- */

__global__ static void copy_shifted(const float *x, float *y, int shift)
{
	y[threadIdx.x] = x[(int)threadIdx.x + shift];
}

__global__ static void shared_shifted(const float *x, float *y, int shift)
{
	__shared__ float s[32];
	s[threadIdx.x] = x[threadIdx.x];
	__syncthreads();
	y[threadIdx.x] = s[threadIdx.x + shift];
}

/* Runs `body` in a child; its exit status and what it wrote to stderr. */
template <class F> static bool child_reports(F body, const char *expect)
{
	int fd[2];
	if (pipe(fd))
		return false;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 2);
		close(fd[0]);
		body();
		_exit(0);
	}
	close(fd[1]);
	std::string err;
	char buf[4096];
	ssize_t got;
	while ((got = read(fd[0], buf, sizeof(buf))) > 0)
		err.append(buf, (size_t)got);
	close(fd[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	const bool died = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	return died && err.find(expect) != std::string::npos;
}

static void test_out_of_bounds()
{
	float hx[32];
	float *x = device_random(32, hx), *y;
	cudaMalloc(&y, 32 * 4);
	check(!child_reports([&] { TF_LAUNCH(1, 32, 0, 0, copy_shifted)(x, y, 0); }, ""),
	      "in-bounds global reads run clean in the child");
	check(child_reports([&] { TF_LAUNCH(1, 32, 0, 0, copy_shifted)(x, y, 1); },
			    "heap-buffer-overflow"),
	      "a global read one past a cudaMalloc'd buffer is reported");
	check(child_reports([&] { TF_LAUNCH(1, 32, 0, 0, copy_shifted)(x, y, -1); },
			    "heap-buffer-overflow"),
	      "a global read one before a cudaMalloc'd buffer is reported");
	check(!child_reports([&] { TF_LAUNCH(1, 32, 0, 0, shared_shifted)(x, y, 0); }, ""),
	      "in-bounds shared reads run clean in the child");
	check(child_reports([&] { TF_LAUNCH(1, 32, 0, 0, shared_shifted)(x, y, 1); },
			    "global-buffer-overflow"),
	      "a __shared__ read one past its array is reported");
	check(child_reports([] { tf_simt_set_abort(1); TF_LAUNCH(1, 64, 0, 0, split_barrier)(nullptr); },
			    "simt: split_barrier: block (0,0,0): divergent __syncthreads"),
	      "by default a fault prints the kernel and block and aborts");
	cudaFree(x);
	cudaFree(y);
}

/* ---- launches a GPU refuses ---- */

static void test_bad_launch()
{
	float *y;
	cudaMalloc(&y, 32 * 4);
	bool ok = true;
	const dim3 grids[] = { 1, 0, dim3(1, 65536) }, blocks[] = { 1025, 32, 32 };
	for (int i = 0; i < 3; i++) {
		cudaGetLastError();
		TF_LAUNCH(grids[i], blocks[i], 0, 0, early_exit)(y, -1);
		ok &= cudaGetLastError() == cudaErrorInvalidConfiguration;
	}
	check(ok, "too many threads, an empty grid or too tall a grid is refused");
	cudaFree(y);
}

/* ---- stream capture and graph replay ---- */

__global__ static void axpb(float *y, const float *x, float a, float b, int n)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = a * x[i] + b;
}

/* The fault a runtime call made (its error, and the fault's text). */
template <class F> static bool api_faults(F call, cudaError_t e, const char *expect)
{
	cudaGetLastError();
	cudaError_t got = call();
	return got == e && cudaGetLastError() == e && strstr(tf_simt_last_fault(), expect);
}

/* A capture of: copy pinned src -> x, y = a x + b, memset of z's first
 * word, copy y -> pinned out.  Nothing may run before the launch. */
struct chain {
	cudaStream_t s;
	float *x, *y, *z, *src, *out;
	int n;
};

static cudaGraph_t chain_capture(const chain &c, float a, float b, bool with_memset)
{
	cudaGraph_t g = nullptr;
	cudaStreamBeginCapture(c.s, cudaStreamCaptureModeGlobal);
	cudaMemcpyAsync(c.x, c.src, (size_t)c.n * 4, cudaMemcpyHostToDevice, c.s);
	TF_LAUNCH((c.n + 63) / 64, 64, 0, c.s, axpb)(c.y, c.x, a, b, c.n);
	if (with_memset)
		cudaMemsetAsync(c.z, 0, 4, c.s);
	cudaMemcpyAsync(c.out, c.y, (size_t)c.n * 4, cudaMemcpyDeviceToHost, c.s);
	cudaStreamEndCapture(c.s, &g);
	return g;
}

static bool chain_gives(const chain &c, float a, float b)
{
	bool ok = true;
	for (int i = 0; i < c.n; i++)
		ok &= c.out[i] == a * c.src[i] + b;
	return ok;
}

static void test_graph_replay()
{
	chain c{};
	c.n = 100;
	cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking);
	cudaMalloc(&c.x, 400);
	cudaMalloc(&c.y, 400);
	cudaMalloc(&c.z, 4);
	cudaMallocHost(&c.src, 400);
	cudaMallocHost(&c.out, 400);
	for (int i = 0; i < c.n; i++)
		c.src[i] = rnd();
	cudaGetLastError();
	float a = 3.0f;
	cudaGraph_t g = chain_capture(c, a, 0.5f, true);
	a = 7.0f;               /* after the capture: the graph keeps 3 */
	bool idle = std::isnan(c.out[0]);
	cudaStreamCaptureStatus st;
	cudaStreamIsCapturing(c.s, &st);
	check(g && idle && st == cudaStreamCaptureStatusNone && cudaGetLastError() == cudaSuccess,
	      "a capture records its launch, memset and copies and runs none of them");
	cudaGraphExec_t x = nullptr;
	bool ok = cudaGraphInstantiate(&x, g, 0) == cudaSuccess &&
		  cudaGraphLaunch(x, c.s) == cudaSuccess && chain_gives(c, 3.0f, 0.5f);
	for (int i = 0; i < c.n; i++)   /* a replay reads the pinned source as it is now */
		c.src[i] = rnd();
	ok &= cudaGraphLaunch(x, c.s) == cudaSuccess && chain_gives(c, 3.0f, 0.5f);
	check(ok && a == 7.0f, "a replay runs with the arguments of the capture and the pinned "
	      "source's bytes at the launch");
	cudaGraphDestroy(g);

	cudaGraphExecUpdateResultInfo info;
	g = chain_capture(c, -2.0f, 1.0f, true);
	ok = cudaGraphExecUpdate(x, g, &info) == cudaSuccess &&
	     info.result == cudaGraphExecUpdateSuccess && cudaGraphLaunch(x, c.s) == cudaSuccess &&
	     chain_gives(c, -2.0f, 1.0f);
	cudaGraphDestroy(g);
	g = chain_capture(c, 5.0f, 1.0f, false);
	ok &= cudaGraphExecUpdate(x, g, &info) == cudaErrorGraphExecUpdateFailure &&
	      cudaGetLastError() == cudaErrorGraphExecUpdateFailure &&
	      info.result == cudaGraphExecUpdateErrorTopologyChanged &&
	      cudaGraphLaunch(x, c.s) == cudaSuccess && chain_gives(c, -2.0f, 1.0f);
	check(ok, "an update takes a same-shaped capture's parameters and refuses another shape");
	cudaGraphDestroy(g);
	cudaGraphExecDestroy(x);
	cudaFree(c.x);
	cudaFree(c.y);
	cudaFree(c.z);
	cudaFreeHost(c.src);
	cudaFreeHost(c.out);
	cudaStreamDestroy(c.s);
}

/* Stream-ordered scratch inside a capture: memory nodes the graph owns
 * (LeakSanitizer checks that they go with it). */
static void test_graph_memory()
{
	cudaStream_t s;
	cudaGraph_t g = nullptr;
	cudaGraphExec_t x = nullptr;
	float *src, *y, *t = nullptr, *outside;
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	cudaMallocHost(&src, 64 * 4);
	cudaMalloc(&y, 64 * 4);
	cudaMalloc(&outside, 4);
	for (int i = 0; i < 64; i++)
		src[i] = rnd();
	cudaGetLastError();
	cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
	cudaMallocAsync((void **)&t, 64 * 4, s);
	cudaMemcpyAsync(t, src, 64 * 4, cudaMemcpyHostToDevice, s);
	TF_LAUNCH(1, 64, 0, s, axpb)(y, t, 2.0f, -1.0f, 64);
	cudaFreeAsync(t, s);
	bool ok = cudaStreamEndCapture(s, &g) == cudaSuccess && g &&
		  cudaGraphInstantiate(&x, g, 0) == cudaSuccess;
	cudaGraphDestroy(g);
	for (int rep = 0; rep < 2; rep++) {
		float h[64];
		ok &= cudaGraphLaunch(x, s) == cudaSuccess &&
		      cudaMemcpy(h, y, sizeof(h), cudaMemcpyDeviceToHost) == cudaSuccess;
		for (int i = 0; i < 64; i++)
			ok &= h[i] == 2.0f * src[i] - 1.0f;
		src[0] += 1.0f;
	}
	check(ok && cudaGetLastError() == cudaSuccess,
	      "cudaMallocAsync and cudaFreeAsync in a capture become memory nodes a replay reuses");
	cudaGraphExecDestroy(x);
	cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
	check(api_faults([&] { return cudaFreeAsync(outside, s); }, cudaErrorStreamCaptureUnsupported,
			 "memory the capture did not allocate"),
	      "cudaFreeAsync in a capture of memory from outside it is refused as not modelled");
	cudaStreamEndCapture(s, &g);
	cudaGetLastError();
	cudaFree(outside);
	cudaFree(y);
	cudaFreeHost(src);
	cudaStreamDestroy(s);
}

static void test_graph_faults()
{
	cudaStream_t s, other;
	cudaEvent_t ev;
	cudaGraph_t g = nullptr;
	float *d, *pinned, pageable[16];
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
	cudaEventCreate(&ev);
	cudaMalloc(&d, 64);
	cudaMallocHost(&pinned, 64);
	cudaGetLastError();

	/* A host wait on the capturing stream; on another stream, none. */
	cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
	check(cudaStreamSynchronize(other) == cudaSuccess, "a sync of a stream not being captured "
	      "during a capture runs clean");
	check(api_faults([&] { return cudaStreamSynchronize(s); }, cudaErrorStreamCaptureUnsupported,
			 "cudaStreamSynchronize on a stream being captured"),
	      "cudaStreamSynchronize on the capturing stream is a fault");
	check(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated && !g,
	      "the capture a host wait spoiled ends without a graph");
	cudaGetLastError();

	cudaEventRecord(ev, s);                 /* before the capture: may be waited for */
	cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
	check(cudaEventSynchronize(ev) == cudaSuccess,
	      "waiting for an event recorded before the capture runs clean");
	cudaEventRecord(ev, s);
	check(api_faults([&] { return cudaEventSynchronize(ev); }, cudaErrorStreamCaptureUnsupported,
			 "cudaEventSynchronize on an event recorded inside"),
	      "waiting for an event recorded inside the capture is a fault");
	cudaStreamEndCapture(s, &g);
	cudaGetLastError();

	/* Pageable host memory on either side of a captured copy. */
	cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
	check(cudaMemcpyAsync(d, pinned, 64, cudaMemcpyHostToDevice, s) == cudaSuccess &&
	      cudaMemcpyAsync(pinned, d, 64, cudaMemcpyDeviceToHost, s) == cudaSuccess,
	      "captured copies to and from cudaMallocHost memory run clean");
	check(api_faults([&] { return cudaMemcpyAsync(d, pageable, 64, cudaMemcpyHostToDevice, s); },
			 cudaErrorStreamCaptureUnsupported, "from pageable host memory"),
	      "a captured copy from pageable host memory is a fault naming the rule");
	cudaStreamEndCapture(s, &g);
	cudaGetLastError();
	cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
	check(api_faults([&] { return cudaMemcpyAsync(pageable, d, 64, cudaMemcpyDeviceToHost, s); },
			 cudaErrorStreamCaptureUnsupported, "into pageable host memory"),
	      "a captured copy into pageable host memory is a fault");
	cudaStreamEndCapture(s, &g);
	cudaGetLastError();

	/* Allocation: unsafe in global mode, allowed in relaxed. */
	float *extra = nullptr;
	cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
	check(cudaMalloc(&extra, 64) == cudaSuccess && cudaFree(extra) == cudaSuccess,
	      "cudaMalloc and cudaFree during a relaxed capture run clean");
	check(cudaStreamEndCapture(s, &g) == cudaSuccess && g, "that capture ends with a graph");
	cudaGraphDestroy(g);
	cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
	check(api_faults([&] { return cudaMalloc(&extra, 64); }, cudaErrorStreamCaptureUnsupported,
			 "cudaMalloc while a stream capture in cudaStreamCaptureModeGlobal"),
	      "cudaMalloc during a global capture is a fault");
	cudaStreamEndCapture(s, &g);
	cudaGetLastError();

	/* A replay whose host source was freed since the capture (the address
	 * may be handed out again: the serial tells); beside it the same graph
	 * with the source alive. */
	cudaGraphExec_t x = nullptr;
	cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
	cudaMemcpyAsync(d, pinned, 64, cudaMemcpyHostToDevice, s);
	cudaStreamEndCapture(s, &g);
	cudaGraphInstantiate(&x, g, 0);
	cudaGraphDestroy(g);
	pinned[0] = 42.0f;
	float back = 0;
	check(cudaGraphLaunch(x, s) == cudaSuccess &&
	      cudaMemcpy(&back, d, 4, cudaMemcpyDeviceToHost) == cudaSuccess && back == 42.0f,
	      "a replay from a live pinned source runs clean");
	cudaFreeHost(pinned);
	check(api_faults([&] { return cudaGraphLaunch(x, s); }, cudaErrorInvalidValue,
			 "in an allocation freed since the capture"),
	      "a replay whose captured host source was freed since is a fault");
	cudaGraphExecDestroy(x);
	cudaFree(d);
	cudaEventDestroy(ev);
	cudaStreamDestroy(s);
	cudaStreamDestroy(other);
}

/* ---- host memory registered for the device ---- */

/* A kernel reads registered host memory in place; what CUDA refuses
 * about registrations is a fault: a page registered twice, unregistering
 * what was not registered, the device address of unregistered memory, a
 * copy whose device side is plain host memory or read-only registered
 * memory, cudaFree of a registered range. */
static void test_host_register()
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *m = (char *)mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	const int n = 100;
	float *x = (float *)(m + 96), *y, h[n], out[n];
	void *d = nullptr;
	for (int i = 0; i < n; i++)
		x[i] = rnd();
	cudaMalloc(&y, n * 4);
	int integrated = -1, mapped = -1;
	unsetenv("TF_SIMT_INTEGRATED");
	cudaDeviceGetAttribute(&integrated, cudaDevAttrIntegrated, 0);
	setenv("TF_SIMT_INTEGRATED", "1", 1);
	cudaDeviceGetAttribute(&mapped, cudaDevAttrIntegrated, 0);
	unsetenv("TF_SIMT_INTEGRATED");
	check(integrated == 0 && mapped == 1, "TF_SIMT_INTEGRATED=1 makes the device integrated");

	/* Not page-aligned: the pages around it register. */
	bool ok = cudaHostRegister(x, n * 4, cudaHostRegisterMapped | cudaHostRegisterReadOnly) ==
		  cudaSuccess && cudaHostGetDevicePointer(&d, x + 10, 0) == cudaSuccess &&
		  d == x + 10;
	ok &= cudaHostRegister(m + 2 * page + 8, 64, cudaHostRegisterMapped) == cudaSuccess;
	ok &= clean([&] { TF_LAUNCH(2, 64, 0, 0, axpb)(y, (const float *)d - 10, 2.0f, 1.0f, n); });
	ok &= cudaMemcpy(out, y, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess;
	ok &= cudaMemcpy(h, x, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess;
	for (int i = 0; i < n; i++)
		ok &= out[i] == 2.0f * x[i] + 1.0f && h[i] == x[i];
	ok &= cudaMemcpy(m + 2 * page + 8, h, 64, cudaMemcpyHostToDevice) == cudaSuccess;
	ok &= cudaGetLastError() == cudaSuccess;
	check(ok, "a kernel and copies read registered host memory in place; a writable range "
	      "takes a copy; ranges on other pages register");

	check(api_faults([&] { return cudaHostRegister(m + page - 8, 16, cudaHostRegisterMapped); },
			 cudaErrorHostMemoryAlreadyRegistered, "overlap"),
	      "registering a page already registered is a fault");
	check(api_faults([&] { return cudaHostUnregister(x + 1); }, cudaErrorHostMemoryNotRegistered,
			 "does not start a range"),
	      "unregistering an address that starts no registration is a fault");
	check(api_faults([&] { return cudaHostGetDevicePointer(&d, m + 3 * page, 0); },
			 cudaErrorInvalidValue, "neither registered"),
	      "the device address of unregistered host memory is a fault");
	check(api_faults([&] { return cudaMemcpy(m + 3 * page, h, 64, cudaMemcpyHostToDevice); },
			 cudaErrorInvalidValue, "neither device memory nor registered"),
	      "a copy whose device side is plain host memory is a fault");
	check(api_faults([&] { return cudaMemcpy(x, h, 64, cudaMemcpyHostToDevice); },
			 cudaErrorInvalidValue, "registered read-only"),
	      "a copy into host memory registered read-only is a fault");
	check(api_faults([&] { return cudaFree(x); }, cudaErrorInvalidValue, "cudaHostUnregister it"),
	      "cudaFree of a registered range is a fault");

	ok = cudaHostUnregister(x) == cudaSuccess && cudaHostUnregister(m + 2 * page + 8) ==
	     cudaSuccess && cudaGetLastError() == cudaSuccess;
	check(ok && api_faults([&] { return cudaHostGetDevicePointer(&d, x, 0); },
			       cudaErrorInvalidValue, "neither registered"),
	      "unregistered, a range is plain host memory again");
	cudaFree(y);
	munmap(m, 4 * page);
}

/* ---- fp16 ---- */

static void test_fp16()
{
	bool ok = true;
	for (unsigned h = 0; h < 0x10000; h++) {
		const float f = __half2float(__ushort_as_half((unsigned short)h));
		if (!std::isnan(f))
			ok &= __float2half_rn(f).bits == h;
	}
	/* Halfway cases round to even; past the largest finite value, inf. */
	ok &= __float2half_rn(1.0f + 0x1p-11f).bits == 0x3C00;
	ok &= __float2half_rn(1.0f + 3 * 0x1p-11f).bits == 0x3C02;
	ok &= __float2half_rn(0x1p-25f).bits == 0 && __float2half_rn(0x1.8p-24f).bits == 2;
	ok &= __float2half_rn(65519.0f).bits == 0x7BFF && __float2half_rn(65520.0f).bits == 0x7C00;
	check(ok, "fp16 conversions round-trip and round to nearest even");
}

int main()
{
	tf_simt_set_abort(0);
	test_reduction();
	test_warp_ops();
	test_race();
	test_divergent_barrier();
	test_shuffle_lanes();
	test_out_of_bounds();
	test_bad_launch();
	test_graph_replay();
	test_graph_memory();
	test_graph_faults();
	test_host_register();
	test_fp16();
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}

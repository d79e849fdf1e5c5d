/*
 * simt.cpp - the harness's launcher: blocks run one after another, the
 * threads of a block as fibers (context.h) on the calling thread, each
 * running until it must wait (simt.h says where); the scheduler resumes
 * them in the order of the current schedule, releases a barrier once
 * every thread has reached it, and reports a block that can go no
 * further.  Each launch runs once per schedule from the same device
 * memory and the results must agree byte for byte.
 */
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "context.h"
#include "harness.h"
#include "simt.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define TF_SIMT_ASAN 1
#else
#define TF_SIMT_ASAN 0
#endif

namespace tf_simt {

TF_SIMT_TLS const place *here;

namespace {

enum schedule { FORWARD, REVERSE, RANDOM };
const char *const schedule_names[] = { "forward", "reverse", "random" };

/* IN_EXCHANGE: arrived at a warp exchange, resumed once it completes;
 * JOINING: waiting for another group's exchange in its warp to finish. */
enum fiber_state { RUNNING, JOINING, IN_EXCHANGE, AT_BARRIER, EXITED };

struct fiber {
	context ctx;
	place where;
	int index;                      /* linear thread index in the block */
	fiber_state state;
	const char *barrier_file;
	int barrier_line;
	uint64_t exchanged[32];         /* the values of its last warp exchange */
	void *fake_stack;               /* AddressSanitizer's fiber bookkeeping */
};

/* One warp's exchange in progress: lanes of `mask` deposit values; the
 * last to arrive hands every lane all of them. */
struct warp {
	unsigned mask, arrived;
	const char *what;
	uint64_t value[32];
};

struct block_run {
	const char *kernel;
	const std::function<void()> *body;
	std::vector<fiber> fibers;
	std::vector<warp> warps;
	fiber *current;
	context scheduler;
	const void *scheduler_stack;    /* for AddressSanitizer */
	size_t scheduler_stack_size;
	void *scheduler_fake_stack;
	bool progress, faulted;
};

TF_SIMT_TLS block_run *run;

/* Names from one call site are one literal: compare the pointers first
 * (AddressSanitizer's strcmp was 5% of the device tests' time). */
bool same_str(const char *a, const char *b)
{
	return a == b || !strcmp(a, b);
}
bool abort_on_fault = true;
std::string last_fault;
const size_t stack_bytes = 64 << 10;

/* Record (or print and abort on) a fault; inside a fiber, never returns:
 * the block is abandoned (so nothing on the heap may be live there). */
void report(const char *msg)
{
	last_fault = "simt: " + std::string(run->kernel) + ": " + msg;
	if (abort_on_fault) {
		fprintf(stderr, "%s\n", last_fault.c_str());
		abort();
	}
	set_error(cudaErrorLaunchFailure);
	run->faulted = true;
	if (run->current) {
		fiber *f = run->current;
#if TF_SIMT_ASAN
		__sanitizer_start_switch_fiber(nullptr, run->scheduler_stack, run->scheduler_stack_size);
#endif
		context_switch(f->ctx, run->scheduler);
		abort();        /* an abandoned fiber is never resumed */
	}
}

/* A fault in the running block. */
[[gnu::format(printf, 1, 2)]] void fault(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	const uint3 b = run->fibers[0].where.block;
	char at[1100];
	snprintf(at, sizeof(at), "block (%u,%u,%u): %s", b.x, b.y, b.z, msg);
	report(at);
}

/* Back to the scheduler until resumed. */
void yield()
{
	fiber *f = run->current;
#if TF_SIMT_ASAN
	__sanitizer_start_switch_fiber(&f->fake_stack, run->scheduler_stack, run->scheduler_stack_size);
#endif
	context_switch(f->ctx, run->scheduler);
#if TF_SIMT_ASAN
	__sanitizer_finish_switch_fiber(f->fake_stack, nullptr, nullptr);
#endif
}

void fiber_main()
{
#if TF_SIMT_ASAN
	__sanitizer_finish_switch_fiber(nullptr, &run->scheduler_stack, &run->scheduler_stack_size);
#endif
	(*run->body)();
	fiber *f = run->current;
	f->state = EXITED;
	run->progress = true;
#if TF_SIMT_ASAN
	__sanitizer_start_switch_fiber(nullptr, run->scheduler_stack, run->scheduler_stack_size);
#endif
	context_switch(f->ctx, run->scheduler);
	abort();
}

void resume(fiber *f, char *stack)
{
	run->current = f;
	here = &f->where;
	if (f->state == RUNNING)
		run->progress = true;
#if TF_SIMT_ASAN
	__sanitizer_start_switch_fiber(&run->scheduler_fake_stack, stack, stack_bytes);
#endif
	context_switch(run->scheduler, f->ctx);
#if TF_SIMT_ASAN
	__sanitizer_finish_switch_fiber(run->scheduler_fake_stack, nullptr, nullptr);
#endif
	run->current = nullptr;
	here = nullptr;
}

std::vector<unsigned> order(schedule s, unsigned n, std::mt19937_64 &rng)
{
	std::vector<unsigned> o(n);
	for (unsigned i = 0; i < n; i++)
		o[i] = s == REVERSE ? n - 1 - i : i;
	if (s == RANDOM)
		std::shuffle(o.begin(), o.end(), rng);
	return o;
}

std::string describe_deadlock()
{
	std::string d = "no thread can go on:";
	char line[256];
	for (size_t w = 0; w < run->warps.size(); w++) {
		const warp &wp = run->warps[w];
		if (wp.arrived) {
			snprintf(line, sizeof(line), " %s (mask 0x%08x) in warp %zu waits for lanes 0x%08x;",
				 wp.what, wp.mask, w, wp.mask & ~wp.arrived);
			d += line;
		}
	}
	for (const fiber &f : run->fibers)
		if (f.state == AT_BARRIER) {
			snprintf(line, sizeof(line), " thread %d waits at __syncthreads (%s:%d);", f.index,
				 f.barrier_file, f.barrier_line);
			d += line;
			break;
		}
	return d;
}

/* After a pass where nothing runs: release a barrier every thread has
 * reached at one place, or report why the block is stuck. */
void at_rest()
{
	const fiber *first = nullptr, *gone = nullptr;
	for (size_t w = 0; w < run->warps.size(); w++)
		for (int l = 0; l < 32 && run->warps[w].arrived; l++) {
			const warp &wp = run->warps[w];
			const size_t t = 32 * w + (size_t)l;
			if (wp.mask >> l & 1 && !(wp.arrived >> l & 1) &&
			    (t >= run->fibers.size() || run->fibers[t].state == EXITED))
				return fault("%s with mask 0x%08x: lane %d of warp %zu %s", wp.what,
					     wp.mask, l, w, t >= run->fibers.size() ? "does not exist"
										  : "has exited");
		}
	for (const fiber &f : run->fibers) {
		if (f.state == EXITED)
			gone = gone ? gone : &f;
		else if (f.state != AT_BARRIER)
			return run->progress ? void() : fault("%s", describe_deadlock().c_str());
		else if (!first)
			first = &f;
		else if (f.barrier_line != first->barrier_line ||
			 !same_str(f.barrier_file, first->barrier_file))
			return fault("divergent __syncthreads: thread %d waits at %s:%d, thread %d at %s:%d",
				     first->index, first->barrier_file, first->barrier_line, f.index,
				     f.barrier_file, f.barrier_line);
	}
	if (gone)
		return fault("divergent __syncthreads: thread %d exited while thread %d waits at %s:%d",
			     gone->index, first->index, first->barrier_file, first->barrier_line);
	for (fiber &f : run->fibers)
		f.state = RUNNING;
	run->progress = true;
}

void run_block(block_run &r, dim3 grid, dim3 block, uint3 b, schedule s, std::mt19937_64 &rng,
	       char *stacks)
{
	const unsigned n = block.x * block.y * block.z;
	r.faulted = false;
	r.current = nullptr;
	for (unsigned i = 0; i < n; i++) {
		fiber &f = r.fibers[i];
		f.where = place{ uint3{ i % block.x, i / block.x % block.y, i / (block.x * block.y) }, b,
				 block, grid };
		f.index = (int)i;
		f.state = RUNNING;
		context_start(f.ctx, stacks + i * stack_bytes, stack_bytes, fiber_main);
	}
	for (warp &w : r.warps)
		w = warp{};
	for (;;) {
		r.progress = false;
		bool live = false;
		for (unsigned i : order(s, n, rng)) {
			fiber &f = r.fibers[i];
			if (f.state == RUNNING || f.state == JOINING)
				resume(&f, stacks + i * stack_bytes);
			if (r.faulted)
				return;
			live |= f.state != EXITED;
		}
		if (!live)
			return;
		at_rest();
		if (r.faulted)
			return;
	}
}

std::vector<schedule> schedules()
{
	const char *env = getenv("TF_SIMT_SCHEDULES");
	std::string list = env && *env ? env : "forward,reverse,random";
	std::vector<schedule> out;
	size_t at = 0;
	while (at <= list.size()) {
		size_t end = list.find(',', at);
		std::string name = list.substr(at, end == std::string::npos ? std::string::npos : end - at);
		int s = 0;
		while (s < 3 && name != schedule_names[s])
			s++;
		if (s == 3) {
			fprintf(stderr, "simt: TF_SIMT_SCHEDULES: unknown schedule '%s'\n", name.c_str());
			exit(2);
		}
		out.push_back((schedule)s);
		if (end == std::string::npos)
			break;
		at = end + 1;
	}
	return out;
}

std::vector<std::vector<char>> save(const std::vector<region> &rs)
{
	std::vector<std::vector<char>> img;
	for (const region &r : rs)
		img.emplace_back(r.p, r.p + r.bytes);
	return img;
}

void restore(const std::vector<region> &rs, const std::vector<std::vector<char>> &img)
{
	for (size_t i = 0; i < rs.size(); i++)
		memcpy(rs[i].p, img[i].data(), rs[i].bytes);
}

/* The whole grid under one schedule; false after a fault. */
bool run_grid(block_run &r, dim3 grid, dim3 block, schedule s, uint64_t seed, char *stacks)
{
	std::mt19937_64 rng(seed);
	const unsigned blocks = grid.x * grid.y * grid.z;
	for (unsigned i : order(s, blocks, rng)) {
		uint3 b{ i % grid.x, i / grid.x % grid.y, i / (grid.x * grid.y) };
		run_block(r, grid, block, b, s, rng, stacks);
		if (r.faulted)
			return false;
	}
	return true;
}

} /* namespace */

int lane()
{
	return run->current->index % 32;
}

void syncthreads(const char *file, int line)
{
	fiber *f = run->current;
	f->state = AT_BARRIER;
	f->barrier_file = file;
	f->barrier_line = line;
	yield();
}

const uint64_t *warp_exchange(unsigned mask, uint64_t v, const char *what)
{
	fiber *f = run->current;
	const int l = f->index % 32, base = f->index - l;
	warp &w = run->warps[f->index / 32];
	if (!(mask >> l & 1))
		fault("%s: lane %d of warp %d is not in its mask 0x%08x", what, l, base / 32, mask);
	/* Join when no other group is in progress in this warp. */
	while (w.arrived && (w.mask != mask || !same_str(w.what, what))) {
		f->state = JOINING;
		yield();
	}
	if (!w.arrived) {
		w.mask = mask;
		w.what = what;
	}
	w.value[l] = v;
	w.arrived |= 1u << l;
	run->progress = true;
	if (w.arrived != mask) {
		f->state = IN_EXCHANGE;
		yield();
		return f->exchanged;
	}
	for (int i = 0; i < 32; i++) {
		if (!(mask >> i & 1))
			continue;
		fiber &g = run->fibers[base + i];
		for (int j = 0; j < 32; j++)
			g.exchanged[j] = mask >> j & 1 ? w.value[j] : 0;
		g.state = RUNNING;
	}
	w = warp{};
	return f->exchanged;
}

uint64_t warp_lane(const uint64_t *all, unsigned mask, int src, const char *what)
{
	if (src < 0 || src > 31 || !(mask >> src & 1))
		fault("%s with mask 0x%08x: lane %d reads lane %d, outside the mask", what, mask,
		      lane(), src);
	return all[src];
}

namespace {

/* The grid now, under every schedule. */
cudaError_t run_launch(const char *name, dim3 grid, dim3 block, size_t smem,
		       const std::function<void()> &thread)
{
	const uint64_t threads = (uint64_t)block.x * block.y * block.z;
	static TF_SIMT_TLS uint64_t launches;
	const uint64_t seed = launches++;
	block_run r{};
	r.kernel = name;
	r.body = &thread;
	r.fibers.resize(threads);
	r.warps.resize((threads + 31) / 32);
	block_run *outer = run;
	run = &r;
	if (smem) {
		char msg[128];
		snprintf(msg, sizeof(msg), "dynamic shared memory (%zu bytes) is not supported "
			 "by the harness", smem);
		report(msg);
		run = outer;
		return cudaErrorLaunchFailure;
	}
	char *stacks = (char *)mmap(nullptr, threads * stack_bytes, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (stacks == MAP_FAILED) {
		run = outer;
		set_error(cudaErrorMemoryAllocation);
		return cudaErrorMemoryAllocation;
	}
	/* A guard page under each stack turns an overflow into a crash. */
	for (uint64_t i = 0; i < threads; i++)
		mprotect(stacks + i * stack_bytes, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE);

	const std::vector<schedule> order_list = schedules();
	const std::vector<region> mem = device_regions();
	std::vector<std::vector<char>> before, first;
	if (order_list.size() > 1)
		before = save(mem);
	for (size_t k = 0; k < order_list.size() && !r.faulted; k++) {
		if (k)
			restore(mem, before);
		if (!run_grid(r, grid, block, order_list[k], seed, stacks))
			break;
		if (!k) {
			if (order_list.size() > 1)
				first = save(mem);
			continue;
		}
		for (size_t i = 0; i < mem.size() && !r.faulted; i++) {
			if (!memcmp(first[i].data(), mem[i].p, mem[i].bytes))
				continue;
			size_t at = 0;
			while (first[i][at] == mem[i].p[at])
				at++;
			char msg[512];
			snprintf(msg, sizeof(msg), "a race: the result depends on the thread schedule "
				 "(%s and %s differ at byte %zu of the %zu-byte allocation at %p)",
				 schedule_names[order_list[0]], schedule_names[order_list[k]], at,
				 mem[i].bytes, (void *)mem[i].p);
			report(msg);
		}
	}
#if TF_SIMT_ASAN
	/* An abandoned fiber leaves its frames' redzones behind. */
	if (r.faulted)
		__asan_unpoison_memory_region(stacks, threads * stack_bytes);
#endif
	munmap(stacks, threads * stack_bytes);
	run = outer;
	return r.faulted ? cudaErrorLaunchFailure : cudaSuccess;
}

} /* namespace */

/* A configuration the GPU refuses fails at the launch, captured or not. */
cudaError_t launch(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
		   const void *kernel, std::function<void()> thread)
{
	const uint64_t threads = (uint64_t)block.x * block.y * block.z;
	if (!threads || threads > 1024 || block.z > 64 || !grid.x || !grid.y || !grid.z ||
	    grid.y > 65535 || grid.z > 65535 || (uint64_t)grid.x * grid.y * grid.z > 0xFFFFFFFFu) {
		set_error(cudaErrorInvalidConfiguration);
		return cudaErrorInvalidConfiguration;
	}
	if (capture_launch(stream, kernel, [=] { return run_launch(name, grid, block, smem, thread); }))
		return cudaSuccess;
	return run_launch(name, grid, block, smem, thread);
}

cudaError_t api_fault(cudaError_t e, const char *what)
{
	last_fault = std::string("simt: ") + what;
	if (abort_on_fault) {
		fprintf(stderr, "%s\n", last_fault.c_str());
		abort();
	}
	set_error(e);
	return e;
}

} /* namespace tf_simt */

extern "C" void tf_simt_set_abort(int on)
{
	tf_simt::abort_on_fault = on != 0;
}

extern "C" const char *tf_simt_last_fault(void)
{
	return tf_simt::last_fault.c_str();
}

/*
 * pipes.c - which AVX-512 operations of the EXL3 kernels compete for the
 * same execution pipe, and the resulting bound of the 8-bit kernel
 * (bench/exl3/README.md, "What bounds them").
 *
 *     pipes            cycles per operation, alone and in pairs
 *
 * Each test runs 8 independent chains of zmm operations in a loop; cycles
 * come from the time of a dependent scalar-add loop run first (one add a
 * cycle), so the figures hold whatever the clock.  Two operations that
 * take one cycle each alone and two cycles per pair together share a pipe.
 * x86-64 with AVX-512 VNNI only; the program says so elsewhere.
 */
#include <stdio.h>
#include <time.h>

#define LOOPS 20000000L

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#if defined(__x86_64__)
#define CLOBBER "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", \
		"xmm12", "xmm13", "xmm14", "xmm15", "memory"

/* Chain r of an operation, operands zmm15/zmm14 fixed. */
#define MUL(r) "vpmulld %%zmm15, %%zmm" #r ", %%zmm" #r "\n"
#define DP(r) "vpdpbusd %%zmm15, %%zmm14, %%zmm" #r "\n"
#define SRL(r) "vpsrld $3, %%zmm" #r ", %%zmm" #r "\n"
#define AND(r) "vpandd %%zmm15, %%zmm" #r ", %%zmm" #r "\n"
#define FMA(r) "vfmadd231ps %%zmm15, %%zmm14, %%zmm" #r "\n"
#define SHRD(r) "vpshrdd $16, %%zmm15, %%zmm" #r ", %%zmm" #r "\n"
#define CVT(r) "vcvtdq2ps %%zmm" #r ", %%zmm" #r "\n"
#define BCAST(r) "vpbroadcastb 64(%0), %%zmm" #r "\n"
/* One 16-weight group of the 8-bit kernel: window, mask, multiply, sum. */
#define GROUP(r) "vpsrld $3, %%zmm12, %%zmm" #r "\n" \
		 "vpandd %%zmm15, %%zmm" #r ", %%zmm" #r "\n" \
		 "vpmulld %%zmm13, %%zmm" #r ", %%zmm" #r "\n" \
		 "vpdpbusd %%zmm" #r ", %%zmm14, %%zmm" #r "\n"

#define EIGHT(a, b) a(0) b(1) a(2) b(3) a(4) b(5) a(6) b(7)

static char scratch[256] __attribute__((aligned(64)));

/* Seconds for LOOPS iterations of `body`, 8 operations each. */
#define TIME(body) ({ double start_ = now(); \
	for (long i = 0; i < LOOPS; i++) \
		__asm__ volatile(body :: "r"(scratch) : CLOBBER); \
	now() - start_; })

static void row(const char *what, double seconds, double cycle, int per)
{
	printf("| %s | %.2f |\n", what, seconds / cycle / (double)LOOPS / per);
}

int main(void)
{
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vnni") ||
	    !__builtin_cpu_supports("avx512vbmi2")) {
		printf("pipes: this CPU has no AVX-512 VNNI/VBMI2; nothing to measure\n");
		return 0;
	}
	double t0 = now();
	for (long i = 0; i < LOOPS; i++)
		__asm__ volatile("add $1, %%rax\n add $1, %%rax\n add $1, %%rax\n add $1, %%rax\n"
				 ::: "rax");
	const double cycle = (now() - t0) / (4.0 * (double)LOOPS);

	printf("clock: %.2f GHz (dependent adds)\n\n", 1e-9 / cycle);
	printf("| operations (zmm, 8 chains) | cycles each |\n|---|---|\n");
	row("vpmulld", TIME(EIGHT(MUL, MUL)), cycle, 8);
	row("vpdpbusd", TIME(EIGHT(DP, DP)), cycle, 8);
	row("vpsrld", TIME(EIGHT(SRL, SRL)), cycle, 8);
	row("vpandd", TIME(EIGHT(AND, AND)), cycle, 8);
	row("vpmulld + vpdpbusd", TIME(EIGHT(MUL, DP)), cycle, 8);
	row("vpmulld + vfmadd231ps", TIME(EIGHT(MUL, FMA)), cycle, 8);
	row("vpmulld + vpshrdd", TIME(EIGHT(MUL, SHRD)), cycle, 8);
	row("vpmulld + vpsrld", TIME(EIGHT(MUL, SRL)), cycle, 8);
	row("vpmulld + vcvtdq2ps", TIME(EIGHT(MUL, CVT)), cycle, 8);
	row("vpmulld + vpbroadcastb (memory)", TIME(EIGHT(MUL, BCAST)), cycle, 8);
	printf("\n| 8-bit kernel group (shift, mask, multiply, vpdpbusd) | cycles per 16 weights |\n"
	       "|---|---|\n");
	row("4 groups, 4 sums", TIME(GROUP(0) GROUP(1) GROUP(2) GROUP(3)), cycle, 4);
	return 0;
}
#else
int main(void)
{
	printf("pipes: x86-64 only; nothing to measure here\n");
	return 0;
}
#endif

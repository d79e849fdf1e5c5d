/*
 * cpu_fixture.h - both CPU backend descriptors, opened for one test.
 *
 * backend-cpu.so carries "cpu" (the build's vector kernels) and "cpu-ref"
 * (the plain reference).  Tests run every op through the ABI on both and
 * check each against a double-precision formula written in the test, so a
 * wrong reference fails too.
 */
#ifndef TF_TEST_CPU_FIXTURE_H
#define TF_TEST_CPU_FIXTURE_H

#include "support/testhost.h"

enum { CPU_FAST, CPU_REF, CPU_N };

typedef struct cpu_fixture {
	tf_testhost *th;
	const tf_host *host;
	const tf_backend *be[CPU_N];
	void *ctx[CPU_N];
} cpu_fixture;

/* threads: [runtime] threads for both instances (0 = default). */
void cpu_fixture_open(cpu_fixture *f, int threads);
void cpu_fixture_close(cpu_fixture *f);

/* The backend entry point, looked up in the built backend-cpu.so. */
const tf_backend *cpu_fixture_descriptor(unsigned index);

/* n floats of NaN, from the backend's allocator: outputs start poisoned. */
float *cpu_fixture_poisoned(cpu_fixture *f, size_t n);
void cpu_fixture_release(cpu_fixture *f, void *p);

#endif /* TF_TEST_CPU_FIXTURE_H */

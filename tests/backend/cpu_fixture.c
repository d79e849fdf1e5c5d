/* cpu_fixture.c - see cpu_fixture.h. */
#include "cpu_fixture.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>

const tf_backend *cpu_fixture_descriptor(unsigned index)
{
	void *so = dlopen(TF_PLUGIN_DIR "/backend-cpu.so", RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(so, "%s", dlerror());
	const tf_backend *(*entry)(unsigned) =
		(const tf_backend *(*)(unsigned))dlsym(so, "tf_plugin_backend_v1");
	cr_assert_not_null(entry, "backend-cpu.so exports no tf_plugin_backend_v1");
	return entry(index);            /* the .so stays loaded for the test */
}

void cpu_fixture_open(cpu_fixture *f, int threads)
{
	f->th = tf_testhost_new(NULL, threads);
	f->host = tf_testhost_host(f->th);
	for (int i = 0; i < CPU_N; i++) {
		f->be[i] = cpu_fixture_descriptor((unsigned)i);
		cr_assert_not_null(f->be[i]);
		cr_assert_eq(f->be[i]->init(f->host, &f->ctx[i]), TF_OK, "%s",
			     tf_testhost_last_error(f->th));
	}
	cr_assert_str_eq(f->be[CPU_FAST]->hdr.name, "cpu");
	cr_assert_str_eq(f->be[CPU_REF]->hdr.name, "cpu-ref");
}

void cpu_fixture_close(cpu_fixture *f)
{
	for (int i = 0; i < CPU_N; i++) {
		f->be[i]->quiesce(f->ctx[i]);
		f->be[i]->fini(f->ctx[i]);
	}
	tf_testhost_free(f->th);
}

float *cpu_fixture_poisoned(cpu_fixture *f, size_t n)
{
	float *p = f->be[CPU_REF]->alloc(f->ctx[CPU_REF], n * sizeof(float));
	cr_assert_not_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = NAN;
	return p;
}

void cpu_fixture_release(cpu_fixture *f, void *p)
{
	f->be[CPU_REF]->free(f->ctx[CPU_REF], p);
}

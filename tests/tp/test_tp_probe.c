/*
 * test_tp_probe.c - the transports' probes say honestly why they cannot
 * run here, and the nccl transport's dlsym table matches a real NCCL.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../plugins/transport-nccl/api.h"
#include "tf/transport.h"

static const tf_plugin_transport *load(const char *name)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s.so", TF_PLUGIN_DIR, name);
	void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(so, "%s", dlerror());
	const tf_plugin_transport *(*entry)(unsigned) =
		(const tf_plugin_transport *(*)(unsigned))dlsym(so, "tf_plugin_transport_v1");
	cr_assert_not_null(entry);
	return entry(0);
}

Test(tp_probe, roce_without_a_device_scores_zero)
{
	if (!access("/sys/class/infiniband", F_OK))
		cr_skip_test("this machine has RDMA devices");
	const tf_plugin_transport *t = load("transport-roce");
	const char *why = NULL;
	cr_assert_eq(t->hdr.probe(NULL, &why), 0);
	cr_assert(why && strstr(why, "no RDMA device"), "%s", why ? why : "(none)");
}

Test(tp_probe, nccl_without_a_gpu_scores_zero)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (cuda && !access("/dev/nvidia0", F_OK))
		cr_skip_test("this machine has a CUDA driver and a GPU");
	const tf_plugin_transport *t = load("transport-nccl");
	const char *why = NULL;
	cr_assert_eq(t->hdr.probe(NULL, &why), 0);
	cr_assert(why && (strstr(why, "CUDA") || strstr(why, "NCCL")), "%s",
		  why ? why : "(none)");
}

/* Every entry the plugin resolves exists in the toolkit's NCCL and driver
 * stub, and that NCCL sums bf16 (2.10 or later). */
Test(tp_probe, nccl_entry_points_resolve)
{
	tf_nccl_api a;
	char why[256];
	int v = 0;
	if (!TF_CUDA_STUB[0] || access(TF_CUDA_STUB, F_OK))
		cr_skip_test("no CUDA toolkit stub libcuda.so here");
	if (tf_nccl_load(&a, NULL, TF_CUDA_STUB, why, sizeof(why))) {
		cr_assert(strstr(why, "NCCL not found"), "%s", why);
		cr_skip_test("NCCL is not on the loader's path");
	}
	cr_assert_eq(a.GetVersion(&v), TF_NCCL_SUCCESS);
	cr_assert_geq(v, 21000, "NCCL %d has no bf16", v);
	tf_nccl_unload(&a);
}

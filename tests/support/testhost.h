/*
 * testhost.h - a self-contained tf_host for plugin unit tests.
 *
 * Tests build a model config and tensors in memory, then hand the host to
 * the plugin under test.  The host loads the real backend-cpu.so, every
 * quant plugin (exl3.so) and the routers (router.so) from the build's plugin
 * folder, so layer plugins are tested with the same linear layers, routers
 * and ops the runtime uses.  [plugins] router (tf_testhost_set_conf) pins a
 * router by name, [plugins] quant a quant plugin, as in an INI.  The typed
 * INI reads parse strictly but know no ranges; conf_enum knows only the
 * enum keys plugins read ([runtime] kv_cache).
 */
#ifndef TF_TESTHOST_H
#define TF_TESTHOST_H

#include "tf/backend.h"
#include "tf/quant.h"
#include "tf/router.h"

typedef struct tf_testhost tf_testhost;

/* cfg is copied (its arrays are not: keep them alive).  Loads backend-cpu
 * with `threads` workers (0 = default) and the quant plugins.  Aborts the
 * test with a message on failure.  The environment may name other
 * modules, so that a suite runs unchanged on a device backend (the
 * conformance suite on cuda-sim): TF_TEST_BACKEND, a backend module to
 * load instead of backend-cpu.so, and TF_TEST_QUANT, a quant module whose
 * linears join exl3.so's. */
tf_testhost *tf_testhost_new(const tf_model_config *cfg, int threads);
/* The same with the modules named here (paths; NULL: backend-cpu.so, no
 * extra quant module), whatever the environment says.  A linear opens
 * through the best-matching quant plugin whose probe accepts the
 * backend, as the runtime's do. */
tf_testhost *tf_testhost_new_with(const tf_model_config *cfg, int threads,
				  const char *backend_so, const char *quant_so);
void tf_testhost_free(tf_testhost *th);

const tf_host *tf_testhost_host(tf_testhost *th);

/* Add a tensor; the data is copied. */
void tf_testhost_add_tensor(tf_testhost *th, const char *name, tf_dtype dtype,
			    int ndim, const int64_t *shape, const void *data);
/* Add a float32 tensor, stored as `dtype` (F32, F16 or BF16). */
void tf_testhost_add_f32(tf_testhost *th, const char *name, tf_dtype dtype,
			 int ndim, const int64_t *shape, const float *data);
/* One float tensor of a layer under test, for tf_testhost_add_layer. */
typedef struct tf_test_tensor {
	const char *leaf;               /* name under the layer's prefix */
	tf_dtype dtype;                 /* stored as F32, F16 or BF16 */
	int ndim;
	int64_t shape[4];
	const float *data;              /* NULL: not in this checkpoint */
} tf_test_tensor;

/* Add "<prefix>.<leaf>" for each of the n tensors with data, except the
 * one whose leaf is `skip` (NULL: none): a test leaves one out to see the
 * layer name it. */
void tf_testhost_add_layer(tf_testhost *th, const char *prefix, const tf_test_tensor *t,
			   size_t n, const char *skip);

/* A random EXL3 linear under prefix (4 bits, the original codebook): its
 * trellis, suh and svh, `in` x `out`, both multiples of 128. */
void tf_testhost_add_exl3(tf_testhost *th, const char *prefix, int64_t in, int64_t out,
			  uint64_t *seed);
/* The same at K bits (1..8) and codebook cb (0 the original, 1 mcg, 2
 * mul1: plugins/exl3/codebook.h's tf_exl3_cb, its marker tensor added),
 * `in` x `out` padded to multiples of 128 as quantizers store them. */
void tf_testhost_add_exl3_as(tf_testhost *th, const char *prefix, int64_t in, int64_t out,
			     int K, int cb, uint64_t *seed);
void tf_testhost_set_conf(tf_testhost *th, const char *section,
			  const char *key, const char *value);

/* How often a plugin released the named tensor (host->weight_release).
 * A release overwrites the tensor's bytes with 0xFF until the next
 * weight_get of it: a plugin promises not to read its old view again, and
 * this makes a broken promise fail. */
int tf_testhost_released(tf_testhost *th, const char *name);

/* The last message passed to host->error (empty when none). */
const char *tf_testhost_last_error(tf_testhost *th);

/* Deterministic uniform floats in [-scale, scale] (xorshift; per-seed). */
void tf_test_fill_uniform(float *x, size_t n, float scale, uint64_t *seed);
/* max |a-b| / max(max |b|, floor): the relative error used across tests. */
double tf_test_rel_err(const float *a, const float *b, size_t n, double floor);

#endif /* TF_TESTHOST_H */

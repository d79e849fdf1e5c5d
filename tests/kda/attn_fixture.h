/*
 * attn_fixture.h - what the kda and mla plugin tests share: loading an
 * attention plugin from the build, opening a layer in a test host, feeding
 * a sequence in pieces, several sequences in one batch, and checking
 * that init fails naming a tensor.  Sequences are ABI 1.5 state objects
 * (tf/attention.h state_new), fed through forward_batch.
 * Failures abort the calling Criterion test.
 */
#ifndef TF_TEST_ATTN_FIXTURE_H
#define TF_TEST_ATTN_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>

#include "attn_bufs.h"
#include "support/testhost.h"
#include "tf/attention.h"

/* The descriptor in <plugin dir>/<so>, checked to serve `layer_type`. */
const tf_plugin_attention *attn_fixture_plugin(const char *so, const char *layer_type);
/* The same from the module at `path` (a cuda-sim module, off the plugin dir). */
const tf_plugin_attention *attn_fixture_plugin_at(const char *path, const char *layer_type);

void *attn_fixture_open(const tf_plugin_attention *p, tf_testhost *th, const char *prefix,
			int64_t max_ctx);

/* A new empty state of inst for max_ctx tokens (state_free it). */
void *attn_fixture_state(const tf_plugin_attention *p, void *inst, int64_t max_ctx);

/* Feed x[n, hidden] to one sequence in pieces of split[0], split[1], ...
 * (cycled) at the positions that continue it; y[n, hidden] gets every
 * output. */
void attn_fixture_run(const tf_plugin_attention *p, void *inst, void *state, const float *x,
		      int64_t n, int hidden, const int *split, int nsplit, float *y);

/* One forward_batch over n_seq sequences: rows[k] rows of state[k], the
 * sequences' rows one after another in x[sum rows, hidden] and y. */
int attn_fixture_run_batch(const tf_plugin_attention *p, void *inst, void *const *state,
			   const int64_t *rows, int n_seq, const float *x, int hidden, float *y);

/* A snapshot of state in a new buffer (free()). */
void *attn_fixture_snapshot(const tf_plugin_attention *p, void *inst, const void *state);

/*
 * Rollback must replay exactly: feed n random tokens in pieces of `piece`,
 * snapshot, decode m tokens one at a time, roll back, feed m other tokens,
 * roll back again and decode the first m again: the two decodes must agree
 * bit for bit.  Returns the snapshot taken after n tokens (free()); the
 * state is left n + m tokens long.
 */
void *attn_fixture_expect_replay(const tf_plugin_attention *p, void *inst, void *state,
				 int hidden, int n, int m, int piece);

/* layer_init must fail with `status`, produce no instance, and name `needle`. */
void attn_fixture_expect_init_error(const tf_plugin_attention *p, tf_testhost *th,
				    const char *prefix, int status, const char *needle);

/* Makes a fresh host holding one test layer's tensors (arg: the case). */
typedef tf_testhost *(*attn_fixture_host_fn)(const void *arg);

/* make(arg)'s host on the backend module `backend`, with the quant module
 * `quant` added (the test host's TF_TEST_BACKEND, TF_TEST_QUANT): a device
 * plugin's test on cuda-sim. */
tf_testhost *attn_fixture_device_host(attn_fixture_host_fn make, const void *arg,
				      const char *backend, const char *quant);

/*
 * Tensor parallel: the layer opened as each of `ranks` ranks (a host of
 * its own with tp_rank and tp_size set) runs the same n tokens (a prefill,
 * then decode steps); the ranks' outputs summed, as the runtime's
 * all-reduce sums them, must match the whole layer's within tol.  With
 * `uneven` ranks the layer must refuse to open, naming `key`.  x and y
 * are in each host's backend memory, so a device plugin runs it too.
 */
void attn_fixture_expect_shards(const tf_plugin_attention *p, attn_fixture_host_fn make,
				const void *arg, const char *prefix, int hidden, int ranks,
				int uneven, const char *key, double tol, uint64_t seed);

#endif /* TF_TEST_ATTN_FIXTURE_H */

/*
 * conformance.h - one list of cases per plugin kind, run against every
 * implementation of that kind the registry finds on the plugin path (the
 * build's folder and $TF_PLUGIN_PATH), each compared with the kind's plain
 * reference, as ggml's test-backend-ops does for its backends.  A new
 * plugin dropped on the path is tested with no new test code; one whose
 * probe declines here (a CUDA backend without a GPU) is listed as skipped
 * with its reason.
 *
 * Kinds covered: backend (every op, against cpu-ref), router (against
 * ling-ref), quant (every plugin on its format's tensors from the
 * quantizers on the path, each width and codebook, and plain F32/F16/BF16
 * weights, ragged rows and features, against float64 arithmetic on the
 * dequantized weight: its own, or its CPU twin's for a device linear;
 * quant_cases.c) and attention (the kda and
 * mla types against their float64 layers, every type to the kind's
 * contract on the tiny test model; attention_cases.c) and drafter (the
 * engine's tokens with it against serial decoding; drafter_cases.c).
 */
#ifndef TF_CONFORMANCE_H
#define TF_CONFORMANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/registry.h"
#include "support/testhost.h"

/* Tallies of one implementation's run. */
typedef struct cf_tally {
	int pass, fail, skip;
} cf_tally;

/* Record one case: print it when it fails; returns ok. */
bool cf_case(cf_tally *t, bool ok, const char *impl, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* max |a - b| / max(max |b|, 1e-30): the relative error of a against b. */
double cf_rel_err(const float *a, const float *b, size_t n);

/* Every case of a kind on one implementation against the reference; `h`
 * is the host both were probed with, `r` the registry they are in (its
 * other plugins may make the implementation's inputs). */
typedef void (*cf_check_fn)(const tf_registry *r, const tf_candidate *impl,
			    const tf_candidate *ref, const tf_host *h, cf_tally *t);

/* Probe every plugin of `kind`, then check each usable one but the
 * reference (named `ref`; NULL: the kind has none), printing one line per
 * implementation; totals are added to *all.  A missing reference is a
 * failure. */
void cf_kind(tf_registry *r, tf_plugin_kind kind, const char *ref, cf_check_fn check,
	     cf_tally *all);

void cf_check_backend(const tf_registry *r, const tf_candidate *impl, const tf_candidate *ref,
		      const tf_host *h, cf_tally *t);
void cf_check_router(const tf_registry *r, const tf_candidate *impl, const tf_candidate *ref,
		     const tf_host *h, cf_tally *t);
void cf_check_quant(const tf_registry *r, const tf_candidate *impl, const tf_candidate *ref,
		    const tf_host *h, cf_tally *t);
/* The quant cases' tensors, made once for every quant plugin: freed. */
void cf_quant_done(void);
void cf_check_attention(const tf_registry *r, const tf_candidate *impl,
			const tf_candidate *ref, const tf_host *h, cf_tally *t);
void cf_check_drafter(const tf_registry *r, const tf_candidate *impl, const tf_candidate *ref,
		      const tf_host *h, cf_tally *t);

#endif /* TF_CONFORMANCE_H */

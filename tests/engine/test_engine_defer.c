/*
 * test_engine_defer.c - the engine's logits left on the device
 * (tf_engine_defer_logits) on backend-cuda-sim, whose sample slot picks
 * where the logits are: through tf/engine.h only, on ling-tiny.
 *
 * A deferred forward leaves the caller's buffer as it was (poisoned with
 * NaN here) until something needs it; tf_seq_sample then picks on the
 * device (the count grows by one) the token the host sampler picks from
 * the same logits once written; tf_engine_logits_wait, and a forward into
 * another buffer, write the very bits a forward without deferral writes;
 * a sampler the slot declines (a penalty) writes the logits and picks on
 * the host.  Each forward is a few tokens: the harness runs about a
 * second of CPU per token.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/tmpfile.h"
#include "tf/engine.h"
#include "tf/error.h"

static char ini[64];

static void write_ini(void)
{
	char text[1024];
	int n = snprintf(text, sizeof(text),
			 "[model]\npath = %s\n\n[plugins]\npath = %s\nbackend = cuda-sim\n\n"
			 "[runtime]\ncontext = 64\nmemory_limit = 1G\nkv_cache = f32\n"
			 "sequences = 2\n\n[mtp]\nenabled = false\n",
			 TF_ENGINE_MODEL, TF_CUDA_SIM_PLUGINS);

	strcpy(ini, "/tmp/tf-defer-XXXXXX.ini");
	tf_test_tmpfile(ini, 4, text, (size_t)n);
}

static void remove_ini(void)
{
	unlink(ini);
}

TestSuite(engine_defer, .init = write_ini, .fini = remove_ini, .timeout = 600);

static float *poisoned(int vocab)
{
	float *p = malloc((size_t)vocab * sizeof(*p));
	cr_assert_not_null(p);
	for (int i = 0; i < vocab; i++)
		p[i] = NAN;
	return p;
}

static bool all_nan(const float *p, int vocab)
{
	for (int i = 0; i < vocab; i++)
		if (!isnan(p[i]))
			return false;
	return true;
}

static void forward(tf_engine *e, tf_seq_id s, const int32_t *tok, int64_t n, float *logits)
{
	const tf_batch b = { .n = n, .token = tok, .one_seq = s };
	cr_assert_eq(tf_engine_forward(e, &b, logits, NULL), TF_OK, "%s", tf_engine_errmsg());
}

Test(engine_defer, device_picks_and_written_logits_match_the_host)
{
	static const int32_t prompt[] = { 5, 16, 27 };
	tf_engine *e = NULL;
	tf_seq_id s, f;
	int32_t t, h;

	cr_assert_eq(tf_engine_open(ini, NULL, 0, &e), TF_OK, "%s", tf_engine_errmsg());
	int V = tf_engine_vocab(e);
	float *l = poisoned(V), *m = poisoned(V);
	tf_engine_defer_logits(e, true);
	cr_assert_eq(tf_seq_new(e, &s), TF_OK);

	/* Greedy: the pick on the device, the buffer untouched until waited
	 * for, then the host's pick from it the same. */
	forward(e, s, prompt, 3, l);
	cr_assert(all_nan(l, V), "a deferred forward wrote the caller's logits");
	cr_assert_eq(tf_seq_sample(e, s, l, &t), TF_OK, "%s", tf_engine_errmsg());
	cr_assert_eq(tf_engine_device_samples(e), 1);
	cr_assert(all_nan(l, V));
	cr_assert_eq(tf_engine_logits_wait(e), TF_OK);
	cr_assert(!all_nan(l, V), "tf_engine_logits_wait wrote nothing");
	cr_assert_eq(tf_seq_sample(e, s, l, &h), TF_OK);       /* on the host now */
	cr_assert_eq(tf_engine_device_samples(e), 1);
	cr_assert_eq(t, h, "device %d, host %d", t, h);

	/* Drawn: top-k, top-p, min-p, a seed; the same on a fork, whose
	 * forward without deferral gives the bits the deferred one owed. */
	tf_sampler_params p;
	tf_sampler_params_default(&p);
	p.temperature = 1.3f;
	p.top_k = 30;
	p.top_p = 0.9f;
	p.min_p = 0.02f;
	p.seed = 99;
	cr_assert_eq(tf_seq_set_sampling(e, s, &p, 0), TF_OK);
	cr_assert_eq(tf_seq_fork(e, s, &f), TF_OK, "%s", tf_engine_errmsg());
	free(l);
	l = poisoned(V);
	forward(e, s, &t, 1, l);
	cr_assert_eq(tf_seq_sample(e, s, l, &t), TF_OK, "%s", tf_engine_errmsg());
	cr_assert_eq(tf_engine_device_samples(e), 2);
	tf_engine_defer_logits(e, false);
	forward(e, f, &h, 1, m);        /* another buffer: l is written first */
	cr_assert(!all_nan(l, V), "a forward into another buffer left the owed logits unwritten");
	cr_assert(!memcmp(l, m, (size_t)V * sizeof(*l)), "deferred logits differ from plain ones");
	cr_assert_eq(tf_seq_sample(e, f, m, &h), TF_OK);
	cr_assert_eq(tf_engine_device_samples(e), 2);
	cr_assert_eq(t, h, "drawn: device %d, host %d", t, h);

	/* A penalty: the slot declines, the logits are written and the host
	 * picks. */
	tf_engine_defer_logits(e, true);
	p.presence_penalty = 0.5f;
	cr_assert_eq(tf_seq_set_sampling(e, s, &p, 0), TF_OK);
	free(l);
	l = poisoned(V);
	forward(e, s, &t, 1, l);
	cr_assert(all_nan(l, V));
	cr_assert_eq(tf_seq_sample(e, s, l, &t), TF_OK, "%s", tf_engine_errmsg());
	cr_assert_eq(tf_engine_device_samples(e), 2, "a penalty was sampled on the device");
	cr_assert(!all_nan(l, V), "the host sampled from logits never written");

	free(l);
	free(m);
	tf_engine_close(e);
}

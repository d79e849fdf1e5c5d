/* util.c - see util.h. */
#include "util.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fail.h"
#include "tf/diag.h"

double tf_cli_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int tf_cli_model_file(const tf_conf *conf, const char *file, char *path, size_t size)
{
	char dir[4096];
	const char *d;
	int rc = tf_conf_get_path(conf, "model", "path", dir, sizeof(dir), &d);

	if (rc)
		return rc;
	if (!d)
		return tf_diag_set(TF_ERR_INVALID, "[model] path is not set, so no %s", file);
	if ((size_t)snprintf(path, size, "%s/%s", d, file) >= size)
		return tf_diag_set(TF_ERR_INVALID, "%s/%s: path too long", d, file);
	return TF_OK;
}

int tf_cli_sampling(const tf_conf *c, tf_sampler_params *sp, int64_t *max_tokens)
{
	double temp, top_p, min_p, rep, pres, freq;
	int64_t top_k, last_n, seed;
	int rc;

	tf_sampler_params_default(sp);
	if ((rc = tf_conf_get_float(c, "sampling", "temperature", sp->temperature, &temp)) ||
	    (rc = tf_conf_get_float(c, "sampling", "top_p", sp->top_p, &top_p)) ||
	    (rc = tf_conf_get_float(c, "sampling", "min_p", sp->min_p, &min_p)) ||
	    (rc = tf_conf_get_float(c, "sampling", "repeat_penalty", sp->repeat_penalty, &rep)) ||
	    (rc = tf_conf_get_float(c, "sampling", "presence_penalty", sp->presence_penalty,
				    &pres)) ||
	    (rc = tf_conf_get_float(c, "sampling", "frequency_penalty", 0, &freq)) ||
	    (rc = tf_conf_get_int(c, "sampling", "top_k", sp->top_k, &top_k)) ||
	    (rc = tf_conf_get_int(c, "sampling", "repeat_last_n", 64, &last_n)) ||
	    (rc = tf_conf_get_int(c, "sampling", "seed", 0, &seed)) ||
	    (rc = tf_conf_get_int(c, "sampling", "max_tokens", 128, max_tokens)))
		return rc;
	sp->temperature = (float)temp;
	sp->top_p = (float)top_p;
	sp->min_p = (float)min_p;
	sp->repeat_penalty = (float)rep;
	sp->presence_penalty = (float)pres;
	sp->frequency_penalty = (float)freq;
	sp->top_k = (int)top_k;
	sp->repeat_last_n = (int)last_n;
	sp->seed = seed < 0 ? (uint64_t)time(NULL) : (uint64_t)seed;
	return TF_OK;
}

int tf_cli_stop_ids(const tf_conf *c, const tf_model_config *cfg, tf_stopset *stops)
{
	char path[4200];
	int rc;
	for (int i = 0; i < cfg->n_eos; i++)
		if ((rc = tf_stop_add(stops, cfg->eos_token_id[i])))
			return rc;
	if ((rc = tf_cli_model_file(c, "generation_config.json", path, sizeof(path))))
		return rc;
	return tf_stop_add_generation_config(stops, path);
}

int tf_cli_follow(tf_engine *e, const char *ini)
{
	if (tf_engine_tp_rank(e) == 0)
		return -1;
	/* tfrun serve blocked these for its sigwait; a follower has none and
	 * ends on them like any process. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
	return tf_engine_follow(e) == TF_OK ? EXIT_SUCCESS : tf_cli_fail(ini);
}

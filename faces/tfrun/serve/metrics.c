/* metrics.c - GET /metrics: counters in Prometheus' text format. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "serve.h"
#include "util.h"

/* text with the drafting counters appended (text freed), or NULL. */
static char *drafts_text(const serve *s, char *text)
{
	const serve_metrics *m = &s->m;
	char *out = NULL;
	int n = asprintf(&out, "%s"
			 "# HELP tf_draft_steps_total Requests' steps that drafted (drafter %s).\n"
			 "# TYPE tf_draft_steps_total counter\n"
			 "tf_draft_steps_total %llu\n"
			 "# HELP tf_drafted_tokens_total Tokens drafted.\n"
			 "# TYPE tf_drafted_tokens_total counter\n"
			 "tf_drafted_tokens_total %llu\n"
			 "# HELP tf_draft_accepted_tokens_total Drafted tokens the verify kept.\n"
			 "# TYPE tf_draft_accepted_tokens_total counter\n"
			 "tf_draft_accepted_tokens_total %llu\n"
			 "# HELP tf_draft_position_tokens_total Drafts made and kept at each position.\n"
			 "# TYPE tf_draft_position_tokens_total counter\n",
			 text, tf_engine_drafter(s->e), (unsigned long long)m->draft_steps,
			 (unsigned long long)m->drafted, (unsigned long long)m->accepted);
	free(text);
	for (int p = 0; n >= 0 && p < tf_engine_draft_depth(s->e); p++) {
		char *more = NULL;
		n = asprintf(&more, "%stf_draft_position_tokens_total{position=\"%d\",outcome=\"drafted\"} %llu\n"
			     "tf_draft_position_tokens_total{position=\"%d\",outcome=\"accepted\"} %llu\n",
			     out, p + 1, (unsigned long long)m->tried_at[p], p + 1,
			     (unsigned long long)m->kept_at[p]);
		free(out);
		out = n >= 0 ? more : NULL;
	}
	return n >= 0 ? out : NULL;
}

char *serve_metrics_text(const serve *s)
{
	const serve_metrics *m = &s->m;
	char *text = NULL;
	double tps = m->step_seconds > 0 ? (double)m->step_tokens / m->step_seconds : 0;

	if (asprintf(&text,
		     "# HELP tf_requests_total Requests queued for generation.\n"
		     "# TYPE tf_requests_total counter\n"
		     "tf_requests_total %llu\n"
		     "# HELP tf_requests_rejected_total Requests refused: queue full or shutting down.\n"
		     "# TYPE tf_requests_rejected_total counter\n"
		     "tf_requests_rejected_total %llu\n"
		     "# HELP tf_choices_cancelled_total Choices ended unanswered: the client left or the server stopped.\n"
		     "# TYPE tf_choices_cancelled_total counter\n"
		     "tf_choices_cancelled_total %llu\n"
		     "# HELP tf_prompt_tokens_total Prompt tokens of queued requests.\n"
		     "# TYPE tf_prompt_tokens_total counter\n"
		     "tf_prompt_tokens_total %llu\n"
		     "# HELP tf_prompt_tokens_cached_total Prompt tokens taken from a kept sequence, not run again.\n"
		     "# TYPE tf_prompt_tokens_cached_total counter\n"
		     "tf_prompt_tokens_cached_total %llu\n"
		     "# HELP tf_prefix_cache_sequences Finished sequences kept for prompts that continue them.\n"
		     "# TYPE tf_prefix_cache_sequences gauge\n"
		     "tf_prefix_cache_sequences %d\n"
		     "# HELP tf_generation_tokens_total Tokens sampled.\n"
		     "# TYPE tf_generation_tokens_total counter\n"
		     "tf_generation_tokens_total %llu\n"
		     "# HELP tf_device_sampled_tokens_total Tokens picked by the backend's sampler, where the logits are.\n"
		     "# TYPE tf_device_sampled_tokens_total counter\n"
		     "tf_device_sampled_tokens_total %llu\n"
		     "# HELP tf_device_graph_steps_total Steps run as device graphs ([runtime] cuda_graph).\n"
		     "# TYPE tf_device_graph_steps_total counter\n"
		     "tf_device_graph_steps_total %llu\n"
		     "# HELP tf_device_graphs_total Device graphs those steps ran: one a step, or one between each two host waits.\n"
		     "# TYPE tf_device_graphs_total counter\n"
		     "tf_device_graphs_total %llu\n"
		     "# HELP tf_device_graphs_built_total Device graphs built anew; the rest replayed a kept one.\n"
		     "# TYPE tf_device_graphs_built_total counter\n"
		     "tf_device_graphs_built_total %llu\n"
		     "# HELP tf_steps_total Batched forward steps; tokens over steps is the batch.\n"
		     "# TYPE tf_steps_total counter\n"
		     "tf_steps_total %llu\n"
		     "# HELP tf_step_seconds_total Seconds in steps: the forward, sampling, the replies' text.\n"
		     "# TYPE tf_step_seconds_total counter\n"
		     "tf_step_seconds_total %.6f\n"
		     "# HELP tf_queue_depth Choices waiting for a slot.\n"
		     "# TYPE tf_queue_depth gauge\n"
		     "tf_queue_depth %d\n"
		     "# HELP tf_active_requests Choices being decoded (a request's n, each prompt's).\n"
		     "# TYPE tf_active_requests gauge\n"
		     "tf_active_requests %d\n"
		     "# HELP tf_decode_tokens_per_second Decoded tokens per second of step time.\n"
		     "# TYPE tf_decode_tokens_per_second gauge\n"
		     "tf_decode_tokens_per_second %.3f\n"
		     "# HELP tf_time_to_first_token_seconds Arrival to first token.\n"
		     "# TYPE tf_time_to_first_token_seconds summary\n"
		     "tf_time_to_first_token_seconds_sum %.6f\n"
		     "tf_time_to_first_token_seconds_count %llu\n"
		     "# HELP tf_uptime_seconds Seconds since the server started.\n"
		     "# TYPE tf_uptime_seconds gauge\n"
		     "tf_uptime_seconds %.3f\n",
		     (unsigned long long)m->requests, (unsigned long long)m->rejected,
		     (unsigned long long)m->cancelled,
		     (unsigned long long)m->prompt_tokens, (unsigned long long)m->cached_tokens,
		     m->cached_seqs, (unsigned long long)m->gen_tokens,
		     (unsigned long long)m->device_samples, (unsigned long long)m->graphs.steps,
		     (unsigned long long)m->graphs.runs, (unsigned long long)m->graphs.built,
		     (unsigned long long)m->steps,
		     m->step_seconds,
		     s->n_queued, s->n_active, tps, m->ttft_sum,
		     (unsigned long long)m->ttft_count, tf_cli_now_s() - s->t_start) < 0)
		return NULL;
	return tf_engine_draft_depth(s->e) ? drafts_text(s, text) : text;
}

/*
 * prefix.c - finished requests' sequences kept idle for the requests that
 * continue them.
 *
 * A kept sequence holds its prompt and reply, and a snapshot one token
 * before the end of its prompt.  A new prompt that starts with all its
 * tokens takes it as it is (the next turn of a conversation); one that
 * starts with its prompt but for the last token and then differs (the
 * same request again, or a history the template renders otherwise) rolls
 * it back to the snapshot.  Any other prefix is not reused: attention's
 * recurrent state cannot be cut, and replaying the prefix costs what
 * prefilling it does.
 *
 * The sequence is taken, not forked: no copy, no extra sequence.  Kept
 * ones are sequences no request uses, so a request that finds none to
 * continue evicts the least recently kept when the engine's table is full.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "tf/diag.h"

int serve_prefix_init(serve_prefix *pc, tf_engine *e, int cap)
{
	*pc = (serve_prefix){ .e = e, .cap = cap };
	if (cap && !(pc->ent = calloc((size_t)cap, sizeof(*pc->ent))))
		return tf_diag_set(TF_ERR_NOMEM, "out of memory for the prefix cache");
	return TF_OK;
}

void serve_prefix_free(serve_prefix *pc)
{
	for (int i = 0; i < pc->n; i++)
		tf_seq_free(pc->e, pc->ent[i].sid);
	free(pc->ent);
	pc->ent = NULL;
	pc->n = 0;
}

/* Entry i out of the cache (the order of the rest kept). */
static serve_cached take(serve_prefix *pc, int i)
{
	serve_cached c = pc->ent[i];

	memmove(pc->ent + i, pc->ent + i + 1, (size_t)(pc->n - i - 1) * sizeof(*pc->ent));
	pc->n--;
	return c;
}

/* Tokens of c a prompt of n tokens p can start from: it keeps one token
 * to run, whose logits the first sample needs. */
static int64_t reusable(const serve_prefix *pc, const serve_cached *c, const int32_t *p,
			int64_t n)
{
	int64_t len = tf_seq_len(pc->e, c->sid), common = 0;
	const int32_t *t = tf_seq_tokens(pc->e, c->sid);

	while (common < len && common < n - 1 && t[common] == p[common])
		common++;
	if (common == len)
		return len;
	return c->mark >= 0 && c->mark <= common ? c->mark : 0;
}

int serve_prefix_seq(serve_prefix *pc, const tf_tokens *prompt, tf_seq_id *sid,
		     int64_t *reused, int64_t *mark)
{
	int best = -1;
	int64_t gain = 0;

	/* The most recently kept wins a tie: later entries are newer. */
	for (int i = 0; i < pc->n; i++) {
		int64_t g = reusable(pc, &pc->ent[i], prompt->ids, (int64_t)prompt->n);
		if (g && g >= gain) {
			best = i;
			gain = g;
		}
	}
	if (best >= 0) {
		serve_cached c = take(pc, best);
		if (gain == tf_seq_len(pc->e, c.sid) || tf_seq_rollback(pc->e, c.sid) == TF_OK) {
			*sid = c.sid;
			*reused = gain;
			*mark = c.mark;
			return TF_OK;
		}
		fprintf(stderr, "tfrun serve: a cached sequence: %s\n", tf_engine_errmsg());
		tf_seq_free(pc->e, c.sid);
	}
	*reused = 0;
	*mark = -1;
	return serve_prefix_new(pc, -1, sid);
}

int serve_prefix_new(serve_prefix *pc, tf_seq_id src, tf_seq_id *sid)
{
	int rc;

	while ((rc = src < 0 ? tf_seq_new(pc->e, sid) : tf_seq_fork(pc->e, src, sid)) ==
	       TF_ERR_RANGE && pc->n)
		tf_seq_free(pc->e, take(pc, 0).sid);
	return rc;
}

void serve_prefix_keep(serve_prefix *pc, tf_seq_id sid, int64_t mark)
{
	if (!pc->cap) {
		tf_seq_free(pc->e, sid);
		return;
	}
	if (pc->n == pc->cap)
		tf_seq_free(pc->e, take(pc, 0).sid);
	pc->ent[pc->n++] = (serve_cached){ .sid = sid, .mark = mark };
}

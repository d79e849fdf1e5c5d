/*
 * grammars.c - compiled grammars kept by their GBNF text, so that requests
 * with the same schema share one grammar and its cache of masks.
 *
 * A connection's thread compiles or finds the grammar; afterwards only the
 * scheduler thread uses it (tf_grammar_apply changes its cache).  An entry
 * is freed once it has left the table and its last job let go (references
 * change under the server lock).
 */
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "tf/diag.h"

struct serve_grammar {
	char *gbnf;
	tf_grammar *g;
	int refs;                       /* the table's and each job's */
	uint64_t used;                  /* when last taken, for eviction */
};

static void drop(serve_grammar *sg)
{
	if (sg && !--sg->refs) {
		tf_grammar_free(sg->g);
		free(sg->gbnf);
		free(sg);
	}
}

int serve_grammar_get(serve *s, const char *gbnf, serve_grammar **out, serve_err *err)
{
	serve_grammar *sg = NULL, **slot;
	int rc;

	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < SERVE_GRAMMARS && !sg; i++)
		if (s->grammars[i] && !strcmp(s->grammars[i]->gbnf, gbnf))
			sg = s->grammars[i];
	if (sg) {
		sg->refs++;
		sg->used = ++s->grammar_clock;
	}
	pthread_mutex_unlock(&s->lock);
	if (sg) {
		*out = sg;
		return 0;
	}
	if (!(sg = calloc(1, sizeof(*sg))) || !(sg->gbnf = strdup(gbnf))) {
		free(sg);
		return serve_fail(err, 500, NULL, "out of memory");
	}
	pthread_mutex_lock(&s->prep);   /* the tokenizer */
	rc = tf_grammar_compile(gbnf, strlen(gbnf), s->tok, s->n_vocab, s->stops.ids,
				s->stops.n, &sg->g);
	pthread_mutex_unlock(&s->prep);
	if (rc) {
		free(sg->gbnf);
		free(sg);
		return serve_fail(err, rc == TF_ERR_NOMEM ? 500 : 400, NULL, "%s", tf_diag_msg());
	}
	sg->refs = 2;                   /* the table's and the caller's */
	pthread_mutex_lock(&s->lock);
	sg->used = ++s->grammar_clock;
	/* Another request may have filled the slot meanwhile: the oldest goes. */
	slot = &s->grammars[0];
	for (int i = 0; i < SERVE_GRAMMARS && *slot; i++)
		if (!s->grammars[i] || s->grammars[i]->used < (*slot)->used)
			slot = &s->grammars[i];
	drop(*slot);
	*slot = sg;
	pthread_mutex_unlock(&s->lock);
	*out = sg;
	return 0;
}

tf_grammar *serve_grammar_of(const serve_grammar *sg)
{
	return sg->g;
}

void serve_grammar_put(serve_grammar *sg)
{
	drop(sg);
}

void serve_grammars_free(serve *s)
{
	for (int i = 0; i < SERVE_GRAMMARS; i++) {
		drop(s->grammars[i]);
		s->grammars[i] = NULL;
	}
}

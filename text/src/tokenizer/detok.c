/* detok.c - streaming detokenizer: whole UTF-8 characters only. */
#include <string.h>

#include "tf/detok.h"
#include "tf/diag.h"
#include "unicode/unicode.h"

void tf_detok_init(tf_detok *d, const tf_tokenizer *tok, unsigned flags)
{
	memset(d, 0, sizeof(*d));
	d->tok = tok;
	d->flags = flags;
}

void tf_detok_free(tf_detok *d)
{
	tf_bytes_free(&d->in);
	tf_bytes_free(&d->out);
	d->n_tail = 0;
}

/* Moves the complete characters of tail + p into d->out, lossily, and keeps
 * a trailing unfinished one in tail. */
static int feed(tf_detok *d, const char *p, size_t n)
{
	const uint8_t *u;
	size_t i = 0, run = 0, len;
	uint32_t cp;
	int w, rc;

	d->in.len = 0;
	d->out.len = 0;
	if ((rc = tf_bytes_append(&d->in, d->tail, d->n_tail)) ||
	    (rc = tf_bytes_append(&d->in, p, n)))
		return tf_diag_set(rc, "detokenizer: out of memory");
	d->n_tail = 0;
	u = (const uint8_t *)d->in.p;
	len = d->in.len;
	while (i < len) {
		w = tf_utf8_next(u + i, len - i, &cp);
		if (w > 0) {
			i += (size_t)w;
			continue;
		}
		if ((rc = tf_bytes_append(&d->out, u + run, i - run)))
			return tf_diag_set(rc, "detokenizer: out of memory");
		if (w == 0) {
			d->n_tail = len - i;
			memcpy(d->tail, u + i, d->n_tail);
			return TF_OK;
		}
		if ((rc = tf_bytes_append(&d->out, TF_UTF8_REPLACEMENT, 3)))
			return tf_diag_set(rc, "detokenizer: out of memory");
		i += (size_t)-w;
		run = i;
	}
	if ((rc = tf_bytes_append(&d->out, u + run, len - run)))
		return tf_diag_set(rc, "detokenizer: out of memory");
	return TF_OK;
}

int tf_detok_push(tf_detok *d, int32_t id, const char **text, size_t *len)
{
	const char *p;
	size_t n;
	int rc;

	p = tf_tok_piece(d->tok, id, &n);
	if (!p)
		return tf_diag_set(TF_ERR_RANGE, "token id %d is not in the vocabulary", id);
	if ((d->flags & TF_TOK_SKIP_SPECIAL) && tf_tok_is_special(d->tok, id))
		n = 0;
	if ((rc = feed(d, p, n)))
		return rc;
	*text = d->out.p ? d->out.p : "";
	*len = d->out.len;
	return TF_OK;
}

int tf_detok_flush(tf_detok *d, const char **text, size_t *len)
{
	d->out.len = 0;
	if (d->n_tail && tf_bytes_append(&d->out, TF_UTF8_REPLACEMENT, 3))
		return tf_diag_set(TF_ERR_NOMEM, "detokenizer: out of memory");
	d->n_tail = 0;
	*text = d->out.p ? d->out.p : "";
	*len = d->out.len;
	return TF_OK;
}

/* prompt.c - see prompt.h. */
#include "chat/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "tf/diag.h"

/* Longer "<...>" runs are prose, not tags. */
#define TAG_MAX 32

void tf_chat_prompt_free(tf_chat_prompt *p)
{
	tf_bytes_free(&p->text);
	free(p->tags);
	memset(p, 0, sizeof(*p));
}

static int nomem(void)
{
	return tf_diag_set(TF_ERR_NOMEM, "chat prompt: out of memory");
}

int tf_chat_prompt_text(tf_chat_prompt *p, const char *s, size_t len)
{
	return tf_bytes_append(&p->text, s, len) ? nomem() : TF_OK;
}

static int add_tag(tf_chat_prompt *p, size_t off, size_t len)
{
	if (p->n_tags == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 32;
		tf_chat_span *t = realloc(p->tags, cap * sizeof(*t));
		if (!t)
			return nomem();
		p->tags = t;
		p->cap = cap;
	}
	p->tags[p->n_tags++] = (tf_chat_span){ off, len };
	return TF_OK;
}

/* Length of the tag "<...>" at s, or 0: no whitespace inside, short. */
static size_t tag_len(const char *s)
{
	size_t i;

	for (i = 1; i < TAG_MAX && s[i] && s[i] != '<' && !memchr(" \t\n", s[i], 3); i++)
		if (s[i] == '>')
			return i > 1 ? i + 1 : 0;
	return 0;
}

int tf_chat_prompt_markup(tf_chat_prompt *p, const char *s)
{
	size_t base = p->text.len, i, n;
	int rc;

	p->marked = true;
	if ((rc = tf_chat_prompt_text(p, s, strlen(s))))
		return rc;
	for (i = 0; s[i]; i++)
		if (s[i] == '<' && (n = tag_len(s + i))) {
			if ((rc = add_tag(p, base + i, n)))
				return rc;
			i += n - 1;
		}
	return TF_OK;
}

static int encode_plain(const tf_chat_prompt *p, const tf_tokenizer *tok, size_t from,
			size_t to, tf_tokens *out)
{
	if (to <= from)
		return TF_OK;
	return tf_tok_encode(tok, p->text.p + from, to - from, TF_TOK_SPECIAL_AS_TEXT, out);
}

int tf_chat_prompt_encode(const tf_chat_prompt *p, const tf_tokenizer *tok, size_t from,
			  tf_tokens *out)
{
	size_t i, done = from;
	int rc;

	if (from > p->text.len)
		return tf_diag_set(TF_ERR_INTERNAL, "chat prompt: offset %zu past the end", from);
	if (!p->marked)
		return tf_tok_encode(tok, p->text.p + from, p->text.len - from, 0, out);
	for (i = 0; i < p->n_tags; i++) {
		const tf_chat_span *t = &p->tags[i];
		char tag[TAG_MAX + 1];
		int32_t id;

		if (t->off < from)
			continue;
		memcpy(tag, p->text.p + t->off, t->len);
		tag[t->len] = 0;
		id = tf_tok_find(tok, tag);
		if (id < 0 || !tf_tok_is_special(tok, id))
			continue;
		if ((rc = encode_plain(p, tok, done, t->off, out)) || (rc = tf_tokens_push(out, id)))
			return rc;
		done = t->off + t->len;
	}
	return encode_plain(p, tok, done, p->text.len, out);
}

bool tf_chat_prompt_thinking(const tf_chat_prompt *p)
{
	static const char open[] = "<think>";
	size_t n = p->text.len, k = sizeof(open) - 1;

	while (n && memchr(" \t\n", p->text.p[n - 1], 3))
		n--;
	return n >= k && !memcmp(p->text.p + n - k, open, k);
}

/* prefix.c - GBNF text with every rule name prefixed, to embed in another. */
#include <stdlib.h>
#include <string.h>

#include "tf/diag.h"
#include "tf/grammar.h"

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

/* The end of the literal or class that starts at p (its closing quote or
 * bracket skipped), escapes honoured. */
static const char *skip_quoted(const char *p, const char *end, char close)
{
	for (p++; p < end && *p != close; p++)
		if (*p == '\\' && p + 1 < end)
			p++;
	return p < end ? p + 1 : end;
}

int tf_grammar_gbnf_prefix(const char *gbnf, const char *prefix, char **out)
{
	const char *p = gbnf, *end = gbnf + strlen(gbnf);
	tf_bytes b = { 0 };
	size_t k = strlen(prefix);
	bool ok = true;

	while (p < end && ok) {
		const char *q = p;
		if (*p == '"' || *p == '[') {
			q = skip_quoted(p, end, *p == '"' ? '"' : ']');
		} else if (*p == '#') {
			q = p + strcspn(p, "\n");
		} else if (name_char(*p) && !(*p >= '0' && *p <= '9')) {
			while (q < end && name_char(*q))
				q++;
			ok = !tf_bytes_append(&b, prefix, k);
		} else if (*p == '{') {         /* {m,n}: numbers, not names */
			q = p + strcspn(p, "}");
			q += q < end;
		} else {
			q++;
		}
		ok = ok && !tf_bytes_append(&b, p, (size_t)(q - p));
		p = q;
	}
	if (!ok || tf_bytes_append(&b, "", 1)) {
		tf_bytes_free(&b);
		return tf_diag_set(TF_ERR_NOMEM, "grammar: out of memory");
	}
	*out = b.p;
	return TF_OK;
}

/* stopstr.c - see tf/stopstr.h. */
#define _GNU_SOURCE                     /* memmem */
#include "tf/stopstr.h"

#include <stdlib.h>
#include <string.h>

#include "tf/diag.h"

void tf_stopstr_init(tf_stopstr *m)
{
	memset(m, 0, sizeof(*m));
}

void tf_stopstr_free(tf_stopstr *m)
{
	for (int i = 0; i < m->n; i++)
		tf_bytes_free(&m->stops[i]);
	free(m->stops);
	tf_bytes_free(&m->hold);
	tf_bytes_free(&m->out);
	tf_stopstr_init(m);
}

int tf_stopstr_add(tf_stopstr *m, const char *s, size_t len)
{
	if (len == 0)
		return tf_diag_set(TF_ERR_INVALID, "a stop string must not be empty");
	tf_bytes *grown = realloc(m->stops, (size_t)(m->n + 1) * sizeof(*grown));
	if (!grown)
		return tf_diag_set(TF_ERR_NOMEM, "stop strings: out of memory");
	m->stops = grown;
	m->stops[m->n] = (tf_bytes){ 0 };
	if (tf_bytes_append(&m->stops[m->n], s, len) != TF_OK)
		return tf_diag_set(TF_ERR_NOMEM, "stop strings: out of memory");
	m->n++;
	return TF_OK;
}

/* Where the first stop string to complete in b[0..len) starts (of two
 * ending together, the longer), or len when none completes. */
static size_t first_stop(const tf_stopstr *m, const char *b, size_t len)
{
	size_t at = len, end = len + 1;
	for (int i = 0; i < m->n; i++) {
		const char *p = memmem(b, len, m->stops[i].p, m->stops[i].len);
		size_t s = p ? (size_t)(p - b) : len, e = s + m->stops[i].len;
		if (p && (e < end || (e == end && s < at))) {
			at = s;
			end = e;
		}
	}
	return at;
}

/* The start of the longest tail of b[0..len) that begins a stop string
 * (is a proper prefix of one); len when no tail does. */
static size_t held_from(const tf_stopstr *m, const char *b, size_t len)
{
	for (size_t k = 0; k < len; k++)
		for (int i = 0; i < m->n; i++)
			if (len - k < m->stops[i].len && !memcmp(b + k, m->stops[i].p, len - k))
				return k;
	return len;
}

int tf_stopstr_push(tf_stopstr *m, const char *text, size_t len, const char **out,
		    size_t *out_len)
{
	m->out.len = 0;
	*out = "";
	*out_len = 0;
	if (m->stopped)
		return TF_OK;
	if (tf_bytes_append(&m->hold, text, len) != TF_OK)
		return tf_diag_set(TF_ERR_NOMEM, "stop strings: out of memory");
	if (!m->hold.len)   /* nothing held yet: hold.p may still be NULL */
		return TF_OK;
	const char *b = m->hold.p;
	size_t n = m->hold.len, cut = first_stop(m, b, n), keep = n;
	if (cut < n)
		m->stopped = true;
	else
		cut = keep = held_from(m, b, n);
	if (tf_bytes_append(&m->out, b, cut) != TF_OK)
		return tf_diag_set(TF_ERR_NOMEM, "stop strings: out of memory");
	memmove(m->hold.p, b + keep, n - keep);
	m->hold.len = m->stopped ? 0 : n - keep;
	*out = m->out.p ? m->out.p : "";
	*out_len = m->out.len;
	return TF_OK;
}

void tf_stopstr_flush(tf_stopstr *m, const char **out, size_t *out_len)
{
	/* The held bytes become the output: swap the two buffers. */
	tf_bytes t = m->out;
	m->out = m->hold;
	m->hold = t;
	m->hold.len = 0;
	*out = m->out.p ? m->out.p : "";
	*out_len = m->out.len;
}

void tf_stopstr_reset(tf_stopstr *m)
{
	m->hold.len = 0;
	m->out.len = 0;
	m->stopped = false;
}

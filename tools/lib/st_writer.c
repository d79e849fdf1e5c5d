/* st_writer.c - stream tensors into safetensors files. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "st_writer.h"
#include "tf/checkpoint.h"
#include "tf/diag.h"
#include "tf/tensor.h"

typedef struct st_entry {
	char *name;
	tf_dtype dtype;
	int ndim;
	int64_t shape[TF_MAX_DIMS];
	const void *data;
	uint64_t nbytes;
} st_entry;

struct tf_st_writer {
	st_entry *e;
	size_t n, cap;
	char **meta;                    /* key, value, key, value ... */
	size_t n_meta, meta_cap;
};

/* A growing text buffer; the first failed allocation sticks in `oom` so
 * callers check once at the end. */
typedef struct st_buf {
	char *p;
	size_t len, cap;
	bool oom;
} st_buf;

static void buf_put(st_buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

static void buf_printf(st_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(st_buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	buf_put(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* A JSON string literal: quotes, backslashes and control bytes escaped. */
static void buf_json_str(st_buf *b, const char *s)
{
	buf_put(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			buf_printf(b, "\\%c", c);
		else if (c < 0x20)
			buf_printf(b, "\\u%04x", c);
		else
			buf_put(b, s, 1);
	}
	buf_put(b, "\"", 1);
}

int tf_st_writer_init(tf_st_writer **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? TF_OK : tf_diag_set(TF_ERR_NOMEM, "safetensors writer: out of memory");
}

void tf_st_writer_free(tf_st_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++)
		free(w->e[i].name);
	for (size_t i = 0; i < 2 * w->n_meta; i++)
		free(w->meta[i]);
	free(w->e);
	free(w->meta);
	free(w);
}

/* Make room for one more item in a growing array. */
static int st_grow(void **arr, size_t *cap, size_t n, size_t item)
{
	if (n < *cap)
		return TF_OK;
	size_t c = *cap ? 2 * *cap : 64;
	void *p = realloc(*arr, c * item);
	if (!p)
		return tf_diag_set(TF_ERR_NOMEM, "safetensors writer: out of memory");
	*arr = p;
	*cap = c;
	return TF_OK;
}

int tf_st_writer_add(tf_st_writer *w, const char *name, tf_dtype dt, int ndim,
		     const int64_t *shape, const void *data)
{
	if (!name || !*name || !strcmp(name, "__metadata__"))
		return tf_diag_set(TF_ERR_INVALID, "safetensors writer: bad tensor name '%s'",
				   name ? name : "(null)");
	if (!tf_dtype_size(dt))
		return tf_diag_set(TF_ERR_INVALID, "safetensors writer: tensor '%s': invalid dtype",
				   name);
	if (ndim < 0 || ndim > TF_MAX_DIMS)
		return tf_diag_set(TF_ERR_INVALID, "safetensors writer: tensor '%s': %d dims",
				   name, ndim);
	uint64_t numel = 1, nbytes;
	bool overflow = false;
	for (int i = 0; i < ndim; i++) {
		if (shape[i] < 0)
			return tf_diag_set(TF_ERR_INVALID,
					   "safetensors writer: tensor '%s': negative shape[%d]",
					   name, i);
		overflow |= __builtin_mul_overflow(numel, (uint64_t)shape[i], &numel);
	}
	overflow |= __builtin_mul_overflow(numel, tf_dtype_size(dt), &nbytes);
	if (overflow)
		return tf_diag_set(TF_ERR_INVALID,
				   "safetensors writer: tensor '%s': size overflows", name);
	int rc = st_grow((void **)&w->e, &w->cap, w->n, sizeof(*w->e));
	if (!rc && !data && nbytes)
		rc = tf_st_writer_meta(w, TF_ST_HEADER_ONLY, "true");
	if (rc)
		return rc;
	st_entry *e = &w->e[w->n];
	*e = (st_entry){ .name = strdup(name), .dtype = dt, .ndim = ndim,
			 .data = data, .nbytes = nbytes };
	if (!e->name)
		return tf_diag_set(TF_ERR_NOMEM, "safetensors writer: out of memory");
	if (ndim)
		memcpy(e->shape, shape, (size_t)ndim * sizeof(*shape));
	w->n++;
	return TF_OK;
}

int tf_st_writer_meta(tf_st_writer *w, const char *key, const char *value)
{
	char *v = strdup(value);
	if (!v)
		return tf_diag_set(TF_ERR_NOMEM, "safetensors writer: out of memory");
	for (size_t i = 0; i < w->n_meta; i++) {
		if (!strcmp(w->meta[2 * i], key)) {
			free(w->meta[2 * i + 1]);
			w->meta[2 * i + 1] = v;
			return TF_OK;
		}
	}
	char *k = strdup(key);
	int rc = k ? st_grow((void **)&w->meta, &w->meta_cap, 2 * w->n_meta + 1,
			     sizeof(*w->meta))
		   : tf_diag_set(TF_ERR_NOMEM, "safetensors writer: out of memory");
	if (rc) {
		free(k);
		free(v);
		return rc;
	}
	w->meta[2 * w->n_meta] = k;
	w->meta[2 * w->n_meta + 1] = v;
	w->n_meta++;
	return TF_OK;
}

static int st_cmp_name(const void *a, const void *b)
{
	return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

/* Larger elements first keeps every tensor aligned with no padding. */
static int st_cmp_layout(const void *a, const void *b)
{
	const st_entry *x = a, *y = b;
	size_t sx = tf_dtype_size(x->dtype), sy = tf_dtype_size(y->dtype);
	if (sx != sy)
		return sx > sy ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Refuse duplicates, then put the entries in file order. */
static int st_layout(tf_st_writer *w)
{
	qsort(w->e, w->n, sizeof(*w->e), st_cmp_name);
	for (size_t i = 1; i < w->n; i++)
		if (!strcmp(w->e[i - 1].name, w->e[i].name))
			return tf_diag_set(TF_ERR_INVALID,
					   "safetensors writer: tensor '%s' added twice",
					   w->e[i].name);
	qsort(w->e, w->n, sizeof(*w->e), st_cmp_layout);
	return TF_OK;
}

/* The header JSON for entries [first, first + count), padded with spaces to
 * a multiple of 8 bytes. */
static int st_header(const tf_st_writer *w, size_t first, size_t count, st_buf *b)
{
	uint64_t off = 0;
	buf_put(b, "{", 1);
	if (w->n_meta) {
		buf_put(b, "\"__metadata__\":{", 16);
		for (size_t i = 0; i < w->n_meta; i++) {
			if (i)
				buf_put(b, ",", 1);
			buf_json_str(b, w->meta[2 * i]);
			buf_put(b, ":", 1);
			buf_json_str(b, w->meta[2 * i + 1]);
		}
		buf_put(b, "}", 1);
	}
	for (size_t i = first; i < first + count; i++) {
		const st_entry *e = &w->e[i];
		if (i > first || w->n_meta)
			buf_put(b, ",", 1);
		buf_json_str(b, e->name);
		buf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", tf_dtype_name(e->dtype));
		for (int d = 0; d < e->ndim; d++)
			buf_printf(b, "%s%lld", d ? "," : "", (long long)e->shape[d]);
		buf_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
			   (unsigned long long)(off + e->nbytes));
		off += e->nbytes;
	}
	buf_put(b, "}", 1);
	while (b->len % 8)
		buf_put(b, " ", 1);
	return b->oom ? tf_diag_set(TF_ERR_NOMEM, "safetensors writer: out of memory") : TF_OK;
}

/* Write `text` (after its 8-byte length when `prefix`), then the data of
 * `count` entries, to path via a temporary file. */
static int st_write(const char *path, const st_buf *text, bool prefix,
		    const st_entry *e, size_t count)
{
	size_t n = strlen(path) + 5;
	char *tmp = malloc(n);
	if (!tmp)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", path);
	snprintf(tmp, n, "%s.tmp", path);
	int rc = TF_OK;
	FILE *fp = fopen(tmp, "wb");
	if (!fp) {
		rc = tf_diag_set(TF_ERR_IO, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	bool ok = true;
	if (prefix) {
		uint8_t le[8];
		for (int i = 0; i < 8; i++)
			le[i] = (uint8_t)((uint64_t)text->len >> (8 * i));
		ok = fwrite(le, 1, 8, fp) == 8;
	}
	ok = ok && fwrite(text->p, 1, text->len, fp) == text->len;
	uint64_t end = (prefix ? 8 : 0) + text->len;
	bool holes = false;
	for (size_t i = 0; ok && i < count; i++) {
		if (e[i].data)
			ok = fwrite(e[i].data, 1, e[i].nbytes, fp) == e[i].nbytes;
		else if (e[i].nbytes)
			ok = !fseeko(fp, (off_t)e[i].nbytes, SEEK_CUR);
		holes |= !e[i].data && e[i].nbytes;
		end += e[i].nbytes;
	}
	/* A seek past the end extends nothing until the file is cut to size. */
	if (ok && holes)
		ok = !fflush(fp) && !ftruncate(fileno(fp), (off_t)end);
	if (!ok)
		rc = tf_diag_set(TF_ERR_IO, "%s: write: %s", tmp, strerror(errno));
	if (fclose(fp) && !rc)
		rc = tf_diag_set(TF_ERR_IO, "%s: close: %s", tmp, strerror(errno));
	if (!rc && rename(tmp, path))
		rc = tf_diag_set(TF_ERR_IO, "%s: rename: %s", path, strerror(errno));
	if (rc)
		unlink(tmp);
out:
	free(tmp);
	return rc;
}

static int st_save_range(const tf_st_writer *w, const char *path, size_t first, size_t count)
{
	st_buf hdr = { 0 };
	int rc = st_header(w, first, count, &hdr);
	if (!rc)
		rc = st_write(path, &hdr, true, w->e + first, count);
	free(hdr.p);
	return rc;
}

int tf_st_writer_save(tf_st_writer *w, const char *path)
{
	int rc = st_layout(w);
	return rc ? rc : st_save_range(w, path, 0, w->n);
}

/* One past the last entry of the shard that starts at `first`. */
static size_t st_shard_end(const tf_st_writer *w, size_t first, uint64_t shard_bytes)
{
	uint64_t fill = w->e[first].nbytes;
	size_t end = first + 1;
	while (end < w->n && fill + w->e[end].nbytes <= shard_bytes)
		fill += w->e[end++].nbytes;
	return end;
}

/* "<dir>/<name>" into path[PATH_MAX]. */
static int st_path(char *path, const char *dir, const char *name)
{
	int n = snprintf(path, PATH_MAX, "%s/%s", dir, name);
	return n >= 0 && n < PATH_MAX ? TF_OK
	       : tf_diag_set(TF_ERR_RANGE, "%s: path too long", dir);
}

int tf_st_writer_save_shards(tf_st_writer *w, const char *dir, uint64_t shard_bytes)
{
	int rc = st_layout(w);
	if (rc)
		return rc;
	size_t n_shards = 0;
	uint64_t total = 0;
	for (size_t first = 0; first < w->n; first = st_shard_end(w, first, shard_bytes))
		n_shards++;
	for (size_t i = 0; i < w->n; i++)
		total += w->e[i].nbytes;

	st_buf index = { 0 };
	buf_printf(&index, "{\"metadata\":{\"total_size\":%llu},\"weight_map\":{",
		   (unsigned long long)total);
	size_t shard = 0;
	for (size_t first = 0, end; first < w->n && !rc; first = end, shard++) {
		char name[64];
		end = st_shard_end(w, first, shard_bytes);
		snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors",
			 shard + 1, n_shards);
		for (size_t k = first; k < end; k++) {
			if (k)
				buf_put(&index, ",", 1);
			buf_json_str(&index, w->e[k].name);
			buf_put(&index, ":", 1);
			buf_json_str(&index, name);
		}
		char path[PATH_MAX];
		if (!(rc = st_path(path, dir, name)))
			rc = st_save_range(w, path, first, end - first);
	}
	buf_put(&index, "}}\n", 3);
	if (!rc && index.oom)
		rc = tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", dir);
	if (!rc) {
		char path[PATH_MAX];
		if (!(rc = st_path(path, dir, "model.safetensors.index.json")))
			rc = st_write(path, &index, false, NULL, 0);
	}
	free(index.p);
	return rc;
}

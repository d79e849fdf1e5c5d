/* safetensors.c - map a safetensors file and validate its header. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "model/safetensors.h"
#include "tf/diag.h"

struct tf_st_file {
	const char *path;
	const uint8_t *base;            /* the whole file image */
	size_t len;
	bool mapped;                    /* base came from mmap */
	tf_tensor *tensors;             /* sorted by name */
	size_t n;
	const char **meta;              /* key, value, key, value ... */
	size_t n_meta;
	char *strings;                  /* arena: path, names, metadata */
};

/* safetensors dtypes that are valid but have no tf_dtype: refused as
 * unsupported rather than malformed. */
static const char *const st_dtype_unsupported[] = {
	"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64",
};

/* 2^53: larger JSON numbers are not exact in the double cJSON keeps. */
#define ST_MAX_INT 9007199254740992.0

static int st_dtype_parse(const char *s, tf_dtype *out)
{
	for (int t = TF_DTYPE_INVALID + 1; t < TF_DTYPE_COUNT; t++) {
		if (!strcmp(s, tf_dtype_name((tf_dtype)t))) {
			*out = (tf_dtype)t;
			return TF_OK;
		}
	}
	for (size_t i = 0; i < sizeof(st_dtype_unsupported) / sizeof(*st_dtype_unsupported); i++)
		if (!strcmp(s, st_dtype_unsupported[i]))
			return TF_ERR_UNSUPPORTED;
	return TF_ERR_FORMAT;
}

/* A JSON number that is a non-negative integer exactly representable. */
static bool st_json_uint(const cJSON *v, uint64_t *out)
{
	if (!cJSON_IsNumber(v))
		return false;
	double d = v->valuedouble;
	if (!(d >= 0 && d <= ST_MAX_INT) || d != (double)(uint64_t)d)
		return false;
	*out = (uint64_t)d;
	return true;
}

/* Strict UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF.
 * Returns the offset of the first bad byte, or len. */
static size_t st_utf8_check(const uint8_t *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		uint8_t c = s[i];
		size_t n;
		uint32_t cp, min;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			n = 1, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return i;
		}
		if (len - i <= n)
			return i;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += n + 1;
	}
	return len;
}

static char *st_strdup(char **arena, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = memcpy(*arena, s, n);
	*arena += n;
	return p;
}

/* Fill t from one header entry; data offsets are checked against the data
 * section of `data_len` bytes. */
static int st_parse_tensor(const tf_st_file *f, const cJSON *e, const uint8_t *data,
			   uint64_t data_len, tf_tensor *t)
{
	const char *name = e->string;
	if (!cJSON_IsObject(e))
		return tf_diag_set(TF_ERR_FORMAT, "%s: tensor '%s': entry is not an object",
				   f->path, name);

	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
	if (!cJSON_IsString(dt))
		return tf_diag_set(TF_ERR_FORMAT, "%s: tensor '%s': missing string \"dtype\"",
				   f->path, name);
	int rc = st_dtype_parse(dt->valuestring, &t->dtype);
	if (rc == TF_ERR_UNSUPPORTED)
		return tf_diag_set(rc, "%s: tensor '%s': dtype %s is not supported",
				   f->path, name, dt->valuestring);
	if (rc)
		return tf_diag_set(rc, "%s: tensor '%s': unknown dtype \"%s\"",
				   f->path, name, dt->valuestring);

	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
	if (!cJSON_IsArray(shape))
		return tf_diag_set(TF_ERR_FORMAT, "%s: tensor '%s': missing array \"shape\"",
				   f->path, name);
	int ndim = cJSON_GetArraySize(shape);
	if (ndim > TF_MAX_DIMS)
		return tf_diag_set(TF_ERR_FORMAT, "%s: tensor '%s': %d dims, at most %d supported",
				   f->path, name, ndim, TF_MAX_DIMS);
	uint64_t numel = 1;
	bool overflow = false;
	const cJSON *d;
	t->ndim = 0;
	cJSON_ArrayForEach(d, shape) {
		uint64_t v;
		if (!st_json_uint(d, &v))
			return tf_diag_set(TF_ERR_FORMAT,
					   "%s: tensor '%s': shape[%d] is not a non-negative integer",
					   f->path, name, t->ndim);
		t->shape[t->ndim++] = (int64_t)v;
		overflow |= __builtin_mul_overflow(numel, v, &numel);
	}
	uint64_t nbytes;
	overflow |= __builtin_mul_overflow(numel, tf_dtype_size(t->dtype), &nbytes);
	if (overflow)
		return tf_diag_set(TF_ERR_FORMAT, "%s: tensor '%s': shape overflows the byte size",
				   f->path, name);

	const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
	uint64_t begin, end;
	if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
	    !st_json_uint(offs->child, &begin) || !st_json_uint(offs->child->next, &end))
		return tf_diag_set(TF_ERR_FORMAT,
				   "%s: tensor '%s': \"data_offsets\" must be two non-negative integers",
				   f->path, name);
	if (begin > end || end > data_len)
		return tf_diag_set(TF_ERR_FORMAT,
				   "%s: tensor '%s': data_offsets [%llu, %llu) outside the %llu-byte data section",
				   f->path, name, (unsigned long long)begin,
				   (unsigned long long)end, (unsigned long long)data_len);
	if (end - begin != nbytes)
		return tf_diag_set(TF_ERR_FORMAT,
				   "%s: tensor '%s': data_offsets span %llu bytes, shape and dtype %s need %llu",
				   f->path, name, (unsigned long long)(end - begin),
				   tf_dtype_name(t->dtype), (unsigned long long)nbytes);
	t->data = data + begin;
	t->nbytes = (size_t)nbytes;
	t->file = f->path;
	return TF_OK;
}

static int st_cmp_name(const void *a, const void *b)
{
	return strcmp(((const tf_tensor *)a)->name, ((const tf_tensor *)b)->name);
}

static int st_cmp_data(const void *a, const void *b)
{
	const uint8_t *x = (*(const tf_tensor *const *)a)->data;
	const uint8_t *y = (*(const tf_tensor *const *)b)->data;
	return x < y ? -1 : x > y;
}

/* Tensors are sorted by name; check names are unique and byte ranges
 * disjoint (empty tensors occupy nothing). */
static int st_check_disjoint(const tf_st_file *f)
{
	for (size_t i = 1; i < f->n; i++)
		if (!strcmp(f->tensors[i - 1].name, f->tensors[i].name))
			return tf_diag_set(TF_ERR_FORMAT, "%s: tensor '%s' appears twice",
					   f->path, f->tensors[i].name);

	const tf_tensor **by_data = malloc(f->n * sizeof(*by_data) + 1);
	if (!by_data)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", f->path);
	size_t m = 0;
	for (size_t i = 0; i < f->n; i++)
		if (f->tensors[i].nbytes)
			by_data[m++] = &f->tensors[i];
	qsort(by_data, m, sizeof(*by_data), st_cmp_data);
	int rc = TF_OK;
	for (size_t i = 1; i < m; i++) {
		const tf_tensor *a = by_data[i - 1], *b = by_data[i];
		if ((const uint8_t *)a->data + a->nbytes > (const uint8_t *)b->data) {
			rc = tf_diag_set(TF_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap",
					 f->path, a->name, b->name);
			break;
		}
	}
	free(by_data);
	return rc;
}

/* Bytes the arena needs for every string copied out of the JSON tree. */
static size_t st_arena_size(const tf_st_file *f, const cJSON *root)
{
	size_t n = strlen(f->path) + 1;
	const cJSON *e, *m;
	cJSON_ArrayForEach(e, root) {
		n += strlen(e->string) + 1;
		/* A non-object __metadata__ is refused later; skip it here. */
		if (!strcmp(e->string, "__metadata__") && cJSON_IsObject(e))
			cJSON_ArrayForEach(m, e)
				n += strlen(m->string) + 1 +
				     (cJSON_IsString(m) ? strlen(m->valuestring) + 1 : 0);
	}
	return n;
}

static int st_parse_metadata(tf_st_file *f, const cJSON *md, char **arena)
{
	const cJSON *m;
	if (!cJSON_IsObject(md))
		return tf_diag_set(TF_ERR_FORMAT, "%s: \"__metadata__\" is not an object", f->path);
	if (f->meta)
		return tf_diag_set(TF_ERR_FORMAT, "%s: \"__metadata__\" appears twice", f->path);
	f->meta = malloc(2 * (size_t)cJSON_GetArraySize(md) * sizeof(*f->meta) + 1);
	if (!f->meta)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", f->path);
	cJSON_ArrayForEach(m, md) {
		if (!cJSON_IsString(m))
			return tf_diag_set(TF_ERR_FORMAT, "%s: __metadata__ '%s' is not a string",
					   f->path, m->string);
		f->meta[2 * f->n_meta] = st_strdup(arena, m->string);
		f->meta[2 * f->n_meta + 1] = st_strdup(arena, m->valuestring);
		f->n_meta++;
	}
	return TF_OK;
}

/* Validate the image at f->base and build the tensor table. */
static int st_parse(tf_st_file *f, const char *path)
{
	const uint8_t *b = f->base;
	if (f->len < 8)
		return tf_diag_set(TF_ERR_FORMAT,
				   "%s: %zu bytes, too short for the 8-byte header length",
				   path, f->len);
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | b[i];
	if (n > TF_ST_MAX_HEADER)
		return tf_diag_set(TF_ERR_FORMAT, "%s: header length %llu exceeds the %llu-byte limit",
				   path, (unsigned long long)n, TF_ST_MAX_HEADER);
	if (n > f->len - 8)
		return tf_diag_set(TF_ERR_FORMAT,
				   "%s: header length %llu runs past the end of the file (%zu bytes)",
				   path, (unsigned long long)n, f->len);
	const char *hdr = (const char *)b + 8;
	if (n < 2 || hdr[0] != '{')
		return tf_diag_set(TF_ERR_FORMAT, "%s: header does not start with '{'", path);
	size_t bad = st_utf8_check((const uint8_t *)hdr, n);
	if (bad != n)
		return tf_diag_set(TF_ERR_FORMAT, "%s: header byte %zu is not valid UTF-8",
				   path, bad);

	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(hdr, n, &end, 0);
	if (!root)
		return tf_diag_set(TF_ERR_FORMAT, "%s: header JSON syntax error at byte %zu",
				   path, end ? (size_t)(end - hdr) : 0);
	int rc = TF_ERR_FORMAT;
	for (; end < hdr + n; end++)
		if (!strchr(" \t\r\n", *end) || !*end) {
			tf_diag_set(rc, "%s: junk after the header JSON at byte %zu",
				    path, (size_t)(end - hdr));
			goto out;
		}

	/* The arena never moves: tensor names and f->path point into it. */
	f->path = path;
	char *arena = f->strings = malloc(st_arena_size(f, root));
	f->tensors = malloc((size_t)cJSON_GetArraySize(root) * sizeof(*f->tensors) + 1);
	if (!f->strings || !f->tensors) {
		rc = tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", path);
		goto out;
	}
	f->path = st_strdup(&arena, path);

	const uint8_t *data = b + 8 + n;
	uint64_t data_len = f->len - 8 - n;
	const cJSON *e;
	cJSON_ArrayForEach(e, root) {
		if (!strcmp(e->string, "__metadata__")) {
			rc = st_parse_metadata(f, e, &arena);
		} else {
			tf_tensor *t = &f->tensors[f->n];
			memset(t, 0, sizeof(*t));
			rc = st_parse_tensor(f, e, data, data_len, t);
			if (!rc) {
				t->name = st_strdup(&arena, e->string);
				f->n++;
			}
		}
		if (rc)
			goto out;
	}
	qsort(f->tensors, f->n, sizeof(*f->tensors), st_cmp_name);
	rc = st_check_disjoint(f);
out:
	cJSON_Delete(root);
	return rc;
}

static int st_open_image(const void *buf, size_t len, bool mapped, const char *name,
			 tf_st_file **out)
{
	tf_st_file *f = calloc(1, sizeof(*f));
	if (!f) {
		if (mapped)
			munmap((void *)buf, len);
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", name);
	}
	f->base = buf;
	f->len = len;
	f->mapped = mapped;
	int rc = st_parse(f, name);
	if (rc) {
		tf_st_close(f);
		return rc;
	}
	*out = f;
	return TF_OK;
}

int tf_st_open_buffer(const void *buf, size_t len, const char *name, tf_st_file **out)
{
	*out = NULL;
	return st_open_image(buf, len, false, name, out);
}

int tf_st_open(const char *path, tf_st_file **out)
{
	struct stat st;
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tf_diag_set(errno == ENOENT ? TF_ERR_NOT_FOUND : TF_ERR_IO,
				   "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return tf_diag_set(TF_ERR_IO, "%s: not a regular file", path);
	}
	size_t len = (size_t)st.st_size;
	void *map = NULL;
	if (len >= 8) {
		map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			int err = errno;
			close(fd);
			return tf_diag_set(TF_ERR_IO, "%s: mmap: %s", path, strerror(err));
		}
	}
	close(fd);
	/* Shorter files are refused by the parser before it reads a byte. */
	return st_open_image(map, len, map != NULL, path, out);
}

void tf_st_close(tf_st_file *f)
{
	if (!f)
		return;
	if (f->mapped)
		munmap((void *)f->base, f->len);
	free(f->tensors);
	free(f->meta);
	free(f->strings);
	free(f);
}

int tf_st_release(const tf_st_file *f, const void *data, size_t bytes)
{
	/* As integers: the range may lie in no file at all. */
	const uintptr_t at = (uintptr_t)data, base = (uintptr_t)f->base;
	long page = sysconf(_SC_PAGESIZE);

	if (!f->mapped || at < base || bytes > f->len || at - base > f->len - bytes)
		return 0;
	if (page <= 0)
		return 1;
	/* Whole pages only: the edges may hold a neighbour still in use. */
	uintptr_t lo = (at + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
	uintptr_t hi = (at + bytes) / (uintptr_t)page * (uintptr_t)page;
	/* Advice: a refusal leaves the pages mapped, which is still correct. */
	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
	return 1;
}

size_t tf_st_count(const tf_st_file *f) { return f->n; }

const tf_tensor *tf_st_at(const tf_st_file *f, size_t i)
{
	return i < f->n ? &f->tensors[i] : NULL;
}

const tf_tensor *tf_st_find(const tf_st_file *f, const char *name)
{
	tf_tensor key = { .name = name };
	return bsearch(&key, f->tensors, f->n, sizeof(*f->tensors), st_cmp_name);
}

const char *tf_st_meta(const tf_st_file *f, const char *key)
{
	for (size_t i = 0; i < f->n_meta; i++)
		if (!strcmp(f->meta[2 * i], key))
			return f->meta[2 * i + 1];
	return NULL;
}

const char *tf_st_path(const tf_st_file *f) { return f->path; }

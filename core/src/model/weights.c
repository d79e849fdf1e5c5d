/* weights.c - a checkpoint folder: one safetensors file or indexed shards. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "util/path.h"
#include "model/safetensors.h"
#include "tf/diag.h"
#include "tf/text.h"
#include "model/weights.h"

#define WEIGHTS_INDEX "model.safetensors.index.json"
#define WEIGHTS_SINGLE "model.safetensors"
/* An index lists ~100 bytes per tensor; this is far above any real one. */
#define WEIGHTS_MAX_INDEX (256u << 20)

struct tf_weights {
	tf_st_file **files;
	size_t n_files;
	tf_tensor *t;                   /* views into the files, by name */
	size_t n;
};

static int w_cmp_name(const void *a, const void *b)
{
	return strcmp(((const tf_tensor *)a)->name, ((const tf_tensor *)b)->name);
}

static int w_add_file(tf_weights *w, tf_st_file *f)
{
	tf_st_file **p = realloc(w->files, (w->n_files + 1) * sizeof(*p));
	if (!p) {
		tf_st_close(f);
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", tf_st_path(f));
	}
	w->files = p;
	w->files[w->n_files++] = f;
	return TF_OK;
}

static int w_open_single(tf_weights *w, const char *path)
{
	tf_st_file *f;
	int rc = tf_st_open(path, &f);
	if (rc || (rc = w_add_file(w, f)))
		return rc;
	w->n = tf_st_count(f);
	w->t = malloc(w->n * sizeof(*w->t) + 1);
	if (!w->t)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", path);
	for (size_t i = 0; i < w->n; i++)
		w->t[i] = *tf_st_at(f, i);
	return TF_OK;
}

/* The shard named `file`, opened on first use. */
static int w_shard(tf_weights *w, const char *dir, const char *index, const char *file,
		   tf_st_file **out)
{
	if (!*file || strchr(file, '/') || !strcmp(file, ".") || !strcmp(file, ".."))
		return tf_diag_set(TF_ERR_FORMAT, "%s: shard name \"%s\" is not a file in %s",
				   index, file, dir);
	size_t dl = strlen(dir);
	for (size_t i = w->n_files; i-- > 0;) {
		const char *p = tf_st_path(w->files[i]);
		if (!strncmp(p, dir, dl) && p[dl] == '/' && !strcmp(p + dl + 1, file)) {
			*out = w->files[i];
			return TF_OK;
		}
	}
	char *path = tf_path_join(dir, file);
	if (!path)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", index);
	int rc = tf_st_open(path, out);
	free(path);
	if (rc)
		return tf_diag_prefix(rc, "%s: shard \"%s\"", index, file);
	return w_add_file(w, *out);
}

static int w_open_index(tf_weights *w, const char *dir, const char *index)
{
	char *text;
	size_t len;
	int rc = tf_text_read(index, WEIGHTS_MAX_INDEX, &text, &len);
	if (rc)
		return rc;
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!root) {
		rc = tf_diag_set(TF_ERR_FORMAT, "%s: JSON syntax error at byte %zu", index,
				 end ? (size_t)(end - text) : 0);
		goto out;
	}
	const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(map)) {
		rc = tf_diag_set(TF_ERR_FORMAT, "%s: missing object \"weight_map\"", index);
		goto out;
	}
	w->t = malloc((size_t)cJSON_GetArraySize(map) * sizeof(*w->t) + 1);
	if (!w->t) {
		rc = tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", index);
		goto out;
	}
	const cJSON *e;
	cJSON_ArrayForEach(e, map) {
		tf_st_file *f;
		if (!cJSON_IsString(e)) {
			rc = tf_diag_set(TF_ERR_FORMAT, "%s: weight_map '%s' is not a file name",
					 index, e->string);
			goto out;
		}
		if ((rc = w_shard(w, dir, index, e->valuestring, &f)))
			goto out;
		const tf_tensor *t = tf_st_find(f, e->string);
		if (!t) {
			rc = tf_diag_set(TF_ERR_FORMAT, "%s: tensor '%s' is mapped to %s, which lacks it",
					 index, e->string, tf_st_path(f));
			goto out;
		}
		w->t[w->n++] = *t;
	}
	qsort(w->t, w->n, sizeof(*w->t), w_cmp_name);
	for (size_t i = 1; i < w->n; i++)
		if (!strcmp(w->t[i - 1].name, w->t[i].name)) {
			rc = tf_diag_set(TF_ERR_FORMAT, "%s: tensor '%s' listed twice", index,
					 w->t[i].name);
			goto out;
		}
out:
	cJSON_Delete(root);
	free(text);
	return rc;
}

int tf_weights_open(const char *dir, tf_weights **out)
{
	struct stat st;
	*out = NULL;
	if (stat(dir, &st))
		return tf_diag_set(errno == ENOENT ? TF_ERR_NOT_FOUND : TF_ERR_IO, "%s: %s",
				   dir, strerror(errno));
	tf_weights *w = calloc(1, sizeof(*w));
	if (!w)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", dir);

	int rc;
	char *index = NULL, *single = NULL;
	if (S_ISREG(st.st_mode)) {
		rc = w_open_single(w, dir);
		goto out;
	}
	index = tf_path_join(dir, WEIGHTS_INDEX);
	single = tf_path_join(dir, WEIGHTS_SINGLE);
	if (!index || !single)
		rc = tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", dir);
	else if (!stat(index, &st))
		rc = w_open_index(w, dir, index);
	else if (!stat(single, &st))
		rc = w_open_single(w, single);
	else
		rc = tf_diag_set(TF_ERR_NOT_FOUND, "%s: neither %s nor %s found", dir,
				 WEIGHTS_SINGLE, WEIGHTS_INDEX);
out:
	free(index);
	free(single);
	if (rc) {
		tf_weights_close(w);
		return rc;
	}
	*out = w;
	return TF_OK;
}

bool tf_weights_header_only(const tf_weights *w)
{
	for (size_t i = 0; i < w->n_files; i++) {
		const char *v = tf_st_meta(w->files[i], TF_ST_HEADER_ONLY);
		if (v && !strcmp(v, "true"))
			return true;
	}
	return false;
}

void tf_weights_close(tf_weights *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n_files; i++)
		tf_st_close(w->files[i]);
	free(w->files);
	free(w->t);
	free(w);
}

int tf_weights_get(const tf_weights *w, const char *name, tf_tensor *out)
{
	tf_tensor key = { .name = name };
	const tf_tensor *t = bsearch(&key, w->t, w->n, sizeof(*w->t), w_cmp_name);
	if (!t)
		return TF_ERR_NOT_FOUND;
	*out = *t;
	return TF_OK;
}

void tf_weights_release(const tf_weights *w, const char *name)
{
	tf_tensor t;

	if (tf_weights_get(w, name, &t))
		return;
	for (size_t i = 0; i < w->n_files; i++)
		if (tf_st_release(w->files[i], t.data, t.nbytes))
			return;
}

size_t tf_weights_count(const tf_weights *w) { return w->n; }

const tf_tensor *tf_weights_at(const tf_weights *w, size_t i)
{
	return i < w->n ? &w->t[i] : NULL;
}

/*
 * synth_write.c - stream a tensor plan into safetensors shards.
 *
 * The safetensors writer needs a file's tensors in memory until it saves, so
 * shards are generated, saved and freed one at a time: memory stays at one
 * shard even for the multi-GB benchmark model.  Shard names and the index
 * follow the Hugging Face layout that the weights loader reads.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"              /* tools/lib */
#include "synth.h"
#include "checkpoint_writer.h"
#include "tf/checkpoint.h"

/* Tensors [first, end) make one shard. */
typedef struct shard {
	size_t first, end;
} shard;

/* Cuts the plan in order, starting a new shard before one would overflow. */
static int plan_shards(const tf_synth_plan *p, uint64_t shard_bytes,
		       shard **out, size_t *n_out)
{
	shard *s = calloc(p->n ? p->n : 1, sizeof(*s));
	size_t n = 0;
	uint64_t fill = 0;

	if (!s)
		return tfq_fail(TF_ERR_NOMEM, "shard plan: %zu tensors", p->n);
	for (size_t i = 0; i < p->n; i++) {
		uint64_t b = tf_synth_tensor_bytes(&p->t[i]);
		if (!n || (shard_bytes && fill && fill + b > shard_bytes)) {
			if (n)
				s[n - 1].end = i;
			s[n++].first = i;
			fill = 0;
		}
		fill += b;
	}
	if (n)
		s[n - 1].end = p->n;
	*out = s;
	*n_out = n;
	return TF_OK;
}

static void shard_name(char *buf, size_t len, size_t i, size_t n)
{
	if (n == 1)
		snprintf(buf, len, "model.safetensors");
	else
		snprintf(buf, len, "model-%05zu-of-%05zu.safetensors", i + 1, n);
}

static int write_shard(const tf_synth_plan *p, const shard *sh, uint64_t seed,
		       int header_only, const char *path)
{
	tf_checkpoint_writer *w = NULL;
	void **data = calloc(sh->end - sh->first, sizeof(*data));
	char seed_text[32];
	int rc;

	if (!data)
		return tfq_fail(TF_ERR_NOMEM, "%s: tensor table", path);
	snprintf(seed_text, sizeof(seed_text), "%" PRIu64, seed);
	if ((rc = tf_checkpoint_writer_init(&w)) ||
	    (rc = tf_checkpoint_writer_meta(w, "format", "pt")) ||
	    (rc = tf_checkpoint_writer_meta(w, "tfsynth_seed", seed_text)))
		goto out;
	for (size_t i = sh->first; i < sh->end; i++) {
		const tf_synth_tensor *t = &p->t[i];
		if (header_only) {
			if ((rc = tf_checkpoint_writer_add(w, t->name, t->dtype, t->ndim, t->shape,
							   NULL)))
				goto out;
			continue;
		}
		void *buf = malloc(tf_synth_tensor_bytes(t));
		if (!buf) {
			rc = tfq_fail(TF_ERR_NOMEM, "%s: %zu bytes for %s", path,
					 tf_synth_tensor_bytes(t), t->name);
			goto out;
		}
		data[i - sh->first] = buf;
		tf_synth_fill(t, seed, buf);
		if ((rc = tf_checkpoint_writer_add(w, t->name, t->dtype, t->ndim, t->shape, buf)))
			goto out;
	}
	rc = tf_checkpoint_writer_save_file(w, path);
out:
	tf_checkpoint_writer_free(w);
	for (size_t i = 0; i < sh->end - sh->first; i++)
		free(data[i]);
	free(data);
	return rc;
}

static int write_index(const tf_synth_plan *p, const shard *s, size_t n, const char *dir)
{
	char path[4096], name[64];
	cJSON *root = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
	cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
	uint64_t total = 0;
	char *text = NULL;
	int rc = TF_OK;

	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	if (!meta || !map)
		goto oom;
	for (size_t k = 0; k < n; k++) {
		shard_name(name, sizeof(name), k, n);
		for (size_t i = s[k].first; i < s[k].end; i++) {
			total += tf_synth_tensor_bytes(&p->t[i]);
			if (!cJSON_AddStringToObject(map, p->t[i].name, name))
				goto oom;
		}
	}
	if (!cJSON_AddNumberToObject(meta, "total_size", (double)total) ||
	    !(text = cJSON_Print(root)))
		goto oom;
	FILE *f = fopen(path, "w");
	if (!f) {
		rc = tfq_fail(TF_ERR_IO, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (fputs(text, f) == EOF)
		rc = tfq_fail(TF_ERR_IO, "%s: write failed", path);
	if (fclose(f) && !rc)
		rc = tfq_fail(TF_ERR_IO, "%s: %s", path, strerror(errno));
	goto out;
oom:
	rc = tfq_fail(TF_ERR_NOMEM, "%s: building the index", path);
out:
	free(text);
	cJSON_Delete(root);
	return rc;
}

int tf_synth_write(const tf_synth_plan *p, uint64_t seed, const char *dir,
		   uint64_t shard_bytes, int header_only)
{
	char path[4096], name[64];
	shard *s = NULL;
	size_t n = 0;
	int rc = plan_shards(p, shard_bytes, &s, &n);

	if (rc)
		return rc;
	for (size_t k = 0; k < n && !rc; k++) {
		shard_name(name, sizeof(name), k, n);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		rc = write_shard(p, &s[k], seed, header_only, path);
	}
	if (!rc && n > 1)
		rc = write_index(p, s, n, dir);
	free(s);
	return rc;
}

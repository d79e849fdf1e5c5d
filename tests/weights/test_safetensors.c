/* test_safetensors.c - writer -> reader round trips, sharded folders, and
 * every kind of malformed header refused with a message naming the file and
 * the tensor, and released tensors leaving memory with their bytes intact. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "st_writer.h"
#include "tf/diag.h"
#include "tmpdir.h"
#include "model/weights.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static void fill_random(void *p, size_t n)
{
	uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		b[i] = (uint8_t)(rng >> 32) | 1;        /* never all-zero data */
	}
}

/* The test model: mixed element sizes, so the writer must order them to
 * keep every tensor aligned, plus a scalar and an empty tensor. */
typedef struct spec {
	const char *name;
	tf_dtype dt;
	int ndim;
	int64_t shape[3];
} spec;

static const spec specs[] = {
	{ "model.embed.weight", TF_DTYPE_BF16, 2, { 7, 5 } },
	{ "model.layers.0.norm.weight", TF_DTYPE_F32, 1, { 5 } },
	{ "model.layers.0.attn.q.trellis", TF_DTYPE_I16, 3, { 1, 2, 48 } },
	{ "model.layers.0.attn.q.mcg", TF_DTYPE_I32, 0, { 0 } },
	{ "scale", TF_DTYPE_F64, 1, { 3 } },
	{ "odd\"name\\with\tescapes", TF_DTYPE_U8, 1, { 3 } },
	{ "empty", TF_DTYPE_F16, 2, { 0, 4 } },
};
#define N_SPECS (sizeof(specs) / sizeof(*specs))

static size_t spec_bytes(const spec *s)
{
	size_t n = tf_dtype_size(s->dt);
	for (int i = 0; i < s->ndim; i++)
		n *= (size_t)s->shape[i];
	return n;
}

/* Add every spec with fresh random data (caller frees data[i]). */
static tf_st_writer *writer_with_specs(void *data[N_SPECS])
{
	tf_st_writer *w;
	cr_assert_eq(tf_st_writer_init(&w), TF_OK);
	for (size_t i = 0; i < N_SPECS; i++) {
		data[i] = malloc(spec_bytes(&specs[i]) + 1);
		fill_random(data[i], spec_bytes(&specs[i]));
		cr_assert_eq(tf_st_writer_add(w, specs[i].name, specs[i].dt, specs[i].ndim,
					      specs[i].shape, data[i]), TF_OK, "%s", tf_diag_msg());
	}
	return w;
}

static void check_tensor(const tf_tensor *t, const spec *s, const void *data)
{
	cr_assert_not_null(t, "%s missing", s->name);
	cr_expect_str_eq(t->name, s->name);
	cr_expect_eq(t->dtype, s->dt, "%s dtype", s->name);
	cr_expect_eq(t->ndim, s->ndim, "%s ndim", s->name);
	for (int d = 0; d < s->ndim; d++)
		cr_expect_eq(t->shape[d], s->shape[d], "%s shape[%d]", s->name, d);
	cr_assert_eq(t->nbytes, spec_bytes(s), "%s nbytes", s->name);
	cr_expect_eq(memcmp(t->data, data, t->nbytes), 0, "%s bytes differ", s->name);
	cr_expect_eq((uintptr_t)t->data % tf_dtype_size(s->dt), 0, "%s misaligned", s->name);
}

Test(safetensors, round_trip_single_file)
{
	void *data[N_SPECS];
	char *dir = tmpdir_new();
	tf_st_writer *w = writer_with_specs(data);
	cr_assert_eq(tf_st_writer_meta(w, "format", "pt"), TF_OK);
	cr_assert_eq(tf_st_writer_meta(w, "quant", "none"), TF_OK);
	cr_assert_eq(tf_st_writer_meta(w, "quant", "exl3"), TF_OK);     /* replaces */
	char path[512];
	snprintf(path, sizeof(path), "%s", tmpdir_path(dir, "model.safetensors"));
	cr_assert_eq(tf_st_writer_save(w, path), TF_OK, "%s", tf_diag_msg());

	tf_st_file *f;
	cr_assert_eq(tf_st_open(path, &f), TF_OK, "%s", tf_diag_msg());
	cr_expect_eq(tf_st_count(f), N_SPECS);
	for (size_t i = 0; i < N_SPECS; i++)
		check_tensor(tf_st_find(f, specs[i].name), &specs[i], data[i]);
	for (size_t i = 1; i < tf_st_count(f); i++)
		cr_expect_lt(strcmp(tf_st_at(f, i - 1)->name, tf_st_at(f, i)->name), 0);
	cr_expect_null(tf_st_at(f, N_SPECS));
	cr_expect_null(tf_st_find(f, "nope"));
	cr_expect_str_eq(tf_st_meta(f, "format"), "pt");
	cr_expect_str_eq(tf_st_meta(f, "quant"), "exl3");
	cr_expect_null(tf_st_meta(f, "other"));
	cr_expect_str_eq(tf_st_find(f, "scale")->file, path);
	tf_st_close(f);

	/* What strict readers demand: an 8-byte multiple of header, then the
	 * tensors back to back filling the rest of the file exactly. */
	FILE *fp = fopen(path, "rb");
	uint8_t le[8];
	cr_assert(fp && fread(le, 1, 8, fp) == 8);
	fseek(fp, 0, SEEK_END);
	uint64_t hdr = 0, payload = 0, size = (uint64_t)ftell(fp);
	fclose(fp);
	for (int i = 7; i >= 0; i--)
		hdr = hdr << 8 | le[i];
	for (size_t i = 0; i < N_SPECS; i++)
		payload += spec_bytes(&specs[i]);
	cr_expect_eq(hdr % 8, 0);
	cr_expect_eq(size, 8 + hdr + payload);

	/* The folder form finds model.safetensors too. */
	tf_weights *wt;
	tf_tensor t;
	cr_assert_eq(tf_weights_open(dir, &wt), TF_OK, "%s", tf_diag_msg());
	cr_expect_eq(tf_weights_count(wt), N_SPECS);
	cr_assert_eq(tf_weights_get(wt, "scale", &t), TF_OK);
	check_tensor(&t, &specs[4], data[4]);
	tf_diag_clear();
	cr_expect_eq(tf_weights_get(wt, "absent", &t), TF_ERR_NOT_FOUND);
	cr_expect_str_eq(tf_diag_msg(), "", "a miss must not record a diag");
	tf_weights_close(wt);

	tf_st_writer_free(w);
	for (size_t i = 0; i < N_SPECS; i++)
		free(data[i]);
	tmpdir_free(dir);
}

Test(safetensors, round_trip_shards)
{
	void *data[N_SPECS];
	char *dir = tmpdir_new();
	tf_st_writer *w = writer_with_specs(data);
	/* 64 bytes per shard: {scale, mcg, norm, empty} (48 bytes), then the
	 * 70-byte embedding and the 192-byte trellis each alone (larger than a
	 * shard), then the 3-byte tensor. */
	cr_assert_eq(tf_st_writer_save_shards(w, dir, 64), TF_OK, "%s", tf_diag_msg());
	cr_expect_eq(access(tmpdir_path(dir, "model.safetensors"), F_OK), -1);
	for (int i = 1; i <= 4; i++) {
		char name[64];
		snprintf(name, sizeof(name), "model-%05d-of-00004.safetensors", i);
		cr_expect_eq(access(tmpdir_path(dir, name), F_OK), 0, "%s missing", name);
	}

	tf_weights *wt;
	cr_assert_eq(tf_weights_open(dir, &wt), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_weights_count(wt), N_SPECS);
	for (size_t i = 0; i < N_SPECS; i++) {
		tf_tensor t;
		cr_assert_eq(tf_weights_get(wt, specs[i].name, &t), TF_OK, "%s", specs[i].name);
		check_tensor(&t, &specs[i], data[i]);
	}
	tf_tensor a, b;
	cr_assert_eq(tf_weights_get(wt, "scale", &a), TF_OK);
	cr_assert_eq(tf_weights_get(wt, "model.layers.0.norm.weight", &b), TF_OK);
	cr_expect_str_eq(a.file, b.file, "small tensors share a shard");
	cr_assert_eq(tf_weights_get(wt, "model.embed.weight", &b), TF_OK);
	cr_expect_str_neq(a.file, b.file, "a tensor over the shard size starts a new one");
	tf_weights_close(wt);

	tf_st_writer_free(w);
	for (size_t i = 0; i < N_SPECS; i++)
		free(data[i]);
	tmpdir_free(dir);
}

Test(safetensors, writer_refuses_bad_input)
{
	tf_st_writer *w;
	float x[4] = { 1, 2, 3, 4 };
	cr_assert_eq(tf_st_writer_init(&w), TF_OK);
	cr_expect_eq(tf_st_writer_add(w, "", TF_DTYPE_F32, 1, (int64_t[]){ 4 }, x), TF_ERR_INVALID);
	cr_expect_eq(tf_st_writer_add(w, "__metadata__", TF_DTYPE_F32, 1, (int64_t[]){ 4 }, x),
		     TF_ERR_INVALID);
	cr_expect_eq(tf_st_writer_add(w, "a", TF_DTYPE_F32, 1, (int64_t[]){ -4 }, x),
		     TF_ERR_INVALID);
	cr_expect_eq(tf_st_writer_add(w, "a", TF_DTYPE_INVALID, 1, (int64_t[]){ 4 }, x),
		     TF_ERR_INVALID);
	cr_expect_eq(tf_st_writer_add(w, "a", TF_DTYPE_F32, 9, (int64_t[9]){ 1 }, x),
		     TF_ERR_INVALID);
	cr_expect_eq(tf_st_writer_add(w, "a", TF_DTYPE_F32, 2,
				      (int64_t[]){ INT64_MAX / 2, 8 }, x), TF_ERR_INVALID);
	cr_assert_eq(tf_st_writer_add(w, "a", TF_DTYPE_F32, 1, (int64_t[]){ 4 }, x), TF_OK);
	cr_assert_eq(tf_st_writer_add(w, "a", TF_DTYPE_F32, 1, (int64_t[]){ 2 }, x), TF_OK);
	char *dir = tmpdir_new();
	cr_expect_eq(tf_st_writer_save(w, tmpdir_path(dir, "dup.safetensors")), TF_ERR_INVALID);
	cr_expect(strstr(tf_diag_msg(), "'a' added twice"), "%s", tf_diag_msg());
	cr_expect_eq(access(tmpdir_path(dir, "dup.safetensors"), F_OK), -1);
	tf_st_writer_free(w);

	/* A save into a missing folder fails cleanly. */
	cr_assert_eq(tf_st_writer_init(&w), TF_OK);
	cr_assert_eq(tf_st_writer_add(w, "a", TF_DTYPE_F32, 1, (int64_t[]){ 4 }, x), TF_OK);
	cr_expect_eq(tf_st_writer_save(w, tmpdir_path(dir, "no/such/dir.safetensors")), TF_ERR_IO);
	tf_st_writer_free(w);
	tmpdir_free(dir);
}

/* NULL data: the tensor's bytes are a hole.  The file has its full size
 * but no blocks there, says so in its metadata, and reads back zeros there
 * and the real bytes elsewhere. */
Test(safetensors, holes_make_a_header_only_file)
{
	enum { BIG = 16 << 20 };
	float x[4];
	fill_random(x, sizeof(x));
	char *dir = tmpdir_new();
	const char *path = tmpdir_path(dir, "model.safetensors");
	tf_st_writer *w;
	cr_assert_eq(tf_st_writer_init(&w), TF_OK);
	cr_assert_eq(tf_st_writer_add(w, "big", TF_DTYPE_BF16, 1, (int64_t[]){ BIG / 2 }, NULL),
		     TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_st_writer_add(w, "small", TF_DTYPE_F32, 1, (int64_t[]){ 4 }, x), TF_OK);
	cr_assert_eq(tf_st_writer_save(w, path), TF_OK, "%s", tf_diag_msg());
	tf_st_writer_free(w);

	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_expect_gt(st.st_size, BIG);
	cr_expect_lt((uint64_t)st.st_blocks * 512, BIG / 16, "%lld blocks",
		     (long long)st.st_blocks);
	tf_weights *wt;
	cr_assert_eq(tf_weights_open(dir, &wt), TF_OK, "%s", tf_diag_msg());
	cr_expect(tf_weights_header_only(wt));
	tf_tensor big, small;
	cr_assert_eq(tf_weights_get(wt, "big", &big), TF_OK);
	cr_assert_eq(tf_weights_get(wt, "small", &small), TF_OK);
	cr_expect_eq(big.nbytes, BIG);
	cr_expect_eq(memcmp(small.data, x, sizeof(x)), 0);
	const uint8_t *b = big.data;
	cr_expect(b[0] == 0 && b[BIG / 2] == 0 && b[BIG - 1] == 0);
	tf_weights_close(wt);

	/* Every tensor given: not header-only. */
	cr_assert_eq(tf_st_writer_init(&w), TF_OK);
	cr_assert_eq(tf_st_writer_add(w, "small", TF_DTYPE_F32, 1, (int64_t[]){ 4 }, x), TF_OK);
	cr_assert_eq(tf_st_writer_save(w, path), TF_OK, "%s", tf_diag_msg());
	tf_st_writer_free(w);
	cr_assert_eq(tf_weights_open(dir, &wt), TF_OK, "%s", tf_diag_msg());
	cr_expect(!tf_weights_header_only(wt));
	tf_weights_close(wt);
	tmpdir_free(dir);
}

/* A file image: the 8-byte length, the header, then `data_len` bytes. */
static uint8_t *image(const char *hdr, uint64_t claimed, size_t data_len, size_t *len)
{
	size_t n = strlen(hdr);
	*len = 8 + n + data_len;
	uint8_t *b = malloc(*len);
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(claimed >> (8 * i));
	memcpy(b + 8, hdr, n);
	fill_random(b + 8 + n, data_len);
	return b;
}

typedef struct bad_case {
	const char *what;
	const char *hdr;
	uint64_t claimed;               /* header length, 0: the true one */
	size_t data_len;
	int status;
	const char *msg;                /* must appear in the diag */
} bad_case;

static const bad_case bad_cases[] = {
	{ "header past end", "{}", 1000, 0, TF_ERR_FORMAT, "runs past the end" },
	{ "oversized header", "{}", 1ull << 40, 0, TF_ERR_FORMAT, "limit" },
	{ "no brace", "  {}", 0, 0, TF_ERR_FORMAT, "does not start with '{'" },
	{ "syntax", "{\"w\": {\"dtype\": \"F32\",", 0, 0, TF_ERR_FORMAT, "syntax error" },
	{ "junk after", "{}x", 0, 0, TF_ERR_FORMAT, "junk after" },
	{ "not UTF-8", "{\"\xc3\x28\": 1}", 0, 0, TF_ERR_FORMAT, "UTF-8" },
	{ "overlong UTF-8", "{\"\xc0\xaf\": 1}", 0, 0, TF_ERR_FORMAT, "UTF-8" },
	{ "entry not object", "{\"w\": 3}", 0, 0, TF_ERR_FORMAT, "'w': entry is not an object" },
	{ "unknown dtype",
	  "{\"w\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4,
	  TF_ERR_FORMAT, "'w': unknown dtype \"F33\"" },
	{ "fp8 dtype",
	  "{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1,
	  TF_ERR_UNSUPPORTED, "'w': dtype F8_E4M3 is not supported" },
	{ "negative dim",
	  "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 0, 4,
	  TF_ERR_FORMAT, "'w': shape[0] is not a non-negative integer" },
	{ "fractional dim",
	  "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,1.5],\"data_offsets\":[0,4]}}", 0, 4,
	  TF_ERR_FORMAT, "'w': shape[1]" },
	{ "overflowing shape",
	  "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}",
	  0, 4, TF_ERR_FORMAT, "'w': shape overflows" },
	{ "too many dims",
	  "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 0, 1,
	  TF_ERR_FORMAT, "'w': 9 dims" },
	{ "offsets past data",
	  "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 0, 12,
	  TF_ERR_FORMAT, "'w': data_offsets [0, 16) outside the 12-byte data section" },
	{ "offsets reversed",
	  "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 0, 12,
	  TF_ERR_FORMAT, "'w': data_offsets [8, 4)" },
	{ "offsets malformed",
	  "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 0, 4,
	  TF_ERR_FORMAT, "'w': \"data_offsets\" must be two" },
	{ "size mismatch",
	  "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 0, 8,
	  TF_ERR_FORMAT, "'w': data_offsets span 8 bytes, shape and dtype F32 need 12" },
	{ "missing dtype", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4,
	  TF_ERR_FORMAT, "'w': missing string \"dtype\"" },
	{ "missing shape", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 0, 4,
	  TF_ERR_FORMAT, "'w': missing array \"shape\"" },
	{ "overlap",
	  "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 0, 12,
	  TF_ERR_FORMAT, "tensors 'a' and 'b' overlap" },
	{ "duplicate name",
	  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	  "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 0, 8,
	  TF_ERR_FORMAT, "tensor 'a' appears twice" },
	{ "metadata not strings", "{\"__metadata__\":{\"k\":1}}", 0, 0, TF_ERR_FORMAT,
	  "__metadata__ 'k' is not a string" },
	{ "metadata not an object", "{\"__metadata__\":[1,2]}", 0, 0, TF_ERR_FORMAT,
	  "\"__metadata__\" is not an object" },
	{ "metadata twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, 0, TF_ERR_FORMAT,
	  "appears twice" },
};

Test(safetensors, malformed_headers_are_refused)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(*bad_cases); i++) {
		const bad_case *c = &bad_cases[i];
		size_t len;
		uint8_t *b = image(c->hdr, c->claimed ? c->claimed : strlen(c->hdr), c->data_len,
				   &len);
		tf_st_file *f = (tf_st_file *)&len;
		tf_diag_clear();
		int rc = tf_st_open_buffer(b, len, "bad.safetensors", &f);
		cr_expect_eq(rc, c->status, "%s: status %d (%s)", c->what, rc, tf_diag_msg());
		cr_assert_null(f, "%s: no handle on failure", c->what);
		cr_expect(strstr(tf_diag_msg(), "bad.safetensors: "),
			  "%s: file not named: %s", c->what, tf_diag_msg());
		cr_expect(strstr(tf_diag_msg(), c->msg), "%s: got \"%s\"", c->what,
			  tf_diag_msg());
		free(b);
	}
}

Test(safetensors, gaps_and_empty_tensors_are_fine)
{
	size_t len;
	uint8_t *b = image("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
			   "\"e\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[10,10]},"
			   "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]}}   ",
			   0, 16, &len);
	uint64_t n = len - 8 - 16;
	memcpy(b, &n, 8);               /* little-endian host assumed by this test */
	tf_st_file *f;
	cr_assert_eq(tf_st_open_buffer(b, len, "ok", &f), TF_OK, "%s", tf_diag_msg());
	cr_expect_eq(tf_st_count(f), 3);
	cr_expect_eq(tf_st_find(f, "s")->ndim, 0);
	cr_expect_eq(tf_st_find(f, "e")->nbytes, 0);
	cr_expect_eq((const uint8_t *)tf_st_find(f, "a")->data, b + 8 + n + 8);
	tf_st_close(f);
	free(b);
}

Test(safetensors, file_errors)
{
	char *dir = tmpdir_new();
	tf_st_file *f;
	cr_expect_eq(tf_st_open(tmpdir_path(dir, "missing.safetensors"), &f), TF_ERR_NOT_FOUND);
	cr_expect(strstr(tf_diag_msg(), "missing.safetensors"), "%s", tf_diag_msg());
	cr_expect_eq(tf_st_open(dir, &f), TF_ERR_IO, "a folder is not a file");

	tmpdir_write(tmpdir_path(dir, "short.safetensors"), "\x02\0\0\0", 4);
	cr_expect_eq(tf_st_open(tmpdir_path(dir, "short.safetensors"), &f), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "short.safetensors: 4 bytes, too short"), "%s",
		  tf_diag_msg());
	tmpdir_write(tmpdir_path(dir, "empty.safetensors"), "", 0);
	cr_expect_eq(tf_st_open(tmpdir_path(dir, "empty.safetensors"), &f), TF_ERR_FORMAT);

	/* Truncated after the header claims 64 bytes. */
	tmpdir_write(tmpdir_path(dir, "cut.safetensors"), "\x40\0\0\0\0\0\0\0{\"a\":", 13);
	cr_expect_eq(tf_st_open(tmpdir_path(dir, "cut.safetensors"), &f), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "cut.safetensors: header length 64 runs past"), "%s",
		  tf_diag_msg());
	tmpdir_free(dir);
}

/* Write two shards with the writer, then damage the index. */
static char *sharded_dir(float *x)
{
	char *dir = tmpdir_new();
	tf_st_writer *w;
	fill_random(x, 8 * sizeof(float));
	cr_assert_eq(tf_st_writer_init(&w), TF_OK);
	cr_assert_eq(tf_st_writer_add(w, "a", TF_DTYPE_F32, 1, (int64_t[]){ 4 }, x), TF_OK);
	cr_assert_eq(tf_st_writer_add(w, "b", TF_DTYPE_F32, 1, (int64_t[]){ 4 }, x + 4), TF_OK);
	cr_assert_eq(tf_st_writer_save_shards(w, dir, 16), TF_OK, "%s", tf_diag_msg());
	tf_st_writer_free(w);
	return dir;
}

static void write_index(const char *dir, const char *json)
{
	tmpdir_write(tmpdir_path(dir, "model.safetensors.index.json"), json, strlen(json));
}

Test(weights, index_errors)
{
	float x[8];
	tf_weights *w;
	char *dir = sharded_dir(x);
	const char *s1 = "model-00001-of-00002.safetensors", *s2 = "model-00002-of-00002.safetensors";
	char json[512];

	/* Tensor mapped to the wrong shard. */
	snprintf(json, sizeof(json), "{\"weight_map\":{\"a\":\"%s\",\"b\":\"%s\"}}", s2, s2);
	write_index(dir, json);
	cr_expect_eq(tf_weights_open(dir, &w), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "model.safetensors.index.json: tensor 'a' is mapped to"),
		  "%s", tf_diag_msg());
	cr_expect(strstr(tf_diag_msg(), s2), "%s", tf_diag_msg());

	/* Shard names may not leave the folder. */
	write_index(dir, "{\"weight_map\":{\"a\":\"../x.safetensors\"}}");
	cr_expect_eq(tf_weights_open(dir, &w), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "\"../x.safetensors\" is not a file"), "%s", tf_diag_msg());

	write_index(dir, "{\"weight_map\":{\"a\":3}}");
	cr_expect_eq(tf_weights_open(dir, &w), TF_ERR_FORMAT);
	write_index(dir, "{\"metadata\":{}}");
	cr_expect_eq(tf_weights_open(dir, &w), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "\"weight_map\""), "%s", tf_diag_msg());
	write_index(dir, "{\"weight_map\":{");
	cr_expect_eq(tf_weights_open(dir, &w), TF_ERR_FORMAT);
	cr_expect(strstr(tf_diag_msg(), "syntax error"), "%s", tf_diag_msg());

	/* A missing shard names the index and the shard. */
	snprintf(json, sizeof(json), "{\"weight_map\":{\"a\":\"%s\",\"b\":\"%s\"}}", s1, s2);
	write_index(dir, json);
	cr_assert_eq(tf_weights_open(dir, &w), TF_OK, "%s", tf_diag_msg());
	tf_weights_close(w);
	remove(tmpdir_path(dir, s2));
	cr_expect_eq(tf_weights_open(dir, &w), TF_ERR_NOT_FOUND);
	cr_expect(strstr(tf_diag_msg(), "index.json: shard \"model-00002-of-00002.safetensors\""),
		  "%s", tf_diag_msg());
	cr_expect_null(w);
	tmpdir_free(dir);

	dir = tmpdir_new();
	cr_expect_eq(tf_weights_open(dir, &w), TF_ERR_NOT_FOUND);
	cr_expect(strstr(tf_diag_msg(), "neither model.safetensors nor"), "%s", tf_diag_msg());
	tmpdir_free(dir);
}

/* Resident kB of the mapping holding `addr`, from /proc/self/smaps. */
static long mapping_rss_kb(const void *addr)
{
	FILE *fp = fopen("/proc/self/smaps", "r");
	char line[512];
	long rss = -1;
	int in = 0;

	cr_assert_not_null(fp);
	while (fgets(line, sizeof(line), fp)) {
		unsigned long lo, hi;
		/* A mapping's first line is "lo-hi perms ...", then its fields. */
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
		else if (in && sscanf(line, "Rss: %ld kB", &rss) == 1)
			break;
	}
	fclose(fp);
	return rss;
}

/* A released tensor leaves memory but keeps its bytes; its neighbours'
 * pages stay; a buffer image is never touched (dropping malloc'd pages
 * would zero them). */
Test(weights, release_drops_pages_and_keeps_bytes)
{
	const long page = sysconf(_SC_PAGESIZE);
	const int64_t na = 3 * page + 123, nb = 40 * page + 77, nc = 5;
	uint8_t *a = malloc((size_t)na), *b = malloc((size_t)nb), c[5];
	char *dir = tmpdir_new();
	tf_st_writer *w;
	tf_weights *wt;
	tf_tensor ta, tb, tc;

	fill_random(a, (size_t)na);
	fill_random(b, (size_t)nb);
	fill_random(c, sizeof(c));
	cr_assert_eq(tf_st_writer_init(&w), TF_OK);
	cr_assert_eq(tf_st_writer_add(w, "a", TF_DTYPE_U8, 1, &na, a), TF_OK);
	cr_assert_eq(tf_st_writer_add(w, "b", TF_DTYPE_U8, 1, &nb, b), TF_OK);
	cr_assert_eq(tf_st_writer_add(w, "c", TF_DTYPE_U8, 1, &nc, c), TF_OK);
	cr_assert_eq(tf_st_writer_save(w, tmpdir_path(dir, "model.safetensors")), TF_OK);
	cr_assert_eq(tf_weights_open(dir, &wt), TF_OK, "%s", tf_diag_msg());
	cr_assert_eq(tf_weights_get(wt, "a", &ta), TF_OK);
	cr_assert_eq(tf_weights_get(wt, "b", &tb), TF_OK);
	cr_assert_eq(tf_weights_get(wt, "c", &tc), TF_OK);

	/* Read everything in: the whole file is resident in this mapping. */
	cr_assert_eq(memcmp(ta.data, a, (size_t)na), 0);
	cr_assert_eq(memcmp(tb.data, b, (size_t)nb), 0);
	long before = mapping_rss_kb(tb.data);
	cr_assert_geq(before * 1024, na + nb, "rss %ld kB before release", before);

	tf_weights_release(wt, "b");
	tf_weights_release(wt, "absent");
	long after = mapping_rss_kb(tb.data);
	/* b's 39 or 40 whole pages leave; a's and c's pages and the header stay. */
	cr_expect_leq(after * 1024, before * 1024 - 39 * page, "rss %ld -> %ld kB", before, after);
	cr_expect_geq(after * 1024, na, "a's pages must stay: rss %ld kB", after);
	cr_expect_eq(memcmp(tb.data, b, (size_t)nb), 0, "b reads back after release");
	cr_expect_eq(memcmp(ta.data, a, (size_t)na), 0);
	cr_expect_eq(memcmp(tc.data, c, sizeof(c)), 0);
	tf_weights_close(wt);

	/* An image in memory: nothing is released, nothing changes. */
	FILE *fp = fopen(tmpdir_path(dir, "model.safetensors"), "rb");
	fseek(fp, 0, SEEK_END);
	size_t len = (size_t)ftell(fp);
	uint8_t *img = aligned_alloc((size_t)page, (len + (size_t)page - 1) / (size_t)page * (size_t)page);
	rewind(fp);
	cr_assert_eq(fread(img, 1, len, fp), len);
	fclose(fp);
	tf_st_file *f;
	cr_assert_eq(tf_st_open_buffer(img, len, "image", &f), TF_OK);
	const tf_tensor *t = tf_st_find(f, "b");
	cr_expect_eq(tf_st_release(f, t->data, t->nbytes), 0);
	cr_expect_eq(memcmp(t->data, b, (size_t)nb), 0, "a buffer image must keep its bytes");
	tf_st_close(f);
	free(img);

	tf_st_writer_free(w);
	free(a);
	free(b);
	tmpdir_free(dir);
}

/*
 * tfsynth - write a tiny Ling-3 checkpoint with deterministic random weights.
 *
 *     tfsynth --preset ling-tiny --out models/ling-tiny [--seed N]
 *             [--tokenizer FILE] [--set key=value ...] [--shard-mb N]
 *             [--exl3 [--bits class=K,...]] [--header-only]
 *
 * The folder gets config.json, generation_config.json, tokenizer.json and
 * bf16 safetensors (one file, or shards plus an index past --shard-mb); with
 * --exl3, the EXL3 checkpoint of the same layout with random trellises
 * (synth.h) and quantization_config in config.json.  --header-only writes
 * the safetensors headers with the data regions left as holes (sparse
 * files): the real model's shapes for memory planning, in no disk space.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "fail.h"               /* tools/lib: recipe and outdir failures */
#include "synth.h"

/* Hugging Face's default shard size is of this order; it bounds memory too. */
#define DEFAULT_SHARD_MB 2048
/* Room for the longest file name written into the output folder. */
#define MAX_OUT_PATH 4000

static void usage(FILE *f)
{
	tf_synth_shape s;

	fprintf(f,
		"usage: tfsynth --preset NAME --out DIR [options]\n"
		"  --preset NAME      ling-tiny (tests), ling-bench (benchmarks, ~7 GB) or\n"
		"                     ling-3.1-flash (the real shapes; with --header-only)\n"
		"  --out DIR          checkpoint folder to write (created)\n"
		"  --seed N           weight seed (default 1)\n"
		"  --tokenizer FILE   tokenizer.json to copy; fixes vocab_size\n"
		"                     (default %s)\n"
		"  --set KEY=VALUE    override a size, e.g. --set num_experts=32\n"
		"  --shard-mb N       largest shard in MiB, 0 = one file (default %d)\n"
		"  --exl3             write EXL3: random trellises at tfquant's bits\n"
		"  --bits CLASS=K,... with --exl3: bits per class of routed shared kda\n"
		"                     mla dense head mtp (default routed=3,shared=5,kda=4,\n"
		"                     dense=4,mla=6,head=6,mtp=4)\n"
		"  --header-only      headers only: data regions are holes (sparse files),\n"
		"                     for tfrun --check's memory plan; cannot be run\n"
		"ling-tiny keys:\n", TF_SYNTH_TOKENIZER, DEFAULT_SHARD_MB);
	tf_synth_shape_preset("ling-tiny", &s);
	tf_synth_shape_print(&s, f);
}

static int mkdir_p(const char *dir)
{
	char path[4096];
	size_t len = strlen(dir);

	if (len >= sizeof(path))
		return tfq_fail(TF_ERR_RANGE, "%s: path too long", dir);
	memcpy(path, dir, len + 1);
	for (char *p = path + 1; ; p++) {
		if (*p != '/' && *p)
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(path, 0777) && errno != EEXIST)
			return tfq_fail(TF_ERR_IO, "%s: %s", path, strerror(errno));
		if (!c)
			return TF_OK;
		*p = c;
	}
}

static int parse_u64(const char *flag, const char *text, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (!*text || *end || errno || text[0] == '-')
		return tfq_fail(TF_ERR_INVALID, "%s: '%s' is not a non-negative integer",
				   flag, text);
	*out = v;
	return TF_OK;
}

typedef struct synth_args {
	const char *preset, *out, *tokenizer;
	uint64_t seed, shard_mb;
	int exl3, header_only;
	tfq_recipe recipe;
	const char **sets;              /* the --set values, in order */
	int n_sets;
} synth_args;

/* Every option but --exl3 and --header-only takes a value; --set is
 * applied later, on top of the preset.  Returns 1 for --help. */
static int parse_args(int argc, char **argv, synth_args *a)
{
	static const char *const known[] = {
		"--preset", "--out", "--seed", "--tokenizer", "--set", "--shard-mb", "--bits",
	};
	int bits = 0;

	for (int i = 1; i < argc; i += 2) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		size_t k = 0;

		if (!strcmp(f, "-h") || !strcmp(f, "--help"))
			return 1;
		if (!strcmp(f, "--exl3") || !strcmp(f, "--header-only")) {
			a->exl3 |= !strcmp(f, "--exl3");
			a->header_only |= !strcmp(f, "--header-only");
			i--;
			continue;
		}
		while (k < sizeof(known) / sizeof(known[0]) && strcmp(f, known[k]))
			k++;
		if (k == sizeof(known) / sizeof(known[0]))
			return tfq_fail(TF_ERR_INVALID, "unknown argument '%s'", f);
		if (!v)
			return tfq_fail(TF_ERR_INVALID, "%s needs a value", f);
		if (!strcmp(f, "--bits")) {
			bits = 1;
			if (tfq_recipe_parse(&a->recipe, v, f))
				return TF_ERR_INVALID;
		} else if (!strcmp(f, "--set"))
			a->sets[a->n_sets++] = v;
		else if (!strcmp(f, "--preset"))
			a->preset = v;
		else if (!strcmp(f, "--out"))
			a->out = v;
		else if (!strcmp(f, "--tokenizer"))
			a->tokenizer = v;
		else if (!strcmp(f, "--seed") && parse_u64(f, v, &a->seed))
			return TF_ERR_INVALID;
		else if (!strcmp(f, "--shard-mb") && parse_u64(f, v, &a->shard_mb))
			return TF_ERR_INVALID;
	}
	if (a->out && strlen(a->out) > MAX_OUT_PATH)
		return tfq_fail(TF_ERR_RANGE, "--out: path longer than %d bytes", MAX_OUT_PATH);
	if (a->shard_mb > (1u << 30))
		return tfq_fail(TF_ERR_RANGE, "--shard-mb %" PRIu64 " is too large", a->shard_mb);
	if (bits && !a->exl3)
		return tfq_fail(TF_ERR_INVALID, "--bits needs --exl3");
	return TF_OK;
}

/* Refuse data that cannot fit where it goes (ling-3.1-flash is 1.1 TB)
 * before writing any; header-only files take no room for it. */
static int check_room(const char *dir, uint64_t bytes, int header_only)
{
	struct statvfs fs;
	if (header_only || statvfs(dir, &fs))
		return TF_OK;
	uint64_t room = (uint64_t)fs.f_bavail * fs.f_frsize;
	if (bytes <= room)
		return TF_OK;
	return tfq_fail(TF_ERR_RANGE, "%s: the tensors need %" PRIu64 " bytes, its filesystem "
			"has %" PRIu64 " free (--header-only writes the headers alone)", dir, bytes,
			room);
}

/* Elements and bytes of a plan. */
static void plan_size(const tf_synth_plan *p, uint64_t *params, uint64_t *bytes)
{
	*params = *bytes = 0;
	for (size_t i = 0; i < p->n; i++) {
		*bytes += tf_synth_tensor_bytes(&p->t[i]);
		*params += tf_synth_tensor_bytes(&p->t[i]) / tf_dtype_size(p->t[i].dtype);
	}
}

int main(int argc, char **argv)
{
	synth_args a = {
		.tokenizer = TF_SYNTH_TOKENIZER,
		.seed = 1,
		.shard_mb = DEFAULT_SHARD_MB,
		.sets = calloc((size_t)argc, sizeof(*a.sets)),
	};
	tf_synth_shape shape;
	tf_synth_vocab vocab;
	tf_synth_plan plan = { 0 }, bf16 = { 0 };
	tfq_meta meta = { 0 };
	uint64_t params, bytes;
	int rc;

	if (!a.sets) {
		fprintf(stderr, "tfsynth: out of memory\n");
		return 1;
	}
	tfq_recipe_default(&a.recipe);
	rc = parse_args(argc, argv, &a);
	if (rc == 1) {
		usage(stdout);
		rc = 0;
		goto out;
	}
	if (rc)
		goto fail;
	if (!a.preset || !a.out) {
		usage(stderr);
		rc = 2;
		goto out;
	}
	if ((rc = tf_synth_shape_preset(a.preset, &shape)))
		goto fail;
	for (int i = 0; i < a.n_sets; i++)
		if ((rc = tf_synth_shape_set(&shape, a.sets[i])))
			goto fail;
	if ((rc = tf_synth_shape_check(&shape)) ||
	    (rc = tf_synth_vocab_load(a.tokenizer, &vocab)))
		goto fail;
	if (shape.vocab_size && shape.vocab_size < vocab.n_tokens) {
		rc = tfq_fail(TF_ERR_INVALID, "--set vocab_size=%d: %s has %d tokens",
			      shape.vocab_size, a.tokenizer, vocab.n_tokens);
		goto fail;
	}
	if (shape.vocab_size)
		vocab.vocab_size = shape.vocab_size;
	if ((rc = tf_synth_plan_init(&bf16, &shape, vocab.vocab_size)))
		goto fail;
	plan_size(&bf16, &params, &bytes);

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if ((rc = mkdir_p(a.out)) ||
	    (rc = tf_synth_config_write(&shape, &vocab, a.out)) ||
	    (rc = tf_synth_vocab_copy(a.tokenizer, a.out)))
		goto fail;
	/* EXL3 classifies tensors by the config.json just written. */
	if (a.exl3 && (rc = tf_synth_exl3_plan(&bf16, &a.recipe, a.out, &plan, &meta)))
		goto fail;
	const tf_synth_plan *w = a.exl3 ? &plan : &bf16;
	uint64_t unused;
	plan_size(w, &unused, &bytes);
	if ((rc = check_room(a.out, bytes, a.header_only)) ||
	    (rc = tf_synth_write(w, a.seed, a.out, a.shard_mb << 20, a.header_only)) ||
	    (a.exl3 && (rc = tfq_outdir_config(a.out, a.out, &meta))))
		goto fail;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("tfsynth: %s seed %" PRIu64 ": %zu tensors, %.3f M parameters, %.1f MiB",
	       a.preset, a.seed, w->n, params / 1e6, bytes / 1048576.0);
	if (a.exl3)
		printf(" (EXL3, %.2f bits per weight over the budgeted layers)", meta.bits);
	if (a.header_only)
		printf(" as holes (header only)");
	printf(", vocab %d (%d tokens) -> %s in %.2f s\n", vocab.vocab_size, vocab.n_tokens,
	       a.out, (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	goto out;
fail:
	fprintf(stderr, "tfsynth: %s\n", tfq_errmsg());
	rc = 1;
out:
	tf_synth_plan_free(&plan);
	tf_synth_plan_free(&bf16);
	free(a.sets);
	return rc;
}

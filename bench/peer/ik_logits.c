/*
 * ik_logits: tokenize a text or dump per-position logits with ik_llama.cpp's
 * libllama, for bench/peer/crosscheck.sh.  Built there against an ik build
 * (its public llama.h only); not part of the TensorFold build.
 *
 *   ik_logits tokenize MODEL.gguf TEXT_FILE
 *       prints the ids of the file's text as a JSON array (no BOS/EOS,
 *       special tokens not parsed) -- what tfrun --tokenizer --encode-file
 *       prints for the same text.
 *   ik_logits logits MODEL.gguf IDS_FILE WINDOW OUT.f32 [MAX_WINDOWS]
 *       reads ids (any separators, e.g. a JSON array), runs each
 *       non-overlapping window of WINDOW ids as a fresh sequence (the tail
 *       shorter than WINDOW is left out, as tfrun --perplexity does) and
 *       writes float32 logits [windows * WINDOW, n_vocab], row-major.
 *       Prints the windows' perplexity, every position but each window's
 *       first scored (tfrun --perplexity's count).
 *
 * Environment: IK_GER (default 1) grouped expert routing, which Ling-3
 * needs (ik's -ger); IK_EXACT (default 1) ik's most exact CPU settings:
 * float32 latent cache, no flash attention (its CPU flash attention takes
 * no f32 K) and MLA mode 1 (modes 2 and 3, the default, score a prefill's
 * keys as if the latent were rounded to f16), i.e. -ctk f32 -fa off -mla 1;
 * IK_THREADS.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llama.h"

static void die(const char *msg, const char *arg)
{
	fprintf(stderr, "ik_logits: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
	exit(1);
}

static char *read_file(const char *path, long *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		die(strerror(errno), path);
	if (fseek(f, 0, SEEK_END) || (*len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		die("cannot size", path);
	char *buf = malloc((size_t)*len + 1);
	if (!buf || fread(buf, 1, (size_t)*len, f) != (size_t)*len)
		die("cannot read", path);
	buf[*len] = 0;
	fclose(f);
	return buf;
}

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : def;
}

static struct llama_model *load(const char *path)
{
	struct llama_model_params mp = llama_model_default_params();
	mp.n_gpu_layers = 0;
	struct llama_model *m = llama_model_load_from_file(path, mp);
	if (!m)
		die("cannot load model", path);
	return m;
}

static int tokenize(const char *model_path, const char *text_path)
{
	long len;
	char *text = read_file(text_path, &len);
	struct llama_model *model = load(model_path);
	int32_t cap = (int32_t)len + 16;
	llama_token *ids = malloc((size_t)cap * sizeof(*ids));
	int32_t n = llama_tokenize(model, text, (int32_t)len, ids, cap, false, false);
	if (n < 0)
		die("tokenize failed", text_path);
	putchar('[');
	for (int32_t i = 0; i < n; i++)
		printf(i ? ", %d" : "%d", ids[i]);
	puts("]");
	free(ids);
	free(text);
	llama_free_model(model);
	return 0;
}

static int logits(const char *model_path, const char *ids_path, int window,
		  const char *out_path, long max_windows)
{
	long len, n_ids = 0;
	char *text = read_file(ids_path, &len), *p = text;
	llama_token *ids = malloc(sizeof(*ids) * (size_t)(len / 2 + 1));
	while (*p) {
		if (*p >= '0' && *p <= '9') {
			ids[n_ids++] = (llama_token)strtol(p, &p, 10);
		} else {
			p++;
		}
	}
	long n_win = n_ids / window;
	if (max_windows > 0 && n_win > max_windows)
		n_win = max_windows;
	if (window < 2 || n_win < 1)
		die("need at least one window of 2 or more ids", ids_path);

	struct llama_model *model = load(model_path);
	const int n_vocab = llama_n_vocab(model);
	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = (uint32_t)window;
	cp.n_batch = cp.n_ubatch = (uint32_t)window;
	cp.n_seq_max = 1;
	cp.grouped_expert_routing = env_int("IK_GER", 1) != 0;
	if (env_int("IK_EXACT", 1)) {
		cp.type_k = GGML_TYPE_F32;
		cp.flash_attn = false;
		cp.mla_attn = 1;
	}
	int threads = env_int("IK_THREADS", (int)sysconf(_SC_NPROCESSORS_ONLN));
	cp.n_threads = cp.n_threads_batch = (uint32_t)(threads > 0 ? threads : 1);
	struct llama_context *ctx = llama_init_from_model(model, cp);
	if (!ctx)
		die("cannot create a context", model_path);

	FILE *out = fopen(out_path, "wb");
	if (!out)
		die(strerror(errno), out_path);
	struct llama_batch batch = llama_batch_init(window, 0, 1);
	double nll = 0;
	long scored = 0;
	for (long w = 0; w < n_win; w++) {
		const llama_token *win = ids + w * window;
		llama_kv_cache_clear(ctx);
		batch.n_tokens = window;
		for (int i = 0; i < window; i++) {
			batch.token[i] = win[i];
			batch.pos[i] = i;
			batch.n_seq_id[i] = 1;
			batch.seq_id[i][0] = 0;
			batch.logits[i] = 1;
		}
		if (llama_decode(ctx, batch))
			die("llama_decode failed", NULL);
		for (int i = 0; i < window; i++) {
			const float *row = llama_get_logits_ith(ctx, i);
			if (!row)
				die("no logits for a position", NULL);
			if (fwrite(row, sizeof(float), (size_t)n_vocab, out) != (size_t)n_vocab)
				die("write failed", out_path);
			if (i + 1 < window) {
				double mx = row[0], s = 0;
				for (int v = 1; v < n_vocab; v++)
					mx = row[v] > mx ? row[v] : mx;
				for (int v = 0; v < n_vocab; v++)
					s += exp(row[v] - mx);
				nll += mx + log(s) - row[win[i + 1]];
				scored++;
			}
		}
	}
	if (fclose(out))
		die("write failed", out_path);
	printf("{\"windows\": %ld, \"window\": %d, \"scored\": %ld, \"nll\": %.6f, "
	       "\"perplexity\": %.6f, \"n_vocab\": %d}\n",
	       n_win, window, scored, nll / scored, exp(nll / scored), n_vocab);
	llama_batch_free(batch);
	llama_free(ctx);
	llama_free_model(model);
	free(ids);
	free(text);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "tokenize")) {
		llama_backend_init();
		return tokenize(argv[2], argv[3]);
	}
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "logits")) {
		llama_backend_init();
		return logits(argv[2], argv[3], atoi(argv[4]), argv[5],
			      argc == 7 ? atol(argv[6]) : 0);
	}
	fprintf(stderr, "usage: ik_logits tokenize MODEL.gguf TEXT_FILE\n"
			"       ik_logits logits MODEL.gguf IDS_FILE WINDOW OUT.f32 [MAX_WINDOWS]\n");
	return 2;
}

/*
 * bench_jinja - how render time grows with a conversation's length.
 *
 *   bench_jinja [-r RUNS]
 *
 * Renders conversations of 10, 100, 1000 and 2000 alternating user and
 * assistant messages (the assistant's with a <think> block) through
 * tests/chat/ling3.jinja, RUNS times each (default 21), and prints the
 * median time per render and per message.  A cost per message that grows
 * with the length would show a quadratic step in the interpreter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/jinja.h"
#include "chat/value.h"
#include "tf/diag.h"
#include "tf/text.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static tf_val *conversation(int n)
{
	tf_val *vars = tf_val_dict(), *msgs = tf_val_list();
	for (int i = 0; i < n; i++) {
		tf_val *m = tf_val_dict();
		tf_val_dict_set(m, "role", 4, tf_val_cstr(i % 2 ? "assistant" : "user"));
		tf_val_dict_set(m, "content", 7, tf_val_cstr(
			i % 2 ? "<think>\nsome reasoning\n</think>\n\nan answer of a few words"
			      : "a question of some length, asked by the user"));
		tf_val_list_push(msgs, m);
	}
	tf_val_dict_set(vars, "messages", 8, msgs);
	tf_val_dict_set(vars, "add_generation_prompt", 21, tf_val_bool(true));
	return vars;
}

int main(int argc, char **argv)
{
	static const int sizes[] = { 10, 100, 1000, 2000 };
	int runs = argc == 3 && !strcmp(argv[1], "-r") ? atoi(argv[2]) : 21;
	const char *path = TF_SOURCE_DIR "/tests/chat/ling3.jinja";
	char *src;
	size_t len;
	tf_jinja *t;

	if (runs < 1 || (argc != 1 && argc != 3)) {
		fprintf(stderr, "usage: bench_jinja [-r RUNS]\n");
		return 2;
	}
	if (tf_text_read(path, 1 << 20, &src, &len) < 0 ||
	    tf_jinja_parse(src, len, "ling3.jinja", &t) < 0) {
		fprintf(stderr, "bench_jinja: %s\n", tf_diag_msg());
		return 1;
	}
	free(src);
	double *times = malloc((size_t)runs * sizeof(*times));
	printf("| messages | ms per render (median of %d) | us per message |\n|---|---|---|\n", runs);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		tf_val *vars = conversation(sizes[k]);
		for (int r = 0; r < runs; r++) {
			tf_bytes out = { 0 };
			double t0 = now_s();
			if (tf_jinja_render(t, vars, &out) < 0) {
				fprintf(stderr, "bench_jinja: %s\n", tf_diag_msg());
				return 1;
			}
			times[r] = now_s() - t0;
			tf_bytes_free(&out);
		}
		qsort(times, (size_t)runs, sizeof(*times), cmp_double);
		double med = times[runs / 2];
		printf("| %d | %.3f | %.2f |\n", sizes[k], 1e3 * med, 1e6 * med / sizes[k]);
		tf_val_unref(vars);
	}
	free(times);
	tf_jinja_free(t);
	return 0;
}

/* test_progress.c - the progress bar draws only on a terminal, rate-limits
 * its redraws and ends at 100%. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tf/progress.h"

static size_t slurp(FILE *f, char *buf, size_t cap)
{
	size_t n;

	rewind(f);
	n = fread(buf, 1, cap - 1, f);
	buf[n] = 0;
	return n;
}

Test(progress, silent_without_a_terminal)
{
	tf_progress p;

	if (isatty(STDERR_FILENO))
		cr_skip_test("stderr is a terminal");
	tf_progress_init(&p, "loading", 100, TF_PROGRESS_BYTES);
	cr_expect_null(p.out);
	tf_progress_update(&p, 50);
	tf_progress_finish(&p);
}

Test(progress, redraws_are_rate_limited_and_end_full)
{
	char buf[4096];
	tf_progress p;
	FILE *f = tmpfile();
	int i, draws = 0;
	const char *s;

	cr_assert(f);
	tf_progress_init(&p, "loading weights", 1000 * (3ull << 20), TF_PROGRESS_BYTES);
	p.out = f;              /* as if stderr were a terminal */
	for (i = 1; i <= 1000; i++)
		tf_progress_update(&p, (uint64_t)i * (3ull << 20));
	tf_progress_finish(&p);
	slurp(f, buf, sizeof(buf));
	for (s = buf; (s = strchr(s, '\r')); s++)
		draws++;
	cr_expect_lt(draws, 10, "%d redraws for 1000 quick updates", draws);
	cr_expect(strstr(buf, "loading weights"), "%s", buf);
	cr_expect(strstr(buf, "100%"), "%s", buf);
	cr_expect(strstr(buf, "2.9/2.9 GiB"), "%s", buf);
	cr_expect_eq(buf[strlen(buf) - 1], '\n');
	fclose(f);
}

Test(progress, tokens_unit)
{
	char buf[512];
	tf_progress p;
	FILE *f = tmpfile();

	cr_assert(f);
	tf_progress_init(&p, "prefill", 4096, TF_PROGRESS_TOKENS);
	p.out = f;
	tf_progress_update(&p, 1536);
	tf_progress_finish(&p);
	slurp(f, buf, sizeof(buf));
	cr_expect(strstr(buf, "1536/4096 tokens"), "%s", buf);
	cr_expect(strstr(buf, " 37%"), "%s", buf);
	fclose(f);
}

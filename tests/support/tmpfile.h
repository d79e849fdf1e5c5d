/*
 * tmpfile.h - a scratch file under /tmp holding given bytes, for tests that
 * hand a path to the code under test.  Header-only, so that tests linking
 * only the core can use it; a failure aborts the calling Criterion test.
 */
#ifndef TF_TEST_TMPFILE_H
#define TF_TEST_TMPFILE_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <unistd.h>

/* path: a mkstemps template, "/tmp/<name>-XXXXXX<suffix>", rewritten to the
 * file's name; suffix_len: the length of <suffix>.  The caller removes it. */
static inline void tf_test_tmpfile(char *path, int suffix_len, const void *data, size_t len)
{
	int fd = mkstemps(path, suffix_len);

	cr_assert_geq(fd, 0, "mkstemps %s", path);
	cr_assert_eq(write(fd, data, len), (ssize_t)len, "write %s", path);
	close(fd);
}

#endif /* TF_TEST_TMPFILE_H */

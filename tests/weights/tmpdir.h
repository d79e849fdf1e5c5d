/* tmpdir.h - scratch folders for tests (the weights tests, tfquant's), removed afterwards. */
#ifndef TF_TEST_TMPDIR_H
#define TF_TEST_TMPDIR_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* tmpl: a mkdtemp template, "/tmp/<name>-XXXXXX". */
static inline char *tmpdir_make(const char *tmpl)
{
	char *d = strdup(tmpl);
	cr_assert(d && mkdtemp(d), "mkdtemp %s", tmpl);
	return d;
}

static inline char *tmpdir_new(void)
{
	return tmpdir_make("/tmp/tf-weights-XXXXXX");
}

/* The folders are flat: remove the files, then the folder. */
static inline void tmpdir_free(char *d)
{
	DIR *dp = opendir(d);
	struct dirent *e;
	char p[512];
	while (dp && (e = readdir(dp))) {
		snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			remove(p);
	}
	if (dp)
		closedir(dp);
	rmdir(d);
	free(d);
}

/* "<dir>/<name>" in a static buffer (one at a time). */
static inline const char *tmpdir_path(const char *dir, const char *name)
{
	static char buf[512];
	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

static inline void tmpdir_write(const char *path, const void *data, size_t len)
{
	FILE *fp = fopen(path, "wb");
	cr_assert(fp, "open %s", path);
	cr_assert_eq(fwrite(data, 1, len, fp), len);
	fclose(fp);
}

#endif /* TF_TEST_TMPDIR_H */

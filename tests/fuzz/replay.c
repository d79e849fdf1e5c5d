/*
 * replay.c - run a fuzz target over saved inputs without libFuzzer.
 *
 *     fuzz_config_replay corpus/fuzz_config/ [more files or folders]
 *
 * Each input is read into a buffer of exactly its size, so a sanitizer
 * build catches any read past the end.  An empty corpus is a failure: a
 * regression test that replays nothing proves nothing.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	struct stat st;
	if (!fp || fstat(fileno(fp), &st)) {
		fprintf(stderr, "%s: cannot open\n", path);
		if (fp)
			fclose(fp);
		return -1;
	}
	size_t n = (size_t)st.st_size;
	uint8_t *buf = malloc(n ? n : 1);
	int rc = buf && fread(buf, 1, n, fp) == n ? 0 : -1;
	fclose(fp);
	if (!rc)
		LLVMFuzzerTestOneInput(buf, n);
	else
		fprintf(stderr, "%s: cannot read\n", path);
	free(buf);
	return rc;
}

/* Replay a file, or every regular file in a folder; returns inputs run or -1. */
static long replay_path(const char *path)
{
	struct stat st;
	if (stat(path, &st)) {
		fprintf(stderr, "%s: no such file or folder\n", path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path) ? -1 : 1;
	DIR *d = opendir(path);
	struct dirent *e;
	long n = 0;
	char p[4096];
	while (d && (e = readdir(d))) {
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (e->d_name[0] == '.' || stat(p, &st) || !S_ISREG(st.st_mode))
			continue;
		if (replay_file(p)) {
			closedir(d);
			return -1;
		}
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	long total = 0;
	for (int i = 1; i < argc; i++) {
		long n = replay_path(argv[i]);
		if (n < 0)
			return 1;
		total += n;
	}
	printf("replayed %ld inputs\n", total);
	return total ? 0 : 1;
}

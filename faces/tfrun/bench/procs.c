/* procs.c - `tfrun bench` across processes, for an A and a B that do not
 * fit in memory side by side: a child runs one configuration, and a
 * configuration's numbers travel through a file. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "tf/diag.h"

int bench_child_run(char *const *argv, char **out)
{
	int fd[2];
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	int status = 0;

	*out = NULL;
	if (!buf)
		return tf_diag_set(TF_ERR_NOMEM, "bench: out of memory");
	if (pipe(fd)) {
		free(buf);
		return tf_diag_set(TF_ERR_IO, "bench: no pipe for a process: %s", strerror(errno));
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(fd[0]);
		if (dup2(fd[1], STDOUT_FILENO) < 0)
			_exit(127);
		close(fd[1]);
		execv("/proc/self/exe", argv);
		fprintf(stderr, "tfrun bench: cannot run /proc/self/exe: %s\n", strerror(errno));
		_exit(127);
	}
	close(fd[1]);
	if (pid < 0) {
		close(fd[0]);
		free(buf);
		return tf_diag_set(TF_ERR_NOMEM, "bench: cannot fork: %s", strerror(errno));
	}
	for (;;) {
		if (len + 1 == cap) {
			char *more = realloc(buf, cap *= 2);
			if (!more)
				break;
			buf = more;
		}
		ssize_t got = read(fd[0], buf + len, cap - 1 - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	close(fd[0]);
	buf[len] = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		free(buf);
		return tf_diag_set(TF_ERR_IO, "bench: its process %s %d",
				   WIFEXITED(status) ? "exited with" : "died of signal",
				   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	}
	*out = buf;
	return TF_OK;
}

/* Layout: n, gen (int64), vocab (int32), n x vocab logits, gen tokens. */
int bench_numbers_save(const bench_numbers *x, const char *path)
{
	FILE *f = fopen(path, "wb");
	int32_t v = x->vocab;
	bool ok = f && fwrite(&x->n, sizeof(x->n), 1, f) == 1 &&
		  fwrite(&x->gen, sizeof(x->gen), 1, f) == 1 && fwrite(&v, sizeof(v), 1, f) == 1 &&
		  fwrite(x->logits, sizeof(float), (size_t)(x->n * v), f) == (size_t)(x->n * v) &&
		  fwrite(x->greedy, sizeof(int32_t), (size_t)x->gen, f) == (size_t)x->gen;

	if (f && fclose(f))
		ok = false;
	return ok ? TF_OK : tf_diag_set(TF_ERR_IO, "bench: cannot write %s: %s", path,
					strerror(errno));
}

int bench_numbers_load(bench_numbers *x, const char *path)
{
	FILE *f = fopen(path, "rb");
	int32_t v = 0;
	bool ok = f && fread(&x->n, sizeof(x->n), 1, f) == 1 &&
		  fread(&x->gen, sizeof(x->gen), 1, f) == 1 && fread(&v, sizeof(v), 1, f) == 1 &&
		  x->n > 0 && x->n < (1 << 24) && x->gen >= 0 && x->gen < (1 << 24) && v > 0;

	x->vocab = v;
	x->logits = ok ? malloc((size_t)(x->n + 1) * (size_t)v * sizeof(float)) : NULL;
	x->greedy = ok ? malloc((size_t)(x->gen ? x->gen : 1) * sizeof(int32_t)) : NULL;
	ok = ok && x->logits && x->greedy &&
	     fread(x->logits, sizeof(float), (size_t)(x->n * v), f) == (size_t)(x->n * v) &&
	     fread(x->greedy, sizeof(int32_t), (size_t)x->gen, f) == (size_t)x->gen;
	if (f)
		fclose(f);
	if (ok)
		return TF_OK;
	bench_numbers_free(x);
	return tf_diag_set(TF_ERR_IO, "bench: cannot read %s", path);
}

/* textfile.c - read a small text file whole. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tf/diag.h"
#include "tf/text.h"

int tf_text_read(const char *path, size_t max, char **out, size_t *len)
{
	struct stat st;
	*out = NULL;
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return tf_diag_set(errno == ENOENT ? TF_ERR_NOT_FOUND : TF_ERR_IO, "%s: %s",
				   path, strerror(errno));
	int rc = TF_OK;
	char *buf = NULL;
	size_t n = 0;
	if (fstat(fileno(fp), &st) || !S_ISREG(st.st_mode))
		rc = tf_diag_set(TF_ERR_IO, "%s: not a regular file", path);
	else if ((n = (size_t)st.st_size) > max)
		rc = tf_diag_set(TF_ERR_RANGE, "%s: %zu bytes, more than the %zu allowed",
				 path, n, max);
	else if (!(buf = malloc(n + 1)))
		rc = tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", path);
	else if (fread(buf, 1, n, fp) != n)
		rc = tf_diag_set(TF_ERR_IO, "%s: short read", path);
	fclose(fp);
	if (rc) {
		free(buf);
		return rc;
	}
	buf[n] = 0;
	*out = buf;
	*len = n;
	return TF_OK;
}

int tf_text_read_stream(const char *path, tf_bytes *out)
{
	FILE *fp = fopen(path, "rb");
	char buf[1 << 16];
	size_t n;
	int rc = TF_OK;

	if (!fp)
		return tf_diag_set(TF_ERR_IO, "%s: %s", path, strerror(errno));
	while (!rc && (n = fread(buf, 1, sizeof(buf), fp)) > 0)
		if (tf_bytes_append(out, buf, n))
			rc = tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", path);
	if (!rc && ferror(fp))
		rc = tf_diag_set(TF_ERR_IO, "%s: read error", path);
	fclose(fp);
	return rc;
}

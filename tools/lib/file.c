/* file.c - whole small files for the checkpoint tools (file.h). */
#include "file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fail.h"
#include "tf/error.h"

int tfq_file_read(const char *path, size_t max, char **out, size_t *len)
{
	struct stat st;
	char *buf = NULL;
	size_t n = 0;
	int rc = TF_OK;

	*out = NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return tfq_fail(errno == ENOENT ? TF_ERR_NOT_FOUND : TF_ERR_IO, "%s: %s", path,
				strerror(errno));
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode))
		rc = tfq_fail(TF_ERR_IO, "%s: not a regular file", path);
	else if ((n = (size_t)st.st_size) > max)
		rc = tfq_fail(TF_ERR_RANGE, "%s: %zu bytes, more than the %zu allowed", path, n,
			      max);
	else if (!(buf = malloc(n + 1)))
		rc = tfq_fail(TF_ERR_NOMEM, "%s: out of memory", path);
	else if (fread(buf, 1, n, f) != n)
		rc = tfq_fail(TF_ERR_IO, "%s: short read", path);
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return TF_OK;
}

int tfq_file_write(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return tfq_fail(TF_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
	size_t w = fwrite(data, 1, len, f);
	if (fclose(f) || w != len)
		return tfq_fail(TF_ERR_IO, "%s: write failed", path);
	return TF_OK;
}

int tfq_file_copy(const char *from, const char *to, size_t max)
{
	char *data;
	size_t len;
	int rc = tfq_file_read(from, max, &data, &len);
	if (rc)
		return rc;
	rc = tfq_file_write(to, data, len);
	free(data);
	return rc;
}

/*
 * jinja_render.c - the differential tests' driver: renders a template file
 * with the variables of a JSON file and writes the output exactly, or the
 * error to stderr with exit status 1.
 *
 *     jinja_render TEMPLATE VARS.json
 */
#include <stdio.h>
#include <stdlib.h>

#include "chat/jinja.h"
#include "tf/diag.h"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0;

	*len = 0;
	if (!f)
		return NULL;
	for (;;) {
		if (*len == cap) {
			char *p = realloc(buf, cap = cap ? cap * 2 : 4096);
			if (!p) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = p;
		}
		size_t n = fread(buf + *len, 1, cap - *len, f);
		*len += n;
		if (n == 0)
			break;
	}
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	size_t tlen, vlen;
	char *tsrc = NULL, *vsrc = NULL;
	tf_val *vars = NULL;
	tf_jinja *t = NULL;
	tf_bytes out = { 0 };
	int rc = 1;

	if (argc != 3) {
		fprintf(stderr, "usage: %s TEMPLATE VARS.json\n", argv[0]);
		return 2;
	}
	if (!(tsrc = slurp(argv[1], &tlen)) || !(vsrc = slurp(argv[2], &vlen))) {
		fprintf(stderr, "cannot read %s\n", tsrc ? argv[2] : argv[1]);
		goto cleanup;
	}
	if (tf_val_parse_json(vsrc, vlen, &vars) < 0 ||
	    tf_jinja_parse(tsrc, tlen, argv[1], &t) < 0 || tf_jinja_render(t, vars, &out) < 0) {
		fprintf(stderr, "%s\n", tf_diag_msg());
		goto cleanup;
	}
	rc = fwrite(out.p ? out.p : "", 1, out.len, stdout) == out.len ? 0 : 1;
cleanup:
	tf_bytes_free(&out);
	tf_jinja_free(t);
	tf_val_unref(vars);
	free(tsrc);
	free(vsrc);
	return rc;
}

/* fuzz_ini.c - libFuzzer target: any bytes as an INI description, and as
 * a --set assignment.  Must never crash, hang or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tf_conf *c = NULL;
	if (tf_conf_parse((const char *)data, size, "fuzz/model.ini", &c) == 0) {
		/* Whatever was accepted must read back through the schema. */
		const char *section, *key, *value;
		for (size_t i = 0; i < tf_conf_count(c); i++) {
			tf_conf_at(c, i, &section, &key, &value);
			if (tf_conf_get(c, section, key) != value)
				abort();
		}
		char buf[256];
		const char *path;
		int64_t n;
		uint64_t bytes;
		tf_conf_get_path(c, "model", "path", buf, sizeof(buf), &path);
		tf_conf_get_int(c, "runtime", "context", 0, &n);
		tf_conf_get_size(c, "runtime", "memory_limit", 0, &bytes);
	}

	char *assignment = malloc(size + 1);
	if (assignment) {
		memcpy(assignment, data, size);
		assignment[size] = 0;
		if (!c || tf_conf_set(c, assignment) != 0)
			tf_conf_check_set(assignment);
		free(assignment);
	}
	tf_conf_free(c);
	return 0;
}

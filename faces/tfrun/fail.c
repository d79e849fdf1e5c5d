/* fail.c - see fail.h. */
#include "fail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/diag.h"

int tf_cli_fail(const char *what)
{
	const char *msg = tf_diag_msg();
	size_t n = what ? strlen(what) : 0;
	if (what && !(strncmp(msg, what, n) == 0 && msg[n] == ':'))
		fprintf(stderr, "tfrun: %s: %s\n", what, msg);
	else
		fprintf(stderr, "tfrun: %s\n", msg);
	return EXIT_FAILURE;
}

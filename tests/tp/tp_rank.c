/*
 * tp_rank.c - one rank of the collective checks, as a program:
 *
 *     tp_rank RANK SIZE PEERS [TRANSPORT]
 *
 * prints "ok DIGEST" and exits 0, or "error: ..." and exits 1.  The
 * network-namespace test runs one in each namespace and compares digests.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tf/engine.h"
#include "tp_case.h"

int main(int argc, char **argv)
{
	char digest[17], msg[2048];
	tf_tp *tp;

	if (argc < 4) {
		fprintf(stderr, "usage: tp_rank RANK SIZE PEERS [TRANSPORT]\n");
		return 2;
	}
	if (tp_case_open(atoi(argv[1]), atoi(argv[2]), argv[3], "tp-rank-check", 10.0,
			 argc > 4 ? argv[4] : "tcp", NULL, &tp)) {
		printf("error: %s\n", tf_engine_errmsg());
		return 1;
	}
	int rc = tp_case_collectives(tp, 0x5eed, digest, msg, sizeof(msg));
	tf_tp_close(tp);
	if (rc) {
		printf("error: %s\n", msg);
		return 1;
	}
	printf("ok %s\n", digest);
	return 0;
}

/*
 * tplocal.h - `tfrun MODEL.ini --tp-local N`: N tensor-parallel ranks as
 * processes of this machine, over loopback tcp.
 *
 * This process is rank 0 and does what the command asks; ranks 1 .. N-1
 * are copies of the same command line (stdin and stdout closed to them,
 * stderr shared) that follow it.  Each rank gets the same overrides after
 * the user's, so their fingerprints agree:
 *
 *     tp.size=N  tp.rank=R  tp.peers=127.0.0.1:P0,...  tp.transport=tcp
 *
 * with ports the kernel handed out free a moment before.  The children
 * die with this process (PR_SET_PDEATHSIG), so none outlives it.
 */
#ifndef TF_CLI_TPLOCAL_H
#define TF_CLI_TPLOCAL_H

#include <sys/types.h>

#define TF_TP_LOCAL_MAX 16
#define TF_TP_LOCAL_SETS 4

typedef struct tf_tp_local {
	int n;
	pid_t pid[TF_TP_LOCAL_MAX];     /* [r]: rank r's process, r >= 1 */
	char *set[TF_TP_LOCAL_SETS];    /* rank 0's overrides, in order */
} tf_tp_local;

/* Start ranks 1 .. n-1 from argv (without its --tp-local); l->set then
 * holds the overrides rank 0 appends (the caller copies them).  Fails
 * naming what went wrong, with no child left running. */
int tf_cli_tp_local_start(tf_tp_local *l, int n, int argc, char **argv);

/* After rank 0's work ended with exit status rc: wait for the others
 * (all of them killed first when rc is a failure); the first failure
 * among rc and theirs. */
int tf_cli_tp_local_finish(tf_tp_local *l, int rc);

#endif /* TF_CLI_TPLOCAL_H */

/*
 * doctor_cmd.h - `tfrun doctor [MODEL.ini]`: is this machine ready for
 * tensor parallelism, and how fast is the link?
 *
 *   1. every transport plugin's verdict, and what it sees: RDMA devices,
 *      ports, link state, MTU, GIDs with type and address, which GID it
 *      would use and why, advice for the usual mistakes;
 *   2. with MODEL.ini or --set tp.* keys (each host runs it with its own
 *      --set tp.rank=R) or
 *      --tp-local N (N ranks forked on loopback): connect to every peer on
 *      its control port, then a ping-pong and an all-reduce sweep from 8 B
 *      to 16 MB over the configured transport, printed as ib_write_lat and
 *      nccl-tests print theirs.
 *
 *   --set SECTION.KEY=VALUE  override an INI key (repeatable)
 *   --tp-local N             N ranks on this machine over 127.0.0.1
 *   --max-bytes N            the sweep's largest message (default 16M)
 *
 * It reaches the core through the public API only (tf/tp.h).
 */
#ifndef TF_CLI_DOCTOR_CMD_H
#define TF_CLI_DOCTOR_CMD_H

/* argv[0] is "doctor"; returns the exit status (0, 1 error, 2 usage). */
int tf_cli_doctor(int argc, char **argv);

#endif /* TF_CLI_DOCTOR_CMD_H */

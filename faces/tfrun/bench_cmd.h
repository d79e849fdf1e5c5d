/* bench_cmd.h - `tfrun bench MODEL.ini [...]`: prefill and decode speed as a
 * table, and the A/B of two configurations (bench/bench.h). */
#ifndef TF_CLI_BENCH_CMD_H
#define TF_CLI_BENCH_CMD_H

/* argv[0] is "bench"; returns the exit status. */
int tf_cli_bench(int argc, char **argv);

#endif /* TF_CLI_BENCH_CMD_H */

/*
 * doctor_cmd.c - `tfrun doctor` (doctor_cmd.h).
 */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "doctor_cmd.h"
#include "tf/engine.h"
#include "tf/tp.h"

#define MAX_SETS 64
#define MAX_LOCAL 8
#define SWEEP_ITERS_BYTES (64u << 20)   /* bytes each size moves, about */

typedef struct doctor {
	const char *ini;
	const char *sets[MAX_SETS + 5];
	int n_sets;
	int local;                      /* --tp-local N, 0: off */
	size_t max_bytes;
	char local_sets[5][512];
} doctor;

static const char usage[] =
"usage: tfrun doctor [MODEL.ini] [--set SECTION.KEY=VALUE ...] [--tp-local N]\n"
"                    [--max-bytes N]\n"
"\n"
"Lists the transport plugins and what they see (RDMA devices, ports, link\n"
"state, MTU, GIDs and which one would be used), then, with MODEL.ini's [tp]\n"
"(run it on every host at once, each with --set tp.rank=R) or --tp-local N\n"
"(N ranks forked on 127.0.0.1) or --set tp.size/rank/peers, connects to every peer's control port and\n"
"measures a ping-pong and an all-reduce from 8 B to --max-bytes (16M).\n";

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The same count on every rank: it depends on the size only. */
static int iters_for(size_t bytes)
{
	size_t n = SWEEP_ITERS_BYTES / (bytes ? bytes : 1);
	return n < 5 ? 5 : n > 1000 ? 1000 : (int)n;
}


/* ib_write_lat's columns: one-way latency, half a broadcast round trip
 * (rank 0 to rank 1 and back). */
static int sweep_pingpong(tf_tp *tp, uint8_t *buf, size_t max, bool print)
{
	double *t = malloc(1000 * sizeof(*t));
	int rc = t ? TF_OK : TF_ERR_NOMEM;
	if (print)
		printf("\n ping-pong over %s (rank 0 <-> rank 1; one-way = half the round "
		       "trip)\n %-10s %-8s %-10s %-10s %-12s %-10s %-10s %-12s\n",
		       tf_tp_transport(tp), "#bytes", "#iters", "t_min[us]", "t_max[us]",
		       "t_typical[us]", "t_avg[us]", "t_stdev[us]", "99%[us]");
	for (size_t s = 8; s <= max && !rc; s *= 2) {
		int n = iters_for(s);
		double sum = 0, sq = 0;
		for (int i = 0; i < n && !rc; i++) {
			double t0 = now_us();
			if (!(rc = tf_tp_broadcast(tp, buf, s, 0)))
				rc = tf_tp_broadcast(tp, buf, s, 1);
			t[i] = (now_us() - t0) / 2;
			sum += t[i];
			sq += t[i] * t[i];
		}
		if (rc || !print)
			continue;
		qsort(t, (size_t)n, sizeof(*t), cmp_double);
		double avg = sum / n;
		printf(" %-10zu %-8d %-10.2f %-10.2f %-12.2f %-10.2f %-10.2f %-12.2f\n", s, n,
		       t[0], t[n - 1], t[n / 2], avg, sqrt(fmax(sq / n - avg * avg, 0)),
		       t[(int)(n * 0.99)]);
	}
	free(t);
	return rc;
}

/* nccl-tests' columns: out-of-place is not offered, so in place only;
 * busbw = algbw * 2 (n - 1) / n, as all_reduce_perf counts it. */
static int sweep_allreduce(tf_tp *tp, uint8_t *buf, size_t max, bool print)
{
	double *t = malloc(1000 * sizeof(*t));
	int size = tf_tp_size(tp), rc = t ? TF_OK : TF_ERR_NOMEM;
	if (print)
		printf("\n all_reduce sum, float, in place, %d ranks over %s\n"
		       " %12s %12s %6s %12s %12s %12s %12s\n", size, tf_tp_transport(tp),
		       "size(B)", "count", "type", "time(us)", "p99(us)", "algbw(GB/s)",
		       "busbw(GB/s)");
	for (size_t s = 8; s <= max && !rc; s *= 2) {
		int n = iters_for(s);
		for (int i = 0; i < n && !rc; i++) {
			double t0 = now_us();
			rc = tf_tp_all_reduce(tp, buf, s / 4, TF_DTYPE_F32);
			t[i] = now_us() - t0;
		}
		if (rc || !print)
			continue;
		qsort(t, (size_t)n, sizeof(*t), cmp_double);
		double med = t[n / 2], alg = s / med / 1e3;
		printf(" %12zu %12zu %6s %12.2f %12.2f %12.3f %12.3f\n", s, s / 4, "float", med,
		       t[(int)(n * 0.99)], alg, alg * 2.0 * (size - 1) / size);
	}
	free(t);
	return rc;
}

/* Connect as one rank, check every peer, sweep; rank 0 prints. */
static int run_rank(const doctor *d, const char *const *sets, int n_sets)
{
	tf_tp *tp;
	int rc = tf_tp_open(d->ini, sets, n_sets, "tfrun-doctor", &tp);
	if (rc) {
		fprintf(stderr, "tfrun doctor: %s\n", tf_engine_errmsg());
		if (rc == TF_ERR_PEER)
			fprintf(stderr, "advice: every rank must run `tfrun doctor` at once with "
				"the same [tp] peers and its own tp.rank; a peer that never "
				"answers is down, listening elsewhere, or behind a firewall that "
				"drops its control port (open that TCP port between the hosts)\n");
		return rc;
	}
	int rank = tf_tp_rank(tp);
	bool print = rank == 0;
	if (print) {
		printf("\n control channel: rank 0 of %d, transport %s\n", tf_tp_size(tp),
		       tf_tp_transport(tp));
		for (int r = 0; r < tf_tp_size(tp); r++)
			printf("   rank %d  %-24s %s\n", r, tf_tp_peer(tp, r),
			       r ? "answers" : "(this process)");
	}
	uint8_t *buf = calloc(1, d->max_bytes + 8);
	rc = buf ? tf_tp_barrier(tp) : TF_ERR_NOMEM;
	if (!rc)
		rc = sweep_pingpong(tp, buf, d->max_bytes, print);
	if (!rc)
		rc = sweep_allreduce(tp, buf, d->max_bytes, print);
	if (rc)
		fprintf(stderr, "tfrun doctor: rank %d: %s\n", rank, tf_engine_errmsg());
	free(buf);
	tf_tp_close(tp);
	return rc;
}

/* Ports free on 127.0.0.1 just now, one per rank. */
static int local_peers(int n, char *out, size_t size)
{
	int fd[MAX_LOCAL];
	size_t len = 0;
	for (int r = 0; r < n; r++) {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t sl = sizeof(a);
		if ((fd[r] = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
		    bind(fd[r], (struct sockaddr *)&a, sizeof(a)) ||
		    getsockname(fd[r], (struct sockaddr *)&a, &sl)) {
			fprintf(stderr, "tfrun doctor: a loopback port: %s\n", strerror(errno));
			return 1;
		}
		len += (size_t)snprintf(out + len, size - len, "%s127.0.0.1:%d", r ? "," : "",
					ntohs(a.sin_port));
	}
	for (int r = 0; r < n; r++)
		close(fd[r]);
	return 0;
}

/* --tp-local N: ranks 1..N-1 forked, rank 0 here. */
static int run_local(doctor *d)
{
	char peers[MAX_LOCAL * 32];
	pid_t kids[MAX_LOCAL];
	int rc = local_peers(d->local, peers, sizeof(peers)), n = d->n_sets;
	if (rc)
		return rc;
	snprintf(d->local_sets[0], sizeof(d->local_sets[0]), "tp.size=%d", d->local);
	snprintf(d->local_sets[1], sizeof(d->local_sets[1]), "tp.peers=%s", peers);
	d->sets[n++] = d->local_sets[0];
	d->sets[n++] = d->local_sets[1];
	int n_rank = n++;
	for (int r = d->local - 1; r >= 0; r--) {
		snprintf(d->local_sets[2], sizeof(d->local_sets[2]), "tp.rank=%d", r);
		d->sets[n_rank] = d->local_sets[2];
		if (!r)
			break;
		if ((kids[r] = fork()) < 0) {
			fprintf(stderr, "tfrun doctor: fork: %s\n", strerror(errno));
			return 1;
		}
		if (!kids[r])
			_exit(run_rank(d, d->sets, n) ? 1 : 0);
	}
	rc = run_rank(d, d->sets, n);
	for (int r = 1; r < d->local; r++) {
		int st;
		if (rc)
			kill(kids[r], SIGTERM);
		if (waitpid(kids[r], &st, 0) == kids[r] && !rc &&
		    !(WIFEXITED(st) && !WEXITSTATUS(st)))
			rc = 1;
	}
	return rc;
}

static int parse(int argc, char **argv, doctor *d)
{
	d->max_bytes = 16u << 20;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool more = i + 1 < argc;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			return -1;
		} else if (!strcmp(a, "--set") && more && d->n_sets < MAX_SETS) {
			d->sets[d->n_sets++] = argv[++i];
		} else if (!strcmp(a, "--tp-local") && more) {
			d->local = atoi(argv[++i]);
			if (d->local < 2 || d->local > MAX_LOCAL) {
				fprintf(stderr, "tfrun doctor: --tp-local %s: 2..%d ranks\n",
					argv[i], MAX_LOCAL);
				return 2;
			}
		} else if (!strcmp(a, "--max-bytes") && more) {
			char *end;
			unsigned long long v = strtoull(argv[++i], &end, 10);
			v <<= *end == 'K' ? 10 : *end == 'M' ? 20 : 0;
			if (v < 8 || v > (1ull << 30)) {
				fprintf(stderr, "tfrun doctor: --max-bytes %s: 8..1G\n", argv[i]);
				return 2;
			}
			d->max_bytes = (size_t)v;
		} else if (a[0] != '-' && !d->ini) {
			d->ini = a;
		} else {
			fprintf(stderr, "tfrun doctor: unknown or incomplete option '%s'\n\n%s",
				a, usage);
			return 2;
		}
	}
	return 0;
}

int tf_cli_doctor(int argc, char **argv)
{
	doctor d = { 0 };
	int rc = parse(argc, argv, &d);
	if (rc)
		return rc < 0 ? 0 : rc;
	printf(" transports on this machine\n");
	if (tf_tp_describe(d.ini, d.sets, d.n_sets, stdout)) {
		fprintf(stderr, "tfrun doctor: %s\n", tf_engine_errmsg());
		return 1;
	}
	fflush(stdout);
	if (d.local)
		return run_local(&d) ? 1 : 0;
	if (!d.ini && !d.n_sets) {
		printf("\n no MODEL.ini, --set tp.* or --tp-local N: no peers to check or "
		       "measure\n");
		return 0;
	}
	return run_rank(&d, d.sets, d.n_sets) ? 1 : 0;
}

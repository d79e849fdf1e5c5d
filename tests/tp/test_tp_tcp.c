/*
 * test_tp_tcp.c - the tcp transport between real processes on loopback:
 * collectives against a plain reference with 2 and 3 ranks, bit-identical
 * on every rank; handshake refusals; a peer killed or stopped mid-run; a
 * peer that never comes.  Every failure must name the peer (rank and
 * host:port) and the operation, within [tp] timeout, and leave no process.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tf/engine.h"
#include "tp_case.h"

#define MAX_RANKS 4

typedef struct rank_out {
	int rc;
	int calls;                      /* collectives that succeeded */
	double ms;                      /* how long the failing call took */
	char digest[17];
	char msg[2048];
} rank_out;

typedef struct rank_job {
	int rank, size;
	const char *peers, *fingerprint;
	double timeout_s;
	int loop;                       /* all_reduce this many times instead */
	const char *extra;              /* one more --set, NULL: none */
	double hold_s;                  /* the transport kept open this long after its work */
} rank_job;

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static rank_out *shared_outs(void)
{
	rank_out *o = mmap(NULL, MAX_RANKS * sizeof(*o), PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(o != MAP_FAILED);
	memset(o, 0, MAX_RANKS * sizeof(*o));
	return o;
}

static void on_usr1(int sig)
{
	(void)sig;
}

static void run_rank(const rank_job *j, rank_out *o)
{
	tf_tp *tp;
	alarm(60);              /* a hang fails the test instead of stalling it */
	double t0 = now_ms();
	o->rc = tp_case_open(j->rank, j->size, j->peers, j->fingerprint, j->timeout_s,
			     "tcp", j->extra, &tp);
	if (o->rc) {
		o->ms = now_ms() - t0;
		snprintf(o->msg, sizeof(o->msg), "%s", tf_engine_errmsg());
		return;
	}
	if (!j->loop) {
		o->rc = tp_case_collectives(tp, 42, o->digest, o->msg, sizeof(o->msg));
	} else {
		static float buf[1 << 18];
		for (size_t i = 0; i < sizeof(buf) / sizeof(buf[0]); i++)
			buf[i] = (float)(i % 7) - 3.0f;
		for (int i = 0; i < j->loop && !o->rc; i++) {
			t0 = now_ms();
			o->rc = tf_tp_all_reduce(tp, buf, sizeof(buf) / sizeof(buf[0]),
						 TF_DTYPE_F32);
			o->ms = now_ms() - t0;
			if (!o->rc)
				o->calls++;
		}
		if (o->rc)
			snprintf(o->msg, sizeof(o->msg), "%s", tf_engine_errmsg());
	}
	if (j->hold_s > 0)
		usleep((useconds_t)(j->hold_s * 1e6));
	tf_tp_close(tp);
}

static pid_t spawn(const rank_job *j, rank_out *o)
{
	pid_t p = fork();
	cr_assert(p >= 0);
	if (!p) {
		run_rank(j, o);
		_exit(0);
	}
	return p;
}

/* Wait for every child, then check that none is left. */
static void reap(const pid_t *pids, int n)
{
	for (int i = 0; i < n; i++)
		cr_assert_eq(waitpid(pids[i], NULL, 0), pids[i]);
	cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a rank process is left behind");
	cr_assert_eq(errno, ECHILD);
}

/* Run the jobs, one process each, and wait for all. */
static void run_jobs(const rank_job *const *jobs, int n, rank_out *o)
{
	pid_t pids[MAX_RANKS];
	for (int i = 0; i < n; i++)
		pids[i] = spawn(jobs[i], &o[i]);
	reap(pids, n);
}

/* The address of rank r in a peers list. */
static void peer_addr(const char *peers, int r, char *out, size_t n)
{
	const char *p = peers;
	for (int i = 0; i < r; i++)
		p = strchr(p, ',') + 1;
	size_t len = strcspn(p, ",");
	snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), p);
}

static void run_all(int size, const char *peers, rank_out *o)
{
	pid_t pids[MAX_RANKS];
	for (int r = 0; r < size; r++) {
		rank_job j = { r, size, peers, "fp", 10.0, 0, NULL, 0 };
		pids[r] = spawn(&j, &o[r]);
	}
	reap(pids, size);
}

static void check_collectives(int size)
{
	char peers[256];
	rank_out *o = shared_outs();
	tp_case_local_peers(size, peers, sizeof(peers));
	run_all(size, peers, o);
	for (int r = 0; r < size; r++) {
		cr_assert_eq(o[r].rc, 0, "rank %d: %s", r, o[r].msg);
		cr_assert_str_eq(o[r].digest, o[0].digest, "rank %d holds other bits", r);
	}
}

Test(tp_tcp, collectives_two_ranks) { check_collectives(2); }
Test(tp_tcp, collectives_three_ranks) { check_collectives(3); }

Test(tp_tcp, fingerprint_mismatch_refused)
{
	char peers[256], a0[64];
	rank_out *o = shared_outs();
	tp_case_local_peers(2, peers, sizeof(peers));
	peer_addr(peers, 0, a0, sizeof(a0));
	rank_job j0 = { 0, 2, peers, "ckpt-a", 5.0, 0, NULL, 0 },
		 j1 = { 1, 2, peers, "ckpt-b", 5.0, 0, NULL, 0 };
	run_jobs((const rank_job *[]){ &j0, &j1 }, 2, o);
	cr_assert_eq(o[0].rc, TF_ERR_PEER, "%s", o[0].msg);
	cr_assert_eq(o[1].rc, TF_ERR_PEER, "%s", o[1].msg);
	cr_assert(strstr(o[0].msg, "refused rank 1 (") &&
		  strstr(o[0].msg, "rank 1 has fingerprint 'ckpt-b/conf:") &&
		  strstr(o[0].msg, "rank 0 'ckpt-a/conf:") &&
		  strstr(o[0].msg, "their checkpoints differ") &&
		  !strstr(o[0].msg, "settings"), "%s", o[0].msg);
	cr_assert(strstr(o[1].msg, "rank 0 (") && strstr(o[1].msg, a0) &&
		  strstr(o[1].msg, "refused this rank") && strstr(o[1].msg, "fingerprint"),
		  "%s", o[1].msg);
}

/* The same checkpoint, another override on rank 1: refused; a per-host
 * key (threads) may differ. */
Test(tp_tcp, override_mismatch_refused)
{
	char peers[256];
	rank_out *o = shared_outs();
	tp_case_local_peers(2, peers, sizeof(peers));
	rank_job j0 = { 0, 2, peers, "ckpt", 5.0, 0, "sampling.temperature=0.7", 0 },
		 j1 = { 1, 2, peers, "ckpt", 5.0, 0, "sampling.temperature=0.5", 0 };
	run_jobs((const rank_job *[]){ &j0, &j1 }, 2, o);
	cr_assert_eq(o[0].rc, TF_ERR_PEER, "%s", o[0].msg);
	cr_assert(strstr(o[0].msg, "their settings differ (other INI keys or --set overrides)") &&
		  !strstr(o[0].msg, "checkpoints"), "%s", o[0].msg);
	cr_assert_eq(o[1].rc, TF_ERR_PEER, "%s", o[1].msg);

	j0.extra = "runtime.threads=1";
	j1.extra = "runtime.threads=2";
	j0.loop = j1.loop = 3;
	tp_case_local_peers(2, peers, sizeof(peers));
	memset(o, 0, 2 * sizeof(*o));
	run_jobs((const rank_job *[]){ &j0, &j1 }, 2, o);
	cr_assert_eq(o[0].rc, 0, "%s", o[0].msg);
	cr_assert_eq(o[1].rc, 0, "%s", o[1].msg);
}

Test(tp_tcp, wrong_size_refused)
{
	char peers[256], peers3[256];
	rank_out *o = shared_outs();
	tp_case_local_peers(3, peers3, sizeof(peers3));
	snprintf(peers, sizeof(peers), "%s", peers3);
	*strrchr(peers, ',') = '\0';
	rank_job j0 = { 0, 2, peers, "fp", 5.0, 0, NULL, 0 },
		 j1 = { 1, 3, peers3, "fp", 5.0, 0, NULL, 0 };
	run_jobs((const rank_job *[]){ &j0, &j1 }, 2, o);
	cr_assert_eq(o[0].rc, TF_ERR_PEER, "%s", o[0].msg);
	cr_assert(strstr(o[0].msg, "rank 1 has [tp] size 3, rank 0 has size 2"), "%s",
		  o[0].msg);
	cr_assert(o[1].rc && strstr(o[1].msg, "refused this rank"), "%s", o[1].msg);
}

/* A [tp] peers list of another length than [tp] size, or an entry that is
 * not host:port, is refused before anything connects. */
Test(tp_tcp, peer_list_refused)
{
	char peers[256];
	rank_out *o = shared_outs();
	tp_case_local_peers(3, peers, sizeof(peers));
	rank_job three = { 0, 2, peers, "fp", 2.0, 0, NULL, 0 },
		 bad = { 0, 2, "127.0.0.1:1,localhost", "fp", 2.0, 0, NULL, 0 };
	run_jobs((const rank_job *[]){ &three }, 1, o);
	run_jobs((const rank_job *[]){ &bad }, 1, o + 1);
	cr_assert_eq(o[0].rc, TF_ERR_INVALID, "%s", o[0].msg);
	cr_assert(strstr(o[0].msg, "[tp] peers: 3 addresses for [tp] size 2"), "%s", o[0].msg);
	cr_assert_eq(o[1].rc, TF_ERR_INVALID, "%s", o[1].msg);
	cr_assert(strstr(o[1].msg, "[tp] peers: 'localhost' is not host:port"), "%s", o[1].msg);
}

/* Two processes claim rank 1 (each listening on its own port, as on two
 * hosts): rank 0 takes the first and refuses the second. */
Test(tp_tcp, same_rank_twice_refused)
{
	char peers[256], other[256], spare[256];
	rank_out *o = shared_outs();
	tp_case_local_peers(3, peers, sizeof(peers));
	tp_case_local_peers(2, spare, sizeof(spare));
	char a1[64], b1[64];
	peer_addr(peers, 1, a1, sizeof(a1));
	peer_addr(spare, 1, b1, sizeof(b1));
	char *at = strstr(peers, a1);
	snprintf(other, sizeof(other), "%.*s%s%s", (int)(at - peers), peers, b1,
		 at + strlen(a1));
	rank_job j0 = { 0, 3, peers, "fp", 3.0, 0, NULL, 0 }, ja = { 1, 3, peers, "fp", 3.0, 0, NULL, 0 },
		 jb = { 1, 3, other, "fp", 3.0, 0, NULL, 0 };
	run_jobs((const rank_job *[]){ &j0, &ja, &jb }, 3, o);
	cr_assert_eq(o[0].rc, TF_ERR_PEER, "%s", o[0].msg);
	cr_assert(strstr(o[0].msg, "rank 1 connected twice"), "%s", o[0].msg);
	cr_assert(o[1].rc && o[2].rc, "both rank-1 processes fail");
	cr_assert(strstr(o[1].msg, "connected twice") || strstr(o[2].msg, "connected twice"),
		  "the refused one says why: %s | %s", o[1].msg, o[2].msg);
}

/* Every rank, the last too, listens while it runs: a second rank 1 on the
 * host finds its port taken, at once, instead of waiting for a rank 0
 * that took the first. */
Test(tp_tcp, last_rank_twice_refused)
{
	char peers[256], a1[64];
	rank_out *o = shared_outs();
	tp_case_local_peers(2, peers, sizeof(peers));
	peer_addr(peers, 1, a1, sizeof(a1));
	/* The rank 1 that connects holds its address until the other has
	 * tried it: closed sooner (a slow machine starting the other late),
	 * the address would be free again and the other would dial a rank 0
	 * that is gone. */
	rank_job j0 = { 0, 2, peers, "fp", 3.0, 0, NULL, 0 },
		 j1 = { 1, 2, peers, "fp", 3.0, 0, NULL, 3.0 };
	run_jobs((const rank_job *[]){ &j0, &j1, &j1 }, 3, o);
	int bad = o[1].rc ? 1 : 2;
	cr_assert_eq(o[0].rc, 0, "rank 0 connects the first rank 1: %s", o[0].msg);
	cr_assert_eq(o[3 - bad].rc, 0, "%s | the other: %s", o[3 - bad].msg, o[bad].msg);
	cr_assert_eq(o[bad].rc, TF_ERR_IO, "%s", o[bad].msg);
	cr_assert(strstr(o[bad].msg, "cannot listen on") && strstr(o[bad].msg, a1) &&
		  strstr(o[bad].msg, "a rank started twice?"), "%s", o[bad].msg);
	cr_assert_lt(o[bad].ms, 2500, "refused after %.0f ms, near the 3 s timeout", o[bad].ms);
}

Test(tp_tcp, port_in_use_refused)
{
	char peers[256], a0[64];
	rank_out *o = shared_outs();
	tp_case_local_peers(2, peers, sizeof(peers));
	peer_addr(peers, 0, a0, sizeof(a0));
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)atoi(strchr(a0, ':') + 1)),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(!bind(fd, (struct sockaddr *)&sa, sizeof(sa)) && !listen(fd, 1));
	rank_job j0 = { 0, 2, peers, "fp", 2.0, 0, NULL, 0 };
	run_jobs((const rank_job *[]){ &j0 }, 1, o);
	close(fd);
	cr_assert_eq(o[0].rc, TF_ERR_IO, "%s", o[0].msg);
	cr_assert(strstr(o[0].msg, "cannot listen on") && strstr(o[0].msg, a0) &&
		  strstr(o[0].msg, "Address already in use"), "%s", o[0].msg);
}

Test(tp_tcp, absent_peer_times_out)
{
	char peers[256], a0[64], a1[64];
	rank_out *o = shared_outs();
	tp_case_local_peers(2, peers, sizeof(peers));
	peer_addr(peers, 0, a0, sizeof(a0));
	peer_addr(peers, 1, a1, sizeof(a1));
	/* rank 0 waits for a rank 1 that never comes; apart, rank 1 dials a
	 * rank 0 that is not there. */
	rank_job j0 = { 0, 2, peers, "fp", 1.0, 0, NULL, 0 };
	run_jobs((const rank_job *[]){ &j0 }, 1, o);
	rank_job j1 = { 1, 2, peers, "fp", 1.0, 0, NULL, 0 };
	run_jobs((const rank_job *[]){ &j1 }, 1, o + 1);
	cr_assert_eq(o[0].rc, TF_ERR_PEER, "%s", o[0].msg);
	cr_assert(strstr(o[0].msg, "not every higher rank connected within 1000 ms") &&
		  strstr(o[0].msg, a0), "%s", o[0].msg);
	cr_assert(o[0].ms < 3000, "rank 0 gave up after %.0f ms", o[0].ms);
	cr_assert_eq(o[1].rc, TF_ERR_PEER, "%s", o[1].msg);
	cr_assert(strstr(o[1].msg, "connect to rank 0 (") && strstr(o[1].msg, a0) &&
		  strstr(o[1].msg, "Connection refused"), "%s", o[1].msg);
	cr_assert(o[1].ms < 3000, "rank 1 gave up after %.0f ms", o[1].ms);
}

/* Both ranks all-reduce 1 MB in a loop; the test signals rank 1 mid-run. */
static void fault(int sig, const char *expect)
{
	char peers[256], a1[64];
	rank_out *o = shared_outs();
	pid_t pids[2];
	tp_case_local_peers(2, peers, sizeof(peers));
	peer_addr(peers, 1, a1, sizeof(a1));
	for (int r = 0; r < 2; r++) {
		rank_job j = { r, 2, peers, "fp", 1.0, 1000000, NULL, 0 };
		pids[r] = spawn(&j, &o[r]);
	}
	for (int i = 0; i < 200 && o[0].calls < 20; i++)
		usleep(20000);
	cr_assert_geq(o[0].calls, 20, "the ranks never got going: %s", o[0].msg);
	kill(pids[1], sig);
	cr_assert_eq(waitpid(pids[0], NULL, 0), pids[0]);
	if (sig != SIGKILL)
		kill(pids[1], SIGKILL);
	cr_assert_eq(waitpid(pids[1], NULL, 0), pids[1]);
	cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a rank process is left behind");
	cr_assert_eq(o[0].rc, TF_ERR_PEER, "%s", o[0].msg);
	cr_assert(strstr(o[0].msg, "all_reduce step") && strstr(o[0].msg, "rank 1 (") &&
		  strstr(o[0].msg, a1) && strstr(o[0].msg, expect), "%s", o[0].msg);
	cr_assert(o[0].ms < 1000 + 1000, "the failing call took %.0f ms (timeout 1000)",
		  o[0].ms);
}

Test(tp_tcp, peer_killed_mid_run) { fault(SIGKILL, "closed the connection"); }
Test(tp_tcp, peer_stopped_mid_run) { fault(SIGSTOP, "did not answer within 1000 ms"); }

/* Signals without SA_RESTART land in poll(), connect() and recvmsg()
 * (EINTR) all through connecting and 300 all-reduces: nothing fails. */
Test(tp_tcp, signals_interrupt_nothing)
{
	char peers[256];
	rank_out *o = shared_outs();
	pid_t pids[2];
	/* The ranks inherit a handler without SA_RESTART: the signals
	 * interrupt their system calls. */
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigaction(SIGUSR1, &sa, NULL);
	tp_case_local_peers(2, peers, sizeof(peers));
	for (int r = 0; r < 2; r++) {
		rank_job j = { r, 2, peers, "fp", 10.0, 300, NULL, 0 };
		pids[r] = spawn(&j, &o[r]);
	}
	for (int i = 0; i < 5000 && (o[0].calls < 300 || o[1].calls < 300) && !o[0].rc &&
	     !o[1].rc; i++) {
		kill(pids[0], SIGUSR1);
		kill(pids[1], SIGUSR1);
		usleep(200);
	}
	reap(pids, 2);
	for (int r = 0; r < 2; r++) {
		cr_assert_eq(o[r].rc, 0, "rank %d: %s", r, o[r].msg);
		cr_assert_eq(o[r].calls, 300);
	}
}

/* Ranks that call different collectives fail naming the peer's. */
Test(tp_tcp, collective_mismatch)
{
	char peers[256];
	rank_out *o = shared_outs();
	tp_case_local_peers(2, peers, sizeof(peers));
	pid_t pids[2];
	for (int r = 0; r < 2; r++) {
		pids[r] = fork();
		cr_assert(pids[r] >= 0);
		if (pids[r])
			continue;
		tf_tp *tp;
		float buf[64] = { 1.0f };
		alarm(60);
		o[r].rc = tp_case_open(r, 2, peers, "fp", 2.0, "tcp", NULL, &tp);
		if (!o[r].rc) {
			o[r].rc = r ? tf_tp_broadcast(tp, buf, sizeof(buf), 0)
				    : tf_tp_all_reduce(tp, buf, 64, TF_DTYPE_F32);
			tf_tp_close(tp);
		}
		snprintf(o[r].msg, sizeof(o[r].msg), "%s", tf_engine_errmsg());
		_exit(0);
	}
	reap(pids, 2);
	cr_assert_eq(o[0].rc, TF_ERR_PEER, "%s", o[0].msg);
	cr_assert(strstr(o[0].msg, "all_reduce step 1: rank 1 (") &&
		  strstr(o[0].msg, "is in broadcast step 1"), "%s", o[0].msg);
}

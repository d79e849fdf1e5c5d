/* tplocal.c - see tplocal.h. */
#include "tplocal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define PEERS_MAX (TF_TP_LOCAL_MAX * 24)

/* n distinct free loopback ports: all bound at once, then let go. */
static int free_ports(int n, int *port)
{
	int fd[TF_TP_LOCAL_MAX], rc = 0, k = 0;
	for (; k < n && !rc; k++) {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t len = sizeof(a);
		fd[k] = socket(AF_INET, SOCK_STREAM, 0);
		if (fd[k] < 0 || bind(fd[k], (struct sockaddr *)&a, sizeof(a)) ||
		    getsockname(fd[k], (struct sockaddr *)&a, &len)) {
			fprintf(stderr, "tfrun: --tp-local: no free loopback port: %s\n",
				strerror(errno));
			rc = 1;
		} else {
			port[k] = ntohs(a.sin_port);
		}
	}
	while (k-- > 0)
		if (fd[k] >= 0)
			close(fd[k]);
	return rc;
}

/* Rank r's copy of argv: --tp-local dropped, its overrides appended. */
static char **child_argv(int argc, char **argv, char *const *set)
{
	char **v = calloc((size_t)argc + 2 * TF_TP_LOCAL_SETS + 1, sizeof(*v));
	int k = 0;
	if (!v)
		return NULL;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--tp-local")) {
			i++;
			continue;
		}
		if (!strncmp(argv[i], "--tp-local=", 11))
			continue;
		v[k++] = argv[i];
	}
	for (int s = 0; s < TF_TP_LOCAL_SETS; s++) {
		v[k++] = "--set";
		v[k++] = set[s];
	}
	return v;
}

static void sets_free(char **set)
{
	for (int s = 0; s < TF_TP_LOCAL_SETS; s++) {
		free(set[s]);
		set[s] = NULL;
	}
}

/* The overrides of rank r; 0 or -1 when out of memory. */
static int sets_make(char **set, int n, int r, const char *peers)
{
	char buf[PEERS_MAX + 16];
	snprintf(buf, sizeof(buf), "tp.size=%d", n);
	set[0] = strdup(buf);
	snprintf(buf, sizeof(buf), "tp.rank=%d", r);
	set[1] = strdup(buf);
	snprintf(buf, sizeof(buf), "tp.peers=%s", peers);
	set[2] = strdup(buf);
	set[3] = strdup("tp.transport=tcp");
	for (int s = 0; s < TF_TP_LOCAL_SETS; s++)
		if (!set[s])
			return -1;
	return 0;
}

/* In the child: die with the parent (gone already: now), read nothing,
 * print only errors. */
static void child_exec(char **v, pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	int null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
	}
	execv("/proc/self/exe", v);
	fprintf(stderr, "tfrun: --tp-local: cannot start a rank: %s\n", strerror(errno));
	_exit(127);
}

int tf_cli_tp_local_start(tf_tp_local *l, int n, int argc, char **argv)
{
	int port[TF_TP_LOCAL_MAX];
	char peers[PEERS_MAX] = "";
	pid_t parent = getpid();

	*l = (tf_tp_local){ .n = n };
	if (n < 2 || n > TF_TP_LOCAL_MAX) {
		fprintf(stderr, "tfrun: --tp-local %d: expected 2..%d ranks\n", n, TF_TP_LOCAL_MAX);
		return 2;
	}
	if (free_ports(n, port))
		return 1;
	for (int r = 0; r < n; r++)
		snprintf(peers + strlen(peers), sizeof(peers) - strlen(peers), "%s127.0.0.1:%d",
			 r ? "," : "", port[r]);
	fflush(NULL);
	for (int r = 1; r < n; r++) {
		char *set[TF_TP_LOCAL_SETS] = { 0 };
		char **v = NULL;
		pid_t pid = -1;
		if (!sets_make(set, n, r, peers) && (v = child_argv(argc, argv, set)))
			pid = fork();
		if (pid == 0)
			child_exec(v, parent);
		free(v);
		sets_free(set);
		if (pid < 0) {
			fprintf(stderr, "tfrun: --tp-local: cannot start rank %d: %s\n", r,
				strerror(errno));
			return tf_cli_tp_local_finish(l, 1);
		}
		l->pid[r] = pid;
	}
	if (sets_make(l->set, n, 0, peers)) {
		fprintf(stderr, "tfrun: out of memory\n");
		return tf_cli_tp_local_finish(l, 1);
	}
	return 0;
}

int tf_cli_tp_local_finish(tf_tp_local *l, int rc)
{
	for (int r = 1; r < l->n; r++)
		if (rc && l->pid[r] > 0)
			kill(l->pid[r], SIGKILL);
	for (int r = 1; r < l->n; r++) {
		int st;
		if (l->pid[r] <= 0 || waitpid(l->pid[r], &st, 0) != l->pid[r])
			continue;
		if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			if (WIFSIGNALED(st))
				fprintf(stderr, "tfrun: --tp-local: rank %d died of signal %d\n", r,
					WTERMSIG(st));
			rc = 1;
		}
		l->pid[r] = 0;
	}
	sets_free(l->set);
	return rc;
}

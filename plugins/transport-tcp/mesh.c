/*
 * mesh.c - connect the ranks pairwise over TCP and exchange framed data
 * with every peer at once, every wait bounded by the deadline.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "hello.h"
#include "mesh.h"
#include "wire.h"

#define MESH_HDR 16                     /* op, step, payload length */
#define MESH_RETRY_MS 50                /* between dials of a peer not listening yet */
#define EOF_ERR (-ECONNABORTED)         /* our code for "the peer closed" */

static const char *const op_names[TF_MESH_OP_COUNT] = {
	[TF_MESH_ALL_REDUCE] = "all_reduce",
	[TF_MESH_ALL_GATHER] = "all_gather",
	[TF_MESH_BROADCAST] = "broadcast",
	[TF_MESH_BARRIER] = "barrier",
	[TF_MESH_BOOTSTRAP] = "bootstrap",
};

const char *tf_mesh_op_name(tf_mesh_op op)
{
	return op > 0 && op < TF_MESH_OP_COUNT ? op_names[op] : "an unknown operation";
}

static int left_ms(int64_t deadline)
{
	int64_t l = deadline - tf_tp_now_ms();
	return l <= 0 ? 0 : l > INT_MAX ? INT_MAX : (int)l;
}

static const char *io_why(int e)
{
	if (e == EOF_ERR)
		return "closed the connection";
	if (e == -ECONNRESET || e == -EPIPE)
		return "closed the connection (reset)";
	if (e == -ETIMEDOUT)
		return "did not answer in time";
	return strerror(-e);
}

/* Record a failure that a peer caused. */
static int peer_fail(const tf_mesh *m, int r, const char *what, int e)
{
	return m->h->error(m->h, TF_ERR_PEER, "%s: rank %d: %s: rank %d (%s) %s%s",
			   m->who, m->rank, what, r, m->addr[r], io_why(e),
			   e == -ETIMEDOUT ? " ([tp] timeout)" : "");
}

/* Wait for `events` on fd until the deadline: 1 ready, 0 timed out, -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int n = poll(&p, 1, left_ms(deadline));
		if (n >= 0)
			return n;
		if (errno != EINTR)
			return -errno;
	}
}

/* All of buf out or in on a non-blocking socket: 0, or -errno (EOF_ERR,
 * -ETIMEDOUT). */
static int io_all(int fd, void *buf, size_t len, int64_t deadline, bool out)
{
	size_t done = 0;
	while (done < len) {
		ssize_t k = out ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
				: recv(fd, (char *)buf + done, len - done, 0);
		if (k > 0) {
			done += (size_t)k;
			continue;
		}
		if (k == 0)
			return EOF_ERR;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int w = wait_fd(fd, out ? POLLOUT : POLLIN, deadline);
		if (w <= 0)
			return w ? w : -ETIMEDOUT;
	}
	return 0;
}

/* "host:port" or "[v6]:port" of rank r into getaddrinfo's results. */
static int resolve(const tf_mesh *m, int r, bool passive, struct addrinfo **out)
{
	const char *a = m->addr[r], *colon = strrchr(a, ':');
	char host[256];
	size_t n = colon ? (size_t)(colon - a) : 0;
	const char *h = a;

	if (n >= 2 && a[0] == '[' && a[n - 1] == ']') {
		h++;
		n -= 2;
	}
	if (!colon || !n || n >= sizeof(host) || !colon[1])
		return m->h->error(m->h, TF_ERR_INVALID, "%s: [tp] peers entry %d '%s' is not "
				   "host:port", m->who, r, a);
	memcpy(host, h, n);
	host[n] = '\0';
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = passive ? AI_PASSIVE : 0 };
	int e = getaddrinfo(host, colon + 1, &hints, out);
	if (e)
		return m->h->error(m->h, TF_ERR_INVALID, "%s: [tp] peers entry %d '%s': %s",
				   m->who, r, a, gai_strerror(e));
	return TF_OK;
}

static void tune(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* One non-blocking connect attempt: 0 with *fd, or errno. */
static int dial_once(const struct addrinfo *a, int64_t deadline, int *fd)
{
	int s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		       a->ai_protocol), err = 0;
	socklen_t len = sizeof(err);

	if (s < 0)
		return errno;
	if (connect(s, a->ai_addr, a->ai_addrlen) && errno != EINPROGRESS) {
		err = errno;
	} else {
		int w = wait_fd(s, POLLOUT, deadline);
		if (w <= 0)
			err = w ? -w : ETIMEDOUT;
		else if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len))
			err = errno;
	}
	if (err) {
		close(s);
		return err;
	}
	tune(s);
	*fd = s;
	return 0;
}

/* Dial rank r until it listens or the deadline passes. */
static int dial(const tf_mesh *m, int r, int64_t deadline, int *fd)
{
	struct addrinfo *ai;
	int rc = resolve(m, r, false, &ai), err = 0;
	if (rc)
		return rc;
	for (;;) {
		for (const struct addrinfo *a = ai; a; a = a->ai_next)
			if (!(err = dial_once(a, deadline, fd))) {
				freeaddrinfo(ai);
				return TF_OK;
			}
		bool retry = err == ECONNREFUSED || err == EHOSTUNREACH ||
			     err == ENETUNREACH || err == ETIMEDOUT;
		int left = left_ms(deadline);
		if (!retry || !left)
			break;
		struct timespec t = { 0, (left < MESH_RETRY_MS ? left : MESH_RETRY_MS) * 1000000L };
		nanosleep(&t, NULL);
	}
	freeaddrinfo(ai);
	return m->h->error(m->h, TF_ERR_PEER, "%s: rank %d: connect to rank %d (%s): %s "
			   "within %d ms ([tp] timeout); is rank %d started, listening there, "
			   "and the port open in its firewall?", m->who, m->rank, r,
			   m->addr[r], strerror(err), m->timeout_ms, r);
}

static int listen_on(const tf_mesh *m, int *out)
{
	struct addrinfo *ai;
	int rc = resolve(m, m->rank, true, &ai), err = 0, one = 1;
	if (rc)
		return rc;
	for (const struct addrinfo *a = ai; a; a = a->ai_next) {
		int s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			       a->ai_protocol);
		if (s < 0) {
			err = errno;
			continue;
		}
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(s, a->ai_addr, a->ai_addrlen) && !listen(s, m->size)) {
			freeaddrinfo(ai);
			*out = s;
			return TF_OK;
		}
		err = errno;
		close(s);
	}
	freeaddrinfo(ai);
	return m->h->error(m->h, TF_ERR_IO, "%s: rank %d cannot listen on %s ([tp] peers "
			   "entry %d): %s%s", m->who, m->rank, m->addr[m->rank], m->rank,
			   strerror(err), err == EADDRINUSE ?
			   " (another process holds the port: a rank started twice?)" :
			   err == EADDRNOTAVAIL ? " (not an address of this host: is tp.rank "
			   "right?)" : "");
}

static void my_hello(const tf_mesh *m, const char *fingerprint, tf_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = TF_HELLO_MAGIC;
	h->abi_major = TF_ABI_MAJOR;
	h->abi_minor = TF_ABI_MINOR;
	h->rank = m->rank;
	h->size = m->size;
	snprintf(h->fingerprint, sizeof(h->fingerprint), "%s", fingerprint);
}

static int send_hello(int fd, const tf_hello *h, int64_t deadline)
{
	uint8_t buf[TF_HELLO_BYTES];
	tf_hello_encode(h, buf);
	return io_all(fd, buf, sizeof(buf), deadline, true);
}

static int recv_hello(int fd, tf_hello *h, int64_t deadline)
{
	uint8_t buf[TF_HELLO_BYTES];
	int e = io_all(fd, buf, sizeof(buf), deadline, false);
	if (!e)
		tf_hello_decode(buf, h);
	return e;
}

/* Dial lower rank r and swap hellos; it checks ours first. */
static int connect_lower(tf_mesh *m, int r, const tf_hello *mine, int64_t deadline)
{
	tf_hello theirs;
	char why[512];
	int rc = dial(m, r, deadline, &m->fd[r]), e;
	if (rc)
		return rc;
	if ((e = send_hello(m->fd[r], mine, deadline)) ||
	    (e = recv_hello(m->fd[r], &theirs, deadline)))
		return peer_fail(m, r, "handshake", e);
	if (theirs.status)
		return m->h->error(m->h, TF_ERR_PEER, "%s: rank %d: handshake: rank %d (%s) "
				   "refused this rank: %s", m->who, m->rank, r, m->addr[r],
				   theirs.reason);
	if (tf_hello_check(mine, &theirs, r, NULL, why, sizeof(why)))
		return m->h->error(m->h, TF_ERR_PEER, "%s: rank %d: handshake with rank %d "
				   "(%s): %s", m->who, m->rank, r, m->addr[r], why);
	return TF_OK;
}

static int accept_fd(const tf_mesh *m, int lfd, int64_t deadline, char *from, size_t n)
{
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);
	char host[128] = "?", port[16] = "?";

	for (;;) {
		int w = wait_fd(lfd, POLLIN, deadline);
		if (w <= 0)
			return m->h->error(m->h, TF_ERR_PEER, "%s: rank %d (%s): not every higher "
					   "rank connected within %d ms ([tp] timeout): %s",
					   m->who, m->rank, m->addr[m->rank], m->timeout_ms,
					   w ? strerror(-w) : "are they all started?");
		int fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			tune(fd);
			getnameinfo((struct sockaddr *)&sa, sl, host, sizeof(host), port,
				    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
			snprintf(from, n, "%s:%s", host, port);
			return fd;
		}
		if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
			return m->h->error(m->h, TF_ERR_IO, "%s: rank %d: accept: %s", m->who,
					   m->rank, strerror(errno));
	}
}

/* "rank 1 (its [tp] peers entry, connecting from host:port)", or only
 * where it came from when the rank it claims is not one. */
static const char *who_is(const tf_mesh *m, int r, const char *from, char *buf, size_t n)
{
	if (r >= 0 && r < m->size)
		snprintf(buf, n, "rank %d (%s, connecting from %s)", r, m->addr[r], from);
	else
		snprintf(buf, n, "the peer connecting from %s", from);
	return buf;
}

/* Accept one higher rank, check its hello and answer with the verdict. */
static int accept_higher(tf_mesh *m, int lfd, const tf_hello *mine, bool *taken,
			 int64_t deadline)
{
	char from[160], why[TF_HELLO_TEXT], name[512];
	tf_hello theirs, answer = *mine;
	int fd = accept_fd(m, lfd, deadline, from, sizeof(from)), e;
	if (fd < 0)
		return fd;
	if ((e = recv_hello(fd, &theirs, deadline))) {
		close(fd);
		return m->h->error(m->h, TF_ERR_PEER, "%s: rank %d: handshake: the peer "
				   "connecting from %s %s", m->who, m->rank, from, io_why(e));
	}
	if (tf_hello_check(mine, &theirs, -1, taken, why, sizeof(why))) {
		answer.status = 1;
		snprintf(answer.reason, sizeof(answer.reason), "%s", why);
		send_hello(fd, &answer, deadline);
		close(fd);
		return m->h->error(m->h, TF_ERR_PEER, "%s: rank %d: handshake: refused %s: %s",
				   m->who, m->rank, who_is(m, theirs.rank, from, name,
							   sizeof(name)), why);
	}
	taken[theirs.rank] = true;
	m->fd[theirs.rank] = fd;
	if ((e = send_hello(fd, &answer, deadline)))
		return peer_fail(m, theirs.rank, "handshake", e);
	return TF_OK;
}

static int mesh_alloc(tf_mesh *m, const tf_tp_config *cfg)
{
	m->fd = malloc((size_t)m->size * sizeof(*m->fd));
	m->addr = calloc((size_t)m->size, sizeof(*m->addr));
	if (!m->fd || !m->addr)
		return m->h->error(m->h, TF_ERR_NOMEM, "%s: out of memory", m->who);
	for (int r = 0; r < m->size; r++) {
		m->fd[r] = -1;
		if (!(m->addr[r] = strdup(cfg->peers[r])))
			return m->h->error(m->h, TF_ERR_NOMEM, "%s: out of memory", m->who);
	}
	return TF_OK;
}

int tf_mesh_open(tf_mesh *m, const tf_host *h, const char *who, const tf_tp_config *cfg)
{
	bool taken[TF_MESH_MAX] = { false };
	tf_hello mine;
	int rc;

	memset(m, 0, sizeof(*m));
	m->lfd = -1;
	m->h = h;
	m->who = who;
	m->rank = cfg->rank;
	m->size = cfg->size;
	m->timeout_ms = cfg->timeout_ms;
	if (cfg->size < 2 || cfg->size > TF_MESH_MAX || cfg->rank < 0 || cfg->rank >= cfg->size)
		return h->error(h, TF_ERR_INVALID, "%s: rank %d of size %d: needs 0 <= rank < "
				"size, 2 <= size <= %d", who, cfg->rank, cfg->size, TF_MESH_MAX);
	if (cfg->timeout_ms <= 0)
		return h->error(h, TF_ERR_INVALID, "%s: timeout %d ms", who, cfg->timeout_ms);
	if (strlen(cfg->fingerprint) >= TF_HELLO_TEXT)
		return h->error(h, TF_ERR_INVALID, "%s: fingerprint of %zu bytes; at most %d",
				who, strlen(cfg->fingerprint), TF_HELLO_TEXT - 1);
	if ((rc = mesh_alloc(m, cfg)))
		return rc;
	my_hello(m, cfg->fingerprint, &mine);

	int64_t deadline = tf_tp_now_ms() + m->timeout_ms;
	/* Listen before dialling, so a higher rank's dial waits in the backlog
	 * while this rank's own dials finish: lower ranks never wait on higher.
	 * The last rank accepts no one but listens too, and every rank keeps
	 * listening until close: binding its address proves it runs where
	 * [tp] peers says, and a second process of the same rank fails at
	 * once, for as long as the first runs. */
	if ((rc = listen_on(m, &m->lfd)))
		return rc;
	for (int r = 0; r < m->rank && !rc; r++)
		rc = connect_lower(m, r, &mine, deadline);
	for (int r = m->rank + 1; r < m->size && !rc; r++)
		rc = accept_higher(m, m->lfd, &mine, taken, deadline);
	return rc;
}

void tf_mesh_close(tf_mesh *m)
{
	/* A mesh never opened is all zeros: its lfd 0 is not ours. */
	if (m->who && m->lfd >= 0)
		close(m->lfd);
	m->lfd = -1;
	for (int r = 0; m->fd && r < m->size; r++)
		if (m->fd[r] >= 0)
			close(m->fd[r]);
	for (int r = 0; m->addr && r < m->size; r++)
		free(m->addr[r]);
	free(m->fd);
	free(m->addr);
	m->fd = NULL;
	m->addr = NULL;
}

/* ---- the exchange ---- */

typedef struct xfer_state {
	uint8_t shdr[MESH_HDR], rhdr[MESH_HDR];
	size_t sent, rcvd;              /* bytes so far, header included */
	bool checked;                   /* rhdr read and agreed with */
} xfer_state;

/* The peer's header must name this op, step and length. */
static int check_header(const tf_mesh *m, int r, tf_mesh_op op, const tf_mesh_xfer *x,
			const xfer_state *s)
{
	const uint8_t *p = s->rhdr;
	uint32_t pop = tf_get32(&p), pstep = tf_get32(&p);
	uint64_t plen = tf_get64(&p);
	if (pop == (uint32_t)op && pstep == m->step && plen == x->recv_len)
		return TF_OK;
	return m->h->error(m->h, TF_ERR_PEER, "%s: rank %d: %s step %u: rank %d (%s) is in "
			   "%s step %u sending %llu bytes, this rank expects %zu (the ranks "
			   "disagree on the model or its overrides?)", m->who, m->rank,
			   tf_mesh_op_name(op), m->step, r, m->addr[r],
			   tf_mesh_op_name((tf_mesh_op)pop), pstep, (unsigned long long)plen,
			   x->recv_len);
}

/* Up to two pieces: the rest of a header, then the rest of a payload. */
static int pieces(struct iovec *iov, uint8_t *hdr, void *data, size_t len, size_t done)
{
	int n = 0;
	if (done < MESH_HDR)
		iov[n++] = (struct iovec){ hdr + done, MESH_HDR - done };
	size_t off = done > MESH_HDR ? done - MESH_HDR : 0;
	if (off < len)
		iov[n++] = (struct iovec){ (char *)data + off, len - off };
	return n;
}

static int xfer_send(const tf_mesh *m, int r, const char *what, const tf_mesh_xfer *x,
		     xfer_state *s)
{
	struct iovec iov[2];
	struct msghdr msg = { .msg_iov = iov };
	msg.msg_iovlen = (size_t)pieces(iov, s->shdr, (void *)x->send, x->send_len, s->sent);
	ssize_t k = sendmsg(m->fd[r], &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (k >= 0)
		s->sent += (size_t)k;
	else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
		return peer_fail(m, r, what, -errno);
	return TF_OK;
}

static int xfer_recv(const tf_mesh *m, int r, tf_mesh_op op, const char *what,
		     const tf_mesh_xfer *x, xfer_state *s)
{
	struct iovec iov[2];
	struct msghdr msg = { .msg_iov = iov };
	msg.msg_iovlen = (size_t)pieces(iov, s->rhdr, x->recv, x->recv_len, s->rcvd);
	ssize_t k = recvmsg(m->fd[r], &msg, MSG_DONTWAIT);
	if (k == 0)
		return peer_fail(m, r, what, EOF_ERR);
	if (k < 0)
		return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK ? TF_OK :
		       peer_fail(m, r, what, -errno);
	s->rcvd += (size_t)k;
	if (!s->checked && s->rcvd >= MESH_HDR) {
		s->checked = true;
		return check_header(m, r, op, x, s);
	}
	return TF_OK;
}

static int xfer_timeout(const tf_mesh *m, int r, tf_mesh_op op, const tf_mesh_xfer *x,
			const xfer_state *s)
{
	return m->h->error(m->h, TF_ERR_PEER, "%s: rank %d: %s step %u: rank %d (%s) did "
			   "not answer within %d ms ([tp] timeout; sent %zu of %zu bytes, "
			   "received %zu of %zu)", m->who, m->rank, tf_mesh_op_name(op),
			   m->step, r, m->addr[r], m->timeout_ms, s->sent,
			   MESH_HDR + x->send_len, s->rcvd, MESH_HDR + x->recv_len);
}

int tf_mesh_exchange(tf_mesh *m, tf_mesh_op op, tf_mesh_xfer *x)
{
	xfer_state st[TF_MESH_MAX];
	struct pollfd pf[TF_MESH_MAX];
	int who[TF_MESH_MAX], rc = TF_OK;
	char what[64];

	if (!m->fd)
		return m->h->error(m->h, TF_ERR_INVALID, "%s: %s before connect", m->who,
				   tf_mesh_op_name(op));
	if (m->failed)
		return m->h->error(m->h, TF_ERR_PEER, "%s: rank %d: %s: the communicator "
				   "failed in an earlier step", m->who, m->rank,
				   tf_mesh_op_name(op));
	m->step++;
	snprintf(what, sizeof(what), "%s step %u", tf_mesh_op_name(op), m->step);
	for (int r = 0; r < m->size; r++) {
		st[r] = (xfer_state){ .sent = 0 };
		uint8_t *p = tf_put32(st[r].shdr, (uint32_t)op);
		tf_put64(tf_put32(p, m->step), x[r].send_len);
	}
	int64_t deadline = tf_tp_now_ms() + m->timeout_ms;
	while (!rc) {
		int n = 0;
		for (int r = 0; r < m->size; r++) {
			short ev = (short)((st[r].sent < MESH_HDR + x[r].send_len ? POLLOUT : 0) |
					   (st[r].rcvd < MESH_HDR + x[r].recv_len ? POLLIN : 0));
			if (r != m->rank && ev) {
				pf[n] = (struct pollfd){ .fd = m->fd[r], .events = ev };
				who[n++] = r;
			}
		}
		if (!n)
			break;
		int k = poll(pf, (nfds_t)n, left_ms(deadline));
		if (k < 0 && errno != EINTR)
			return m->h->error(m->h, TF_ERR_IO, "%s: %s: poll: %s", m->who,
					   tf_mesh_op_name(op), strerror(errno));
		if (k == 0)
			rc = xfer_timeout(m, who[0], op, &x[who[0]], &st[who[0]]);
		for (int i = 0; i < n && k > 0 && !rc; i++) {
			int r = who[i];
			short re = pf[i].revents;
			/* Send first: a peer that disagrees still gets our header
			 * before this rank fails on its, so both name the mismatch. */
			if ((re & (POLLOUT | POLLHUP | POLLERR)) && (pf[i].events & POLLOUT))
				rc = xfer_send(m, r, what, &x[r], &st[r]);
			if (!rc && (re & (POLLIN | POLLHUP | POLLERR)) && (pf[i].events & POLLIN))
				rc = xfer_recv(m, r, op, what, &x[r], &st[r]);
		}
	}
	m->failed = rc != TF_OK;
	return rc;
}

int tf_mesh_barrier(tf_mesh *m)
{
	tf_mesh_xfer x[TF_MESH_MAX] = { { NULL, 0, NULL, 0 } };
	return tf_mesh_exchange(m, TF_MESH_BARRIER, x);
}

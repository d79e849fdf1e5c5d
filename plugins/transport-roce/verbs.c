/*
 * verbs.c - ibverbs calls of the roce transport (verbs.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gid.h"
#include "verbs.h"

#define RECV_DEPTH 16                   /* receives kept posted per queue pair */
#define SEND_DEPTH 16
#define INLINE_MAX 220                  /* what ib_write_lat inlines */
#define GID_MAX 128
#define WR_RECV 0x10000u               /* wr_id bit: a receive, else a write */

/* The port's GID table as gid.h entries. */
static size_t gid_table(struct ibv_context *ctx, int port, tf_gid_entry *t)
{
	struct ibv_gid_entry e[GID_MAX];
	ssize_t n = ibv_query_gid_table(ctx, e, GID_MAX, 0);
	size_t m = 0;
	for (ssize_t i = 0; i < n; i++) {
		if ((int)e[i].port_num != port)
			continue;
		t[m].index = (int)e[i].gid_index;
		t[m].type = e[i].gid_type == IBV_GID_TYPE_ROCE_V2 ? TF_GID_ROCE_V2 :
			    e[i].gid_type == IBV_GID_TYPE_ROCE_V1 ? TF_GID_ROCE_V1 : TF_GID_IB;
		memcpy(t[m].raw, e[i].gid.raw, 16);
		m++;
	}
	return m;
}

int tf_verbs_probe(char *why, size_t n)
{
	int num = 0, active = 0;
	errno = 0;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list) {
		snprintf(why, n, "no RDMA device: ibv_get_device_list: %s%s", strerror(errno),
			 errno == ENOSYS ? " (this kernel has no RDMA support)" : "");
		return 0;
	}
	for (int d = 0; d < num; d++) {
		struct ibv_context *ctx = ibv_open_device(list[d]);
		struct ibv_device_attr da;
		if (!ctx)
			continue;
		if (!ibv_query_device(ctx, &da))
			for (int p = 1; p <= da.phys_port_cnt; p++) {
				struct ibv_port_attr pa;
				if (!ibv_query_port(ctx, (uint8_t)p, &pa) &&
				    pa.state == IBV_PORT_ACTIVE)
					active++;
			}
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	if (!num)
		snprintf(why, n, "no RDMA device (ibv_get_device_list found none)");
	else if (!active)
		snprintf(why, n, "%d RDMA device(s), no port ACTIVE: link down?", num);
	return active;
}

static void say(void (*emit)(void *, const char *), void *arg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(void (*emit)(void *, const char *), void *arg, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	emit(arg, line);
}

static void describe_port(struct ibv_context *ctx, const char *dev, int p, uint32_t ipv4,
			  void (*emit)(void *, const char *), void *arg)
{
	struct ibv_port_attr pa;
	tf_gid_entry t[GID_MAX];
	char text[64], why[256];

	if (ibv_query_port(ctx, (uint8_t)p, &pa)) {
		say(emit, arg, "%s port %d: ibv_query_port: %s", dev, p, strerror(errno));
		return;
	}
	bool eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	say(emit, arg, "%s port %d: %s, %s, active MTU %d (max %d)", dev, p,
	    ibv_port_state_str(pa.state), eth ? "Ethernet (RoCE)" : "InfiniBand",
	    tf_boot_mtu_bytes(pa.active_mtu), tf_boot_mtu_bytes(pa.max_mtu));
	if (pa.state != IBV_PORT_ACTIVE)
		say(emit, arg, "  advice: the port is down: check the cable and bring the "
		    "interface up (ip link set <netdev> up)");
	else if (eth && pa.active_mtu < IBV_MTU_4096)
		say(emit, arg, "  advice: active MTU %d: set the interface MTU to 9000 on "
		    "both hosts (ip link set dev <netdev> mtu 9000) for RoCE MTU 4096",
		    tf_boot_mtu_bytes(pa.active_mtu));
	size_t n = gid_table(ctx, p, t);
	for (size_t i = 0; i < n; i++) {
		tf_gid_text(t[i].raw, text, sizeof(text));
		say(emit, arg, "  GID %3d  %-7s  %s", t[i].index, tf_gid_type_name(t[i].type),
		    text);
	}
	if (!eth)
		return;
	int c = tf_gid_choose(t, n, ipv4, why, sizeof(why));
	if (c >= 0)
		say(emit, arg, "  would use GID %d: RoCE v2, carries %s", t[c].index,
		    ipv4 ? "this rank's [tp] peers address" : "an IPv4 address");
	else
		say(emit, arg, "  no usable GID: %s", why);
}

void tf_verbs_describe(uint32_t ipv4, const char *device,
		       void (*emit)(void *arg, const char *line), void *arg)
{
	int num = 0;
	errno = 0;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list || !num) {
		int e = errno;
		say(emit, arg, "advice: %s", e == ENOSYS ?
		    "load the RDMA drivers (mlx5_ib) or run where /sys/class/infiniband exists; "
		    "[tp] transport = tcp works anywhere" :
		    "install rdma-core and the NIC's provider (ibverbs-providers)");
		if (list)
			ibv_free_device_list(list);
		return;
	}
	for (int d = 0; d < num; d++) {
		const char *name = ibv_get_device_name(list[d]);
		struct ibv_context *ctx = ibv_open_device(list[d]);
		struct ibv_device_attr da;
		if (!ctx || ibv_query_device(ctx, &da)) {
			say(emit, arg, "%s: cannot open: %s", name, strerror(errno));
		} else {
			say(emit, arg, "%s%s: %d port(s)", name,
			    device && !strcmp(device, name) ? " ([tp] rdma_device)" : "",
			    da.phys_port_cnt);
			for (int p = 1; p <= da.phys_port_cnt; p++)
				describe_port(ctx, name, p, ipv4, emit, arg);
		}
		if (ctx)
			ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
}

/* An active port of ctx with a usable GID; 0 with v->port and gid set. */
static int pick_port(tf_verbs *v, uint32_t ipv4, char *why, size_t n)
{
	struct ibv_device_attr da;
	tf_gid_entry t[GID_MAX];

	if (ibv_query_device(v->ctx, &da)) {
		snprintf(why, n, "%s: ibv_query_device: %s", v->device, strerror(errno));
		return -1;
	}
	snprintf(why, n, "%s: no port is ACTIVE", v->device);
	for (int p = 1; p <= da.phys_port_cnt; p++) {
		struct ibv_port_attr pa;
		if (ibv_query_port(v->ctx, (uint8_t)p, &pa) || pa.state != IBV_PORT_ACTIVE)
			continue;
		v->port = p;
		v->local.mtu = (uint8_t)pa.active_mtu;
		v->local.lid = pa.lid;
		v->local.link_eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
		if (!v->local.link_eth) {
			v->gid_index = -1;
			return 0;
		}
		char gwhy[256];
		size_t m = gid_table(v->ctx, p, t);
		int c = tf_gid_choose(t, m, ipv4, gwhy, sizeof(gwhy));
		if (c >= 0) {
			v->gid_index = t[c].index;
			memcpy(v->local.gid, t[c].raw, 16);
			return 0;
		}
		snprintf(why, n, "%s port %d: %s", v->device, p, gwhy);
	}
	return -1;
}

static int open_device(tf_verbs *v, const char *device, uint32_t ipv4, char *why, size_t n)
{
	int num = 0, rc = -1;
	errno = 0;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list) {
		tf_verbs_probe(why, n);
		return -1;
	}
	snprintf(why, n, device ? "no RDMA device named %s" : "no RDMA device", device);
	for (int d = 0; d < num && rc; d++) {
		const char *name = ibv_get_device_name(list[d]);
		if (device && strcmp(device, name))
			continue;
		if (!(v->ctx = ibv_open_device(list[d])))
			continue;
		snprintf(v->device, sizeof(v->device), "%s", name);
		if ((rc = pick_port(v, ipv4, why, n))) {
			ibv_close_device(v->ctx);
			v->ctx = NULL;
		}
	}
	ibv_free_device_list(list);
	return rc;
}

static struct ibv_qp *make_qp(tf_verbs *v)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = v->cq, .recv_cq = v->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = SEND_DEPTH, .max_recv_wr = RECV_DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = INLINE_MAX },
	};
	/* Inline small writes (the NIC reads them from the descriptor, one DMA
	 * less); a provider that offers no inline data gets none asked. */
	struct ibv_qp *qp = ibv_create_qp(v->pd, &ia);
	if (!qp) {
		ia.cap.max_inline_data = 0;
		qp = ibv_create_qp(v->pd, &ia);
	}
	if (!qp)
		return NULL;
	v->max_inline = ia.cap.max_inline_data;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0,
				 .port_num = (uint8_t)v->port,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS)) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

int tf_verbs_open(tf_verbs *v, const char *device, uint32_t ipv4, int rank, int size,
		  size_t slot_bytes, int slots, char *why, size_t n)
{
	memset(v, 0, sizeof(*v));
	v->rank = rank;
	v->size = size;
	v->slot_bytes = slot_bytes;
	v->slots = slots;
	if (open_device(v, device, ipv4, why, n))
		return -1;
	size_t sbytes = (size_t)slots * slot_bytes, rbytes = (size_t)size * sbytes;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (!(v->pd = ibv_alloc_pd(v->ctx)) ||
	    !(v->cq = ibv_create_cq(v->ctx, 2 * size * (RECV_DEPTH + SEND_DEPTH), NULL, NULL, 0)) ||
	    posix_memalign((void **)&v->send_buf, 4096, sbytes) ||
	    posix_memalign((void **)&v->recv_buf, 4096, rbytes) ||
	    !(v->send_mr = ibv_reg_mr(v->pd, v->send_buf, sbytes, access)) ||
	    !(v->recv_mr = ibv_reg_mr(v->pd, v->recv_buf, rbytes, access))) {
		snprintf(why, n, "%s: protection domain, completion queue or %zu bytes of "
			 "registered memory: %s (ulimit -l unlimited?)", v->device,
			 sbytes + rbytes, strerror(errno));
		return -1;
	}
	v->local.magic = TF_BOOT_MAGIC;
	v->local.version = TF_BOOT_VERSION;
	v->local.rkey = v->recv_mr->rkey;
	v->local.addr = (uint64_t)(uintptr_t)v->recv_buf;
	v->local.slot_bytes = slot_bytes;
	v->local.slots = (uint32_t)slots;
	for (int p = 0; p < size; p++)
		if (p != rank && !(v->qp[p] = make_qp(v))) {
			snprintf(why, n, "%s: queue pair for rank %d: %s", v->device, p,
				 strerror(errno));
			return -1;
		}
	return 0;
}

void tf_verbs_boot(const tf_verbs *v, int p, tf_boot *out)
{
	*out = v->local;
	out->qpn = v->qp[p]->qp_num;
	out->psn = (uint32_t)(v->rank * 0x1000 + p) & 0xffffff;
}

static int post_recv(tf_verbs *v, int p)
{
	struct ibv_recv_wr wr = { .wr_id = WR_RECV | (uint64_t)p, .num_sge = 0 }, *bad;
	return ibv_post_recv(v->qp[p], &wr, &bad);
}

int tf_verbs_connect(tf_verbs *v, int p, const tf_boot *theirs, int mtu, char *why,
		     size_t n)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = (enum ibv_mtu)mtu,
		.dest_qp_num = theirs->qpn, .rq_psn = theirs->psn,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .dlid = theirs->lid, .port_num = (uint8_t)v->port },
	};
	if (v->local.link_eth) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, theirs->gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)v->gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	if (ibv_modify_qp(v->qp[p], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER)) {
		snprintf(why, n, "queue pair to rank %d: RTR: %s", p, strerror(errno));
		return -1;
	}
	tf_boot mine;
	tf_verbs_boot(v, p, &mine);
	struct ibv_qp_attr s = { .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
				 .rnr_retry = 7, .sq_psn = mine.psn, .max_rd_atomic = 1 };
	if (ibv_modify_qp(v->qp[p], &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
		snprintf(why, n, "queue pair to rank %d: RTS: %s", p, strerror(errno));
		return -1;
	}
	v->remote_addr[p] = theirs->addr;
	v->remote_rkey[p] = theirs->rkey;
	for (int i = 0; i < RECV_DEPTH; i++)
		if (post_recv(v, p)) {
			snprintf(why, n, "queue pair to rank %d: post receive: %s", p,
				 strerror(errno));
			return -1;
		}
	return 0;
}

int tf_verbs_write(tf_verbs *v, int p, uint32_t k, size_t len, char *why, size_t n)
{
	size_t src = tf_slot_offset(0, k, v->slots, v->slot_bytes);
	struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)(v->send_buf + src),
			       .length = (uint32_t)len, .lkey = v->send_mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)p, .sg_list = &sge, .num_sge = len ? 1 : 0,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED | (len && len <= v->max_inline ? IBV_SEND_INLINE : 0),
		.imm_data = htonl(k),
		.wr.rdma = { .remote_addr = v->remote_addr[p] +
				tf_slot_offset(v->rank, k, v->slots, v->slot_bytes),
			     .rkey = v->remote_rkey[p] },
	}, *bad;
	int e = ibv_post_send(v->qp[p], &wr, &bad);
	if (e)
		snprintf(why, n, "post write to rank %d: %s", p, strerror(e));
	return e ? -1 : 0;
}

int tf_verbs_poll(tf_verbs *v, tf_completion *out, int max, char *why, size_t n)
{
	struct ibv_wc wc[16];
	int got = ibv_poll_cq(v->cq, max < 16 ? max : 16, wc);
	if (got < 0) {
		snprintf(why, n, "%s: ibv_poll_cq failed", v->device);
		return -1;
	}
	for (int i = 0; i < got; i++) {
		/* A failed completion's opcode is undefined: wr_id says which. */
		int p = (int)(wc[i].wr_id & ~(uint64_t)WR_RECV);
		bool recv = wc[i].wr_id & WR_RECV;
		out[i] = (tf_completion){
			.peer = p, .recv = recv,
			.ok = wc[i].status == IBV_WC_SUCCESS,
			.imm = recv ? ntohl(wc[i].imm_data) : 0, .len = wc[i].byte_len,
			.status = ibv_wc_status_str(wc[i].status),
		};
		if (recv && out[i].ok && post_recv(v, p)) {
			snprintf(why, n, "repost receive for rank %d: %s", p, strerror(errno));
			return -1;
		}
	}
	return got;
}

void tf_verbs_close(tf_verbs *v)
{
	for (int p = 0; p < v->size; p++)
		if (v->qp[p])
			ibv_destroy_qp(v->qp[p]);
	if (v->send_mr)
		ibv_dereg_mr(v->send_mr);
	if (v->recv_mr)
		ibv_dereg_mr(v->recv_mr);
	if (v->cq)
		ibv_destroy_cq(v->cq);
	if (v->pd)
		ibv_dealloc_pd(v->pd);
	if (v->ctx)
		ibv_close_device(v->ctx);
	free(v->send_buf);
	free(v->recv_buf);
	memset(v, 0, sizeof(*v));
}

/* Helpers shared by test_shm.c and test_shm_pull.c: two uroce contexts on
 * uroce_lo in one process (or a parent and its children), one RC QP each,
 * an MR over a 1 MiB buffer, the device counters. */
#ifndef SHM_HARNESS_H
#define SHM_HARNESS_H

#include <dirent.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "uroce.h"

#define BUF	(1u << 20)
#define WAIT_MS 30000

static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One context with a PD, an MR over buf and a CQ. */
struct node {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
};

struct qpinfo {
	uint32_t qpn, rkey;
	uint64_t addr;
};

static inline int node_open(struct node *n, int cqe)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_device *dev = NULL;

	memset(n, 0, sizeof(*n));
	for (int i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), "uroce_lo"))
			dev = l[i];
	n->ctx = dev ? ibv_open_device(dev) : NULL;
	if (l)
		ibv_free_device_list(l);
	if (!n->ctx)
		return -1;
	n->pd = ibv_alloc_pd(n->ctx);
	n->cq = ibv_create_cq(n->ctx, cqe, NULL, NULL, 0);
	n->buf = aligned_alloc(4096, BUF);
	if (!n->pd || !n->cq || !n->buf || ibv_query_gid(n->ctx, 1, 0, &n->gid))
		return -1;
	memset(n->buf, 0, BUF);
	n->mr =
	    ibv_reg_mr(n->pd, n->buf, BUF,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	return n->mr ? 0 : -1;
}

static inline void node_close(struct node *n)
{
	if (n->mr)
		ibv_dereg_mr(n->mr);
	if (n->cq)
		ibv_destroy_cq(n->cq);
	if (n->pd)
		ibv_dealloc_pd(n->pd);
	if (n->ctx)
		ibv_close_device(n->ctx);
	free(n->buf);
	memset(n, 0, sizeof(*n));
}

static inline struct ibv_qp *qp_new(struct node *n)
{
	struct ibv_qp_init_attr ia = {
	    .qp_type = IBV_QPT_RC,
	    .send_cq = n->cq,
	    .recv_cq = n->cq,
	    .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1},
	};

	return ibv_create_qp(n->pd, &ia);
}

static inline int qp_rts(struct node *n, struct ibv_qp *qp, uint32_t dqpn, uint8_t timeout,
			 uint8_t retry)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
						   IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ};

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = dqpn;
	a.rq_psn = 100;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = n->gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry;
	a.rnr_retry = 7;
	a.sq_psn = 100;
	a.max_rd_atomic = 16;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static inline int post(struct ibv_qp *qp, enum ibv_wr_opcode op, struct node *n, uint32_t off,
		       uint32_t len, const struct qpinfo *peer, uint32_t roff, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)n->buf + off, .length = len, .lkey = n->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	if (peer) {
		wr.wr.rdma.remote_addr = peer->addr + roff;
		wr.wr.rdma.rkey = peer->rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

static inline int post_recv(struct ibv_qp *qp, struct node *n, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)n->buf + off, .length = len, .lkey = n->mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* n completions on cq, all successful (or *status gets the first error). */
static inline int wait_cq(struct ibv_cq *cq, int n, enum ibv_wc_status *status)
{
	uint64_t end = now_ms() + WAIT_MS;
	struct ibv_wc wc[16];

	if (status)
		*status = IBV_WC_SUCCESS;
	while (n > 0 && now_ms() < end) {
		int r = ibv_poll_cq(cq, n < 16 ? n : 16, wc);

		if (r < 0)
			return -1;
		for (int i = 0; i < r; i++)
			if (wc[i].status != IBV_WC_SUCCESS && status && *status == IBV_WC_SUCCESS)
				*status = wc[i].status;
		n -= r;
	}
	return n ? -1 : 0;
}

static inline struct uroce_counters *cnt(struct node *n)
{
	return to_uctx(n->ctx)->cnt;
}

#define CNT(n, f) atomic_load(&cnt(n)->f)

static inline void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 2654435761u + i * 31u + (i >> 8));
}

static inline int count_maps(const char *what)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return n;
}

static inline int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

/* A and B in this process, one QP each, connected. */
struct pair {
	struct node a, b;
	struct ibv_qp *qa, *qb;
	struct qpinfo ib; /* B's buffer, for A's WRITEs */
};

static inline int pair_open(struct pair *p)
{
	memset(p, 0, sizeof(*p));
	if (node_open(&p->a, 256) || node_open(&p->b, 256))
		return -1;
	p->qa = qp_new(&p->a);
	p->qb = qp_new(&p->b);
	if (!p->qa || !p->qb || qp_rts(&p->a, p->qa, p->qb->qp_num, 14, 7) ||
	    qp_rts(&p->b, p->qb, p->qa->qp_num, 14, 7))
		return -1;
	p->ib = (struct qpinfo){
	    .qpn = p->qb->qp_num, .rkey = p->b.mr->rkey, .addr = (uintptr_t)p->b.buf};
	return 0;
}

static inline void pair_close(struct pair *p)
{
	if (p->qa)
		ibv_destroy_qp(p->qa);
	if (p->qb)
		ibv_destroy_qp(p->qb);
	node_close(&p->a);
	node_close(&p->b);
}

/* nwr WRITEs of len bytes from A into B (B never polls), then check. */
static inline bool write_stream(struct pair *p, int nwr, uint32_t len, uint32_t seed)
{
	enum ibv_wc_status st;
	uint32_t span = (uint32_t)nwr * len;

	fill(p->a.buf, span, seed);
	memset(p->b.buf, 0, span);
	for (int i = 0; i < nwr; i++)
		if (post(p->qa, IBV_WR_RDMA_WRITE, &p->a, (uint32_t)i * len, len, &p->ib,
			 (uint32_t)i * len, (uint64_t)i))
			return false;
	if (wait_cq(p->a.cq, nwr, &st) || st != IBV_WC_SUCCESS) {
		/* (what a flake needs to be understood from a CI log) */
		printf("  write stream: %s; A: %lu timeouts, %lu retries, %lu sent (%lu by ring), "
		       "%lu received, %lu ACKs; B: %lu received, %lu sent\n",
		       ibv_wc_status_str(st), (unsigned long)CNT(&p->a, timeouts),
		       (unsigned long)CNT(&p->a, retries), (unsigned long)CNT(&p->a, tx_pkts),
		       (unsigned long)CNT(&p->a, shm_tx), (unsigned long)CNT(&p->a, rx_pkts),
		       (unsigned long)CNT(&p->a, acks_rx), (unsigned long)CNT(&p->b, rx_pkts),
		       (unsigned long)CNT(&p->b, tx_pkts));
		return false;
	}
	return !memcmp(p->a.buf, p->b.buf, span);
}

/* Stream until both directions have their link. */
static inline bool warm_up(struct pair *p)
{
	for (uint64_t end = now_ms() + 20000; now_ms() < end;) {
		if (CNT(&p->a, shm_links) && CNT(&p->b, shm_links))
			return true;
		if (!write_stream(p, 4, 4096, 1))
			return false;
	}
	return false;
}

#endif

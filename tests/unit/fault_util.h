/* Helpers shared by test_peer_death.c, test_load.c and test_soak.c: opening
 * the loopback device, connecting an RC QP to a peer described by a small
 * struct (which may come from another process), CPU time and RSS.
 *
 * Only the public verbs API is used; the tests count results with CHECK
 * from rc_harness.h.
 */
#ifndef FAULT_UTIL_H
#define FAULT_UTIL_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* What one side tells the other to connect an RC QP. */
struct fu_peer {
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint64_t addr;
	uint64_t len;
	union ibv_gid gid;
	int32_t pid;
};

struct fu_qp_opts {
	enum ibv_mtu mtu;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint8_t rd_atomic;
};

static inline struct fu_qp_opts fu_default_opts(void)
{
	struct fu_qp_opts o = {
	    .mtu = IBV_MTU_4096,
	    .timeout = 14, /* 67 ms */
	    .retry_cnt = 7,
	    .rnr_retry = 7,
	    .min_rnr_timer = 1,
	    .rd_atomic = 16,
	};
	return o;
}

/* Open the device called name (NULL: uroce_lo, else the first one). */
static inline struct ibv_context *fu_open(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n, pick = -1;

	list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name ? name : "uroce_lo"))
			pick = i;
	if (pick < 0 && !name && n > 0)
		pick = 0;
	if (pick >= 0)
		ctx = ibv_open_device(list[pick]);
	ibv_free_device_list(list);
	return ctx;
}

static inline int fu_qp_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT,
	    .pkey_index = 0,
	    .port_num = 1,
	    .qp_access_flags =
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};

	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

/* INIT -> RTR -> RTS toward peer; my_psn is what this side sends with. */
static inline int fu_qp_rts(struct ibv_qp *qp, const struct fu_peer *peer, uint32_t my_psn,
			    const struct fu_qp_opts *o)
{
	struct ibv_qp_attr a;
	int err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = o->mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = o->rd_atomic;
	a.min_rnr_timer = o->min_rnr_timer;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	err = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = o->timeout;
	a.retry_cnt = o->retry_cnt;
	a.rnr_retry = o->rnr_retry;
	a.sq_psn = my_psn;
	a.max_rd_atomic = o->rd_atomic;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static inline int fu_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return -1;
	return a.qp_state;
}

/* IBTA local ACK timeout with uroce's 2 ms floor (src/transport/rc.h). */
static inline double fu_timeout_s(uint8_t timeout)
{
	double t = 4.096e-6 * (double)(1ull << timeout);

	return t < 0.002 ? 0.002 : t;
}

static inline double fu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of the whole process (every thread), in seconds. */
static inline double fu_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* utime + stime from /proc/self/stat, in clock ticks. */
static inline long fu_proc_ticks(void)
{
	char buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (long)(ut + st);
}

/* VmRSS or VmHWM from /proc/self/status, in KiB. */
static inline long fu_status_kb(const char *field)
{
	char line[256];
	size_t fl = strlen(field);
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, fl) && line[fl] == ':') {
			v = strtol(line + fl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* Read or write exactly n bytes of a pipe; 0 on success. */
static inline int fu_xfer(int fd, void *buf, size_t n, bool wr)
{
	char *p = buf;

	while (n) {
		ssize_t r = wr ? write(fd, p, n) : read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* ---- two contexts ("hosts") with RC QP pairs between them ---- */

struct fu_side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t *buf;
	size_t len;
	struct ibv_mr *mr;
	struct ibv_cq *scq, *rcq;
	union ibv_gid gid;
};

/* Open the device, a PD, len bytes of registered memory and two CQs. */
static inline int fu_side_open(struct fu_side *s, size_t len, int cqe)
{
	memset(s, 0, sizeof(*s));
	s->ctx = fu_open(NULL);
	if (!s->ctx)
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->buf = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
	if (!s->pd || !s->buf || ibv_query_gid(s->ctx, 1, 0, &s->gid))
		return -1;
	s->len = len;
	memset(s->buf, 0, len);
	s->mr =
	    ibv_reg_mr(s->pd, s->buf, len,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	s->scq = ibv_create_cq(s->ctx, cqe, NULL, NULL, 0);
	s->rcq = ibv_create_cq(s->ctx, cqe, NULL, NULL, 0);
	return s->mr && s->scq && s->rcq ? 0 : -1;
}

static inline void fu_side_close(struct fu_side *s)
{
	if (s->scq)
		ibv_destroy_cq(s->scq);
	if (s->rcq)
		ibv_destroy_cq(s->rcq);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

/* Create an RC QP on each side (send/recv CQs of the side) and connect
 * them to each other.  q[i] belongs to side s[i]. */
static inline int fu_pair_create(struct fu_side *s, struct ibv_qp **q, const struct ibv_qp_cap *cap,
				 const struct fu_qp_opts *o)
{
	struct fu_peer peer[2];

	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr ia = {
		    .send_cq = s[i].scq,
		    .recv_cq = s[i].rcq,
		    .qp_type = IBV_QPT_RC,
		    .cap = *cap,
		};

		q[i] = ibv_create_qp(s[i].pd, &ia);
		if (!q[i] || fu_qp_init(q[i]))
			return -1;
		memset(&peer[i], 0, sizeof(peer[i]));
		peer[i].qpn = q[i]->qp_num;
		peer[i].psn = (q[i]->qp_num * 2654435761u) & 0xffffff;
		peer[i].gid = s[i].gid;
	}
	for (int i = 0; i < 2; i++)
		if (fu_qp_rts(q[i], &peer[!i], peer[i].psn, o))
			return -1;
	return 0;
}

#define FU_WAIT_S 60.0

/* Poll the CQs until want[i] completions arrived on cq[i]; every one must
 * succeed.  recv_len[] (indexed by wr_id) gives the expected byte_len of
 * receive completions on the CQs marked in is_recv. */
static inline int fu_poll_all(struct ibv_cq **cq, const int *want, int ncq, const bool *is_recv,
			      const uint32_t *const *recv_len)
{
	struct ibv_wc wc[64];
	int got[8] = {0}, bad = 0;
	double end = fu_now() + FU_WAIT_S;

	for (;;) {
		bool done = true;

		for (int i = 0; i < ncq; i++) {
			int n;

			if (got[i] >= want[i])
				continue;
			done = false;
			n = ibv_poll_cq(cq[i], 64, wc);
			if (n < 0)
				return -1;
			for (int k = 0; k < n; k++) {
				if (wc[k].status != IBV_WC_SUCCESS ||
				    (is_recv[i] && wc[k].byte_len != recv_len[i][wc[k].wr_id])) {
					if (bad++ < 5)
						printf("  CQ %d: wr_id %llu: %s, byte_len %u\n", i,
						       (unsigned long long)wc[k].wr_id,
						       ibv_wc_status_str(wc[k].status),
						       wc[k].byte_len);
				}
			}
			got[i] += n;
		}
		if (done)
			break;
		if (fu_now() > end) {
			for (int i = 0; i < ncq; i++)
				printf("  CQ %d: %d of %d completions\n", i, got[i], want[i]);
			return -1;
		}
	}
	return bad ? -1 : 0;
}

#endif

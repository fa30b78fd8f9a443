/* Helpers for test_cq_ex.c and test_qp_ex.c: two contexts on the loopback
 * device uroce_lo (like two processes), PDs, MRs and connected RC QP pairs,
 * all through the public verbs API.  The uroce internals (uroce.h) are
 * only looked at to check counts the API does not show.
 */
#ifndef EXT_LOOP_H
#define EXT_LOOP_H

#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uroce.h"

#include "check.h"

#define WAIT_MS 10000

static inline uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline uint64_t ns_of(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline struct ibv_context *open_lo(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "uroce_lo"))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx) {
		printf("cannot open uroce_lo\n");
		exit(1);
	}
	return ctx;
}

#define FULL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static inline struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
				     uint32_t comp_mask, uint64_t send_ops)
{
	struct ibv_qp_init_attr_ex ia = {
	    .send_cq = scq,
	    .recv_cq = rcq,
	    .cap = {.max_send_wr = 64,
		    .max_recv_wr = 64,
		    .max_send_sge = 4,
		    .max_recv_sge = 4,
		    .max_inline_data = 256},
	    .qp_type = IBV_QPT_RC,
	    .comp_mask = IBV_QP_INIT_ATTR_PD | comp_mask,
	    .pd = pd,
	    .send_ops_flags = send_ops,
	};

	return ibv_create_qp_ex(pd->context, &ia);
}

/* RESET -> INIT -> RTR -> RTS towards remote_qpn on GID index 0. */
static inline int qp_to_rts(struct ibv_qp *qp, uint32_t remote_qpn, uint32_t my_psn,
			    uint32_t remote_psn)
{
	struct ibv_qp_attr a;
	union ibv_gid gid;
	int err;

	if (ibv_query_gid(qp->context, 1, 0, &gid))
		return errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags =
	    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	err = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = remote_qpn;
	a.rq_psn = remote_psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
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
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = my_psn;
	a.max_rd_atomic = 4;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static inline int connect_pair(struct ibv_qp *a, struct ibv_qp *b)
{
	int err = qp_to_rts(a, b->qp_num, 0x100, 0x200);

	return err ? err : qp_to_rts(b, a->qp_num, 0x200, 0x100);
}

/* Poll a CQ with ibv_poll_cq until n completions arrived or WAIT_MS.
 * Returns how many arrived. */
static inline int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	uint64_t end = ms_now() + WAIT_MS;
	int got = 0;

	while (got < n && ms_now() < end) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0)
			break;
		got += r;
	}
	return got;
}

/* Completions queued in a CQ and not polled yet. */
static inline uint32_t cq_queued(struct ibv_cq *cq)
{
	struct uroce_cq *c = to_ucq(cq);
	uint32_t n;

	pthread_mutex_lock(&c->lock);
	n = c->count;
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* Wait (driving the receive path like a poller) until cq holds n entries. */
static inline bool wait_queued(struct ibv_cq *cq, uint32_t n)
{
	uint64_t end = ms_now() + WAIT_MS;

	while (cq_queued(cq) < n && ms_now() < end) {
		struct timespec ts = {0, 200000};

		nanosleep(&ts, NULL); /* the progress threads deliver */
	}
	return cq_queued(cq) >= n;
}

static inline int post_recv(struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len,
			    uint32_t lkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

static inline void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

static inline int finish(const char *name)
{
	printf("%s: %u passed, %u failed\n", name, passed, failed);
	return failed ? 1 : 0;
}

#endif

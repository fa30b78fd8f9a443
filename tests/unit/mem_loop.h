/* Helpers for test_odp.c, test_dm.c and test_pdom.c (on top of
 * ext_loop.h): two contexts on uroce_lo, A the requester and B the
 * responder, a fresh connected RC pair per case (an error completion
 * leaves a QP in ERR), and one work request posted and waited for.
 */
#ifndef MEM_LOOP_H
#define MEM_LOOP_H

#include "ext_loop.h"

struct mside {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

static inline void mside_open(struct mside *s)
{
	s->ctx = open_lo();
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	if (!s->pd || !s->cq) {
		printf("cannot make PD/CQ\n");
		exit(1);
	}
}

static inline void mside_close(struct mside *s)
{
	ibv_destroy_cq(s->cq);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
}

/* A connected RC pair: *qa on a (pd pa, or a's PD), *qb on b. */
static inline int mpair(struct mside *a, struct ibv_pd *pa, struct mside *b, struct ibv_qp **qa,
			struct ibv_qp **qb)
{
	*qa = make_qp(pa ? pa : a->pd, a->cq, a->cq, 0, 0);
	*qb = make_qp(b->pd, b->cq, b->cq, 0, 0);
	if (!*qa || !*qb)
		return -1;
	return connect_pair(*qa, *qb);
}

static inline void mpair_destroy(struct ibv_qp *qa, struct ibv_qp *qb)
{
	if (qa)
		ibv_destroy_qp(qa);
	if (qb)
		ibv_destroy_qp(qb);
}

/* Post one signaled WR on qp and wait for its completion on cq: the
 * status (IBV_WC_GENERAL_ERR when posting failed or nothing came). */
static inline enum ibv_wc_status run_wr(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode op,
					uint32_t lkey, void *laddr, uint32_t len, uint32_t rkey,
					uint64_t raddr)
{
	struct ibv_sge sge = {.addr = (uintptr_t)laddr, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = 77,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 5;
		wr.wr.atomic.swap = 0;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(qp, &wr, &bad))
		return IBV_WC_GENERAL_ERR;
	if (wait_wc(cq, &wc, 1) != 1 || wc.wr_id != 77)
		return IBV_WC_GENERAL_ERR;
	return wc.status;
}

/* Wait for one receive completion on cq: its status. */
static inline enum ibv_wc_status recv_status(struct ibv_cq *cq, uint32_t *byte_len)
{
	struct ibv_wc wc;

	if (wait_wc(cq, &wc, 1) != 1)
		return IBV_WC_GENERAL_ERR;
	if (byte_len)
		*byte_len = wc.byte_len;
	return wc.status;
}

#endif

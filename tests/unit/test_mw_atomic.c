/* Memory windows (type 1 and 2, bind, local and remote invalidate) and
 * atomics (fetch-and-add, compare-and-swap, their access and alignment
 * rules) between two contexts on uroce_lo, through the public verbs API. */
#include <fcntl.h>
#include <poll.h>

#include "ext_loop.h"

struct pair {
	struct ibv_context *ca, *cb;
	struct ibv_pd *pa, *pb;
	struct ibv_cq *qa, *qb;
	struct ibv_qp *a, *b;
};

/* New CQs and a connected QP pair on the pair's contexts; B grants b_access. */
static int pair_connect(struct pair *p, int b_access)
{
	struct ibv_qp_attr attr = {.qp_access_flags = b_access};

	p->qa = ibv_create_cq(p->ca, 64, NULL, NULL, 0);
	p->qb = ibv_create_cq(p->cb, 64, NULL, NULL, 0);
	if (!p->qa || !p->qb)
		return -1;
	p->a = make_qp(p->pa, p->qa, p->qa, 0, 0);
	p->b = make_qp(p->pb, p->qb, p->qb, 0, 0);
	if (!p->a || !p->b || connect_pair(p->a, p->b))
		return -1;
	/* RTS -> RTS may change the access B grants */
	return b_access ? ibv_modify_qp(p->b, &attr, IBV_QP_ACCESS_FLAGS) : 0;
}

static int pair_open(struct pair *p, int b_access)
{
	memset(p, 0, sizeof(*p));
	p->ca = open_lo();
	p->cb = open_lo();
	if (!p->ca || !p->cb)
		return -1;
	p->pa = ibv_alloc_pd(p->ca);
	p->pb = ibv_alloc_pd(p->cb);
	if (!p->pa || !p->pb)
		return -1;
	return pair_connect(p, b_access);
}

static void pair_close(struct pair *p)
{
	ibv_destroy_qp(p->a);
	ibv_destroy_qp(p->b);
	ibv_destroy_cq(p->qa);
	ibv_destroy_cq(p->qb);
}

static void ctx_close(struct pair *p)
{
	ibv_dealloc_pd(p->pa);
	ibv_dealloc_pd(p->pb);
	ibv_close_device(p->ca);
	ibv_close_device(p->cb);
}

/* A posts one RDMA op against (rkey, raddr) and waits for its completion. */
static enum ibv_wc_status rdma(struct pair *p, enum ibv_wr_opcode op, struct ibv_mr *lmr,
			       void *laddr, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {(uintptr_t)laddr, len, lmr->lkey};
	struct ibv_send_wr wr = {.wr_id = 7,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(p->a, &wr, &bad))
		return IBV_WC_GENERAL_ERR;
	if (wait_wc(p->qa, &wc, 1) != 1)
		return IBV_WC_GENERAL_ERR;
	return wc.status;
}

static enum ibv_wc_status atomic_op(struct pair *p, enum ibv_wr_opcode op, struct ibv_mr *lmr,
				    uint64_t *result, uint64_t raddr, uint32_t rkey,
				    uint64_t cmp_add, uint64_t swap)
{
	struct ibv_sge sge = {(uintptr_t)result, 8, lmr->lkey};
	struct ibv_send_wr wr = {.wr_id = 9,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	if (ibv_post_send(p->a, &wr, &bad))
		return IBV_WC_GENERAL_ERR;
	if (wait_wc(p->qa, &wc, 1) != 1)
		return IBV_WC_GENERAL_ERR;
	CHECK(wc.status != IBV_WC_SUCCESS ||
		  wc.opcode ==
		      (op == IBV_WR_ATOMIC_FETCH_AND_ADD ? IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP),
	      "atomic completion opcode %d", wc.opcode);
	return wc.status;
}

/* B binds a window with a WR on its own QP (type 2) or ibv_bind_mw (type 1). */
static enum ibv_wc_status mw_bind(struct pair *p, struct ibv_mw *mw, struct ibv_mr *mr,
				  uint64_t addr, uint64_t len, unsigned int access)
{
	struct ibv_wc wc;

	if (mw->type == IBV_MW_TYPE_1) {
		struct ibv_mw_bind mb = {.wr_id = 11,
					 .send_flags = IBV_SEND_SIGNALED,
					 .bind_info = {mr, addr, len, access}};

		if (ibv_bind_mw(p->b, mw, &mb))
			return IBV_WC_GENERAL_ERR;
	} else {
		struct ibv_send_wr wr = {.wr_id = 11,
					 .opcode = IBV_WR_BIND_MW,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		wr.bind_mw.mw = mw;
		wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
		wr.bind_mw.bind_info = (struct ibv_mw_bind_info){mr, addr, len, access};
		if (ibv_post_send(p->b, &wr, &bad))
			return IBV_WC_GENERAL_ERR;
	}
	if (wait_wc(p->qb, &wc, 1) != 1)
		return IBV_WC_GENERAL_ERR;
	CHECK(wc.status != IBV_WC_SUCCESS || wc.opcode == IBV_WC_BIND_MW, "bind opcode %d",
	      wc.opcode);
	return wc.status;
}

/* Read the context's async events until ev shows up.  The responder
 * raises its event after it sends the NAK, so the requester's error
 * completion can come first: wait for it, boundedly (10 s). */
static bool saw_event(struct ibv_context *c, enum ibv_event_type ev)
{
	int fl = fcntl(c->async_fd, F_GETFL);
	struct pollfd pfd = {.fd = c->async_fd, .events = POLLIN};
	struct ibv_async_event e;
	bool found = false;

	fcntl(c->async_fd, F_SETFL, fl | O_NONBLOCK);
	while (!found && poll(&pfd, 1, 10000) == 1 && !ibv_get_async_event(c, &e)) {
		found = e.event_type == ev;
		ibv_ack_async_event(&e);
	}
	fcntl(c->async_fd, F_SETFL, fl);
	return found;
}

static void test_mw(enum ibv_mw_type type)
{
	static uint8_t src[8192], dst[8192];
	unsigned int rw = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *smr, *dmr;
	struct ibv_mw *mw;
	struct pair p;
	uint32_t old;

	CHECK(!pair_open(&p, 0), "pair");
	smr = ibv_reg_mr(p.pa, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(p.pb, dst, sizeof(dst),
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
	mw = ibv_alloc_mw(p.pb, type);
	CHECK(smr && dmr && mw, "mr/mw: %s", strerror(errno));
	if (!smr || !dmr || !mw)
		return;
	old = mw->rkey;
	CHECK(mw_bind(&p, mw, dmr, (uintptr_t)dst + 1024, 4096, rw) == IBV_WC_SUCCESS, "bind");
	CHECK(mw->rkey != old, "a bind changes the rkey");
	CHECK(ibv_dereg_mr(dmr) == EBUSY, "dereg with a bound window is EBUSY");
	fill(src, sizeof(src), (unsigned int)type);
	memset(dst, 0, sizeof(dst));
	/* the MR's own rkey grants no remote write; the window does */
	CHECK(rdma(&p, IBV_WR_RDMA_WRITE, smr, src, 4096, (uintptr_t)dst + 1024, mw->rkey) ==
		  IBV_WC_SUCCESS,
	      "write through the window");
	CHECK(!memcmp(dst + 1024, src, 4096), "data written through the window");
	CHECK(dst[1023] == 0 && dst[1024 + 4096] == 0, "nothing outside the window");
	CHECK(rdma(&p, IBV_WR_RDMA_READ, smr, src + 4096, 100, (uintptr_t)dst + 2000, mw->rkey) ==
		  IBV_WC_SUCCESS,
	      "read through the window");
	/* one byte past the window */
	CHECK(rdma(&p, IBV_WR_RDMA_WRITE, smr, src, 2, (uintptr_t)dst + 1024 + 4095, mw->rkey) ==
		  IBV_WC_REM_ACCESS_ERR,
	      "write past the window's end");
	CHECK(dst[1024 + 4096] == 0, "nothing written past the window");
	CHECK(saw_event(p.cb, IBV_EVENT_QP_ACCESS_ERR),
	      "B reported IBV_EVENT_QP_ACCESS_ERR on its async fd");
	pair_close(&p);
	ibv_dealloc_mw(mw);
	CHECK(ibv_dereg_mr(dmr) == 0, "dereg after dealloc_mw");
	ibv_dereg_mr(smr);
	ctx_close(&p);
}

static void test_invalidate(bool remote)
{
	static uint8_t src[4096], dst[4096];
	struct ibv_mr *smr, *dmr;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	struct pair p;

	CHECK(!pair_open(&p, 0), "pair");
	smr = ibv_reg_mr(p.pa, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(p.pb, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	mw = ibv_alloc_mw(p.pb, IBV_MW_TYPE_2);
	CHECK(smr && dmr && mw, "mr/mw");
	if (!smr || !dmr || !mw)
		return;
	CHECK(mw_bind(&p, mw, dmr, (uintptr_t)dst, sizeof(dst), IBV_ACCESS_REMOTE_WRITE) ==
		  IBV_WC_SUCCESS,
	      "type 2 bind");
	CHECK(rdma(&p, IBV_WR_RDMA_WRITE, smr, src, 64, (uintptr_t)dst, mw->rkey) == IBV_WC_SUCCESS,
	      "write before invalidation");
	if (remote) {
		struct ibv_sge sge = {(uintptr_t)src, 16, smr->lkey};
		struct ibv_send_wr wr = {.wr_id = 5,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND_WITH_INV,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		wr.invalidate_rkey = mw->rkey;
		CHECK(!post_recv(p.b, 77, dst + 2048, 64, dmr->lkey), "post_recv");
		CHECK(!ibv_post_send(p.a, &wr, &bad), "post SEND_WITH_INV");
		CHECK(wait_wc(p.qa, &wc, 1) == 1 && wc.status == IBV_WC_SUCCESS, "send done");
		CHECK(wait_wc(p.qb, &wc, 1) == 1 && wc.status == IBV_WC_SUCCESS &&
			  (wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == mw->rkey &&
			  wc.byte_len == 16,
		      "recv with IBV_WC_WITH_INV (flags 0x%x rkey 0x%x)", wc.wc_flags,
		      wc.invalidated_rkey);
	} else {
		struct ibv_send_wr wr = {.wr_id = 6,
					 .opcode = IBV_WR_LOCAL_INV,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		wr.invalidate_rkey = mw->rkey;
		CHECK(!ibv_post_send(p.b, &wr, &bad), "post LOCAL_INV");
		CHECK(wait_wc(p.qb, &wc, 1) == 1 && wc.status == IBV_WC_SUCCESS &&
			  wc.opcode == IBV_WC_LOCAL_INV,
		      "LOCAL_INV completion");
	}
	CHECK(rdma(&p, IBV_WR_RDMA_WRITE, smr, src, 64, (uintptr_t)dst, mw->rkey) ==
		  IBV_WC_REM_ACCESS_ERR,
	      "the invalidated rkey is refused");
	pair_close(&p);
	ibv_dealloc_mw(mw);
	ibv_dereg_mr(dmr);
	ibv_dereg_mr(smr);
	ctx_close(&p);
}

static void test_atomics(void)
{
	static uint64_t target[4] __attribute__((aligned(8))), result;
	unsigned int acc =
	    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_mr *rmr, *tmr, *ro;
	struct pair p;
	uint64_t t = (uintptr_t)target;

	CHECK(!pair_open(&p, (int)acc), "pair");
	rmr = ibv_reg_mr(p.pa, &result, sizeof(result), IBV_ACCESS_LOCAL_WRITE);
	tmr = ibv_reg_mr(p.pb, target, sizeof(target), IBV_ACCESS_LOCAL_WRITE | acc);
	ro = ibv_reg_mr(p.pb, &target[2], 16, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(rmr && tmr && ro, "mrs");
	if (!rmr || !tmr || !ro)
		return;
	target[0] = 40;
	CHECK(atomic_op(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, rmr, &result, t, tmr->rkey, 2, 0) ==
		  IBV_WC_SUCCESS,
	      "fetch-and-add");
	CHECK(result == 40 && target[0] == 42, "FAA result %llu target %llu",
	      (unsigned long long)result, (unsigned long long)target[0]);
	CHECK(atomic_op(&p, IBV_WR_ATOMIC_CMP_AND_SWP, rmr, &result, t, tmr->rkey, 41, 7) ==
		  IBV_WC_SUCCESS,
	      "compare-and-swap, no match");
	CHECK(result == 42 && target[0] == 42, "CAS mismatch leaves the target");
	CHECK(atomic_op(&p, IBV_WR_ATOMIC_CMP_AND_SWP, rmr, &result, t, tmr->rkey, 42, 7) ==
		  IBV_WC_SUCCESS,
	      "compare-and-swap, match");
	CHECK(result == 42 && target[0] == 7, "CAS swapped: %llu", (unsigned long long)target[0]);
	for (int i = 0; i < 100; i++)
		atomic_op(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, rmr, &result, t + 8, tmr->rkey, 1, 0);
	CHECK(target[1] == 100, "100 fetch-and-adds: %llu", (unsigned long long)target[1]);
	CHECK(atomic_op(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, rmr, &result, (uintptr_t)&target[2],
			ro->rkey, 1, 0) == IBV_WC_REM_ACCESS_ERR,
	      "no IBV_ACCESS_REMOTE_ATOMIC on the MR");
	pair_close(&p);

	/* new QPs on the same contexts (the access error above killed the pair) */
	CHECK(!pair_connect(&p, (int)acc), "pair");
	CHECK(atomic_op(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, rmr, &result, t + 4, tmr->rkey, 1, 0) ==
		  IBV_WC_REM_INV_REQ_ERR,
	      "misaligned atomic");
	pair_close(&p);

	/* a QP without REMOTE_ATOMIC access refuses atomics */
	CHECK(!pair_connect(&p, IBV_ACCESS_REMOTE_WRITE), "pair");
	CHECK(atomic_op(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, rmr, &result, t, tmr->rkey, 1, 0) ==
		  IBV_WC_REM_ACCESS_ERR,
	      "QP without IBV_ACCESS_REMOTE_ATOMIC");
	pair_close(&p);
	ibv_dereg_mr(ro);
	ibv_dereg_mr(tmr);
	ibv_dereg_mr(rmr);
	ctx_close(&p);
}

int main(void)
{
	test_mw(IBV_MW_TYPE_1);
	test_mw(IBV_MW_TYPE_2);
	test_invalidate(false);
	test_invalidate(true);
	test_atomics();
	return finish("test_mw_atomic");
}

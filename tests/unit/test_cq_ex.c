/* Unit test for src/verbs/cq_ex.c: ibv_create_cq_ex() with timestamps, the
 * start_poll/next_poll/end_poll iterator and every reader, on completions
 * made by a loopback RC pair; ibv_query_rt_values_ex(), the device clock in
 * ibv_query_device_ex(); ibv_resize_cq() with queued completions; the error
 * cases.
 */
#include "ext_loop.h"

#define ALL_WC_FLAGS                                                                               \
	(IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |                             \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK | IBV_WC_EX_WITH_CVLAN |                    \
	 IBV_WC_EX_WITH_FLOW_TAG)

/* One completion as the readers return it. */
struct ex_wc {
	struct ibv_wc wc;
	uint64_t ts, wall;
	uint16_t cvlan;
	uint32_t flow_tag;
};

static void read_current(struct ibv_cq_ex *cq, struct ex_wc *e)
{
	memset(e, 0, sizeof(*e));
	e->wc.wr_id = cq->wr_id;
	e->wc.status = cq->status;
	e->wc.opcode = ibv_wc_read_opcode(cq);
	e->wc.vendor_err = ibv_wc_read_vendor_err(cq);
	e->wc.byte_len = ibv_wc_read_byte_len(cq);
	e->wc.imm_data = ibv_wc_read_imm_data(cq);
	e->wc.qp_num = ibv_wc_read_qp_num(cq);
	e->wc.src_qp = ibv_wc_read_src_qp(cq);
	e->wc.wc_flags = ibv_wc_read_wc_flags(cq);
	e->wc.slid = (uint16_t)ibv_wc_read_slid(cq);
	e->wc.sl = ibv_wc_read_sl(cq);
	e->wc.dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
	e->ts = ibv_wc_read_completion_ts(cq);
	e->wall = ibv_wc_read_completion_wallclock_ns(cq);
	e->cvlan = ibv_wc_read_cvlan(cq);
	e->flow_tag = ibv_wc_read_flow_tag(cq);
}

/* Iterate until n completions were read or WAIT_MS passed. */
static int iter_poll(struct ibv_cq_ex *cq, struct ex_wc *out, int n)
{
	uint64_t end = ms_now() + WAIT_MS;
	struct ibv_poll_cq_attr attr = {0};
	int got = 0;

	while (got < n && ms_now() < end) {
		int ret = ibv_start_poll(cq, &attr);

		if (ret == ENOENT)
			continue;
		if (ret) {
			printf("start_poll returned %d\n", ret);
			return got;
		}
		do
			read_current(cq, &out[got++]);
		while (got < n && !(ret = ibv_next_poll(cq)));
		ibv_end_poll(cq);
		if (ret && ret != ENOENT) {
			printf("next_poll returned %d\n", ret);
			return got;
		}
	}
	return got;
}

static bool same_wc(const struct ibv_wc *a, const struct ibv_wc *b)
{
	return a->status == b->status && a->opcode == b->opcode && a->vendor_err == b->vendor_err &&
	       a->byte_len == b->byte_len && a->imm_data == b->imm_data && a->qp_num == b->qp_num &&
	       a->src_qp == b->src_qp && a->wc_flags == b->wc_flags && a->slid == b->slid &&
	       a->sl == b->sl && a->dlid_path_bits == b->dlid_path_bits;
}

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t *buf;
	struct ibv_mr *mr;
};

#define BUF 65536

static void side_open(struct side *s)
{
	s->ctx = open_lo();
	s->pd = ibv_alloc_pd(s->ctx);
	s->buf = calloc(1, BUF);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF, FULL_ACCESS);
	if (!s->pd || !s->buf || !s->mr) {
		printf("side setup failed\n");
		exit(1);
	}
}

static void side_close(struct side *s)
{
	ibv_dereg_mr(s->mr);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
	free(s->buf);
}

static int post_send_op(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *addr,
			uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.imm_data = htobe32(imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* The same traffic twice: once polled with ibv_poll_cq, once with the
 * iterator; the readers must return exactly what ibv_poll_cq did. */
static void traffic(struct side *a, struct side *b, struct ibv_qp *qa, struct ibv_qp *qb,
		    struct ibv_cq_ex *cqa, struct ibv_cq_ex *cqb, bool iterate, struct ex_wc *sa,
		    struct ex_wc *rb)
{
	uint8_t *la = a->buf, *lb = b->buf;
	uint64_t rbase = (uintptr_t)lb;
	int n;

	for (int i = 0; i < 3; i++)
		CHECK(!post_recv(qb, 100 + i, lb + 4096 * i, 4096, b->mr->lkey), "post_recv");
	fill(la, 8192, 1);
	CHECK(!post_send_op(qa, IBV_WR_SEND, 1, la, 100, a->mr->lkey, 0, 0, 0), "SEND");
	CHECK(!post_send_op(qa, IBV_WR_SEND_WITH_IMM, 2, la + 100, 200, a->mr->lkey, 0, 0,
			    0x12345678),
	      "SEND_WITH_IMM");
	CHECK(!post_send_op(qa, IBV_WR_RDMA_WRITE_WITH_IMM, 3, la + 300, 300, a->mr->lkey,
			    rbase + 20000, b->mr->rkey, 0xabcdef01),
	      "WRITE_WITH_IMM");
	CHECK(!post_send_op(qa, IBV_WR_RDMA_WRITE, 4, la + 600, 400, a->mr->lkey, rbase + 30000,
			    b->mr->rkey, 0),
	      "WRITE");
	CHECK(!post_send_op(qa, IBV_WR_RDMA_READ, 5, la + 5000, 500, a->mr->lkey, rbase + 30000,
			    b->mr->rkey, 0),
	      "READ");
	if (iterate) {
		n = iter_poll(cqa, sa, 5);
		CHECK(n == 5, "requester completions by iterator: %d", n);
		n = iter_poll(cqb, rb, 3);
		CHECK(n == 3, "responder completions by iterator: %d", n);
	} else {
		struct ibv_wc wc[5];

		n = wait_wc(ibv_cq_ex_to_cq(cqa), wc, 5);
		CHECK(n == 5, "requester completions by poll_cq: %d", n);
		for (int i = 0; i < n; i++)
			sa[i].wc = wc[i];
		n = wait_wc(ibv_cq_ex_to_cq(cqb), wc, 3);
		CHECK(n == 3, "responder completions by poll_cq: %d", n);
		for (int i = 0; i < n; i++)
			rb[i].wc = wc[i];
	}
	CHECK(!memcmp(lb, la, 100), "SEND data");
	CHECK(!memcmp(lb + 4096, la + 100, 200), "SEND_WITH_IMM data");
	CHECK(!memcmp(lb + 20000, la + 300, 300), "WRITE_WITH_IMM data");
	CHECK(!memcmp(lb + 30000, la + 600, 400), "WRITE data");
	CHECK(!memcmp(la + 5000, lb + 30000, 500), "READ data");
	memset(lb, 0, BUF);
	memset(la + 5000, 0, 500);
}

static void test_iterator(void)
{
	struct side a, b;
	struct ibv_cq_init_attr_ex ca = {.cqe = 64, .wc_flags = ALL_WC_FLAGS};
	struct ibv_cq_ex *cqa, *cqb;
	struct ibv_qp *qa, *qb;
	struct ex_wc ps[5], pr[3], is[5], ir[3];
	struct ibv_values_ex rt = {.comp_mask = IBV_VALUES_MASK_RAW_CLOCK};
	struct ibv_device_attr_ex dx;
	uint64_t t0, t1, w0, w1;
	struct ibv_poll_cq_attr pattr = {0};

	side_open(&a);
	side_open(&b);
	cqa = ibv_create_cq_ex(a.ctx, &ca);
	cqb = ibv_create_cq_ex(b.ctx, &ca);
	CHECK(cqa && cqb, "create_cq_ex: errno %d", errno);
	if (!cqa || !cqb)
		exit(1);
	CHECK(ibv_cq_ex_to_cq(cqa)->cqe >= 64, "cqe %d", ibv_cq_ex_to_cq(cqa)->cqe);
	qa = make_qp(a.pd, ibv_cq_ex_to_cq(cqa), ibv_cq_ex_to_cq(cqa), 0, 0);
	qb = make_qp(b.pd, ibv_cq_ex_to_cq(cqb), ibv_cq_ex_to_cq(cqb), 0, 0);
	CHECK(qa && qb && !connect_pair(qa, qb), "RC pair");

	/* an empty CQ: ENOENT, and no end_poll */
	CHECK(ibv_start_poll(cqa, &pattr) == ENOENT, "start_poll on an empty CQ");
	pattr.comp_mask = 1;
	CHECK(ibv_start_poll(cqa, &pattr) == EINVAL, "start_poll with comp_mask");

	/* the clock */
	CHECK(!ibv_query_device_ex(a.ctx, NULL, &dx), "query_device_ex");
	CHECK(dx.hca_core_clock == 1000000, "hca_core_clock %llu kHz",
	      (unsigned long long)dx.hca_core_clock);
	CHECK(dx.completion_timestamp_mask == UINT64_MAX, "completion_timestamp_mask 0x%llx",
	      (unsigned long long)dx.completion_timestamp_mask);
	CHECK(!ibv_query_rt_values_ex(a.ctx, &rt), "query_rt_values_ex");
	CHECK(rt.comp_mask == IBV_VALUES_MASK_RAW_CLOCK, "rt comp_mask 0x%x", rt.comp_mask);
	t0 = (uint64_t)rt.raw_clock.tv_sec * 1000000000ull + (uint64_t)rt.raw_clock.tv_nsec;
	CHECK(t0 <= ns_of(CLOCK_MONOTONIC) && t0 + 1000000000ull > ns_of(CLOCK_MONOTONIC),
	      "raw clock is CLOCK_MONOTONIC ns");
	rt.comp_mask = IBV_VALUES_MASK_RAW_CLOCK | IBV_VALUES_MASK_RESERVED;
	CHECK(!ibv_query_rt_values_ex(a.ctx, &rt) && rt.comp_mask == IBV_VALUES_MASK_RAW_CLOCK,
	      "rt_values answers only what it knows: 0x%x", rt.comp_mask);
	rt.comp_mask = 0;
	CHECK(!ibv_query_rt_values_ex(a.ctx, &rt) && rt.comp_mask == 0, "rt_values: nothing asked");

	/* the reference run, then the iterator run */
	traffic(&a, &b, qa, qb, cqa, cqb, false, ps, pr);
	t0 = ns_of(CLOCK_MONOTONIC);
	w0 = ns_of(CLOCK_REALTIME);
	traffic(&a, &b, qa, qb, cqa, cqb, true, is, ir);
	t1 = ns_of(CLOCK_MONOTONIC);
	w1 = ns_of(CLOCK_REALTIME);

	for (int i = 0; i < 5; i++) {
		CHECK(is[i].wc.wr_id == (uint64_t)i + 1, "send wr_id %llu at %d",
		      (unsigned long long)is[i].wc.wr_id, i);
		CHECK(same_wc(&is[i].wc, &ps[i].wc),
		      "send completion %d: readers differ from "
		      "ibv_poll_cq (opcode %d/%d len %u/%u)",
		      i, is[i].wc.opcode, ps[i].wc.opcode, is[i].wc.byte_len, ps[i].wc.byte_len);
		CHECK(is[i].wc.status == IBV_WC_SUCCESS, "status %d", is[i].wc.status);
		CHECK(is[i].wc.qp_num == qa->qp_num, "qp_num 0x%x", is[i].wc.qp_num);
	}
	CHECK(is[0].wc.opcode == IBV_WC_SEND && is[1].wc.opcode == IBV_WC_SEND &&
		  is[2].wc.opcode == IBV_WC_RDMA_WRITE && is[3].wc.opcode == IBV_WC_RDMA_WRITE &&
		  is[4].wc.opcode == IBV_WC_RDMA_READ,
	      "requester opcodes");
	CHECK(is[4].wc.byte_len == 500, "READ byte_len %u", is[4].wc.byte_len);
	for (int i = 0; i < 3; i++) {
		CHECK(ir[i].wc.wr_id == 100 + (uint64_t)i, "recv wr_id %llu",
		      (unsigned long long)ir[i].wc.wr_id);
		CHECK(same_wc(&ir[i].wc, &pr[i].wc), "recv completion %d: readers differ", i);
		CHECK(ir[i].wc.qp_num == qb->qp_num, "recv qp_num");
	}
	CHECK(ir[0].wc.opcode == IBV_WC_RECV && ir[0].wc.byte_len == 100 &&
		  !(ir[0].wc.wc_flags & IBV_WC_WITH_IMM),
	      "RECV");
	CHECK(ir[1].wc.opcode == IBV_WC_RECV && ir[1].wc.byte_len == 200 &&
		  (ir[1].wc.wc_flags & IBV_WC_WITH_IMM) && ir[1].wc.imm_data == htobe32(0x12345678),
	      "RECV with imm: flags 0x%x imm 0x%x", ir[1].wc.wc_flags, be32toh(ir[1].wc.imm_data));
	CHECK(ir[2].wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
		  (ir[2].wc.wc_flags & IBV_WC_WITH_IMM) &&
		  ir[2].wc.imm_data == htobe32(0xabcdef01) &&
		  ibv_wc_read_invalidated_rkey(cqb) == htobe32(0xabcdef01),
	      "RECV_RDMA_WITH_IMM: opcode %d", ir[2].wc.opcode);

	/* timestamps: inside the run, in completion order per CQ */
	for (int i = 0; i < 5; i++) {
		CHECK(is[i].ts >= t0 && is[i].ts <= t1, "send ts %d outside the run", i);
		CHECK(is[i].wall >= w0 && is[i].wall <= w1, "send wallclock %d outside the run", i);
		CHECK(!i || is[i].ts >= is[i - 1].ts, "send timestamps decrease at %d", i);
		CHECK(is[i].cvlan == 0 && is[i].flow_tag == 0, "cvlan/flow_tag");
	}
	for (int i = 0; i < 3; i++) {
		CHECK(ir[i].ts >= t0 && ir[i].ts <= t1, "recv ts %d outside the run", i);
		CHECK(!i || ir[i].ts >= ir[i - 1].ts, "recv timestamps decrease at %d", i);
	}
	CHECK(is[4].ts > is[0].ts, "the READ completed after the first SEND");

	/* a plain CQ is an ibv_cq_ex too */
	{
		struct ibv_cq *pc = ibv_create_cq(a.ctx, 8, NULL, NULL, 0);
		struct ibv_qp *q1, *q2;
		struct ex_wc e;

		q1 = make_qp(a.pd, pc, pc, 0, 0);
		q2 = make_qp(b.pd, ibv_cq_ex_to_cq(cqb), ibv_cq_ex_to_cq(cqb), 0, 0);
		CHECK(pc && q1 && q2 && !connect_pair(q1, q2), "plain CQ pair");
		CHECK(!post_send_op(q1, IBV_WR_RDMA_WRITE, 77, a.buf, 64, a.mr->lkey,
				    (uintptr_t)b.buf, b.mr->rkey, 0),
		      "write");
		CHECK(iter_poll((struct ibv_cq_ex *)pc, &e, 1) == 1, "iterator on a plain CQ");
		CHECK(e.wc.wr_id == 77 && e.wc.status == IBV_WC_SUCCESS &&
			  e.wc.opcode == IBV_WC_RDMA_WRITE && e.wc.qp_num == q1->qp_num,
		      "plain CQ completion");
		CHECK(e.ts == 0, "no timestamps asked: ts %llu", (unsigned long long)e.ts);
		ibv_destroy_qp(q1);
		ibv_destroy_qp(q2);
		CHECK(!ibv_destroy_cq(pc), "destroy plain CQ");
	}

	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(cqa)) && !ibv_destroy_cq(ibv_cq_ex_to_cq(cqb)),
	      "destroy");
	side_close(&a);
	side_close(&b);
}

/* A completion channel on an extended CQ, and SINGLE_THREADED. */
static void test_channel(void)
{
	struct side a, b;
	struct ibv_comp_channel *ch;
	struct ibv_cq_init_attr_ex ca = {.cqe = 16,
					 .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
					 .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					 .flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED};
	struct ibv_cq_ex *cqa;
	struct ibv_cq *ev_cq, *cqb;
	struct ibv_qp *qa, *qb;
	void *ev_ctx;
	struct ex_wc e;

	side_open(&a);
	side_open(&b);
	ch = ibv_create_comp_channel(a.ctx);
	ca.channel = ch;
	ca.cq_context = &ca;
	cqa = ibv_create_cq_ex(a.ctx, &ca);
	cqb = ibv_create_cq(b.ctx, 16, NULL, NULL, 0);
	CHECK(ch && cqa && cqb, "channel CQ: errno %d", errno);
	if (!cqa)
		exit(1);
	qa = make_qp(a.pd, ibv_cq_ex_to_cq(cqa), ibv_cq_ex_to_cq(cqa), 0, 0);
	qb = make_qp(b.pd, cqb, cqb, 0, 0);
	CHECK(qa && qb && !connect_pair(qa, qb), "pair");
	CHECK(!ibv_req_notify_cq(ibv_cq_ex_to_cq(cqa), 0), "req_notify");
	CHECK(!post_send_op(qa, IBV_WR_RDMA_WRITE, 9, a.buf, 32, a.mr->lkey, (uintptr_t)b.buf,
			    b.mr->rkey, 0),
	      "write");
	CHECK(!ibv_get_cq_event(ch, &ev_cq, &ev_ctx), "get_cq_event");
	CHECK(ev_cq == ibv_cq_ex_to_cq(cqa) && ev_ctx == &ca, "event for the extended CQ");
	ibv_ack_cq_events(ev_cq, 1);
	CHECK(iter_poll(cqa, &e, 1) == 1 && e.wc.wr_id == 9 && e.ts, "single-threaded iterator");
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(cqa)), "destroy");
	ibv_destroy_cq(cqb);
	CHECK(!ibv_destroy_comp_channel(ch), "destroy channel");
	side_close(&a);
	side_close(&b);
}

/* n signaled RDMA WRITEs with wr_ids first.. from qa, left queued in its CQ. */
static void queue_writes(struct side *a, struct side *b, struct ibv_qp *qa, struct ibv_cq *cq,
			 uint64_t first, int n)
{
	uint32_t before = cq_queued(cq);

	for (int i = 0; i < n; i++)
		CHECK(!post_send_op(qa, IBV_WR_RDMA_WRITE, first + (uint64_t)i, a->buf, 16,
				    a->mr->lkey, (uintptr_t)b->buf, b->mr->rkey, 0),
		      "write %d", i);
	CHECK(wait_queued(cq, before + (uint32_t)n), "%d completions queued", n);
}

static void test_resize(void)
{
	struct side a, b;
	struct ibv_cq_init_attr_ex ca = {
	    .cqe = 5, .wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};
	struct ibv_cq_ex *cqx;
	struct ibv_cq *cq, *cqb;
	struct ibv_qp *qa, *qb;
	struct ex_wc e[16];
	struct ibv_wc wc[16];
	int n;

	side_open(&a);
	side_open(&b);
	cqx = ibv_create_cq_ex(a.ctx, &ca);
	cq = ibv_cq_ex_to_cq(cqx);
	cqb = ibv_create_cq(b.ctx, 16, NULL, NULL, 0);
	qa = make_qp(a.pd, cq, cq, 0, 0);
	qb = make_qp(b.pd, cqb, cqb, 0, 0);
	CHECK(cqx && qa && qb && !connect_pair(qa, qb), "resize pair");
	if (!cqx || !qa || !qb)
		exit(1);

	CHECK(ibv_resize_cq(cq, 0) == EINVAL, "resize to 0");
	CHECK(ibv_resize_cq(cq, UROCE_MAX_CQE + 1) == EINVAL, "resize above max_cqe");
	CHECK(ibv_resize_cq(cq, -1) == EINVAL, "resize to -1");

	/* 4 queued in a 5-entry CQ: down to 3 is refused, to 4 works */
	queue_writes(&a, &b, qa, cq, 1, 4);
	CHECK(ibv_resize_cq(cq, 3) == EINVAL, "resize below the queued count");
	CHECK(cq->cqe == 5, "failed resize leaves cqe: %d", cq->cqe);
	CHECK(!ibv_resize_cq(cq, 4), "resize down to the queued count");
	CHECK(cq->cqe == 4 && cq_queued(cq) == 4, "cqe %d queued %u", cq->cqe, cq_queued(cq));
	/* take 2 (the ring head moves), queue 2 more (the tail wraps) */
	CHECK(iter_poll(cqx, e, 2) == 2 && e[0].wc.wr_id == 1 && e[1].wc.wr_id == 2,
	      "first two in order");
	queue_writes(&a, &b, qa, cq, 5, 2);
	CHECK(!ibv_resize_cq(cq, 1000), "resize up with a wrapped ring");
	CHECK(cq->cqe == 1000, "cqe %d", cq->cqe);
	queue_writes(&a, &b, qa, cq, 7, 3);
	n = iter_poll(cqx, e, 7);
	CHECK(n == 7, "7 completions after resize: %d", n);
	for (int i = 0; i < n; i++) {
		CHECK(e[i].wc.wr_id == 3 + (uint64_t)i && e[i].wc.status == IBV_WC_SUCCESS,
		      "order after resize: %d: wr_id %llu", i, (unsigned long long)e[i].wc.wr_id);
		CHECK(e[i].ts && (!i || e[i].ts >= e[i - 1].ts), "timestamps kept by resize: %d",
		      i);
	}
	/* shrink an empty CQ, and a plain CQ */
	CHECK(!ibv_resize_cq(cq, 1) && cq->cqe == 1, "shrink empty");
	queue_writes(&a, &b, qa, cq, 20, 1);
	CHECK(ibv_poll_cq(cq, 4, wc) == 1 && wc[0].wr_id == 20, "1-entry CQ works");
	CHECK(ibv_resize_cq(cqb, 2) == 0 && cqb->cqe == 2, "resize a plain CQ");

	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_destroy_cq(cq);
	ibv_destroy_cq(cqb);
	side_close(&a);
	side_close(&b);
}

static void test_errors(void)
{
	struct ibv_context *ctx = open_lo(), *ctx2 = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx2);
	struct ibv_cq_init_attr_ex ca;
	struct ibv_cq_ex *cq;
	struct ibv_modify_cq_attr mod = {.attr_mask = IBV_CQ_ATTR_MODERATE,
					 .moderate = {.cq_count = 4, .cq_period = 10}};

#define TRY_CQ(what, expect_errno, ncqe, ...)                                                      \
	do {                                                                                       \
		ca = (struct ibv_cq_init_attr_ex){.cqe = (ncqe), __VA_ARGS__};                     \
		errno = 0;                                                                         \
		cq = ibv_create_cq_ex(ctx, &ca);                                                   \
		if (expect_errno) {                                                                \
			CHECK(!cq && errno == (expect_errno), "%s: errno %d", what, errno);        \
		} else {                                                                           \
			CHECK(cq != NULL, "%s: errno %d", what, errno);                            \
		}                                                                                  \
		if (cq)                                                                            \
			ibv_destroy_cq(ibv_cq_ex_to_cq(cq));                                       \
	} while (0)

	TRY_CQ("TM_INFO", EOPNOTSUPP, 8, .wc_flags = IBV_WC_EX_WITH_TM_INFO);
	TRY_CQ("unknown wc_flags bit", EOPNOTSUPP, 8, .wc_flags = 1ull << 40);
	TRY_CQ("unknown comp_mask bit", EINVAL, 8, .comp_mask = 1u << 7);
	TRY_CQ("IGNORE_OVERRUN", EOPNOTSUPP, 8, .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
	       .flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN);
	TRY_CQ("flags without MASK_FLAGS are ignored", 0, 8, .flags = 0xffff);
	TRY_CQ("SINGLE_THREADED", 0, 8, .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
	       .flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
	/* as mlx5: parent_domain must be a parent domain (test_pdom.c makes CQs on one) */
	TRY_CQ("MASK_PD with a plain PD", EINVAL, 8, .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
	       .parent_domain = pd);
	TRY_CQ("MASK_PD of another context", EINVAL, 8, .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
	       .parent_domain = pd2);
	TRY_CQ("all supported wc_flags", 0, 8, .wc_flags = ALL_WC_FLAGS);
	TRY_CQ("cqe 0", EINVAL, 0, .comp_mask = 0);
	TRY_CQ("cqe > max_cqe", EINVAL, UROCE_MAX_CQE + 1, .comp_mask = 0);
	TRY_CQ("cqe 2^32-1", EINVAL, UINT32_MAX, .comp_mask = 0);
	TRY_CQ("cqe = max_cqe", 0, UROCE_MAX_CQE, .comp_mask = 0);
	TRY_CQ("comp_vector 1", EINVAL, 8, .comp_vector = 1);
	TRY_CQ("comp_vector 2^32-1", EINVAL, 8, .comp_vector = UINT32_MAX);
#undef TRY_CQ

	cq = ibv_create_cq_ex(ctx, &(struct ibv_cq_init_attr_ex){.cqe = 4});
	CHECK(cq && ibv_modify_cq(ibv_cq_ex_to_cq(cq), &mod) == EOPNOTSUPP,
	      "modify_cq (moderation) is not supported");
	CHECK(ibv_resize_cq(NULL, 4) == EINVAL, "resize NULL");
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	ibv_dealloc_pd(pd);
	ibv_dealloc_pd(pd2);
	ibv_close_device(ctx);
	ibv_close_device(ctx2);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_iterator();
	test_channel();
	test_resize();
	test_errors();
	return finish("test_cq_ex");
}

/* Unit test for src/verbs/qp_ex.c and ibv_rereg_mr() (src/verbs/pd_mr.c):
 * the ibv_wr_* API (SEND, SEND_WITH_IMM, RDMA WRITE (with immediate), RDMA
 * READ; SGE, SGE list, inline data and inline lists; batches; wr_abort) over
 * a loopback RC pair with every byte checked, ibv_create_qp_ex() attribute
 * validation, all-or-nothing posting, and every ibv_rereg_mr() flag with the
 * data checked through RDMA WRITEs after the re-registration.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "ext_loop.h"

#define RC_OPS                                                                                     \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |          \
	 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ)

#define ATOMIC_OPS (IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

#define BUF (1u << 20)

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	uint8_t *buf;
	struct ibv_mr *mr;
};

static struct side A, B; /* A: requester (ibv_wr_*), B: responder */

static void side_open(struct side *s)
{
	s->ctx = open_lo();
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	s->buf = aligned_alloc(4096, BUF);
	if (s->buf)
		memset(s->buf, 0, BUF);
	s->mr = s->pd && s->buf ? ibv_reg_mr(s->pd, s->buf, BUF, FULL_ACCESS) : NULL;
	if (!s->pd || !s->cq || !s->mr) {
		printf("side setup failed\n");
		exit(1);
	}
}

static void side_close(struct side *s)
{
	ibv_dereg_mr(s->mr);
	ibv_destroy_cq(s->cq);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
	free(s->buf);
}

/* A connected pair: qa (extended, ops) on A, qb (classic) on B. */
static bool pair(struct ibv_qp **qa, struct ibv_qp **qb, uint64_t ops)
{
	*qa = make_qp(A.pd, A.cq, A.cq, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, ops);
	*qb = make_qp(B.pd, B.cq, B.cq, 0, 0);
	if (!*qa || !*qb || connect_pair(*qa, *qb)) {
		printf("pair setup failed: errno %d\n", errno);
		return false;
	}
	return true;
}

static void unpair(struct ibv_qp *qa, struct ibv_qp *qb)
{
	struct ibv_wc wc[16];

	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	while (ibv_poll_cq(A.cq, 16, wc) > 0 || ibv_poll_cq(B.cq, 16, wc) > 0)
		;
}

/* One signaled completion expected on cq with this wr_id and status. */
static bool expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st,
		      enum ibv_wc_opcode op, struct ibv_wc *out)
{
	struct ibv_wc wc;

	if (wait_wc(cq, &wc, 1) != 1) {
		printf("  no completion for wr_id %llu\n", (unsigned long long)wr_id);
		return false;
	}
	if (out)
		*out = wc;
	if (wc.wr_id != wr_id || wc.status != st || (st == IBV_WC_SUCCESS && wc.opcode != op)) {
		printf("  completion wr_id %llu status %s opcode %d, expected %llu %s %d\n",
		       (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode,
		       (unsigned long long)wr_id, ibv_wc_status_str(st), op);
		return false;
	}
	return true;
}

/* No completion shows up on cq for a while. */
static bool no_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	uint64_t end = ms_now() + 200;

	while (ms_now() < end)
		if (ibv_poll_cq(cq, 1, &wc) > 0) {
			printf("  unexpected completion wr_id %llu\n",
			       (unsigned long long)wc.wr_id);
			return false;
		}
	return true;
}

static void test_ops(void)
{
	struct ibv_qp *qa, *qb, *qclassic;
	struct ibv_qp_ex *x;
	uint8_t *la = A.buf, *lb = B.buf;
	uint64_t rb = (uintptr_t)lb;
	uint32_t lk = A.mr->lkey, rk = B.mr->rkey;
	struct ibv_wc wc;
	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr qinit;

	if (!pair(&qa, &qb, RC_OPS | ATOMIC_OPS))
		exit(1);
	x = ibv_qp_to_qp_ex(qa);
	CHECK(x && &x->qp_base == qa, "qp_to_qp_ex");
	CHECK(!ibv_qp_to_qp_ex(qb), "a classic QP has no qp_ex");
	qclassic = make_qp(A.pd, A.cq, A.cq, 0, 0);
	CHECK(qclassic && !ibv_qp_to_qp_ex(qclassic), "create_qp_ex without SEND_OPS_FLAGS");
	ibv_destroy_qp(qclassic);
	CHECK(!ibv_query_qp(qa, &qattr, IBV_QP_CAP, &qinit) && qinit.cap.max_inline_data == 256,
	      "query_qp of an extended QP");
	if (!x)
		exit(1);
	fill(la, BUF, 3);

	/* SEND with one SGE */
	CHECK(!post_recv(qb, 1000, lb, 8192, B.mr->lkey), "recv");
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, lk, (uintptr_t)la, 3000);
	CHECK(!ibv_wr_complete(x), "SEND complete");
	CHECK(expect_wc(A.cq, 1, IBV_WC_SUCCESS, IBV_WC_SEND, NULL), "SEND completion");
	CHECK(expect_wc(B.cq, 1000, IBV_WC_SUCCESS, IBV_WC_RECV, &wc) && wc.byte_len == 3000,
	      "SEND received");
	CHECK(!memcmp(lb, la, 3000), "SEND data");

	/* SEND_WITH_IMM with an SGE list, solicited */
	{
		struct ibv_sge sl[3] = {{(uintptr_t)la + 10, 100, lk},
					{(uintptr_t)la + 5000, 1, lk},
					{(uintptr_t)la + 9000, 2500, lk}};

		CHECK(!post_recv(qb, 1001, lb + 100000, 8192, B.mr->lkey), "recv");
		ibv_wr_start(x);
		x->wr_id = 2;
		x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
		ibv_wr_send_imm(x, htobe32(0xfeedbeef));
		ibv_wr_set_sge_list(x, 3, sl);
		CHECK(!ibv_wr_complete(x), "SEND_IMM complete");
		CHECK(expect_wc(A.cq, 2, IBV_WC_SUCCESS, IBV_WC_SEND, NULL), "SEND_IMM completion");
		CHECK(expect_wc(B.cq, 1001, IBV_WC_SUCCESS, IBV_WC_RECV, &wc) &&
			  wc.byte_len == 2601 && (wc.wc_flags & IBV_WC_WITH_IMM) &&
			  wc.imm_data == htobe32(0xfeedbeef),
		      "SEND_IMM received");
		CHECK(!memcmp(lb + 100000, la + 10, 100) && lb[100100] == la[5000] &&
			  !memcmp(lb + 100101, la + 9000, 2500),
		      "SEND_IMM gathered data");
	}

	/* RDMA WRITE inline: the data is copied when the setter runs */
	{
		uint8_t tmp[200];

		fill(tmp, sizeof(tmp), 9);
		ibv_wr_start(x);
		x->wr_id = 3;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(x, rk, rb + 200000);
		ibv_wr_set_inline_data(x, tmp, sizeof(tmp));
		memset(tmp, 0xee, sizeof(tmp)); /* reused before wr_complete */
		CHECK(!ibv_wr_complete(x), "inline WRITE complete");
		CHECK(expect_wc(A.cq, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL),
		      "inline WRITE completion");
		fill(tmp, sizeof(tmp), 9);
		CHECK(!memcmp(lb + 200000, tmp, sizeof(tmp)), "inline WRITE data");
	}

	/* RDMA WRITE with an inline list, and a lkey that is not checked */
	{
		char p1[] = "uroce ", p2[] = "inline ", p3[] = "list";
		struct ibv_data_buf bl[3] = {{p1, 6}, {p2, 7}, {p3, 4}};

		ibv_wr_start(x);
		x->wr_id = 4;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(x, rk, rb + 210000);
		ibv_wr_set_inline_data_list(x, 3, bl);
		CHECK(!ibv_wr_complete(x), "inline list WRITE complete");
		CHECK(expect_wc(A.cq, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL),
		      "inline list completion");
		CHECK(!memcmp(lb + 210000, "uroce inline list", 17), "inline list data");
	}

	/* a zero-length inline SEND */
	CHECK(!post_recv(qb, 1004, lb, 16, B.mr->lkey), "recv");
	ibv_wr_start(x);
	x->wr_id = 30;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, NULL, 0);
	CHECK(!ibv_wr_complete(x), "empty inline SEND complete");
	CHECK(expect_wc(A.cq, 30, IBV_WC_SUCCESS, IBV_WC_SEND, NULL), "empty SEND completion");
	CHECK(expect_wc(B.cq, 1004, IBV_WC_SUCCESS, IBV_WC_RECV, &wc) && wc.byte_len == 0,
	      "empty SEND received: %u bytes", wc.byte_len);

	/* RDMA WRITE_WITH_IMM, multi-packet */
	CHECK(!post_recv(qb, 1002, lb, 16, B.mr->lkey), "recv");
	ibv_wr_start(x);
	x->wr_id = 5;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write_imm(x, rk, rb + 300000, htobe32(77));
	ibv_wr_set_sge(x, lk, (uintptr_t)la + 1, 70000);
	CHECK(!ibv_wr_complete(x), "WRITE_IMM complete");
	CHECK(expect_wc(A.cq, 5, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL), "WRITE_IMM completion");
	CHECK(expect_wc(B.cq, 1002, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, &wc) &&
		  wc.imm_data == htobe32(77) && wc.byte_len == 70000,
	      "WRITE_IMM received: len %u", wc.byte_len);
	CHECK(!memcmp(lb + 300000, la + 1, 70000), "WRITE_IMM data");

	/* RDMA READ into an SGE list */
	{
		struct ibv_sge sl[2] = {{(uintptr_t)la + 600000, 1000, lk},
					{(uintptr_t)la + 700000, 9000, lk}};

		fill(lb + 400000, 10000, 11);
		ibv_wr_start(x);
		x->wr_id = 6;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_read(x, rk, rb + 400000);
		ibv_wr_set_sge_list(x, 2, sl);
		CHECK(!ibv_wr_complete(x), "READ complete");
		CHECK(expect_wc(A.cq, 6, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, &wc) &&
			  wc.byte_len == 10000,
		      "READ completion");
		CHECK(!memcmp(la + 600000, lb + 400000, 1000) &&
			  !memcmp(la + 700000, lb + 401000, 9000),
		      "READ data");
	}

	/* atomics: FETCH_AND_ADD then CMP_AND_SWP in one batch */
	{
		struct ibv_mr *amr = ibv_reg_mr(B.pd, lb + 950000, 64,
						IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
		uint64_t *target = (uint64_t *)(lb + 950000), *res = (uint64_t *)(la + 950000);

		CHECK(amr != NULL, "atomic MR");
		*target = 40;
		res[0] = res[1] = 0;
		ibv_wr_start(x);
		x->wr_id = 7;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_atomic_fetch_add(x, amr ? amr->rkey : 0, (uintptr_t)target, 2);
		ibv_wr_set_sge(x, lk, (uintptr_t)res, 8);
		x->wr_id = 8;
		ibv_wr_atomic_cmp_swp(x, amr ? amr->rkey : 0, (uintptr_t)target, 42, 1000);
		ibv_wr_set_sge(x, lk, (uintptr_t)(res + 1), 8);
		CHECK(!ibv_wr_complete(x), "atomics complete");
		CHECK(expect_wc(A.cq, 7, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, NULL), "FETCH_ADD");
		CHECK(expect_wc(A.cq, 8, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, NULL), "COMP_SWAP");
		CHECK(res[0] == 40 && res[1] == 42 && *target == 1000,
		      "atomic results %llu %llu target %llu", (unsigned long long)res[0],
		      (unsigned long long)res[1], (unsigned long long)*target);
		if (amr)
			ibv_dereg_mr(amr);
	}

	/* a batch: three unsignaled WRITEs, then a signaled SEND; one complete */
	CHECK(!post_recv(qb, 1003, lb, 64, B.mr->lkey), "recv");
	fill(la, 65536, 21);
	ibv_wr_start(x);
	for (int i = 0; i < 3; i++) {
		x->wr_id = 10 + (uint64_t)i;
		x->wr_flags = 0;
		ibv_wr_rdma_write(x, rk, rb + 500000 + 10000 * (uint64_t)i);
		ibv_wr_set_sge(x, lk, (uintptr_t)la + 1000 * (uint64_t)i, 5000);
	}
	x->wr_id = 13;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE; /* INLINE: ignored, set_sge decides */
	ibv_wr_send(x);
	ibv_wr_set_sge(x, lk, (uintptr_t)la + 40000, 64);
	CHECK(!ibv_wr_complete(x), "batch complete");
	CHECK(expect_wc(A.cq, 13, IBV_WC_SUCCESS, IBV_WC_SEND, NULL), "batch: only the last "
								      "signals");
	CHECK(expect_wc(B.cq, 1003, IBV_WC_SUCCESS, IBV_WC_RECV, NULL), "batch SEND received");
	for (int i = 0; i < 3; i++)
		CHECK(!memcmp(lb + 500000 + 10000 * i, la + 1000 * i, 5000), "batch WRITE %d", i);
	CHECK(!memcmp(lb, la + 40000, 64), "batch SEND data");

	/* wr_abort: nothing happens, and the QP goes on */
	memset(lb + 800000, 0x5a, 100);
	ibv_wr_start(x);
	x->wr_id = 20;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, rk, rb + 800000);
	ibv_wr_set_sge(x, lk, (uintptr_t)la, 100);
	ibv_wr_abort(x);
	CHECK(no_wc(A.cq), "aborted WR completes nothing");
	CHECK(lb[800000] == 0x5a && lb[800099] == 0x5a, "aborted WRITE wrote nothing");
	ibv_wr_start(x);
	CHECK(!ibv_wr_complete(x), "an empty batch");
	/* a second wr_start on the same thread discards the open batch */
	ibv_wr_start(x);
	x->wr_id = 22;
	ibv_wr_rdma_write(x, rk, rb + 800000);
	ibv_wr_set_sge(x, lk, (uintptr_t)la + 7, 100);
	ibv_wr_start(x);
	CHECK(!ibv_wr_complete(x) && no_wc(A.cq) && lb[800000] == 0x5a,
	      "nested wr_start: the first batch is gone");
	CHECK(ibv_wr_complete(x) == EINVAL, "wr_complete without wr_start");
	ibv_wr_start(x);
	x->wr_id = 21;
	ibv_wr_rdma_write(x, rk, rb + 800000);
	ibv_wr_set_sge(x, lk, (uintptr_t)la, 100);
	CHECK(!ibv_wr_complete(x), "after abort");
	CHECK(expect_wc(A.cq, 21, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, NULL) &&
		  !memcmp(lb + 800000, la, 100),
	      "WRITE after abort");

	unpair(qa, qb);
}

/* wr_complete must fail with err and post nothing; the QP still works. */
static void expect_refused(struct ibv_qp_ex *x, int err, const char *what)
{
	int ret = ibv_wr_complete(x);

	CHECK(ret == err, "%s: wr_complete returned %d, expected %d", what, ret, err);
	CHECK(no_wc(A.cq), "%s: nothing was posted", what);
}

static void test_errors(void)
{
	struct ibv_qp *qa, *qb;
	struct ibv_qp_ex *x;
	uint8_t *la = A.buf, *lb = B.buf;
	uint64_t rb = (uintptr_t)lb;
	uint32_t lk = A.mr->lkey, rk = B.mr->rkey;
	uint8_t big[512] = {0};

	/* a QP with SEND only */
	if (!pair(&qa, &qb, IBV_QP_EX_WITH_SEND))
		exit(1);
	x = ibv_qp_to_qp_ex(qa);
	memset(lb + 900000, 0x33, 4096);

	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, rk, rb + 900000);
	ibv_wr_set_sge(x, lk, (uintptr_t)la, 16);
	expect_refused(x, EINVAL, "WRITE on a SEND-only QP");
	CHECK(lb[900000] == 0x33, "refused WRITE wrote nothing");

	/* all or nothing: a good WR, then a bad one */
	ibv_wr_start(x);
	x->wr_id = 2;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, lk, (uintptr_t)la, 16);
	ibv_wr_send(x);
	{
		struct ibv_sge sl[5];

		for (int i = 0; i < 5; i++)
			sl[i] = (struct ibv_sge){(uintptr_t)la + 100 * (uint64_t)i, 10, lk};
		ibv_wr_set_sge_list(x, 5, sl); /* max_send_sge is 4 */
	}
	expect_refused(x, EINVAL, "second WR has too many SGEs");

	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, big, sizeof(big)); /* max_inline_data is 256 */
	expect_refused(x, EINVAL, "inline data above max_inline_data");

	ibv_wr_start(x);
	ibv_wr_set_sge(x, lk, (uintptr_t)la, 16);
	expect_refused(x, EINVAL, "a setter before any builder");

	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_ud_addr(x, NULL, 1, 1);
	expect_refused(x, EINVAL, "UD address on an RC QP");

	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_xrc_srqn(x, 5);
	expect_refused(x, EINVAL, "XRC SRQN on an RC QP");

	ibv_wr_start(x);
	ibv_wr_atomic_fetch_add(x, rk, rb, 1);
	ibv_wr_set_sge(x, lk, (uintptr_t)la, 8);
	expect_refused(x, EINVAL, "atomic not in send_ops_flags");

	ibv_wr_start(x);
	ibv_wr_local_inv(x, 0x1234);
	expect_refused(x, EINVAL, "LOCAL_INV not in send_ops_flags");
	ibv_wr_start(x);
	ibv_wr_send_inv(x, 0x1234);
	ibv_wr_set_sge(x, lk, (uintptr_t)la, 16);
	expect_refused(x, EINVAL, "SEND_WITH_INV not in send_ops_flags");
	ibv_wr_start(x);
	ibv_wr_bind_mw(x, NULL, 0x1234, NULL);
	expect_refused(x, EINVAL, "BIND_MW not in send_ops_flags");

	/* an operation no RC QP carries: refused as ibv_post_send refuses it */
	{
		struct ibv_send_wr wr = {.wr_id = 99, .opcode = IBV_WR_TSO}, *bad;
		int classic = ibv_post_send(qa, &wr, &bad);

		CHECK(classic, "ibv_post_send of a TSO WR on RC");
		ibv_wr_start(x);
		ibv_wr_send_tso(x, big, 40, 1000);
		ibv_wr_set_sge(x, lk, (uintptr_t)la, 16);
		expect_refused(x, classic, "TSO as ibv_post_send");
	}

	/* the QP is still fine */
	CHECK(!post_recv(qb, 500, lb, 512, B.mr->lkey), "recv");
	ibv_wr_start(x);
	x->wr_id = 3;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, big, 256);
	CHECK(!ibv_wr_complete(x), "good SEND after refusals");
	CHECK(expect_wc(A.cq, 3, IBV_WC_SUCCESS, IBV_WC_SEND, NULL), "good SEND completion");
	CHECK(expect_wc(B.cq, 500, IBV_WC_SUCCESS, IBV_WC_RECV, NULL), "good SEND received");
	unpair(qa, qb);

	/* a QP that is not in RTS */
	qa = make_qp(A.pd, A.cq, A.cq, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, IBV_QP_EX_WITH_SEND);
	x = qa ? ibv_qp_to_qp_ex(qa) : NULL;
	CHECK(x != NULL, "QP in RESET");
	if (x) {
		ibv_wr_start(x);
		ibv_wr_send(x);
		ibv_wr_set_sge(x, lk, (uintptr_t)la, 16);
		expect_refused(x, EINVAL, "posting in RESET");
	}
	ibv_destroy_qp(qa);

	/* create_qp_ex attribute rules */
#define TRY_QP(what, expect_errno, mask, ops, flags)                                               \
	do {                                                                                       \
		struct ibv_qp_init_attr_ex ia = {                                                  \
		    .send_cq = A.cq,                                                               \
		    .recv_cq = A.cq,                                                               \
		    .cap = {.max_send_wr = 4,                                                      \
			    .max_recv_wr = 4,                                                      \
			    .max_send_sge = 1,                                                     \
			    .max_recv_sge = 1},                                                    \
		    .qp_type = IBV_QPT_RC,                                                         \
		    .comp_mask = IBV_QP_INIT_ATTR_PD | (mask),                                     \
		    .pd = A.pd,                                                                    \
		    .send_ops_flags = (ops),                                                       \
		    .create_flags = (flags),                                                       \
		};                                                                                 \
		struct ibv_qp *q;                                                                  \
                                                                                                   \
		errno = 0;                                                                         \
		q = ibv_create_qp_ex(A.ctx, &ia);                                                  \
		if (expect_errno)                                                                  \
			CHECK(!q && errno == (expect_errno), "%s: errno %d", what, errno);         \
		else                                                                               \
			CHECK(q != NULL, "%s: errno %d", what, errno);                             \
		if (q)                                                                             \
			ibv_destroy_qp(q);                                                         \
	} while (0)

	TRY_QP("all RC ops", 0, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, RC_OPS, 0);
	TRY_QP("no ops", 0, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, 0, 0);
	TRY_QP("atomics", 0, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
	       IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, 0);
	TRY_QP("memory window ops", 0, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
	       IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV, 0);
	TRY_QP("TSO op", EOPNOTSUPP, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, IBV_QP_EX_WITH_TSO, 0);
	TRY_QP("ATOMIC_WRITE op", EOPNOTSUPP, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
	       IBV_QP_EX_WITH_ATOMIC_WRITE, 0);
	TRY_QP("unknown op bit", EOPNOTSUPP, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, 1ull << 30, 0);
	TRY_QP("CREATE_FLAGS 0", 0, IBV_QP_INIT_ATTR_CREATE_FLAGS, 0, 0);
	TRY_QP("CREATE_FLAGS scatter FCS", EOPNOTSUPP, IBV_QP_INIT_ATTR_CREATE_FLAGS, 0,
	       IBV_QP_CREATE_SCATTER_FCS);
	TRY_QP("XRCD on an RC QP", EINVAL, IBV_QP_INIT_ATTR_XRCD, 0, 0);
	TRY_QP("RX_HASH", EOPNOTSUPP, IBV_QP_INIT_ATTR_RX_HASH, 0, 0);
	TRY_QP("IND_TABLE", EOPNOTSUPP, IBV_QP_INIT_ATTR_IND_TABLE, 0, 0);
	TRY_QP("MAX_TSO_HEADER", EOPNOTSUPP, IBV_QP_INIT_ATTR_MAX_TSO_HEADER, 0, 0);
	TRY_QP("unknown comp_mask bit", EINVAL, 1u << 12, 0, 0);
#undef TRY_QP
	{
		struct ibv_qp_init_attr_ex ia = {
		    .send_cq = A.cq,
		    .recv_cq = A.cq,
		    .cap = {.max_send_wr = 4,
			    .max_recv_wr = 4,
			    .max_send_sge = 1,
			    .max_recv_sge = 1},
		    .qp_type = IBV_QPT_UD,
		    .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		    .pd = A.pd,
		    .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE,
		};
		struct ibv_qp *q;

		errno = 0;
		q = ibv_create_qp_ex(A.ctx, &ia);
		CHECK(!q && errno == EOPNOTSUPP, "RDMA WRITE op on a UD QP: errno %d", errno);
		if (q)
			ibv_destroy_qp(q);
	}
	CHECK(!ibv_qp_to_qp_ex(NULL), "qp_to_qp_ex(NULL)");
}

/* ---- ibv_rereg_mr ---- */

/* One RDMA WRITE of len bytes from A's buffer to raddr/rkey; the status. */
static enum ibv_wc_status write_status(struct ibv_qp *qa, uint64_t wr_id, uint64_t raddr,
				       uint32_t rkey, uint32_t len)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qa);
	struct ibv_wc wc;

	ibv_wr_start(x);
	x->wr_id = wr_id;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, rkey, raddr);
	ibv_wr_set_sge(x, A.mr->lkey, (uintptr_t)A.buf, len);
	if (ibv_wr_complete(x))
		return IBV_WC_GENERAL_ERR;
	if (wait_wc(A.cq, &wc, 1) != 1 || wc.wr_id != wr_id)
		return IBV_WC_GENERAL_ERR;
	return wc.status;
}

static void test_rereg(void)
{
	const size_t len = 65536;
	uint8_t *m1 = aligned_alloc(4096, len), *m2 = aligned_alloc(4096, len);
	struct ibv_pd *pd2 = ibv_alloc_pd(B.ctx);
	struct ibv_mr *mr;
	struct ibv_qp *qa, *qb;
	uint32_t key;
	void *hole;
	int ret;

	memset(m1, 0, len);
	memset(m2, 0, len);
	mr = ibv_reg_mr(B.pd, m1, len, FULL_ACCESS);
	CHECK(mr && pd2, "MR to re-register");
	if (!mr || !pd2)
		exit(1);
	key = mr->rkey;
	if (!pair(&qa, &qb, RC_OPS))
		exit(1);
	fill(A.buf, len, 41);

	/* CHANGE_TRANSLATION: the same key now reaches m2 */
	CHECK(write_status(qa, 1, (uintptr_t)m1, key, 1000) == IBV_WC_SUCCESS, "before rereg");
	CHECK(!memcmp(m1, A.buf, 1000), "data in m1");
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, m2, len, 0);
	CHECK(ret == 0, "CHANGE_TRANSLATION: %d errno %d", ret, errno);
	CHECK(mr->lkey == key && mr->rkey == key && mr->addr == m2 && mr->length == len,
	      "keys kept, address updated");
	fill(A.buf, len, 42);
	CHECK(write_status(qa, 2, (uintptr_t)m2 + 100, key, 5000) == IBV_WC_SUCCESS,
	      "WRITE after CHANGE_TRANSLATION");
	CHECK(!memcmp(m2 + 100, A.buf, 5000), "data lands in the new range");
	CHECK(m1[1000] == 0 && memcmp(m1 + 100, A.buf, 5000), "the old range is left alone");

	/* CHANGE_ACCESS: add ZERO_BASED; then back */
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   FULL_ACCESS | IBV_ACCESS_ZERO_BASED);
	CHECK(ret == 0, "CHANGE_ACCESS to zero-based: %d errno %d", ret, errno);
	fill(A.buf, len, 43);
	CHECK(write_status(qa, 3, 300, key, 64) == IBV_WC_SUCCESS, "zero-based WRITE");
	CHECK(!memcmp(m2 + 300, A.buf, 64), "zero-based data");
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, FULL_ACCESS);
	CHECK(ret == 0, "CHANGE_ACCESS back: %d", ret);
	fill(A.buf, len, 44);
	CHECK(write_status(qa, 4, (uintptr_t)m2 + 64, key, 64) == IBV_WC_SUCCESS,
	      "address-based again");
	CHECK(!memcmp(m2 + 64, A.buf, 64), "address-based data");

	/* refusals: IBV_REREG_MR_ERR_INPUT for what libibverbs checks,
	 * IBV_REREG_MR_ERR_CMD for what the kernel does; errno; the MR unchanged */
#define TRY_REREG(what, code, err, ...)                                                            \
	do {                                                                                       \
		errno = 0;                                                                         \
		ret = ibv_rereg_mr(mr, __VA_ARGS__);                                               \
		CHECK(ret == IBV_REREG_MR_ERR_##code && errno == (err), "%s: %d errno %d", what,   \
		      ret, errno);                                                                 \
	} while (0)

	hole = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(hole, 8192);
	TRY_REREG("no flags", CMD, EINVAL, 0, NULL, NULL, 0, 0);
	TRY_REREG("unknown flag", INPUT, EINVAL, 1 << 3, NULL, NULL, 0, 0);
	TRY_REREG("translation without address", INPUT, EINVAL, IBV_REREG_MR_CHANGE_TRANSLATION,
		  NULL, NULL, len, 0);
	TRY_REREG("translation without length", INPUT, EINVAL, IBV_REREG_MR_CHANGE_TRANSLATION,
		  NULL, m1, 0, 0);
	TRY_REREG("translation to unmapped memory", CMD, EFAULT, IBV_REREG_MR_CHANGE_TRANSLATION,
		  NULL, hole, 8192, 0);
	TRY_REREG("access without CHANGE_ACCESS", INPUT, EINVAL, IBV_REREG_MR_CHANGE_TRANSLATION,
		  NULL, m1, len, IBV_ACCESS_LOCAL_WRITE);
	TRY_REREG("CHANGE_PD without a PD", INPUT, EINVAL, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0,
		  0);
	TRY_REREG("CHANGE_PD to another context's PD", CMD, EINVAL, IBV_REREG_MR_CHANGE_PD, A.pd,
		  NULL, 0, 0);
	TRY_REREG("remote write without local write", CMD, EINVAL, IBV_REREG_MR_CHANGE_ACCESS, NULL,
		  NULL, 0, IBV_ACCESS_REMOTE_WRITE);
#undef TRY_REREG
	CHECK(ibv_rereg_mr(NULL, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0) ==
		  IBV_REREG_MR_ERR_INPUT,
	      "rereg NULL");
	CHECK(mr->addr == m2 && mr->rkey == key, "refused rereg leave the MR");
	fill(A.buf, len, 45);
	CHECK(write_status(qa, 5, (uintptr_t)m2, key, 2048) == IBV_WC_SUCCESS,
	      "the MR works after refusals");
	CHECK(!memcmp(m2, A.buf, 2048), "data after refusals");

	/* a memory window bound to the MR holds its range: EBUSY until unbound */
	{
		struct ibv_mr *wmr = ibv_reg_mr(B.pd, m1, len, FULL_ACCESS | IBV_ACCESS_MW_BIND);
		struct ibv_mw *mw = ibv_alloc_mw(B.pd, IBV_MW_TYPE_1);
		struct ibv_mw_bind bind = {
		    .wr_id = 600,
		    .send_flags = IBV_SEND_SIGNALED,
		    .bind_info = {.mr = wmr,
				  .addr = (uintptr_t)m1,
				  .length = 4096,
				  .mw_access_flags = IBV_ACCESS_REMOTE_WRITE},
		};

		if (wmr && mw && !ibv_bind_mw(qb, mw, &bind) &&
		    expect_wc(B.cq, 600, IBV_WC_SUCCESS, IBV_WC_BIND_MW, NULL)) {
			errno = 0;
			ret = ibv_rereg_mr(wmr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, m2, len, 0);
			CHECK(ret == IBV_REREG_MR_ERR_CMD && errno == EBUSY,
			      "rereg with a bound window: %d errno %d", ret, errno);
			CHECK(!ibv_dealloc_mw(mw), "dealloc_mw");
			mw = NULL;
			ret = ibv_rereg_mr(wmr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, m2, len, 0);
			CHECK(ret == 0, "rereg once the window is gone: %d errno %d", ret, errno);
		} else {
			printf("SKIP: memory windows unavailable (errno %d)\n", errno);
		}
		if (mw)
			ibv_dealloc_mw(mw);
		if (wmr)
			ibv_dereg_mr(wmr);
	}

	/* CHANGE_ACCESS without REMOTE_WRITE: the next WRITE is refused by B */
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(ret == 0, "CHANGE_ACCESS read-only: %d", ret);
	CHECK(write_status(qa, 6, (uintptr_t)m2, key, 16) == IBV_WC_REM_ACCESS_ERR,
	      "WRITE to a read-only MR");
	unpair(qa, qb);

	/* CHANGE_PD: B's QP in the old PD loses access, a QP in pd2 has it */
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS, pd2, NULL, 0,
			   FULL_ACCESS);
	CHECK(ret == 0 && mr->pd == pd2, "CHANGE_PD: %d", ret);
	CHECK(atomic_load(&to_upd(pd2)->refs) == 1, "pd2 refs %u", atomic_load(&to_upd(pd2)->refs));
	CHECK(ibv_dealloc_pd(pd2) == EBUSY, "pd2 is in use by the MR");
	if (!pair(&qa, &qb, RC_OPS))
		exit(1);
	CHECK(write_status(qa, 7, (uintptr_t)m2, key, 16) == IBV_WC_REM_ACCESS_ERR,
	      "WRITE through a QP of the old PD");
	unpair(qa, qb);
	qa = make_qp(A.pd, A.cq, A.cq, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, RC_OPS);
	qb = make_qp(pd2, B.cq, B.cq, 0, 0);
	CHECK(qa && qb && !connect_pair(qa, qb), "pair in pd2");
	fill(A.buf, len, 46);
	CHECK(write_status(qa, 8, (uintptr_t)m2 + 4096, key, 30000) == IBV_WC_SUCCESS,
	      "WRITE through a QP of the new PD");
	CHECK(!memcmp(m2 + 4096, A.buf, 30000), "data after CHANGE_PD");

	/* all three at once, back to B.pd and m1 */
	ret = ibv_rereg_mr(mr,
			   IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
			       IBV_REREG_MR_CHANGE_ACCESS,
			   B.pd, m1, 4096, FULL_ACCESS);
	CHECK(ret == 0 && mr->pd == B.pd && mr->addr == m1 && mr->length == 4096, "all flags: %d",
	      ret);
	CHECK(atomic_load(&to_upd(pd2)->refs) == 1, "pd2 refs: its QP only");
	unpair(qa, qb);
	CHECK(!ibv_dealloc_pd(pd2), "pd2 free again");
	if (!pair(&qa, &qb, RC_OPS))
		exit(1);
	fill(A.buf, len, 47);
	CHECK(write_status(qa, 9, (uintptr_t)m1, key, 4096) == IBV_WC_SUCCESS, "WRITE into m1");
	CHECK(!memcmp(m1, A.buf, 4096), "data in m1 again");
	CHECK(write_status(qa, 10, (uintptr_t)m1 + 4096, key, 1) == IBV_WC_REM_ACCESS_ERR,
	      "the new length is enforced");
	unpair(qa, qb);
	CHECK(!ibv_dereg_mr(mr), "dereg after rereg");
	free(m1);
	free(m2);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	side_open(&A);
	side_open(&B);
	test_ops();
	test_errors();
	test_rereg();
	side_close(&A);
	side_close(&B);
	return finish("test_qp_ex");
}

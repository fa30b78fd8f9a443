/* RC transport through the public verbs API, without fault injection:
 *   - SEND, SEND_WITH_IMM, RDMA WRITE, WRITE_WITH_IMM and READ at sizes
 *     0, 1, 255, MTU-1, MTU, MTU+1, 64 KiB and 1 MiB for every MTU, with
 *     PSNs starting just below the 24-bit wrap;
 *   - multi-SGE on both sides, IBV_SEND_INLINE, unsignaled WRs, a full
 *     send queue of mixed WRs;
 *   - one-sided WRITE/READ to a QP whose CQs are never polled;
 *   - the error paths: remote access (rkey, MR access, bounds, QP access),
 *     remote invalid request / local length, local protection, RNR retry
 *     exhaustion and RNR recovery, transport retry exhaustion, flushing.
 * Fault injection has its own program, test_rc_fault.c.
 */
#include <unistd.h>

#include "net/fault.h"
#include "rc_harness.h"

static const enum ibv_wr_opcode all_ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
					     IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ};
#define NOPS (int)(sizeof(all_ops) / sizeof(all_ops[0]))

static int max_sge(struct harness *h, enum ibv_wr_opcode op)
{
	int m = op == IBV_WR_RDMA_READ ? h->dattr.max_sge_rd : h->dattr.max_sge;

	return m < SGE_MAX ? m : SGE_MAX;
}

/* ---- data paths ---- */

static void test_sizes(struct harness *h, uint64_t *seed)
{
	uint32_t m = h->mtu;
	const uint32_t sizes[] = {0, 1, 255, m - 1, m, m + 1, 65536, 1u << 20};

	for (int o = 0; o < NOPS; o++)
		for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			struct xfer x = {.op = all_ops[o],
					 .size = sizes[i],
					 .lsge = 1,
					 .rsge = 1,
					 .rslack = i % 3 ? 0 : 17};

			if (!do_xfer(h, &x, ++*seed))
				pair_recover(h);
		}
}

static void test_multi_sge(struct harness *h, uint64_t *seed)
{
	uint32_t m = h->mtu;
	const uint32_t sizes[] = {m + 1, 3 * m + 7, 65536 + 3};

	for (int o = 0; o < NOPS; o++)
		for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			int ms = max_sge(h, all_ops[o]);
			struct xfer x = {.op = all_ops[o],
					 .size = sizes[i],
					 .lsge = i == 0 ? 2 : ms,
					 .rsge = i == 1 ? 3 : h->dattr.max_sge,
					 .rslack = 5};

			if (!do_xfer(h, &x, ++*seed))
				pair_recover(h);
		}
}

static void test_inline(struct harness *h, uint64_t *seed)
{
	const uint32_t sizes[] = {0, 1, 100, 512};

	for (int o = 0; o < NOPS; o++) {
		if (all_ops[o] == IBV_WR_RDMA_READ)
			continue;
		for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			for (int nsge = 1; nsge <= 4; nsge += 3) {
				struct xfer x = {.op = all_ops[o],
						 .size = sizes[i],
						 .lsge = nsge,
						 .rsge = 1,
						 .inl = true};

				if (!do_xfer(h, &x, ++*seed))
					pair_recover(h);
			}
	}
	/* more than max_inline_data is refused at post time */
	{
		struct ibv_sge sge = {.addr = (uintptr_t)h->s[0].buf, .length = 513, .lkey = 0};
		struct ibv_send_wr wr = {.wr_id = 1,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED},
				   *bad = NULL;

		CHECK(ibv_post_send(h->s[0].qp, &wr, &bad) == EINVAL && bad == &wr,
		      "inline beyond max_inline_data accepted");
	}
}

static void test_unsignaled(struct harness *h, uint64_t *seed)
{
	int n = (int)h->o.max_send_wr;
	struct bop *ops = calloc((size_t)n, sizeof(*ops));

	/* three rounds that each fill the send queue: the slots of the
	 * unsignaled WRs must be free once the signaled one completed */
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < n; i++) {
			ops[i].op = round == 1 && i % 4 == 0 ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
			ops[i].size = (uint32_t)(i * 37 % 700);
			ops[i].signaled = i == n - 1;
		}
		if (!do_batch(h, ops, n, ++*seed, 0))
			pair_recover(h);
	}
	free(ops);
}

static void test_fill_sq(struct harness *h, uint64_t *seed)
{
	int n = (int)h->o.max_send_wr;
	struct bop *ops = calloc((size_t)n, sizeof(*ops));
	uint64_t r = *seed | 1;
	const uint32_t m = h->mtu;
	const uint32_t sizes[] = {0, 1, 100, m - 1, m + 1, 3000, 9000, 20000};

	for (int i = 0; i < n; i++) {
		ops[i].op = all_ops[xs64(&r) % NOPS];
		ops[i].size = sizes[xs64(&r) % 8];
		ops[i].signaled = true;
	}
	if (!do_batch(h, ops, n, ++*seed, 1))
		pair_recover(h);
	free(ops);
}

static void test_data(struct harness *h)
{
	uint64_t seed = 1000;

	const char *only = getenv("RC_MTU"); /* debugging: one MTU (bytes) */

	for (int m = 0; m < HARNESS_MTUS; m++) {
		struct pair_opts o = default_opts(all_mtus[m]);

		if (only && atoi(only) != 128 << all_mtus[m])
			continue;
		unsigned int f0 = failed;
		double t0 = now_s();

		o.max_recv_wr = 512;
		if (pair_create(h, &o)) {
			CHECK(0, "pair_create mtu %u", 128u << all_mtus[m]);
			continue;
		}
		test_sizes(h, &seed);
		test_multi_sge(h, &seed);
		test_inline(h, &seed);
		test_unsignaled(h, &seed);
		test_fill_sq(h, &seed);
		printf("data paths, MTU %4u: %s (%.2f s)\n", h->mtu, failed == f0 ? "ok" : "FAILED",
		       now_s() - t0);
		if (m == 0) {
			/* no UROCE_FAULT: the packet path skips fault.c */
			CHECK(to_uctx(h->s[0].ctx)->fault == &uroce_fault_none,
			      "fault state %p without UROCE_FAULT",
			      (void *)to_uctx(h->s[0].ctx)->fault);
		}
	}
	CHECK(CNT(h, 0, fault_drop) + CNT(h, 1, fault_drop) + CNT(h, 0, fault_dup) +
		      CNT(h, 1, fault_dup) ==
		  0,
	      "faults counted without UROCE_FAULT");
}

/* One-sided operations complete while the target never polls: B's context
 * is fresh and its CQs are never touched; only its progress thread runs. */
static void test_unpolled_target(void)
{
	struct harness h;
	struct pair_opts o = default_opts(IBV_MTU_4096);
	uint64_t seed = 5000;
	unsigned int f0 = failed;

	if (harness_open(&h) || pair_create(&h, &o)) {
		CHECK(0, "harness");
		harness_close(&h);
		return;
	}
	for (int i = 0; i < 6; i++) {
		struct xfer x = {.op = i % 2 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
				 .size = i < 2	 ? 1u << 20
					 : i < 4 ? 65536
						 : 3,
				 .lsge = 1 + i,
				 .rsge = 1};

		do_xfer(&h, &x, ++seed);
	}
	CHECK(atomic_load(&to_uctx(h.s[1].ctx)->app_poll_ns) == 0,
	      "the target context was polled by the application");
	printf("one-sided to an unpolled target: %s\n", failed == f0 ? "ok" : "FAILED");
	harness_close(&h);
}

/* ---- error paths ---- */

static int post1(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *addr, uint32_t len,
		 uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static int recv1(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* Post one WR on A and expect status st on A's send CQ. */
static bool expect_one(struct harness *h, const char *what, enum ibv_wr_opcode op, void *addr,
		       uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		       enum ibv_wc_status st)
{
	struct ibv_wc wc;
	int err = post1(h->s[0].qp, 7, op, addr, len, lkey, raddr, rkey);

	CHECK(!err, "%s: post: %s", what, strerror(err));
	if (err)
		return false;
	if (wait_wc(h->s[0].scq, &wc, 1, 5000)) {
		CHECK(0, "%s: no completion", what);
		return false;
	}
	CHECK(wc.status == st && wc.wr_id == 7, "%s: %s (want %s)", what,
	      ibv_wc_status_str(wc.status), ibv_wc_status_str(st));
	return wc.status == st;
}

static void test_remote_access(struct harness *h)
{
	struct side *a = &h->s[0], *b = &h->s[1];
	struct pair_opts o = default_opts(IBV_MTU_1024);
	struct ibv_wc wc[4], rwc[2];
	struct ibv_mr *mr2;
	uint8_t *r2 = b->buf + (2u << 20);
	int err;

	/* 1. wrong rkey: the good WRITE before it completes, the bad one
	 * fails, the rest of A's SQ and B's RQ are flushed, both in ERR */
	pair_create(h, &o);
	recv1(b->qp, 21, b->buf, 256, b->mr->lkey);
	recv1(b->qp, 22, b->buf + 256, 256, b->mr->lkey);
	{
		struct ibv_sge sge = {
		    .addr = (uintptr_t)a->buf, .length = 100, .lkey = a->mr->lkey};
		struct ibv_send_wr wr[4], *bad;

		memset(wr, 0, sizeof(wr));
		for (int i = 0; i < 4; i++) {
			wr[i].wr_id = 11 + (uint64_t)i;
			wr[i].sg_list = &sge;
			wr[i].num_sge = 1;
			wr[i].opcode = i == 2 ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
			wr[i].send_flags = IBV_SEND_SIGNALED;
			wr[i].wr.rdma.remote_addr = (uintptr_t)b->buf + 4096;
			wr[i].wr.rdma.rkey = i == 1 ? b->mr->rkey ^ 0x5a5a5a5au : b->mr->rkey;
			wr[i].next = i < 3 ? &wr[i + 1] : NULL;
		}
		err = ibv_post_send(a->qp, wr, &bad);
		CHECK(!err, "post: %s", strerror(err));
	}
	if (!wait_wc2(a->scq, wc, 4, b->rcq, rwc, 2, 5000)) {
		CHECK(wc[0].wr_id == 11 && wc[0].status == IBV_WC_SUCCESS, "good WRITE: %s",
		      ibv_wc_status_str(wc[0].status));
		CHECK(wc[1].wr_id == 12 && wc[1].status == IBV_WC_REM_ACCESS_ERR, "bad rkey: %s",
		      ibv_wc_status_str(wc[1].status));
		for (int i = 2; i < 4; i++)
			CHECK(wc[i].wr_id == 11 + (uint64_t)i &&
				  wc[i].status == IBV_WC_WR_FLUSH_ERR,
			      "after the error: wr %llu %s", (unsigned long long)wc[i].wr_id,
			      ibv_wc_status_str(wc[i].status));
		for (int i = 0; i < 2; i++)
			CHECK(rwc[i].wr_id == 21 + (uint64_t)i &&
				  rwc[i].status == IBV_WC_WR_FLUSH_ERR,
			      "B's receive %d: %s", i, ibv_wc_status_str(rwc[i].status));
	} else {
		CHECK(0, "wrong rkey: completions missing");
	}
	CHECK(qp_state(a->qp) == IBV_QPS_ERR && qp_state(b->qp) == IBV_QPS_ERR,
	      "after a remote access error: A %d B %d", qp_state(a->qp), qp_state(b->qp));

	/* 1b. the same on a WRITE longer than the send window: the NAK comes
	 * back while the WQE is still being sent */
	pair_create(h, &o);
	expect_one(h, "1 MiB WRITE with a wrong rkey", IBV_WR_RDMA_WRITE, a->buf, 1u << 20,
		   a->mr->lkey, (uintptr_t)b->buf, b->mr->rkey ^ 0x5a5a5a5au,
		   IBV_WC_REM_ACCESS_ERR);
	CHECK(qp_state(a->qp) == IBV_QPS_ERR && qp_state(b->qp) == IBV_QPS_ERR,
	      "after a remote access error on a long WRITE: A %d B %d", qp_state(a->qp),
	      qp_state(b->qp));

	/* 2. READ from an MR without REMOTE_READ (WRITE to it works) */
	pair_create(h, &o);
	mr2 = ibv_reg_mr(b->pd, r2, 65536, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	expect_one(h, "WRITE to a write-only MR", IBV_WR_RDMA_WRITE, a->buf, 100, a->mr->lkey,
		   (uintptr_t)r2, mr2->rkey, IBV_WC_SUCCESS);
	expect_one(h, "READ from a write-only MR", IBV_WR_RDMA_READ, a->buf, 100, a->mr->lkey,
		   (uintptr_t)r2, mr2->rkey, IBV_WC_REM_ACCESS_ERR);
	CHECK(qp_state(b->qp) == IBV_QPS_ERR, "responder after REM_ACCESS_ERR");
	ibv_dereg_mr(mr2);

	/* 3. bounds: 4 KiB MR; beyond its end, across it, before it */
	mr2 = ibv_reg_mr(b->pd, r2, 4096,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	{
		static const struct {
			const char *what;
			enum ibv_wr_opcode op;
			int64_t at;
			uint32_t len;
			bool ok;
		} b_cases[] = {
		    {"WRITE filling the MR", IBV_WR_RDMA_WRITE, 0, 4096, true},
		    {"WRITE 1 byte past the MR", IBV_WR_RDMA_WRITE, 4096, 1, false},
		    {"WRITE across the MR end", IBV_WR_RDMA_WRITE, 0, 4097, false},
		    {"WRITE across the MR end (multi-packet)", IBV_WR_RDMA_WRITE, 1, 5000, false},
		    {"WRITE starting before the MR", IBV_WR_RDMA_WRITE, -1, 2, false},
		    {"READ of the last byte", IBV_WR_RDMA_READ, 4095, 1, true},
		    {"READ across the MR end", IBV_WR_RDMA_READ, 4000, 97, false},
		};

		for (unsigned int i = 0; i < sizeof(b_cases) / sizeof(b_cases[0]); i++) {
			pair_create(h, &o);
			expect_one(h, b_cases[i].what, b_cases[i].op, a->buf, b_cases[i].len,
				   a->mr->lkey, (uintptr_t)r2 + (uint64_t)b_cases[i].at, mr2->rkey,
				   b_cases[i].ok ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR);
		}
	}
	ibv_dereg_mr(mr2);

	/* 4. the QP does not grant remote write (READ is fine) */
	o.b_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	pair_create(h, &o);
	expect_one(h, "READ from a QP without REMOTE_WRITE", IBV_WR_RDMA_READ, a->buf, 5000,
		   a->mr->lkey, (uintptr_t)b->buf, b->mr->rkey, IBV_WC_SUCCESS);
	expect_one(h, "WRITE to a QP without REMOTE_WRITE", IBV_WR_RDMA_WRITE, a->buf, 100,
		   a->mr->lkey, (uintptr_t)b->buf, b->mr->rkey, IBV_WC_REM_ACCESS_ERR);
	o.b_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	pair_create(h, &o);
	expect_one(h, "WRITE to a QP without REMOTE_READ", IBV_WR_RDMA_WRITE, a->buf, 100,
		   a->mr->lkey, (uintptr_t)b->buf, b->mr->rkey, IBV_WC_SUCCESS);
	expect_one(h, "READ from a QP without REMOTE_READ", IBV_WR_RDMA_READ, a->buf, 100,
		   a->mr->lkey, (uintptr_t)b->buf, b->mr->rkey, IBV_WC_REM_ACCESS_ERR);
}

static void test_recv_too_small(struct harness *h)
{
	struct side *a = &h->s[0], *b = &h->s[1];
	static const struct {
		enum ibv_mtu mtu;
		uint32_t rlen, slen;
	} c[] = {{IBV_MTU_1024, 100, 200}, {IBV_MTU_1024, 1500, 5000}, {IBV_MTU_256, 0, 1}};

	for (unsigned int i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct pair_opts o = default_opts(c[i].mtu);
		struct ibv_wc swc, rwc;

		pair_create(h, &o);
		recv1(b->qp, 31, b->buf, c[i].rlen, b->mr->lkey);
		post1(a->qp, 32, IBV_WR_SEND, a->buf, c[i].slen, a->mr->lkey, 0, 0);
		if (wait_wc2(a->scq, &swc, 1, b->rcq, &rwc, 1, 5000)) {
			CHECK(0, "SEND %u into %u: completions missing", c[i].slen, c[i].rlen);
			continue;
		}
		CHECK(swc.status == IBV_WC_REM_INV_REQ_ERR, "SEND %u into %u: sender %s", c[i].slen,
		      c[i].rlen, ibv_wc_status_str(swc.status));
		CHECK(rwc.status == IBV_WC_LOC_LEN_ERR && rwc.wr_id == 31,
		      "SEND %u into %u: receiver %s", c[i].slen, c[i].rlen,
		      ibv_wc_status_str(rwc.status));
		CHECK(qp_state(a->qp) == IBV_QPS_ERR && qp_state(b->qp) == IBV_QPS_ERR,
		      "states after a too long SEND");
	}
}

static void test_local_prot(struct harness *h)
{
	struct side *a = &h->s[0], *b = &h->s[1];
	struct pair_opts o = default_opts(IBV_MTU_1024);
	uint32_t bad = a->mr->lkey ^ 0x00a5a500u;

	pair_create(h, &o);
	recv1(b->qp, 41, b->buf, 4096, b->mr->lkey);
	expect_one(h, "SEND with a bad lkey", IBV_WR_SEND, a->buf, 100, bad, 0, 0,
		   IBV_WC_LOC_PROT_ERR);
	CHECK(qp_state(a->qp) == IBV_QPS_ERR, "requester after LOC_PROT_ERR");
	CHECK(qp_state(b->qp) == IBV_QPS_RTS, "responder after the peer's LOC_PROT_ERR");

	pair_create(h, &o);
	expect_one(h, "WRITE from beyond the MR", IBV_WR_RDMA_WRITE, a->buf + BUF_SIZE - 10, 100,
		   a->mr->lkey, (uintptr_t)b->buf, b->mr->rkey, IBV_WC_LOC_PROT_ERR);
	pair_create(h, &o);
	expect_one(h, "READ into a bad lkey", IBV_WR_RDMA_READ, a->buf, 3000, bad,
		   (uintptr_t)b->buf, b->mr->rkey, IBV_WC_LOC_PROT_ERR);
	{
		/* a READ into memory registered without LOCAL_WRITE */
		struct ibv_mr *ro = ibv_reg_mr(a->pd, a->buf + (3u << 20), 4096, 0);

		pair_create(h, &o);
		expect_one(h, "READ into a read-only MR", IBV_WR_RDMA_READ, a->buf + (3u << 20),
			   100, ro->lkey, (uintptr_t)b->buf, b->mr->rkey, IBV_WC_LOC_PROT_ERR);
		ibv_dereg_mr(ro);
	}
}

static void test_rnr(struct harness *h)
{
	struct side *a = &h->s[0], *b = &h->s[1];

	/* rnr_retry 0..6: retried that often, so n + 1 RNR NAKs in all */
	for (int n = 0; n <= 6; n++) {
		struct pair_opts o = default_opts(IBV_MTU_1024);
		unsigned long rx0, tx0;

		o.rnr_retry = (uint8_t)n;
		/* a retransmission timeout before the RNR NAK arrives (a loaded
		 * machine) would make B NAK a duplicate too: A drops that one
		 * (its PSN is not outstanding any more), B counts it */
		o.timeout = 14;
		pair_create(h, &o);
		rx0 = CNT(h, 0, rnr_naks_rx);
		tx0 = CNT(h, 1, rnr_naks_tx);
		if (expect_one(h, "SEND without a receive", IBV_WR_SEND, a->buf, 64, a->mr->lkey, 0,
			       0, IBV_WC_RNR_RETRY_EXC_ERR)) {
			CHECK(CNT(h, 0, rnr_naks_rx) - rx0 == (unsigned long)n + 1 &&
				  CNT(h, 1, rnr_naks_tx) - tx0 >= (unsigned long)n + 1,
			      "rnr_retry %d: %lu RNR NAKs received, %lu sent", n,
			      CNT(h, 0, rnr_naks_rx) - rx0, CNT(h, 1, rnr_naks_tx) - tx0);
			CHECK(qp_state(a->qp) == IBV_QPS_ERR, "requester after RNR_RETRY_EXC_ERR");
		}
	}
	/* rnr_retry 7 (infinite): a multi-packet SEND waits for the receive;
	 * with retry_cnt 1 the RNR NAKs must not cost transport retries */
	for (int m = 0; m < 3; m++) {
		struct pair_opts o = default_opts(m ? IBV_MTU_256 : IBV_MTU_4096);
		struct ibv_wc swc, rwc;
		unsigned long rx0;
		uint32_t len = 3000;

		o.min_rnr_timer = m ? 1 : 12; /* 0.01 ms, 0.64 ms */
		if (m == 2) {
			o.retry_cnt = 1;
			o.timeout = 14;
		}
		pair_create(h, &o);
		rx0 = CNT(h, 0, rnr_naks_rx);
		fill_pattern(a->buf, len, 77);
		memset(b->buf, 0, len + 64);
		post1(a->qp, 51, IBV_WR_SEND, a->buf, len, a->mr->lkey, 0, 0);
		CHECK(wait_wc(a->scq, &swc, 1, 30) != 0, "SEND completed without a receive: %s",
		      ibv_wc_status_str(swc.status));
		recv1(b->qp, 52, b->buf, len + 64, b->mr->lkey);
		if (wait_wc2(a->scq, &swc, 1, b->rcq, &rwc, 1, 5000)) {
			CHECK(0, "rnr_retry 7: completions missing");
			continue;
		}
		CHECK(swc.status == IBV_WC_SUCCESS && rwc.status == IBV_WC_SUCCESS &&
			  rwc.byte_len == len,
		      "rnr_retry 7: %s / %s len %u", ibv_wc_status_str(swc.status),
		      ibv_wc_status_str(rwc.status), rwc.byte_len);
		CHECK(!memcmp(a->buf, b->buf, len), "rnr_retry 7: data");
		CHECK(CNT(h, 0, rnr_naks_rx) - rx0 >= 2, "rnr_retry 7: only %lu RNR NAKs",
		      CNT(h, 0, rnr_naks_rx) - rx0);
		CHECK(qp_state(a->qp) == IBV_QPS_RTS && qp_state(b->qp) == IBV_QPS_RTS,
		      "states after RNR recovery");
	}
}

static void test_retry_exceeded(struct harness *h)
{
	struct side *a = &h->s[0], *b = &h->s[1];

	for (int v = 0; v < 5; v++) {
		struct pair_opts o = default_opts(IBV_MTU_1024);
		int rc = v == 3 ? 3 : v % 2 ? 1 : 0;
		/* v 4: a WRITE longer than the window, still being sent */
		uint32_t len = v == 4 ? 1u << 20 : 3000;
		unsigned long t0;
		struct ibv_wc wc;
		char what[64];

		o.retry_cnt = (uint8_t)rc;
		o.timeout = 1;
		pair_create(h, &o);
		if (v < 2 || v == 4) {
			ibv_destroy_qp(b->qp);
			b->qp = NULL;
			snprintf(what, sizeof(what), "peer destroyed, retry_cnt %d, %u B", rc, len);
		} else {
			struct ibv_qp_attr at = {.qp_state = IBV_QPS_RESET};

			ibv_modify_qp(b->qp, &at, IBV_QP_STATE);
			snprintf(what, sizeof(what), "peer in RESET, retry_cnt %d", rc);
		}
		t0 = CNT(h, 0, timeouts);
		post1(a->qp, 61, v % 2 || v == 4 ? IBV_WR_RDMA_WRITE : IBV_WR_SEND, a->buf, len,
		      a->mr->lkey, (uintptr_t)a->buf, a->mr->rkey);
		post1(a->qp, 62, IBV_WR_RDMA_READ, a->buf, 100, a->mr->lkey, (uintptr_t)a->buf,
		      a->mr->rkey);
		if (wait_wc(a->scq, &wc, 1, 5000)) {
			CHECK(0, "%s: no completion", what);
			continue;
		}
		CHECK(wc.status == IBV_WC_RETRY_EXC_ERR && wc.wr_id == 61, "%s: %s", what,
		      ibv_wc_status_str(wc.status));
		CHECK(CNT(h, 0, timeouts) - t0 == (unsigned long)rc + 1, "%s: %lu timeouts", what,
		      CNT(h, 0, timeouts) - t0);
		if (!wait_wc(a->scq, &wc, 1, 1000))
			CHECK(wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 62,
			      "%s: second WR %s", what, ibv_wc_status_str(wc.status));
		else
			CHECK(0, "%s: second WR not flushed", what);
		CHECK(qp_state(a->qp) == IBV_QPS_ERR, "%s: requester state", what);
	}
}

static void test_flush(struct harness *h)
{
	struct side *a = &h->s[0], *b = &h->s[1];
	struct pair_opts o = default_opts(IBV_MTU_1024);
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_ERR};
	struct ibv_wc wc[8];

	/* SENDs stuck behind RNR NAKs, receives posted on A: modify A to ERR */
	o.min_rnr_timer = 14; /* 1.28 ms */
	pair_create(h, &o);
	for (int i = 0; i < 5; i++)
		post1(a->qp, 70 + (uint64_t)i, IBV_WR_SEND, a->buf, 64 + (uint32_t)i * 1000,
		      a->mr->lkey, 0, 0);
	for (int i = 0; i < 3; i++)
		recv1(a->qp, 80 + (uint64_t)i, a->buf + 65536, 100, a->mr->lkey);
	CHECK(wait_wc(a->scq, wc, 1, 20) != 0, "SEND completed without a receive");
	CHECK(ibv_modify_qp(a->qp, &at, IBV_QP_STATE) == 0, "modify to ERR");
	if (!wait_wc2(a->scq, wc, 5, a->rcq, wc + 5, 3, 2000)) {
		for (int i = 0; i < 5; i++)
			CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR &&
				  wc[i].wr_id == 70 + (uint64_t)i,
			      "flushed send %d: wr_id %llu %s", i, (unsigned long long)wc[i].wr_id,
			      ibv_wc_status_str(wc[i].status));
		for (int i = 0; i < 3; i++)
			CHECK(wc[5 + i].status == IBV_WC_WR_FLUSH_ERR &&
				  wc[5 + i].wr_id == 80 + (uint64_t)i,
			      "flushed recv %d: wr_id %llu %s", i,
			      (unsigned long long)wc[5 + i].wr_id,
			      ibv_wc_status_str(wc[5 + i].status));
	} else {
		CHECK(0, "modify to ERR: flush completions missing");
	}
	/* WRs posted in ERR complete flushed */
	post1(a->qp, 90, IBV_WR_RDMA_WRITE, a->buf, 10, a->mr->lkey, (uintptr_t)b->buf,
	      b->mr->rkey);
	recv1(a->qp, 91, a->buf, 10, a->mr->lkey);
	if (!wait_wc2(a->scq, wc, 1, a->rcq, wc + 1, 1, 2000))
		CHECK(wc[0].wr_id == 90 && wc[0].status == IBV_WC_WR_FLUSH_ERR &&
			  wc[1].wr_id == 91 && wc[1].status == IBV_WC_WR_FLUSH_ERR,
		      "posted in ERR: %s / %s", ibv_wc_status_str(wc[0].status),
		      ibv_wc_status_str(wc[1].status));
	else
		CHECK(0, "posted in ERR: no flush completions");
	CHECK(stray_wcs(h) == 0, "extra completions after the flush");

	/* ERR -> RESET -> RTS again: the QP works, the responder never took
	 * the flushed SENDs, so the PSNs still match */
	{
		struct ibv_qp_attr r = {.qp_state = IBV_QPS_RESET};
		struct xfer x = {.op = IBV_WR_SEND, .size = 3000, .lsge = 2, .rsge = 2};

		CHECK(ibv_modify_qp(a->qp, &r, IBV_QP_STATE) == 0 && qp_connect(h, 0) == 0,
		      "reconnect after ERR");
		do_xfer(h, &x, 4242);
		x.op = IBV_WR_RDMA_READ;
		do_xfer(h, &x, 4243);
	}
}

int main(void)
{
	struct harness h;
	double t0 = now_s();

	setvbuf(stdout, NULL, _IOLBF, 0);
	unsetenv("UROCE_FAULT");
	if (harness_open(&h)) {
		printf("0 passed, 1 failed\n");
		return 1;
	}
	test_data(&h);
	test_remote_access(&h);
	printf("remote access errors done (%.2f s)\n", now_s() - t0);
	test_recv_too_small(&h);
	test_local_prot(&h);
	test_rnr(&h);
	printf("RNR done (%.2f s)\n", now_s() - t0);
	test_retry_exceeded(&h);
	test_flush(&h);
	harness_close(&h);
	test_unpolled_target();
	printf("total %.2f s\n", now_s() - t0);
	return finish("test_rc");
}

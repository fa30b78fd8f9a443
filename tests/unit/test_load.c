/* uroce under load.
 *
 *   - 1,024 RC QPs in one process: two contexts, 512 QP pairs between them
 *     (three UDP endpoints per context), every pair carrying a SEND each
 *     way, an RDMA WRITE and an RDMA READ per round at random sizes, every
 *     byte verified (and the bytes after each message untouched);
 *   - full queues: one pair created with max_send_wr = max_recv_wr =
 *     max_qp_wr (ibv_query_device); the receive queue and the send queue
 *     are filled to exactly that many WRs in one ibv_post_recv /
 *     ibv_post_send chain (the next WR is refused with ENOMEM and bad_wr
 *     points at it), and all of them complete with the data verified;
 *   - CQ overflow: CQs too small for the completions (IBTA C11-27 /
 *     ibv_create_cq(3): an overrun is a CQ error): IBV_EVENT_CQ_ERR arrives
 *     on each context's async fd (ibv_get_async_event), for the requester's
 *     send CQ and the responder's receive CQ, nothing crashes, the CQs and
 *     QPs can be destroyed, and fresh QPs on the same contexts work.
 * The numbers are printed; docs/faults-results.md records them.
 */
#include <poll.h>

#include "rc_harness.h"
#include "fault_util.h"

#define NPAIRS	 512
#define MAXSZ	 8192u /* region per message; messages are shorter */
#define REGION	 (4 * MAXSZ)
#define ROUNDS	 4
#define GUARD_SZ 64u

static uint32_t rnd_size(uint64_t *r)
{
	uint64_t x = xs64(r);

	/* a few empty and one-byte messages, the rest up to MAXSZ - GUARD_SZ */
	switch (x % 16) {
	case 0:
		return 0;
	case 1:
		return 1;
	default:
		return (uint32_t)((x >> 8) % (MAXSZ - GUARD_SZ + 1));
	}
}

/* ---- 1,024 QPs ---- */

static void many_qps(void)
{
	struct fu_side s[2];
	struct ibv_qp *(*qp)[2] = calloc(NPAIRS, sizeof(*qp));
	struct fu_qp_opts o = fu_default_opts();
	struct ibv_qp_cap cap = {
	    .max_send_wr = 4, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1};
	uint32_t *sz = calloc(NPAIRS * 4, sizeof(*sz)); /* A send, write, read, B send */
	uint32_t *lenA = calloc(NPAIRS, sizeof(uint32_t)), *lenB = calloc(NPAIRS, sizeof(uint32_t));
	double t0, t_setup, bytes = 0, t_traffic = 0;
	long rss0 = fu_status_kb("VmRSS"), rss1;
	uint64_t r = 0x10ad;
	int created = 0;

	o.mtu = IBV_MTU_1024; /* messages of up to 8 packets */
	t0 = fu_now();
	if (fu_side_open(&s[0], (size_t)NPAIRS * REGION, 4096) ||
	    fu_side_open(&s[1], (size_t)NPAIRS * REGION, 4096)) {
		CHECK(0, "open two contexts: %s", strerror(errno));
		goto out;
	}
	for (int i = 0; i < NPAIRS; i++) {
		if (fu_pair_create(s, qp[i], &cap, &o)) {
			CHECK(0, "QP pair %d: %s", i, strerror(errno));
			goto out;
		}
		created++;
	}
	t_setup = fu_now() - t0;
	rss1 = fu_status_kb("VmRSS");
	/* the two buffers of NPAIRS * REGION bytes are written (memset) */
	printf("1024 QPs: created and connected in %.3f s; RSS +%ld KiB: %ld KiB of buffers, "
	       "%.1f KiB per QP\n",
	       t_setup, rss1 - rss0, (long)(2 * NPAIRS * REGION / 1024),
	       (double)(rss1 - rss0 - 2 * NPAIRS * REGION / 1024) / (2 * NPAIRS));
	{
		/* the QPNs tell the UDP ports: 255 QPs per endpoint */
		uint32_t ports[2][8];
		int np[2] = {0, 0};

		for (int i = 0; i < NPAIRS; i++)
			for (int k = 0; k < 2; k++) {
				uint32_t p = qp[i][k]->qp_num >> 8;
				int j;

				for (j = 0; j < np[k] && ports[k][j] != p; j++)
					;
				if (j == np[k] && np[k] < 8)
					ports[k][np[k]++] = p;
			}
		CHECK(np[0] == 3 && np[1] == 3, "UDP endpoints per context: %d and %d, want 3",
		      np[0], np[1]);
	}

	for (int round = 0; round < ROUNDS; round++) {
		struct ibv_cq *cqs[4] = {s[0].scq, s[0].rcq, s[1].scq, s[1].rcq};
		const int want[4] = {3 * NPAIRS, NPAIRS, NPAIRS, NPAIRS};
		const bool is_recv[4] = {false, true, false, true};
		const uint32_t *lens[4] = {NULL, lenA, NULL, lenB};
		unsigned int f0 = failed;
		double t;

		for (int i = 0; i < NPAIRS; i++) {
			uint8_t *a = s[0].buf + (size_t)i * REGION,
				*b = s[1].buf + (size_t)i * REGION;
			uint64_t seed = (uint64_t)round << 32 | (uint64_t)i << 2;

			for (int k = 0; k < 4; k++)
				sz[i * 4 + k] = rnd_size(&r);
			/* sources: A's SEND and WRITE, B's READ source and SEND */
			fill_pattern(a, sz[i * 4], seed);
			fill_pattern(a + MAXSZ, sz[i * 4 + 1], seed + 1);
			fill_pattern(b + 2 * MAXSZ, sz[i * 4 + 2], seed + 2);
			fill_pattern(b + 3 * MAXSZ, sz[i * 4 + 3], seed + 3);
			/* destinations */
			memset(b, 0xee, 2 * MAXSZ);
			memset(a + 2 * MAXSZ, 0xee, 2 * MAXSZ);
			lenB[i] = sz[i * 4];
			lenA[i] = sz[i * 4 + 3];
		}
		t = fu_now();
		for (int i = 0; i < NPAIRS; i++) {
			uint8_t *a = s[0].buf + (size_t)i * REGION,
				*b = s[1].buf + (size_t)i * REGION;
			struct ibv_sge rs[2] = {
			    {(uintptr_t)b, MAXSZ, s[1].mr->lkey},
			    {(uintptr_t)(a + 3 * MAXSZ), MAXSZ, s[0].mr->lkey},
			};
			struct ibv_recv_wr rw[2] = {
			    {.wr_id = (uint64_t)i, .sg_list = &rs[0], .num_sge = 1},
			    {.wr_id = (uint64_t)i, .sg_list = &rs[1], .num_sge = 1},
			};
			struct ibv_sge ss[4] = {
			    {(uintptr_t)a, sz[i * 4], s[0].mr->lkey},
			    {(uintptr_t)(a + MAXSZ), sz[i * 4 + 1], s[0].mr->lkey},
			    {(uintptr_t)(a + 2 * MAXSZ), sz[i * 4 + 2], s[0].mr->lkey},
			    {(uintptr_t)(b + 3 * MAXSZ), sz[i * 4 + 3], s[1].mr->lkey},
			};
			struct ibv_send_wr sw[4] = {
			    {.wr_id = 0,
			     .sg_list = &ss[0],
			     .num_sge = 1,
			     .opcode = IBV_WR_SEND,
			     .send_flags = IBV_SEND_SIGNALED,
			     .next = &sw[1]},
			    {.wr_id = 1,
			     .sg_list = &ss[1],
			     .num_sge = 1,
			     .opcode = IBV_WR_RDMA_WRITE,
			     .send_flags = IBV_SEND_SIGNALED,
			     .wr.rdma = {(uintptr_t)(b + MAXSZ), s[1].mr->rkey},
			     .next = &sw[2]},
			    {.wr_id = 2,
			     .sg_list = &ss[2],
			     .num_sge = 1,
			     .opcode = IBV_WR_RDMA_READ,
			     .send_flags = IBV_SEND_SIGNALED,
			     .wr.rdma = {(uintptr_t)(b + 2 * MAXSZ), s[1].mr->rkey}},
			    {.wr_id = 3,
			     .sg_list = &ss[3],
			     .num_sge = 1,
			     .opcode = IBV_WR_SEND,
			     .send_flags = IBV_SEND_SIGNALED},
			};
			struct ibv_recv_wr *rbad;
			struct ibv_send_wr *sbad;

			CHECK(!ibv_post_recv(qp[i][1], &rw[0], &rbad) &&
				  !ibv_post_recv(qp[i][0], &rw[1], &rbad),
			      "pair %d: post_recv", i);
			CHECK(!ibv_post_send(qp[i][0], &sw[0], &sbad) &&
				  !ibv_post_send(qp[i][1], &sw[3], &sbad),
			      "pair %d: post_send", i);
		}
		CHECK(!fu_poll_all(cqs, want, 4, is_recv, lens), "round %d: completions", round);
		t = fu_now() - t;
		t_traffic += t;
		for (int i = 0; i < NPAIRS; i++) {
			uint8_t *a = s[0].buf + (size_t)i * REGION,
				*b = s[1].buf + (size_t)i * REGION;
			const struct {
				const uint8_t *dst, *src;
				uint32_t n;
				const char *what;
			} v[4] = {
			    {b, a, sz[i * 4], "SEND A->B"},
			    {b + MAXSZ, a + MAXSZ, sz[i * 4 + 1], "WRITE"},
			    {a + 2 * MAXSZ, b + 2 * MAXSZ, sz[i * 4 + 2], "READ"},
			    {a + 3 * MAXSZ, b + 3 * MAXSZ, sz[i * 4 + 3], "SEND B->A"},
			};

			for (int k = 0; k < 4; k++) {
				bool guard = true;

				for (uint32_t g = 0; g < GUARD_SZ; g++)
					guard &= v[k].dst[v[k].n + g] == 0xee;
				CHECK(!memcmp(v[k].dst, v[k].src, v[k].n) && guard,
				      "round %d pair %d: %s of %u bytes differs%s", round, i,
				      v[k].what, v[k].n, guard ? "" : " (past its end)");
				bytes += v[k].n;
			}
		}
		printf("1024 QPs round %d: %d WRs (SEND both ways, WRITE, READ), %s in %.3f s\n",
		       round, 4 * NPAIRS, failed == f0 ? "all verified" : "FAILED", t);
	}
	printf("1024 QPs: %.1f MB verified in %.3f s of traffic (%.0f MB/s, %.0f WRs/s)\n",
	       bytes / 1e6, t_traffic, bytes / 1e6 / t_traffic, ROUNDS * 4 * NPAIRS / t_traffic);
out:
	t0 = fu_now();
	for (int i = 0; i < created; i++)
		for (int k = 0; k < 2; k++)
			CHECK(!ibv_destroy_qp(qp[i][k]), "destroy QP %d/%d", i, k);
	printf("1024 QPs: destroyed in %.3f s\n", fu_now() - t0);
	fu_side_close(&s[0]);
	fu_side_close(&s[1]);
	free(qp);
	free(sz);
	free(lenA);
	free(lenB);
}

/* ---- queues filled to max_qp_wr ---- */

#define SMALL 64u

static void full_queues(void)
{
	struct fu_side s[2];
	struct ibv_device_attr da;
	struct ibv_qp *q[2] = {NULL, NULL};
	struct fu_qp_opts o = fu_default_opts();
	struct ibv_qp_cap cap = {.max_send_sge = 1, .max_recv_sge = 1};
	struct ibv_send_wr *sw = NULL, *sbad = NULL;
	struct ibv_recv_wr *rw = NULL, *rbad = NULL;
	struct ibv_sge *ss = NULL, *rs = NULL;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	uint32_t n, nsend = 0, *rlen = NULL;
	size_t area;
	long rss0 = fu_status_kb("VmRSS");
	double t;
	int err;

	memset(s, 0, sizeof(s));
	{
		struct ibv_context *c = fu_open(NULL);

		if (!c || ibv_query_device(c, &da)) {
			CHECK(0, "query_device");
			if (c)
				ibv_close_device(c);
			return;
		}
		ibv_close_device(c);
	}
	n = (uint32_t)da.max_qp_wr;
	CHECK(n >= 1024 && (int)n <= da.max_cqe, "max_qp_wr %u, max_cqe %d", n, da.max_cqe);
	area = (size_t)n * SMALL;
	/* each side: SEND sources / receive buffers, WRITE, READ areas */
	if (fu_side_open(&s[0], 3 * area, (int)n) || fu_side_open(&s[1], 3 * area, (int)n)) {
		CHECK(0, "open: %s", strerror(errno));
		goto out;
	}
	cap.max_send_wr = cap.max_recv_wr = n;
	if (fu_pair_create(s, q, &cap, &o)) {
		CHECK(0, "QPs with max_send_wr = max_recv_wr = %u: %s", n, strerror(errno));
		goto out;
	}
	CHECK(!ibv_query_qp(q[0], &qa, IBV_QP_CAP, &qia) && qa.cap.max_send_wr >= n &&
		  qa.cap.max_recv_wr >= n,
	      "query_qp cap %u/%u", qa.cap.max_send_wr, qa.cap.max_recv_wr);
	printf("max_qp_wr %u: QP pair created, RSS +%ld KiB\n", n, fu_status_kb("VmRSS") - rss0);
	sw = calloc(n + 1, sizeof(*sw));
	rw = calloc(n + 1, sizeof(*rw));
	ss = calloc(n + 1, sizeof(*ss));
	rs = calloc(n + 1, sizeof(*rs));
	rlen = calloc(n + 1, sizeof(*rlen));
	if (!sw || !rw || !ss || !rs || !rlen) {
		CHECK(0, "out of memory");
		goto out;
	}
	/* B's receive queue: n receives, then one too many in the same chain */
	for (uint32_t i = 0; i <= n; i++) {
		rs[i] = (struct ibv_sge){(uintptr_t)(s[1].buf + (size_t)(i % n) * SMALL), SMALL,
					 s[1].mr->lkey};
		rw[i] = (struct ibv_recv_wr){
		    .wr_id = i, .sg_list = &rs[i], .num_sge = 1, .next = i < n ? &rw[i + 1] : NULL};
	}
	err = ibv_post_recv(q[1], rw, &rbad);
	CHECK(err == ENOMEM && rbad == &rw[n], "post_recv of max_qp_wr + 1: %s, bad_wr %td",
	      strerror(err), rbad ? rbad - rw : -1);
	/* A's send queue: SEND, WRITE, READ, WRITE, ... n of them, plus one */
	memset(s[0].buf, 0, 3 * area);
	memset(s[1].buf, 0, 3 * area);
	for (uint32_t i = 0; i <= n; i++) {
		uint8_t *a = s[0].buf + (size_t)(i % n) * SMALL;
		uint8_t *b = s[1].buf + (size_t)(i % n) * SMALL;
		enum ibv_wr_opcode op = i % 3 == 0   ? IBV_WR_SEND
					: i % 3 == 1 ? IBV_WR_RDMA_WRITE
						     : IBV_WR_RDMA_READ;
		uint32_t len = 1 + (uint32_t)(i * 7919u % SMALL);

		sw[i] = (struct ibv_send_wr){.wr_id = i,
					     .sg_list = &ss[i],
					     .num_sge = 1,
					     .opcode = op,
					     .send_flags = IBV_SEND_SIGNALED,
					     .next = i < n ? &sw[i + 1] : NULL};
		if (op == IBV_WR_SEND) {
			/* SEND number k lands in receive k: B's first area */
			fill_pattern(a, len, i);
			ss[i] = (struct ibv_sge){(uintptr_t)a, len, s[0].mr->lkey};
			rlen[nsend] = len;
			if (i < n)
				nsend++;
		} else if (op == IBV_WR_RDMA_WRITE) {
			fill_pattern(a + area, len, i);
			ss[i] = (struct ibv_sge){(uintptr_t)(a + area), len, s[0].mr->lkey};
			sw[i].wr.rdma.remote_addr = (uintptr_t)(b + area);
			sw[i].wr.rdma.rkey = s[1].mr->rkey;
		} else {
			fill_pattern(b + 2 * area, len, i);
			ss[i] = (struct ibv_sge){(uintptr_t)(a + 2 * area), len, s[0].mr->lkey};
			sw[i].wr.rdma.remote_addr = (uintptr_t)(b + 2 * area);
			sw[i].wr.rdma.rkey = s[1].mr->rkey;
		}
	}
	t = fu_now();
	err = ibv_post_send(q[0], sw, &sbad);
	CHECK(err == ENOMEM && sbad == &sw[n], "post_send of max_qp_wr + 1: %s, bad_wr %td",
	      strerror(err), sbad ? sbad - sw : -1);
	{
		struct ibv_cq *cqs[2] = {s[0].scq, s[1].rcq};
		const int want[2] = {(int)n, (int)nsend};
		const bool is_recv[2] = {false, true};
		const uint32_t *lens[2] = {NULL, rlen};

		CHECK(!fu_poll_all(cqs, want, 2, is_recv, lens), "%u WRs: completions", n);
	}
	t = fu_now() - t;
	/* every message where it belongs */
	{
		uint32_t k = 0, bad = 0;

		for (uint32_t i = 0; i < n; i++) {
			uint8_t *a = s[0].buf + (size_t)i * SMALL,
				*b = s[1].buf + (size_t)i * SMALL;
			uint32_t len = 1 + (uint32_t)(i * 7919u % SMALL);

			if (i % 3 == 0)
				bad += !!memcmp(s[1].buf + (size_t)k++ * SMALL, a, len);
			else if (i % 3 == 1)
				bad += !!memcmp(b + area, a + area, len);
			else
				bad += !!memcmp(a + 2 * area, b + 2 * area, len);
		}
		CHECK(bad == 0, "%u of %u messages differ", bad, n);
	}
	printf("max_qp_wr %u: send queue and receive queue filled (WR %u refused with ENOMEM), "
	       "%u WRs (%u SENDs) completed and verified in %.3f s\n",
	       n, n + 1, n, nsend, t);
out:
	for (int i = 0; i < 2; i++)
		if (q[i])
			CHECK(!ibv_destroy_qp(q[i]), "destroy_qp");
	fu_side_close(&s[0]);
	fu_side_close(&s[1]);
	free(sw);
	free(rw);
	free(ss);
	free(rs);
	free(rlen);
}

/* ---- CQ overflow ---- */

/* Wait for IBV_EVENT_CQ_ERR for cq on ctx's async fd (other events, like
 * QP errors, are acknowledged and skipped). */
static bool wait_cq_err(struct ibv_context *ctx, struct ibv_cq *cq, double timeout_s)
{
	double end = fu_now() + timeout_s;

	for (;;) {
		struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
		struct ibv_async_event ev;
		int ms = (int)((end - fu_now()) * 1000);

		if (ms <= 0 || poll(&pfd, 1, ms) <= 0)
			return false;
		if (ibv_get_async_event(ctx, &ev))
			return false;
		ibv_ack_async_event(&ev);
		if (ev.event_type == IBV_EVENT_CQ_ERR) {
			if (ev.element.cq == cq)
				return true;
			printf("  CQ_ERR for another CQ %p (want %p)\n", (void *)ev.element.cq,
			       (void *)cq);
		}
	}
}

static void cq_overflow(void)
{
	const int cqe = 8, nwr = 64;
	struct fu_side s[2];
	struct ibv_qp *q[2] = {NULL, NULL}, *q2[2] = {NULL, NULL};
	struct fu_qp_opts o = fu_default_opts();
	struct ibv_qp_cap cap = {
	    .max_send_wr = 128, .max_recv_wr = 128, .max_send_sge = 1, .max_recv_sge = 1};
	struct ibv_wc wc[128];
	int n;

	if (fu_side_open(&s[0], 1 << 20, cqe) || fu_side_open(&s[1], 1 << 20, cqe)) {
		CHECK(0, "open: %s", strerror(errno));
		goto out;
	}
	CHECK(s[0].scq->cqe >= cqe, "cq->cqe %d", s[0].scq->cqe);
	if (fu_pair_create(s, q, &cap, &o)) {
		CHECK(0, "pair: %s", strerror(errno));
		goto out;
	}
	/* nwr signaled SENDs into a send CQ and a receive CQ of cqe entries,
	 * nobody polling */
	for (int i = 0; i < nwr; i++) {
		struct ibv_sge rs = {(uintptr_t)s[1].buf + (size_t)i * 1024, 1024, s[1].mr->lkey};
		struct ibv_recv_wr rw = {.wr_id = (uint64_t)i, .sg_list = &rs, .num_sge = 1}, *rb;

		CHECK(!ibv_post_recv(q[1], &rw, &rb), "post_recv");
	}
	for (int i = 0; i < nwr; i++) {
		struct ibv_sge ss = {(uintptr_t)s[0].buf + (size_t)i * 1024, 1024, s[0].mr->lkey};
		struct ibv_send_wr sw = {.wr_id = (uint64_t)i,
					 .sg_list = &ss,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED},
				   *sb;

		CHECK(!ibv_post_send(q[0], &sw, &sb), "post_send");
	}
	/* the progress threads deliver; both CQs overrun */
	CHECK(wait_cq_err(s[0].ctx, s[0].scq, 10), "no IBV_EVENT_CQ_ERR for the send CQ");
	CHECK(wait_cq_err(s[1].ctx, s[1].rcq, 10), "no IBV_EVENT_CQ_ERR for the receive CQ");
	/* what the CQs hold is still readable, never more than they can hold */
	n = ibv_poll_cq(s[0].scq, 128, wc);
	CHECK(n >= 0 && n <= s[0].scq->cqe, "send CQ returned %d (cqe %d)", n, s[0].scq->cqe);
	n = ibv_poll_cq(s[1].rcq, 128, wc);
	CHECK(n >= 0 && n <= s[1].rcq->cqe, "receive CQ returned %d (cqe %d)", n, s[1].rcq->cqe);
	for (int i = 0; i < 2; i++) {
		CHECK(!ibv_destroy_qp(q[i]), "destroy_qp after the overflow");
		q[i] = NULL;
	}
	/* fresh CQs and QPs on the same contexts work */
	for (int i = 0; i < 2; i++) {
		CHECK(!ibv_destroy_cq(s[i].scq) && !ibv_destroy_cq(s[i].rcq), "destroy_cq");
		s[i].scq = ibv_create_cq(s[i].ctx, 256, NULL, NULL, 0);
		s[i].rcq = ibv_create_cq(s[i].ctx, 256, NULL, NULL, 0);
	}
	if (!s[0].scq || !s[0].rcq || !s[1].scq || !s[1].rcq || fu_pair_create(s, q2, &cap, &o)) {
		CHECK(0, "a new pair after the overflow");
		goto out;
	}
	{
		struct ibv_sge ss = {(uintptr_t)s[0].buf, 4096, s[0].mr->lkey};
		struct ibv_send_wr sw = {.wr_id = 7,
					 .sg_list = &ss,
					 .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED,
					 .wr.rdma = {(uintptr_t)s[1].buf + 8192, s[1].mr->rkey}},
				   *sb;
		struct ibv_cq *cqs[1] = {s[0].scq};
		const int want[1] = {1};
		const bool is_recv[1] = {false};
		const uint32_t *lens[1] = {NULL};

		fill_pattern(s[0].buf, 4096, 4242);
		CHECK(!ibv_post_send(q2[0], &sw, &sb), "post_send on the new pair");
		CHECK(!fu_poll_all(cqs, want, 1, is_recv, lens) &&
			  !memcmp(s[1].buf + 8192, s[0].buf, 4096),
		      "WRITE on the new pair");
	}
	printf("CQ overflow: %d SENDs into CQs of %d entries: IBV_EVENT_CQ_ERR on both "
	       "contexts, no crash; a new pair on the same contexts works\n",
	       nwr, cqe);
out:
	for (int i = 0; i < 2; i++) {
		if (q[i])
			ibv_destroy_qp(q[i]);
		if (q2[i])
			ibv_destroy_qp(q2[i]);
	}
	fu_side_close(&s[0]);
	fu_side_close(&s[1]);
}

int main(void)
{
	double t = fu_now();

	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(115);
	many_qps();
	full_queues();
	cq_overflow();
	printf("VmHWM %ld KiB, %.1f s\n", fu_status_kb("VmHWM"), fu_now() - t);
	return finish("test_load");
}

/* Hostile and wrong use of the verbs API (docs/robustness.md).
 *
 * Every misuse the man pages let a provider refuse must be refused with the
 * documented error (NULL + errno, or the error number), leave the objects
 * as they were, and be explained by a line at UROCE_LOG=debug: the test
 * captures stderr around each call and checks that a debug line was
 * written.  Covered: NULL and out-of-range arguments, destroying objects
 * still in use (EBUSY), posting in the wrong QP state, overflowing the send
 * and receive queues, WR lists with a bad WR in the middle, SGE/inline
 * limits, opcodes a transport does not have, and modify_qp with wrong
 * attribute masks or values.
 *
 * Not covered, on purpose: using an object after destroying it (a freed
 * ibv_qp/ibv_cq/...) in verbs other than destroy.  The verbs API hands out
 * plain pointers; as with every libibverbs provider, a use after free is
 * undefined behaviour that the library cannot detect safely.  Destroying
 * an object twice is refused with ENOENT (test_fidelity.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "uroce.h"

#include "check.h"

/* ---- capturing the library's debug log ---- */

static char logbuf[16384];
static FILE *cap;
static int saved_stderr = -1;

/* stderr goes to a file and the log level to debug until cap_end() */
static void cap_begin(void)
{
	fflush(stderr);
	cap = tmpfile();
	saved_stderr = dup(2);
	if (cap)
		dup2(fileno(cap), 2);
	uroce_log_level = UROCE_LOG_DEBUG;
}

static const char *cap_end(void)
{
	size_t n = 0;

	uroce_log_level = UROCE_LOG_WARN;
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	logbuf[0] = 0;
	if (cap) {
		rewind(cap);
		n = fread(logbuf, 1, sizeof(logbuf) - 1, cap);
		fclose(cap);
	}
	logbuf[n] = 0;
	return logbuf;
}

static bool explained(const char *log, const char *want)
{
	return strstr(log, " debug ") && (!want || strstr(log, want));
}

/* A call returning a pointer: NULL with errno err, explained. */
#define EXPECT_NULL(expr, err, want, what)                                                         \
	do {                                                                                       \
		const void *p_;                                                                    \
		int e_;                                                                            \
		const char *l_;                                                                    \
                                                                                                   \
		cap_begin();                                                                       \
		errno = 0;                                                                         \
		p_ = (expr);                                                                       \
		e_ = errno;                                                                        \
		l_ = cap_end();                                                                    \
		CHECK(!p_ && e_ == (err), "%s: got %p errno %d (%s), want NULL %s", what, p_, e_,  \
		      strerror(e_), strerror(err));                                                \
		CHECK(explained(l_, want), "%s: not explained at debug (want \"%s\"): %s", what,   \
		      want ? want : "", l_);                                                       \
	} while (0)

/* A call returning an error number. */
#define EXPECT_RET(expr, err, want, what)                                                          \
	do {                                                                                       \
		int r_;                                                                            \
		const char *l_;                                                                    \
                                                                                                   \
		cap_begin();                                                                       \
		r_ = (expr);                                                                       \
		l_ = cap_end();                                                                    \
		CHECK(r_ == (err), "%s: returned %d (%s), want %s", what, r_, strerror(r_),        \
		      strerror(err));                                                              \
		CHECK(explained(l_, want), "%s: not explained at debug (want \"%s\"): %s", what,   \
		      want ? want : "", l_);                                                       \
	} while (0)

/* ---- objects ---- */

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gid;
static uint8_t *buf;
static struct ibv_mr *mr;
static int sink;
static uint32_t sink_qpn;

#define BUF_LEN 65536

static struct ibv_qp *make_qp(enum ibv_qp_type type, uint32_t swr, uint32_t rwr)
{
	struct ibv_qp_init_attr ia = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = type,
	    .cap = {.max_send_wr = swr,
		    .max_recv_wr = rwr,
		    .max_send_sge = 4,
		    .max_recv_sge = 4,
		    .max_inline_data = 64},
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (!qp) {
		printf("ibv_create_qp: %s\n", strerror(errno));
		exit(1);
	}
	return qp;
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state st, uint32_t dest)
{
	struct ibv_qp_attr a;
	bool ud = qp->qp_type == IBV_QPT_UD;
	int err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = 0x11;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	err = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				(ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
	if (err || st == IBV_QPS_INIT)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 100;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ud)
		err = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	else if (qp->qp_type == IBV_QPT_UC)
		err = ibv_modify_qp(qp, &a,
				    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN);
	else
		err = ibv_modify_qp(qp, &a,
				    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER);
	if (err || st == IBV_QPS_RTR)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 100;
	a.timeout = dest == sink_qpn ? 0 : 14; /* the sink never answers */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ud || qp->qp_type == IBV_QPT_UC)
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	return ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) ? -1 : (int)a.qp_state;
}

static int drain(struct ibv_cq *c, struct ibv_wc *wc, int max, int ms)
{
	int n = 0;

	for (int t = 0; t < ms * 2 && n < max; t++) {
		int r = ibv_poll_cq(c, max - n, wc + n);

		if (r > 0)
			n += r;
		else
			usleep(500);
	}
	return n;
}

/* ---- NULL and out-of-range arguments ---- */

static void test_null_and_ranges(void)
{
	struct ibv_qp_init_attr ia = {.send_cq = cq,
				      .recv_cq = cq,
				      .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 1, .max_recv_wr = 1}};
	struct ibv_ah_attr ah = {.port_num = 1};
	struct ibv_port_attr pa;
	struct ibv_device_attr da;
	struct ibv_qp_attr qa;
	void *hole;
	long pg = sysconf(_SC_PAGESIZE);

	EXPECT_NULL(ibv_open_device(NULL), EINVAL, "device", "open_device(NULL)");
	EXPECT_RET(ibv_close_device(NULL), EINVAL, NULL, "close_device(NULL)");
	EXPECT_NULL(ibv_alloc_pd(NULL), EINVAL, NULL, "alloc_pd(NULL)");
	EXPECT_RET(ibv_dealloc_pd(NULL), EINVAL, NULL, "dealloc_pd(NULL)");
	EXPECT_RET(ibv_query_device(NULL, &da), EINVAL, NULL, "query_device(NULL)");
	EXPECT_RET(ibv_query_port(ctx, 2, &pa), EINVAL, "port", "query_port(port 2)");

	/* ibv_reg_mr(3) */
	EXPECT_NULL(ibv_reg_mr(NULL, buf, 4096, IBV_ACCESS_LOCAL_WRITE), EINVAL, NULL,
		    "reg_mr(NULL pd)");
	EXPECT_NULL(ibv_reg_mr(pd, NULL, 4096, IBV_ACCESS_LOCAL_WRITE), EFAULT, NULL,
		    "reg_mr(NULL addr)");
	EXPECT_NULL(ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE), EINVAL, "length",
		    "reg_mr(length 0)");
	EXPECT_NULL(ibv_reg_mr(pd, buf, (size_t)1 << 41, IBV_ACCESS_LOCAL_WRITE), EINVAL, "length",
		    "reg_mr(length > max_mr_size)");
	hole =
	    mmap(NULL, (size_t)pg * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap((char *)hole + pg, (size_t)pg); /* a hole in the middle */
	EXPECT_NULL(ibv_reg_mr(pd, hole, (size_t)pg * 3, IBV_ACCESS_LOCAL_WRITE), EFAULT, "mapped",
		    "reg_mr(range with an unmapped page)");
	munmap(hole, (size_t)pg);
	munmap((char *)hole + 2 * pg, (size_t)pg);
	EXPECT_NULL(ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE), EINVAL, "LOCAL_WRITE",
		    "reg_mr(REMOTE_WRITE without LOCAL_WRITE)");
	EXPECT_NULL(ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_ATOMIC), EINVAL, "LOCAL_WRITE",
		    "reg_mr(REMOTE_ATOMIC without LOCAL_WRITE)");
	/* (bits 20-29 are IBV_ACCESS_OPTIONAL_RANGE: may be ignored) */
	EXPECT_NULL(ibv_reg_mr(pd, buf, 4096, 1 << 14), EINVAL, "access",
		    "reg_mr(unknown access bit)");
	EXPECT_RET(ibv_dereg_mr(NULL), EINVAL, NULL, "dereg_mr(NULL)");

	/* ibv_create_cq(3) */
	EXPECT_NULL(ibv_create_cq(NULL, 1, NULL, NULL, 0), EINVAL, NULL, "create_cq(NULL)");
	EXPECT_NULL(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL, "cqe", "create_cq(cqe 0)");
	EXPECT_NULL(ibv_create_cq(ctx, -5, NULL, NULL, 0), EINVAL, "cqe", "create_cq(cqe -5)");
	EXPECT_NULL(ibv_create_cq(ctx, UROCE_MAX_CQE + 1, NULL, NULL, 0), EINVAL, "cqe",
		    "create_cq(cqe > max_cqe)");
	EXPECT_NULL(ibv_create_cq(ctx, 4, NULL, NULL, 1), EINVAL, "comp_vector",
		    "create_cq(comp_vector 1)");
	EXPECT_RET(ibv_destroy_cq(NULL), EINVAL, NULL, "destroy_cq(NULL)");
	EXPECT_NULL(ibv_create_comp_channel(NULL), EINVAL, NULL, "create_comp_channel(NULL)");
	EXPECT_RET(ibv_destroy_comp_channel(NULL), EINVAL, NULL, "destroy_comp_channel(NULL)");
	{
		struct ibv_wc wc;

		CHECK(ibv_poll_cq(cq, -1, &wc) < 0, "poll_cq(num_entries -1) fails");
	}

	/* ibv_create_qp(3) */
	EXPECT_NULL(ibv_create_qp(NULL, &ia), EINVAL, NULL, "create_qp(NULL pd)");
	EXPECT_NULL(ibv_create_qp(pd, NULL), EINVAL, NULL, "create_qp(NULL attr)");
	ia.send_cq = NULL;
	EXPECT_NULL(ibv_create_qp(pd, &ia), EINVAL, "send_cq", "create_qp(no send_cq)");
	ia.send_cq = cq;
	ia.recv_cq = NULL;
	EXPECT_NULL(ibv_create_qp(pd, &ia), EINVAL, "recv_cq", "create_qp(no recv_cq)");
	ia.recv_cq = cq;
	ia.cap.max_send_wr = UROCE_MAX_QP_WR + 1;
	EXPECT_NULL(ibv_create_qp(pd, &ia), EINVAL, "max_send_wr", "create_qp(max_send_wr)");
	ia.cap.max_send_wr = 1;
	ia.cap.max_recv_wr = UROCE_MAX_QP_WR + 1;
	EXPECT_NULL(ibv_create_qp(pd, &ia), EINVAL, "max_recv_wr", "create_qp(max_recv_wr)");
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = UROCE_MAX_SGE + 1;
	EXPECT_NULL(ibv_create_qp(pd, &ia), EINVAL, "max_send_sge", "create_qp(max_send_sge)");
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = UROCE_MAX_SGE + 1;
	EXPECT_NULL(ibv_create_qp(pd, &ia), EINVAL, "max_recv_sge", "create_qp(max_recv_sge)");
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = UROCE_MAX_INLINE + 1;
	EXPECT_NULL(ibv_create_qp(pd, &ia), EINVAL, "max_inline_data",
		    "create_qp(max_inline_data)");
	ia.cap.max_inline_data = 0;
	ia.qp_type = IBV_QPT_RAW_PACKET;
	EXPECT_NULL(ibv_create_qp(pd, &ia), EOPNOTSUPP, "not supported", "create_qp(RAW_PACKET)");
	ia.qp_type = (enum ibv_qp_type)77;
	EXPECT_NULL(ibv_create_qp(pd, &ia), EOPNOTSUPP, "not supported", "create_qp(type 77)");
	EXPECT_RET(ibv_destroy_qp(NULL), EINVAL, NULL, "destroy_qp(NULL)");
	EXPECT_RET(ibv_modify_qp(NULL, &qa, IBV_QP_STATE), EINVAL, NULL, "modify_qp(NULL qp)");

	/* ibv_create_ah(3) */
	EXPECT_NULL(ibv_create_ah(NULL, &ah), EINVAL, NULL, "create_ah(NULL pd)");
	EXPECT_NULL(ibv_create_ah(pd, NULL), EINVAL, NULL, "create_ah(NULL attr)");
	EXPECT_NULL(ibv_create_ah(pd, &ah), EINVAL, "GRH", "create_ah(no GRH)");
	ah.is_global = 1;
	ah.grh.dgid = gid;
	ah.grh.sgid_index = 200;
	EXPECT_NULL(ibv_create_ah(pd, &ah), EINVAL, "sgid_index", "create_ah(sgid_index 200)");
	EXPECT_RET(ibv_destroy_ah(NULL), EINVAL, NULL, "destroy_ah(NULL)");
}

/* ---- objects still in use: EBUSY, and nothing destroyed ---- */

static void test_busy(void)
{
	struct ibv_pd *p = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *c = ibv_create_cq(ctx, 8, NULL, ch, 0);
	struct ibv_mr *m = ibv_reg_mr(p, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp_init_attr ia = {.send_cq = c,
				      .recv_cq = c,
				      .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 1, .max_recv_wr = 1}};
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid}};
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;

	if (!p || !ch || !c || !m) {
		CHECK(0, "setup of the EBUSY objects failed");
		return;
	}
	EXPECT_RET(ibv_dealloc_pd(p), EBUSY, "still used", "dealloc_pd with an MR");
	CHECK(!ibv_dereg_mr(m), "dereg_mr after the refusal");
	qp = ibv_create_qp(p, &ia);
	EXPECT_RET(ibv_dealloc_pd(p), EBUSY, "still used", "dealloc_pd with a QP");
	EXPECT_RET(ibv_destroy_cq(c), EBUSY, "still used", "destroy_cq used by a QP");
	EXPECT_RET(ibv_destroy_comp_channel(ch), EBUSY, "still use", "destroy_comp_channel used");
	CHECK(qp && to_state(qp, IBV_QPS_INIT, 0) == 0, "the QP still works after the refusals");
	CHECK(!ibv_destroy_qp(qp), "destroy_qp");
	ah = ibv_create_ah(p, &aa);
	CHECK(ah != NULL, "create_ah: %s", strerror(errno));
	EXPECT_RET(ibv_dealloc_pd(p), EBUSY, "still used", "dealloc_pd with an AH");
	CHECK(ah && !ibv_destroy_ah(ah), "destroy_ah");
	srq = ibv_create_srq(p, &sa);
	ia.srq = srq;
	qp = ibv_create_qp(p, &ia);
	CHECK(srq && qp && !to_state(qp, IBV_QPS_INIT, 0), "SRQ and a QP on it, in INIT");
	EXPECT_RET(ibv_destroy_srq(srq), EBUSY, "still use", "destroy_srq used by a QP");
	EXPECT_RET(ibv_dealloc_pd(p), EBUSY, "still used", "dealloc_pd with an SRQ and a QP");
	{
		struct ibv_recv_wr wr = {.wr_id = 1}, *bad = NULL;

		EXPECT_RET(ibv_post_recv(qp, &wr, &bad), EINVAL, "SRQ", "post_recv on an SRQ QP");
		CHECK(bad == &wr, "bad_wr is the WR");
	}
	CHECK(!ibv_destroy_qp(qp) && !ibv_destroy_srq(srq), "destroy QP, SRQ");
	CHECK(!ibv_destroy_cq(c), "destroy_cq once unused");
	CHECK(!ibv_destroy_comp_channel(ch), "destroy_comp_channel once unused");
	CHECK(!ibv_dealloc_pd(p), "dealloc_pd once unused");
}

/* Objects of another context, memory the MR's access cannot be granted
 * on, SRQ and XRC domain limits, over-acknowledged CQ events. */
static void test_more(void)
{
	struct ibv_context *ctx2 = ibv_open_device(ctx->device);
	struct ibv_cq *cq2 = ctx2 ? ibv_create_cq(ctx2, 4, NULL, NULL, 0) : NULL;
	struct ibv_comp_channel *ch2 = ctx2 ? ibv_create_comp_channel(ctx2) : NULL;
	struct ibv_qp_init_attr ia = {.send_cq = cq,
				      .recv_cq = cq2,
				      .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 1, .max_recv_wr = 1}};
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 0, .max_sge = 1}};
	long pg = sysconf(_SC_PAGESIZE);
	uint8_t *ro;

	CHECK(ctx2 && cq2 && ch2, "a second context");
	EXPECT_NULL(ibv_create_qp(pd, &ia), EINVAL, "context",
		    "create_qp with a CQ of another context");
	EXPECT_NULL(ibv_create_cq(ctx, 4, NULL, ch2, 0), EINVAL, "context",
		    "create_cq with a channel of another context");
	ibv_destroy_comp_channel(ch2);
	ibv_destroy_cq(cq2);
	ibv_close_device(ctx2);

	/* read-only and inaccessible memory: the kernel's get_user_pages
	 * refuses write access to the first and any access to the second;
	 * so does uroce, else a peer's WRITE would fault in the library */
	ro = mmap(NULL, (size_t)pg * 2, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT_NULL(
	    ibv_reg_mr(pd, ro, (size_t)pg * 2, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
	    EFAULT, "writable", "reg_mr(read-only memory, REMOTE_WRITE)");
	{
		struct ibv_mr *m = ibv_reg_mr(pd, ro, (size_t)pg * 2, IBV_ACCESS_REMOTE_READ);

		CHECK(m != NULL, "reg_mr(read-only memory, REMOTE_READ) works: %s",
		      strerror(errno));
		if (m) {
			int r;

			cap_begin();
			errno = 0;
			r = ibv_rereg_mr(m, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
					 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
			CHECK(r == IBV_REREG_MR_ERR_CMD && errno == EFAULT &&
				  explained(cap_end(), "writable"),
			      "rereg_mr adding LOCAL_WRITE on read-only memory: %d %s", r,
			      strerror(errno));
			ibv_dereg_mr(m);
		}
	}
	mprotect(ro + pg, (size_t)pg, PROT_NONE);
	EXPECT_NULL(ibv_reg_mr(pd, ro, (size_t)pg * 2, IBV_ACCESS_REMOTE_READ), EFAULT, "readable",
		    "reg_mr(memory with a PROT_NONE page)");
	munmap(ro, (size_t)pg * 2);

	/* SRQ limits */
	EXPECT_NULL(ibv_create_srq(pd, &sa), EINVAL, "max_wr", "create_srq(max_wr 0)");
	sa.attr.max_wr = 4;
	sa.attr.max_sge = UROCE_MAX_SGE + 1;
	EXPECT_NULL(ibv_create_srq(pd, &sa), EINVAL, "max_sge", "create_srq(max_sge 33)");
	sa.attr.max_sge = 1;
	sa.attr.srq_limit = 5;
	EXPECT_NULL(ibv_create_srq(pd, &sa), EINVAL, "srq_limit", "create_srq(srq_limit > max_wr)");

	/* an XRC domain and a CQ used by an XRC SRQ */
	{
		struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD |
							     IBV_XRCD_INIT_ATTR_OFLAGS,
						.fd = -1,
						.oflags = O_CREAT};
		struct ibv_xrcd *x = ibv_open_xrcd(ctx, &xa);
		struct ibv_cq *c = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		struct ibv_srq_init_attr_ex se = {
		    .attr = {.max_wr = 4, .max_sge = 1},
		    .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
				 IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
		    .srq_type = IBV_SRQT_XRC,
		    .pd = pd,
		    .xrcd = x,
		    .cq = c,
		};
		struct ibv_srq *s = x && c ? ibv_create_srq_ex(ctx, &se) : NULL;

		CHECK(s != NULL, "XRC SRQ: %s", strerror(errno));
		EXPECT_RET(ibv_close_xrcd(x), EBUSY, "still use", "close_xrcd with an XRC SRQ");
		EXPECT_RET(ibv_destroy_cq(c), EBUSY, "still used", "destroy_cq of an XRC SRQ");
		CHECK(s && !ibv_destroy_srq(s) && !ibv_destroy_cq(c) && !ibv_close_xrcd(x),
		      "and all can go once unused");
	}

	/* more acknowledgements than events must not hang ibv_destroy_cq */
	{
		struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
		struct ibv_cq *c = ibv_create_cq(ctx, 4, NULL, ch, 0), *ec = NULL;
		struct ibv_qp_init_attr qa = {.send_cq = c,
					      .recv_cq = c,
					      .qp_type = IBV_QPT_RC,
					      .cap = {.max_send_wr = 1, .max_recv_wr = 1}};
		struct ibv_qp *qp = ibv_create_qp(pd, &qa);
		struct ibv_recv_wr r = {.wr_id = 1}, *rb;
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		void *cctx;

		to_state(qp, IBV_QPS_INIT, 0);
		ibv_req_notify_cq(c, 0);
		ibv_post_recv(qp, &r, &rb);
		ibv_modify_qp(qp, &a, IBV_QP_STATE); /* a flush completion: an event */
		CHECK(!ibv_get_cq_event(ch, &ec, &cctx) && ec == c, "a CQ event");
		ibv_ack_cq_events(c, 3);
		ibv_destroy_qp(qp);
		alarm(20); /* a hang is a failure, not a stuck test */
		CHECK(!ibv_destroy_cq(c), "destroy_cq after over-acknowledging returns");
		alarm(0);
		ibv_destroy_comp_channel(ch);
	}
}

/* ---- posting ---- */

static void empty_cq(void)
{
	struct ibv_wc wc[16];

	while (ibv_poll_cq(cq, 16, wc) > 0)
		;
}

static struct ibv_send_wr send_wr(struct ibv_sge *sg, uint64_t id)
{
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED};

	return wr;
}

/* Posting to a QP that is not ready: EINVAL, bad_wr the first WR. */
static void test_post_states(void)
{
	static const enum ibv_qp_state st[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR};
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};

	for (int t = 0; t < 2; t++) {
		enum ibv_qp_type type = t ? IBV_QPT_UD : IBV_QPT_RC;

		for (unsigned int i = 0; i < 3; i++) {
			struct ibv_qp *qp = make_qp(type, 4, 4);
			struct ibv_send_wr wr[2] = {send_wr(&sg, 1), send_wr(&sg, 2)}, *bad = NULL;
			struct ibv_recv_wr rwr = {.wr_id = 3, .sg_list = &sg, .num_sge = 1},
					   *rbad = NULL;
			char what[64];

			if (st[i] != IBV_QPS_RESET && to_state(qp, st[i], sink_qpn)) {
				CHECK(0, "moving the QP to %d", st[i]);
				continue;
			}
			wr[0].next = &wr[1];
			snprintf(what, sizeof(what), "%s post_send in %s", t ? "UD" : "RC",
				 st[i] == IBV_QPS_RESET	 ? "RESET"
				 : st[i] == IBV_QPS_INIT ? "INIT"
							 : "RTR");
			EXPECT_RET(ibv_post_send(qp, wr, &bad), EINVAL, "RTS", what);
			CHECK(bad == &wr[0], "%s: bad_wr is the first WR", what);
			CHECK(to_uqp(qp)->sq.head == 0, "%s: nothing queued", what);
			if (st[i] == IBV_QPS_RESET) {
				EXPECT_RET(ibv_post_recv(qp, &rwr, &rbad), EINVAL, "RESET",
					   "post_recv in RESET");
				CHECK(rbad == &rwr, "post_recv in RESET: bad_wr is the WR");
			} else {
				/* IBTA 10.8.2: receives may be posted from INIT on */
				CHECK(!ibv_post_recv(qp, &rwr, &rbad), "post_recv in %s works",
				      what);
			}
			ibv_destroy_qp(qp);
		}
	}
	{
		struct ibv_wc wc[4];

		while (ibv_poll_cq(cq, 4, wc) > 0)
			;
	}
}

/* Queue overflow: ENOMEM at the first WR that does not fit. */
static void test_overflow(void)
{
	struct ibv_qp *qp = make_qp(IBV_QPT_RC, 4, 4);
	struct ibv_send_wr wr[6], *bad = NULL;
	struct ibv_recv_wr rwr[6], *rbad = NULL;
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
	struct ibv_wc wc[16];

	empty_cq();

	to_state(qp, IBV_QPS_RTS, sink_qpn); /* nothing is ever acknowledged */
	for (int i = 0; i < 6; i++) {
		wr[i] = send_wr(&sg, (uint64_t)i);
		wr[i].next = i < 5 ? &wr[i + 1] : NULL;
		rwr[i] = (struct ibv_recv_wr){.wr_id = (uint64_t)i,
					      .sg_list = &sg,
					      .num_sge = 1,
					      .next = i < 5 ? &rwr[i + 1] : NULL};
	}
	EXPECT_RET(ibv_post_send(qp, wr, &bad), ENOMEM, "full", "6 sends on a 4-deep SQ");
	CHECK(bad == &wr[4], "bad_wr is the 5th WR (got index %ld)", bad ? (long)(bad - wr) : -1L);
	CHECK(to_uqp(qp)->sq.head - to_uqp(qp)->sq.tail == 4, "the first 4 are queued");
	wr[5].next = NULL;
	EXPECT_RET(ibv_post_send(qp, &wr[5], &bad), ENOMEM, "full", "a send on a full SQ");
	CHECK(bad == &wr[5], "bad_wr is that WR");
	EXPECT_RET(ibv_post_recv(qp, rwr, &rbad), ENOMEM, "full", "6 receives on a 4-deep RQ");
	CHECK(rbad == &rwr[4], "bad_wr is the 5th receive (got index %ld)",
	      rbad ? (long)(rbad - rwr) : -1L);
	CHECK(to_uqp(qp)->rq.head - to_uqp(qp)->rq.tail == 4, "the first 4 receives are posted");
	/* in ERR every WR is accepted and flushed (IBTA 10.3.1) */
	{
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

		ibv_modify_qp(qp, &a, IBV_QP_STATE);
	}
	CHECK(drain(cq, wc, 16, 200) == 8, "4 sends and 4 receives flushed");
	wr[0].next = NULL;
	CHECK(!ibv_post_send(qp, wr, &bad), "post_send in ERR is accepted");
	CHECK(drain(cq, wc, 16, 200) == 1 && wc[0].status == IBV_WC_WR_FLUSH_ERR,
	      "and completes flushed");
	ibv_destroy_qp(qp);
}

/* A WR list with a bad WR in the middle: the ones before it are posted and
 * complete, bad_wr points at it, the ones after it are not posted. */
static void test_bad_wr_in_list(void)
{
	struct ibv_qp *a = make_qp(IBV_QPT_RC, 16, 16), *b = make_qp(IBV_QPT_RC, 16, 16);
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
	struct ibv_sge rsg = {.addr = (uintptr_t)buf + 4096, .length = 64, .lkey = mr->lkey};
	struct ibv_sge many[5];
	struct ibv_send_wr wr[5], *bad = NULL;
	struct ibv_wc wc[16];
	int n, got_send = 0, got_recv = 0;

	empty_cq();

	to_state(a, IBV_QPS_RTS, b->qp_num);
	to_state(b, IBV_QPS_RTS, a->qp_num);
	for (int i = 0; i < 8; i++) {
		struct ibv_recv_wr r = {.wr_id = 100u + (unsigned int)i,
					.sg_list = &rsg,
					.num_sge = 1},
				   *rb;

		ibv_post_recv(b, &r, &rb);
	}
	for (int i = 0; i < 5; i++) {
		many[i] = sg;
		wr[i] = send_wr(&sg, (uint64_t)i);
		wr[i].next = i < 4 ? &wr[i + 1] : NULL;
	}
	wr[2].sg_list = many;
	wr[2].num_sge = 5; /* max_send_sge is 4 */
	EXPECT_RET(ibv_post_send(a, wr, &bad), EINVAL, "num_sge", "WR 2 of 5 has too many SGEs");
	CHECK(bad == &wr[2], "bad_wr is WR 2 (got index %ld)", bad ? (long)(bad - wr) : -1L);
	n = drain(cq, wc, 16, 500);
	for (int i = 0; i < n; i++) {
		if (wc[i].qp_num == a->qp_num) {
			CHECK(wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)got_send,
			      "send completion %d: wr_id %llu %s", got_send,
			      (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
			got_send++;
		} else {
			got_recv++;
		}
	}
	usleep(20000);
	n += drain(cq, wc, 16, 20);
	CHECK(got_send == 2 && got_recv == 2 && n == 4,
	      "WRs 0 and 1 sent and received, 3 and 4 not: %d sends, %d receives, %d in all",
	      got_send, got_recv, n);

	/* other bad WRs, each alone */
	{
		struct ibv_send_wr w = send_wr(&sg, 9);
		uint8_t big[UROCE_MAX_INLINE + 1];
		struct ibv_sge isg = {.addr = (uintptr_t)big, .length = 65};

		memset(big, 1, sizeof(big));
		w.send_flags |= IBV_SEND_INLINE;
		w.sg_list = &isg;
		EXPECT_RET(ibv_post_send(a, &w, &bad), EINVAL, "max_inline_data",
			   "65 inline bytes, max_inline_data 64");
		w = send_wr(&sg, 9);
		w.opcode = IBV_WR_RDMA_READ;
		w.send_flags |= IBV_SEND_INLINE;
		EXPECT_RET(ibv_post_send(a, &w, &bad), EINVAL, "INLINE", "RDMA READ with INLINE");
		w = send_wr(&isg, 9);
		isg.length = 4;
		w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		EXPECT_RET(ibv_post_send(a, &w, &bad), EINVAL, "8-byte",
			   "atomic with a 4-byte SGE");
		w = send_wr(&sg, 9);
		w.opcode = (enum ibv_wr_opcode)99;
		EXPECT_RET(ibv_post_send(a, &w, &bad), EINVAL, "opcode", "opcode 99");
		w = send_wr(&sg, 9);
		w.num_sge = -1;
		EXPECT_RET(ibv_post_send(a, &w, &bad), EINVAL, "num_sge", "num_sge -1");
	}
	{
		struct ibv_recv_wr r = {.wr_id = 1, .sg_list = many, .num_sge = 5}, *rb = NULL;

		EXPECT_RET(ibv_post_recv(b, &r, &rb), EINVAL, "num_sge",
			   "receive with 5 SGEs, max_recv_sge 4");
		CHECK(rb == &r, "bad_wr is the receive");
	}
	CHECK(qp_state(a) == IBV_QPS_RTS && qp_state(b) == IBV_QPS_RTS,
	      "refused WRs leave the QPs in RTS");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
}

/* Opcodes the transport does not have. */
static void test_transport_opcodes(void)
{
	struct ibv_qp *ud = make_qp(IBV_QPT_UD, 8, 8), *uc = make_qp(IBV_QPT_UC, 8, 8);
	struct ibv_sge sg = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid}};
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	static const enum ibv_wr_opcode ud_bad[] = {
	    IBV_WR_RDMA_WRITE,	       IBV_WR_RDMA_WRITE_WITH_IMM,  IBV_WR_RDMA_READ,
	    IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND_WITH_INV,
	    IBV_WR_LOCAL_INV};
	static const enum ibv_wr_opcode uc_bad[] = {IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
						    IBV_WR_ATOMIC_FETCH_AND_ADD};
	struct ibv_send_wr w[2], *bad;
	struct ibv_wc wc[8];

	empty_cq();

	to_state(ud, IBV_QPS_RTS, 0);
	to_state(uc, IBV_QPS_RTS, sink_qpn);
	for (unsigned int i = 0; i < sizeof(ud_bad) / sizeof(ud_bad[0]); i++) {
		char what[64];

		w[0] = send_wr(&sg, 1);
		w[0].opcode = ud_bad[i];
		w[0].wr.ud.ah = ah;
		w[0].wr.ud.remote_qpn = ud->qp_num;
		w[0].wr.ud.remote_qkey = 0x11;
		if (ud_bad[i] == IBV_WR_ATOMIC_CMP_AND_SWP ||
		    ud_bad[i] == IBV_WR_ATOMIC_FETCH_AND_ADD)
			sg.length = 8;
		snprintf(what, sizeof(what), "UD opcode %d", ud_bad[i]);
		EXPECT_RET(ibv_post_send(ud, w, &bad), EINVAL, "UD", what);
	}
	for (unsigned int i = 0; i < sizeof(uc_bad) / sizeof(uc_bad[0]); i++) {
		char what[64];

		w[0] = send_wr(&sg, 1);
		w[0].opcode = uc_bad[i];
		snprintf(what, sizeof(what), "UC opcode %d", uc_bad[i]);
		EXPECT_RET(ibv_post_send(uc, w, &bad), EINVAL, "UC", what);
	}
	/* UD: no AH, larger than the MTU, and a bad WR after a good one */
	w[0] = send_wr(&sg, 1);
	EXPECT_RET(ibv_post_send(ud, w, &bad), EINVAL, "address handle", "UD send without an AH");
	w[0].wr.ud.ah = ah;
	w[0].wr.ud.remote_qpn = ud->qp_num;
	w[0].wr.ud.remote_qkey = 0x11;
	{
		struct ibv_sge big = {.addr = (uintptr_t)buf, .length = 8192, .lkey = mr->lkey};

		w[1] = w[0];
		w[1].sg_list = &big;
		w[0].next = &w[1];
		EXPECT_RET(ibv_post_send(ud, w, &bad), EINVAL, "MTU",
			   "UD send larger than the MTU");
		CHECK(bad == &w[1], "bad_wr is the second WR");
		CHECK(drain(cq, wc, 8, 200) >= 1 && wc[0].wr_id == 1 &&
			  wc[0].status == IBV_WC_SUCCESS,
		      "the first UD WR was sent");
	}
	ibv_destroy_qp(ud);
	ibv_destroy_qp(uc);
	ibv_destroy_ah(ah);
	while (ibv_poll_cq(cq, 8, wc) > 0)
		;
}

/* ---- modify_qp with wrong masks and values ---- */

struct mod_case {
	const char *what, *why;
	int mask;
	void (*set)(struct ibv_qp_attr *a);
};

static void set_port2(struct ibv_qp_attr *a)
{
	a->port_num = 2;
}
static void set_pkey1(struct ibv_qp_attr *a)
{
	a->pkey_index = 1;
}
static void set_access_bad(struct ibv_qp_attr *a)
{
	a->qp_access_flags = 1u << 20;
}
static void set_mtu7(struct ibv_qp_attr *a)
{
	a->path_mtu = (enum ibv_mtu)7;
}
static void set_mtu0(struct ibv_qp_attr *a)
{
	a->path_mtu = (enum ibv_mtu)0;
}
static void set_dqpn(struct ibv_qp_attr *a)
{
	a->dest_qp_num = 1u << 24;
}
static void set_rqpsn(struct ibv_qp_attr *a)
{
	a->rq_psn = 1u << 24;
}
static void set_dest_rd(struct ibv_qp_attr *a)
{
	a->max_dest_rd_atomic = UROCE_MAX_RD_ATOM + 1;
}
static void set_rnr_timer(struct ibv_qp_attr *a)
{
	a->min_rnr_timer = 32;
}
static void set_no_grh(struct ibv_qp_attr *a)
{
	a->ah_attr.is_global = 0;
}
static void set_sgid(struct ibv_qp_attr *a)
{
	a->ah_attr.grh.sgid_index = 200;
}
static void set_timeout(struct ibv_qp_attr *a)
{
	a->timeout = 32;
}
static void set_retry(struct ibv_qp_attr *a)
{
	a->retry_cnt = 8;
}
static void set_rnr_retry(struct ibv_qp_attr *a)
{
	a->rnr_retry = 8;
}
static void set_rd(struct ibv_qp_attr *a)
{
	a->max_rd_atomic = UROCE_MAX_RD_ATOM + 1;
}
static void set_sqpsn(struct ibv_qp_attr *a)
{
	a->sq_psn = 1u << 24;
}
static void set_cur_wrong(struct ibv_qp_attr *a)
{
	a->cur_qp_state = IBV_QPS_SQD;
}
static void set_nothing(struct ibv_qp_attr *a)
{
	(void)a;
}

#define M_INIT (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define M_RTR                                                                                      \
	(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |            \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define M_RTS                                                                                      \
	(IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |     \
	 IBV_QP_MAX_QP_RD_ATOMIC)

static void modify_cases(struct ibv_qp *qp, enum ibv_qp_state from, enum ibv_qp_state to,
			 const struct mod_case *c, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_qp_attr a;
		char what[128];

		memset(&a, 0, sizeof(a));
		a.qp_state = to;
		a.cur_qp_state = from;
		a.port_num = 1;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = sink_qpn;
		a.max_dest_rd_atomic = 1;
		a.max_rd_atomic = 1;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = gid;
		a.ah_attr.port_num = 1;
		c[i].set(&a);
		snprintf(what, sizeof(what), "modify_qp %d->%d: %s", from, to, c[i].what);
		EXPECT_RET(ibv_modify_qp(qp, &a, c[i].mask), EINVAL, c[i].why, what);
		CHECK(qp_state(qp) == (int)from, "%s: state changed to %d", what, qp_state(qp));
	}
}

static void test_modify_qp(void)
{
	static const struct mod_case reset[] = {
	    {"missing ACCESS_FLAGS", "missing IBV_QP_ACCESS_FLAGS", M_INIT & ~IBV_QP_ACCESS_FLAGS,
	     set_nothing},
	    {"missing PORT", "missing IBV_QP_PORT", M_INIT & ~IBV_QP_PORT, set_nothing},
	    {"SQ_PSN in RESET->INIT", "IBV_QP_SQ_PSN not allowed", M_INIT | IBV_QP_SQ_PSN,
	     set_nothing},
	    {"QKEY on an RC QP", "IBV_QP_QKEY not allowed", M_INIT | IBV_QP_QKEY, set_nothing},
	    {"unknown mask bit", "not allowed", M_INIT | (1 << 30), set_nothing},
	    {"port 2", "port_num", M_INIT, set_port2},
	    {"pkey_index 1", "pkey_index", M_INIT, set_pkey1},
	    {"unknown access bit", "qp_access_flags", M_INIT, set_access_bad},
	    {"CUR_STATE in RESET->INIT", "IBV_QP_CUR_STATE not allowed", M_INIT | IBV_QP_CUR_STATE,
	     set_nothing},
	};
	static const struct mod_case init[] = {
	    {"missing AV", "missing IBV_QP_AV", M_RTR & ~IBV_QP_AV, set_nothing},
	    {"missing RQ_PSN", "missing IBV_QP_RQ_PSN", M_RTR & ~IBV_QP_RQ_PSN, set_nothing},
	    {"missing MAX_DEST_RD_ATOMIC", "missing IBV_QP_MAX_DEST_RD_ATOMIC",
	     M_RTR & ~IBV_QP_MAX_DEST_RD_ATOMIC, set_nothing},
	    {"TIMEOUT in INIT->RTR", "IBV_QP_TIMEOUT not allowed", M_RTR | IBV_QP_TIMEOUT,
	     set_nothing},
	    {"path_mtu 7", "path_mtu", M_RTR, set_mtu7},
	    {"path_mtu 0", "path_mtu", M_RTR, set_mtu0},
	    {"dest_qp_num 2^24", "dest_qp_num", M_RTR, set_dqpn},
	    {"rq_psn 2^24", "rq_psn", M_RTR, set_rqpsn},
	    {"max_dest_rd_atomic 129", "max_dest_rd_atomic", M_RTR, set_dest_rd},
	    {"min_rnr_timer 32", "min_rnr_timer", M_RTR, set_rnr_timer},
	    {"no GRH", "GRH", M_RTR, set_no_grh},
	    {"sgid_index 200", "sgid_index", M_RTR, set_sgid},
	};
	static const struct mod_case rtr[] = {
	    {"missing SQ_PSN", "missing IBV_QP_SQ_PSN", M_RTS & ~IBV_QP_SQ_PSN, set_nothing},
	    {"missing TIMEOUT", "missing IBV_QP_TIMEOUT", M_RTS & ~IBV_QP_TIMEOUT, set_nothing},
	    {"AV in RTR->RTS", "IBV_QP_AV not allowed", M_RTS | IBV_QP_AV, set_nothing},
	    {"timeout 32", "timeout", M_RTS, set_timeout},
	    {"retry_cnt 8", "retry_cnt", M_RTS, set_retry},
	    {"rnr_retry 8", "rnr_retry", M_RTS, set_rnr_retry},
	    {"max_rd_atomic 129", "max_rd_atomic", M_RTS, set_rd},
	    {"sq_psn 2^24", "sq_psn", M_RTS, set_sqpsn},
	    {"wrong cur_qp_state", "cur_qp_state", M_RTS | IBV_QP_CUR_STATE, set_cur_wrong},
	};
	static const struct mod_case illegal[] = {
	    {"RESET->RTS", "illegal transition", IBV_QP_STATE, set_nothing},
	};
	struct ibv_qp *qp = make_qp(IBV_QPT_RC, 4, 4), *ud = make_qp(IBV_QPT_UD, 4, 4);
	struct ibv_qp_attr a;

	modify_cases(qp, IBV_QPS_RESET, IBV_QPS_INIT, reset,
		     (int)(sizeof(reset) / sizeof(reset[0])));
	modify_cases(qp, IBV_QPS_RESET, IBV_QPS_RTS, illegal, 1);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	EXPECT_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "RESET", "modify_qp RESET->ERR");
	a.qp_state = IBV_QPS_SQE;
	EXPECT_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "SQE", "modify_qp RESET->SQE");
	a.qp_state = (enum ibv_qp_state)42;
	EXPECT_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "invalid", "modify_qp to state 42");
	CHECK(to_state(qp, IBV_QPS_INIT, sink_qpn) == 0, "RESET->INIT with the right mask");
	modify_cases(qp, IBV_QPS_INIT, IBV_QPS_RTR, init, (int)(sizeof(init) / sizeof(init[0])));
	ibv_destroy_qp(qp);
	qp = make_qp(IBV_QPT_RC, 4, 4);
	CHECK(to_state(qp, IBV_QPS_RTR, sink_qpn) == 0, "up to RTR with the right masks");
	modify_cases(qp, IBV_QPS_RTR, IBV_QPS_RTS, rtr, (int)(sizeof(rtr) / sizeof(rtr[0])));
	ibv_destroy_qp(qp);

	/* UD takes a Q_Key, not access flags */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	EXPECT_RET(ibv_modify_qp(ud, &a, M_INIT), EINVAL, "missing IBV_QP_QKEY",
		   "UD RESET->INIT with ACCESS_FLAGS");
	CHECK(qp_state(ud) == IBV_QPS_RESET, "UD still in RESET");
	ibv_destroy_qp(ud);
}

/* ---- setup ---- */

int main(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = NULL;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int n;

	unsetenv("UROCE_FAULT");
	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "uroce_lo"))
			dev = list[i];
	if (!dev) {
		printf("no uroce_lo device\n");
		return 1;
	}
	ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	list = ibv_get_device_list(NULL); /* num_devices may be NULL */
	CHECK(list != NULL, "get_device_list(NULL) is allowed");
	ibv_free_device_list(list);
	if (!ctx || ibv_query_gid(ctx, 1, 0, &gid)) {
		printf("ibv_open_device: %s\n", strerror(errno));
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	buf = aligned_alloc(4096, BUF_LEN);
	mr = buf && pd ? ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE) : NULL;
	/* a peer that never answers: what is posted to it stays queued */
	sink = socket(AF_INET, SOCK_DGRAM, 0);
	if (!pd || !cq || !mr || sink < 0 || bind(sink, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(sink, (struct sockaddr *)&sa, &sl)) {
		printf("setup failed: %s\n", strerror(errno));
		return 1;
	}
	sink_qpn = (uint32_t)ntohs(sa.sin_port) << 8 | 1;

	/* every refusal must be explained at debug level (EXPECT_*) */
	test_null_and_ranges();
	test_busy();
	test_more();
	test_post_states();
	test_overflow();
	test_bad_wr_in_list();
	test_transport_opcodes();
	test_modify_qp();

	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	close(sink);
	free(buf);
	printf("test_api_misuse: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

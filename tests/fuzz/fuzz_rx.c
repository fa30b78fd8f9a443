/* libFuzzer target: uroce's receive path fed with hostile datagrams.
 *
 * One context on the loopback device holds RC, UC, UD, XRC_RECV and
 * XRC_SEND QPs in RTS (and two QPs left in INIT and RESET), memory regions
 * with and without remote access, of another PD, deregistered, and one
 * whose iova range ends at 2^64, receives posted and requesters with
 * outstanding WQEs (fuzz_rx.h lists it all).  Every input starts from that
 * same state; its packets enter the receive path through uroce_ep_inject()
 * as if the endpoint's socket had received them, and what the QPs send in
 * return (ACKs, NAKs, READ responses) is received and processed too.
 *
 * The progress thread is stopped, so an input runs in this thread alone and
 * the same input always takes the same path.
 *
 * Besides ASan/UBSan, every input is checked for:
 *   - the guard bytes around every MR (nothing writes outside an MR);
 *   - MRs no packet may change (LOCAL_WRITE only, REMOTE_READ only, of
 *     another PD or XRC domain, deregistered) are unchanged;
 *   - receive completions never report more bytes than the WQE held.
 * A violation aborts, so libFuzzer reports it like a crash.
 *
 * Built by tests/fuzz/CMakeLists.txt with clang (-fsanitize=fuzzer); the
 * same code replays the corpus in a normal build (tests/unit/test_fuzz_replay.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uroce.h"
#include "fuzz_rx.h"

#define FZ_NCQ	     4
#define FZ_RWQE	     6 /* receives posted per RQ */
#define FZ_SRQ_WR    8
#define FZ_DRAIN_MAX 64 /* socket drain rounds per input */
#define FZ_SPORT     49152

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fz {
	struct ibv_context *ctx;
	struct uroce_ep *ep;
	struct ibv_pd *pd, *pd2;
	struct ibv_cq *cq[FZ_NCQ];
	struct ibv_xrcd *xrcd1, *xrcd2;
	struct ibv_srq *srq[FZ_NSRQ];
	uint32_t srqn[FZ_NSRQ];
	struct ibv_qp *qp[FZ_NSLOT];
	struct ibv_mr *mr[FZ_NKEY];
	uint32_t key[FZ_NKEY];
	uint8_t *buf[FZ_NKEY]; /* guard + MR + guard */
	uint8_t *img[FZ_NKEY]; /* the pristine contents */
	size_t len[FZ_NKEY];
	union ibv_gid gid;
	struct uroce_ipinfo from;
	uint32_t rwqe_len[FZ_NSLOT]; /* bytes of every receive WQE of a QP */
} F;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_rx: %s (errno %d: %s)\n", what, errno, strerror(errno));
	abort();
}

static uint8_t *mr_mem(int k)
{
	return F.buf[k] + FZ_GUARD;
}

/* ---- setup ---- */

static void make_mr(int k, struct ibv_pd *pd, size_t len, unsigned int access)
{
	F.len[k] = len;
	F.buf[k] = malloc(len + 2 * FZ_GUARD);
	F.img[k] = malloc(len + 2 * FZ_GUARD);
	if (!F.buf[k] || !F.img[k])
		die("malloc");
	for (size_t i = 0; i < len + 2 * FZ_GUARD; i++)
		F.img[k][i] = (uint8_t)(i * 7u + (unsigned int)k * 31u + 1u);
	memcpy(F.buf[k], F.img[k], len + 2 * FZ_GUARD);
	/* the receive buffers are addressed locally, by their address */
	if (k == FZ_K_RECV)
		F.mr[k] = ibv_reg_mr(pd, mr_mem(k), len, (int)access);
	else if (k == FZ_K_SKEW)
		F.mr[k] = ibv_reg_mr_iova(pd, mr_mem(k) + 4, len - 8, FZ_IOVA(k), (int)access);
	else
		F.mr[k] = ibv_reg_mr_iova(pd, mr_mem(k), len, FZ_IOVA(k), (int)access);
	if (!F.mr[k])
		die("ibv_reg_mr_iova");
	F.key[k] = F.mr[k]->rkey;
}

static struct ibv_qp *make_qp(enum ibv_qp_type type, int cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr_ex ia = {
	    .qp_type = type,
	    .send_cq = F.cq[cq],
	    .recv_cq = F.cq[cq],
	    .srq = srq,
	    .cap = {.max_send_wr = 32,
		    .max_recv_wr = 16,
		    .max_send_sge = 4,
		    .max_recv_sge = 4,
		    .max_inline_data = 64},
	    .comp_mask = IBV_QP_INIT_ATTR_PD,
	    .pd = F.pd,
	};
	struct ibv_qp *qp;

	if (type == IBV_QPT_XRC_RECV) {
		memset(&ia, 0, sizeof(ia));
		ia.qp_type = type;
		ia.comp_mask = IBV_QP_INIT_ATTR_XRCD;
		ia.xrcd = F.xrcd1;
	}
	qp = ibv_create_qp_ex(F.ctx, &ia);
	if (!qp)
		die("ibv_create_qp_ex");
	return qp;
}

static struct ibv_srq *make_srq(struct ibv_pd *pd, struct ibv_xrcd *xrcd, int cq)
{
	struct ibv_srq_init_attr_ex ia = {
	    .attr = {.max_wr = FZ_SRQ_WR, .max_sge = 2},
	    .comp_mask = IBV_SRQ_INIT_ATTR_PD,
	    .pd = pd,
	};
	struct ibv_srq *srq;

	if (xrcd) {
		ia.comp_mask |=
		    IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
		ia.srq_type = IBV_SRQT_XRC;
		ia.xrcd = xrcd;
		ia.cq = F.cq[cq];
	}
	srq = ibv_create_srq_ex(F.ctx, &ia);
	if (!srq)
		die("ibv_create_srq_ex");
	return srq;
}

static struct ibv_xrcd *make_xrcd(void)
{
	struct ibv_xrcd_init_attr a = {.comp_mask =
					   IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
				       .fd = -1,
				       .oflags = O_CREAT};
	struct ibv_xrcd *x = ibv_open_xrcd(F.ctx, &a);

	if (!x)
		die("ibv_open_xrcd");
	return x;
}

static uint32_t qpn(int slot)
{
	return ((uint32_t)F.ep->port << 8) | (uint32_t)slot;
}

/* The QP each connected QP sends to. */
static int peer_of(int slot)
{
	return slot == FZ_RC_R ? FZ_RC_Q : FZ_SINK;
}

static int modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int err = ibv_modify_qp(qp, a, mask);

	if (err) {
		errno = err;
		die("ibv_modify_qp");
	}
	return 0;
}

/* RESET -> INIT (-> RTR -> RTS unless stop_init). */
static void bring_up(int slot, bool stop_init)
{
	struct ibv_qp *qp = F.qp[slot];
	bool ud = qp->qp_type == IBV_QPT_UD;
	struct ibv_qp_attr a;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_ATOMIC;

	if (slot == FZ_RC_S || slot == FZ_UC)
		access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = FZ_QKEY;
	a.qp_access_flags = (unsigned int)access;
	modify(qp, &a,
	       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		   (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
	if (stop_init)
		return;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ud) {
		modify(qp, &a, IBV_QP_STATE);
	} else {
		int mask =
		    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = qpn(peer_of(slot));
		a.rq_psn = FZ_PSN;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = F.gid;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		if (qp->qp_type != IBV_QPT_UC && qp->qp_type != IBV_QPT_XRC_SEND) {
			a.max_dest_rd_atomic = 4;
			a.min_rnr_timer = 1;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		modify(qp, &a, mask);
	}

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = FZ_PSN;
	a.timeout = 14;
	a.retry_cnt = 2;
	a.rnr_retry = 2;
	a.max_rd_atomic = 4;
	if (ud || qp->qp_type == IBV_QPT_UC)
		modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	else if (qp->qp_type == IBV_QPT_XRC_RECV)
		modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT);
	else
		modify(qp, &a,
		       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Receive WQEs: a mix of one SGE, two SGEs and none, each in its own part
 * of FZ_K_RECV (slot-dependent, so no two QPs share a buffer). */
static void post_recvs(int slot)
{
	uint32_t base = (uint32_t)slot * 5120u;

	for (int i = 0; i < FZ_RWQE; i++) {
		struct ibv_sge sg[2] = {
		    {.addr = (uintptr_t)mr_mem(FZ_K_RECV) + base,
		     .length = 100,
		     .lkey = F.key[FZ_K_RECV]},
		    {.addr = (uintptr_t)mr_mem(FZ_K_RECV) + base + 200,
		     .length = 4900,
		     .lkey = F.key[FZ_K_RECV]},
		};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)slot << 8 | (uint64_t)i,
					 .sg_list = sg,
					 .num_sge = i % 3 == 2 ? 0 : 2},
				   *bad;

		if (ibv_post_recv(F.qp[slot], &wr, &bad))
			die("ibv_post_recv");
	}
	F.rwqe_len[slot] = 5000;
}

/* Top the SRQ up until it is full (its WQEs are all alike). */
static void fill_srq(int i, int key, uint32_t base)
{
	for (;;) {
		struct ibv_sge sg = {
		    .addr = (uintptr_t)mr_mem(key) + base, .length = 4096, .lkey = F.key[key]};
		struct ibv_recv_wr wr = {.wr_id = 0x5000u + (unsigned int)i,
					 .sg_list = &sg,
					 .num_sge = 1},
				   *bad;

		if (ibv_post_srq_recv(F.srq[i], &wr, &bad))
			return;
	}
}

static void post_send(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t off, uint32_t len,
		      uint64_t remote)
{
	struct ibv_sge sg = {.addr = (uintptr_t)mr_mem(FZ_K_RECV) + FZ_Q_BUF + off,
			     .length = len,
			     .lkey = F.key[FZ_K_RECV]};
	struct ibv_send_wr wr = {.wr_id = op,
				 .sg_list = &sg,
				 .num_sge = len ? 1 : 0,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		sg.length = 8;
		wr.num_sge = 1;
		wr.wr.atomic.remote_addr = remote;
		wr.wr.atomic.rkey = F.key[FZ_K_ALL];
		wr.wr.atomic.compare_add = 1;
		wr.wr.atomic.swap = 2;
	} else {
		wr.wr.rdma.remote_addr = remote;
		wr.wr.rdma.rkey = F.key[FZ_K_ALL];
	}
	wr.imm_data = htobe32(0x1234);
	if (qp->qp_type == IBV_QPT_XRC_SEND)
		wr.qp_type.xrc.remote_srqn = F.srqn[FZ_SRQ_XRC1];
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send");
}

static void post_requests(void)
{
	struct ibv_qp *q = F.qp[FZ_RC_Q], *x = F.qp[FZ_XRC_S];
	uint64_t va = FZ_IOVA(FZ_K_ALL);

	post_send(q, IBV_WR_SEND, 0, FZ_Q_SEND_LEN, 0);
	post_send(q, IBV_WR_RDMA_WRITE, 0, FZ_Q_WRITE_LEN, va + 64);
	post_send(q, IBV_WR_RDMA_READ, 3072, FZ_Q_READ_LEN, va + 128);
	post_send(q, IBV_WR_ATOMIC_CMP_AND_SWP, 6000, 8, va);
	post_send(q, IBV_WR_ATOMIC_FETCH_AND_ADD, 6008, 8, va + 8);
	post_send(q, IBV_WR_SEND_WITH_IMM, 0, 0, 0);
	post_send(q, IBV_WR_RDMA_WRITE_WITH_IMM, 0, 10, va + 256);

	post_send(x, IBV_WR_SEND, 0, 10, 0);
	post_send(x, IBV_WR_RDMA_READ, 7000, FZ_XQ_READ_LEN, va + 512);
	post_send(x, IBV_WR_ATOMIC_FETCH_AND_ADD, 7200, 8, va + 16);
}

/* Receive and process what the QPs sent each other (bounded). */
static void drain_socket(void)
{
	for (int i = 0; i < FZ_DRAIN_MAX && uroce_ep_poll(F.ep, 64) > 0; i++)
		;
}

static void check_wc(const struct ibv_wc *wc)
{
	uint32_t slot = wc->qp_num & 0xff;

	if (wc->status != IBV_WC_SUCCESS || slot >= FZ_NSLOT)
		return;
	if (wc->opcode == IBV_WC_RECV && wc->byte_len > F.rwqe_len[slot]) {
		fprintf(stderr, "fuzz_rx: QP slot %u: receive of %u bytes into a %u-byte WQE\n",
			slot, wc->byte_len, F.rwqe_len[slot]);
		abort();
	}
}

static void drain_cqs(void)
{
	struct ibv_wc wc[16];

	for (int i = 0; i < FZ_NCQ; i++) {
		int n;

		while ((n = ibv_poll_cq(F.cq[i], 16, wc)) > 0)
			for (int k = 0; k < n; k++)
				check_wc(&wc[k]);
	}
}

static void drain_async(void)
{
	struct ibv_async_event ev;

	while (!ibv_get_async_event(F.ctx, &ev))
		ibv_ack_async_event(&ev);
}

/* Every input starts from here. */
static void reset_state(void)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};

	for (int s = 1; s < FZ_NSLOT; s++)
		modify(F.qp[s], &a, IBV_QP_STATE);
	drain_socket();
	drain_cqs();
	drain_async();
	for (int k = 0; k < FZ_NKEY; k++)
		memcpy(F.buf[k], F.img[k], F.len[k] + 2 * FZ_GUARD);
	for (int s = 1; s < FZ_NSLOT; s++) {
		if (s == FZ_RC_RESET)
			continue;
		bring_up(s, s == FZ_UD_INIT);
		if (s == FZ_RC_R || s == FZ_UC || s == FZ_UD || s == FZ_RC_Q)
			post_recvs(s);
	}
	F.rwqe_len[FZ_RC_S] = F.rwqe_len[FZ_XRC_R] = 4096;
	fill_srq(FZ_SRQ_XRC1, FZ_K_RECV, 40000);
	fill_srq(FZ_SRQ_XRC2, FZ_K_OTHER_PD, 1024);
	fill_srq(FZ_SRQ_BASIC, FZ_K_RECV, 30720);
	post_requests();
	drain_socket();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct ibv_device **list;
	struct ibv_device *dev = NULL;
	struct ibv_mr *dead;
	int n;

	(void)argc;
	(void)argv;
	unsetenv("UROCE_PORT_MODE"); /* QPNs are port << 8 | slot */
	unsetenv("UROCE_FAULT");
	unsetenv("UROCE_PCAP");
	if (!getenv("UROCE_LOG"))
		setenv("UROCE_LOG", "error", 1);
	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "uroce_lo"))
			dev = list[i];
	if (!dev)
		die("no uroce_lo device");
	F.ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!F.ctx || ibv_query_gid(F.ctx, 1, 0, &F.gid))
		die("ibv_open_device");
	fcntl(F.ctx->async_fd, F_SETFL, fcntl(F.ctx->async_fd, F_GETFL) | O_NONBLOCK);
	F.pd = ibv_alloc_pd(F.ctx);
	F.pd2 = ibv_alloc_pd(F.ctx);
	if (!F.pd || !F.pd2)
		die("ibv_alloc_pd");
	for (int i = 0; i < FZ_NCQ; i++)
		if (!(F.cq[i] = ibv_create_cq(F.ctx, 256, NULL, NULL, 0)))
			die("ibv_create_cq");

	make_mr(FZ_K_ALL, F.pd, FZ_MR_LEN,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		    IBV_ACCESS_REMOTE_ATOMIC);
	make_mr(FZ_K_LOCAL, F.pd, FZ_MR_LEN, IBV_ACCESS_LOCAL_WRITE);
	make_mr(FZ_K_RO, F.pd, FZ_MR_LEN, IBV_ACCESS_REMOTE_READ);
	make_mr(FZ_K_OTHER_PD, F.pd2, FZ_MR_LEN,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		    IBV_ACCESS_REMOTE_ATOMIC);
	make_mr(FZ_K_DEAD, F.pd, FZ_MR_LEN,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	make_mr(FZ_K_TOP, F.pd, FZ_MR_LEN,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		    IBV_ACCESS_REMOTE_ATOMIC);
	make_mr(FZ_K_RECV, F.pd, FZ_RECV_LEN, IBV_ACCESS_LOCAL_WRITE);
	make_mr(FZ_K_SKEW, F.pd, FZ_MR_LEN,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		    IBV_ACCESS_REMOTE_ATOMIC);
	dead = F.mr[FZ_K_DEAD];
	F.mr[FZ_K_DEAD] = NULL;
	if (ibv_dereg_mr(dead))
		die("ibv_dereg_mr");

	F.xrcd1 = make_xrcd();
	F.xrcd2 = make_xrcd();
	F.srq[FZ_SRQ_XRC1] = make_srq(F.pd, F.xrcd1, 2);
	F.srq[FZ_SRQ_XRC2] = make_srq(F.pd2, F.xrcd2, 3);
	F.srq[FZ_SRQ_BASIC] = make_srq(F.pd, NULL, 0);
	for (int i = 0; i < FZ_NSRQ; i++)
		F.srqn[i] = to_usrq(F.srq[i])->srq_num;

	/* in slot order */
	F.qp[FZ_RC_R] = make_qp(IBV_QPT_RC, 0, NULL);
	F.qp[FZ_RC_S] = make_qp(IBV_QPT_RC, 0, F.srq[FZ_SRQ_BASIC]);
	F.qp[FZ_RC_Q] = make_qp(IBV_QPT_RC, 1, NULL);
	F.qp[FZ_UC] = make_qp(IBV_QPT_UC, 0, NULL);
	F.qp[FZ_UD] = make_qp(IBV_QPT_UD, 1, NULL);
	F.qp[FZ_XRC_R] = make_qp(IBV_QPT_XRC_RECV, 0, NULL);
	F.qp[FZ_XRC_S] = make_qp(IBV_QPT_XRC_SEND, 1, NULL);
	F.qp[FZ_UD_INIT] = make_qp(IBV_QPT_UD, 1, NULL);
	F.qp[FZ_RC_RESET] = make_qp(IBV_QPT_RC, 1, NULL);
	F.ep = to_uqp(F.qp[FZ_RC_R])->ep;
	for (int s = 1; s < FZ_NSLOT; s++)
		if (F.qp[s]->qp_num != qpn(s))
			die("QPs did not get the expected slots");
	/* one thread: the same input always takes the same path */
	uroce_progress_stop(to_uctx(F.ctx));

	F.from.family = AF_INET;
	F.from.src.v4.s_addr = htonl(INADDR_LOOPBACK);
	F.from.dst.v4.s_addr = htonl(INADDR_LOOPBACK);
	F.from.sport = FZ_SPORT;
	F.from.dport = F.ep->port;
	reset_state();
	return 0;
}

/* ---- one input ---- */

static void subst_key(uint8_t *p)
{
	uint32_t v = ur_get32(p);

	if (v < FZ_NKEY)
		ur_put32(p, F.key[v]);
}

/* Make the packet position independent (see fuzz_rx.h); fix its ICRC. */
static void rewrite(uint8_t *p, size_t len, uint8_t flags)
{
	const struct uroce_opcode_info *info = &uroce_opcode[p[0]];
	uint32_t q;

	if (len < UR_BTH_BYTES + UR_ICRC_BYTES)
		return;
	if (!(flags & FZ_F_RAW)) {
		q = ur_get32(p + 4);
		if (!(q & 0xffff00u))
			ur_put32(p + 4, (q & 0xff000000u) | qpn((int)(q & 0xff)));
		if (info->name && len >= (size_t)info->length) {
			if (info->mask & URM_RETH)
				subst_key(p + info->offset[UR_RETH] + 8);
			if (info->mask & URM_ATMETH)
				subst_key(p + info->offset[UR_ATMETH] + 8);
			if (info->mask & URM_IETH)
				subst_key(p + info->offset[UR_IETH]);
			if (info->mask & URM_XRCETH) {
				uint8_t *x = p + info->offset[UR_XRCETH];
				uint32_t v = ur_get32(x);

				if ((v & 0xffffffu) < FZ_NSRQ)
					ur_put32(x, (v & 0xff000000u) | F.srqn[v & 0xffffffu]);
			}
		}
	}
	if (flags & FZ_F_FIX_ICRC) {
		uint32_t n = (uint32_t)len - UR_ICRC_BYTES;
		uint32_t icrc = htole32(uroce_icrc_compute(&F.from, p, n));

		memcpy(p + n, &icrc, UR_ICRC_BYTES);
	}
}

static void check_memory(void)
{
	for (int k = 0; k < FZ_NKEY; k++) {
		size_t n = F.len[k];
		bool frozen =
		    k == FZ_K_LOCAL || k == FZ_K_RO || k == FZ_K_OTHER_PD || k == FZ_K_DEAD;
		size_t g = FZ_GUARD + (k == FZ_K_SKEW ? 4 : 0); /* that MR starts 4 bytes in */

		if (memcmp(F.buf[k], F.img[k], g) ||
		    memcmp(F.buf[k] + 2 * FZ_GUARD + n - g, F.img[k] + 2 * FZ_GUARD + n - g, g)) {
			fprintf(stderr, "fuzz_rx: guard bytes around MR %d overwritten\n", k);
			abort();
		}
		if (frozen && memcmp(mr_mem(k), F.img[k] + FZ_GUARD, n)) {
			fprintf(stderr, "fuzz_rx: MR %d changed, no packet may write it\n", k);
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t flags;

	if (!size)
		return 0;
	flags = data[0];
	data++;
	size--;
	while (size >= 2) {
		size_t n = (size_t)data[0] << 8 | data[1];
		uint8_t *pkt;

		data += 2;
		size -= 2;
		if (n > size)
			n = size;
		/* exactly n bytes: ASan sees any read past the datagram */
		pkt = malloc(n ? n : 1);
		if (!pkt)
			return 0;
		memcpy(pkt, data, n);
		rewrite(pkt, n, flags);
		uroce_ep_inject(F.ep, pkt, n, &F.from);
		free(pkt);
		data += n;
		size -= n;
		if (flags & FZ_F_DRAIN)
			drain_socket();
	}
	drain_socket();
	if (flags & FZ_F_TIMERS) {
		for (int s = 1; s < FZ_NSLOT; s++) {
			struct uroce_qp *qp = to_uqp(F.qp[s]);

			pthread_mutex_lock(&qp->lock);
			uroce_req_timer(qp, UINT64_MAX / 2);
			pthread_mutex_unlock(&qp->lock);
		}
		drain_socket();
	}
	drain_cqs();
	check_memory();
	reset_state();
	return 0;
}

/* Hostile and malformed packets, deterministically (docs/robustness.md).
 *
 * Packets are built with uroce's own builder and ICRC, then enter the
 * receive path through uroce_ep_inject() exactly as if the endpoint's
 * socket had received them (one case goes over a real UDP socket too).
 * The QPs under attack answer to a plain UDP socket of this test (the
 * "sink", standing in for the peer QP), so every ACK and NAK they send is
 * read back and checked: opcode, syndrome and PSN.
 *
 * Every case checks what the IBTA asks - dropped silently or NAKed with the
 * right code - that it was counted, that no completion or state change
 * happened beyond that, and that no byte of any MR, nor of the guard
 * bytes around each, changed unless the operation was allowed.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "uroce.h"

#include "check.h"

#define PSN0	 0xfffff0u /* every responder expects this first: the wrap is near */
#define QKEY	 0x4242u
#define MR_LEN	 16384u
#define GUARD	 128u
#define RBUF	 256u /* bytes per receive WQE */
#define NRECV	 4
#define MTU	 1024u
#define ACK_OK	 (UR_AETH_ACK | UR_AETH_CREDIT_INVALID)
#define NAK(c)	 (UR_AETH_NAK | (c))
#define NO_REPLY (-1)

enum mr_id { M_ALL, M_NOREAD, M_NOATOMIC, M_PD2, M_DEAD, M_TOP, M_SKEW, M_RECV, M_NUM };

static const char *const mr_name[M_NUM] = {"all-access",  "no-remote-read", "no-remote-atomic",
					   "other-PD",	  "deregistered",   "iova-at-2^64",
					   "iova-skewed", "receive"};

static struct {
	struct ibv_context *ctx;
	struct uroce_ctx *uctx;
	struct uroce_ep *ep;
	struct ibv_pd *pd, *pd2;
	struct ibv_cq *cq, *cq2;
	struct ibv_qp *rc, *uc, *ud, *ud_init, *xrc, *req;
	struct ibv_xrcd *xrcd1, *xrcd2;
	struct ibv_srq *xsrq1, *xsrq2;
	uint32_t xsrqn1, xsrqn2;
	struct ibv_mr *mr[M_NUM];
	uint32_t key[M_NUM];
	uint64_t va[M_NUM]; /* what the peer addresses */
	uint8_t *buf[M_NUM], *img[M_NUM];
	union ibv_gid gid;
	int sink;
	uint16_t sink_port;
	struct uroce_ipinfo from;
} T;

static uint8_t pbuf[8192];
static struct uroce_pkt P;

/* ---- memory: guard + MR + guard, compared with an image ---- */

static uint8_t *mem(int m)
{
	return T.buf[m] + GUARD;
}

static void snap(void)
{
	for (int m = 0; m < M_NUM; m++)
		memcpy(T.img[m], T.buf[m], MR_LEN + 2 * GUARD);
}

/* Every MR and guard byte as snapped, except [skip, skip + n) of MR m. */
static bool mem_same_except(int m, uint32_t skip, uint32_t n, const char *what)
{
	bool ok = true;

	for (int i = 0; i < M_NUM; i++)
		for (uint32_t k = 0; k < MR_LEN + 2 * GUARD; k++) {
			if (i == m && k >= GUARD + skip && k < GUARD + skip + n)
				continue;
			if (T.buf[i][k] != T.img[i][k]) {
				printf("  %s: MR %s byte %d changed (%s)\n", what, mr_name[i],
				       (int)k - (int)GUARD,
				       k < GUARD || k >= GUARD + MR_LEN ? "GUARD" : "inside");
				ok = false;
				break;
			}
		}
	return ok;
}

static bool mem_same(const char *what)
{
	return mem_same_except(-1, 0, 0, what);
}

static void make_mr(int m, struct ibv_pd *pd, unsigned int access)
{
	T.buf[m] = malloc(MR_LEN + 2 * GUARD);
	T.img[m] = malloc(MR_LEN + 2 * GUARD);
	for (uint32_t k = 0; k < MR_LEN + 2 * GUARD; k++)
		T.buf[m][k] = (uint8_t)(k * 131u + (uint32_t)m * 17u + 3u);
	if (m == M_TOP) {
		T.va[m] = 0ull - MR_LEN; /* [2^64 - MR_LEN, 2^64) */
		T.mr[m] = ibv_reg_mr_iova(pd, mem(m), MR_LEN, T.va[m], (int)access);
	} else if (m == M_SKEW) {
		/* an aligned iova for a host address that is not */
		T.va[m] = 0x10000;
		T.mr[m] = ibv_reg_mr_iova(pd, mem(m) + 4, MR_LEN - 8, T.va[m], (int)access);
	} else {
		T.va[m] = (uintptr_t)mem(m);
		T.mr[m] = ibv_reg_mr(pd, mem(m), MR_LEN, (int)access);
	}
	if (!T.mr[m]) {
		printf("ibv_reg_mr %s: %s\n", mr_name[m], strerror(errno));
		exit(1);
	}
	T.key[m] = T.mr[m]->rkey;
}

/* ---- the sink: the peer the QPs under attack answer to ---- */

struct reply {
	uint8_t opcode;
	uint32_t psn, paylen;
	int syn; /* AETH syndrome, -1 without AETH */
};

static uint32_t last_msn; /* the AETH MSN of the last reply that had one */

static int sink_get(struct reply *r, int timeout_ms)
{
	uint8_t b[9000];
	struct pollfd pfd = {.fd = T.sink, .events = POLLIN};
	struct uroce_pkt p;
	ssize_t n;

	if (poll(&pfd, 1, timeout_ms) != 1)
		return -1;
	n = recv(T.sink, b, sizeof(b), 0);
	if (n <= 0 || uroce_pkt_parse(&p, b, (size_t)n))
		return -1;
	r->opcode = p.opcode;
	r->psn = p.psn;
	r->paylen = p.paylen;
	r->syn = (p.mask & URM_AETH) ? ur_aeth_syn(&p) : -1;
	if (p.mask & URM_AETH)
		last_msn = ur_aeth_msn(&p);
	return 0;
}

static void sink_drain(void)
{
	struct reply r;

	while (!sink_get(&r, 0))
		;
}

/* The one reply a case should cause: an ACK/NAK with syndrome syn for
 * psn (syn NO_REPLY: nothing at all). */
static bool expect_reply(int syn, uint32_t psn, uint8_t tr, const char *what)
{
	struct reply r;

	if (syn == NO_REPLY) {
		if (!sink_get(&r, 20)) {
			printf("  %s: unexpected reply opcode 0x%02x psn %u syn 0x%02x\n", what,
			       r.opcode, r.psn, r.syn);
			return false;
		}
		return true;
	}
	if (sink_get(&r, 1000)) {
		printf("  %s: no reply (want syndrome 0x%02x psn %u)\n", what, syn, psn);
		return false;
	}
	if (r.opcode != (UR_OPC_ACK | tr) || r.syn != syn || r.psn != (psn & UR_PSN_MASK)) {
		printf("  %s: reply opcode 0x%02x syn 0x%02x psn %u, want 0x%02x 0x%02x %u\n", what,
		       r.opcode, r.syn, r.psn, UR_OPC_ACK | tr, syn, psn & UR_PSN_MASK);
		return false;
	}
	return true;
}

/* ---- packets ---- */

static struct uroce_pkt *mk(uint8_t opc, uint32_t qpn, uint32_t psn, uint32_t paylen)
{
	uroce_pkt_init(&P, pbuf, opc, qpn, psn, paylen);
	for (uint32_t i = 0; i < paylen; i++)
		P.payload[i] = (uint8_t)(0xa0 + i);
	if (P.mask & URM_REQ)
		ur_bth_set_ackreq(&P, true);
	ur_bth_set_psn(&P, psn);
	return &P;
}

/* Hand n bytes to the receive path, in a buffer of exactly n bytes. */
static void inject_raw(const uint8_t *d, size_t n)
{
	uint8_t *c = malloc(n ? n : 1);

	memcpy(c, d, n);
	uroce_ep_inject(T.ep, c, n, &T.from);
	free(c);
}

/* Finish P (ICRC for T.from) and inject it. */
static void send_p(void)
{
	uroce_pkt_finish(&P, &T.from);
	inject_raw(P.bth, P.len);
}

static uint64_t cnt_dev(size_t off)
{
	return atomic_load((_Atomic uint64_t *)((char *)T.uctx->cnt + off));
}
#define DEV(field)     cnt_dev(offsetof(struct uroce_counters, field))
#define QPC(qp, field) atomic_load(&to_uqp(qp)->stats->c.field)

/* ---- QPs ---- */

static int qp_state(struct ibv_qp *qp)
{
	return to_uqp(qp)->attr.qp_state;
}

static uint32_t rq_count(struct ibv_qp *qp)
{
	return to_uqp(qp)->rq.head - to_uqp(qp)->rq.tail;
}

static uint32_t srq_count(struct ibv_srq *s)
{
	return to_usrq(s)->rq.head - to_usrq(s)->rq.tail;
}

static int poll_all(struct ibv_cq *cq, struct ibv_wc *wc, int max)
{
	int n = 0, r;

	while (n < max && (r = ibv_poll_cq(cq, max - n, wc + n)) > 0)
		n += r;
	return n;
}

static void drain_cqs(void)
{
	struct ibv_wc wc[32];

	poll_all(T.cq, wc, 32);
	poll_all(T.cq2, wc, 32);
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int err = ibv_modify_qp(qp, a, mask);

	if (err) {
		printf("ibv_modify_qp QP 0x%06x: %s\n", qp->qp_num, strerror(err));
		exit(1);
	}
}

/* RESET and up to state again (RTS by default), answering to the sink. */
static void qp_fresh_to(struct ibv_qp *qp, enum ibv_qp_state upto, unsigned int access)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};
	bool ud = qp->qp_type == IBV_QPT_UD,
	     conn_resp = qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_XRC_RECV;
	int mask;

	modify(qp, &a, IBV_QP_STATE);
	if (upto == IBV_QPS_RESET)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	a.qp_access_flags = access;
	modify(qp, &a,
	       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		   (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
	if (upto == IBV_QPS_INIT)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (!ud) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = (uint32_t)T.sink_port << 8 | 1;
		a.rq_psn = PSN0;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = T.gid;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		a.max_dest_rd_atomic = 4;
		a.min_rnr_timer = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (conn_resp)
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	modify(qp, &a, mask);
	if (upto == IBV_QPS_RTR)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = PSN0;
	a.timeout = 0; /* no retransmission timer: the sink never answers */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	if (ud || qp->qp_type == IBV_QPT_UC)
		mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	else if (qp->qp_type == IBV_QPT_XRC_RECV)
		mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT;
	else
		mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	modify(qp, &a, mask);
}

#define ACC_ALL                                                                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* Receive WQE i of a QP: RBUF bytes at slot*NRECV+i of M_RECV. */
static void post_recvs(struct ibv_qp *qp, int slot, uint32_t len)
{
	for (int i = 0; i < NRECV; i++) {
		struct ibv_sge sg = {.addr = (uintptr_t)mem(M_RECV) +
					     (uint32_t)(slot * NRECV + i) * RBUF,
				     .length = len,
				     .lkey = T.key[M_RECV]};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)(slot * NRECV + i),
					 .sg_list = &sg,
					 .num_sge = 1},
				   *bad;

		if (ibv_post_recv(qp, &wr, &bad)) {
			printf("ibv_post_recv failed\n");
			exit(1);
		}
	}
}

/* Back to a known state before a case: the QP up, receives posted,
 * nothing pending anywhere, memory snapped. */
static void fresh(struct ibv_qp *qp, unsigned int access)
{
	int slot = qp == T.rc ? 0 : qp == T.uc ? 1 : 2;

	qp_fresh_to(qp, IBV_QPS_RTS, access);
	if (qp != T.xrc)
		post_recvs(qp, slot, qp == T.ud ? RBUF : RBUF / 2);
	drain_cqs();
	sink_drain();
	snap();
}

static uint32_t qpn_of(struct ibv_qp *qp)
{
	return qp->qp_num;
}

/* ---- cases ---- */

/* Truncated and malformed datagrams: dropped before any QP sees them. */
static void test_truncated(void)
{
	uint64_t d0 = DEV(rx_drop_parse) + DEV(rx_drop_icrc);
	uint32_t full, n = 0;

	fresh(T.rc, ACC_ALL);
	mk(UR_OPC_WRITE_ONLY, qpn_of(T.rc), PSN0, 64);
	ur_reth_set(&P, T.va[M_ALL], T.key[M_ALL], 64);
	uroce_pkt_finish(&P, &T.from);
	full = P.len;
	memcpy(pbuf + 4096, pbuf, full);
	for (uint32_t len = 0; len < full; len++, n++)
		inject_raw(pbuf + 4096, len);
	/* every truncation is either malformed or fails the ICRC */
	CHECK(DEV(rx_drop_parse) + DEV(rx_drop_icrc) - d0 == n, "%llu of %u truncated dropped",
	      (unsigned long long)(DEV(rx_drop_parse) + DEV(rx_drop_icrc) - d0), n);
	CHECK(expect_reply(NO_REPLY, 0, 0, "truncated"), "no reply to truncated packets");
	CHECK(mem_same("truncated"), "no memory touched");
	CHECK(to_uqp(T.rc)->resp.psn == PSN0 && qp_state(T.rc) == IBV_QPS_RTS,
	      "responder unchanged");

	/* TVer != 0, pad larger than the payload, payload not 4-aligned,
	 * payload on an opcode without one: malformed */
	d0 = DEV(rx_drop_parse);
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 8);
	pbuf[1] |= 0x01;
	send_p();
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 0);
	pbuf[1] |= 0x30;
	send_p();
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 8);
	P.len -= 2;
	send_p();
	mk(UR_OPC_ACK, qpn_of(T.req), PSN0, 0);
	P.len += 8;
	send_p();
	/* a P_Key that is not in the table (IBTA 9.6.1.1): only 0xFFFF is */
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 8);
	pbuf[2] = 0x12;
	send_p();
	{ /* longer than any UDP datagram */
		uint8_t *big = calloc(1, 70000);

		mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 8);
		memcpy(big, pbuf, P.len);
		inject_raw(big, 70000);
		free(big);
	}
	CHECK(DEV(rx_drop_parse) - d0 == 6, "malformed headers dropped: %llu of 6",
	      (unsigned long long)(DEV(rx_drop_parse) - d0));
	CHECK(expect_reply(NO_REPLY, 0, 0, "malformed"), "no reply to malformed packets");
	CHECK(mem_same("malformed") && to_uqp(T.rc)->resp.psn == PSN0, "nothing changed");
}

/* A corrupted bit anywhere the ICRC covers: silently dropped. */
static void test_bad_icrc(void)
{
	static const uint32_t where[] = {8, 9, 10, 11, 12, 20, 40, 80, 95};
	uint64_t d0 = DEV(rx_drop_icrc);

	fresh(T.rc, ACC_ALL);
	for (unsigned int i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		mk(UR_OPC_WRITE_ONLY, qpn_of(T.rc), PSN0, 64);
		ur_reth_set(&P, T.va[M_ALL], T.key[M_ALL], 64);
		uroce_pkt_finish(&P, &T.from);
		pbuf[where[i]] ^= 0x10;
		inject_raw(pbuf, P.len);
	}
	CHECK(DEV(rx_drop_icrc) - d0 == 9, "bad ICRC dropped: %llu of 9",
	      (unsigned long long)(DEV(rx_drop_icrc) - d0));
	CHECK(expect_reply(NO_REPLY, 0, 0, "bad ICRC"), "no reply to bad ICRC");
	CHECK(mem_same("bad ICRC") && to_uqp(T.rc)->resp.psn == PSN0, "nothing changed");

	/* an ICRC computed for another source address or port is bad too */
	d0 = DEV(rx_drop_icrc);
	{
		struct uroce_ipinfo other = T.from;

		other.sport++;
		mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 8);
		uroce_pkt_finish(&P, &other);
		inject_raw(pbuf, P.len);
	}
	CHECK(DEV(rx_drop_icrc) - d0 == 1, "ICRC of another UDP source port dropped");
}

/* Opcodes that are reserved, RD, CNP or of no supported transport. */
static void test_unknown_opcodes(void)
{
	uint64_t d0 = DEV(rx_drop_parse);
	unsigned int n = 0;

	fresh(T.rc, ACC_ALL);
	for (int op = 0; op < 256; op++) {
		if (uroce_opcode[op].name)
			continue;
		mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 8);
		pbuf[0] = (uint8_t)op;
		send_p();
		n++;
	}
	CHECK(n > 150 && DEV(rx_drop_parse) - d0 == n, "%u unknown opcodes, %llu dropped", n,
	      (unsigned long long)(DEV(rx_drop_parse) - d0));
	CHECK(expect_reply(NO_REPLY, 0, 0, "unknown opcodes"), "no reply to unknown opcodes");
	CHECK(mem_same("unknown opcodes") && to_uqp(T.rc)->resp.psn == PSN0 &&
		  rq_count(T.rc) == NRECV,
	      "nothing changed");
}

/* Destination QPs that are not here. */
static void test_wrong_qpn(void)
{
	uint64_t d0 = DEV(rx_drop_qpn);
	const uint32_t bad[] = {((uint32_t)T.ep->port << 8) | 0xfe, ((uint32_t)T.ep->port << 8),
				((uint32_t)(uint16_t)(T.ep->port + 1) << 8) | (qpn_of(T.rc) & 0xff),
				0, 0xfffffe};

	fresh(T.rc, ACC_ALL);
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		mk(UR_OPC_SEND_ONLY, bad[i], PSN0, 8);
		send_p();
	}
	CHECK(DEV(rx_drop_qpn) - d0 == 5, "wrong QPNs dropped: %llu of 5",
	      (unsigned long long)(DEV(rx_drop_qpn) - d0));
	CHECK(expect_reply(NO_REPLY, 0, 0, "wrong QPN"), "no reply");
	CHECK(rq_count(T.rc) == NRECV && mem_same("wrong QPN"), "nothing consumed or written");
}

/* PSNs far ahead: one sequence NAK, nothing else; far behind: a
 * duplicate, acknowledged again and not executed. */
static void test_psn_window(void)
{
	uint64_t oos = QPC(T.rc, oos_req), naks = QPC(T.rc, naks_tx), dup = QPC(T.rc, dup_req);
	struct ibv_wc wc[4];

	fresh(T.rc, ACC_ALL);
	mk(UR_OPC_WRITE_ONLY, qpn_of(T.rc), PSN0 + 0x400000, 16);
	ur_reth_set(&P, T.va[M_ALL], T.key[M_ALL], 16);
	send_p();
	CHECK(expect_reply(NAK(UR_NAK_PSN_SEQ_ERR), PSN0, 0, "PSN +2^22"),
	      "PSN sequence error NAK for the expected PSN");
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0 + 0x7fffff, 16);
	send_p();
	CHECK(expect_reply(NO_REPLY, 0, 0, "second PSN gap"), "one NAK per gap");
	CHECK(QPC(T.rc, oos_req) - oos == 2 && QPC(T.rc, naks_tx) - naks == 1,
	      "counted: %llu out of sequence, %llu NAK",
	      (unsigned long long)(QPC(T.rc, oos_req) - oos),
	      (unsigned long long)(QPC(T.rc, naks_tx) - naks));
	CHECK(qp_state(T.rc) == IBV_QPS_RTS && to_uqp(T.rc)->resp.psn == PSN0 &&
		  rq_count(T.rc) == NRECV && poll_all(T.cq, wc, 4) == 0,
	      "no state change beyond the NAK");
	CHECK(mem_same("PSN ahead"), "nothing written");

	/* far behind (2^23 is behind too): duplicates, re-acknowledged */
	mk(UR_OPC_WRITE_ONLY, qpn_of(T.rc), PSN0 - 0x400000, 16);
	ur_reth_set(&P, T.va[M_ALL], T.key[M_ALL], 16);
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0 - 1, 0, "PSN -2^22"), "duplicate: ACK of PSN-1");
	mk(UR_OPC_WRITE_ONLY, qpn_of(T.rc), PSN0 + 0x800000, 16);
	ur_reth_set(&P, T.va[M_ALL], T.key[M_ALL], 16);
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0 - 1, 0, "PSN +2^23"), "duplicate: ACK of PSN-1");
	CHECK(QPC(T.rc, dup_req) - dup == 2, "duplicates counted");
	CHECK(mem_same("duplicate WRITE"), "a duplicate WRITE is not executed");

	/* the expected PSN still works */
	mk(UR_OPC_WRITE_ONLY, qpn_of(T.rc), PSN0, 16);
	ur_reth_set(&P, T.va[M_ALL] + 32, T.key[M_ALL], 16);
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0, 0, "in sequence"), "in-sequence WRITE acknowledged");
	CHECK(mem_same_except(M_ALL, 32, 16, "in-sequence WRITE") &&
		  !memcmp(mem(M_ALL) + 32, P.payload, 16),
	      "written exactly where asked");
}

struct access_case {
	const char *name;
	uint8_t op;
	int mr;
	uint64_t va; /* offset from the MR's va (M_TOP: absolute) */
	bool absolute;
	uint32_t len;
	uint32_t rkey; /* 0: the MR's */
	unsigned int qp_access;
	int syn;
};

/* R_Key, bounds and access checks: the responder NAKs (remote access
 * error, or invalid request for a misaligned atomic), completes nothing,
 * writes nothing and moves to ERR. */
static void test_rkey_checks(void)
{
	const struct access_case c[] = {
	    {"WRITE past the MR end", UR_OPC_WRITE_ONLY, M_ALL, MR_LEN - 8, false, 16, 0, ACC_ALL,
	     NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"WRITE before the MR", UR_OPC_WRITE_ONLY, M_ALL, (uint64_t)-8, false, 16, 0, ACC_ALL,
	     NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"RETH length past the MR, short payload", UR_OPC_WRITE_FIRST, M_ALL, 0, false,
	     MR_LEN + 1, 0, ACC_ALL, NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"RETH length 2^32-1", UR_OPC_WRITE_FIRST, M_ALL, 64, false, 0xffffffffu, 0, ACC_ALL,
	     NAK(UR_NAK_INVALID_REQ)},
	    {"RETH length 2^31+1 (> max_msg_sz)", UR_OPC_WRITE_FIRST, M_ALL, 0, false, 0x80000001u,
	     0, ACC_ALL, NAK(UR_NAK_INVALID_REQ)},
	    {"WRITE va+len wraps 2^64", UR_OPC_WRITE_ONLY, M_TOP, 0ull - 8, true, 16, 0, ACC_ALL,
	     NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"WRITE at va 0 after the wrap", UR_OPC_WRITE_ONLY, M_TOP, 0, true, 16, 0, ACC_ALL,
	     NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"READ va+len wraps 2^64", UR_OPC_READ_REQ, M_TOP, 0ull - 64, true, 128, 0, ACC_ALL,
	     NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"READ of 2^32-1 bytes", UR_OPC_READ_REQ, M_ALL, 0, false, 0xffffffffu, 0, ACC_ALL,
	     NAK(UR_NAK_INVALID_REQ)},
	    {"WRITE with a wrong R_Key", UR_OPC_WRITE_ONLY, M_ALL, 0, false, 16, 0x5a5a5a5a,
	     ACC_ALL, NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"WRITE with the R_Key of another PD", UR_OPC_WRITE_ONLY, M_PD2, 0, false, 16, 0,
	     ACC_ALL, NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"WRITE with a deregistered MR's R_Key", UR_OPC_WRITE_ONLY, M_DEAD, 0, false, 16, 0,
	     ACC_ALL, NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"READ of an MR without REMOTE_READ", UR_OPC_READ_REQ, M_NOREAD, 0, false, 64, 0,
	     ACC_ALL, NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"READ through a QP without REMOTE_READ", UR_OPC_READ_REQ, M_ALL, 0, false, 64, 0,
	     IBV_ACCESS_REMOTE_WRITE, NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"WRITE through a QP without REMOTE_WRITE", UR_OPC_WRITE_ONLY, M_ALL, 0, false, 16, 0,
	     IBV_ACCESS_REMOTE_READ, NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"FETCH_ADD on an MR without REMOTE_ATOMIC", UR_OPC_FETCH_ADD, M_NOATOMIC, 0, false, 8,
	     0, ACC_ALL, NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"CMP_SWAP through a QP without REMOTE_ATOMIC", UR_OPC_CMP_SWAP, M_ALL, 0, false, 8, 0,
	     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"misaligned CMP_SWAP", UR_OPC_CMP_SWAP, M_ALL, 4, false, 8, 0, ACC_ALL,
	     NAK(UR_NAK_INVALID_REQ)},
	    {"FETCH_ADD at an aligned va, misaligned host address", UR_OPC_FETCH_ADD, M_SKEW, 0,
	     false, 8, 0, ACC_ALL, NAK(UR_NAK_INVALID_REQ)},
	    {"FETCH_ADD past the MR end", UR_OPC_FETCH_ADD, M_ALL, MR_LEN, false, 8, 0, ACC_ALL,
	     NAK(UR_NAK_REM_ACCESS_ERR)},
	    {"FETCH_ADD at 2^64-8 of the wrapping MR", UR_OPC_FETCH_ADD, M_TOP, 0ull - 8, true, 8,
	     0, ACC_ALL, ACK_OK},
	    {"FETCH_ADD with the R_Key of another PD", UR_OPC_FETCH_ADD, M_PD2, 0, false, 8, 0,
	     ACC_ALL, NAK(UR_NAK_REM_ACCESS_ERR)},
	};

	for (unsigned int i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint64_t naks = QPC(T.rc, naks_tx);
		uint64_t va = c[i].absolute ? c[i].va : T.va[c[i].mr] + c[i].va;
		uint32_t rkey = c[i].rkey ? c[i].rkey : T.key[c[i].mr];
		bool write = c[i].op == UR_OPC_WRITE_ONLY || c[i].op == UR_OPC_WRITE_FIRST;
		bool atomic = c[i].op == UR_OPC_FETCH_ADD || c[i].op == UR_OPC_CMP_SWAP;
		bool ok = c[i].syn == ACK_OK;
		struct ibv_wc wc[4];
		struct reply r;

		fresh(T.rc, IBV_ACCESS_LOCAL_WRITE | c[i].qp_access);
		mk(c[i].op, qpn_of(T.rc), PSN0,
		   write ? (c[i].op == UR_OPC_WRITE_FIRST ? MTU : c[i].len) : 0);
		if (atomic)
			ur_atmeth_set(&P, va, rkey, 1, 0);
		else
			ur_reth_set(&P, va, rkey, c[i].len);
		send_p();
		if (atomic && ok) {
			CHECK(!sink_get(&r, 1000) && r.opcode == UR_OPC_ATOMIC_ACK && r.psn == PSN0,
			      "%s: ATOMIC ACKNOWLEDGE", c[i].name);
			CHECK(mem_same_except(c[i].mr, MR_LEN - 8, 8, c[i].name),
			      "%s: only the 8 bytes changed", c[i].name);
			continue;
		}
		CHECK(expect_reply(c[i].syn, PSN0, 0, c[i].name), "%s: NAK 0x%02x", c[i].name,
		      c[i].syn);
		CHECK(expect_reply(NO_REPLY, 0, 0, c[i].name), "%s: no READ response data",
		      c[i].name);
		CHECK(QPC(T.rc, naks_tx) - naks == 1, "%s: NAK counted", c[i].name);
		CHECK(mem_same(c[i].name), "%s: no byte written", c[i].name);
		/* IBTA 9.9.3.1: the responder's QP goes to the error state */
		CHECK(qp_state(T.rc) == IBV_QPS_ERR, "%s: QP state %d, want ERR", c[i].name,
		      qp_state(T.rc));
		CHECK(poll_all(T.cq, wc, 4) == NRECV && wc[0].status == IBV_WC_WR_FLUSH_ERR,
		      "%s: receives flushed, none consumed", c[i].name);
	}
}

/* Opcode sequence errors and SENDs larger than the receive buffer. */
static void test_sequence_and_length(void)
{
	struct ibv_wc wc[8];
	int n;

	/* a MIDDLE with no FIRST before it: invalid request */
	fresh(T.rc, ACC_ALL);
	mk(UR_OPC_WRITE_MIDDLE, qpn_of(T.rc), PSN0, MTU);
	send_p();
	CHECK(expect_reply(NAK(UR_NAK_INVALID_REQ), PSN0, 0, "WRITE_MIDDLE alone"),
	      "WRITE_MIDDLE without FIRST: invalid request NAK");
	CHECK(mem_same("WRITE_MIDDLE alone") && qp_state(T.rc) == IBV_QPS_ERR,
	      "nothing written, QP in ERR");

	fresh(T.rc, ACC_ALL);
	mk(UR_OPC_SEND_LAST, qpn_of(T.rc), PSN0, 8);
	send_p();
	CHECK(expect_reply(NAK(UR_NAK_INVALID_REQ), PSN0, 0, "SEND_LAST alone"),
	      "SEND_LAST without FIRST: invalid request NAK");
	CHECK(mem_same("SEND_LAST alone"), "nothing written");

	/* a SEND continuing a WRITE */
	fresh(T.rc, ACC_ALL);
	mk(UR_OPC_WRITE_FIRST, qpn_of(T.rc), PSN0, MTU);
	ur_reth_set(&P, T.va[M_ALL], T.key[M_ALL], 2 * MTU);
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0, 0, "WRITE_FIRST"), "WRITE_FIRST acknowledged");
	mk(UR_OPC_SEND_LAST, qpn_of(T.rc), PSN0 + 1, 8);
	send_p();
	CHECK(expect_reply(NAK(UR_NAK_INVALID_REQ), PSN0 + 1, 0, "WRITE_FIRST, SEND_LAST"),
	      "a SEND inside a WRITE: invalid request NAK");
	CHECK(mem_same_except(M_ALL, 0, MTU, "SEND inside a WRITE") && rq_count(T.rc) == 0,
	      "only the WRITE's first packet written; receives flushed");

	/* a WRITE whose packets carry more than its RETH length */
	fresh(T.rc, ACC_ALL);
	mk(UR_OPC_WRITE_ONLY, qpn_of(T.rc), PSN0, 32);
	ur_reth_set(&P, T.va[M_ALL], T.key[M_ALL], 16);
	send_p();
	CHECK(expect_reply(NAK(UR_NAK_INVALID_REQ), PSN0, 0, "WRITE longer than RETH"),
	      "payload longer than the RETH length: invalid request NAK");
	CHECK(mem_same("WRITE longer than RETH"), "nothing written");

	/* a non-last packet shorter than the MTU */
	fresh(T.rc, ACC_ALL);
	mk(UR_OPC_WRITE_FIRST, qpn_of(T.rc), PSN0, 100);
	ur_reth_set(&P, T.va[M_ALL], T.key[M_ALL], 200);
	send_p();
	CHECK(expect_reply(NAK(UR_NAK_INVALID_REQ), PSN0, 0, "short FIRST"),
	      "FIRST shorter than the MTU: invalid request NAK");

	/* SEND of 200 bytes into a 128-byte receive */
	fresh(T.rc, ACC_ALL);
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 200);
	send_p();
	CHECK(expect_reply(NAK(UR_NAK_INVALID_REQ), PSN0, 0, "SEND too long"),
	      "SEND longer than the receive buffer: invalid request NAK");
	n = poll_all(T.cq, wc, 8);
	CHECK(n == NRECV && wc[0].status == IBV_WC_LOC_LEN_ERR && wc[0].wr_id == 0,
	      "receive completes with a local length error (n %d status %s)", n,
	      n ? ibv_wc_status_str(wc[0].status) : "-");
	CHECK(mem_same_except(M_RECV, 0, RBUF / 2, "SEND too long"),
	      "nothing written past the receive buffer");

	/* the same over several packets */
	fresh(T.rc, ACC_ALL);
	mk(UR_OPC_SEND_FIRST, qpn_of(T.rc), PSN0, MTU);
	send_p();
	CHECK(expect_reply(NAK(UR_NAK_INVALID_REQ), PSN0, 0, "SEND_FIRST too long"),
	      "SEND_FIRST longer than the receive buffer: invalid request NAK");
	CHECK(mem_same_except(M_RECV, 0, RBUF / 2, "SEND_FIRST too long"),
	      "nothing written past the receive buffer");
}

/* UC: every error drops the message silently (IBTA 9.8.2): no NAK. */
static void test_uc(void)
{
	uint64_t drops = QPC(T.uc, rx_drop_state);

	fresh(T.uc, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	mk(UR_TR_UC | UR_OPC_WRITE_ONLY, qpn_of(T.uc), PSN0, 16);
	ur_reth_set(&P, T.va[M_NOATOMIC], 0x5a5a5a5a, 16);
	send_p();
	mk(UR_TR_UC | UR_OPC_WRITE_ONLY, qpn_of(T.uc), PSN0 + 1, 16);
	ur_reth_set(&P, T.va[M_PD2], T.key[M_PD2], 16);
	send_p();
	mk(UR_TR_UC | UR_OPC_WRITE_MIDDLE, qpn_of(T.uc), PSN0 + 2, MTU);
	send_p();
	mk(UR_TR_UC | UR_OPC_SEND_ONLY, qpn_of(T.uc), PSN0 + 3, 200);
	send_p();
	CHECK(expect_reply(NO_REPLY, 0, 0, "UC errors"), "UC never NAKs");
	CHECK(QPC(T.uc, rx_drop_state) - drops >= 3, "UC drops counted (%llu)",
	      (unsigned long long)(QPC(T.uc, rx_drop_state) - drops));
	CHECK(mem_same_except(M_RECV, 1 * NRECV * RBUF, RBUF / 2, "UC errors"),
	      "nothing written outside the receive buffer");
	/* and the QP still works */
	mk(UR_TR_UC | UR_OPC_WRITE_ONLY, qpn_of(T.uc), PSN0 + 4, 16);
	ur_reth_set(&P, T.va[M_ALL], T.key[M_ALL], 16);
	send_p();
	CHECK(!memcmp(mem(M_ALL), P.payload, 16), "a good UC WRITE after the errors lands");
}

/* UD: a wrong Q_Key is dropped and counted, the receive stays posted. */
static void test_ud_qkey(void)
{
	uint64_t drops = QPC(T.ud, rx_drop_state);
	struct ibv_wc wc[4];
	int n;

	fresh(T.ud, 0);
	mk(UR_TR_UD | UR_OPC_SEND_ONLY, qpn_of(T.ud), 0, 32);
	ur_deth_set(&P, QKEY + 1, 0x123456);
	send_p();
	CHECK(QPC(T.ud, rx_drop_state) - drops == 1 && rq_count(T.ud) == NRECV,
	      "Q_Key mismatch: dropped, counted, no receive consumed");
	CHECK(poll_all(T.cq, wc, 4) == 0 && mem_same("UD Q_Key"), "no completion, no write");
	/* a datagram larger than the receive: dropped and counted, the
	 * receive stays posted (rxe, RESPST_ERR_LENGTH for UD) */
	drops = QPC(T.ud, rx_drop_len);
	mk(UR_TR_UD | UR_OPC_SEND_ONLY, qpn_of(T.ud), 1, RBUF);
	ur_deth_set(&P, QKEY, 0x123456);
	send_p();
	n = poll_all(T.cq, wc, 4);
	CHECK(n == 0 && QPC(T.ud, rx_drop_len) - drops == 1 && rq_count(T.ud) == NRECV,
	      "UD too long: dropped, counted, no receive consumed (%d completions)", n);
	CHECK(mem_same("UD too long"), "nothing written");
	/* the right Q_Key is received */
	mk(UR_TR_UD | UR_OPC_SEND_ONLY, qpn_of(T.ud), 2, 32);
	ur_deth_set(&P, QKEY, 0x123456);
	send_p();
	n = poll_all(T.cq, wc, 4);
	CHECK(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].byte_len == 40 + 32 &&
		  wc[0].src_qp == 0x123456,
	      "matching Q_Key: received (n %d)", n);
}

/* A QP that is not ready for packets drops them. */
static void test_states(void)
{
	static const enum ibv_qp_state st[] = {IBV_QPS_RESET, IBV_QPS_INIT};
	struct ibv_wc wc[4];

	for (unsigned int i = 0; i < 2; i++) {
		uint64_t drops = QPC(T.rc, rx_drop_state);

		qp_fresh_to(T.rc, st[i], ACC_ALL);
		if (st[i] == IBV_QPS_INIT)
			post_recvs(T.rc, 0, RBUF / 2);
		drain_cqs();
		sink_drain();
		snap();
		mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 8);
		send_p();
		mk(UR_OPC_WRITE_ONLY, qpn_of(T.rc), PSN0, 16);
		ur_reth_set(&P, T.va[M_ALL], T.key[M_ALL], 16);
		send_p();
		CHECK(QPC(T.rc, rx_drop_state) - drops == 2, "RC in %s: dropped and counted",
		      st[i] == IBV_QPS_RESET ? "RESET" : "INIT");
		CHECK(expect_reply(NO_REPLY, 0, 0, "QP not ready"), "no reply");
		CHECK(mem_same("QP not ready") && poll_all(T.cq, wc, 4) == 0,
		      "nothing written or completed");
	}
	{
		uint64_t drops = QPC(T.ud_init, rx_drop_state);

		mk(UR_TR_UD | UR_OPC_SEND_ONLY, qpn_of(T.ud_init), 0, 8);
		ur_deth_set(&P, QKEY, 1);
		send_p();
		CHECK(QPC(T.ud_init, rx_drop_state) - drops == 1, "UD in INIT: dropped, counted");
	}
	/* a packet of another transport than the QP's */
	{
		uint64_t drops = QPC(T.ud, rx_drop_state) + QPC(T.rc, rx_drop_state);

		fresh(T.rc, ACC_ALL);
		fresh(T.ud, 0);
		mk(UR_TR_UC | UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 8);
		send_p();
		mk(UR_OPC_SEND_ONLY, qpn_of(T.ud), 0, 8);
		send_p();
		mk(UR_TR_UD | UR_OPC_SEND_ONLY, qpn_of(T.rc), 0, 8);
		ur_deth_set(&P, QKEY, 1);
		send_p();
		CHECK(QPC(T.ud, rx_drop_state) + QPC(T.rc, rx_drop_state) - drops == 3,
		      "opcodes of another transport dropped and counted");
		CHECK(rq_count(T.rc) == NRECV && rq_count(T.ud) == NRECV && mem_same("transport"),
		      "nothing consumed or written");
	}
}

/* XRC: the XRCETH must name an SRQ of the QP's XRC domain, the same one
 * for every packet of a message. */
static void test_xrc(void)
{
	uint32_t c1, c2;
	struct ibv_wc wc[8];
	int n;

	fresh(T.xrc, ACC_ALL);
	c1 = srq_count(T.xsrq1);
	c2 = srq_count(T.xsrq2);
	mk(UR_TR_XRC | UR_OPC_SEND_ONLY, qpn_of(T.xrc), PSN0, 64);
	ur_xrceth_set(&P, T.xsrqn2);
	send_p();
	CHECK(expect_reply(NAK(UR_NAK_INVALID_REQ), PSN0, UR_TR_XRC, "foreign SRQ"),
	      "XRCETH naming another domain's SRQ: invalid request NAK");
	CHECK(srq_count(T.xsrq2) == c2 && srq_count(T.xsrq1) == c1 && mem_same("foreign SRQ"),
	      "no receive of either SRQ consumed, nothing written");

	fresh(T.xrc, ACC_ALL);
	mk(UR_TR_XRC | UR_OPC_SEND_ONLY, qpn_of(T.xrc), PSN0, 64);
	ur_xrceth_set(&P, 0xabcdef);
	send_p();
	CHECK(expect_reply(NAK(UR_NAK_INVALID_REQ), PSN0, UR_TR_XRC, "no such SRQ"),
	      "XRCETH naming no SRQ: invalid request NAK");

	/* the SRQ changes in the middle of a message (this crashed, found
	 * by fuzz_rx: the error completion went to a NULL CQ) */
	fresh(T.xrc, ACC_ALL);
	drain_cqs();
	mk(UR_TR_XRC | UR_OPC_SEND_FIRST, qpn_of(T.xrc), PSN0, MTU);
	ur_xrceth_set(&P, T.xsrqn1);
	send_p();
	CHECK(srq_count(T.xsrq1) == c1 - 1, "SEND_FIRST took a receive of SRQ 1");
	mk(UR_TR_XRC | UR_OPC_SEND_LAST, qpn_of(T.xrc), PSN0 + 1, 8);
	ur_xrceth_set(&P, T.xsrqn2);
	send_p();
	sink_drain();
	n = poll_all(T.cq, wc, 8);
	CHECK(n == 1 && wc[0].status == IBV_WC_REM_INV_REQ_ERR, "error completion on SRQ 1's CQ");
	CHECK(qp_state(T.xrc) == IBV_QPS_ERR && srq_count(T.xsrq2) == c2 &&
		  mem_same_except(M_RECV, 3 * NRECV * RBUF, MTU, "SRQ switch"),
	      "QP in ERR, SRQ 2 untouched");
	/* same, moved to ERR by the application half way */
	fresh(T.xrc, ACC_ALL);
	mk(UR_TR_XRC | UR_OPC_SEND_FIRST, qpn_of(T.xrc), PSN0, MTU);
	ur_xrceth_set(&P, T.xsrqn1);
	send_p();
	{
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

		modify(T.xrc, &a, IBV_QP_STATE);
	}
	n = poll_all(T.cq, wc, 8);
	CHECK(n == 1 && wc[0].status == IBV_WC_WR_FLUSH_ERR, "in-progress receive flushed");
	/* refill SRQ 1 */
	for (uint32_t i = srq_count(T.xsrq1); i < c1; i++) {
		struct ibv_sge sg = {.addr = (uintptr_t)mem(M_RECV) + 3 * NRECV * RBUF,
				     .length = MTU * 2,
				     .lkey = T.key[M_RECV]};
		struct ibv_recv_wr wr = {.wr_id = 77, .sg_list = &sg, .num_sge = 1}, *bad;

		ibv_post_srq_recv(T.xsrq1, &wr, &bad);
	}
}

/* Responses that answer nothing the requester sent. */
static void test_bogus_responses(void)
{
	uint64_t dup = QPC(T.req, duplicates);
	struct ibv_wc wc[4];

	qp_fresh_to(T.req, IBV_QPS_RTS, ACC_ALL);
	drain_cqs();
	snap();
	mk(UR_OPC_ACK, qpn_of(T.req), PSN0 + 5, 0);
	ur_aeth_set(&P, ACK_OK, 0);
	send_p();
	mk(UR_OPC_READ_RESP_ONLY, qpn_of(T.req), PSN0, 64);
	ur_aeth_set(&P, ACK_OK, 0);
	send_p();
	mk(UR_OPC_ATOMIC_ACK, qpn_of(T.req), PSN0, 0);
	ur_aeth_set(&P, ACK_OK, 0);
	send_p();
	mk(UR_OPC_ACK, qpn_of(T.req), PSN0, 0);
	ur_aeth_set(&P, NAK(UR_NAK_REM_ACCESS_ERR), 0);
	send_p();
	CHECK(QPC(T.req, duplicates) - dup == 4, "responses to nothing dropped and counted (%llu)",
	      (unsigned long long)(QPC(T.req, duplicates) - dup));
	CHECK(qp_state(T.req) == IBV_QPS_RTS && poll_all(T.cq, wc, 4) == 0 && mem_same("bogus"),
	      "requester unchanged");
}

/* Post n signaled WQEs on T.req: 64-byte SENDs, a 64-byte READ at index
 * rd (into M_ALL at offset 1024) unless rd < 0. */
static void post_req_wqes(int n, int rd)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sg = {.addr = (uintptr_t)mem(M_ALL) + (i == rd ? 1024u : 0u),
				     .length = 64,
				     .lkey = T.mr[M_ALL]->lkey};
		struct ibv_send_wr wr = {.wr_id = (uint64_t)i,
					 .sg_list = &sg,
					 .num_sge = 1,
					 .opcode = i == rd ? IBV_WR_RDMA_READ : IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		if (i == rd) {
			wr.wr.rdma.remote_addr = 0x1000;
			wr.wr.rdma.rkey = 0x77;
		}
		if (ibv_post_send(T.req, &wr, &bad)) {
			printf("ibv_post_send: %s\n", strerror(errno));
			exit(1);
		}
	}
}

/* Expire T.req's retransmission timer now: go-back-N from una_psn. */
static void fire_req_timer(void)
{
	struct uroce_qp *qp = to_uqp(T.req);

	pthread_mutex_lock(&qp->lock);
	qp->req.deadline_ns = 1;
	uroce_req_timer(qp, uroce_now_ns());
	pthread_mutex_unlock(&qp->lock);
}

/* The requester's retransmission timeout itself (not a probe: no probe is
 * sent while READs are outstanding), as if the peer were silent for the
 * whole local ACK timeout. */
static void fire_req_timeout(void)
{
	struct uroce_qp *qp = to_uqp(T.req);

	pthread_mutex_lock(&qp->lock);
	qp->req.deadline_ns = 1;
	qp->req.progress_ns = 0;
	uroce_req_timer(qp, uroce_now_ns());
	pthread_mutex_unlock(&qp->lock);
}

/* A response to T.req: an ACK/NAK with syndrome syn, or a 64-byte READ
 * response (opc). */
static void inject_resp(uint8_t opc, uint32_t psn, int syn)
{
	mk(opc, qpn_of(T.req), psn, opc == UR_OPC_ACK ? 0 : 64);
	ur_aeth_set(&P, (uint8_t)syn, 0);
	send_p();
}

static void inject_ack(uint32_t psn)
{
	inject_resp(UR_OPC_ACK, psn, ACK_OK);
}

/* T.req fresh, with a retransmission timer (fired by hand: the progress
 * thread is stopped), n WQEs posted (a READ at rd) and sent: returns how
 * many packets the sink got. */
static int req_start(int n, int rd)
{
	struct reply r;
	int sent = 0;

	qp_fresh_to(T.req, IBV_QPS_RTS, ACC_ALL);
	to_uqp(T.req)->attr.timeout = 14;
	drain_cqs();
	sink_drain();
	post_req_wqes(n, rd);
	uroce_ep_flush(T.ep); /* what autocork holds back */
	while (!sink_get(&r, 100))
		sent++;
	return sent;
}

/* The common-case paths (resp.c rcv_fast, comp.c ack_one; docs/latency.md
 * "Session 20"): a SEND ONLY, SEND ONLY with immediate, WRITE ONLY and
 * WRITE ONLY with immediate in sequence are taken by the responder's
 * (rcvd_fast_requests counts each), with the same ACKs, completions and
 * bytes as the general steps; a duplicate, a PSN after a gap, a SEND with
 * no receive posted, one longer than its receive buffer, a bad R_Key, the
 * first packet in RTR and a QP in ERR are not, and are answered as before.
 * An ACK of the one outstanding SEND is completed by the completer's; one
 * of part of several WQEs, and a NAK, are not. */
static void test_fast_path(void)
{
	uint64_t f0, dup = QPC(T.rc, dup_req), oos = QPC(T.rc, oos_req),
		     rnr = QPC(T.rc, rnr_naks_tx), drop = QPC(T.rc, rx_drop_state);
	struct uroce_qp *rq = to_uqp(T.rc), *sq = to_uqp(T.req);
	struct ibv_wc wc[8];
	struct reply r;
	int n;

	/* first packet in RTR: the general steps (COMM_EST), then the path */
	qp_fresh_to(T.rc, IBV_QPS_RTR, ACC_ALL);
	post_recvs(T.rc, 0, RBUF / 2);
	drain_cqs();
	sink_drain();
	snap();
	f0 = DEV(rx_fast);
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 16);
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0, 0, "RTR: first SEND") && DEV(rx_fast) == f0 &&
		  rq->resp.comm_est,
	      "the first packet in RTR takes the general steps");
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0 + 1, 16);
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0 + 1, 0, "RTR: second SEND") && DEV(rx_fast) == f0 + 1,
	      "the second in RTR takes the path (%llu)", (unsigned long long)(DEV(rx_fast) - f0));
	n = poll_all(T.cq, wc, 8);
	CHECK(n == 2 && wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS &&
		  wc[1].wr_id == 1 && wc[1].byte_len == 16 && wc[1].opcode == IBV_WC_RECV,
	      "RTR: two receives completed (%d)", n);

	/* the four opcodes in sequence */
	fresh(T.rc, ACC_ALL);
	f0 = DEV(rx_fast);
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 16);
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0, 0, "SEND_ONLY") && last_msn == 1,
	      "SEND ONLY acknowledged, MSN 1 (%u)", last_msn);
	mk(UR_OPC_SEND_ONLY_IMM, qpn_of(T.rc), PSN0 + 1, 8);
	ur_immdt_set_raw(&P, htobe32(0x11223344u));
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0 + 1, 0, "SEND_ONLY_IMM") && last_msn == 2,
	      "SEND ONLY IMM acknowledged, MSN 2 (%u)", last_msn);
	mk(UR_OPC_WRITE_ONLY, qpn_of(T.rc), PSN0 + 2, 16);
	ur_reth_set(&P, T.va[M_ALL] + 64, T.key[M_ALL], 16);
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0 + 2, 0, "WRITE_ONLY") && last_msn == 3,
	      "WRITE ONLY acknowledged, MSN 3 (%u)", last_msn);
	mk(UR_OPC_WRITE_ONLY_IMM, qpn_of(T.rc), PSN0 + 3, 0);
	ur_reth_set(&P, T.va[M_ALL], T.key[M_ALL], 0);
	ur_immdt_set_raw(&P, htobe32(0x55667788u));
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0 + 3, 0, "WRITE_ONLY_IMM") && last_msn == 4,
	      "WRITE ONLY IMM acknowledged, MSN 4 (%u)", last_msn);
	CHECK(DEV(rx_fast) - f0 == 4, "4 requests on the path (%llu)",
	      (unsigned long long)(DEV(rx_fast) - f0));
	n = poll_all(T.cq, wc, 8);
	CHECK(n == 3 && wc[0].wr_id == 0 && wc[0].byte_len == 16 && wc[0].opcode == IBV_WC_RECV &&
		  !(wc[0].wc_flags & IBV_WC_WITH_IMM) && wc[1].wr_id == 1 && wc[1].byte_len == 8 &&
		  (wc[1].wc_flags & IBV_WC_WITH_IMM) && wc[1].imm_data == htobe32(0x11223344u) &&
		  wc[2].wr_id == 2 && wc[2].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
		  wc[2].byte_len == 0 && wc[2].imm_data == htobe32(0x55667788u) &&
		  wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS &&
		  wc[2].status == IBV_WC_SUCCESS && wc[2].src_qp == to_uqp(T.rc)->attr.dest_qp_num,
	      "3 receive completions as the general steps make them (%d)", n);
	CHECK(mem(M_RECV)[0] == 0xa0 && mem(M_RECV)[15] == 0xa0 + 15 &&
		  mem(M_RECV)[RBUF + 7] == 0xa7 && mem(M_ALL)[64] == 0xa0 &&
		  mem(M_ALL)[79] == 0xa0 + 15,
	      "the bytes landed");
	CHECK(rq->resp.psn == ((PSN0 + 4) & UR_PSN_MASK) && rq->resp.msn == 4 &&
		  rq_count(T.rc) == NRECV - 3,
	      "PSN %u, MSN %u, %u receives left", rq->resp.psn, rq->resp.msn, rq_count(T.rc));

	/* a duplicate: acknowledged again, not executed */
	snap();
	mk(UR_OPC_WRITE_ONLY, qpn_of(T.rc), PSN0 + 2, 16);
	ur_reth_set(&P, T.va[M_ALL] + 256, T.key[M_ALL], 16);
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0 + 3, 0, "duplicate") && QPC(T.rc, dup_req) == dup + 1 &&
		  DEV(rx_fast) - f0 == 4 && mem_same("duplicate"),
	      "a duplicate WRITE ONLY: the general steps");
	/* after a gap: one sequence NAK */
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0 + 6, 16);
	send_p();
	CHECK(expect_reply(NAK(UR_NAK_PSN_SEQ_ERR), PSN0 + 4, 0, "gap") &&
		  QPC(T.rc, oos_req) == oos + 1 && DEV(rx_fast) - f0 == 4 && mem_same("gap"),
	      "a SEND ONLY after a gap: the general steps");
	/* the last receive WQE, then none: RNR NAK */
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0 + 4, 16);
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0 + 4, 0, "last WQE") && DEV(rx_fast) - f0 == 5,
	      "the last receive WQE taken on the path");
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0 + 5, 16);
	send_p();
	CHECK(expect_reply((int)(UR_AETH_RNR_NAK | 1), PSN0 + 5, 0, "no WQE") &&
		  QPC(T.rc, rnr_naks_tx) == rnr + 1 && DEV(rx_fast) - f0 == 5 &&
		  qp_state(T.rc) == IBV_QPS_RTS,
	      "a SEND ONLY with no receive posted: RNR NAK");
	post_recvs(T.rc, 0, RBUF / 2);
	send_p();
	CHECK(expect_reply(ACK_OK, PSN0 + 5, 0, "after the RNR") && DEV(rx_fast) - f0 == 6,
	      "sent again once a receive is posted: on the path");
	drain_cqs();

	/* longer than the receive buffer: invalid request, QP in ERR */
	fresh(T.rc, ACC_ALL);
	f0 = DEV(rx_fast);
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, RBUF / 2 + 1);
	send_p();
	n = poll_all(T.cq, wc, 8);
	CHECK(expect_reply(NAK(UR_NAK_INVALID_REQ), PSN0, 0, "SEND too long") &&
		  DEV(rx_fast) == f0 && n >= 1 && wc[0].status == IBV_WC_LOC_LEN_ERR &&
		  qp_state(T.rc) == IBV_QPS_ERR,
	      "a SEND ONLY longer than its receive buffer: the general steps");
	/* a bad R_Key: remote access error, QP in ERR */
	fresh(T.rc, ACC_ALL);
	mk(UR_OPC_WRITE_ONLY, qpn_of(T.rc), PSN0, 16);
	ur_reth_set(&P, T.va[M_ALL], 0x5a5a5a5a, 16);
	send_p();
	CHECK(expect_reply(NAK(UR_NAK_REM_ACCESS_ERR), PSN0, 0, "bad R_Key") &&
		  DEV(rx_fast) == f0 && mem_same("bad R_Key") && qp_state(T.rc) == IBV_QPS_ERR,
	      "a WRITE ONLY with a bad R_Key: the general steps");
	/* in ERR: dropped */
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0 + 1, 16);
	send_p();
	CHECK(expect_reply(NO_REPLY, 0, 0, "ERR") && DEV(rx_fast) == f0 &&
		  QPC(T.rc, rx_drop_state) > drop && mem_same("ERR"),
	      "a QP in ERR drops it");
	drain_cqs();

	/* the completer: one SEND outstanding, its ACK */
	f0 = DEV(rx_fast_acks);
	CHECK(req_start(1, -1) == 1, "one SEND sent");
	inject_ack(PSN0);
	n = poll_all(T.cq, wc, 8);
	CHECK(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_SEND &&
		  DEV(rx_fast_acks) == f0 + 1 && sq->req.una_psn == ((PSN0 + 1) & UR_PSN_MASK) &&
		  !sq->req.inflight && !sq->req.deadline_ns,
	      "the ACK of the one SEND outstanding: on the path (%d)", n);
	/* three outstanding: an ACK of the first is not; then of the rest */
	post_req_wqes(3, -1);
	uroce_ep_flush(T.ep);
	while (!sink_get(&r, 100))
		;
	inject_ack(PSN0 + 1);
	n = poll_all(T.cq, wc, 8);
	CHECK(n == 1 && DEV(rx_fast_acks) == f0 + 1 && sq->req.inflight == 2 && sq->req.deadline_ns,
	      "an ACK of one of three: the general steps (%d)", n);
	inject_ack(PSN0 + 3);
	n = poll_all(T.cq, wc, 8);
	CHECK(n == 2 && DEV(rx_fast_acks) == f0 + 1 && !sq->req.inflight,
	      "an ACK of two: the general steps (%d)", n);
	/* a NAK of the one outstanding: the general steps, the WQE fails */
	post_req_wqes(1, -1);
	uroce_ep_flush(T.ep);
	while (!sink_get(&r, 100))
		;
	inject_resp(UR_OPC_ACK, PSN0 + 4, NAK(UR_NAK_REM_ACCESS_ERR));
	n = poll_all(T.cq, wc, 8);
	CHECK(n == 1 && wc[0].status == IBV_WC_REM_ACCESS_ERR && DEV(rx_fast_acks) == f0 + 1,
	      "a NAK: the general steps (%d)", n);
	drain_cqs();
	snap();
}

/* IBTA 9.7.5.1.1: after a go-back, an ACK is valid up to the most recent
 * PSN ever sent, not just up to the one being resent.  The responder had
 * all 12 packets, their ACK was lost; the timer resends from the first,
 * but the window has meanwhile shrunk to 8 (the endpoint's budget), and
 * the responder answers the resent duplicates with an ACK of its latest
 * PSN, 11.  That ACK must acknowledge what was resent (once it was
 * dropped as "never sent" and the QP resent the same 8 packets until
 * RETRY_EXC_ERR); a READ among them stays outstanding until its response
 * comes (an ACK carries no data) without being asked for again. */
static void test_ack_past_go_back(void)
{
	struct uroce_qp *qp = to_uqp(T.req);
	uint32_t rcvbuf = T.ep->rcvbuf;
	struct ibv_wc wc[16];
	struct reply r;
	unsigned long retries;
	int n, ok = 0, sent = 0;

	for (int pass = 0; pass < 2; pass++) {
		int rd = pass ? 3 : -1;

		T.ep->rcvbuf = rcvbuf;
		sent = req_start(12, rd);
		CHECK(sent == 12 && qp->req.psn == ((PSN0 + 12) & UR_PSN_MASK),
		      "pass %d: 12 packets sent first (%d)", pass, sent);
		/* budget 8: 2 * 8 packets of MTU + 128 bytes */
		T.ep->rcvbuf = 2 * 8 * (MTU + 128);
		fire_req_timer();
		for (sent = 0; !sink_get(&r, 100);)
			sent++;
		CHECK(sent == 8, "pass %d: the timer resent a window of 8 (%d)", pass, sent);
		retries = QPC(T.req, retries);
		inject_ack(PSN0 + 11);
		n = poll_all(T.cq, wc, 16);
		CHECK(n == (pass ? 3 : 8), "pass %d: the ACK ahead completed %d WQEs", pass, n);
		CHECK(qp->req.una_psn == ((PSN0 + (pass ? 3 : 8)) & UR_PSN_MASK),
		      "pass %d: una_psn %u", pass, qp->req.una_psn);
		CHECK(QPC(T.req, retries) == retries, "pass %d: no go-back for the READ", pass);
		if (pass) {
			inject_resp(UR_OPC_READ_RESP_ONLY, PSN0 + 3, ACK_OK);
			n += poll_all(T.cq, wc + n, 16 - n);
			CHECK(n == 4 && wc[3].opcode == IBV_WC_RDMA_READ &&
				  wc[3].status == IBV_WC_SUCCESS && mem(M_ALL)[1024] == 0xa0 &&
				  mem(M_ALL)[1087] == 0xa0 + 63,
			      "the READ completed with its data (%d)", n);
			inject_ack(PSN0 + 11); /* answers the duplicates 4..7 */
			n += poll_all(T.cq, wc + n, 16 - n);
		}
		/* the rest were sent for the first time after the go-back */
		while (!sink_get(&r, 100))
			;
		inject_ack(PSN0 + 11);
		n += poll_all(T.cq, wc + n, 16 - n);
		ok = 0;
		for (int i = 0; i < n; i++)
			ok += wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)i;
		CHECK(n == 12 && ok == 12 && qp_state(T.req) == IBV_QPS_RTS && !qp->req.inflight,
		      "pass %d: all 12 completed in order (%d, %d good)", pass, n, ok);
	}
	T.ep->rcvbuf = rcvbuf;
	snap();
}

/* 9.7.5.1.1: a sequence NAK for PSN 3 says the responder has 0..2, so a
 * READ at PSN 1 whose response has not come lost it: the requester must
 * go back to the READ, not to PSN 3 (where the READ was left unanswered,
 * and each later NAK spent a retry until RETRY_EXC_ERR). */
static void test_nak_past_read(void)
{
	struct uroce_qp *qp = to_uqp(T.req);
	struct ibv_wc wc[8];
	struct reply r;
	int sent = req_start(4, 1), n;

	CHECK(sent == 4, "4 requests sent (%d)", sent);
	inject_resp(UR_OPC_ACK, PSN0 + 3, NAK(UR_NAK_PSN_SEQ_ERR));
	CHECK(!sink_get(&r, 100) && r.opcode == (UR_OPC_READ_REQ | UR_TR_RC) &&
		  r.psn == ((PSN0 + 1) & UR_PSN_MASK),
	      "resent from the READ: opcode 0x%02x psn %u", r.opcode, r.psn);
	sink_drain();
	inject_resp(UR_OPC_READ_RESP_ONLY, PSN0 + 1, ACK_OK);
	inject_ack(PSN0 + 3);
	n = poll_all(T.cq, wc, 8);
	CHECK(n == 4 && wc[1].opcode == IBV_WC_RDMA_READ && wc[3].status == IBV_WC_SUCCESS &&
		  qp_state(T.req) == IBV_QPS_RTS && !qp->req.inflight,
	      "all 4 completed (%d)", n);
	snap();
}

/* A request NAKed fatally while a READ before it still waits for its
 * response: the READ is asked for again on the timeout and completes,
 * then the NAKed WQE completes in error and the QP fails.  (The NAKed
 * WQE once came back to life in the go-back and blocked the QP - nothing
 * sent, no timer, no completion: a hang.) */
static void test_fatal_nak_past_read(void)
{
	struct ibv_wc wc[8];
	struct reply r;
	int sent = req_start(3, 1), n;

	CHECK(sent == 3, "3 requests sent (%d)", sent);
	inject_resp(UR_OPC_ACK, PSN0 + 2, NAK(UR_NAK_REM_ACCESS_ERR));
	n = poll_all(T.cq, wc, 8);
	CHECK(n == 1 && wc[0].wr_id == 0 && wc[0].status == IBV_WC_SUCCESS &&
		  qp_state(T.req) == IBV_QPS_RTS,
	      "the SEND before the READ completed, the QP waits for the READ (%d)", n);
	sink_drain();
	fire_req_timeout();
	sent = 0;
	while (!sink_get(&r, 100))
		CHECK(sent++ == 0 && r.opcode == (UR_OPC_READ_REQ | UR_TR_RC) &&
			  r.psn == ((PSN0 + 1) & UR_PSN_MASK),
		      "only the READ is resent: opcode 0x%02x psn %u", r.opcode, r.psn);
	CHECK(sent == 1, "the READ was resent (%d)", sent);
	inject_resp(UR_OPC_READ_RESP_ONLY, PSN0 + 1, ACK_OK);
	n = poll_all(T.cq, wc, 8);
	CHECK(n == 2 && wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS && wc[1].wr_id == 2 &&
		  wc[1].status == IBV_WC_REM_ACCESS_ERR && qp_state(T.req) == IBV_QPS_ERR,
	      "the READ, then the NAKed SEND in error, QP in ERR (%d: %s)", n,
	      n > 1 ? ibv_wc_status_str(wc[1].status) : "-");
	snap();
}

/* Retransmission probes (req.c): silence well before the timeout resends
 * from una_psn without spending a retry; not while the endpoint hears
 * anything (a queue, not a loss); the timeout itself still spends one. */
static void test_probe(void)
{
	struct uroce_qp *qp = to_uqp(T.req);
	unsigned long to0;
	struct ibv_wc wc[4];
	struct reply r;
	int sent = req_start(2, -1), retry = qp->req.retry_cnt;

	CHECK(sent == 2, "2 SENDs sent (%d)", sent);
	qp->attr.timeout = 18; /* 1.07 s: the test's own waits stay well inside */
	to0 = QPC(T.req, timeouts);
	fire_req_timer();
	for (sent = 0; !sink_get(&r, 100);)
		sent++;
	CHECK(sent == 2 && qp->req.retry_cnt == retry && QPC(T.req, timeouts) == to0,
	      "a probe resent 2 (%d) and spent no retry (%d of %d)", sent, qp->req.retry_cnt,
	      retry);
	atomic_fetch_add(&T.ep->rx_batches, 1); /* the endpoint heard something */
	fire_req_timer();
	CHECK(sink_get(&r, 100), "no probe while the endpoint hears packets");
	qp->req.progress_ns -= 2000000000ull; /* a whole timeout passed */
	fire_req_timer();
	for (sent = 0; !sink_get(&r, 100);)
		sent++;
	CHECK(sent == 2 && qp->req.retry_cnt == retry - 1 && QPC(T.req, timeouts) == to0 + 1,
	      "the timeout resent 2 (%d) and spent a retry (%d)", sent, qp->req.retry_cnt);
	inject_ack(PSN0 + 1);
	CHECK(poll_all(T.cq, wc, 4) == 2 && qp->req.retry_cnt == retry && !qp->req.deadline_ns,
	      "completed, retries back to %d", retry);
	snap();
}

/* The same checks hold on the wire: a datagram from a real UDP socket. */
static void test_over_udp(void)
{
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(T.ep->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct uroce_ipinfo ip = T.from;
	uint64_t icrc0 = DEV(rx_drop_icrc);
	struct ibv_wc wc[4];
	int n = 0;

	fresh(T.rc, ACC_ALL);
	ip.sport = T.sink_port;
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 8);
	uroce_pkt_finish(&P, &ip);
	pbuf[P.len - 1] ^= 1;
	sendto(T.sink, pbuf, P.len, 0, (struct sockaddr *)&to, sizeof(to));
	mk(UR_OPC_SEND_ONLY, qpn_of(T.rc), PSN0, 8);
	uroce_pkt_finish(&P, &ip);
	sendto(T.sink, pbuf, P.len, 0, (struct sockaddr *)&to, sizeof(to));
	for (int i = 0; i < 2000 && !n; i++) { /* ibv_poll_cq drains the socket */
		n = ibv_poll_cq(T.cq, 4, wc);
		if (!n)
			usleep(500);
	}
	CHECK(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].byte_len == 8,
	      "the good datagram is received");
	CHECK(DEV(rx_drop_icrc) - icrc0 == 1, "the corrupted one is dropped and counted");
	/* The ACK a polling thread defers (src/net/endpoint.c) leaves once its
	 * polls have found nothing for 20 us; the progress engine, stopped in
	 * this test, would otherwise send it within its grace slice. */
	for (int i = 0; i < 100; i++) {
		CHECK(ibv_poll_cq(T.cq, 4, wc) == 0, "nothing more");
		usleep(100);
	}
	CHECK(expect_reply(ACK_OK, PSN0, 0, "over UDP"), "and acknowledged");
}

/* ---- setup ---- */

static struct ibv_qp *make_qp(enum ibv_qp_type type, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex ia = {
	    .qp_type = type,
	    .send_cq = cq,
	    .recv_cq = cq,
	    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2},
	    .comp_mask = IBV_QP_INIT_ATTR_PD,
	    .pd = T.pd,
	};
	struct ibv_qp *qp;

	if (type == IBV_QPT_XRC_RECV) {
		memset(&ia, 0, sizeof(ia));
		ia.qp_type = type;
		ia.comp_mask = IBV_QP_INIT_ATTR_XRCD;
		ia.xrcd = T.xrcd1;
	}
	qp = ibv_create_qp_ex(T.ctx, &ia);
	if (!qp) {
		printf("ibv_create_qp_ex: %s\n", strerror(errno));
		exit(1);
	}
	return qp;
}

static struct ibv_srq *make_xsrq(struct ibv_pd *pd, struct ibv_xrcd *x, struct ibv_cq *cq, int m,
				 uint32_t off)
{
	struct ibv_srq_init_attr_ex ia = {
	    .attr = {.max_wr = 8, .max_sge = 1},
	    .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
			 IBV_SRQ_INIT_ATTR_CQ,
	    .srq_type = IBV_SRQT_XRC,
	    .pd = pd,
	    .xrcd = x,
	    .cq = cq,
	};
	struct ibv_srq *s = ibv_create_srq_ex(T.ctx, &ia);

	if (!s) {
		printf("ibv_create_srq_ex: %s\n", strerror(errno));
		exit(1);
	}
	for (int i = 0; i < 8; i++) {
		struct ibv_sge sg = {
		    .addr = (uintptr_t)mem(m) + off, .length = MTU * 2, .lkey = T.key[m]};
		struct ibv_recv_wr wr = {.wr_id = 100u + (unsigned int)i,
					 .sg_list = &sg,
					 .num_sge = 1},
				   *bad;

		ibv_post_srq_recv(s, &wr, &bad);
	}
	return s;
}

static struct ibv_xrcd *make_xrcd(void)
{
	struct ibv_xrcd_init_attr a = {.comp_mask =
					   IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
				       .fd = -1,
				       .oflags = O_CREAT};
	struct ibv_xrcd *x = ibv_open_xrcd(T.ctx, &a);

	if (!x) {
		printf("ibv_open_xrcd: %s\n", strerror(errno));
		exit(1);
	}
	return x;
}

static void setup(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = NULL;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int n;

	unsetenv("UROCE_PORT_MODE"); /* the native QPN layout is assumed */
	unsetenv("UROCE_FAULT");
	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "uroce_lo"))
			dev = list[i];
	if (!dev) {
		printf("no uroce_lo device\n");
		exit(1);
	}
	T.ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!T.ctx || ibv_query_gid(T.ctx, 1, 0, &T.gid)) {
		printf("ibv_open_device: %s\n", strerror(errno));
		exit(1);
	}
	T.uctx = to_uctx(T.ctx);
	T.pd = ibv_alloc_pd(T.ctx);
	T.pd2 = ibv_alloc_pd(T.ctx);
	T.cq = ibv_create_cq(T.ctx, 64, NULL, NULL, 0);
	T.cq2 = ibv_create_cq(T.ctx, 64, NULL, NULL, 0);
	make_mr(M_ALL, T.pd, ACC_ALL);
	make_mr(M_NOREAD, T.pd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	make_mr(M_NOATOMIC, T.pd,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	make_mr(M_PD2, T.pd2, ACC_ALL);
	make_mr(M_DEAD, T.pd, ACC_ALL);
	make_mr(M_TOP, T.pd, ACC_ALL);
	make_mr(M_SKEW, T.pd, ACC_ALL);
	make_mr(M_RECV, T.pd, IBV_ACCESS_LOCAL_WRITE);
	if (ibv_dereg_mr(T.mr[M_DEAD]))
		exit(1);
	T.mr[M_DEAD] = NULL;

	T.sink = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	if (T.sink < 0 || bind(T.sink, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(T.sink, (struct sockaddr *)&sa, &sl)) {
		printf("sink socket: %s\n", strerror(errno));
		exit(1);
	}
	T.sink_port = ntohs(sa.sin_port);

	T.xrcd1 = make_xrcd();
	T.xrcd2 = make_xrcd();
	T.xsrq1 = make_xsrq(T.pd, T.xrcd1, T.cq, M_RECV, 3 * NRECV * RBUF);
	T.xsrq2 = make_xsrq(T.pd2, T.xrcd2, T.cq2, M_PD2, 0);
	ibv_get_srq_num(T.xsrq1, &T.xsrqn1);
	ibv_get_srq_num(T.xsrq2, &T.xsrqn2);

	T.rc = make_qp(IBV_QPT_RC, T.cq);
	T.uc = make_qp(IBV_QPT_UC, T.cq);
	T.ud = make_qp(IBV_QPT_UD, T.cq);
	T.ud_init = make_qp(IBV_QPT_UD, T.cq);
	T.xrc = make_qp(IBV_QPT_XRC_RECV, NULL);
	T.req = make_qp(IBV_QPT_RC, T.cq);
	T.ep = to_uqp(T.rc)->ep;
	qp_fresh_to(T.ud_init, IBV_QPS_INIT, 0);
	/* this thread alone receives: nothing happens behind the test's back */
	uroce_progress_stop(T.uctx);

	T.from.family = AF_INET;
	T.from.src.v4.s_addr = htonl(INADDR_LOOPBACK);
	T.from.dst.v4.s_addr = htonl(INADDR_LOOPBACK);
	T.from.sport = 50000;
	T.from.dport = T.ep->port;
}

int main(void)
{
	setup();
	test_truncated();
	test_bad_icrc();
	test_unknown_opcodes();
	test_wrong_qpn();
	test_psn_window();
	test_rkey_checks();
	test_sequence_and_length();
	test_uc();
	test_ud_qkey();
	test_states();
	test_xrc();
	test_bogus_responses();
	test_ack_past_go_back();
	test_fast_path();
	test_nak_past_read();
	test_fatal_nak_past_read();
	test_probe();
	test_over_udp();
	printf("test_hostile: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* roce_traffic: put every kind of packet uroce sends on the wire once, for
 * tests/integration/conformance.sh to capture and check.
 *
 *   roce_traffic [-d DEVICE] [-g GID_INDEX]
 *
 * An ordinary verbs program: two contexts of one device in one process,
 * connected QP pairs on loopback, one operation at a time, every byte and
 * every completion checked:
 *
 *   RC at path MTU 256, 1024 and 4096: SEND, SEND with immediate, RDMA WRITE,
 *      RDMA WRITE with immediate, RDMA READ, each multi-packet (FIRST,
 *      MIDDLE, LAST with a pad) and single-packet (ONLY), zero-length SEND,
 *      WRITE and READ, solicited SEND, CMP_AND_SWP and FETCH_AND_ADD;
 *   RC SEND with invalidate (IETH), when memory windows are supported;
 *   RC NAKs: RDMA WRITE with a bad R_Key (remote access error NAK), SEND
 *      with no receive posted (RNR NAK, then success), and a lost packet
 *      (UROCE_FAULT drop_qp on receive: PSN sequence error NAK, go-back-N);
 *   UC: SEND, SEND with immediate, RDMA WRITE, RDMA WRITE with immediate,
 *      multi- and single-packet;
 *   UD: SEND and SEND with immediate, 1 byte to a full MTU; a SEND to a
 *      multicast group (QPN 0xFFFFFF), when the interface does multicast.
 *
 * Exits 0 when every operation completed as expected.
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define BUFSZ	 (1 << 16)
#define DST_OFF	 (1 << 15)
#define ATOM_OFF (3 << 14)
#define WAIT_MS	 5000
#define QKEY	 0x11111111u
#define MR_ACCESS                                                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)

struct side {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	struct ibv_wc stash[64];
	int nstash;
};

struct pair {
	const char *name;
	enum ibv_qp_type type;
	enum ibv_mtu mtu;
	uint8_t min_rnr, rnr_retry;
	struct ibv_qp *a, *b;
	struct ibv_ah *ah; /* UD: a -> b */
};

static struct side A = {.name = "A"}, B = {.name = "B"};
static int gid_index;
static unsigned ops, errors;

#define fail(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "roce_traffic: FAIL: " __VA_ARGS__);                               \
		fputc('\n', stderr);                                                               \
		errors++;                                                                          \
	} while (0)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void open_side(struct side *s, struct ibv_device *dev)
{
	s->ctx = ibv_open_device(dev);
	if (!s->ctx) {
		perror("ibv_open_device");
		exit(1);
	}
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	s->buf = aligned_alloc(4096, BUFSZ);
	if (!s->pd || !s->cq || !s->buf) {
		perror("pd/cq/buffer");
		exit(1);
	}
	memset(s->buf, 0, BUFSZ);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUFSZ, MR_ACCESS);
	if (!s->mr) /* without memory windows */
		s->mr = ibv_reg_mr(s->pd, s->buf, BUFSZ, MR_ACCESS & ~IBV_ACCESS_MW_BIND);
	if (!s->mr || ibv_query_gid(s->ctx, 1, gid_index, &s->gid)) {
		perror("reg_mr/query_gid");
		exit(1);
	}
}

static void close_side(struct side *s)
{
	ibv_dereg_mr(s->mr);
	ibv_destroy_cq(s->cq);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
	free(s->buf);
}

static struct ibv_qp *make_qp(struct side *s, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr ia = {
	    .send_cq = s->cq,
	    .recv_cq = s->cq,
	    .qp_type = t,
	    .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1},
	};
	struct ibv_qp *q = ibv_create_qp(s->pd, &ia);

	if (!q) {
		perror("ibv_create_qp");
		exit(1);
	}
	return q;
}

static void to_rts(struct pair *p, struct ibv_qp *q, struct side *remote, uint32_t dqpn)
{
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (p->type == IBV_QPT_UD) {
		at.qkey = QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		at.qp_access_flags =
		    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(q, &at, mask))
		goto err;
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (p->type != IBV_QPT_UD) {
		at.path_mtu = p->mtu;
		at.dest_qp_num = dqpn;
		at.rq_psn = 0x123456 + dqpn % 1000;
		at.ah_attr.is_global = 1;
		at.ah_attr.grh.dgid = remote->gid;
		at.ah_attr.grh.sgid_index = (uint8_t)gid_index;
		at.ah_attr.grh.hop_limit = 64;
		at.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	}
	if (p->type == IBV_QPT_RC) {
		at.max_dest_rd_atomic = 4;
		at.min_rnr_timer = p->min_rnr;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	if (ibv_modify_qp(q, &at, mask))
		goto err;
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTS;
	at.sq_psn = 0x123456 + q->qp_num % 1000;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (p->type == IBV_QPT_RC) {
		at.timeout = 10;
		at.retry_cnt = 7;
		at.rnr_retry = p->rnr_retry;
		at.max_rd_atomic = 4;
		mask |=
		    IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(q, &at, mask))
		goto err;
	return;
err:
	perror("ibv_modify_qp");
	exit(1);
}

static void make_pair(struct pair *p)
{
	p->a = make_qp(&A, p->type);
	p->b = make_qp(&B, p->type);
	if (!p->min_rnr)
		p->min_rnr = 1;
	if (!p->rnr_retry)
		p->rnr_retry = 7;
	if (p->type == IBV_QPT_UD) {
		struct ibv_ah_attr ah = {.is_global = 1, .port_num = 1};

		ah.grh.dgid = B.gid;
		ah.grh.sgid_index = (uint8_t)gid_index;
		ah.grh.hop_limit = 64;
		p->ah = ibv_create_ah(A.pd, &ah);
		if (!p->ah) {
			perror("ibv_create_ah");
			exit(1);
		}
	}
}

static void connect_pair(struct pair *p)
{
	to_rts(p, p->a, &B, p->b->qp_num);
	to_rts(p, p->b, &A, p->a->qp_num);
	printf("  %-8s %s QPN 0x%06x -> 0x%06x\n", p->name,
	       p->type == IBV_QPT_RC   ? "RC"
	       : p->type == IBV_QPT_UC ? "UC"
				       : "UD",
	       p->a->qp_num, p->b->qp_num);
}

/* Poll both CQs (each poll drives its context's receive path); take the
 * next completion of side s. */
static bool get_wc(struct side *s, struct ibv_wc *wc, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	for (;;) {
		struct side *sides[2] = {&A, &B};

		for (int i = 0; i < 2; i++) {
			struct side *x = sides[i];
			int n = ibv_poll_cq(x->cq, 64 - x->nstash, x->stash + x->nstash);

			if (n > 0)
				x->nstash += n;
		}
		if (s->nstash) {
			*wc = s->stash[0];
			memmove(s->stash, s->stash + 1, (size_t)--s->nstash * sizeof(*wc));
			return true;
		}
		if (now_ms() > end)
			return false;
	}
}

static void post_recv(struct pair *p, uint32_t len)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)B.buf + DST_OFF, .length = len + 40, .lkey = B.mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1}, *bad;

	if (ibv_post_recv(p->b, &wr, &bad)) {
		perror("ibv_post_recv");
		exit(1);
	}
}

static void fill(uint8_t *b, uint32_t len, unsigned seed)
{
	for (uint32_t i = 0; i < len; i++)
		b[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

struct op {
	enum ibv_wr_opcode opcode;
	uint32_t len;
	unsigned flags;
	uint32_t rkey_xor;	 /* != 0: a bad R_Key */
	enum ibv_wc_status want; /* expected status of the send completion */
	uint32_t invalidate;	 /* SEND_WITH_INV */
	int rnr_delay_ms;	 /* post the receive this late */
};

static const char *opname(enum ibv_wr_opcode o)
{
	switch (o) {
	case IBV_WR_SEND:
		return "SEND";
	case IBV_WR_SEND_WITH_IMM:
		return "SEND_IMM";
	case IBV_WR_SEND_WITH_INV:
		return "SEND_INV";
	case IBV_WR_RDMA_WRITE:
		return "WRITE";
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return "WRITE_IMM";
	case IBV_WR_RDMA_READ:
		return "READ";
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return "CMP_SWP";
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return "FETCH_ADD";
	default:
		return "?";
	}
}

static void run(struct pair *p, const struct op *o)
{
	bool recv = o->opcode == IBV_WR_SEND || o->opcode == IBV_WR_SEND_WITH_IMM ||
		    o->opcode == IBV_WR_SEND_WITH_INV || o->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool atomic =
	    o->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || o->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
	bool ok_expected = o->want == IBV_WC_SUCCESS;
	unsigned seed = ++ops;
	uint32_t len = atomic ? 8 : o->len;
	struct ibv_sge sge = {.addr = (uintptr_t)A.buf, .length = len, .lkey = A.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = seed,
				 .sg_list = &sge,
				 .num_sge = len ? 1 : 0,
				 .opcode = o->opcode,
				 .send_flags = IBV_SEND_SIGNALED | o->flags},
			   *bad;
	uint64_t old = 0x1122334455667788ull + seed;
	struct ibv_wc wc;

	memset(A.buf, 0, BUFSZ);
	memset(B.buf, 0, BUFSZ);
	fill(A.buf, len, seed);
	fill(B.buf, len, seed + 1000);
	if (o->opcode == IBV_WR_RDMA_READ || atomic)
		sge.addr = (uintptr_t)A.buf + (atomic ? ATOM_OFF : DST_OFF);
	if (atomic)
		memcpy(B.buf + ATOM_OFF, &old, 8);
	if (recv && ok_expected && !o->rnr_delay_ms)
		post_recv(p, len);
	if (p->type == IBV_QPT_UD) {
		wr.wr.ud.ah = p->ah;
		wr.wr.ud.remote_qpn = p->b->qp_num;
		wr.wr.ud.remote_qkey = QKEY;
	} else if (atomic) {
		wr.wr.atomic.remote_addr = (uintptr_t)B.buf + ATOM_OFF;
		wr.wr.atomic.rkey = B.mr->rkey;
		wr.wr.atomic.compare_add = o->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? old : 5;
		wr.wr.atomic.swap = 0xabcdef;
	} else {
		wr.wr.rdma.remote_addr =
		    (uintptr_t)B.buf + (o->opcode == IBV_WR_RDMA_READ ? 0 : DST_OFF);
		wr.wr.rdma.rkey = B.mr->rkey ^ o->rkey_xor;
	}
	if (o->opcode == IBV_WR_SEND_WITH_IMM || o->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htobe32(0xc0de0000u + seed);
	if (o->opcode == IBV_WR_SEND_WITH_INV)
		wr.invalidate_rkey = o->invalidate;
	if (ibv_post_send(p->a, &wr, &bad)) {
		fail("%s %s %u: post_send: %s", p->name, opname(o->opcode), len, strerror(errno));
		return;
	}
	if (o->rnr_delay_ms) {
		/* nothing may complete while the responder has no receive */
		if (get_wc(&A, &wc, o->rnr_delay_ms)) {
			fail("%s: completed (%s) before a receive was posted", p->name,
			     ibv_wc_status_str(wc.status));
			return;
		}
		post_recv(p, len);
	}
	if (!get_wc(&A, &wc, WAIT_MS)) {
		fail("%s %s %u: no send completion", p->name, opname(o->opcode), len);
		return;
	}
	if (wc.status != o->want) {
		fail("%s %s %u: status %s, expected %s", p->name, opname(o->opcode), len,
		     ibv_wc_status_str(wc.status), ibv_wc_status_str(o->want));
		return;
	}
	if (!ok_expected)
		return;
	if (recv && p->type != IBV_QPT_UD) {
		if (!get_wc(&B, &wc, WAIT_MS) || wc.status != IBV_WC_SUCCESS) {
			fail("%s %s %u: no good receive completion", p->name, opname(o->opcode),
			     len);
			return;
		}
		if (wc.byte_len != len)
			fail("%s %s: byte_len %u, expected %u", p->name, opname(o->opcode),
			     wc.byte_len, len);
		if ((wc.wc_flags & IBV_WC_WITH_IMM) && be32toh(wc.imm_data) != 0xc0de0000u + seed)
			fail("%s %s: wrong immediate", p->name, opname(o->opcode));
	}
	if (p->type == IBV_QPT_UD) {
		if (!get_wc(&B, &wc, WAIT_MS) || wc.status != IBV_WC_SUCCESS ||
		    wc.byte_len != len + 40) {
			fail("%s %s %u: no good UD receive", p->name, opname(o->opcode), len);
			return;
		}
		if (memcmp(B.buf + DST_OFF + 40, A.buf, len))
			fail("%s %s %u: data differs", p->name, opname(o->opcode), len);
		return;
	}
	if (o->opcode == IBV_WR_RDMA_READ) {
		if (memcmp(A.buf + DST_OFF, B.buf, len))
			fail("%s READ %u: data differs", p->name, len);
	} else if (atomic) {
		uint64_t got, now;

		memcpy(&got, A.buf + ATOM_OFF, 8);
		memcpy(&now, B.buf + ATOM_OFF, 8);
		if (got != old ||
		    now != (o->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? 0xabcdef : old + 5))
			fail("%s %s: returned 0x%llx, memory 0x%llx", p->name, opname(o->opcode),
			     (unsigned long long)got, (unsigned long long)now);
	} else if (memcmp(B.buf + DST_OFF, A.buf, len)) {
		fail("%s %s %u: data differs", p->name, opname(o->opcode), len);
	}
}

/* UD multicast: B's UD QP joins ::ffff:239.1.2.3, A sends to QPN 0xFFFFFF
 * through an address handle for the group.  Skipped (returns false) when
 * the group cannot be joined (no multicast on the interface). */
static bool multicast(struct pair *p)
{
	union ibv_gid g = {.raw = {[10] = 0xff, [11] = 0xff, 239, 1, 2, 3}};
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
	struct ibv_sge sge = {.addr = (uintptr_t)A.buf, .length = 100, .lkey = A.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 77,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_ah *ah;
	struct ibv_wc wc;

	if (ibv_attach_mcast(p->b, &g, 0))
		return false;
	aa.grh.dgid = g;
	aa.grh.sgid_index = (uint8_t)gid_index;
	aa.grh.hop_limit = 1;
	ah = ibv_create_ah(A.pd, &aa);
	if (!ah) {
		fail("multicast: ibv_create_ah: %s", strerror(errno));
		return true;
	}
	ops++;
	fill(A.buf, 100, 77);
	post_recv(p, 100);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0xffffff;
	wr.wr.ud.remote_qkey = QKEY;
	if (ibv_post_send(p->a, &wr, &bad) || !get_wc(&A, &wc, WAIT_MS) ||
	    wc.status != IBV_WC_SUCCESS)
		fail("multicast: send failed");
	else if (!get_wc(&B, &wc, WAIT_MS) || wc.status != IBV_WC_SUCCESS || wc.byte_len != 140 ||
		 memcmp(B.buf + DST_OFF + 40, A.buf, 100))
		fail("multicast: datagram not received");
	ibv_detach_mcast(p->b, &g, 0);
	ibv_destroy_ah(ah);
	return true;
}

/* RC SEND with invalidate: a type 2 window on B, bound by B, invalidated
 * by A's SEND.  Skipped (returns false) without memory windows. */
static bool send_inv(struct pair *p)
{
	struct ibv_mw *mw = ibv_alloc_mw(B.pd, IBV_MW_TYPE_2);
	struct ibv_send_wr wr = {.wr_id = 99,
				 .opcode = IBV_WR_BIND_MW,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	uint32_t rkey;

	if (!mw)
		return false;
	rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = B.mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)B.buf;
	wr.bind_mw.bind_info.length = 4096;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_post_send(p->b, &wr, &bad) || !get_wc(&B, &wc, WAIT_MS) ||
	    wc.status != IBV_WC_SUCCESS) {
		ibv_dealloc_mw(mw);
		return false;
	}
	run(p, &(struct op){.opcode = IBV_WR_SEND_WITH_INV, .len = 64, .invalidate = rkey});
	ibv_dealloc_mw(mw);
	return true;
}

int main(int argc, char **argv)
{
	const char *devname = NULL;
	struct ibv_device **list;
	int c, n;
	static struct pair rc[3] = {{.name = "rc256", .type = IBV_QPT_RC, .mtu = IBV_MTU_256},
				    {.name = "rc1024", .type = IBV_QPT_RC, .mtu = IBV_MTU_1024},
				    {.name = "rc4096", .type = IBV_QPT_RC, .mtu = IBV_MTU_4096}};
	static struct pair uc = {.name = "uc1024", .type = IBV_QPT_UC, .mtu = IBV_MTU_1024};
	static struct pair ud = {.name = "ud", .type = IBV_QPT_UD, .mtu = IBV_MTU_1024};
	static struct pair nak = {.name = "nak", .type = IBV_QPT_RC, .mtu = IBV_MTU_1024};
	/* RNR NAKs advertise 5.12 ms (min_rnr_timer 18) */
	static struct pair rnr = {
	    .name = "rnr", .type = IBV_QPT_RC, .mtu = IBV_MTU_1024, .min_rnr = 18, .rnr_retry = 7};
	static struct pair seq = {.name = "seq", .type = IBV_QPT_RC, .mtu = IBV_MTU_1024};
	struct ibv_port_attr pa;
	char fault[128];

	while ((c = getopt(argc, argv, "d:g:")) != -1) {
		if (c == 'd')
			devname = optarg;
		else if (c == 'g')
			gid_index = atoi(optarg);
		else {
			fprintf(stderr, "usage: %s [-d device] [-g gid_index]\n", argv[0]);
			return 2;
		}
	}
	list = ibv_get_device_list(&n);
	if (!list || !n) {
		fprintf(stderr, "roce_traffic: no RDMA device\n");
		return 1;
	}
	for (c = 0; c < n; c++)
		if (!devname || !strcmp(ibv_get_device_name(list[c]), devname))
			break;
	if (c == n) {
		fprintf(stderr, "roce_traffic: no device %s\n", devname);
		return 1;
	}
	open_side(&A, list[c]);
	open_side(&B, list[c]);
	if (ibv_query_port(A.ctx, 1, &pa)) {
		perror("ibv_query_port");
		return 1;
	}
	ud.mtu = pa.active_mtu;
	printf("roce_traffic: device %s, active MTU %u\n", ibv_get_device_name(list[c]),
	       128u << pa.active_mtu);

	/* Every QP exists before the first packet: UROCE_FAULT is read then. */
	for (int i = 0; i < 3; i++)
		make_pair(&rc[i]);
	make_pair(&uc);
	make_pair(&ud);
	make_pair(&nak);
	make_pair(&rnr);
	make_pair(&seq);
	snprintf(fault, sizeof(fault), "drop_qp=0x%06x:1,dir=rx", seq.b->qp_num);
	setenv("UROCE_FAULT", fault, 1);
	for (int i = 0; i < 3; i++)
		connect_pair(&rc[i]);
	connect_pair(&uc);
	connect_pair(&ud);
	connect_pair(&nak);
	connect_pair(&rnr);
	connect_pair(&seq);

	for (int i = 0; i < 3; i++) {
		struct pair *p = &rc[i];
		uint32_t mtu = 128u << p->mtu, big = 3 * mtu + 5;

		if (p->mtu > pa.active_mtu)
			continue;
		run(p, &(struct op){.opcode = IBV_WR_SEND, .len = big});
		run(p, &(struct op){.opcode = IBV_WR_SEND, .len = 1});
		run(p, &(struct op){.opcode = IBV_WR_SEND, .len = 0});
		run(p, &(struct op){
			   .opcode = IBV_WR_SEND, .len = mtu + 2, .flags = IBV_SEND_SOLICITED});
		run(p, &(struct op){.opcode = IBV_WR_SEND_WITH_IMM, .len = big});
		run(p, &(struct op){.opcode = IBV_WR_SEND_WITH_IMM, .len = 3});
		run(p, &(struct op){.opcode = IBV_WR_RDMA_WRITE, .len = big});
		run(p, &(struct op){.opcode = IBV_WR_RDMA_WRITE, .len = 7});
		run(p, &(struct op){.opcode = IBV_WR_RDMA_WRITE, .len = 0});
		run(p, &(struct op){.opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .len = big});
		run(p, &(struct op){.opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .len = mtu});
		run(p, &(struct op){.opcode = IBV_WR_RDMA_READ, .len = big});
		run(p, &(struct op){.opcode = IBV_WR_RDMA_READ, .len = 2 * mtu});
		run(p, &(struct op){.opcode = IBV_WR_RDMA_READ, .len = 9});
		run(p, &(struct op){.opcode = IBV_WR_RDMA_READ, .len = 0});
		run(p, &(struct op){.opcode = IBV_WR_ATOMIC_CMP_AND_SWP});
		run(p, &(struct op){.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD});
	}
	if (!send_inv(&rc[1]))
		printf("  (no memory windows: SEND with invalidate skipped)\n");
	run(&uc, &(struct op){.opcode = IBV_WR_SEND, .len = 3 * 1024 + 1});
	run(&uc, &(struct op){.opcode = IBV_WR_SEND, .len = 17});
	run(&uc, &(struct op){.opcode = IBV_WR_SEND_WITH_IMM, .len = 2 * 1024 + 6});
	run(&uc, &(struct op){.opcode = IBV_WR_SEND_WITH_IMM, .len = 2});
	run(&uc, &(struct op){.opcode = IBV_WR_RDMA_WRITE, .len = 3 * 1024});
	run(&uc, &(struct op){.opcode = IBV_WR_RDMA_WRITE, .len = 1});
	run(&uc, &(struct op){.opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .len = 1500});
	run(&uc, &(struct op){.opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .len = 4});
	run(&ud, &(struct op){.opcode = IBV_WR_SEND, .len = 1});
	run(&ud, &(struct op){.opcode = IBV_WR_SEND, .len = 128u << ud.mtu});
	run(&ud, &(struct op){.opcode = IBV_WR_SEND_WITH_IMM, .len = 61});
	if (!multicast(&ud))
		printf("  (cannot join a multicast group: UD multicast skipped)\n");
	run(&nak, &(struct op){.opcode = IBV_WR_RDMA_WRITE,
			       .len = 100,
			       .rkey_xor = 0x5a5a00,
			       .want = IBV_WC_REM_ACCESS_ERR});
	run(&rnr, &(struct op){.opcode = IBV_WR_SEND, .len = 33, .rnr_delay_ms = 12});
	run(&seq, &(struct op){.opcode = IBV_WR_SEND, .len = 4 * 1024});
	run(&seq, &(struct op){.opcode = IBV_WR_RDMA_WRITE, .len = 2 * 1024 + 10});

	printf("roce_traffic: %u operations, %u failed\n", ops, errors);
	{
		struct pair *all[] = {&rc[0], &rc[1], &rc[2], &uc, &ud, &nak, &rnr, &seq};

		for (unsigned i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
			if (all[i]->ah)
				ibv_destroy_ah(all[i]->ah);
			ibv_destroy_qp(all[i]->a);
			ibv_destroy_qp(all[i]->b);
		}
	}
	close_side(&A);
	close_side(&B);
	ibv_free_device_list(list);
	return errors ? 1 : 0;
}

/* RC test harness shared by test_rc.c and test_rc_fault.c.
 *
 * Two contexts on the loopback device (like two processes: each has its own
 * endpoint and progress thread), one RC QP in each: A (s[0]) is the
 * requester, B (s[1]) the responder, connected over GID index 0.  The
 * public verbs API is used throughout; the uroce internals (uroce.h) only
 * for the device counters.
 *
 * A transfer lays its message out over scatter/gather lists with gaps
 * between the pieces, fills every destination byte around them with a guard
 * pattern, and afterwards compares the whole destination span with the
 * expected image (message in the pieces, guard everywhere else) and a
 * checksum of the gathered message with that of the source.
 */
#ifndef RC_HARNESS_H
#define RC_HARNESS_H

#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "uroce.h"

#include "check.h"

#define BUF_SIZE     (4u << 20) /* per side */
#define MAX_MSG	     (1u << 20)
#define GUARD	     64u
#define REMOTE_BASE  (8192u + 13u) /* WRITE target / READ source in B's buffer */
#define LOCAL_BASE   (4096u + 5u)
#define WAIT_MS	     20000
#define SGE_MAX	     32
#define HARNESS_MTUS 5

static const enum ibv_mtu all_mtus[HARNESS_MTUS] = {IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024,
						    IBV_MTU_2048, IBV_MTU_4096};

static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- data patterns ---- */

static inline uint64_t xs64(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static inline void fill_pattern(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull, x = 0;

	for (size_t i = 0; i < n; i++) {
		if (!(i & 7))
			x = xs64(&s);
		p[i] = (uint8_t)(x >> ((i & 7) * 8));
	}
}

/* FNV-1a, 64 bit */
static inline uint64_t csum(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* ---- scatter/gather layouts inside one side's buffer ---- */

struct sgl {
	int n;
	uint32_t off[SGE_MAX], len[SGE_MAX];
	uint32_t lo, hi; /* span covered, guards included */
	uint32_t cap;
};

/* n pieces holding cap bytes from base on, with 8..64-byte gaps. */
static inline void sgl_make(struct sgl *s, int n, uint32_t cap, uint32_t base, uint64_t seed)
{
	uint64_t r = seed | 1;
	uint32_t pos;

	if (n < 1)
		n = 1;
	if ((uint32_t)n > cap && cap)
		n = (int)cap;
	if (!cap)
		n = 1;
	s->n = n;
	s->cap = cap;
	for (int i = 0; i < n; i++)
		s->len[i] = cap / (uint32_t)n + ((uint32_t)i < cap % (uint32_t)n ? 1u : 0u);
	for (int i = 0; i + 1 < n; i++) {
		uint32_t d = s->len[i] > 1 ? (uint32_t)(xs64(&r) % s->len[i]) : 0;

		s->len[i] -= d;
		s->len[i + 1] += d;
	}
	s->lo = base - GUARD;
	pos = base;
	for (int i = 0; i < n; i++) {
		s->off[i] = pos;
		pos += s->len[i] + (i + 1 < n ? 8u + (uint32_t)(xs64(&r) % 57) : 0u);
	}
	s->hi = pos + GUARD;
}

/* Put the first size bytes of msg into the pieces of s in buf. */
static inline void sgl_scatter(const struct sgl *s, uint8_t *buf, const uint8_t *msg, uint32_t size)
{
	for (int i = 0; i < s->n && size; i++) {
		uint32_t k = s->len[i] < size ? s->len[i] : size;

		memcpy(buf + s->off[i], msg, k);
		msg += k;
		size -= k;
	}
}

static inline void sgl_gather(const struct sgl *s, const uint8_t *buf, uint8_t *out, uint32_t size)
{
	for (int i = 0; i < s->n && size; i++) {
		uint32_t k = s->len[i] < size ? s->len[i] : size;

		memcpy(out, buf + s->off[i], k);
		out += k;
		size -= k;
	}
}

static inline void sgl_sge(const struct sgl *s, uint8_t *buf, uint32_t lkey, struct ibv_sge *sge)
{
	for (int i = 0; i < s->n; i++) {
		sge[i].addr = (uintptr_t)(buf + s->off[i]);
		sge[i].length = s->len[i];
		sge[i].lkey = lkey;
	}
}

/* ---- contexts, QPs ---- */

struct pair_opts {
	enum ibv_mtu mtu;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	unsigned int b_access; /* B's qp_access_flags */
	uint32_t max_send_wr, max_recv_wr, max_sge, max_inline;
	uint32_t psn_a, psn_b;
	int cqe;
	uint8_t rd_atomic; /* max_rd_atomic and max_dest_rd_atomic; 0: 16 */
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t *buf;
	struct ibv_mr *mr;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
};

struct harness {
	struct side s[2];
	union ibv_gid gid;
	struct ibv_device_attr dattr;
	struct pair_opts o;
	uint32_t mtu; /* bytes */
	uint8_t *msg, *img, *got;
	bool verbose;
};

static inline struct uroce_counters *cnt(struct harness *h, int side)
{
	return to_uctx(h->s[side].ctx)->cnt;
}

#define CNT(h, side, field) atomic_load(&cnt(h, side)->field)

static inline struct pair_opts default_opts(enum ibv_mtu mtu)
{
	struct pair_opts o = {
	    .mtu = mtu,
	    /* 33.5 ms: retry_cnt 7 is seven retries (IBTA), so eight timeouts
	     * must outlast the longest a loaded host leaves a progress thread
	     * runnable but without a CPU (75 ms seen on a 2-CPU CI machine at
	     * load 8); shorter ones fail QPs there under loss */
	    .timeout = 13,
	    .retry_cnt = 7,
	    .rnr_retry = 7,
	    .min_rnr_timer = 1, /* 0.01 ms */
	    .b_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	    .max_send_wr = 256,
	    .max_recv_wr = 256,
	    .max_sge = SGE_MAX,
	    .max_inline = 512,
	    /* near the 24-bit wrap, so 1 MiB transfers cross it */
	    .psn_a = 0xffffffu - 300u - 17u * (uint32_t)mtu,
	    .psn_b = 0xfff000u + 11u * (uint32_t)mtu,
	    .cqe = 4096,
	};
	return o;
}

static inline int harness_open(struct harness *h)
{
	struct ibv_device **list;
	struct ibv_device *dev = NULL;
	int n;

	memset(h, 0, sizeof(*h));
	list = ibv_get_device_list(&n);
	if (!list || n <= 0) {
		printf("no uroce device\n");
		return -1;
	}
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "uroce_lo"))
			dev = list[i];
	if (!dev)
		dev = list[0];
	for (int i = 0; i < 2; i++) {
		struct side *s = &h->s[i];

		s->ctx = ibv_open_device(dev);
		if (!s->ctx) {
			printf("ibv_open_device: %s\n", strerror(errno));
			ibv_free_device_list(list);
			return -1;
		}
		s->pd = ibv_alloc_pd(s->ctx);
		s->buf = aligned_alloc(4096, BUF_SIZE);
		if (!s->pd || !s->buf)
			return -1;
		memset(s->buf, 0, BUF_SIZE);
		s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_READ);
		if (!s->mr) {
			printf("ibv_reg_mr: %s\n", strerror(errno));
			return -1;
		}
	}
	ibv_free_device_list(list);
	if (ibv_query_gid(h->s[0].ctx, 1, 0, &h->gid) || ibv_query_device(h->s[0].ctx, &h->dattr)) {
		printf("query_gid/query_device failed\n");
		return -1;
	}
	h->msg = malloc(MAX_MSG + 4096);
	h->got = malloc(MAX_MSG + 4096);
	h->img = malloc(BUF_SIZE);
	return h->msg && h->got && h->img ? 0 : -1;
}

static inline void pair_destroy(struct harness *h)
{
	for (int i = 0; i < 2; i++) {
		struct side *s = &h->s[i];

		if (s->qp)
			ibv_destroy_qp(s->qp);
		if (s->scq)
			ibv_destroy_cq(s->scq);
		if (s->rcq)
			ibv_destroy_cq(s->rcq);
		s->qp = NULL;
		s->scq = s->rcq = NULL;
	}
}

static inline void harness_close(struct harness *h)
{
	pair_destroy(h);
	for (int i = 0; i < 2; i++) {
		struct side *s = &h->s[i];

		if (s->mr)
			ibv_dereg_mr(s->mr);
		if (s->pd)
			ibv_dealloc_pd(s->pd);
		if (s->ctx)
			ibv_close_device(s->ctx);
		free(s->buf);
	}
	free(h->msg);
	free(h->got);
	free(h->img);
	memset(h, 0, sizeof(*h));
}

static inline int qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return -1;
	return a.qp_state;
}

/* RESET -> INIT -> RTR -> RTS, toward the other side's QP. */
static inline int qp_connect(struct harness *h, int i)
{
	const struct pair_opts *o = &h->o;
	struct ibv_qp *qp = h->s[i].qp, *peer = h->s[!i].qp;
	struct ibv_qp_attr a;
	int err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags =
	    i ? o->b_access
	      : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	err = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = o->mtu;
	a.dest_qp_num = peer->qp_num;
	a.rq_psn = i ? o->psn_a : o->psn_b;
	a.max_dest_rd_atomic = o->rd_atomic ? o->rd_atomic : 16;
	a.min_rnr_timer = o->min_rnr_timer;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = h->gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	err = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = o->timeout;
	a.retry_cnt = o->retry_cnt;
	a.rnr_retry = o->rnr_retry;
	a.sq_psn = i ? o->psn_b : o->psn_a;
	a.max_rd_atomic = o->rd_atomic ? o->rd_atomic : 16;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static inline int pair_create(struct harness *h, const struct pair_opts *o)
{
	pair_destroy(h);
	h->o = *o;
	h->mtu = 128u << o->mtu;
	for (int i = 0; i < 2; i++) {
		struct side *s = &h->s[i];
		struct ibv_qp_init_attr ia = {
		    .qp_type = IBV_QPT_RC,
		    .cap = {.max_send_wr = o->max_send_wr,
			    .max_recv_wr = o->max_recv_wr,
			    .max_send_sge = o->max_sge,
			    .max_recv_sge = o->max_sge,
			    .max_inline_data = o->max_inline},
		};

		s->scq = ibv_create_cq(s->ctx, o->cqe, NULL, NULL, 0);
		s->rcq = ibv_create_cq(s->ctx, o->cqe, NULL, NULL, 0);
		if (!s->scq || !s->rcq) {
			printf("ibv_create_cq: %s\n", strerror(errno));
			return -1;
		}
		ia.send_cq = s->scq;
		ia.recv_cq = s->rcq;
		s->qp = ibv_create_qp(s->pd, &ia);
		if (!s->qp) {
			printf("ibv_create_qp: %s\n", strerror(errno));
			return -1;
		}
	}
	for (int i = 0; i < 2; i++)
		if (qp_connect(h, i)) {
			printf("connecting QP %d failed\n", i);
			return -1;
		}
	return 0;
}

/* Poll until n completions arrived on cq (or on cq2 for n2), or timeout. */
static inline int wait_wc2(struct ibv_cq *cq, struct ibv_wc *wc, int n, struct ibv_cq *cq2,
			   struct ibv_wc *wc2, int n2, int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;
	int got = 0, got2 = 0;

	while (got < n || got2 < n2) {
		int r;

		if (got < n) {
			r = ibv_poll_cq(cq, n - got, wc + got);
			if (r < 0)
				return -1;
			got += r;
		}
		if (got2 < n2) {
			r = ibv_poll_cq(cq2, n2 - got2, wc2 + got2);
			if (r < 0)
				return -1;
			got2 += r;
		}
		if (now_ms() > end) {
			if (timeout_ms >= 1000)
				printf("  timeout: %d/%d and %d/%d completions\n", got, n, got2,
				       n2);
			return -1;
		}
	}
	return 0;
}

static inline int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int n, int timeout_ms)
{
	return wait_wc2(cq, wc, n, cq, NULL, 0, timeout_ms);
}

/* Completions that should not be there. */
static inline int stray_wcs(struct harness *h)
{
	struct ibv_wc wc[8];
	int n = 0;

	for (int i = 0; i < 2; i++) {
		int r1 = ibv_poll_cq(h->s[i].scq, 8, wc), r2 = ibv_poll_cq(h->s[i].rcq, 8, wc);

		n += (r1 > 0 ? r1 : 0) + (r2 > 0 ? r2 : 0);
	}
	return n;
}

static inline const char *op_name(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
		return "SEND";
	case IBV_WR_SEND_WITH_IMM:
		return "SEND_IMM";
	case IBV_WR_RDMA_WRITE:
		return "WRITE";
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return "WRITE_IMM";
	case IBV_WR_RDMA_READ:
		return "READ";
	default:
		return "?";
	}
}

static inline bool op_has_recv(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static inline bool op_has_imm(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static inline enum ibv_wc_opcode op_wc(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_READ					     ? IBV_WC_RDMA_READ
	       : op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RDMA_WRITE
									     : IBV_WC_SEND;
}

struct xfer {
	enum ibv_wr_opcode op;
	uint32_t size;
	int lsge, rsge;	 /* requester / receiver SGE counts */
	uint32_t rslack; /* receive buffer larger than the message by this */
	bool inl;	 /* IBV_SEND_INLINE */
};

/* One message A -> B (or B -> A for READ data), fully verified.  Returns
 * true when every check passed. */
static inline bool do_xfer(struct harness *h, const struct xfer *x, uint64_t seed)
{
	struct side *a = &h->s[0], *b = &h->s[1];
	unsigned int f0 = failed;
	struct sgl lsg = {0}, rsg = {0};
	struct ibv_sge lsge[SGE_MAX], rsge[SGE_MAX];
	struct ibv_send_wr wr = {0}, *bad;
	struct ibv_recv_wr rwr = {0}, *rbad;
	struct ibv_wc swc, rwc;
	bool recv = op_has_recv(x->op), imm = op_has_imm(x->op), read = x->op == IBV_WR_RDMA_READ;
	bool write = x->op == IBV_WR_RDMA_WRITE || x->op == IBV_WR_RDMA_WRITE_WITH_IMM;
	uint8_t *inl_buf = NULL, *src_buf, *dst_buf;
	const struct sgl *src, *dst;
	uint32_t imm_val = (uint32_t)(seed * 2654435761u);
	char what[96];
	int err;

	snprintf(what, sizeof(what), "%s %u B mtu %u sge %d/%d%s", op_name(x->op), x->size, h->mtu,
		 x->lsge, x->rsge, x->inl ? " inline" : "");
	fill_pattern(h->msg, x->size, seed);

	/* requester side pieces; the peer's side is one piece for
	 * WRITE/READ and a receive list for SEND */
	sgl_make(&lsg, x->lsge, x->size, LOCAL_BASE, seed ^ 1);
	if (write || read)
		sgl_make(&rsg, 1, x->size, REMOTE_BASE + (uint32_t)(seed % 61), seed ^ 2);
	else
		sgl_make(&rsg, x->rsge, x->size + x->rslack, REMOTE_BASE, seed ^ 2);
	src = read ? &rsg : &lsg;
	dst = read ? &lsg : &rsg;
	src_buf = read ? b->buf : a->buf;
	dst_buf = read ? a->buf : b->buf;

	/* source: guard + message; destination: guard, expected image */
	fill_pattern(src_buf + src->lo, src->hi - src->lo, seed ^ 0x5a5a);
	sgl_scatter(src, src_buf, h->msg, x->size);
	fill_pattern(dst_buf + dst->lo, dst->hi - dst->lo, seed ^ 0xa5a5);
	/* h->img is addressed like dst_buf */
	memcpy(h->img + dst->lo, dst_buf + dst->lo, dst->hi - dst->lo);
	sgl_scatter(dst, h->img, h->msg, x->size);

	if (x->inl) {
		/* inline data need not be registered: a plain heap buffer */
		inl_buf = malloc(lsg.hi + 64);
		memcpy(inl_buf + lsg.lo, a->buf + lsg.lo, lsg.hi - lsg.lo);
	}
	sgl_sge(&lsg, x->inl ? inl_buf : a->buf, x->inl ? 0xdeadbeef : a->mr->lkey, lsge);

	if (recv) {
		rwr.wr_id = seed ^ 0xfeed;
		if (x->op == IBV_WR_RDMA_WRITE_WITH_IMM) {
			rwr.num_sge = 0;
		} else {
			sgl_sge(&rsg, b->buf, b->mr->lkey, rsge);
			rwr.sg_list = rsge;
			rwr.num_sge = rsg.n;
		}
		err = ibv_post_recv(b->qp, &rwr, &rbad);
		CHECK(!err, "%s: post_recv: %s", what, strerror(err));
		if (err)
			goto out;
	}
	wr.wr_id = seed;
	wr.opcode = x->op;
	wr.sg_list = lsge;
	wr.num_sge = lsg.n;
	wr.send_flags = IBV_SEND_SIGNALED | (x->inl ? IBV_SEND_INLINE : 0);
	if (imm)
		wr.imm_data = htobe32(imm_val);
	if (write || read) {
		wr.wr.rdma.remote_addr = (uintptr_t)(b->buf + rsg.off[0]);
		wr.wr.rdma.rkey = b->mr->rkey;
	}
	err = ibv_post_send(a->qp, &wr, &bad);
	CHECK(!err, "%s: post_send: %s", what, strerror(err));
	if (err)
		goto out;
	if (inl_buf) /* IBV_SEND_INLINE: the buffer is free again right away */
		memset(inl_buf, 0xcc, lsg.hi + 64);

	if (wait_wc2(a->scq, &swc, 1, b->rcq, &rwc, recv ? 1 : 0, WAIT_MS)) {
		CHECK(0, "%s: completions missing", what);
		goto out;
	}
	CHECK(swc.status == IBV_WC_SUCCESS, "%s: send status %s", what,
	      ibv_wc_status_str(swc.status));
	CHECK(swc.wr_id == seed, "%s: send wr_id %llu", what, (unsigned long long)swc.wr_id);
	CHECK(swc.qp_num == a->qp->qp_num, "%s: send qp_num 0x%x", what, swc.qp_num);
	if (swc.status == IBV_WC_SUCCESS) {
		CHECK(swc.opcode == op_wc(x->op), "%s: send opcode %d", what, swc.opcode);
		if (read)
			CHECK(swc.byte_len == x->size, "%s: READ byte_len %u", what, swc.byte_len);
	}
	if (recv) {
		CHECK(rwc.status == IBV_WC_SUCCESS, "%s: recv status %s", what,
		      ibv_wc_status_str(rwc.status));
		CHECK(rwc.wr_id == (seed ^ 0xfeed), "%s: recv wr_id", what);
		CHECK(rwc.qp_num == b->qp->qp_num, "%s: recv qp_num 0x%x", what, rwc.qp_num);
		CHECK(rwc.src_qp == a->qp->qp_num, "%s: recv src_qp 0x%x", what, rwc.src_qp);
		CHECK(rwc.byte_len == x->size, "%s: recv byte_len %u", what, rwc.byte_len);
		CHECK(rwc.opcode == (x->op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM
									 : IBV_WC_RECV),
		      "%s: recv opcode %d", what, rwc.opcode);
		CHECK(!!(rwc.wc_flags & IBV_WC_WITH_IMM) == imm, "%s: wc_flags 0x%x", what,
		      rwc.wc_flags);
		if (imm)
			CHECK(rwc.imm_data == htobe32(imm_val), "%s: imm_data 0x%08x", what,
			      be32toh(rwc.imm_data));
	}
	/* the data, byte for byte, the bytes around it, and a checksum */
	if (memcmp(dst_buf + dst->lo, h->img + dst->lo, dst->hi - dst->lo)) {
		uint32_t k = 0;

		while (dst_buf[dst->lo + k] == h->img[dst->lo + k])
			k++;
		CHECK(0, "%s: destination differs at span offset %u of %u (lo %u)", what, k,
		      dst->hi - dst->lo, dst->lo);
	} else {
		passed++;
	}
	sgl_gather(dst, dst_buf, h->got, x->size);
	CHECK(csum(h->got, x->size) == csum(h->msg, x->size), "%s: checksum", what);
	/* a READ must not have touched the source */
	if (read)
		CHECK(csum(b->buf + rsg.off[0], x->size) == csum(h->msg, x->size),
		      "%s: source changed", what);
out:
	free(inl_buf);
	if (h->verbose)
		printf("  %s: %s\n", what, failed == f0 ? "ok" : "FAILED");
	return failed == f0;
}

/* ---- batches: many WRs in one post ---- */

struct bop {
	enum ibv_wr_opcode op;
	uint32_t size;
	bool signaled;
};

/* Post ops[0..n) as one chain (B's receives first, plus `spare` receives
 * that must stay unused), wait for the completions, verify all data and the
 * bytes between messages.  Returns true on success. */
static inline bool do_batch(struct harness *h, const struct bop *ops, int n, uint64_t seed,
			    int spare)
{
	struct side *a = &h->s[0], *b = &h->s[1];
	struct ibv_send_wr *wr = calloc((size_t)n, sizeof(*wr)), *bad;
	struct ibv_sge *sge = calloc((size_t)n, sizeof(*sge));
	struct ibv_recv_wr *rwr = calloc((size_t)(n + spare), sizeof(*rwr)), *rbad;
	struct ibv_sge *rsge = calloc((size_t)(n + spare), sizeof(*rsge));
	struct ibv_wc *swc = calloc((size_t)n, sizeof(*swc)),
		      *rwc = calloc((size_t)n, sizeof(*rwc));
	uint32_t *off = calloc((size_t)n, sizeof(*off));
	uint8_t *img[2] = {malloc(BUF_SIZE), malloc(BUF_SIZE)};
	unsigned int f0 = failed;
	uint32_t pos = LOCAL_BASE, end;
	int nsig = 0, nrecv = 0, err;

	/* message i: A's [off, off+size) and B's same range, 64-byte gaps */
	for (int i = 0; i < n; i++) {
		off[i] = pos;
		pos += ops[i].size + GUARD;
	}
	end = pos;
	if (end > BUF_SIZE) {
		CHECK(0, "batch too large");
		goto out;
	}
	for (int s = 0; s < 2; s++) {
		fill_pattern(h->s[s].buf + LOCAL_BASE - GUARD, end - LOCAL_BASE + GUARD,
			     seed ^ (0x77u + (unsigned int)s));
		memcpy(img[s], h->s[s].buf, end);
	}
	for (int i = 0; i < n; i++) {
		bool read = ops[i].op == IBV_WR_RDMA_READ;
		int from = read ? 1 : 0;

		fill_pattern(h->s[from].buf + off[i], ops[i].size, seed + (uint64_t)i);
		memcpy(img[0] + off[i], h->s[from].buf + off[i], ops[i].size);
		memcpy(img[1] + off[i], h->s[from].buf + off[i], ops[i].size);

		sge[i].addr = (uintptr_t)(a->buf + off[i]);
		sge[i].length = ops[i].size;
		sge[i].lkey = a->mr->lkey;
		wr[i].wr_id = (uint64_t)i;
		wr[i].opcode = ops[i].op;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].send_flags = ops[i].signaled ? IBV_SEND_SIGNALED : 0;
		wr[i].imm_data = htobe32((uint32_t)i);
		wr[i].wr.rdma.remote_addr = (uintptr_t)(b->buf + off[i]);
		wr[i].wr.rdma.rkey = b->mr->rkey;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		nsig += ops[i].signaled;
		if (op_has_recv(ops[i].op)) {
			rsge[nrecv] = (struct ibv_sge){.addr = (uintptr_t)(b->buf + off[i]),
						       .length = ops[i].size,
						       .lkey = b->mr->lkey};
			rwr[nrecv].wr_id = (uint64_t)i;
			rwr[nrecv].sg_list = &rsge[nrecv];
			rwr[nrecv].num_sge = ops[i].op == IBV_WR_RDMA_WRITE_WITH_IMM ? 0 : 1;
			nrecv++;
		}
	}
	for (int i = 0; i < nrecv + spare; i++) {
		if (i >= nrecv) { /* spare: must never be consumed */
			rwr[i].wr_id = 0xbadull << 32 | (uint64_t)i;
			rwr[i].num_sge = 0;
		}
		rwr[i].next = i + 1 < nrecv + spare ? &rwr[i + 1] : NULL;
	}
	if (nrecv + spare) {
		err = ibv_post_recv(b->qp, rwr, &rbad);
		CHECK(!err, "batch post_recv: %s", strerror(err));
		if (err)
			goto out;
	}
	err = ibv_post_send(a->qp, wr, &bad);
	CHECK(!err, "batch of %d: post_send: %s", n, strerror(err));
	if (err)
		goto out;
	if (wait_wc2(a->scq, swc, nsig, b->rcq, rwc, nrecv, WAIT_MS)) {
		CHECK(0, "batch of %d: completions missing", n);
		goto out;
	}
	for (int i = 0, k = 0; i < n; i++) {
		if (!ops[i].signaled)
			continue;
		CHECK(swc[k].status == IBV_WC_SUCCESS && swc[k].wr_id == (uint64_t)i &&
			  swc[k].opcode == op_wc(ops[i].op),
		      "batch send wc %d: wr_id %llu status %s opcode %d (want %d %s)", k,
		      (unsigned long long)swc[k].wr_id, ibv_wc_status_str(swc[k].status),
		      swc[k].opcode, i, op_name(ops[i].op));
		k++;
	}
	for (int i = 0, k = 0; i < n; i++) {
		if (!op_has_recv(ops[i].op))
			continue;
		CHECK(rwc[k].status == IBV_WC_SUCCESS && rwc[k].wr_id == (uint64_t)i &&
			  rwc[k].byte_len == ops[i].size && rwc[k].src_qp == a->qp->qp_num &&
			  (!op_has_imm(ops[i].op) || rwc[k].imm_data == htobe32((uint32_t)i)),
		      "batch recv wc %d: wr_id %llu status %s len %u (want %d %s %u)", k,
		      (unsigned long long)rwc[k].wr_id, ibv_wc_status_str(rwc[k].status),
		      rwc[k].byte_len, i, op_name(ops[i].op), ops[i].size);
		k++;
	}
	for (int s = 0; s < 2; s++)
		if (memcmp(h->s[s].buf + LOCAL_BASE - GUARD, img[s] + LOCAL_BASE - GUARD,
			   end - LOCAL_BASE + GUARD)) {
			uint32_t k = LOCAL_BASE - GUARD;
			int m = 0;

			while (h->s[s].buf[k] == img[s][k])
				k++;
			while (m + 1 < n && off[m + 1] <= k)
				m++;
			CHECK(0,
			      "batch: side %c differs at offset %u: message %d/%d (%s, %u B) + %d: "
			      "%02x, want %02x",
			      'A' + s, k, m, n, op_name(ops[m].op), ops[m].size, (int)(k - off[m]),
			      h->s[s].buf[k], img[s][k]);
			if (getenv("RC_DEBUG")) /* every message that differs */
				for (int q = 0; q < n; q++)
					if (memcmp(h->s[s].buf + off[q], img[s] + off[q],
						   ops[q].size))
						printf("   msg %d %s %u differs\n", q,
						       op_name(ops[q].op), ops[q].size);
		} else {
			passed++;
		}
	/* exactly once: nothing more arrives, the spare receives stay */
	usleep(2000);
	CHECK(stray_wcs(h) == 0, "batch: unexpected completions");
out:
	free(wr);
	free(sge);
	free(rwr);
	free(rsge);
	free(swc);
	free(rwc);
	free(off);
	free(img[0]);
	free(img[1]);
	return failed == f0;
}

/* Make sure the pair is usable after a failure. */
static inline void pair_recover(struct harness *h)
{
	if (qp_state(h->s[0].qp) != IBV_QPS_RTS || qp_state(h->s[1].qp) != IBV_QPS_RTS) {
		struct pair_opts o = h->o;

		printf("  (re-creating the QP pair)\n");
		pair_create(h, &o);
	}
}

static inline int finish(const char *name)
{
	printf("%s: %u passed, %u failed\n", name, passed, failed);
	return failed ? 1 : 0;
}

/* One signaled SEND of len bytes from s->buf, one receive of 4096 bytes
 * at s->buf + off. */
static inline int harness_send1(struct side *s, uint64_t id, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf, .length = len, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	return ibv_post_send(s->qp, &wr, &bad);
}

/* One signaled READ of len bytes: b's buffer at REMOTE_BASE into a's at
 * LOCAL_BASE. */
static inline int harness_read1(struct side *a, struct side *b, uint64_t id, uint32_t len)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)a->buf + LOCAL_BASE, .length = len, .lkey = a->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_READ,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr.rdma = {.remote_addr = (uintptr_t)b->buf + REMOTE_BASE,
					     .rkey = b->mr->rkey}},
			   *bad;

	return ibv_post_send(a->qp, &wr, &bad);
}

static inline int harness_recv1(struct side *s, uint64_t id, uint32_t off)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + off, .length = 4096, .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(s->qp, &wr, &bad);
}

#endif

/* The work request API: ibv_qp_to_qp_ex() and ibv_wr_*() (ibv_wr_post(3)).
 *
 * Between ibv_wr_start() and ibv_wr_complete() the builders and setters
 * record work requests as struct ibv_send_wr in the QP's batch (with their
 * scatter lists and a copy of inline data), and ibv_wr_complete() hands the
 * chain to the ibv_post_send() code, which queues all of it or, on any
 * error, none of it.  Builders and setters return nothing: the first error
 * of a batch is kept, later calls are ignored, and ibv_wr_complete()
 * returns it and discards the batch.
 *
 * ibv_wr_start() takes qpx->lock and ibv_wr_complete()/ibv_wr_abort()
 * release it: the per-QP critical region of ibv_wr_post(3).  Nothing else
 * is held in between, so completions keep flowing while a batch is built.
 *
 * Inline data is copied when the setter is called (ibv_wr_post(3): "allows
 * the caller to immediately re-use the buffer").  As with providers, the
 * setter picks inline or not: IBV_SEND_INLINE in wr_flags is ignored.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uroce.h"
#include "verbs/verbs_ex.h"
#include "verbs/verbs_ops.h"

/* The operations uroce carries, per QP type (ibv_wr_post(3)'s table). */
#define UROCE_UC_SEND_OPS                                                                          \
	((uint64_t)IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |                \
	 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_LOCAL_INV |           \
	 IBV_QP_EX_WITH_BIND_MW)
#define UROCE_RC_SEND_OPS                                                                          \
	(UROCE_UC_SEND_OPS | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |        \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV)
#define UROCE_UD_SEND_OPS ((uint64_t)IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)

#define UROCE_QP_INIT_MASKS                                                                        \
	(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |             \
	 IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH | \
	 IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)

struct qpx_wr {
	struct ibv_send_wr wr; /* sg_list and next are set by wr_complete */
	uint32_t sge_first;    /* wr.num_sge entries of qpx->sge from here */
	size_t inl_off;	       /* inline: offset of the copy in qpx->inl */
	bool inl;
};

struct uroce_qpx {
	pthread_mutex_t lock; /* ibv_wr_start() .. ibv_wr_complete()/ibv_wr_abort() */
	uint64_t send_ops;    /* IBV_QP_EX_WITH_* the QP was created with */
	bool open;	      /* inside the critical region */
	int err;	      /* first error of the batch, 0 if none */
	struct qpx_wr *wr;
	uint32_t nwr, wr_cap;
	struct ibv_sge *sge;
	uint32_t nsge, sge_cap;
	uint8_t *inl;
	size_t inl_len, inl_cap;
};

static struct uroce_qp *qpx_qp(struct ibv_qp_ex *q)
{
	return container_of(q, struct uroce_qp, ibqp);
}

/* Record the batch's first error; wr_complete returns it. */
__attribute__((format(printf, 3, 4))) static void batch_fail(struct uroce_qpx *x, int err,
							     const char *fmt, ...)
{
	va_list ap;
	char why[256];

	if (x->err)
		return;
	x->err = err;
	if (uroce_log_level >= UROCE_LOG_DEBUG) {
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		ur_dbg("%s (ibv_wr_complete will return %d and post nothing)", why, err);
	}
}

/* Grow *arr (elements of size sz) to hold need elements. */
static bool grow(void **arr, size_t sz, size_t need, size_t *cap)
{
	size_t n = *cap ? *cap : 8;
	void *p;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	p = realloc(*arr, n * sz);
	if (!p)
		return false;
	*arr = p;
	*cap = n;
	return true;
}

static bool grow32(void **arr, size_t sz, uint32_t need, uint32_t *cap)
{
	size_t c = *cap;
	bool ok = grow(arr, sz, need, &c);

	*cap = (uint32_t)c;
	return ok;
}

static void batch_reset(struct uroce_qpx *x)
{
	x->nwr = 0;
	x->nsge = 0;
	x->inl_len = 0;
	x->err = 0;
}

/* ---- the critical region ---- */

static void qpx_wr_start(struct ibv_qp_ex *q)
{
	struct uroce_qpx *x = qpx_qp(q)->qpx;

	/* an error-checking mutex: a second wr_start on this thread would
	 * otherwise hang */
	if (pthread_mutex_lock(&x->lock) == EDEADLK)
		ur_dbg("wr_start: QP 0x%06x: this thread is already between ibv_wr_start() and "
		       "ibv_wr_complete(); the unfinished batch is discarded",
		       q->qp_base.qp_num);
	batch_reset(x);
	x->open = true;
}

static void qpx_wr_abort(struct ibv_qp_ex *q)
{
	struct uroce_qpx *x = qpx_qp(q)->qpx;

	if (!x->open) {
		ur_dbg("wr_abort: QP 0x%06x: no ibv_wr_start() to abort", q->qp_base.qp_num);
		return;
	}
	batch_reset(x);
	x->open = false;
	pthread_mutex_unlock(&x->lock);
}

static int qpx_wr_complete(struct ibv_qp_ex *q)
{
	struct uroce_qp *qp = qpx_qp(q);
	struct uroce_qpx *x = qp->qpx;
	struct ibv_send_wr *bad = NULL;
	int err;

	if (!x->open)
		return ur_dbg("wr_complete: QP 0x%06x: no ibv_wr_start() before",
			      q->qp_base.qp_num),
		       EINVAL;
	err = x->err;
	if (!err && x->nwr) {
		/* The arrays are final now: link the chain. */
		for (uint32_t i = 0; i < x->nwr; i++) {
			struct qpx_wr *w = &x->wr[i];

			w->wr.sg_list = w->wr.num_sge ? &x->sge[w->sge_first] : NULL;
			if (w->inl)
				x->sge[w->sge_first].addr = (uintptr_t)x->inl + w->inl_off;
			w->wr.next = i + 1 < x->nwr ? &x->wr[i + 1].wr : NULL;
		}
		err = uroce_post_send_all(&q->qp_base, &x->wr[0].wr, &bad);
		if (err)
			ur_dbg("wr_complete: QP 0x%06x: WR %ld of %u (wr_id %llu) refused: "
			       "nothing of the batch was posted",
			       q->qp_base.qp_num,
			       bad ? (long)(container_of(bad, struct qpx_wr, wr) - x->wr) : -1L,
			       x->nwr, bad ? (unsigned long long)bad->wr_id : 0ull);
	}
	batch_reset(x);
	x->open = false;
	pthread_mutex_unlock(&x->lock);
	return err;
}

/* ---- builders ---- */

/* Start a WR with opcode op.  need: the send_ops_flags bit it requires, or
 * 0 for operations uroce does not carry (post_send refuses them, with the
 * same error ibv_post_send() gives). */
static struct qpx_wr *wr_new(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint64_t need,
			     const char *what)
{
	struct uroce_qpx *x = qpx_qp(q)->qpx;
	struct qpx_wr *w;

	if (!x->open) {
		ur_dbg("%s: QP 0x%06x: called outside ibv_wr_start()..ibv_wr_complete(); ignored",
		       what, q->qp_base.qp_num);
		return NULL;
	}
	if (x->err)
		return NULL;
	if (need && !(x->send_ops & need)) {
		batch_fail(x, EINVAL,
			   "%s: QP 0x%06x was created without this operation in send_ops_flags "
			   "(0x%llx)",
			   what, q->qp_base.qp_num, (unsigned long long)x->send_ops);
		return NULL;
	}
	if (!grow32((void **)&x->wr, sizeof(*x->wr), x->nwr + 1, &x->wr_cap)) {
		batch_fail(x, ENOMEM, "%s: no memory for the batch (%u WRs)", what, x->nwr);
		return NULL;
	}
	w = &x->wr[x->nwr++];
	memset(w, 0, sizeof(*w));
	w->wr.wr_id = q->wr_id;
	w->wr.opcode = op;
	/* inline or not is the setter's choice */
	w->wr.send_flags = q->wr_flags & ~(unsigned int)IBV_SEND_INLINE;
	w->sge_first = x->nsge;
	return w;
}

static void qpx_wr_send(struct ibv_qp_ex *q)
{
	wr_new(q, IBV_WR_SEND, IBV_QP_EX_WITH_SEND, "wr_send");
}

static void qpx_wr_send_imm(struct ibv_qp_ex *q, __be32 imm_data)
{
	struct qpx_wr *w =
	    wr_new(q, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM, "wr_send_imm");

	if (w)
		w->wr.imm_data = imm_data;
}

static void qpx_wr_send_inv(struct ibv_qp_ex *q, uint32_t invalidate_rkey)
{
	struct qpx_wr *w =
	    wr_new(q, IBV_WR_SEND_WITH_INV, IBV_QP_EX_WITH_SEND_WITH_INV, "wr_send_inv");

	if (w)
		w->wr.invalidate_rkey = invalidate_rkey;
}

static void qpx_wr_send_tso(struct ibv_qp_ex *q, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	struct qpx_wr *w = wr_new(q, IBV_WR_TSO, 0, "wr_send_tso");

	if (w) {
		w->wr.tso.hdr = hdr;
		w->wr.tso.hdr_sz = hdr_sz;
		w->wr.tso.mss = mss;
	}
}

static void qpx_wr_rdma_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t remote_addr)
{
	struct qpx_wr *w = wr_new(q, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE, "wr_rdma_write");

	if (w) {
		w->wr.wr.rdma.rkey = rkey;
		w->wr.wr.rdma.remote_addr = remote_addr;
	}
}

static void qpx_wr_rdma_write_imm(struct ibv_qp_ex *q, uint32_t rkey, uint64_t remote_addr,
				  __be32 imm_data)
{
	struct qpx_wr *w = wr_new(q, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
				  "wr_rdma_write_imm");

	if (w) {
		w->wr.wr.rdma.rkey = rkey;
		w->wr.wr.rdma.remote_addr = remote_addr;
		w->wr.imm_data = imm_data;
	}
}

static void qpx_wr_rdma_read(struct ibv_qp_ex *q, uint32_t rkey, uint64_t remote_addr)
{
	struct qpx_wr *w = wr_new(q, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ, "wr_rdma_read");

	if (w) {
		w->wr.wr.rdma.rkey = rkey;
		w->wr.wr.rdma.remote_addr = remote_addr;
	}
}

static void qpx_wr_atomic_cmp_swp(struct ibv_qp_ex *q, uint32_t rkey, uint64_t remote_addr,
				  uint64_t compare, uint64_t swap)
{
	struct qpx_wr *w = wr_new(q, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
				  "wr_atomic_cmp_swp");

	if (w) {
		w->wr.wr.atomic.rkey = rkey;
		w->wr.wr.atomic.remote_addr = remote_addr;
		w->wr.wr.atomic.compare_add = compare;
		w->wr.wr.atomic.swap = swap;
	}
}

static void qpx_wr_atomic_fetch_add(struct ibv_qp_ex *q, uint32_t rkey, uint64_t remote_addr,
				    uint64_t add)
{
	struct qpx_wr *w = wr_new(q, IBV_WR_ATOMIC_FETCH_AND_ADD,
				  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, "wr_atomic_fetch_add");

	if (w) {
		w->wr.wr.atomic.rkey = rkey;
		w->wr.wr.atomic.remote_addr = remote_addr;
		w->wr.wr.atomic.compare_add = add;
	}
}

static void qpx_wr_atomic_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t remote_addr,
				const void *atomic_wr)
{
	struct qpx_wr *w = wr_new(q, IBV_WR_ATOMIC_WRITE, 0, "wr_atomic_write");

	(void)atomic_wr;
	if (w) {
		w->wr.wr.rdma.rkey = rkey;
		w->wr.wr.rdma.remote_addr = remote_addr;
	}
}

static void qpx_wr_bind_mw(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey,
			   const struct ibv_mw_bind_info *bind_info)
{
	struct qpx_wr *w = wr_new(q, IBV_WR_BIND_MW, IBV_QP_EX_WITH_BIND_MW, "wr_bind_mw");

	if (w) {
		w->wr.bind_mw.mw = mw;
		w->wr.bind_mw.rkey = rkey;
		if (bind_info)
			w->wr.bind_mw.bind_info = *bind_info;
	}
}

static void qpx_wr_local_inv(struct ibv_qp_ex *q, uint32_t invalidate_rkey)
{
	struct qpx_wr *w = wr_new(q, IBV_WR_LOCAL_INV, IBV_QP_EX_WITH_LOCAL_INV, "wr_local_inv");

	if (w)
		w->wr.invalidate_rkey = invalidate_rkey;
}

/* ---- setters: they apply to the last WR built ---- */

static struct qpx_wr *wr_last(struct ibv_qp_ex *q, const char *what)
{
	struct uroce_qpx *x = qpx_qp(q)->qpx;

	if (!x->open) {
		ur_dbg("%s: QP 0x%06x: called outside ibv_wr_start()..ibv_wr_complete(); ignored",
		       what, q->qp_base.qp_num);
		return NULL;
	}
	if (x->err)
		return NULL;
	if (!x->nwr) {
		batch_fail(x, EINVAL,
			   "%s: QP 0x%06x: no work request to attach to (call a builder "
			   "such as ibv_wr_send() first)",
			   what, q->qp_base.qp_num);
		return NULL;
	}
	return &x->wr[x->nwr - 1];
}

static void qpx_wr_set_sge_list(struct ibv_qp_ex *q, size_t num_sge, const struct ibv_sge *sg_list)
{
	struct uroce_qpx *x = qpx_qp(q)->qpx;
	struct qpx_wr *w = wr_last(q, "wr_set_sge_list");

	if (!w)
		return;
	/* num_sge > max_send_sge is post_send's to refuse; cap what is copied */
	if (num_sge > UROCE_MAX_SGE) {
		batch_fail(x, EINVAL, "wr_set_sge_list: num_sge %zu > max_send_sge %u", num_sge,
			   qpx_qp(q)->sq.max_sge);
		return;
	}
	if (!grow32((void **)&x->sge, sizeof(*x->sge), x->nsge + (uint32_t)num_sge, &x->sge_cap)) {
		batch_fail(x, ENOMEM, "wr_set_sge_list: no memory for the batch");
		return;
	}
	/* A second data setter replaces the first. */
	w->sge_first = x->nsge;
	w->wr.num_sge = (int)num_sge;
	w->inl = false;
	w->wr.send_flags &= ~(unsigned int)IBV_SEND_INLINE;
	if (num_sge)
		memcpy(&x->sge[x->nsge], sg_list, num_sge * sizeof(*sg_list));
	x->nsge += (uint32_t)num_sge;
}

static void qpx_wr_set_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = {.addr = addr, .length = length, .lkey = lkey};

	qpx_wr_set_sge_list(q, 1, &sge);
}

static void qpx_wr_set_inline_data_list(struct ibv_qp_ex *q, size_t num_buf,
					const struct ibv_data_buf *buf_list)
{
	struct uroce_qp *qp = qpx_qp(q);
	struct uroce_qpx *x = qp->qpx;
	struct qpx_wr *w = wr_last(q, "wr_set_inline_data_list");
	size_t total = 0;

	if (!w)
		return;
	for (size_t i = 0; i < num_buf; i++) {
		total += buf_list[i].length;
		if (total > qp->sq.max_inline) {
			batch_fail(x, EINVAL,
				   "wr_set_inline_data: more than max_inline_data (%u) bytes",
				   qp->sq.max_inline);
			return;
		}
	}
	if (!total) {
		/* nothing to copy: a zero-length message, as with no SGE */
		qpx_wr_set_sge_list(q, 0, NULL);
		return;
	}
	if (!grow((void **)&x->inl, 1, x->inl_len + total, &x->inl_cap) ||
	    !grow32((void **)&x->sge, sizeof(*x->sge), x->nsge + 1, &x->sge_cap)) {
		batch_fail(x, ENOMEM, "wr_set_inline_data: no memory for the batch");
		return;
	}
	/* Copied now: the caller may reuse its buffers at once. */
	w->inl = true;
	w->inl_off = x->inl_len;
	for (size_t i = 0; i < num_buf; i++) {
		if (buf_list[i].length)
			memcpy(x->inl + x->inl_len, buf_list[i].addr, buf_list[i].length);
		x->inl_len += buf_list[i].length;
	}
	/* post_send sees one inline SGE over the copy (address set at
	 * wr_complete, when the buffer has stopped moving) */
	w->sge_first = x->nsge;
	x->sge[x->nsge++] = (struct ibv_sge){.length = (uint32_t)total};
	w->wr.num_sge = 1;
	w->wr.send_flags |= IBV_SEND_INLINE;
}

static void qpx_wr_set_inline_data(struct ibv_qp_ex *q, void *addr, size_t length)
{
	struct ibv_data_buf buf = {.addr = addr, .length = length};

	qpx_wr_set_inline_data_list(q, 1, &buf);
}

static void qpx_wr_set_ud_addr(struct ibv_qp_ex *q, struct ibv_ah *ah, uint32_t remote_qpn,
			       uint32_t remote_qkey)
{
	struct qpx_wr *w = wr_last(q, "wr_set_ud_addr");

	if (!w)
		return;
	if (q->qp_base.qp_type != IBV_QPT_UD) {
		batch_fail(qpx_qp(q)->qpx, EINVAL,
			   "wr_set_ud_addr: QP 0x%06x is not a UD QP: it has no per-WR address",
			   q->qp_base.qp_num);
		return;
	}
	w->wr.wr.ud.ah = ah;
	w->wr.wr.ud.remote_qpn = remote_qpn;
	w->wr.wr.ud.remote_qkey = remote_qkey;
}

static void qpx_wr_set_xrc_srqn(struct ibv_qp_ex *q, uint32_t remote_srqn)
{
	struct qpx_wr *w = wr_last(q, "wr_set_xrc_srqn");

	if (!w)
		return;
	if (q->qp_base.qp_type != IBV_QPT_XRC_SEND) {
		batch_fail(qpx_qp(q)->qpx, EINVAL,
			   "wr_set_xrc_srqn: QP 0x%06x is not an XRC_SEND QP", q->qp_base.qp_num);
		return;
	}
	w->wr.qp_type.xrc.remote_srqn = remote_srqn;
}

/* ---- creation ---- */

int uroce_qpx_check(const struct ibv_qp_init_attr_ex *ia)
{
	uint64_t ops;

	if (ia->comp_mask & ~(uint32_t)UROCE_QP_INIT_MASKS)
		return ur_dbg("create_qp_ex: unknown comp_mask bits 0x%x",
			      ia->comp_mask & ~(uint32_t)UROCE_QP_INIT_MASKS),
		       EINVAL;
	if ((ia->comp_mask & IBV_QP_INIT_ATTR_XRCD) !=
	    (ia->qp_type == IBV_QPT_XRC_RECV ? IBV_QP_INIT_ATTR_XRCD : 0))
		return ur_dbg("create_qp_ex: an XRC_RECV QP needs an XRC domain "
			      "(IBV_QP_INIT_ATTR_XRCD); other QP types take none"),
		       EINVAL;
	if (ia->comp_mask & (IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH))
		return ur_dbg("create_qp_ex: RSS (IND_TABLE / RX_HASH) is not supported"),
		       EOPNOTSUPP;
	if (ia->comp_mask & IBV_QP_INIT_ATTR_MAX_TSO_HEADER)
		return ur_dbg("create_qp_ex: TSO (IBV_QP_INIT_ATTR_MAX_TSO_HEADER) is not "
			      "supported"),
		       EOPNOTSUPP;
	if ((ia->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ia->create_flags)
		return ur_dbg("create_qp_ex: create_flags 0x%x not supported", ia->create_flags),
		       EOPNOTSUPP;
	if (!(ia->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return 0;
	ops = ia->qp_type == IBV_QPT_RC || ia->qp_type == IBV_QPT_XRC_SEND ? UROCE_RC_SEND_OPS
	      : ia->qp_type == IBV_QPT_UD				   ? UROCE_UD_SEND_OPS
	      : ia->qp_type == IBV_QPT_UC				   ? UROCE_UC_SEND_OPS
									   : 0;
	/* ibv_wr_post(3): "If the QP does not support all the requested work
	 * request types then QP creation will fail." */
	if (ia->send_ops_flags & ~ops)
		return ur_dbg(
			   "create_qp_ex: send_ops_flags 0x%llx not supported on QP type %d "
			   "(UC: SEND(_WITH_IMM), RDMA_WRITE(_WITH_IMM), LOCAL_INV, BIND_MW; "
			   "RC/XRC: also RDMA_READ, atomics, SEND_WITH_INV; UD: SEND(_WITH_IMM))",
			   (unsigned long long)(ia->send_ops_flags & ~ops), ia->qp_type),
		       EOPNOTSUPP;
	return 0;
}

int uroce_qpx_init(struct uroce_qp *qp, const struct ibv_qp_init_attr_ex *ia)
{
	struct ibv_qp_ex *q = &qp->ibqp;
	pthread_mutexattr_t ma;
	struct uroce_qpx *x;

	if (!(ia->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return 0;
	x = calloc(1, sizeof(*x));
	if (!x)
		return ur_dbg("create_qp: out of memory for the ibv_wr_* state"), ENOMEM;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&x->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	x->send_ops = ia->send_ops_flags;
	qp->qpx = x;

	q->comp_mask = 0;
	q->wr_start = qpx_wr_start;
	q->wr_complete = qpx_wr_complete;
	q->wr_abort = qpx_wr_abort;
	q->wr_send = qpx_wr_send;
	q->wr_send_imm = qpx_wr_send_imm;
	q->wr_send_inv = qpx_wr_send_inv;
	q->wr_send_tso = qpx_wr_send_tso;
	q->wr_rdma_write = qpx_wr_rdma_write;
	q->wr_rdma_write_imm = qpx_wr_rdma_write_imm;
	q->wr_rdma_read = qpx_wr_rdma_read;
	q->wr_atomic_cmp_swp = qpx_wr_atomic_cmp_swp;
	q->wr_atomic_fetch_add = qpx_wr_atomic_fetch_add;
	q->wr_atomic_write = qpx_wr_atomic_write;
	q->wr_bind_mw = qpx_wr_bind_mw;
	q->wr_local_inv = qpx_wr_local_inv;
	q->wr_set_sge = qpx_wr_set_sge;
	q->wr_set_sge_list = qpx_wr_set_sge_list;
	q->wr_set_inline_data = qpx_wr_set_inline_data;
	q->wr_set_inline_data_list = qpx_wr_set_inline_data_list;
	q->wr_set_ud_addr = qpx_wr_set_ud_addr;
	q->wr_set_xrc_srqn = qpx_wr_set_xrc_srqn;
	return 0;
}

void uroce_qpx_fini(struct uroce_qp *qp)
{
	struct uroce_qpx *x = qp->qpx;

	if (!x)
		return;
	pthread_mutex_destroy(&x->lock);
	free(x->wr);
	free(x->sge);
	free(x->inl);
	free(x);
	qp->qpx = NULL;
}

/* rdma-core: the QP is an ibv_qp_ex only if it was created for the WR API. */
UROCE_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	struct uroce_qp *qp;

	if (!ibqp) {
		ur_dbg("qp_to_qp_ex: qp is NULL");
		errno = EINVAL;
		return NULL;
	}
	qp = to_uqp(ibqp);
	if (!qp->qpx) {
		ur_dbg("qp_to_qp_ex: QP 0x%06x was not created with "
		       "IBV_QP_INIT_ATTR_SEND_OPS_FLAGS",
		       ibqp->qp_num);
		errno = EINVAL;
		return NULL;
	}
	return &qp->ibqp;
}

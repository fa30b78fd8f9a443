/* Shared receive queues (IBTA 10.2.9): one pool of receive WQEs for many QPs.
 * The SRQ limit is armed by ibv_modify_srq(IBV_SRQ_LIMIT) and fires
 * IBV_EVENT_SRQ_LIMIT_REACHED once when the posted count drops below it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uroce.h"
#include "core/objreg.h"
#include "verbs/verbs_ops.h"

enum { UROCE_MAX_SRQ_WR = UROCE_MAX_QP_WR, UROCE_MAX_SRQ_SGE = UROCE_MAX_SGE };

static atomic_uint next_srq_num = 1;

/* XRC SRQs by number, for the responder's XRCETH lookup: a leaf lock, taken
 * inside qp->lock. */
static pthread_mutex_t xsrq_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uroce_srq **xsrqs;
static int nxsrq, xsrq_cap;

static int xsrq_register(struct uroce_srq *srq)
{
	int err = 0;

	pthread_mutex_lock(&xsrq_lock);
	if (nxsrq == xsrq_cap) {
		int cap = xsrq_cap ? xsrq_cap * 2 : 16;
		void *n = realloc(xsrqs, (size_t)cap * sizeof(*xsrqs));

		if (!n) {
			ur_dbg("create_srq: out of memory for the XRC SRQ table");
			err = ENOMEM;
		} else {
			xsrqs = n;
			xsrq_cap = cap;
		}
	}
	if (!err)
		xsrqs[nxsrq++] = srq;
	pthread_mutex_unlock(&xsrq_lock);
	return err;
}

static void xsrq_unregister(struct uroce_srq *srq)
{
	pthread_mutex_lock(&xsrq_lock);
	for (int i = 0; i < nxsrq; i++)
		if (xsrqs[i] == srq) {
			xsrqs[i] = xsrqs[--nxsrq];
			break;
		}
	pthread_mutex_unlock(&xsrq_lock);
}

struct ibv_srq *uroce_xrc_srq_find(struct uroce_ctx *ctx, uint32_t srqn, struct ibv_xrcd *xrcd)
{
	struct ibv_srq *found = NULL;

	pthread_mutex_lock(&xsrq_lock);
	for (int i = 0; i < nxsrq; i++)
		if (xsrqs[i]->srq_num == srqn && xsrqs[i]->ctx == ctx &&
		    uroce_xrcd_same(xsrqs[i]->xrcd, xrcd))
			found = &xsrqs[i]->ibsrq;
	pthread_mutex_unlock(&xsrq_lock);
	return found;
}

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

struct ibv_srq *uroce_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *ia)
{
	struct uroce_srq *srq;
	uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
			 IBV_SRQ_INIT_ATTR_CQ;

	if (!(ia->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !ia->pd) {
		ur_dbg("create_srq: a PD is required");
		errno = EINVAL;
		return NULL;
	}
	if (ia->comp_mask & ~known) {
		ur_dbg("create_srq_ex: comp_mask 0x%x not supported (tag matching?)",
		       ia->comp_mask & ~known);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((ia->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && ia->srq_type != IBV_SRQT_BASIC &&
	    ia->srq_type != IBV_SRQT_XRC) {
		ur_dbg("create_srq_ex: SRQ type %d not supported", ia->srq_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((ia->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && ia->srq_type == IBV_SRQT_XRC &&
	    (!(ia->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !ia->xrcd ||
	     !(ia->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !ia->cq)) {
		ur_dbg("create_srq_ex: an XRC SRQ needs an XRC domain and a CQ");
		errno = EINVAL;
		return NULL;
	}
	if (ia->pd->context != context ||
	    ((ia->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && ia->srq_type == IBV_SRQT_XRC &&
	     (ia->cq->context != context || ia->xrcd->context != context))) {
		ur_dbg("create_srq_ex: the PD, CQ and XRC domain must be of the SRQ's context");
		errno = EINVAL;
		return NULL;
	}
	if (ia->attr.max_wr < 1 || ia->attr.max_wr > UROCE_MAX_SRQ_WR ||
	    ia->attr.max_sge > UROCE_MAX_SRQ_SGE) {
		ur_dbg("create_srq: max_wr %u (1..%d) / max_sge %u (<= %d) out of range",
		       ia->attr.max_wr, UROCE_MAX_SRQ_WR, ia->attr.max_sge, UROCE_MAX_SRQ_SGE);
		errno = EINVAL;
		return NULL;
	}
	if (ia->attr.srq_limit > ia->attr.max_wr) {
		ur_dbg("create_srq: srq_limit %u > max_wr %u", ia->attr.srq_limit, ia->attr.max_wr);
		errno = EINVAL;
		return NULL;
	}
	if (atomic_load(&to_uctx(context)->nsrq) >= UROCE_MAX_SRQ) {
		ur_dbg("create_srq: max_srq (%d) reached", UROCE_MAX_SRQ);
		errno = ENOMEM;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		ur_dbg("create_srq: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	srq->rq.max_wr = ia->attr.max_wr;
	srq->rq.max_sge = ia->attr.max_sge ? ia->attr.max_sge : 1;
	srq->rq.size = pow2_at_least(srq->rq.max_wr + 1);
	srq->rq.wqe = uroce_pd_buf_alloc(ia->pd, srq->rq.size * sizeof(*srq->rq.wqe),
					 UROCE_RES_TYPE_SRQ, &srq->wqe_custom);
	if (!srq->rq.wqe) {
		ur_dbg("create_srq: out of memory for %u WRs", srq->rq.max_wr);
		free(srq);
		errno = ENOMEM;
		return NULL;
	}
	if (uroce_obj_add(&srq->ibsrq, UROCE_OBJ_SRQ)) {
		free(srq->rq.wqe);
		free(srq);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&srq->lock, NULL);
	srq->ctx = to_uctx(context);
	srq->type = (ia->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? ia->srq_type : IBV_SRQT_BASIC;
	srq->srq_num = atomic_fetch_add(&next_srq_num, 1);
	if (srq->type == IBV_SRQT_XRC) {
		if (xsrq_register(srq)) {
			uroce_pd_buf_free(ia->pd, srq->rq.wqe, UROCE_RES_TYPE_SRQ, srq->wqe_custom);
			uroce_obj_release(&srq->ibsrq, srq);
			errno = ENOMEM;
			return NULL;
		}
		srq->xrcd = ia->xrcd;
		srq->cq = ia->cq;
		atomic_fetch_add(&to_ucq(ia->cq)->refs, 1);
		uroce_xrcd_get(ia->xrcd);
	}
	srq->ibsrq.context = context;
	srq->ibsrq.srq_context = ia->srq_context;
	srq->ibsrq.pd = ia->pd;
	srq->ibsrq.handle = srq->srq_num;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	atomic_fetch_add(&to_upd(ia->pd)->refs, 1);
	atomic_fetch_add(&srq->ctx->nsrq, 1);
	ia->attr.max_wr = srq->rq.max_wr;
	ia->attr.max_sge = srq->rq.max_sge;
	return &srq->ibsrq;
}

UROCE_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ia;
	struct ibv_srq *srq;

	if (!pd || !attr) {
		ur_dbg("create_srq: pd and attr must not be NULL");
		errno = EINVAL;
		return NULL;
	}
	memset(&ia, 0, sizeof(ia));
	ia.srq_context = attr->srq_context;
	ia.attr = attr->attr;
	ia.comp_mask = IBV_SRQ_INIT_ATTR_PD;
	ia.pd = pd;
	srq = uroce_create_srq_ex(pd->context, &ia);
	if (srq)
		attr->attr = ia.attr;
	return srq;
}

UROCE_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct uroce_srq *srq;
	int err = 0;

	if (!ibsrq || !attr)
		return ur_dbg("modify_srq: srq and attr must not be NULL"), EINVAL;
	srq = to_usrq(ibsrq);
	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return ur_dbg("modify_srq: unknown attr_mask bits 0x%x", mask), EINVAL;
	if (mask & IBV_SRQ_MAX_WR)
		return ur_dbg("modify_srq: resizing an SRQ is not supported "
			      "(IBV_DEVICE_SRQ_RESIZE is not reported)"),
		       EINVAL;
	pthread_mutex_lock(&srq->lock);
	if (mask & IBV_SRQ_LIMIT) {
		if (attr->srq_limit > srq->rq.max_wr) {
			ur_dbg("modify_srq: srq_limit %u > max_wr %u", attr->srq_limit,
			       srq->rq.max_wr);
			err = EINVAL;
		} else {
			srq->limit = attr->srq_limit; /* arms the limit event (0 disarms) */
		}
	}
	pthread_mutex_unlock(&srq->lock);
	return err;
}

UROCE_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct uroce_srq *srq;

	if (!ibsrq || !attr)
		return ur_dbg("query_srq: srq and attr must not be NULL"), EINVAL;
	srq = to_usrq(ibsrq);
	pthread_mutex_lock(&srq->lock);
	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

UROCE_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct uroce_srq *srq;
	int err = uroce_obj_check(ibsrq, UROCE_OBJ_SRQ, "destroy_srq");

	if (err)
		return uroce_obj_err(err);
	srq = to_usrq(ibsrq);
	if (atomic_load(&srq->refs)) {
		ur_dbg("destroy_srq: %u QP(s) still use the SRQ", atomic_load(&srq->refs));
		return uroce_obj_err(EBUSY);
	}
	if (srq->type == IBV_SRQT_XRC) {
		xsrq_unregister(srq);
		atomic_fetch_sub(&to_ucq(srq->cq)->refs, 1);
		uroce_xrcd_put(srq->xrcd);
	}
	atomic_fetch_sub(&to_upd(ibsrq->pd)->refs, 1);
	pthread_mutex_destroy(&srq->lock);
	uroce_pd_buf_free(ibsrq->pd, srq->rq.wqe, UROCE_RES_TYPE_SRQ, srq->wqe_custom);
	atomic_fetch_sub(&srq->ctx->nsrq, 1);
	uroce_obj_release(ibsrq, srq);
	return 0;
}

int uroce_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct uroce_srq *srq = to_usrq(ibsrq);

	if (srq->type != IBV_SRQT_XRC)
		return ur_dbg("get_srq_num: not an XRC SRQ"), EINVAL;
	*srq_num = srq->srq_num;
	return 0;
}

int uroce_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct uroce_srq *srq = to_usrq(ibsrq);
	int err = 0;

	pthread_mutex_lock(&srq->lock);
	err = uroce_rq_post(&srq->rq, wr, bad_wr, "post_srq_recv");
	pthread_mutex_unlock(&srq->lock);
	return err;
}

/* Append receive WRs to a receive queue (the QP's or an SRQ's; its lock
 * held): ENOMEM when full, EINVAL for too many SGEs, *bad_wr the first WR
 * not posted. */
int uroce_rq_post(struct uroce_rq *rq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr,
		  const char *verb)
{
	for (; wr; wr = wr->next) {
		struct uroce_rwqe *w;

		if (rq->head - rq->tail >= rq->max_wr) {
			ur_dbg("%s: receive queue full (%u WRs)", verb, rq->max_wr);
			*bad_wr = wr;
			return ENOMEM;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge) {
			ur_dbg("%s: num_sge %d > max_sge %u", verb, wr->num_sge, rq->max_sge);
			*bad_wr = wr;
			return EINVAL;
		}
		w = &rq->wqe[rq->head & (rq->size - 1)];
		w->wr_id = wr->wr_id;
		w->num_sge = wr->num_sge;
		w->length = 0;
		for (int i = 0; i < wr->num_sge; i++) {
			w->sg[i].addr = wr->sg_list[i].addr;
			w->sg[i].length = wr->sg_list[i].length;
			w->sg[i].lkey = wr->sg_list[i].lkey;
			w->length += wr->sg_list[i].length;
		}
		rq->head++;
	}
	return 0;
}

bool uroce_rq_empty(struct uroce_qp *qp)
{
	struct ibv_srq *s = qp->resp.xsrq ? qp->resp.xsrq : qp->ibqp.qp_base.srq;
	bool empty;

	if (!s)
		return qp->rq.head == qp->rq.tail;
	pthread_mutex_lock(&to_usrq(s)->lock);
	empty = to_usrq(s)->rq.head == to_usrq(s)->rq.tail;
	pthread_mutex_unlock(&to_usrq(s)->lock);
	return empty;
}

/* The WQE's used scatter entries only: a whole one is 800 bytes, most of
 * a small receive's cost. */
static void rwqe_copy(struct uroce_rwqe *out, const struct uroce_rwqe *w)
{
	out->wr_id = w->wr_id;
	out->num_sge = w->num_sge;
	out->length = w->length;
	memcpy(out->sg, w->sg, sizeof(w->sg[0]) * (size_t)w->num_sge);
}

bool uroce_rq_pop(struct uroce_qp *qp, struct uroce_rwqe *out)
{
	struct ibv_srq *s = qp->resp.xsrq ? qp->resp.xsrq : qp->ibqp.qp_base.srq;
	struct uroce_srq *srq;
	bool fire = false;

	if (!s) {
		if (qp->rq.head == qp->rq.tail)
			return false;
		rwqe_copy(out, &qp->rq.wqe[qp->rq.tail & (qp->rq.size - 1)]);
		qp->rq.tail++;
		return true;
	}
	srq = to_usrq(s);
	pthread_mutex_lock(&srq->lock);
	if (srq->rq.head == srq->rq.tail) {
		pthread_mutex_unlock(&srq->lock);
		return false;
	}
	rwqe_copy(out, &srq->rq.wqe[srq->rq.tail & (srq->rq.size - 1)]);
	srq->rq.tail++;
	/* IBTA 10.2.9.5 (o10-?): the limit event fires once, then disarms */
	if (srq->limit && srq->rq.head - srq->rq.tail < srq->limit) {
		srq->limit = 0;
		fire = true;
	}
	pthread_mutex_unlock(&srq->lock);
	if (fire)
		uroce_async_event(qp->ctx, IBV_EVENT_SRQ_LIMIT_REACHED, s);
	return true;
}

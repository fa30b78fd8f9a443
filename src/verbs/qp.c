/* Queue pairs: create/destroy, the IBTA state machine (modify/query) and
 * posting work requests.  The transport state machines live in
 * src/transport/{req,comp,resp}.c and run under qp->lock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uroce.h"
#include "core/objreg.h"
#include "transport/rc.h"
#include "verbs/qp_rules.h"
#include "verbs/verbs_ex.h"
#include "verbs/verbs_ops.h"

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

static int check_caps(struct ibv_qp_cap *cap)
{
	if (cap->max_send_wr > UROCE_MAX_QP_WR || cap->max_recv_wr > UROCE_MAX_QP_WR)
		return ur_dbg("create_qp: max_send_wr %u / max_recv_wr %u > max_qp_wr %d",
			      cap->max_send_wr, cap->max_recv_wr, UROCE_MAX_QP_WR),
		       EINVAL;
	if (cap->max_send_sge > UROCE_MAX_SGE || cap->max_recv_sge > UROCE_MAX_SGE)
		return ur_dbg("create_qp: max_send_sge %u / max_recv_sge %u > max_sge %d",
			      cap->max_send_sge, cap->max_recv_sge, UROCE_MAX_SGE),
		       EINVAL;
	if (cap->max_inline_data > UROCE_MAX_INLINE)
		return ur_dbg("create_qp: max_inline_data %u > %d", cap->max_inline_data,
			      UROCE_MAX_INLINE),
		       EINVAL;
	/* Report what was really allocated (ibv_create_qp(3) allows more). */
	if (!cap->max_send_sge)
		cap->max_send_sge = 1;
	if (!cap->max_recv_sge)
		cap->max_recv_sge = 1;
	return 0;
}

/* The queues come from the allocator of a parent domain pd, if it has one
 * (src/verbs/td.c); qp->buf_custom records which did. */
static int alloc_queues(struct uroce_qp *qp, struct ibv_pd *pd, const struct ibv_qp_cap *cap)
{
	struct uroce_sq *sq = &qp->sq;
	struct uroce_rq *rq = &qp->rq;
	bool c;

	qp->ibqp.qp_base.pd = pd; /* for free_qp */
	sq->max_wr = cap->max_send_wr;
	sq->max_sge = cap->max_send_sge;
	sq->max_inline = cap->max_inline_data;
	sq->size = pow2_at_least(sq->max_wr + 1);
	sq->wqe = uroce_pd_buf_alloc(pd, sq->size * sizeof(*sq->wqe), UROCE_RES_TYPE_QP, &c);
	if (!sq->wqe)
		return ENOMEM;
	qp->buf_custom |= c ? 1 : 0;
	if (sq->max_inline) {
		sq->inline_buf = uroce_pd_buf_alloc(pd, (size_t)sq->size * sq->max_inline,
						    UROCE_RES_TYPE_QP, &c);
		if (!sq->inline_buf)
			return ENOMEM;
		qp->buf_custom |= c ? 2 : 0;
	}
	rq->max_wr = cap->max_recv_wr;
	rq->max_sge = cap->max_recv_sge;
	rq->size = pow2_at_least(rq->max_wr + 1);
	rq->wqe = uroce_pd_buf_alloc(pd, rq->size * sizeof(*rq->wqe), UROCE_RES_TYPE_QP, &c);
	if (!rq->wqe)
		return ENOMEM;
	qp->buf_custom |= c ? 4 : 0;
	return 0;
}

static void free_qp_res(struct uroce_qp *qp)
{
	uroce_stats_qp_del(qp->ctx, qp->stats);
	uroce_qpx_fini(qp);
	uroce_pd_buf_free(qp->ibqp.qp_base.pd, qp->sq.wqe, UROCE_RES_TYPE_QP, qp->buf_custom & 1);
	uroce_pd_buf_free(qp->ibqp.qp_base.pd, qp->sq.inline_buf, UROCE_RES_TYPE_QP,
			  qp->buf_custom & 2);
	uroce_pd_buf_free(qp->ibqp.qp_base.pd, qp->rq.wqe, UROCE_RES_TYPE_QP, qp->buf_custom & 4);
	free(qp->resp.res);
	uroce_sack_free(qp);
	pthread_mutex_destroy(&qp->lock);
}

static void free_qp(struct uroce_qp *qp)
{
	free_qp_res(qp);
	uroce_obj_release(&qp->ibqp.qp_base, qp);
}

struct ibv_qp *uroce_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *ia)
{
	struct uroce_ctx *ctx = to_uctx(context);
	struct uroce_qp *qp;
	uint32_t qpn;
	int err;

	if (ia->qp_type != IBV_QPT_XRC_RECV &&
	    (!ia->pd || !(ia->comp_mask & IBV_QP_INIT_ATTR_PD))) {
		ur_dbg("create_qp: a PD is required");
		errno = EINVAL;
		return NULL;
	}
	if (ia->qp_type == IBV_QPT_XRC_RECV && !ia->xrcd) {
		ur_dbg("create_qp: an XRC_RECV QP needs an XRC domain");
		errno = EINVAL;
		return NULL;
	}
	err = uroce_qpx_check(ia); /* comp_mask, create_flags, send_ops_flags */
	if (err) {
		errno = err;
		return NULL;
	}
	if (ia->qp_type != IBV_QPT_RC && ia->qp_type != IBV_QPT_UD && ia->qp_type != IBV_QPT_UC &&
	    ia->qp_type != IBV_QPT_XRC_SEND && ia->qp_type != IBV_QPT_XRC_RECV) {
		ur_dbg("create_qp: QP type %d not supported (RC, UC, UD, XRC_SEND, XRC_RECV)",
		       ia->qp_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* XRC_RECV QPs complete to their SRQs' CQs; XRC_SEND QPs receive nothing */
	if (ia->qp_type == IBV_QPT_XRC_RECV) {
		ia->send_cq = ia->recv_cq = NULL;
		ia->srq = NULL;
		ia->pd = NULL;
		memset(&ia->cap, 0, sizeof(ia->cap));
	} else if (ia->qp_type == IBV_QPT_XRC_SEND) {
		ia->recv_cq = NULL;
		ia->srq = NULL;
		ia->cap.max_recv_wr = ia->cap.max_recv_sge = 0;
	}
	if (ia->qp_type != IBV_QPT_XRC_RECV && !ia->send_cq) {
		ur_dbg("create_qp: send_cq is required");
		errno = EINVAL;
		return NULL;
	}
	if ((ia->qp_type == IBV_QPT_RC || ia->qp_type == IBV_QPT_UC || ia->qp_type == IBV_QPT_UD) &&
	    !ia->recv_cq) {
		ur_dbg("create_qp: recv_cq is required");
		errno = EINVAL;
		return NULL;
	}
	/* as the kernel, which finds handles in the caller's context only */
	if ((ia->pd && ia->pd->context != context) ||
	    (ia->send_cq && ia->send_cq->context != context) ||
	    (ia->recv_cq && ia->recv_cq->context != context) ||
	    (ia->srq && ia->srq->context != context) ||
	    (ia->qp_type == IBV_QPT_XRC_RECV && ia->xrcd->context != context)) {
		ur_dbg("create_qp: the PD, CQs, SRQ and XRC domain must be of the QP's context");
		errno = EINVAL;
		return NULL;
	}
	if (ia->srq) {
		if (to_usrq(ia->srq)->type != IBV_SRQT_BASIC ||
		    !uroce_pd_same(ia->srq->pd, ia->pd)) {
			ur_dbg("create_qp: the SRQ must be a basic SRQ of the QP's PD");
			errno = EINVAL;
			return NULL;
		}
		/* C10-?: receive capacities come from the SRQ */
		ia->cap.max_recv_wr = 0;
		ia->cap.max_recv_sge = 0;
	}
	err = check_caps(&ia->cap);
	if (err) {
		errno = err;
		return NULL;
	}
	if (atomic_load(&ctx->nqp_total) >= UROCE_MAX_QP) {
		ur_dbg("create_qp: max_qp (%d) reached", UROCE_MAX_QP);
		errno = ENOMEM;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		ur_dbg("create_qp: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&qp->lock, NULL);
	qp->ctx = ctx;
	qp->stats = uroce_stats_qp_add(ctx);
	err = alloc_queues(qp, ia->pd, &ia->cap);
	if (err)
		ur_dbg("create_qp: out of memory for %u send / %u receive WRs", ia->cap.max_send_wr,
		       ia->cap.max_recv_wr);
	if (!err)
		err = uroce_qpx_init(qp, ia);
	if (err)
		goto err_free;

	qp->init.qp_context = ia->qp_context;
	qp->init.send_cq = ia->send_cq;
	qp->init.recv_cq = ia->recv_cq;
	qp->init.cap = ia->cap;
	qp->init.qp_type = ia->qp_type;
	qp->init.sq_sig_all = ia->sq_sig_all;
	qp->sq_sig_all = ia->sq_sig_all;

	struct ibv_qp *b = &qp->ibqp.qp_base;
	b->context = context;
	b->qp_context = ia->qp_context;
	b->pd = ia->pd;
	b->send_cq = ia->send_cq;
	b->recv_cq = ia->recv_cq;
	b->srq = ia->srq;
	b->state = IBV_QPS_RESET;
	b->qp_type = ia->qp_type;
	pthread_mutex_init(&b->mutex, NULL);
	pthread_cond_init(&b->cond, NULL);
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->sack_epoch = (uint16_t)(uroce_now_ns() >> 10); /* differs from a QP before it */
	qp->attr.cap = ia->cap;
	qp->attr.path_mtu = IBV_MTU_1024;
	qp->tr = ia->qp_type == IBV_QPT_UC					      ? UR_TR_UC
		 : ia->qp_type == IBV_QPT_UD					      ? UR_TR_UD
		 : ia->qp_type == IBV_QPT_XRC_SEND || ia->qp_type == IBV_QPT_XRC_RECV ? UR_TR_XRC
										      : UR_TR_RC;
	qp->xrcd = ia->qp_type == IBV_QPT_XRC_RECV ? ia->xrcd : NULL;
	if (ia->qp_type == IBV_QPT_UD) {
		/* a UD message is one packet of the port's MTU */
		qp->attr.path_mtu = ctx->dev->active_mtu;
		qp->mtu = uroce_mtu_bytes(ctx->dev->active_mtu);
	}

	if (uroce_obj_add(b, UROCE_OBJ_QP)) {
		err = ENOMEM;
		goto err_free;
	}
	pthread_mutex_lock(&ctx->lock);
	qp->ep = uroce_ep_get(ctx, qp, &qpn);
	if (!qp->ep) {
		pthread_mutex_unlock(&ctx->lock);
		ur_dbg("create_qp: no QPN: every endpoint is full or a UDP socket could not be "
		       "opened (see the error above)");
		err = ENOMEM;
		goto err_free;
	}
	b->qp_num = qpn;
	b->handle = qpn;
	uroce_stats_qp_update(qp);
	err = uroce_progress_add_qp(ctx, qp);
	if (err) {
		uroce_ep_put(ctx, qp);
		pthread_mutex_unlock(&ctx->lock);
		goto err_free;
	}
	pthread_mutex_unlock(&ctx->lock);

	atomic_fetch_add(&ctx->nqp_total, 1);
	if (ia->pd)
		atomic_fetch_add(&to_upd(ia->pd)->refs, 1);
	if (ia->send_cq)
		atomic_fetch_add(&to_ucq(ia->send_cq)->refs, 1);
	if (ia->recv_cq)
		atomic_fetch_add(&to_ucq(ia->recv_cq)->refs, 1);
	if (qp->xrcd)
		uroce_xrcd_get(qp->xrcd);
	if (ia->srq)
		atomic_fetch_add(&to_usrq(ia->srq)->refs, 1);
	ur_dbg("create_qp: %s QPN 0x%06x (UDP port %u)", uroce_qp_type_name(ia->qp_type), qpn,
	       qp->ep->port);
	return b;

err_free:
	free_qp(qp);
	errno = err;
	return NULL;
}

UROCE_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp *qp;

	if (!pd || !attr) {
		ur_dbg("create_qp: pd and attr must not be NULL");
		errno = EINVAL;
		return NULL;
	}
	memset(&ia, 0, sizeof(ia));
	memcpy(&ia, attr, sizeof(*attr));
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	ia.pd = pd;
	qp = uroce_create_qp_ex(pd->context, &ia);
	if (qp)
		attr->cap = ia.cap;
	return qp;
}

UROCE_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct uroce_qp *qp;
	struct uroce_ctx *ctx;
	int err = uroce_obj_check(ibqp, UROCE_OBJ_QP, "destroy_qp");

	if (err)
		return uroce_obj_err(err);
	qp = to_uqp(ibqp);
	ctx = qp->ctx;
	uroce_async_qp_wait_acks(qp);
	uroce_mcast_detach_all(qp);
	pthread_mutex_lock(&ctx->lock);
	uroce_ep_put(ctx, qp); /* no packet reaches the QP after this */
	uroce_progress_del_qp(ctx, qp);
	pthread_mutex_unlock(&ctx->lock);
	/* an ACK the last receive batch left pending still goes out */
	pthread_mutex_lock(&qp->lock);
	if (qp->attr.qp_state != IBV_QPS_RESET && qp->attr.qp_state != IBV_QPS_ERR)
		uroce_resp_flush_ack(qp);
	uroce_ep_flush(qp->ep);
	qp->req.inflight = 0;
	rc_sync_inflight(qp); /* no longer one of the endpoint's senders */
	pthread_mutex_unlock(&qp->lock);

	atomic_fetch_sub(&ctx->nqp_total, 1);
	if (ibqp->pd)
		atomic_fetch_sub(&to_upd(ibqp->pd)->refs, 1);
	if (ibqp->send_cq)
		atomic_fetch_sub(&to_ucq(ibqp->send_cq)->refs, 1);
	if (ibqp->recv_cq)
		atomic_fetch_sub(&to_ucq(ibqp->recv_cq)->refs, 1);
	if (qp->xrcd)
		uroce_xrcd_put(qp->xrcd);
	if (ibqp->srq)
		atomic_fetch_sub(&to_usrq(ibqp->srq)->refs, 1);
	free_qp_res(qp);
	/* no longer live either way; a QP with unread events stays allocated
	 * until they are read (the async queue frees it) */
	uroce_obj_release(&qp->ibqp.qp_base, uroce_async_qp_retire(qp) ? NULL : qp);
	return 0;
}

UROCE_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
					    uint32_t flags)
{
	(void)qp;
	(void)op;
	if (flags) {
		ur_dbg("query_qp_data_in_order: flags 0x%x: no flags are defined", flags);
		errno = EINVAL;
		return 0;
	}
	/* Packets are placed one after another in PSN order by one thread:
	 * the data of a message is written in order. */
	return 1;
}

/* ---- state machine ---- */

static int set_av(struct uroce_qp *qp, const struct ibv_ah_attr *ah, char *why, size_t len)
{
	return uroce_av_resolve(qp->ctx->dev, ah, &qp->path, why, len);
}

static void reset_qp(struct uroce_qp *qp)
{
	qp->req.inflight = 0;
	rc_sync_inflight(qp);
	qp->sq.head = qp->sq.req = qp->sq.tail = 0;
	qp->rq.head = qp->rq.tail = 0;
	memset(&qp->req, 0, sizeof(qp->req));
	memset(&qp->comp, 0, sizeof(qp->comp));
	free(qp->resp.res);
	memset(&qp->resp, 0, sizeof(qp->resp));
	uroce_sack_free(qp);
	qp->sack_epoch++; /* what a peer holds from before is void */
}

static int modify_qp(struct uroce_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct uroce_dev *d = qp->ctx->dev;
	struct uroce_qp_limits lim = {.active_mtu = d->active_mtu,
				      .max_rd_atomic = UROCE_MAX_RD_ATOM,
				      .max_dest_rd_atomic = UROCE_MAX_RD_ATOM,
				      .gid_tbl_len = d->ngid};
	enum ibv_qp_state cur = qp->attr.qp_state;
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	char why[256] = "";
	int err;

	err = uroce_qp_modify_check(qp->init.qp_type, cur, next, mask, why, sizeof(why));
	if (!err)
		err = uroce_qp_attr_check(qp->init.qp_type, cur, next, attr, mask, &lim, why,
					  sizeof(why));
	if (!err && (mask & IBV_QP_AV))
		err = set_av(qp, &attr->ah_attr, why, sizeof(why));
	if (err) {
		ur_dbg("QP 0x%06x: %s", qp->ibqp.qp_base.qp_num, why);
		return err;
	}

	if (mask & IBV_QP_AV)
		qp->attr.ah_attr = attr->ah_attr;
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->attr.qp_access_flags = attr->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = attr->port_num;
	if (mask & IBV_QP_QKEY)
		qp->attr.qkey = attr->qkey;
	if (mask & IBV_QP_PATH_MTU) {
		qp->attr.path_mtu = attr->path_mtu;
		qp->mtu = uroce_mtu_bytes(attr->path_mtu);
	}
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT) {
		qp->attr.retry_cnt = attr->retry_cnt;
		qp->req.retry_cnt = attr->retry_cnt;
	}
	if (mask & IBV_QP_RNR_RETRY) {
		qp->attr.rnr_retry = attr->rnr_retry;
		qp->req.rnr_retry = attr->rnr_retry;
	}
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->attr.min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_DEST_QPN) {
		qp->attr.dest_qp_num = attr->dest_qp_num;
		/* native addressing: QPN n lives on UDP port n >> 8;
		 * standard-port mode: 4791 (src/net/stdport.c) */
		qp->path.dport = uroce_qpn_dport(attr->dest_qp_num);
	}
	if (mask & IBV_QP_RQ_PSN) {
		qp->attr.rq_psn = attr->rq_psn;
		qp->resp.psn = attr->rq_psn & UR_PSN_MASK;
	}
	if (mask & IBV_QP_SQ_PSN) {
		qp->attr.sq_psn = attr->sq_psn;
		qp->req.psn = attr->sq_psn & UR_PSN_MASK;
		qp->req.una_psn = qp->req.psn;
		qp->req.max_psn = qp->req.psn;
	}
	if (mask & IBV_QP_PATH_MIG_STATE)
		qp->attr.path_mig_state = attr->path_mig_state;
	qp->path.sport = qp->ep->port;

	if (!(mask & IBV_QP_STATE) || next == cur)
		return 0;
	ur_dbg("QP 0x%06x: %s -> %s", qp->ibqp.qp_base.qp_num, uroce_qp_state_name(cur),
	       uroce_qp_state_name(next));
	/* An ACK an application poll deferred is owed for messages already
	 * completed: it goes out before the QP stops responding. */
	if ((next == IBV_QPS_RESET || next == IBV_QPS_ERR) && cur != IBV_QPS_RESET &&
	    cur != IBV_QPS_ERR)
		uroce_resp_flush_ack(qp);
	switch (next) {
	case IBV_QPS_RESET:
		reset_qp(qp);
		/* the program must not see this QP's old (flush) completions
		 * after a reset: they go, as with mlx5_cq_clean */
		if (qp->ibqp.qp_base.send_cq)
			uroce_cq_clean(to_ucq(qp->ibqp.qp_base.send_cq), qp->ibqp.qp_base.qp_num);
		if (qp->ibqp.qp_base.recv_cq &&
		    qp->ibqp.qp_base.recv_cq != qp->ibqp.qp_base.send_cq)
			uroce_cq_clean(to_ucq(qp->ibqp.qp_base.recv_cq), qp->ibqp.qp_base.qp_num);
		break;
	case IBV_QPS_RTR:
		free(qp->resp.res);
		qp->resp.nres = qp->attr.max_dest_rd_atomic ? qp->attr.max_dest_rd_atomic : 1;
		qp->resp.res = calloc(qp->resp.nres, sizeof(*qp->resp.res));
		if (!qp->resp.res)
			return ur_dbg("modify_qp: out of memory for %u READ/atomic resources",
				      qp->resp.nres),
			       ENOMEM;
		if (uroce_sack_init(qp))
			return ur_dbg("modify_qp: out of memory for selective repeat"), ENOMEM;
		uroce_piggy_init(qp);
		break;
	case IBV_QPS_ERR:
		uroce_qp_error(qp);
		return 0;
	default:
		break;
	}
	qp->attr.qp_state = next;
	qp->ibqp.qp_base.state = next;
	if (next == IBV_QPS_RTS)
		uroce_req_progress(qp);
	return 0;
}

UROCE_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct uroce_qp *qp;
	int err;

	if (!ibqp || !attr)
		return ur_dbg("modify_qp: qp and attr must not be NULL"), EINVAL;
	qp = to_uqp(ibqp);
	pthread_mutex_lock(&qp->lock);
	err = modify_qp(qp, attr, attr_mask);
	uroce_ep_flush(qp->ep); /* an owed ACK (modify_qp) */
	uroce_stats_qp_update(qp);
	pthread_mutex_unlock(&qp->lock);
	return err;
}

UROCE_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask,
			      struct ibv_qp_init_attr *init_attr)
{
	struct uroce_qp *qp;

	(void)attr_mask; /* everything is returned, as rdma-core providers do */
	if (!ibqp || !attr || !init_attr)
		return ur_dbg("query_qp: qp, attr and init_attr must not be NULL"), EINVAL;
	qp = to_uqp(ibqp);
	pthread_mutex_lock(&qp->lock);
	*attr = qp->attr;
	attr->cur_qp_state = qp->attr.qp_state;
	attr->cap = qp->init.cap;
	attr->sq_draining = 0;
	*init_attr = qp->init;
	pthread_mutex_unlock(&qp->lock);
	return 0;
}

/* ---- posting ---- */

static uint32_t sq_used(const struct uroce_sq *sq)
{
	return sq->head - sq->tail;
}

static int prepare_swqe(struct uroce_qp *qp, const struct ibv_send_wr *wr, struct uroce_swqe *w,
			uint8_t *inline_slot)
{
	uint64_t total = 0;

	/* UC carries SENDs and RDMA WRITEs only (IBTA Table 39) */
	if (qp->tr == UR_TR_UC &&
	    (wr->opcode == IBV_WR_RDMA_READ || wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	     wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD))
		return ur_dbg("post_send: UC QPs do not support RDMA READ or atomics"), EINVAL;
	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		/* IBTA 10.8.3.x: the local buffer of an atomic is 8 bytes */
		if (wr->num_sge != 1 || wr->sg_list[0].length != 8)
			return ur_dbg("post_send: an atomic needs one 8-byte SGE"), EINVAL;
		if (wr->send_flags & IBV_SEND_INLINE)
			return ur_dbg("post_send: IBV_SEND_INLINE is invalid for atomics"), EINVAL;
		break;
	case IBV_WR_SEND_WITH_INV:
		if (qp->tr == UR_TR_UC)
			return ur_dbg("post_send: SEND_WITH_INV needs RC or XRC"), EINVAL;
		break;
	case IBV_WR_BIND_MW:
		if (!wr->bind_mw.mw || !uroce_pd_same(wr->bind_mw.mw->pd, qp->ibqp.qp_base.pd))
			return ur_dbg("post_send: BIND_MW needs a window of the QP's PD"), EINVAL;
		break;
	case IBV_WR_LOCAL_INV:
		break;
	default:
		return ur_dbg("post_send: opcode %d not supported on RC yet", wr->opcode), EINVAL;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->sq.max_sge)
		return ur_dbg("post_send: num_sge %d > max_send_sge %u", wr->num_sge,
			      qp->sq.max_sge),
		       EINVAL;
	for (int i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if (total > UROCE_MAX_MSG)
		return ur_dbg("post_send: message of %llu bytes > max_msg_sz",
			      (unsigned long long)total),
		       EINVAL;

	memset(w, 0, offsetof(struct uroce_swqe, sg));
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->send_flags = wr->send_flags;
	w->signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	w->imm_data = wr->imm_data;
	if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	} else {
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
	}
	w->length = (uint32_t)total;
	w->xrc_srqn = qp->tr == UR_TR_XRC ? wr->qp_type.xrc.remote_srqn : 0;
	w->mw = NULL;
	if (wr->opcode == IBV_WR_BIND_MW) {
		w->mw = wr->bind_mw.mw;
		w->rkey = wr->bind_mw.rkey;
		w->bind = wr->bind_mw.bind_info;
		w->length = 0;
	} else if (wr->opcode == IBV_WR_LOCAL_INV) {
		w->imm_data = wr->invalidate_rkey;
		w->length = 0;
	}
	w->state = UROCE_WQE_POSTED;
	w->status = IBV_WC_SUCCESS;

	if (wr->send_flags & IBV_SEND_INLINE) {
		uint32_t off = 0;

		if (wr->opcode == IBV_WR_RDMA_READ)
			return ur_dbg("post_send: IBV_SEND_INLINE is invalid for RDMA READ"),
			       EINVAL;
		if (total > qp->sq.max_inline)
			return ur_dbg("post_send: %llu inline bytes > max_inline_data %u",
				      (unsigned long long)total, qp->sq.max_inline),
			       EINVAL;
		/* Inline data is copied now; the buffers need no lkey. */
		for (int i = 0; i < wr->num_sge; i++) {
			if (!wr->sg_list[i].length)
				continue; /* UCX posts empty ones with addr 0 */
			memcpy(inline_slot + off, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
		w->inline_data = inline_slot;
		w->num_sge = 0;
	} else {
		/* the memset above stops at sg[]: a slot last used by an
		 * inline WR would otherwise send that WR's bytes again */
		w->inline_data = NULL;
		w->num_sge = wr->num_sge;
		for (int i = 0; i < wr->num_sge; i++) {
			w->sg[i].addr = wr->sg_list[i].addr;
			w->sg[i].length = wr->sg_list[i].length;
			w->sg[i].lkey = wr->sg_list[i].lkey;
		}
	}
	return 0;
}

/* all_or_none: on an error, take back the WQEs this call queued (they are
 * not sent before the requester runs below, under the same lock). */
static int post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr,
		     bool all_or_none)
{
	struct uroce_qp *qp = to_uqp(ibqp);
	struct uroce_ep *ep;
	uint32_t head0;
	bool cork;
	int err = 0;

	uroce_app_posts(qp->ctx); /* (progress.c) */
	pthread_mutex_lock(&qp->lock);
	head0 = qp->sq.head;
	/* Autocork: while earlier packets of this QP are unacknowledged, what
	 * this post adds waits in the endpoint's GSO batch for more posts, the
	 * batch filling up, or the ACK it will get (every receive batch
	 * flushes the transmit batch), whichever comes first: a stream of small
	 * messages leaves 64 to a sendmsg instead of one.  A QP with nothing in
	 * flight - a ping-pong, the first post of a burst - sends at once. */
	cork = qp->req.inflight != 0;
	if (qp->attr.qp_state < IBV_QPS_RTS) {
		ur_dbg("post_send: QP 0x%06x is in %s; sends need RTS", ibqp->qp_num,
		       uroce_qp_state_name(qp->attr.qp_state));
		err = EINVAL;
		*bad_wr = wr;
		goto out;
	}
	if (ibqp->qp_type == IBV_QPT_XRC_RECV) {
		ur_dbg("post_send: an XRC_RECV QP only receives");
		err = EINVAL;
		*bad_wr = wr;
		goto out;
	}
	if (ibqp->qp_type == IBV_QPT_UD) {
		err = uroce_ud_post_send(qp, wr, bad_wr);
		goto out;
	}
	for (; wr; wr = wr->next) {
		uint32_t idx = qp->sq.head & (qp->sq.size - 1);

		if (sq_used(&qp->sq) >= qp->sq.max_wr) {
			ur_dbg("post_send: send queue full (%u WRs)", qp->sq.max_wr);
			err = ENOMEM;
			break;
		}
		err = prepare_swqe(
		    qp, wr, &qp->sq.wqe[idx],
		    qp->sq.inline_buf ? qp->sq.inline_buf + (size_t)idx * qp->sq.max_inline : NULL);
		if (err)
			break;
		qp->sq.head++;
	}
	if (err) {
		*bad_wr = wr;
		if (all_or_none)
			qp->sq.head = head0;
	}
	if (qp->attr.qp_state == IBV_QPS_ERR)
		uroce_qp_flush(qp);
	else
		uroce_req_run(qp);
out:
	ep = qp->ep;
	pthread_mutex_unlock(&qp->lock);
	/* What was posted leaves now, with the ACKs an application poll
	 * deferred behind it in the same batch (src/net/endpoint.c). */
	uroce_ep_send_owed_acks(ep, true);
	if (!cork)
		uroce_ep_flush(ep);
	return err;
}

int uroce_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	return post_send(ibqp, wr, bad_wr, false);
}

int uroce_post_send_all(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	return post_send(ibqp, wr, bad_wr, true);
}

int uroce_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct uroce_qp *qp = to_uqp(ibqp);
	int err = 0;

	pthread_mutex_lock(&qp->lock);
	if (qp->attr.qp_state == IBV_QPS_RESET) {
		ur_dbg("post_recv: QP 0x%06x is in RESET", ibqp->qp_num);
		err = EINVAL;
	} else if (ibqp->qp_type == IBV_QPT_XRC_SEND || ibqp->qp_type == IBV_QPT_XRC_RECV) {
		ur_dbg("post_recv: XRC QPs receive through XRC SRQs (ibv_post_srq_recv)");
		err = EINVAL;
	} else if (ibqp->srq) {
		ur_dbg("post_recv: QP 0x%06x uses an SRQ: post with ibv_post_srq_recv",
		       ibqp->qp_num);
		err = EINVAL;
	}
	if (err)
		*bad_wr = wr;
	else
		err = uroce_rq_post(&qp->rq, wr, bad_wr, "post_recv");
	if (qp->attr.qp_state == IBV_QPS_ERR)
		uroce_qp_flush(qp);
	pthread_mutex_unlock(&qp->lock);
	return err;
}

/* ---- errors ---- */

static void flush_wc(struct uroce_qp *qp, struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_opcode op)
{
	struct ibv_wc wc = {.wr_id = wr_id,
			    .status = IBV_WC_WR_FLUSH_ERR,
			    .opcode = op,
			    .qp_num = qp->ibqp.qp_base.qp_num};

	uroce_cq_push(to_ucq(cq), &wc, false);
}

/* IBTA 10.3.1 / C10-?: in the Error state every outstanding and newly
 * posted WR completes with "flushed in error". */
void uroce_qp_flush(struct uroce_qp *qp)
{
	while (qp->sq.tail != qp->sq.head) {
		struct uroce_swqe *w = &qp->sq.wqe[qp->sq.tail & (qp->sq.size - 1)];

		flush_wc(qp, qp->ibqp.qp_base.send_cq, w->wr_id, IBV_WC_SEND);
		qp->sq.tail++;
	}
	qp->sq.req = qp->sq.head;
	qp->req.deadline_ns = 0;
	qp->req.rnr_until_ns = 0;
	qp->req.inflight = 0;
	rc_sync_inflight(qp);
	if (qp->resp.have_rwqe) {
		struct ibv_cq *cq = qp->ibqp.qp_base.recv_cq;

		/* XRC_RECV: the CQ of the SRQ the WQE came from, if it still exists */
		if (qp->tr == UR_TR_XRC) {
			struct ibv_srq *s = uroce_xrc_srq_find(qp->ctx, qp->resp.xsrqn, qp->xrcd);

			cq = s ? to_usrq(s)->cq : NULL;
		}
		if (cq)
			flush_wc(qp, cq, qp->resp.rwqe.wr_id, IBV_WC_RECV);
		qp->resp.have_rwqe = false;
	}
	while (qp->rq.tail != qp->rq.head) {
		struct uroce_rwqe *w = &qp->rq.wqe[qp->rq.tail & (qp->rq.size - 1)];

		flush_wc(qp, qp->ibqp.qp_base.recv_cq, w->wr_id, IBV_WC_RECV);
		qp->rq.tail++;
	}
}

void uroce_qp_error(struct uroce_qp *qp)
{
	if (qp->attr.qp_state == IBV_QPS_ERR)
		return;
	ur_dbg("QP 0x%06x: %s -> ERR", qp->ibqp.qp_base.qp_num,
	       uroce_qp_state_name(qp->attr.qp_state));
	qp->attr.qp_state = IBV_QPS_ERR;
	qp->ibqp.qp_base.state = IBV_QPS_ERR;
	uroce_stats_qp_update(qp);
	uroce_qp_flush(qp);
	/* IBTA 11.6.3.1 (o11-5.2.?): a QP on an SRQ reports its last WQE */
	if (qp->ibqp.qp_base.srq)
		uroce_async_event(qp->ctx, IBV_EVENT_QP_LAST_WQE_REACHED, &qp->ibqp.qp_base);
}

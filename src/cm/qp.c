/* QPs on rdma_cm ids: creation and the transitions the handshake drives.
 *
 * As rdma-core's librdmacm: rdma_create_qp makes what the caller left out
 * (a PD per device, CQs with completion channels, so that rdma_verbs.h's
 * rdma_get_send_comp/rdma_get_recv_comp work), creates the QP and moves a
 * connected QP to INIT, a UD QP to RTS with the rdma_cm Q_Key.  The REQ/REP
 * parameters take it to RTR and RTS (cm_qp_to_rtr/rts), a disconnect to
 * ERROR.  Everything is ordinary ibv_modify_qp on uroce's libibverbs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"

#define CM_MIN_INLINE 64

static int qp_attr_init(struct cm_id *cid, struct ibv_qp_attr *a, int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_INIT;
	a->pkey_index = 0;
	a->port_num = 1;
	*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (cid->id.qp_type == IBV_QPT_UD) {
		a->qkey =
		    cid->id.ps == RDMA_PS_UDP || cid->id.ps == RDMA_PS_IPOIB ? RDMA_UDP_QKEY : 0;
		*mask |= IBV_QP_QKEY;
	} else {
		a->qp_access_flags =
		    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		*mask |= IBV_QP_ACCESS_FLAGS;
	}
	return 0;
}

static int qp_attr_rtr(struct cm_id *cid, struct ibv_qp_attr *a, int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	*mask = IBV_QP_STATE;
	if (cid->id.qp_type == IBV_QPT_UD)
		return 0;
	a->path_mtu = cid->mtu;
	a->dest_qp_num = cid->remote_qpn;
	/* IBTA 12.7.23, as the kernel's cm.c: the Starting PSN a REQ or REP
	 * carries is the PSN its sender expects to receive */
	a->rq_psn = cid->local_psn;
	cm_ah_attr(cid, &cid->remote_gid, &a->ah_attr);
	*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (cid->id.qp_type == IBV_QPT_RC || cid->id.qp_type == IBV_QPT_XRC_RECV ||
	    cid->id.qp_type == IBV_QPT_XRC_SEND) {
		a->max_dest_rd_atomic = cid->resp_res ? cid->resp_res : 1;
		a->min_rnr_timer = 12;
		*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	return 0;
}

static int qp_attr_rts(struct cm_id *cid, struct ibv_qp_attr *a, int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTS;
	a->sq_psn = cid->id.qp_type == IBV_QPT_UD ? cid->local_psn : cid->remote_psn;
	*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (cid->id.qp_type == IBV_QPT_RC || cid->id.qp_type == IBV_QPT_XRC_SEND ||
	    cid->id.qp_type == IBV_QPT_XRC_RECV) {
		a->timeout = cid->remote_ack_timeout ? cid->remote_ack_timeout : cid->ack_timeout;
		a->retry_cnt = cid->retry;
		a->rnr_retry = cid->remote_rnr_retry;
		a->max_rd_atomic = cid->init_depth ? cid->init_depth : 1;
		*mask |=
		    IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return 0;
}

static int modify(struct cm_id *cid, int (*fill)(struct cm_id *, struct ibv_qp_attr *, int *))
{
	struct ibv_qp_attr a;
	int mask, ret;

	if (!cid->id.qp)
		return 0;
	fill(cid, &a, &mask);
	ret = ibv_modify_qp(cid->id.qp, &a, mask);
	if (ret) {
		ur_dbg("rdma_cm: modify QP %u to state %d: %s", cid->id.qp->qp_num, a.qp_state,
		       strerror(ret));
		return -ret;
	}
	return 0;
}

int cm_qp_to_init(struct cm_id *cid, struct ibv_qp *qp)
{
	(void)qp;
	return modify(cid, qp_attr_init);
}

int cm_qp_to_rtr(struct cm_id *cid)
{
	return modify(cid, qp_attr_rtr);
}

int cm_qp_to_rts(struct cm_id *cid)
{
	return modify(cid, qp_attr_rts);
}

void cm_qp_to_err(struct cm_id *cid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

	if (cid->id.qp)
		ibv_modify_qp(cid->id.qp, &a, IBV_QP_STATE);
}

int cm_qp_ud_ready(struct cm_id *cid, struct ibv_qp *qp)
{
	int ret = modify(cid, qp_attr_init);

	(void)qp;
	if (!ret)
		ret = modify(cid, qp_attr_rtr);
	if (!ret)
		ret = modify(cid, qp_attr_rts);
	return ret;
}

UROCE_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
				   int *qp_attr_mask)
{
	struct cm_id *cid = to_cid(id);
	int ret = 0;

	if (!id || !qp_attr || !qp_attr_mask)
		return cm_fail(EINVAL, "rdma_init_qp_attr: NULL argument");
	pthread_mutex_lock(&cm.lock);
	switch (qp_attr->qp_state) {
	case IBV_QPS_INIT:
		qp_attr_init(cid, qp_attr, qp_attr_mask);
		break;
	case IBV_QPS_RTR:
		qp_attr_rtr(cid, qp_attr, qp_attr_mask);
		break;
	case IBV_QPS_RTS:
		qp_attr_rts(cid, qp_attr, qp_attr_mask);
		break;
	default:
		ret = EINVAL;
	}
	pthread_mutex_unlock(&cm.lock);
	return ret ? (errno = ret, -1) : 0;
}

/* A CQ with its own completion channel, as rdma-core's ucma_create_cqs. */
static struct ibv_cq *make_cq(struct ibv_context *ctx, int n, void *cq_ctx,
			      struct ibv_comp_channel **chan)
{
	struct ibv_cq *cq;

	*chan = ibv_create_comp_channel(ctx);
	cq = *chan ? ibv_create_cq(ctx, n, cq_ctx, *chan, 0) : NULL;
	return cq;
}

static void free_cq(struct ibv_cq **cq, struct ibv_comp_channel **chan)
{
	if (*cq)
		ibv_destroy_cq(*cq);
	if (*chan)
		ibv_destroy_comp_channel(*chan);
	*cq = NULL;
	*chan = NULL;
}

/* The CQs (and their channels) rdma_create_qp makes when the caller gave none. */
static int make_cqs(struct cm_id *cid, struct ibv_qp_init_attr_ex *a)
{
	struct rdma_cm_id *id = &cid->id;
	int n_send = (int)(a->cap.max_send_wr ? a->cap.max_send_wr : 1);
	int n_recv = (int)(a->cap.max_recv_wr ? a->cap.max_recv_wr : 1);

	if (!a->send_cq) {
		cid->own_cqs = true;
		id->send_cq = make_cq(id->verbs, n_send, id, &id->send_cq_channel);
		if (!id->send_cq)
			return -(errno ? errno : ENOMEM);
		a->send_cq = id->send_cq;
	}
	if (!a->recv_cq && !a->srq) {
		cid->own_cqs = true;
		id->recv_cq = make_cq(id->verbs, n_recv, id, &id->recv_cq_channel);
		if (!id->recv_cq)
			return -(errno ? errno : ENOMEM);
		a->recv_cq = id->recv_cq;
	} else if (!a->recv_cq && a->srq) {
		a->recv_cq = a->send_cq;
	}
	return 0;
}

static void free_cqs(struct cm_id *cid)
{
	struct rdma_cm_id *id = &cid->id;

	if (!cid->own_cqs)
		return;
	free_cq(&id->send_cq, &id->send_cq_channel);
	free_cq(&id->recv_cq, &id->recv_cq_channel);
	cid->own_cqs = false;
}

UROCE_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct cm_id *cid = to_cid(id);
	struct ibv_qp *qp;
	int ret;

	if (!id || !attr)
		return cm_fail(EINVAL, "rdma_create_qp_ex: NULL argument");
	if (!id->verbs)
		return cm_fail(EINVAL, "rdma_create_qp: the id has no device (resolve or "
				       "bind an address first)");
	if (id->qp)
		return cm_fail(EINVAL, "rdma_create_qp: the id has a QP already");
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		pthread_mutex_lock(&cm.lock);
		attr->pd = id->pd ? id->pd : cm_dev_pd(id->verbs);
		pthread_mutex_unlock(&cm.lock);
		if (!attr->pd)
			return errno = ENOMEM, -1;
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (attr->pd->context != id->verbs)
		return cm_fail(EINVAL, "rdma_create_qp: the PD is on another device");
	if (!attr->srq && id->srq)
		attr->srq = id->srq;
	if (!attr->qp_type) /* 0 is no QP type: the id's (rdma_create_ep) */
		attr->qp_type = id->qp_type;
	/* rxe and hardware round the inline size up to their WQE size; rdma-core's
	 * examples (rdma_xclient) post inline sends on a QP that asked for 0 */
	if (attr->cap.max_inline_data < CM_MIN_INLINE && attr->qp_type != IBV_QPT_XRC_RECV)
		attr->cap.max_inline_data = CM_MIN_INLINE;
	ret = make_cqs(cid, attr);
	if (ret)
		goto fail;
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		ret = -(errno ? errno : ENOMEM);
		goto fail;
	}
	id->qp = qp;
	id->qp_type = qp->qp_type;
	id->pd = attr->pd;
	pthread_mutex_lock(&cm.lock);
	if (qp->qp_type == IBV_QPT_UD)
		ret = cm_qp_ud_ready(cid, qp);
	else
		ret = cm_qp_to_init(cid, qp);
	/* a passive id whose connection failed is not ours to move further */
	pthread_mutex_unlock(&cm.lock);
	if (ret) {
		id->qp = NULL;
		ibv_destroy_qp(qp);
		goto fail;
	}
	return 0;
fail:
	free_cqs(cid);
	return errno = -ret, -1;
}

UROCE_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
				struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex a;
	int ret;

	if (!id || !qp_init_attr)
		return cm_fail(EINVAL, "rdma_create_qp: NULL argument");
	memset(&a, 0, sizeof(a));
	memcpy(&a, qp_init_attr, sizeof(*qp_init_attr));
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	ret = rdma_create_qp_ex(id, &a);
	if (!ret) {
		qp_init_attr->cap = a.cap;
		qp_init_attr->send_cq = a.send_cq;
		qp_init_attr->recv_cq = a.recv_cq;
	}
	return ret;
}

UROCE_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id || !id->qp)
		return;
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	free_cqs(to_cid(id));
}

UROCE_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct cm_id *cid = to_cid(id);
	struct ibv_srq *srq;

	if (!id || !attr)
		return cm_fail(EINVAL, "rdma_create_srq_ex: NULL argument");
	if (!id->verbs)
		return cm_fail(EINVAL, "rdma_create_srq: the id has no device");
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		pthread_mutex_lock(&cm.lock);
		attr->pd = id->pd ? id->pd : cm_dev_pd(id->verbs);
		pthread_mutex_unlock(&cm.lock);
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		attr->srq_type = IBV_SRQT_BASIC;
	attr->comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
	if (attr->srq_type == IBV_SRQT_XRC) {
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
			struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD |
								     IBV_XRCD_INIT_ATTR_OFLAGS,
							.fd = -1,
							.oflags = O_CREAT};

			cid->xrcd = ibv_open_xrcd(id->verbs, &xa);
			if (!cid->xrcd)
				return -1;
			attr->xrcd = cid->xrcd;
			attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD;
		}
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			struct ibv_qp_init_attr_ex tmp = {.cap.max_recv_wr = attr->attr.max_wr};

			tmp.send_cq = (void *)1; /* only the receive side */
			if (make_cqs(cid, &tmp))
				return -1;
			attr->cq = tmp.recv_cq;
			attr->comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
		}
	}
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq)
		return -1;
	id->srq = srq;
	id->pd = attr->pd;
	return 0;
}

UROCE_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex a;
	int ret;

	if (!id || !attr)
		return cm_fail(EINVAL, "rdma_create_srq: NULL argument");
	memset(&a, 0, sizeof(a));
	a.srq_context = attr->srq_context;
	a.attr = attr->attr;
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	a.pd = pd;
	a.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	ret = rdma_create_srq_ex(id, &a);
	if (!ret)
		attr->attr = a.attr;
	return ret;
}

UROCE_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	struct cm_id *cid = to_cid(id);

	if (!id || !id->srq)
		return;
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
	if (cid->xrcd) {
		ibv_close_xrcd(cid->xrcd);
		cid->xrcd = NULL;
	}
	free_cqs(cid);
}

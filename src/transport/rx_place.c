/* Receive placement: the payload of a packet that continues the message in
 * progress goes straight from the receive buffer into its destination, the
 * ICRC computed in the same pass (uroce_icrc_ok_copy), instead of one pass
 * to check the ICRC and another to copy (docs/design.md, "Send and receive
 * paths").
 *
 * Only where the landing place follows from what the responder has already
 * accepted: an RC or UC WRITE MIDDLE or LAST with the expected PSN, inside
 * the range the message's FIRST packet had its R_Key checked for; a SEND
 * MIDDLE or LAST with the expected PSN, into the receive WQE the message
 * holds.  A packet whose ICRC then fails has written nothing but bytes of
 * that range - the bytes the packet with this PSN writes, which the
 * requester must send again before the message can complete - and is
 * dropped as before, with no other effect.  Everything else (a FIRST or
 * ONLY, another PSN, a READ response, XRC, ODP memory) is checked first
 * and copied after, as before.
 */
#include "transport/rc.h"

/* The pieces of the destination of pkt, or 0 (mr_lock held for read). */
static int place_dst(struct uroce_qp *qp, const struct uroce_pkt *pkt, struct iovec *dst)
{
	struct ibv_pd *pd = qp->ibqp.qp_base.pd;
	struct uroce_mr *mr;

	if ((pkt->mask & URM_SEND) && qp->resp.in_send && qp->resp.have_rwqe)
		return uroce_sge_map(qp->ctx, pd, qp->resp.rwqe.sg, qp->resp.rwqe.num_sge,
				     qp->resp.rcv_offset, pkt->paylen, true, dst, UROCE_MAX_SGE);
	if (!(pkt->mask & URM_WRITE) || !qp->resp.in_write ||
	    (uint64_t)qp->resp.write_offset + pkt->paylen > qp->resp.write_len ||
	    ((pkt->mask & URM_END) &&
	     (uint64_t)qp->resp.write_offset + pkt->paylen != qp->resp.write_len))
		return 0;
	mr = uroce_mr_lookup(qp->ctx, qp->resp.write_rkey);
	if (!mr || mr->odp ||
	    (mr->kind == UROCE_KEY_MW2 && mr->mw_qpn != qp->ibqp.qp_base.qp_num) ||
	    !uroce_pd_same(mr->ibmr.pd, pd) || !(mr->access & IBV_ACCESS_REMOTE_WRITE))
		return 0;
	dst->iov_base = uroce_mr_ptr(mr, qp->resp.write_va + qp->resp.write_offset, pkt->paylen);
	dst->iov_len = pkt->paylen;
	return dst->iov_base ? 1 : 0;
}

int uroce_rx_place(struct uroce_qp *qp, struct uroce_pkt *pkt, const struct uroce_ipinfo *ip)
{
	enum ibv_qp_state qs = qp->attr.qp_state;
	struct iovec dst[UROCE_MAX_SGE];
	bool ok = false;
	int n;

	if ((qs != IBV_QPS_RTR && qs != IBV_QPS_RTS) || (pkt->opcode & UR_TR_MASK) != qp->tr ||
	    (qp->tr != UR_TR_RC && qp->tr != UR_TR_UC) || !(pkt->mask & URM_REQ) ||
	    (pkt->mask & URM_START) || !pkt->paylen || pkt->psn != qp->resp.psn ||
	    (qp->tr == UR_TR_UC && qp->resp.drop_msg) ||
	    ((pkt->mask & URM_END) ? pkt->paylen > qp->mtu : pkt->paylen != qp->mtu))
		return 0;
	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	n = place_dst(qp, pkt, dst);
	if (n)
		ok = uroce_icrc_ok_copy(pkt, ip, dst, n);
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	if (!n)
		return 0;
	pkt->placed = ok;
	if (ok)
		uroce_count(qp->ctx, rx_in_place, 1);
	return ok ? 1 : -1;
}

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
 * dropped as before, with no other effect.  So is an RC WRITE ONLY that
 * continues the WRITE before it (a split WRITE's next part, req.c: same
 * R_Key, the next address, the next PSN; write_next_dst).  Everything else
 * (a FIRST or another ONLY, another PSN, a READ response, XRC, ODP memory)
 * is checked first and copied after, as before.
 *
 * Selective repeat (sack.c): a request that arrives after a gap is held
 * until the gap is filled.  Where its landing place is known, its payload
 * goes there at once as well, and only its headers are kept
 * (docs/selective-repeat.md, "Out-of-order acceptance"):
 *   - a WRITE MIDDLE or LAST of the message in progress (its PSN within
 *     the packets the RETH's length leaves): at its offset, one MTU per
 *     PSN, in the range the FIRST's R_Key was checked for;
 *   - a SEND MIDDLE or LAST at the offset of its PSN in the receive WQE of
 *     the message in progress, when every PSN between the expected one
 *     and it is a SEND MIDDLE placed so (srun): one unknown PSN - the
 *     expected one - cannot be a LAST followed by a FIRST, so the packet
 *     is of this message; a second gap stops it.
 * Only the message in progress: every operation before it is done, and
 * its packets' bytes are disjoint; a later message's bytes may overlap an
 * earlier one's (ib_write_bw writes one buffer over and over), or a READ
 * between may read them, so placing it before the earlier one is complete
 * could leave the earlier one's bytes last or show the READ the later
 * ones.  A packet placed ahead whose ICRC fails has written only the bytes
 * the packet of its PSN writes, as above.  Not one held already (a duplicate
 * could otherwise overwrite what the held one placed).  Other held
 * requests are copied, their ICRC computed in the same pass.
 */
#include "transport/rc.h"

/* [va, va + len) of the MR rkey names as the destination of a remote
 * write through qp, or 0 (mr_lock held for read; ODP memory never). */
static int rkey_dst(struct uroce_qp *qp, uint32_t rkey, uint64_t va, uint32_t len,
		    struct iovec *dst)
{
	struct uroce_mr *mr = uroce_mr_lookup(qp->ctx, rkey);

	if (!mr || mr->odp ||
	    (mr->kind == UROCE_KEY_MW2 && mr->mw_qpn != qp->ibqp.qp_base.qp_num) ||
	    !uroce_pd_same(mr->ibmr.pd, qp->ibqp.qp_base.pd) ||
	    !(mr->access & IBV_ACCESS_REMOTE_WRITE))
		return 0;
	dst->iov_base = uroce_mr_ptr(mr, va, len);
	dst->iov_len = len;
	return dst->iov_base ? 1 : 0;
}

/* The destination of the payload of the WRITE packet pkt of the message in
 * progress at byte off of it, or 0 (mr_lock held for read): the length the
 * RETH gave, its R_Key checked at the FIRST, the MR looked up again. */
static int write_dst(struct uroce_qp *qp, const struct uroce_pkt *pkt, uint64_t off,
		     struct iovec *dst)
{
	if (off + pkt->paylen > qp->resp.write_len ||
	    ((pkt->mask & URM_END) && off + pkt->paylen != qp->resp.write_len))
		return 0;
	return rkey_dst(qp, qp->resp.write_rkey, qp->resp.write_va + off, pkt->paylen, dst);
}

/* A split WRITE (req.c: one WRITE ONLY per packet) between uroce peers: a
 * WRITE ONLY with the expected PSN, right after an RDMA WRITE's last packet
 * (no immediate, no other request between: resp.write_next), whose RETH
 * goes on where that one ended - the same R_Key, the next address, its own
 * length - is the next part of the same WRITE as long as the previous part
 * was not its last.  Its destination, the MR looked up and checked as the
 * responder's R_Key check does, is then known from what was accepted
 * before, and it is placed while checked like a WRITE MIDDLE.  A packet
 * that then fails its ICRC has written only into that range: the bytes
 * the next part of this WRITE writes, which the requester must send again
 * (no ACK, no completion of its WQE) - or, were the previous part the
 * WRITE's last, bytes that a corrupted packet could reach only with a
 * RETH damaged into exactly this R_Key and address (or, when the next
 * WRITE really goes on there, again the bytes it writes itself).  Or 0
 * (mr_lock held for read). */
static int write_next_dst(struct uroce_qp *qp, const struct uroce_pkt *pkt, struct iovec *dst)
{
	if ((pkt->mask & (URM_WRITE | URM_RETH | URM_END | URM_IMMDT)) !=
		(URM_WRITE | URM_RETH | URM_END) ||
	    (pkt->bth[4] & UR_BTH4_PULL) || qp->tr != UR_TR_RC || !qp->resp.write_next ||
	    qp->resp.write_next_psn != pkt->psn || qp->resp.in_send || qp->resp.in_write ||
	    !(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) ||
	    ur_reth_rkey(pkt) != qp->resp.write_rkey || ur_reth_len(pkt) != pkt->paylen ||
	    ur_reth_va(pkt) != qp->resp.write_va + qp->resp.write_len)
		return 0;
	return rkey_dst(qp, qp->resp.write_rkey, ur_reth_va(pkt), pkt->paylen, dst);
}

/* The pieces of the destination of pkt, or 0 (mr_lock held for read). */
static int place_dst(struct uroce_qp *qp, const struct uroce_pkt *pkt, struct iovec *dst)
{
	if ((pkt->mask & URM_SEND) && qp->resp.in_send && qp->resp.have_rwqe)
		return uroce_sge_map(qp->ctx, qp->ibqp.qp_base.pd, qp->resp.rwqe.sg,
				     qp->resp.rwqe.num_sge, qp->resp.rcv_offset, pkt->paylen, true,
				     dst, UROCE_MAX_SGE);
	if (!(pkt->mask & URM_WRITE) || !qp->resp.in_write)
		return 0;
	return write_dst(qp, pkt, qp->resp.write_offset, dst);
}

/* Is pkt, ahead of the PSN expected by d, a MIDDLE or LAST of the message
 * in progress whose offset is known (qp->lock only: no mr_lock for the
 * packets of later messages)?  A WRITE's when its PSN is within the
 * packets the RETH's length leaves; a SEND's when every PSN between is a
 * SEND MIDDLE placed so (srun).  (Full-MTU MIDDLEs: uroce_rx_place.) */
static bool ahead_known(const struct uroce_qp *qp, const struct uroce_pkt *pkt, uint32_t d)
{
	const struct uroce_sack *sk = qp->sk;
	bool run;

	if (pkt->mask & URM_START)
		return false;
	if (pkt->mask & URM_WRITE)
		return qp->resp.in_write &&
		       qp->resp.write_offset + (uint64_t)d * qp->mtu < qp->resp.write_len;
	if (!(pkt->mask & URM_SEND) || !qp->resp.in_send || !qp->resp.have_rwqe)
		return false;
	run = sk->srun_on && sk->srun_base == qp->resp.psn;
	return !(run && sk->srun_end) &&
	       pkt->psn == (((run ? sk->srun_hi : qp->resp.psn) + 1) & UR_PSN_MASK);
}

/* A request after a gap (sack.c): placed at once where it is known to land,
 * else held as a copy made while its ICRC is checked; 1, -1 or 0 as
 * uroce_rx_place. */
static int place_ahead(struct uroce_qp *qp, struct uroce_pkt *pkt, const struct uroce_ipinfo *ip)
{
	struct uroce_sack *sk = qp->sk;
	uint32_t d = (uint32_t)ur_psn_diff(pkt->psn, qp->resp.psn);
	struct iovec dst[UROCE_MAX_SGE];
	bool ok = false;
	int n = 0;

	if (!uroce_sack_may_hold(qp, pkt) || (pkt->bth[4] & UR_BTH4_PULL))
		return 0;
	if (ahead_known(qp, pkt, d)) {
		pthread_rwlock_rdlock(&qp->ctx->mr_lock);
		n = (pkt->mask & URM_WRITE)
			? write_dst(qp, pkt, qp->resp.write_offset + (uint64_t)d * qp->mtu, dst)
			: uroce_sge_map(qp->ctx, qp->ibqp.qp_base.pd, qp->resp.rwqe.sg,
					qp->resp.rwqe.num_sge, qp->resp.rcv_offset + d * qp->mtu,
					pkt->paylen, true, dst, UROCE_MAX_SGE);
		if (n)
			ok = uroce_icrc_ok_copy(pkt, ip, dst, n);
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
	}
	if (!n)
		return uroce_sack_hold_icrc(qp, pkt, ip);
	if (!ok)
		return -1;
	pkt->placed = true;
	uroce_count(qp->ctx, rx_in_place, 1);
	uroce_qp_count(qp, held_placed, 1);
	if (pkt->mask & URM_SEND) {
		sk->srun_on = true;
		sk->srun_base = qp->resp.psn;
		sk->srun_hi = pkt->psn;
		sk->srun_end = pkt->mask & URM_END;
	}
	return 1;
}

int uroce_rx_place(struct uroce_qp *qp, struct uroce_pkt *pkt, const struct uroce_ipinfo *ip)
{
	enum ibv_qp_state qs = qp->attr.qp_state;
	struct iovec dst[UROCE_MAX_SGE];
	bool ok = false;
	int n;

	if ((qs != IBV_QPS_RTR && qs != IBV_QPS_RTS) || (pkt->opcode & UR_TR_MASK) != qp->tr ||
	    (qp->tr != UR_TR_RC && qp->tr != UR_TR_UC) || !(pkt->mask & URM_REQ) || !pkt->paylen ||
	    (qp->tr == UR_TR_UC && qp->resp.drop_msg) ||
	    ((pkt->mask & URM_END) ? pkt->paylen > qp->mtu : pkt->paylen != qp->mtu))
		return 0;
	if (pkt->psn != qp->resp.psn)
		return qp->tr == UR_TR_RC && qp->sk ? place_ahead(qp, pkt, ip) : 0;
	if ((pkt->mask & URM_START) && !qp->resp.write_next)
		return 0;
	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	n = (pkt->mask & URM_START) ? write_next_dst(qp, pkt, dst) : place_dst(qp, pkt, dst);
	if (n)
		ok = uroce_icrc_ok_copy(pkt, ip, dst, n);
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	if (!n)
		return 0;
	pkt->placed = ok;
	/* (rcvd_in_place and rcvd_write_next: counted by the caller with the
	 * datagram's other packets, endpoint.c rx_counted) */
	return ok ? 1 : -1;
}

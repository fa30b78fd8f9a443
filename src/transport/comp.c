/* RC completer: processes what the responder sends back - ACKs, NAKs,
 * RNR NAKs and READ responses (IBTA 9.7.5.2, 9.9) - and completes send WQEs
 * strictly in order (C10-?: completions of one WQ are returned in order).
 */
#include <errno.h>
#include <string.h>

#include "net/shm.h"
#include "transport/rc.h"

enum comp_state {
	COMPST_CHECK_PSN,
	COMPST_ACK,
	COMPST_ACK_AHEAD,
	COMPST_READ,
	COMPST_ATOMIC,
	COMPST_RNR,
	COMPST_NAK_SEQ,
	COMPST_NAK_FATAL,
	COMPST_DROP,
};

static const char *const comp_state_name[] = {
    "check-psn", "ack",		"ack-ahead", "read-response", "atomic-ack",
    "rnr-nak",	 "nak-psn-seq", "nak-fatal", "drop",
};

static enum ibv_wc_opcode wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	default:
		return IBV_WC_SEND;
	}
}

void uroce_comp_retire(struct uroce_qp *qp)
{
	while (qp->sq.tail != qp->sq.req) {
		struct uroce_swqe *w = swqe(qp, qp->sq.tail);
		bool err;

		if (w->state != UROCE_WQE_DONE)
			break;
		err = w->status != IBV_WC_SUCCESS;
		if (w->signaled || err) {
			struct ibv_wc wc = {.wr_id = w->wr_id,
					    .status = w->status,
					    .opcode = wc_opcode(w->opcode),
					    .qp_num = qp->ibqp.qp_base.qp_num};

			if (w->opcode == IBV_WR_RDMA_READ)
				wc.byte_len = w->length;
			uroce_cq_push(to_ucq(qp->ibqp.qp_base.send_cq), &wc, false);
		}
		qp->sq.tail++;
		if (err) {
			uroce_stats_wc_err(qp, w->status);
			uroce_qp_error(qp);
			return;
		}
	}
}

/* The responder acknowledged every PSN up to and including psn, past
 * una_psn: una moves past it. */
static void una_advance(struct uroce_qp *qp, uint32_t psn)
{
	uint32_t old = qp->req.una_psn;

	if (qp->sk)
		uroce_cc_acked(qp, (uint32_t)ur_psn_diff(psn + 1, qp->req.una_psn));
	uroce_req_rtt(qp, psn);
	qp->req.una_psn = (psn + 1) & UR_PSN_MASK;
	if (qp->sk)
		uroce_sack_acked(qp, old);
	qp->req.need_retry = false;
	/* IBTA C9-?: forward progress resets the retry counters */
	qp->req.retry_cnt = qp->attr.retry_cnt;
	qp->req.rnr_retry = qp->attr.rnr_retry;
}

/* The responder acknowledged every PSN up to and including psn.  Returns
 * false when a READ (or atomic) whose responses have not all arrived is
 * covered: an implied NAK (IBTA 9.7.5.1.1) - its responses were lost. */
static bool ack_upto(struct uroce_qp *qp, uint32_t psn)
{
	bool ok = true;
	uint32_t i;

	for (i = qp->sq.tail; i != qp->sq.req; i++) {
		struct uroce_swqe *w = swqe(qp, i);

		if (w->state == UROCE_WQE_DONE && w->status == IBV_WC_SUCCESS)
			continue; /* a local operation, executed in order */
		if (w->state != UROCE_WQE_SENT || ur_psn_diff(w->last_psn, psn) > 0)
			break;
		if (swqe_is_rd(w)) {
			/* Its responses were lost: una must stay at the READ
			 * (or where its responses stopped) so go-back-N asks
			 * for it again (9.7.5.1.1). */
			ok = false;
			if (ur_psn_diff(psn, w->first_psn) >= 0)
				psn = (w->first_psn - 1) & UR_PSN_MASK;
			break;
		}
		w->state = UROCE_WQE_DONE;
	}
	if (i == qp->sq.req && qp->req.offset && i != qp->sq.head && swqe_is_rd(swqe(qp, i))) {
		/* The same for a READ still being asked for chunk by chunk:
		 * nothing from its first missing response on is acknowledged. */
		uint32_t first = swqe(qp, i)->first_psn;
		uint32_t miss = ur_psn_diff(qp->req.una_psn, first) > 0 ? qp->req.una_psn : first;

		if (ur_psn_diff(psn, miss) >= 0) {
			ok = false;
			psn = (miss - 1) & UR_PSN_MASK;
		}
	}
	if (ur_psn_diff(psn + 1, qp->req.una_psn) > 0)
		una_advance(qp, psn);
	{
		int32_t inflight = ur_psn_diff(qp->req.psn, qp->req.una_psn);

		qp->req.inflight = inflight > 0 ? (uint32_t)inflight : 0;
	}
	uroce_comp_retire(qp);
	if (qp->attr.qp_state != IBV_QPS_ERR) {
		qp->req.deadline_ns = 0;
		uroce_req_arm(qp);
	}
	return ok;
}

/* Go back to the oldest unacknowledged PSN, once per stall.  With
 * selective repeat only what is there is asked for again - the READ (or
 * atomic) whose responses stopped, from the first missing one - not what
 * follows it. */
static void retry_from_una(struct uroce_qp *qp)
{
	if (qp->req.need_retry && qp->req.retry_psn == qp->req.una_psn)
		return;
	qp->req.need_retry = true;
	qp->req.retry_psn = qp->req.una_psn;
	if (rc_sack_req(qp)) {
		if (uroce_req_resend(qp, qp->req.una_psn)) {
			uroce_sd_resend(qp, qp->req.una_psn, UR_SD_UNA);
			uroce_qp_count(qp, retransmits, 1);
		}
		return;
	}
	uroce_req_go_back(qp, qp->req.una_psn);
}

/* A selective ACK: an ACK of its PSN (as check_psn() and COMPST_ACK /
 * COMPST_ACK_AHEAD take one), then the resends its map calls for. */
static void rcv_sack(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	if (!rc_sack_req(qp) || ur_psn_diff(pkt->psn, qp->req.max_psn) >= 0) {
		uroce_qp_count(qp, duplicates, 1);
		return;
	}
	uroce_qp_count(qp, sacks_rx, 1);
	if (ur_psn_diff(pkt->psn, qp->req.psn) >= 0)
		ack_upto(qp, (qp->req.psn - 1) & UR_PSN_MASK);
	else if (!ack_upto(qp, pkt->psn))
		retry_from_una(qp);
	if (qp->attr.qp_state != IBV_QPS_ERR)
		uroce_sack_rcv(qp, pkt);
}

/* The SQ index of the WQE that psn belongs to, among those sent. */
bool uroce_wqe_idx_for_psn(struct uroce_qp *qp, uint32_t psn, uint32_t *idx)
{
	for (uint32_t i = qp->sq.tail; i != qp->sq.req; i++) {
		struct uroce_swqe *w = swqe(qp, i);

		if (w->state == UROCE_WQE_SENT && ur_psn_diff(psn, w->first_psn) >= 0 &&
		    ur_psn_diff(psn, w->last_psn) <= 0) {
			*idx = i;
			return true;
		}
	}
	/* the WQE being sent: a READ asked for chunk by chunk, or a message
	 * longer than the window */
	if (qp->sq.req != qp->sq.head && qp->req.offset) {
		struct uroce_swqe *w = swqe(qp, qp->sq.req);

		if (ur_psn_diff(psn, w->first_psn) >= 0 && ur_psn_diff(psn, qp->req.psn) < 0) {
			*idx = qp->sq.req;
			return true;
		}
	}
	return false;
}

static struct uroce_swqe *wqe_for_psn(struct uroce_qp *qp, uint32_t psn)
{
	uint32_t i;

	return uroce_wqe_idx_for_psn(qp, psn, &i) ? swqe(qp, i) : NULL;
}

/* The request at psn failed at the responder (a NAK, or a response that
 * does not fit): what precedes it is acknowledged, it completes with st. */
static void fail_at(struct uroce_qp *qp, uint32_t psn, enum ibv_wc_status st)
{
	uint32_t i;

	ack_upto(qp, (psn - 1) & UR_PSN_MASK);
	if (qp->attr.qp_state == IBV_QPS_ERR)
		return;
	if (!uroce_wqe_idx_for_psn(qp, psn, &i)) {
		if (qp->sq.tail == qp->sq.req) {
			uroce_qp_error(qp);
			return;
		}
		i = qp->sq.tail;
	}
	uroce_req_fail_wqe(qp, i, st);
}

static enum comp_state check_psn(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	/* IBTA 9.7.5.1.1: an ACK is valid from the oldest unacknowledged PSN
	 * to the most recent one sent; past that it is bogus.  After a
	 * go-back the most recent one sent is max_psn - 1, not req.psn - 1:
	 * the responder answers each resent duplicate with an ACK of the
	 * latest PSN it has (resp.c duplicate(), as rxe does), ahead of what is
	 * being resent.  Dropping it would resend the same window, never
	 * acknowledged, until the retries ran out. */
	if (ur_psn_diff(pkt->psn, qp->req.max_psn) >= 0)
		return COMPST_DROP;
	if (ur_psn_diff(pkt->psn, qp->req.psn) >= 0) {
		/* A READ response or atomic ACK there answers a request not
		 * outstanding now; a NAK there is older than the go-back that
		 * will resend past it.  Only an ACK says something new. */
		if ((pkt->opcode & ~UR_TR_MASK) == UR_OPC_ACK &&
		    (ur_aeth_syn(pkt) & UR_AETH_TYPE_MASK) == UR_AETH_ACK)
			return COMPST_ACK_AHEAD;
		return COMPST_DROP;
	}
	if (pkt->mask & URM_READ)
		return COMPST_READ;
	if (pkt->mask & URM_ATOMIC)
		return COMPST_ATOMIC;
	if ((pkt->opcode & ~UR_TR_MASK) != UR_OPC_ACK)
		return COMPST_DROP;
	/* IBTA 9.7.5.1.1 / 9.7.5.2: a NAK for a PSN older than the oldest
	 * unacknowledged one is a duplicate or a late (reordered) response;
	 * acting on a late PSN sequence NAK would rewind the requester into
	 * completed messages.  Such an ACK acknowledges nothing new either,
	 * but shows the responder alive and working through its backlog:
	 * ack_upto() only restarts the retransmission timer for it. */
	if ((ur_aeth_syn(pkt) & UR_AETH_TYPE_MASK) == UR_AETH_ACK)
		return COMPST_ACK;
	if (ur_psn_diff(pkt->psn, qp->req.una_psn) < 0)
		return COMPST_DROP;
	switch (ur_aeth_syn(pkt) & UR_AETH_TYPE_MASK) {
	case UR_AETH_RNR_NAK:
		return COMPST_RNR;
	case UR_AETH_NAK:
		return (ur_aeth_syn(pkt) & 0x1f) == UR_NAK_PSN_SEQ_ERR ? COMPST_NAK_SEQ
								       : COMPST_NAK_FATAL;
	default:
		return COMPST_DROP;
	}
}

/* The first response of a READ (or an atomic's ACK) acknowledges every
 * request before it (IBTA 9.7.5.1.2): the responder executes requests in
 * order, and its coalesced ACK for them (one per receive batch, resp.c) can
 * arrive after this response.  True when psn is then the oldest
 * unacknowledged PSN, as an in-sequence response's is. */
static bool implied_ack(struct uroce_qp *qp, uint32_t psn)
{
	struct uroce_swqe *w = wqe_for_psn(qp, psn);

	if (!w || !swqe_is_rd(w) || psn != w->first_psn)
		return false;
	ack_upto(qp, (psn - 1) & UR_PSN_MASK);
	return qp->attr.qp_state != IBV_QPS_ERR && psn == qp->req.una_psn;
}

/* A READ response or an atomic ACK: the WQE it answers when it is the next
 * one expected; NULL when the packet has been dealt with (a duplicate, a
 * gap that makes us ask again, or a response to the wrong kind of WQE). */
static struct uroce_swqe *resp_wqe(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_swqe *w;

	if (ur_psn_diff(pkt->psn, qp->req.una_psn) < 0) {
		/* A duplicate, from a request asked for again: nothing new, but
		 * while a backlog of these drains, the fresh responses queue
		 * behind it - restart the timer as for a stale ACK rather
		 * than ask once more (and add to the backlog). */
		uroce_qp_count(qp, duplicates, 1);
		qp->req.deadline_ns = 0;
		uroce_req_arm(qp);
		return NULL;
	}
	if (pkt->psn != qp->req.una_psn && !implied_ack(qp, pkt->psn)) {
		if (qp->attr.qp_state == IBV_QPS_ERR)
			return NULL;
		/* a response is missing: ask again from the first gap */
		uroce_qp_count(qp, out_of_seq, 1);
		retry_from_una(qp);
		uroce_req_run(qp); /* sent with the receive batch */
		return NULL;
	}
	w = wqe_for_psn(qp, pkt->psn);
	if (!w || !swqe_is_rd(w) || (w->opcode == IBV_WR_RDMA_READ) != !!(pkt->mask & URM_READ)) {
		fail_at(qp, pkt->psn, IBV_WC_BAD_RESP_ERR);
		return NULL;
	}
	/* a response acknowledges everything before its request (9.7.5.1.2) */
	if (pkt->psn == w->first_psn)
		ack_upto(qp, (w->first_psn - 1) & UR_PSN_MASK);
	return w;
}

/* The response at psn, a LAST or ONLY, ends the request (READ chunk,
 * atomic) it answers - with selective repeat only at the end of a chunk:
 * a request for a missing part of one (req.c) ends inside it. */
static bool read_req_end(const struct uroce_qp *qp, const struct uroce_swqe *w, uint32_t psn)
{
	return !rc_sack_req(qp) || w->opcode != IBV_WR_RDMA_READ || psn == w->last_psn ||
	       (uint32_t)(ur_psn_diff(psn, w->first_psn) + 1) % rc_read_chunk(qp) == 0;
}

/* The response at psn (end: a LAST or ONLY) was placed: advance and, on
 * its WQE's last, complete. */
static void resp_placed(struct uroce_qp *qp, uint32_t psn, bool end, struct uroce_swqe *w)
{
	uroce_req_rtt(qp, psn);
	if (qp->sk)
		uroce_cc_acked(qp, 1);
	qp->req.una_psn = (psn + 1) & UR_PSN_MASK;
	if (qp->sk)
		uroce_sack_acked(qp, psn);
	qp->req.need_retry = false;
	qp->req.retry_cnt = qp->attr.retry_cnt;
	if (qp->req.inflight)
		qp->req.inflight--;
	if (end && qp->req.rd_inflight && read_req_end(qp, w, psn))
		qp->req.rd_inflight--;
	if (psn == w->last_psn) {
		w->state = UROCE_WQE_DONE;
		uroce_comp_retire(qp);
	}
	qp->req.deadline_ns = 0;
	uroce_req_arm(qp);
}

/* Where the READ response pkt goes in w, or -1 when it does not fit.
 * Every response but the READ's last carries a full MTU; a chunk's last
 * (RESPONSE_LAST/ONLY) may end before the message does. */
static int64_t read_resp_off(const struct uroce_qp *qp, const struct uroce_swqe *w,
			     const struct uroce_pkt *pkt)
{
	uint32_t off = (uint32_t)ur_psn_diff(pkt->psn, w->first_psn) * qp->mtu;

	if (off + pkt->paylen > w->length || (pkt->psn != w->last_psn && pkt->paylen != qp->mtu) ||
	    (pkt->psn == w->last_psn && (!(pkt->mask & URM_END) || off + pkt->paylen != w->length)))
		return -1;
	return off;
}

static int read_resp_copy(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t off,
			  const struct uroce_pkt *pkt, enum ibv_wc_status *st)
{
	int r;

	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	r = uroce_sge_copy(qp->ctx, qp->ibqp.qp_base.pd, w->sg, w->num_sge, off, pkt->payload,
			   pkt->paylen, true, st);
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	return r;
}

/* Selective repeat: a READ response past a gap is placed at its offset
 * now and remembered (sk->rsp), and only the missing part is asked for
 * again (req.c); una moves over it once the gap is filled
 * (read_resp_drain).  False: the in-order path deals with it. */
static bool read_resp_ahead(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	int32_t d = ur_psn_diff(pkt->psn, qp->req.una_psn);
	enum ibv_wc_status st;
	struct uroce_swqe *w;
	int64_t off;

	if (d <= 0 || d >= (int32_t)UR_SACK_WIN || implied_ack(qp, pkt->psn) ||
	    qp->attr.qp_state == IBV_QPS_ERR)
		return false;
	w = wqe_for_psn(qp, pkt->psn);
	if (!w || w->opcode != IBV_WR_RDMA_READ || (off = read_resp_off(qp, w, pkt)) < 0)
		return false;
	if (!rc_sack_placed(qp, pkt->psn)) {
		struct uroce_sack *sk = qp->sk;
		uint32_t k = pkt->psn % UR_SACK_WIN;

		if (read_resp_copy(qp, w, (uint32_t)off, pkt, &st))
			return false; /* fails in order, when una gets there */
		sk->rsp[k].psn = pkt->psn;
		sk->rsp[k].valid = true;
		sk->rsp[k].end = !!(pkt->mask & URM_END);
		/* A chunk's last response: the responder has answered that
		 * request, and answers a request for a part missing before it
		 * from memory (9.7.5.1.1), so the request no longer counts
		 * against max_rd_atomic - the next READs go out while the gap
		 * is repaired, instead of the pipeline stopping behind it. */
		sk->rsp[k].rd_done =
		    sk->rsp[k].end && qp->req.rd_inflight && read_req_end(qp, w, pkt->psn);
		if (sk->rsp[k].rd_done)
			qp->req.rd_inflight--;
		sk->nplaced++;
		uroce_sack_read_gaps(qp, w, pkt->psn);
		if (!sk->rsp_hi_valid || ur_psn_diff(pkt->psn, sk->rsp_hi) > 0)
			sk->rsp_hi = pkt->psn;
		sk->rsp_hi_valid = true;
		uroce_qp_count(qp, out_of_seq, 1);
	} else {
		uroce_qp_count(qp, duplicates, 1);
	}
	/* once per una - and again when a response to a request sent after
	 * una was last asked for arrives without it (RACK): the request or
	 * its answer was lost again */
	if (qp->req.need_retry && qp->req.retry_psn == qp->req.una_psn &&
	    uroce_sack_read_lost(qp, w, pkt->psn))
		qp->req.need_retry = false;
	retry_from_una(qp);
	uroce_sack_read_tail(qp, pkt->psn);
	return true;
}

/* una reached responses placed ahead of it: move over them.  If it stops
 * at another gap with responses placed after it, that one is lost too (a
 * later response arrived): ask for it now, not at the timeout. */
static void read_resp_drain(struct uroce_qp *qp)
{
	uint32_t una = qp->req.una_psn;

	while (qp->attr.qp_state != IBV_QPS_ERR && rc_sack_placed(qp, qp->req.una_psn)) {
		uint32_t psn = qp->req.una_psn;
		struct uroce_swqe *w = wqe_for_psn(qp, psn);

		qp->sk->rsp[psn % UR_SACK_WIN].valid = false;
		if (qp->sk->nplaced)
			qp->sk->nplaced--;
		if (!w || w->opcode != IBV_WR_RDMA_READ)
			return;
		/* (a chunk's last placed ahead ended its request then) */
		resp_placed(qp, psn,
			    qp->sk->rsp[psn % UR_SACK_WIN].end &&
				!qp->sk->rsp[psn % UR_SACK_WIN].rd_done,
			    w);
	}
	if (qp->attr.qp_state == IBV_QPS_ERR || qp->req.una_psn == una || !qp->sk->rsp_hi_valid ||
	    ur_psn_diff(qp->sk->rsp_hi, qp->req.una_psn) <= 0)
		return;
	if (uroce_sack_read_pending(qp)) {
		/* asked for already (uroce_sack_read_gaps): once more only if
		 * a later answer shows it lost (read_resp_ahead) */
		qp->req.need_retry = true;
		qp->req.retry_psn = qp->req.una_psn;
		return;
	}
	retry_from_una(qp);
}

/* A pulled READ response (pull.c): one record standing for the chunk's
 * responses from psn on, naming the responder's memory that it validated;
 * we check it against the WQE and copy straight into its SGEs.  A pull
 * that fails asks for the responses again, through the ring. */
static void do_read_pull(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct iovec src[UROCE_MAX_SGE];
	struct uroce_swqe *w = resp_wqe(qp, pkt);
	uint32_t off, npkts, last;
	uint64_t total;
	int nsrc, r;

	if (!w)
		return;
	nsrc = uroce_pull_desc_get(qp, pkt, src, &npkts, &total);
	off = (uint32_t)ur_psn_diff(pkt->psn, w->first_psn) * qp->mtu;
	last = (pkt->psn + npkts - 1) & UR_PSN_MASK;
	/* full MTUs up to the chunk's end, or to the message's */
	if (nsrc < 0 || w->opcode != IBV_WR_RDMA_READ || off + total > w->length ||
	    ur_psn_diff(last, w->last_psn) > 0 ||
	    (last == w->last_psn ? off + total != w->length : total != (uint64_t)npkts * qp->mtu)) {
		fail_at(qp, pkt->psn, IBV_WC_BAD_RESP_ERR);
		return;
	}
	r = uroce_pull_to_sge(qp, qp->ibqp.qp_base.pd, w->sg, w->num_sge, off, pkt, src, nsrc,
			      total);
	if (r) {
		/* (a local error shows when the responses come by the ring) */
		qp->req.pull_off = true;
		retry_from_una(qp);
		uroce_req_run(qp);
		return;
	}
	/* (a chunk's responses may come as several records, resp.c: only
	 * the chunk's last ends its request) */
	for (uint32_t i = 0; i < npkts && qp->attr.qp_state != IBV_QPS_ERR; i++) {
		uint32_t psn = (pkt->psn + i) & UR_PSN_MASK,
			 nth = (uint32_t)ur_psn_diff(psn, w->first_psn) + 1;

		resp_placed(qp, psn,
			    i == npkts - 1 && (psn == w->last_psn || !(nth % rc_read_chunk(qp))),
			    w);
	}
}

static void do_read_resp(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_swqe *w;
	enum ibv_wc_status st;
	int64_t off;

	if (pkt->bth[4] & UR_BTH4_PULL) {
		if (pkt->pull.pid) /* else not through a link we pull from: dropped */
			do_read_pull(qp, pkt);
		return;
	}
	if (rc_sack_req(qp) && read_resp_ahead(qp, pkt))
		return;
	w = resp_wqe(qp, pkt);
	if (!w)
		return;
	off = read_resp_off(qp, w, pkt);
	if (off < 0) {
		fail_at(qp, pkt->psn, IBV_WC_BAD_RESP_ERR);
		return;
	}
	if (read_resp_copy(qp, w, (uint32_t)off, pkt, &st)) {
		fail_at(qp, pkt->psn, st);
		return;
	}
	resp_placed(qp, pkt->psn, !!(pkt->mask & URM_END), w);
	if (rc_sack_req(qp))
		read_resp_drain(qp);
}

/* ATOMIC ACKNOWLEDGE (IBTA 9.5.2): the original remote value goes to the
 * local 8-byte buffer, in host order. */
static void do_atomic_ack(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_swqe *w = resp_wqe(qp, pkt);
	enum ibv_wc_status st;
	uint64_t orig;
	int r;

	if (!w)
		return;
	orig = ur_atmack_orig(pkt);
	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	r = uroce_sge_copy(qp->ctx, qp->ibqp.qp_base.pd, w->sg, w->num_sge, 0, &orig, sizeof(orig),
			   true, &st);
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	if (r) {
		fail_at(qp, pkt->psn, st);
		return;
	}
	resp_placed(qp, pkt->psn, !!(pkt->mask & URM_END), w);
}

/* The common case of an ACK (docs/latency.md, "Session 20"): on a QP in
 * RTS it acknowledges exactly the one WQE outstanding - a SEND or WRITE,
 * all of it sent, nothing queued behind it - and with it every PSN sent.
 * That is check_psn()'s COMPST_ACK (9.7.5.1.1: from the oldest
 * unacknowledged PSN to the most recent one sent), and ack_upto()
 * completes that WQE alone: no READ or atomic whose responses it would
 * show lost (9.7.5.1.1), no WQE being sent in parts.  uroce_req_run()
 * after it has nothing to send (no RNR back-off pending either). */
static bool ack_one_fits(struct uroce_qp *qp, uint32_t psn)
{
	struct uroce_swqe *w;

	if (!(uroce_rc_fast() & UROCE_RC_FAST_ACK) || qp->attr.qp_state != IBV_QPS_RTS ||
	    qp->sq.tail + 1 != qp->sq.req || qp->sq.req != qp->sq.head || qp->req.offset ||
	    qp->req.rnr_until_ns || (qp->sk && qp->sk->diag) ||
	    psn != ((qp->req.psn - 1) & UR_PSN_MASK) || ur_psn_diff(psn, qp->req.max_psn) >= 0)
		return false;
	w = swqe(qp, qp->sq.tail);
	return w->state == UROCE_WQE_SENT && !swqe_is_rd(w) && w->last_psn == psn &&
	       w->first_psn == qp->req.una_psn;
}

/* ack_upto(qp, psn) and uroce_req_run() for it, ack_one_fits() said so. */
static void ack_one(struct uroce_qp *qp, uint32_t psn)
{
	ur_trace("QP 0x%06x rx ack psn %u: fast", qp->ibqp.qp_base.qp_num, psn);
	uroce_count(qp->ctx, rx_fast_acks, 1);
	uroce_qp_count(qp, acks_rx, 1);
	swqe(qp, qp->sq.tail)->state = UROCE_WQE_DONE;
	una_advance(qp, psn);
	qp->req.inflight = 0;
	uroce_comp_retire(qp);
	if (qp->attr.qp_state != IBV_QPS_ERR)
		qp->req.deadline_ns = 0; /* uroce_req_arm: nothing in flight */
	rc_sync_inflight(qp);
}

static void rcv_response(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	enum comp_state s;
	uint8_t syn;

	if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_SQD) {
		uroce_qp_count(qp, rx_drop_state, 1);
		return;
	}
	uroce_sack_rx(qp, pkt);
	if (qp->piggy && (pkt->bth[4] & UR_BTH4_PIGGY_OK))
		qp->piggy_peer = true; /* it takes our ACKs on requests (req.c) */
	if (pkt->bth[4] & UR_BTH4_NOPULL)
		qp->req.pull_off = true; /* the responder failed a pull (pull.c) */
	if (pkt->opcode == UR_OPC_SACK && qp->sk) {
		rcv_sack(qp, pkt);
		uroce_req_run(qp);
		return;
	}
	/* responses come in the QP's own transport class (RC or XRC); a UC
	 * requester expects none */
	if ((pkt->opcode & UR_TR_MASK) != qp->tr || qp->tr == UR_TR_UC) {
		uroce_qp_count(qp, rx_drop_state, 1);
		return;
	}
	if (pkt->opcode == (UR_OPC_ACK | UR_TR_RC) &&
	    (ur_aeth_syn(pkt) & UR_AETH_TYPE_MASK) == UR_AETH_ACK && ack_one_fits(qp, pkt->psn)) {
		ack_one(qp, pkt->psn);
		return;
	}
	s = check_psn(qp, pkt);
	ur_trace("QP 0x%06x rx %s psn %u: %s", qp->ibqp.qp_base.qp_num,
		 uroce_opcode_name(pkt->opcode), pkt->psn, comp_state_name[s]);
	syn = (pkt->mask & URM_AETH) ? ur_aeth_syn(pkt) : 0;
	switch (s) {
	case COMPST_ACK:
		uroce_qp_count(qp, acks_rx, 1);
		if (!ack_upto(qp, pkt->psn))
			retry_from_una(qp);
		break;
	case COMPST_ACK_AHEAD:
		/* Everything resent so far arrived.  A READ or atomic among it
		 * keeps una_psn at itself (ack_upto) but is not taken as lost:
		 * the ACK answers a duplicate that may have been resent before
		 * it, so its responses may still be on the way - the timer
		 * asks again if they are not. */
		uroce_qp_count(qp, acks_rx, 1);
		ack_upto(qp, (qp->req.psn - 1) & UR_PSN_MASK);
		break;
	case COMPST_READ:
		do_read_resp(qp, pkt);
		break;
	case COMPST_ATOMIC:
		do_atomic_ack(qp, pkt);
		break;
	case COMPST_RNR:
		/* IBTA 9.7.5.2.8: wait the advertised time, then resend from
		 * the NAKed PSN; rnr_retry 7 retries forever (C9-151.1) */
		uroce_qp_count(qp, rnr_naks_rx, 1);
		ack_upto(qp, (pkt->psn - 1) & UR_PSN_MASK);
		if (qp->attr.qp_state == IBV_QPS_ERR)
			return;
		if (qp->attr.rnr_retry != 7) {
			if (qp->req.rnr_retry == 0) {
				fail_at(qp, pkt->psn, IBV_WC_RNR_RETRY_EXC_ERR);
				return;
			}
			qp->req.rnr_retry--;
		}
		/* from una: the NAKed PSN, or a READ before it whose
		 * responses the NAK shows lost (ack_upto) */
		uroce_req_go_back(qp, qp->req.una_psn);
		qp->req.rnr_until_ns = uroce_now_ns() + uroce_rnr_timer_ns(syn & 0x1f);
		uroce_progress_arm(qp->ctx, qp->req.rnr_until_ns);
		return; /* the timer resumes sending */
	case COMPST_NAK_SEQ:
		/* 9.7.5.2.3: resend from the PSN the responder expects - or
		 * from a READ before it whose responses the NAK shows lost
		 * (ack_upto leaves una_psn there): going back past such a
		 * READ left it unanswered, una_psn stuck, and every later NAK
		 * spent a retry until RETRY_EXC_ERR. */
		uroce_qp_count(qp, naks_rx, 1);
		uroce_qp_count(qp, seq_naks_rx, 1);
		ack_upto(qp, (pkt->psn - 1) & UR_PSN_MASK);
		if (qp->attr.qp_state == IBV_QPS_ERR)
			return;
		if (qp->req.need_retry && qp->req.retry_psn == qp->req.una_psn)
			break;		      /* already going back there */
		if (qp->req.retry_cnt == 0) { /* 7 is not forever: see req.c */
			uroce_req_retry_exceeded(qp);
			return;
		}
		qp->req.retry_cnt--;
		qp->req.need_retry = true;
		qp->req.retry_psn = qp->req.una_psn;
		uroce_req_go_back(qp, qp->req.una_psn);
		break;
	case COMPST_NAK_FATAL: {
		enum ibv_wc_status st;

		uroce_qp_count(qp, naks_rx, 1);
		switch (syn & 0x1f) {
		case UR_NAK_INVALID_REQ:
			st = IBV_WC_REM_INV_REQ_ERR;
			break;
		case UR_NAK_REM_ACCESS_ERR:
			st = IBV_WC_REM_ACCESS_ERR;
			break;
		case UR_NAK_INVALID_RD_REQ:
			st = IBV_WC_REM_INV_RD_REQ_ERR;
			break;
		default:
			st = IBV_WC_REM_OP_ERR;
			break;
		}
		fail_at(qp, pkt->psn, st);
		return;
	}
	case COMPST_DROP:
	default:
		uroce_qp_count(qp, duplicates, 1);
		return;
	}
	uroce_req_run(qp); /* sent with the receive batch (ep_poll) */
}

void uroce_rcv_response(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	qp->req.heard_ns = uroce_ep_rx_clock(qp->ep); /* (the batch's clock) */
	rcv_response(qp, pkt);
	rc_sync_inflight(qp);
}

/* The ACK a request of the peer carried (pkt.h, UR_BTH4_PIGGY): the same
 * steps as the ACK packet it stands for, which would have followed the
 * request - made from the request's BTH (the same P_Key, destination QP and
 * selective-repeat offer) with the PSN and AETH it carried.  Only a QP
 * that offered to take them (its peer only sends them then). */
void uroce_rcv_piggy(struct uroce_qp *qp, const struct uroce_pkt *req, const uint8_t *ext)
{
	uint8_t buf[UR_BTH_BYTES + UR_AETH_BYTES + UR_ICRC_BYTES];
	uint32_t psn = ur_get32(ext) & UR_PSN_MASK;
	struct uroce_pkt ack;

	if (!qp->piggy || qp->tr != UR_TR_RC)
		return;
	/* the common case without the packet (ack_one_fits): what
	 * rcv_response() takes from its BTH, then the ACK */
	if ((ext[4] & UR_AETH_TYPE_MASK) == UR_AETH_ACK && ack_one_fits(qp, psn)) {
		uroce_qp_count(qp, piggy_rx, 1);
		if (qp->sk && (req->bth[4] & UR_BTH4_SACK))
			qp->sk->peer_resp = true;	      /* uroce_sack_rx */
		qp->piggy_peer = true;			      /* UR_BTH4_PIGGY_OK */
		qp->req.heard_ns = uroce_ep_rx_clock(qp->ep); /* uroce_rcv_response */
		ack_one(qp, psn);
		return;
	}
	uroce_pkt_init(&ack, buf, UR_OPC_ACK | UR_TR_RC, req->qpn, psn, 0);
	memcpy(buf + 2, req->bth + 2, 2); /* P_Key */
	buf[4] = (uint8_t)((req->bth[4] & UR_BTH4_SACK) | UR_BTH4_PIGGY_OK);
	ur_aeth_set(&ack, ext[4], ur_get32(ext + 4) & 0xffffffu);
	uroce_qp_count(qp, piggy_rx, 1);
	uroce_rcv_response(qp, &ack);
}

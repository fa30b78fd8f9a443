/* RC responder (IBTA 9.7.4, 9.7.5.1): checks each request packet's PSN and
 * opcode sequence, validates R_Key/L_Key access, places data, generates
 * ACKs (coalesced per receive batch), NAKs and RNR NAKs, RDMA READ
 * responses, and receive completions.
 *
 * Explicit state machine as in Linux rxe: each check_*() step returns the
 * next state; errors end in a NAK state.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/shm.h"
#include "transport/rc.h"

enum resp_state {
	RESPST_CHECK_PSN,
	RESPST_CHECK_OP_SEQ,
	RESPST_CHECK_RESOURCE,
	RESPST_CHECK_RKEY,
	RESPST_EXECUTE,
	RESPST_DUPLICATE,
	RESPST_DONE,
	RESPST_NAK_PSN_SEQ,
	RESPST_RNR,
	RESPST_NAK_INVALID,
	RESPST_NAK_ACCESS,
	RESPST_NAK_OP,
	RESPST_DROP,
};

static const char *const resp_state_name[] = {
    "check-psn",  "check-op-seq", "check-resource", "check-rkey", "execute",
    "duplicate",  "done",	  "nak-psn-seq",    "rnr-nak",	  "nak-invalid-req",
    "nak-access", "nak-op-err",	  "drop",
};

/* XRC: the SRQ named by the packet's XRCETH supplies the receive WQE, the
 * completion queue and the PD for key checks (IBTA 14.? / A14). */
static struct ibv_pd *resp_pd(struct uroce_qp *qp)
{
	return qp->resp.xsrq ? qp->resp.xsrq->pd : qp->ibqp.qp_base.pd;
}

static struct ibv_cq *resp_cq(struct uroce_qp *qp)
{
	return qp->resp.xsrq ? to_usrq(qp->resp.xsrq)->cq : qp->ibqp.qp_base.recv_cq;
}

static void send_aeth(struct uroce_qp *qp, uint8_t syn, uint32_t psn)
{
	uint8_t buf[UR_BTH_BYTES + UR_AETH_BYTES + 8];
	struct uroce_pkt pkt;

	if (qp->tr == UR_TR_UC)
		return; /* UC is unacknowledged (IBTA 9.8.2) */
	uroce_pkt_init(&pkt, buf, UR_OPC_ACK | qp->tr, qp->attr.dest_qp_num, psn, 0);
	ur_aeth_set(&pkt, syn, qp->resp.msn);
	if (qp->resp.pull_failed)
		pkt.bth[4] |= UR_BTH4_NOPULL; /* send messages through the ring (pull.c) */
	uroce_qp_xmit(qp, &pkt);
}

/* May the pending ACK wait for the next one (a stream's coalescing, the
 * progress thread's receive batches: endpoint.c)?  Only when no packet it
 * covers asked for it (AckReq), the requester is not recovering a loss,
 * and fewer than UROCE_ACK_STRIDE PSNs have gone unacknowledged.  The
 * requester asks on the last packet of its last queued message, every
 * UROCE_ACKREQ_EVERY packets and where its window would stop (req.c), so
 * what waits here is always followed by a packet that asks. */
bool uroce_resp_ack_lazy(const struct uroce_qp *qp)
{
	if (qp->tr != UR_TR_RC || qp->resp.ack_eager || !qp->resp.acked)
		return false;
	/* holding after a gap: a selective ACK that shows no new gap and
	 * was not asked for waits, up to UROCE_ACKREQ_EVERY packets held
	 * (hold()) */
	if (qp->sk && qp->sk->nheld)
		return qp->sk->held_since < UROCE_ACKREQ_EVERY;
	return ((qp->resp.ack_psn - qp->resp.acked_psn) & UR_PSN_MASK) < UROCE_ACK_STRIDE;
}

/* The owed ACK leaves: as a packet of its own, a selective ACK, or inside
 * a request (uroce_resp_piggy_ack). */
static void ack_owed_sent(struct uroce_qp *qp)
{
	qp->resp.ack_pending = false;
	qp->resp.ack_eager = false;
	qp->resp.ack_lazy_ns = 0;
	if (qp->tr == UR_TR_UC)
		return; /* UC is unacknowledged (IBTA 9.8.2) */
	qp->resp.acked = true;
	qp->resp.acked_psn = qp->resp.ack_psn;
}

void uroce_resp_flush_ack(struct uroce_qp *qp)
{
	if (!qp->resp.ack_pending)
		return;
	ack_owed_sent(qp);
	if (qp->tr == UR_TR_UC)
		return;
	if (rc_sack_resp(qp) && qp->sk->nheld) {
		uroce_sack_send(qp, qp->resp.ack_psn);
		return;
	}
	uroce_qp_count(qp, acks_tx, 1);
	send_aeth(qp, UR_AETH_ACK | UR_AETH_CREDIT_INVALID, qp->resp.ack_psn);
}

/* The owed ACK rides on a SEND or WRITE request of this QP (req.c) instead
 * of a packet of its own: its PSN (3 bytes after a zero byte) and its
 * AETH, exactly what the ACK would have said.  Not a selective ACK, and
 * not when our responses must say UR_BTH4_NOPULL (same-host pulls). */
bool uroce_resp_piggy_ack(struct uroce_qp *qp, uint8_t *ext)
{
	if (!qp->resp.ack_pending || (rc_sack_resp(qp) && qp->sk->nheld) || qp->resp.pull_failed)
		return false;
	ack_owed_sent(qp);
	ur_put32(ext, qp->resp.ack_psn & UR_PSN_MASK);
	ur_put32(ext + 4, (uint32_t)(UR_AETH_ACK | UR_AETH_CREDIT_INVALID) << 24 |
			      (qp->resp.msn & 0xffffffu));
	uroce_qp_count(qp, piggy_tx, 1);
	return true;
}

static void send_nak(struct uroce_qp *qp, uint8_t syn, uint32_t psn)
{
	qp->resp.ack_pending = false; /* a NAK acknowledges psn - 1 too */
	/* the requester goes back to psn: what was held is sent again */
	uroce_sack_clear(qp);
	send_aeth(qp, syn, psn);
}

/* Selective repeat (sack.c): a packet after a gap is held, and the batch's
 * acknowledgement becomes a selective ACK - of the last PSN acknowledged
 * (never one that would cover a READ still being answered), or of the one
 * before the first this QP received. */
static bool hold(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	/* what the requester does not know yet: a new gap (the packet does
	 * not follow the highest one held), or it asked (AckReq: its window
	 * closes, or its queue ends); the selective ACK leaves with the
	 * batch then, otherwise it may wait for one of those (at most
	 * UROCE_ACKREQ_EVERY packets held: uroce_resp_ack_lazy) - one per
	 * receive batch cost both ends more than the packets' own path */
	if (!uroce_sack_hold(qp, pkt))
		return false;
	uroce_qp_count(qp, held_req, 1);
	if (!qp->resp.ack_pending) {
		qp->resp.ack_pending = true;
		qp->resp.ack_psn =
		    qp->resp.acked ? qp->resp.acked_psn : (qp->attr.rq_psn - 1) & UR_PSN_MASK;
	}
	if (qp->sk->hold_news || pkt->ackreq || !uroce_sack_lazy())
		qp->resp.ack_eager = true;
	return true;
}

/* The receive WQE the next message takes, into the cache now.  It was
 * posted a receive queue ago (perftest keeps the queue full), and reading
 * it was a cache miss: three quarters of the responder's samples in a
 * pinned ping-pong's profile (docs/latency.md, "Session 20").  (A slot
 * not posted yet is written by ibv_post_recv, which finds it there too.) */
static void rq_prefetch(const struct uroce_qp *qp)
{
	const char *p;

	if (qp->ibqp.qp_base.srq || !qp->rq.size)
		return;
	p = (const char *)&qp->rq.wqe[qp->rq.tail & (qp->rq.size - 1)];
	__builtin_prefetch(p);
	__builtin_prefetch(p + 31); /* wr_id to sg[0]: across a line */
}

/* Take a receive WQE (from the SRQ if the QP has one); false if none. */
static bool take_rwqe(struct uroce_qp *qp)
{
	if (!uroce_rq_pop(qp, &qp->resp.rwqe))
		return false;
	qp->resp.have_rwqe = true;
	qp->resp.rcv_offset = 0;
	rq_prefetch(qp);
	return true;
}

static void complete_recv(struct uroce_qp *qp, struct uroce_pkt *pkt, enum ibv_wc_status st,
			  enum ibv_wc_opcode op, uint32_t byte_len)
{
	struct ibv_wc wc = {
	    .wr_id = qp->resp.rwqe.wr_id,
	    .status = st,
	    .opcode = op,
	    .byte_len = byte_len,
	    .qp_num = qp->ibqp.qp_base.qp_num,
	    .src_qp = qp->attr.dest_qp_num,
	};

	if (pkt && (pkt->mask & URM_IMMDT)) {
		wc.imm_data = ur_immdt_raw(pkt);
		wc.wc_flags |= IBV_WC_WITH_IMM;
	}
	if (pkt && (pkt->mask & URM_IETH) && st == IBV_WC_SUCCESS) {
		wc.invalidated_rkey = ur_ieth_rkey(pkt);
		wc.wc_flags |= IBV_WC_WITH_INV;
	}
	qp->resp.have_rwqe = false;
	/* The progress engine acknowledges before the completion becomes
	 * visible: the application may exit as soon as it sees it.  An
	 * application thread polling the CQ defers the ACK instead, so that
	 * its sendmsg is not between the packet and the application; what
	 * sends a deferred ACK is listed in src/net/endpoint.c ("ACK
	 * deferral"). */
	if (pkt && st == IBV_WC_SUCCESS) {
		/* The MSN an ACK carries counts the messages completed,
		 * this one included: it may leave below, before resp_done
		 * (which then does not count it again) */
		qp->resp.msn = (qp->resp.msn + 1) & 0xffffffu;
		qp->resp.msn_counted = true;
		qp->resp.ack_pending = true;
		qp->resp.ack_psn = pkt->psn;
		if (pkt->ackreq)
			qp->resp.ack_eager = true;
		if (!uroce_ep_deferring_acks() && !uroce_resp_ack_lazy(qp))
			uroce_resp_flush_ack(qp);
	}
	/* (none for an XRC_RECV QP whose SRQ was destroyed mid-message) */
	if (resp_cq(qp))
		uroce_cq_push(to_ucq(resp_cq(qp)), &wc, pkt && pkt->se);
}

/* C9-?: sequence errors are NAKed once; duplicates are re-acknowledged. */
/* UC (IBTA 9.8.2): a gap loses the message in progress; the next FIRST or
 * ONLY resynchronises.  Nothing is ever acknowledged or NAKed. */
static void uc_drop(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	qp->resp.in_send = false;
	qp->resp.in_write = false;
	qp->resp.rcv_offset = 0;
	qp->resp.drop_msg = !(pkt->mask & URM_END);
	qp->resp.psn = (pkt->psn + 1) & UR_PSN_MASK;
}

static enum resp_state check_psn(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	int32_t d = ur_psn_diff(pkt->psn, qp->resp.psn);

	if (qp->tr == UR_TR_UC) {
		if (d == 0 && !qp->resp.drop_msg)
			return RESPST_CHECK_OP_SEQ;
		if (d)
			uroce_qp_count(qp, out_of_seq, 1);
		if (pkt->mask & URM_START) {
			uc_drop(qp, pkt); /* the damaged message is abandoned */
			qp->resp.drop_msg = false;
			qp->resp.psn = pkt->psn;
			return RESPST_CHECK_OP_SEQ;
		}
		uc_drop(qp, pkt);
		return RESPST_DROP;
	}

	if (d > 0) {
		uroce_qp_count(qp, oos_req, 1);
		if (rc_sack_resp(qp) && hold(qp, pkt))
			return RESPST_DROP;
		uroce_sack_resp_diag(qp, pkt, "not held");
		return qp->resp.nak_sent ? RESPST_DROP : RESPST_NAK_PSN_SEQ;
	}
	if (d < 0) {
		uroce_qp_count(qp, dup_req, 1);
		uroce_sack_resp_diag(qp, pkt, "duplicate");
		return RESPST_DUPLICATE;
	}
	qp->resp.nak_sent = false;
	return RESPST_CHECK_OP_SEQ;
}

/* C9-?: a MIDDLE/LAST must continue the message in progress; a new message
 * must not start while one is incomplete. */
static enum resp_state check_op_seq(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	bool cont = !(pkt->mask & URM_START);

	if (qp->resp.in_send)
		return cont && (pkt->mask & URM_SEND) ? RESPST_CHECK_RESOURCE : RESPST_NAK_INVALID;
	if (qp->resp.in_write)
		return cont && (pkt->mask & URM_WRITE) ? RESPST_CHECK_RESOURCE : RESPST_NAK_INVALID;
	if (cont)
		return RESPST_NAK_INVALID;
	return RESPST_CHECK_RESOURCE;
}

/* A message that ends in a receive completion needs a receive WQE (RNR NAK
 * otherwise, 9.7.5.2.8); data packets must be full-MTU but the last. */
static enum resp_state check_resource(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	if ((pkt->mask & URM_PAYLOAD) && !(pkt->mask & URM_END) && pkt->paylen != qp->mtu)
		return RESPST_NAK_INVALID;
	if ((pkt->mask & URM_PAYLOAD) && pkt->paylen > qp->mtu)
		return RESPST_NAK_INVALID;
	/* The WQE is taken here, before any data moves: with a shared receive
	 * queue another QP could otherwise take the last one meanwhile. */
	if ((((pkt->mask & URM_SEND) && (pkt->mask & URM_START)) ||
	     ((pkt->mask & URM_WRITE) && (pkt->mask & URM_RWR) && (pkt->mask & URM_END))) &&
	    !qp->resp.have_rwqe && !take_rwqe(qp))
		return RESPST_RNR;
	if (pkt->mask & URM_ATOMIC)
		return RESPST_CHECK_RKEY;
	/* a placed WRITE ONLY (rx_place.c) had its R_Key, range and access
	 * checked there, under mr_lock, before its bytes were written */
	return (pkt->mask & (URM_WRITE | URM_READ)) && (pkt->mask & URM_RETH) && !pkt->placed
		   ? RESPST_CHECK_RKEY
		   : RESPST_EXECUTE;
}

/* R_Key checks (IBTA 10.6.3.2 / C9-?): the QP grants the access, the key
 * names an MR of the QP's PD with that access, and the range is inside it.
 * Caller holds mr_lock. */
static struct uroce_mr *rkey_mr(struct uroce_qp *qp, uint32_t rkey, uint64_t va, uint32_t len,
				unsigned int access)
{
	struct uroce_mr *mr = uroce_mr_lookup(qp->ctx, rkey);

	/* a type 2 window is reachable only through the QP it was bound on */
	if (mr && mr->kind == UROCE_KEY_MW2 && mr->mw_qpn != qp->ibqp.qp_base.qp_num)
		return NULL;
	return mr && uroce_pd_same(mr->ibmr.pd, resp_pd(qp)) && (mr->access & access) &&
		       uroce_mr_ptr(mr, va, len)
		   ? mr
		   : NULL;
}

static bool rkey_ok(struct uroce_qp *qp, uint32_t rkey, uint64_t va, uint32_t len,
		    unsigned int access)
{
	if (!(qp->attr.qp_access_flags & access))
		return false;
	if (len == 0)
		return true; /* zero-length: no key check (C9-?) */
	return rkey_mr(qp, rkey, va, len, access);
}

static enum resp_state check_rkey(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	unsigned int access =
	    (pkt->mask & URM_READ) ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
	bool ok;

	if (pkt->mask & URM_ATOMIC) {
		/* C9-?: an atomic's address must be 8-byte aligned */
		if (ur_atmeth_va(pkt) & 7) {
			ur_dbg("QP 0x%06x: atomic at misaligned va 0x%llx", qp->ibqp.qp_base.qp_num,
			       (unsigned long long)ur_atmeth_va(pkt));
			return RESPST_NAK_INVALID;
		}
		pthread_rwlock_rdlock(&qp->ctx->mr_lock);
		ok = rkey_ok(qp, ur_atmeth_rkey(pkt), ur_atmeth_va(pkt), 8,
			     IBV_ACCESS_REMOTE_ATOMIC);
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		if (!ok)
			ur_dbg("QP 0x%06x: atomic va 0x%llx rkey 0x%08x: access denied",
			       qp->ibqp.qp_base.qp_num, (unsigned long long)ur_atmeth_va(pkt),
			       ur_atmeth_rkey(pkt));
		return ok ? RESPST_EXECUTE : RESPST_NAK_ACCESS;
	}

	/* a message longer than max_msg_sz (2^31) is an invalid request */
	if (ur_reth_len(pkt) > UROCE_MAX_MSG) {
		ur_dbg("QP 0x%06x: %s of %u bytes > max_msg_sz", qp->ibqp.qp_base.qp_num,
		       uroce_opcode_name(pkt->opcode), ur_reth_len(pkt));
		return RESPST_NAK_INVALID;
	}
	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	ok = rkey_ok(qp, ur_reth_rkey(pkt), ur_reth_va(pkt), ur_reth_len(pkt), access);
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	if (!ok) {
		ur_dbg("QP 0x%06x: %s va 0x%llx len %u rkey 0x%08x: access denied",
		       qp->ibqp.qp_base.qp_num, uroce_opcode_name(pkt->opcode),
		       (unsigned long long)ur_reth_va(pkt), ur_reth_len(pkt), ur_reth_rkey(pkt));
		return RESPST_NAK_ACCESS;
	}
	return RESPST_EXECUTE;
}

static enum resp_state send_done(struct uroce_qp *qp, struct uroce_pkt *pkt);

static enum resp_state exec_send(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	enum ibv_wc_status st;
	int r;

	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	/* placed: in the receive buffer already (rx_place.c) */
	r = pkt->placed
		? 0
		: uroce_sge_copy(qp->ctx, resp_pd(qp), qp->resp.rwqe.sg, qp->resp.rwqe.num_sge,
				 qp->resp.rcv_offset, pkt->payload, pkt->paylen, true, &st);
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	if (r) {
		/* 9.9.3.1.2: the receive buffer is too small (or not ours) */
		complete_recv(qp, NULL, st, IBV_WC_RECV, qp->resp.rcv_offset);
		return st == IBV_WC_LOC_LEN_ERR ? RESPST_NAK_INVALID : RESPST_NAK_OP;
	}
	return send_done(qp, pkt);
}

/* A SEND packet's payload is in the receive WQE: the message goes on, or
 * completes. */
static enum resp_state send_done(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	qp->resp.rcv_offset += pkt->paylen;
	qp->resp.in_send = !(pkt->mask & URM_END);
	/* SEND with invalidate (IBTA 9.4.1.1.?): the named type 2 window of
	 * our PD is invalidated before the receive completes */
	if ((pkt->mask & URM_IETH) &&
	    uroce_mw_invalidate(qp, ur_ieth_rkey(pkt), true) != IBV_WC_SUCCESS) {
		complete_recv(qp, NULL, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, qp->resp.rcv_offset);
		return RESPST_NAK_INVALID;
	}
	if (pkt->mask & URM_END)
		complete_recv(qp, pkt, IBV_WC_SUCCESS, IBV_WC_RECV, qp->resp.rcv_offset);
	return RESPST_DONE;
}

static void write_done(struct uroce_qp *qp, struct uroce_pkt *pkt);

/* A WRITE's first packet: the range its RETH names (C9-?). */
static void write_start(struct uroce_qp *qp, const struct uroce_pkt *pkt)
{
	qp->resp.write_va = ur_reth_va(pkt);
	qp->resp.write_rkey = ur_reth_rkey(pkt);
	qp->resp.write_len = ur_reth_len(pkt);
	qp->resp.write_offset = 0;
}

static enum resp_state exec_write(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	uint8_t *dst = NULL;

	if (pkt->mask & URM_RETH)
		write_start(qp, pkt);
	if ((uint64_t)qp->resp.write_offset + pkt->paylen > qp->resp.write_len ||
	    ((pkt->mask & URM_END) &&
	     (uint64_t)qp->resp.write_offset + pkt->paylen != qp->resp.write_len))
		return RESPST_NAK_INVALID; /* C9-?: length must match the RETH */
	/* placed (rx_place.c): written already, into the range its MR was
	 * looked up and checked for then */
	if (pkt->paylen && !pkt->placed) {
		struct uroce_mr *mr;

		pthread_rwlock_rdlock(&qp->ctx->mr_lock);
		mr = uroce_mr_lookup(qp->ctx, qp->resp.write_rkey);
		if (mr && uroce_pd_same(mr->ibmr.pd, resp_pd(qp)) &&
		    (mr->access & IBV_ACCESS_REMOTE_WRITE))
			dst = uroce_mr_ptr(mr, qp->resp.write_va + qp->resp.write_offset,
					   pkt->paylen);
		/* an ODP page that is not mapped: remote access error */
		if (dst && !uroce_mr_write(mr, dst, pkt->payload, pkt->paylen))
			dst = NULL;
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		if (!dst)
			return RESPST_NAK_ACCESS; /* the MR went away mid-message */
	}
	write_done(qp, pkt);
	return RESPST_DONE;
}

/* A WRITE packet's payload is in place: the message goes on, or ends
 * (with a receive completion for its immediate). */
static void write_done(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	qp->resp.write_offset += pkt->paylen;
	qp->resp.in_write = !(pkt->mask & URM_END);
	/* a WRITE ONLY that goes on from here may be placed while checked */
	qp->resp.write_next =
	    qp->tr == UR_TR_RC && (pkt->mask & URM_END) && !(pkt->mask & URM_IMMDT);
	qp->resp.write_next_psn = (pkt->psn + 1) & UR_PSN_MASK;
	if ((pkt->mask & URM_END) && (pkt->mask & URM_IMMDT)) {
		complete_recv(qp, pkt, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
			      qp->resp.write_len);
	}
}

/* The n READ responses for [va, va+len) at psn as one pull record
 * (pull.c): a RESPONSE ONLY naming the MR range, its R_Key, bounds and
 * access checked here, which the link sends only with those bytes, copied
 * now under mr_lock (shm.c; never as a description the requester would
 * read after a deregistration).  Returns how many of the n were sent that
 * way: the caller sends the rest as packets. */
static uint32_t read_resp_pull(struct uroce_qp *qp, uint32_t psn, uint64_t va, uint32_t rkey,
			       uint32_t len, uint32_t n)
{
	uint8_t buf[UR_BTH_BYTES + UR_AETH_BYTES + 64 + 8];
	struct uroce_pkt pkt;
	struct uroce_mr *mr;
	uint8_t *src = NULL;

	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	mr = uroce_mr_lookup(qp->ctx, rkey);
	if (mr && !mr->odp && uroce_pd_same(mr->ibmr.pd, resp_pd(qp)) &&
	    (mr->access & IBV_ACCESS_REMOTE_READ))
		src = uroce_mr_ptr(mr, va, len);
	if (!src) {
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		return 0;
	}
	/* as records of at most uroce_pull_read_seg PSNs each (pull.c) */
	for (uint32_t i = 0, seg = uroce_pull_read_seg(qp), k; i < n; i += k) {
		uint32_t off = i * qp->mtu;

		k = n - i < seg ? n - i : seg;
		uroce_pkt_init(&pkt, buf, UR_OPC_READ_RESP_ONLY | qp->tr, qp->attr.dest_qp_num,
			       (psn + i) & UR_PSN_MASK, uroce_pull_desc_len(1));
		ur_aeth_set(&pkt, UR_AETH_ACK | UR_AETH_CREDIT_INVALID, qp->resp.msn);
		uroce_pull_desc_put(pkt.payload, k,
				    &(struct iovec){src + off, i + k < n ? k * qp->mtu : len - off},
				    1);
		uroce_pull_desc_bytes_only(pkt.payload);
		pkt.bth[4] |= UR_BTH4_PULL;
		uroce_qp_xmit(qp, &pkt); /* mr_lock held: the ring takes the bytes (shm.c) */
		if (!uroce_pull_desc_was_sent(pkt.payload)) {
			pthread_rwlock_unlock(&qp->ctx->mr_lock);
			return i;
		}
	}
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	return n;
}

/* Send the READ response packets for [va, va+len) starting at psn (pull:
 * the requester may take them as one pull record). */
static void send_read_resp(struct uroce_qp *qp, uint32_t psn, uint64_t va, uint32_t rkey,
			   uint32_t len, bool pull)
{
	uint32_t n = len ? (len + qp->mtu - 1) / qp->mtu : 1, i = 0;
	uint8_t buf[UR_BTH_BYTES + UR_AETH_BYTES + 4096 + 8];

	if (pull && n > 1 && uroce_pull_min() && len >= uroce_pull_min() && qp->tr == UR_TR_RC &&
	    uroce_shm_pull_ok(qp->ep, &qp->path) &&
	    (i = read_resp_pull(qp, psn, va, rkey, len, n)) == n)
		return;

	for (; i < n; i++) {
		uint32_t off = i * qp->mtu, paylen = len - off;
		struct uroce_pkt pkt;
		struct uroce_mr *mr;
		uint8_t opc;
		uint8_t *src = NULL;

		if (paylen > qp->mtu)
			paylen = qp->mtu;
		opc = n == 1	   ? UR_OPC_READ_RESP_ONLY
		      : i == 0	   ? UR_OPC_READ_RESP_FIRST
		      : i == n - 1 ? UR_OPC_READ_RESP_LAST
				   : UR_OPC_READ_RESP_MIDDLE;
		uroce_pkt_init(&pkt, buf, opc | qp->tr, qp->attr.dest_qp_num,
			       (psn + i) & UR_PSN_MASK, paylen);
		if (pkt.mask & URM_AETH)
			ur_aeth_set(&pkt, UR_AETH_ACK | UR_AETH_CREDIT_INVALID, qp->resp.msn);
		if (paylen) {
			pthread_rwlock_rdlock(&qp->ctx->mr_lock);
			mr = uroce_mr_lookup(qp->ctx, rkey);
			if (mr && uroce_pd_same(mr->ibmr.pd, resp_pd(qp)) &&
			    (mr->access & IBV_ACCESS_REMOTE_READ))
				src = uroce_mr_ptr(mr, va + off, paylen);
			/* the payload leaves from the MR (docs/design.md) */
			if (src && !mr->odp &&
			    uroce_qp_xmit_gather(qp, &pkt, &(struct iovec){src, paylen}, 1)) {
				pthread_rwlock_unlock(&qp->ctx->mr_lock);
				continue;
			}
			if (src && !uroce_mr_read(mr, pkt.payload, src, paylen))
				src = NULL;
			pthread_rwlock_unlock(&qp->ctx->mr_lock);
			if (!src) {
				send_nak(qp, UR_AETH_NAK | UR_NAK_REM_ACCESS_ERR, pkt.psn);
				return;
			}
		}
		uroce_qp_xmit(qp, &pkt);
	}
}

static enum resp_state exec_read(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	uint32_t len = ur_reth_len(pkt);
	uint32_t n = len ? (len + qp->mtu - 1) / qp->mtu : 1;

	/* Every response packet carries the MSN of the READ itself. */
	qp->resp.msn = (qp->resp.msn + 1) & 0xffffffu;
	send_read_resp(qp, pkt->psn, ur_reth_va(pkt), ur_reth_rkey(pkt), len,
		       !(pkt->bth[4] & UR_BTH4_NOPULL));
	qp->resp.psn = (pkt->psn + n) & UR_PSN_MASK;
	return RESPST_DROP; /* PSN already advanced; no ACK needed */
}

static void send_atomic_ack(struct uroce_qp *qp, uint32_t psn, uint64_t orig)
{
	uint8_t buf[UR_BTH_BYTES + UR_AETH_BYTES + UR_ATMACK_BYTES + 8];
	struct uroce_pkt pkt;

	uroce_pkt_init(&pkt, buf, UR_OPC_ATOMIC_ACK | qp->tr, qp->attr.dest_qp_num, psn, 0);
	ur_aeth_set(&pkt, UR_AETH_ACK | UR_AETH_CREDIT_INVALID, qp->resp.msn);
	ur_atmack_set(&pkt, orig);
	uroce_qp_xmit(qp, &pkt);
}

/* IBTA 9.4.5: compare-and-swap / fetch-and-add on 8 aligned bytes, done
 * with the CPU's atomic instructions, so they are atomic against every
 * other atomic and against the host's own atomics (IBV_ATOMIC_GLOB).  The
 * result is kept so a duplicate request is answered, not re-executed. */
static enum resp_state exec_atomic(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_rd_res *res;
	struct uroce_mr *mr;
	uint64_t *p = NULL, orig = 0;

	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	mr = uroce_mr_lookup(qp->ctx, ur_atmeth_rkey(pkt));
	if (mr)
		p = (uint64_t *)(void *)uroce_mr_ptr(mr, ur_atmeth_va(pkt), 8);
	/* The va is 8-byte aligned (check_rkey), but an MR registered at an
	 * iova aligned otherwise than its address (ibv_reg_mr_iova,
	 * ZERO_BASED) maps it to a misaligned host address, where the CPU's
	 * atomics are undefined: invalid request, as rxe answers. */
	if (p && ((uintptr_t)p & 7)) {
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		ur_dbg("QP 0x%06x: atomic va 0x%llx is a misaligned host address",
		       qp->ibqp.qp_base.qp_num, (unsigned long long)ur_atmeth_va(pkt));
		return RESPST_NAK_INVALID;
	}
	/* an ODP page must be there, writable, before the CPU's atomic */
	if (p && mr->odp && !uroce_odp_atomic_ok(p)) {
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		ur_dbg("QP 0x%06x: atomic va 0x%llx: ODP page not mapped writable",
		       qp->ibqp.qp_base.qp_num, (unsigned long long)ur_atmeth_va(pkt));
		return RESPST_NAK_ACCESS;
	}
	if (p) {
		if (pkt->opcode == UR_OPC_FETCH_ADD ||
		    pkt->opcode == (UR_TR_XRC | UR_OPC_FETCH_ADD)) {
			orig = __atomic_fetch_add(p, ur_atmeth_swap_add(pkt), __ATOMIC_SEQ_CST);
		} else {
			orig = ur_atmeth_cmp(pkt);
			__atomic_compare_exchange_n(p, &orig, ur_atmeth_swap_add(pkt), false,
						    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		}
	}
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	if (!p)
		return RESPST_NAK_ACCESS;
	res = &qp->resp.res[qp->resp.res_head++ % qp->resp.nres];
	res->valid = true;
	res->opcode = pkt->opcode;
	res->psn = pkt->psn;
	res->atomic_orig = orig;
	qp->resp.msn = (qp->resp.msn + 1) & 0xffffffu;
	send_atomic_ack(qp, pkt->psn, orig);
	qp->resp.psn = (pkt->psn + 1) & UR_PSN_MASK;
	return RESPST_DROP; /* answered; PSN advanced */
}

/* A pull record (pull.c), validated like the ONLY packet it is (PSN,
 * sequence, receive WQE, R_Key and range): the whole message, copied with
 * one process_vm_readv from the requester's memory straight into the RETH
 * range or the receive WQE's SGEs, under mr_lock as any placement.  It then
 * stands for its PSNs psn .. psn + npkts - 1: the last is the one done and
 * acknowledged.  A pull that fails is answered as a lost packet, with
 * UR_BTH4_NOPULL on our responses from now on: the requester sends the
 * message again through the ring (what the pull wrote is inside the
 * validated range and is overwritten; nothing completes). */
static enum resp_state exec_pull(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct iovec src[UROCE_MAX_SGE];
	uint32_t npkts;
	uint64_t total;
	int nsrc = uroce_pull_desc_get(qp, pkt, src, &npkts, &total), r = -EFAULT;
	bool write = pkt->mask & URM_WRITE;

	if (nsrc < 0 || (write && total != ur_reth_len(pkt)))
		return RESPST_NAK_INVALID; /* (a well-behaved peer sends none) */
	if (write) {
		struct uroce_mr *mr;
		struct iovec dst;

		pthread_rwlock_rdlock(&qp->ctx->mr_lock);
		mr = uroce_mr_lookup(qp->ctx, ur_reth_rkey(pkt));
		dst.iov_base = mr && !mr->odp && uroce_pd_same(mr->ibmr.pd, resp_pd(qp)) &&
				       (mr->access & IBV_ACCESS_REMOTE_WRITE)
				   ? uroce_mr_ptr(mr, ur_reth_va(pkt), (uint32_t)total)
				   : NULL;
		dst.iov_len = total;
		if (dst.iov_base)
			r = uroce_shm_pull(qp->ctx, &pkt->pull, &dst, 1, src, nsrc, total);
		else
			uroce_count(qp->ctx, shm_pull_fail, 1); /* (ODP: the packet path) */
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
	} else {
		r = uroce_pull_to_sge(qp, resp_pd(qp), qp->resp.rwqe.sg, qp->resp.rwqe.num_sge, 0,
				      pkt, src, nsrc, total);
	}
	if (r) {
		qp->resp.pull_failed = true;
		return RESPST_NAK_PSN_SEQ;
	}
	pkt->psn = (pkt->psn + npkts - 1) & UR_PSN_MASK;
	if (write) {
		qp->resp.write_va = ur_reth_va(pkt);
		qp->resp.write_rkey = ur_reth_rkey(pkt);
		qp->resp.write_len = ur_reth_len(pkt);
		qp->resp.write_offset = (uint32_t)total;
		if (pkt->mask & URM_IMMDT)
			complete_recv(qp, pkt, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
				      qp->resp.write_len);
		return RESPST_DONE;
	}
	qp->resp.rcv_offset = (uint32_t)total;
	if ((pkt->mask & URM_IETH) &&
	    uroce_mw_invalidate(qp, ur_ieth_rkey(pkt), true) != IBV_WC_SUCCESS) {
		complete_recv(qp, NULL, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, qp->resp.rcv_offset);
		return RESPST_NAK_INVALID;
	}
	complete_recv(qp, pkt, IBV_WC_SUCCESS, IBV_WC_RECV, qp->resp.rcv_offset);
	return RESPST_DONE;
}

static enum resp_state execute(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	qp->resp.write_next = false; /* (exec_write sets it again) */
	if (pkt->bth[4] & UR_BTH4_PULL)
		return exec_pull(qp, pkt);
	if (pkt->mask & URM_ATOMIC)
		return exec_atomic(qp, pkt);
	if (pkt->mask & URM_READ)
		return exec_read(qp, pkt);
	if (pkt->mask & URM_SEND)
		return exec_send(qp, pkt);
	if (pkt->mask & URM_WRITE)
		return exec_write(qp, pkt);
	return RESPST_NAK_INVALID;
}

/* 9.7.5.1.1: a duplicate SEND/WRITE is acknowledged again without being
 * executed; a duplicate READ is answered again from memory (the requester
 * may have lost the responses). */
static void duplicate(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	if (pkt->mask & URM_ATOMIC) {
		/* answer from the saved result; never execute twice (C9-?) */
		for (uint32_t i = 0; i < qp->resp.nres; i++) {
			struct uroce_rd_res *r = &qp->resp.res[i];

			if (r->valid && r->psn == pkt->psn && r->opcode == pkt->opcode) {
				send_atomic_ack(qp, pkt->psn, r->atomic_orig);
				return;
			}
		}
		ur_dbg("QP 0x%06x: duplicate atomic psn %u too old to answer",
		       qp->ibqp.qp_base.qp_num, pkt->psn);
		return;
	}
	if (pkt->mask & URM_READ) {
		uint32_t len = ur_reth_len(pkt);
		bool ok;

		pthread_rwlock_rdlock(&qp->ctx->mr_lock);
		ok = rkey_ok(qp, ur_reth_rkey(pkt), ur_reth_va(pkt), len, IBV_ACCESS_REMOTE_READ);
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		if (ok)
			send_read_resp(qp, pkt->psn, ur_reth_va(pkt), ur_reth_rkey(pkt), len,
				       !(pkt->bth[4] & UR_BTH4_NOPULL));
		return;
	}
	qp->resp.ack_pending = true;
	qp->resp.ack_eager = true;
	qp->resp.ack_psn = (qp->resp.psn - 1) & UR_PSN_MASK;
}

/* The request pkt is done: the next PSN is expected, and it is owed an
 * ACK.  Acknowledged once per receive batch, whether it asked (AckReq) or
 * not (an unsolicited ACK is always allowed, 9.7.5.1): a requester that
 * its window or its endpoint's budget stopped with no AckReq outstanding
 * must not wait for its timeout.  (complete_recv may have acknowledged it
 * already.) */
static void resp_done(struct uroce_qp *qp, const struct uroce_pkt *pkt)
{
	qp->resp.psn = (pkt->psn + 1) & UR_PSN_MASK;
	if ((pkt->mask & URM_END) && !qp->resp.msn_counted)
		qp->resp.msn = (qp->resp.msn + 1) & 0xffffffu;
	qp->resp.msn_counted = false;
	if (!(qp->resp.acked && qp->resp.acked_psn == pkt->psn)) {
		qp->resp.ack_pending = true;
		qp->resp.ack_psn = pkt->psn;
		if (pkt->ackreq)
			qp->resp.ack_eager = true;
	}
}

static void rcv_request(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	enum resp_state s = RESPST_CHECK_PSN;
	enum ibv_qp_state qs = qp->attr.qp_state;

	/* C10-?: a QP in RESET, INIT or ERR ignores incoming packets; so does
	 * one of another transport */
	if (qs == IBV_QPS_RESET || qs == IBV_QPS_INIT || qs == IBV_QPS_ERR ||
	    (pkt->opcode & UR_TR_MASK) != qp->tr) {
		uroce_qp_count(qp, rx_drop_state, 1);
		return;
	}
	/* IBTA 11.6.3.2: the first packet received in RTR establishes
	 * communication (what a connection manager waits for) */
	if (qs == IBV_QPS_RTR && !qp->resp.comm_est) {
		qp->resp.comm_est = true;
		uroce_async_event(qp->ctx, IBV_EVENT_COMM_EST, &qp->ibqp.qp_base);
	}
	/* a pull record (pull.c): only an RC WRITE/SEND ONLY through a
	 * same-host link we can pull from; anything else with the flag is
	 * dropped as malformed */
	if ((pkt->bth[4] & UR_BTH4_PULL) &&
	    (!pkt->pull.pid || qp->tr != UR_TR_RC || !(pkt->mask & URM_START) ||
	     !(pkt->mask & URM_END) || !(pkt->mask & (URM_WRITE | URM_SEND)))) {
		uroce_qp_count(qp, rx_drop_state, 1);
		return;
	}
	qp->resp.xsrq = NULL;
	if (qp->tr == UR_TR_XRC) {
		uint32_t n = ur_xrceth_srqn(pkt);

		/* The XRCETH names an XRC SRQ of this QP's XRC domain; every
		 * packet of a message names the one its receive WQE came from.
		 * Looked up by number each time: the SRQ may be gone. */
		if (!qp->resp.have_rwqe && !qp->resp.in_write)
			qp->resp.xsrqn = n;
		qp->resp.xsrq = uroce_xrc_srq_find(qp->ctx, qp->resp.xsrqn, qp->xrcd);
		if (!qp->resp.xsrq || n != qp->resp.xsrqn) {
			ur_dbg("QP 0x%06x: XRCETH names SRQ %u, not %s", qp->ibqp.qp_base.qp_num, n,
			       qp->resp.xsrq ? "the SRQ of the message in progress"
					     : "one of this XRC domain");
			s = RESPST_NAK_INVALID;
		}
	}
	for (;;) {
		ur_trace("QP 0x%06x rx %s psn %u: %s", qp->ibqp.qp_base.qp_num,
			 uroce_opcode_name(pkt->opcode), pkt->psn, resp_state_name[s]);
		switch (s) {
		case RESPST_CHECK_PSN:
			s = check_psn(qp, pkt);
			continue;
		case RESPST_CHECK_OP_SEQ:
			s = check_op_seq(qp, pkt);
			continue;
		case RESPST_CHECK_RESOURCE:
			s = check_resource(qp, pkt);
			continue;
		case RESPST_CHECK_RKEY:
			s = check_rkey(qp, pkt);
			continue;
		case RESPST_EXECUTE:
			s = execute(qp, pkt);
			continue;
		case RESPST_DUPLICATE:
			duplicate(qp, pkt);
			return;
		case RESPST_DONE:
			resp_done(qp, pkt);
			return;
		case RESPST_NAK_PSN_SEQ:
		case RESPST_RNR:
		case RESPST_NAK_INVALID:
		case RESPST_NAK_ACCESS:
		case RESPST_NAK_OP:
			if (qp->tr == UR_TR_UC) {
				/* UC errors drop the message silently (9.8.2) */
				ur_dbg("QP 0x%06x: UC %s psn %u dropped (%s)",
				       qp->ibqp.qp_base.qp_num, uroce_opcode_name(pkt->opcode),
				       pkt->psn, resp_state_name[s]);
				uroce_qp_count(qp, rx_drop_state, 1);
				uc_drop(qp, pkt);
				return;
			}
			break;
		default:
			break;
		}
		switch (s) {
		case RESPST_NAK_PSN_SEQ:
			qp->resp.nak_sent = true;
			uroce_qp_count(qp, naks_tx, 1);
			send_nak(qp, UR_AETH_NAK | UR_NAK_PSN_SEQ_ERR, qp->resp.psn);
			return;
		case RESPST_RNR:
			uroce_qp_count(qp, rnr_naks_tx, 1);
			send_nak(qp, (uint8_t)(UR_AETH_RNR_NAK | (qp->attr.min_rnr_timer & 0x1f)),
				 pkt->psn);
			return;
		case RESPST_NAK_INVALID:
		case RESPST_NAK_ACCESS:
		case RESPST_NAK_OP: {
			static const uint8_t code[] = {UR_NAK_INVALID_REQ, UR_NAK_REM_ACCESS_ERR,
						       UR_NAK_REM_OP_ERR};
			/* IBTA 11.6.3.1: the affiliated asynchronous error the
			 * responder reports on its own QP */
			static const enum ibv_event_type ev[] = {
			    IBV_EVENT_QP_REQ_ERR, IBV_EVENT_QP_ACCESS_ERR, IBV_EVENT_QP_FATAL};

			uroce_qp_count(qp, naks_tx, 1);
			send_nak(qp, UR_AETH_NAK | code[s - RESPST_NAK_INVALID], pkt->psn);
			/* 9.9.3.1: class B/C/D errors take the responder to ERR */
			if (qp->resp.have_rwqe)
				complete_recv(qp, NULL, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, 0);
			if (qp->attr.qp_state != IBV_QPS_ERR)
				uroce_async_event(qp->ctx, ev[s - RESPST_NAK_INVALID],
						  &qp->ibqp.qp_base);
			uroce_qp_error(qp);
			return;
		}
		case RESPST_DROP:
		default:
			return;
		}
	}
}

unsigned int uroce_rc_fast(void)
{
	static uint64_t v = UINT64_MAX;

	return (unsigned int)uroce_env_num("UROCE_RC_FAST", 3, &v);
}

/* The common case in one pass (docs/latency.md, "Session 20"): an RC SEND
 * ONLY, SEND ONLY with immediate, RDMA WRITE ONLY or WRITE ONLY with
 * immediate with exactly the expected PSN, no message in progress, nothing
 * held after a gap.  Each check of rcv_request()'s steps that can fail for
 * such a packet is made here, before anything changes; any that fails -
 * and anything else - returns false with nothing done, and rcv_request()
 * takes the packet as before (its NAKs, RNR NAKs, duplicates, drops).
 * What the steps would do for it is then done in the same order, with
 * their own helpers.  The checks, by step:
 *   rcv_request: an RC opcode on an RC QP (C10-?: another transport's
 *     packets are dropped); RTS, or RTR once communication is established
 *     (RESET, INIT and ERR drop; RTR's first packet reports COMM_EST,
 *     11.6.3.2; SQD and SQE: rcv_request); not a pull record.
 *   check_psn (9.7.5.1.1): the expected PSN - not a duplicate, not after
 *     a gap; no packet held (uroce_sack_rx, the held ones after it).
 *   check_op_seq (C9-?, as there): an ONLY starts a message: none may be in
 *     progress, SEND or WRITE.
 *   check_resource: an ONLY ends its message, so at most an MTU of
 *     payload (invalid request else); a SEND or a WRITE with immediate
 *     takes a receive WQE - the QP's own, none taken yet (an SRQ, or none
 *     posted, an RNR NAK (9.7.5.2.8): rcv_request).
 *   check_rkey (10.6.3.2, C9-?): the QP grants remote write, the RETH's
 *     length is the payload's (exec_write: C9-?, it must match; and so
 *     within max_msg_sz), the R_Key names an MR of the QP's PD with
 *     remote write that holds the range (a type 2 window: bound through
 *     this QP) - not ODP memory, whose copy may fault (exec_write); no
 *     key check for zero bytes; a WRITE ONLY placed while checked
 *     (rx_place.c) had these checks there.
 *   exec_send: the payload fits the receive WQE's SGEs, their L_Keys name
 *     MRs of the PD with local write (uroce_sge_copy; 9.9.3.1.2 else).
 *   SEND ONLY with invalidate is not taken (its window invalidation). */
static bool rcv_fast(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	enum ibv_qp_state qs = qp->attr.qp_state;
	struct uroce_rwqe *w = NULL;
	enum ibv_wc_status st;
	int r = 0;

	switch (pkt->opcode) {
	case UR_OPC_SEND_ONLY:
	case UR_OPC_SEND_ONLY_IMM:
	case UR_OPC_WRITE_ONLY:
	case UR_OPC_WRITE_ONLY_IMM:
		break;
	default:
		return false;
	}
	if (!(uroce_rc_fast() & UROCE_RC_FAST_RESP) || qp->tr != UR_TR_RC ||
	    !(qs == IBV_QPS_RTS || (qs == IBV_QPS_RTR && qp->resp.comm_est)) ||
	    (pkt->bth[4] & UR_BTH4_PULL) || pkt->psn != qp->resp.psn || (qp->sk && qp->sk->nheld) ||
	    qp->resp.in_send || qp->resp.in_write || qp->resp.have_rwqe || pkt->paylen > qp->mtu)
		return false;
	if (pkt->mask & URM_RWR) {
		if (qp->ibqp.qp_base.srq || qp->rq.head == qp->rq.tail)
			return false;
		w = &qp->rq.wqe[qp->rq.tail & (qp->rq.size - 1)];
	}
	if (pkt->mask & URM_SEND) {
		pthread_rwlock_rdlock(&qp->ctx->mr_lock);
		r = uroce_sge_copy(qp->ctx, resp_pd(qp), w->sg, w->num_sge, 0, pkt->payload,
				   pkt->paylen, true, &st);
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
	} else if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) ||
		   ur_reth_len(pkt) != pkt->paylen) {
		r = -1;
	} else if (pkt->paylen && !pkt->placed) {
		struct uroce_mr *mr;

		pthread_rwlock_rdlock(&qp->ctx->mr_lock);
		mr = rkey_mr(qp, ur_reth_rkey(pkt), ur_reth_va(pkt), pkt->paylen,
			     IBV_ACCESS_REMOTE_WRITE);
		if (mr && !mr->odp)
			memcpy(uroce_mr_ptr(mr, ur_reth_va(pkt), pkt->paylen), pkt->payload,
			       pkt->paylen);
		else
			r = -1;
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
	}
	if (r)
		return false;
	ur_trace("QP 0x%06x rx %s psn %u: fast", qp->ibqp.qp_base.qp_num,
		 uroce_opcode_name(pkt->opcode), pkt->psn);
	uroce_count(qp->ctx, rx_fast, 1);
	if (qp->sk && (pkt->bth[4] & UR_BTH4_SACK))
		qp->sk->peer_req = true; /* uroce_sack_rx */
	qp->resp.nak_sent = false;	 /* check_psn */
	if (w) {			 /* check_resource: take_rwqe */
		qp->resp.rwqe.wr_id = w->wr_id;
		qp->resp.have_rwqe = true;
		qp->resp.rcv_offset = 0;
		qp->rq.tail++;
		rq_prefetch(qp);
	}
	qp->resp.write_next = false; /* execute */
	if (pkt->mask & URM_SEND) {
		send_done(qp, pkt);
	} else {
		write_start(qp, pkt);
		write_done(qp, pkt);
	}
	resp_done(qp, pkt);
	return true;
}

void uroce_rcv_request(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_pkt held;

	if (rcv_fast(qp, pkt))
		return;
	uroce_sack_rx(qp, pkt);
	rcv_request(qp, pkt);
	/* Packets held after a gap that this one filled go through the same
	 * steps, in PSN order: placement, completions and ACKs are as if
	 * they had arrived in order. */
	while (uroce_sack_take(qp, qp->resp.psn, &held)) {
		rcv_request(qp, &held);
		uroce_sack_put(qp, &held);
	}
}

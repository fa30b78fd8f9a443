/* RC requester: turns send WQEs into packets (IBTA 9.5, 9.7.1), keeps a
 * window of unacknowledged packets, and retransmits go-back-N from the
 * oldest unacknowledged PSN on timeout, NAK or RNR NAK (9.7.5.2).
 *
 * It runs under qp->lock, from ibv_post_send (the application's thread: a
 * send costs no thread wake-up) and from the progress thread when ACKs open
 * the window or a timer fires.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/shm.h"
#include "transport/rc.h"

enum req_result { REQ_SENT, REQ_BLOCKED, REQ_DONE_WQE, REQ_ERROR };

static const char *const req_result_name[] = {"sent", "blocked", "wqe-done", "error"};

uint32_t uroce_window = UROCE_WINDOW, uroce_window_bytes = UROCE_WINDOW_BYTES;

/* UROCE_WINDOW (packets, 16 to UR_SACK_WIN), read at the first RTR. */
static void window_env(void)
{
	static atomic_int done;
	const char *e;

	if (atomic_load_explicit(&done, memory_order_acquire))
		return;
	e = getenv("UROCE_WINDOW");
	if (e && atoi(e) >= 16) {
		uroce_window = (uint32_t)atoi(e) > UR_SACK_WIN ? UR_SACK_WIN : (uint32_t)atoi(e);
		uroce_window_bytes = 0; /* packets, whatever the MTU */
	}
	atomic_store_explicit(&done, 1, memory_order_release);
}

/* At RTR: take piggy-backed ACKs (pkt.h UR_BTH4_PIGGY) between uroce peers
 * in native mode, RC only; UROCE_ACK_PIGGY=0: neither take nor send them.
 * Standard-port mode never does: the wire stays IBTA's byte for byte. */
void uroce_piggy_init(struct uroce_qp *qp)
{
	const char *e = getenv("UROCE_ACK_PIGGY"); /* per QP, as UROCE_SACK */

	window_env();
	qp->piggy = qp->tr == UR_TR_RC && !uroce_std_mode() && !(e && !strcmp(e, "0"));
	qp->piggy_peer = false;
}

/* Every packet a QP sends: a response says whether the QP takes ACKs on
 * requests. */
static void piggy_tx(const struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	if (qp->piggy && !(pkt->mask & URM_REQ))
		pkt->bth[4] |= UR_BTH4_PIGGY_OK;
}

/* A SEND or WRITE packet just built (pkt_init, headers set) carries the ACK
 * its QP owes, between its headers and its payload, once the peer said it
 * takes them: one packet instead of two, and no ACK to build, send, read
 * and check on the other side (docs/latency.md, "Session 11").  buf must
 * have UR_PIGGY_BYTES of room beyond the packet. */
static bool piggy_attach(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	if (!qp->piggy_peer || !uroce_resp_piggy_ack(qp, pkt->payload))
		return false;
	pkt->bth[4] |= UR_BTH4_PIGGY;
	pkt->payload += UR_PIGGY_BYTES;
	pkt->len += UR_PIGGY_BYTES;
	return true;
}

int uroce_qp_xmit(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	if (qp->sk)
		uroce_sack_tx(qp, pkt);
	piggy_tx(qp, pkt);
	uroce_pkt_pad(pkt); /* the ICRC: uroce_ep_xmit_nocrc, only where needed */
	ur_trace("QP 0x%06x tx %s psn %u len %u", qp->ibqp.qp_base.qp_num,
		 uroce_opcode_name(pkt->opcode), pkt->psn, pkt->len);
	uroce_qp_stat(qp, tx_pkts, 1);
	uroce_qp_stat(qp, tx_bytes, pkt->len);
	return uroce_ep_xmit_nocrc(qp->ep, &qp->path, pkt->bth, pkt->len);
}

bool uroce_qp_xmit_gather(struct uroce_qp *qp, struct uroce_pkt *pkt, const struct iovec *iov,
			  int niov)
{
	struct uroce_tx_pkt t = {.hdr = pkt->bth,
				 .hlen = (uint32_t)(pkt->payload - pkt->bth),
				 .iov = iov,
				 .niov = niov,
				 .tlen = pkt->pad + UR_ICRC_BYTES,
				 .len = pkt->len};
	uint8_t trl[3 + UR_ICRC_BYTES] = {0};
	uint32_t icrc;

	if (!uroce_ep_gather_ok(qp->ep, &qp->path))
		return false;
	if (qp->sk)
		uroce_sack_tx(qp, pkt);
	piggy_tx(qp, pkt);
	if (uroce_tx_copy_wanted(pkt->len - t.hlen - t.tlen)) {
		t.icrc_ip = &qp->path; /* computed while gso.c copies the payload */
	} else {
		icrc = htole32(uroce_icrc_gather(&qp->path, t.hdr, t.hlen, iov, niov, pkt->pad));
		memcpy(trl + pkt->pad, &icrc, UR_ICRC_BYTES);
	}
	t.trl = trl;
	ur_trace("QP 0x%06x tx %s psn %u len %u (gathered)", qp->ibqp.qp_base.qp_num,
		 uroce_opcode_name(pkt->opcode), pkt->psn, pkt->len);
	uroce_qp_stat(qp, tx_pkts, 1);
	uroce_qp_stat(qp, tx_bytes, pkt->len);
	uroce_ep_xmit_gather(qp->ep, &qp->path, &t);
	return true;
}

/* IBTA Table 45: RNR NAK timer field -> delay. */
uint64_t uroce_rnr_timer_ns(unsigned int code)
{
	static const uint32_t us[32] = {
	    655360, 10,	   20,	  30,	 40,	60,	80,	120,	160,	240,	320,
	    480,    640,   960,	  1280,	 1920,	2560,	3840,	5120,	7680,	10240,	15360,
	    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
	};
	return (uint64_t)us[code & 31] * 1000ull;
}

/* The next retransmission probe, from now (see uroce_req_timer). */
static uint64_t probe_ns(const struct uroce_qp *qp)
{
	uint64_t p = 4 * qp->req.srtt_ns;

	if (p < UROCE_PROBE_MIN_NS)
		p = UROCE_PROBE_MIN_NS;
	return p << (qp->req.probes < 16 ? qp->req.probes : 16);
}

/* One QP of an endpoint probes during one silence: the first whose probe
 * falls due.  A silence that is the peer descheduled, not a loss, then
 * costs one window resent instead of one per QP (1,024 QPs resending at
 * once overflowed the peer's socket and turned into real losses). */
static bool probe_claim(struct uroce_qp *qp, unsigned int rx)
{
	unsigned long long mine = (unsigned long long)rx << 32 | 1u << 31 | qp->ibqp.qp_base.qp_num;
	unsigned long long cur = atomic_load(&qp->ep->probe_owner);

	if (cur == mine)
		return true;
	if ((cur & 1u << 31) && (unsigned int)(cur >> 32) == rx)
		return false; /* another QP's silence */
	return atomic_compare_exchange_strong(&qp->ep->probe_owner, &cur, mine);
}

/* The responder showed progress (or sending starts): the timeout starts
 * over, and the first probe is due in probe_ns(). */
static void req_arm_at(struct uroce_qp *qp, uint64_t now)
{
	uint64_t t = rc_timeout_ns(qp), p;

	if (!qp->req.inflight || !t) {
		qp->req.deadline_ns = 0;
		return;
	}
	qp->req.progress_ns = now ? now : uroce_now_ns();
	qp->req.probes = 0;
	qp->req.probe_rx = atomic_load_explicit(&qp->ep->rx_batches, memory_order_relaxed);
	p = probe_ns(qp);
	qp->req.deadline_ns = qp->req.progress_ns + (p < t ? p : t);
	uroce_progress_arm(qp->ctx, qp->req.deadline_ns);
}

void uroce_req_arm(struct uroce_qp *qp)
{
	req_arm_at(qp, 0);
}

/* The clock for a packet about to be sent: one clock_gettime serves its
 * pacing check, its selective-repeat record (uroce_sack_tx), its round
 * trip's start and the timer armed after it - four reads per packet
 * before, about a tenth of a same-host one-way message's CPU time
 * (docs/design.md, "The per-message CPU of the same-host wire"). */
static uint64_t req_clock(struct uroce_qp *qp)
{
	return qp->req.tx_ns = uroce_now_ns();
}

/* A run of packets (uroce_req_run) reads the clock for its first packet
 * and then once per this many: the packets between take the last reading
 * - a few microseconds early for a round trip sample or a RACK send
 * time, against a clock_gettime per packet (about 50 ns here: 2.3-2.6%
 * of a veth stream's samples). */
#define REQ_CLOCK_EVERY 16u

/* An ACK covers psn: the round trip sample, if it is the one timed. */
void uroce_req_rtt(struct uroce_qp *qp, uint32_t psn)
{
	uint64_t s, now;

	if (!qp->req.rtt_on || ur_psn_diff(psn, qp->req.rtt_psn) < 0)
		return;
	qp->req.rtt_on = false;
	now = uroce_ep_rx_clock(qp->ep);
	if (now < qp->req.rtt_t0) /* sent after the batch's clock was read */
		now = uroce_now_ns();
	s = now - qp->req.rtt_t0;
	qp->req.srtt_ns = qp->req.srtt_ns ? qp->req.srtt_ns - qp->req.srtt_ns / 8 + s / 8 : s;
	if (qp->sk)
		uroce_cc_rtt(qp, s);
}

static uint8_t pick_opcode(const struct uroce_swqe *w, bool first, bool last)
{
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

	switch (w->opcode) {
	case IBV_WR_SEND_WITH_INV:
		if (last)
			return first ? UR_OPC_SEND_ONLY_INV : UR_OPC_SEND_LAST_INV;
		return first ? UR_OPC_SEND_FIRST : UR_OPC_SEND_MIDDLE;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		if (first && last)
			return imm ? UR_OPC_SEND_ONLY_IMM : UR_OPC_SEND_ONLY;
		if (first)
			return UR_OPC_SEND_FIRST;
		if (last)
			return imm ? UR_OPC_SEND_LAST_IMM : UR_OPC_SEND_LAST;
		return UR_OPC_SEND_MIDDLE;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		if (first && last)
			return imm ? UR_OPC_WRITE_ONLY_IMM : UR_OPC_WRITE_ONLY;
		if (first)
			return UR_OPC_WRITE_FIRST;
		if (last)
			return imm ? UR_OPC_WRITE_LAST_IMM : UR_OPC_WRITE_LAST;
		return UR_OPC_WRITE_MIDDLE;
	default:
		return UR_OPC_READ_REQ;
	}
}

void uroce_req_fail_wqe(struct uroce_qp *qp, uint32_t i, enum ibv_wc_status st)
{
	struct uroce_swqe *w = swqe(qp, i);

	ur_dbg("QP 0x%06x: WQE %llu fails: %s", qp->ibqp.qp_base.qp_num,
	       (unsigned long long)w->wr_id, ibv_wc_status_str(st));
	w->status = st;
	w->state = UROCE_WQE_DONE;
	if (!qp->req.halted || (int32_t)(i - qp->req.halt_at) < 0) {
		qp->req.halted = true;
		qp->req.halt_at = i;
	}
	if (i == qp->sq.req) { /* failed while being sent */
		qp->sq.req++;
		qp->req.offset = 0;
	}
	uroce_comp_retire(qp);
}

/* The next n PSNs are sent: max_psn keeps the highest ever sent, since
 * after a go-back the responder may acknowledge past req.psn (comp.c). */
static void req_advance(struct uroce_qp *qp, uint32_t n)
{
	uint32_t psn = qp->req.psn;

	qp->req.psn = (psn + n) & UR_PSN_MASK;
	if (ur_psn_diff(qp->req.psn, qp->req.max_psn) <= 0)
		return;
	/* a first transmission: time its round trip unless one is being
	 * timed (never a resent one: Karn's rule) */
	if (!qp->req.rtt_on && qp->tr != UR_TR_UC) {
		qp->req.rtt_on = true;
		qp->req.rtt_psn = (psn + n - 1) & UR_PSN_MASK;
		qp->req.rtt_t0 = qp->req.tx_ns ? qp->req.tx_ns : uroce_now_ns();
	}
	qp->req.max_psn = qp->req.psn;
}

/* Is a WQE that sends packets posted behind the one being sent?  Its last
 * packet will ask for the ACK that covers this one too. */
static bool sends_behind(struct uroce_qp *qp)
{
	uint32_t next = qp->sq.req + 1;

	if (next == qp->sq.head || (swqe(qp, next)->send_flags & IBV_SEND_FENCE))
		return false; /* none, or one that may wait for this one */
	switch (swqe(qp, next)->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return true;
	default:
		return false; /* a local operation: nothing may follow */
	}
}

/* AckReq (IBTA 9.7.5.1): on the last packet of a message with nothing
 * sent behind it, every UROCE_ACKREQ_EVERY packets, at three quarters of
 * the QP's window, on the packet after which the QP may send no more (its
 * window, its congestion window or the endpoint's budget), and on every
 * packet once the endpoint's budget is three quarters used: a peer that
 * acknowledges only what asks for it (kernel rxe, and uroce's coalescing of
 * a stream's ACKs) must answer before the requester stops, or the QP would
 * stall until its timeout.  A stream of messages asks about once per
 * UROCE_ACKREQ_EVERY packets instead of once per message. */
struct req_lim {
	uint32_t w, b, cwnd; /* rc_peer_window, rc_ep_budget, rc_cwnd */
};

static void req_lim(const struct uroce_qp *qp, struct req_lim *l)
{
	l->w = rc_peer_window(qp);
	l->b = rc_ep_budget(qp);
	l->cwnd = rc_cwnd(qp);
}

static bool ack_wanted_in(struct uroce_qp *qp, bool last, const struct req_lim *l)
{
	if ((last && !sends_behind(qp)) || ur_psn_diff(qp->req.psn, qp->req.max_psn) < 0)
		return true; /* (and every packet sent again after a go-back) */
	return (qp->req.psn % UROCE_ACKREQ_EVERY) == 0 || qp->req.inflight + 1 == l->w - l->w / 4 ||
	       rc_ep_inflight(qp) + 1 >= l->b - l->b / 4 || !rc_may_send_in(qp, 2, l->cwnd, l->b);
}

static bool ack_wanted(struct uroce_qp *qp, bool last)
{
	struct req_lim l;

	req_lim(qp, &l);
	return ack_wanted_in(qp, last, &l);
}

/* The headers of a packet of w (a SEND or WRITE) with PSN psn and paylen
 * payload bytes. */
static void data_pkt_hdr(struct uroce_qp *qp, struct uroce_swqe *w, struct uroce_pkt *pkt,
			 uint8_t *buf, uint32_t psn, uint32_t paylen, bool first, bool last,
			 bool ackreq)
{
	uroce_pkt_init(pkt, buf, pick_opcode(w, first, last) | qp->tr, qp->attr.dest_qp_num, psn,
		       paylen);
	if (pkt->mask & URM_XRCETH)
		ur_xrceth_set(pkt, w->xrc_srqn);
	if (pkt->mask & URM_RETH)
		ur_reth_set(pkt, w->remote_addr, w->rkey, w->length);
	if (pkt->mask & URM_IMMDT)
		ur_immdt_set_raw(pkt, w->imm_data);
	if (pkt->mask & URM_IETH)
		ur_ieth_set(pkt, w->imm_data); /* the rkey to invalidate */
	if (last && (w->send_flags & IBV_SEND_SOLICITED))
		ur_bth_set_se(pkt, true);
	ur_bth_set_ackreq(pkt, qp->tr != UR_TR_UC && ackreq);
	ur_bth_set_psn(pkt, psn);
}

/* The whole of w as one pull record at psn standing for its npsn PSNs
 * (pull.c): an ONLY packet whose payload names w's memory (L_Keys checked
 * here as for a send), which the responder copies straight into the range
 * it validates.  False: send it packet by packet. */
static bool pull_pkt_xmit(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t psn, uint32_t npsn)
{
	uint8_t buf[UR_BTH_BYTES + 64 + 4096 + 8];
	struct iovec iov[UROCE_MAX_SGE];
	struct uroce_pkt pkt;
	int n;

	/* held through the send: the ring may take the bytes along (shm.c) */
	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	n = uroce_sge_map(qp->ctx, qp->ibqp.qp_base.pd, w->sg, w->num_sge, 0, w->length, false, iov,
			  UROCE_MAX_SGE);
	if (!n || uroce_pull_desc_len(n) > qp->mtu) {
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		return false; /* an error shows packet by packet; ODP memory */
	}
	data_pkt_hdr(qp, w, &pkt, buf, psn, uroce_pull_desc_len(n), true, true, true);
	uroce_pull_desc_put(pkt.payload, npsn, iov, n);
	pkt.bth[4] |= UR_BTH4_PULL;
	uroce_qp_xmit(qp, &pkt);
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	if (qp->sk) {
		/* selective repeat: each PSN it stands for was sent, and is
		 * sent again as a packet if a selective ACK shows it missing */
		uint8_t hdr[UR_BTH_BYTES] = {0};
		struct uroce_pkt p = {.bth = hdr, .mask = URM_REQ};

		for (uint32_t i = 1; i < npsn; i++) {
			p.psn = (psn + i) & UR_PSN_MASK;
			uroce_sack_tx(qp, &p);
		}
	}
	return true;
}

/* Payloads of at most this many bytes are copied into the packet rather
 * than sent from the MR (docs/latency.md, "Session 11"). */
#define UROCE_GATHER_MIN 256u

/* An RDMA WRITE (without immediate) of more than one packet, between uroce
 * peers over UDP, leaves as one WRITE ONLY per packet, each with its own
 * RETH (the part's address, the R_Key, its length), instead of FIRST,
 * MIDDLE... LAST.  Why: UDP GSO sends a datagram of equal segments (the
 * last may be shorter), and the RETH makes a WRITE FIRST 16 bytes longer
 * than the MIDDLE and LAST packets, so every message cost two GSO datagrams
 * ([FIRST, MIDDLE] [MIDDLE... LAST], gso.c) where a SEND's packets run on
 * across messages at 15 to a datagram; on loopback and veth each datagram
 * is a skb through the whole stack, in the sender's system call.  WRITE
 * ONLY packets of a full MTU are all one length.  Every packet is a
 * complete, valid IBTA RDMA WRITE: the responder checks each one's R_Key,
 * range and access (a part that goes on from the one before is placed
 * while its ICRC is checked, the first copied after: rx_place.c),
 * acknowledges it as a message (one MSN each), and
 * the WQE completes when its last PSN is acknowledged, as before; what the
 * target sees - its memory, no completion - is the same.  Not with an
 * immediate (its completion reports the whole message's length), not in
 * standard-port mode (byte for byte what it was), nor on a path that does
 * not gather (the same-host wire, captures: gso.c).  Decided at the WQE's
 * first packet, so its resends keep the form.  Measured: docs/design.md,
 * "WRITE as WRITE ONLY packets"; UROCE_WRITE_SPLIT=0 turns it off. */
static int split_mode = -1;

static bool write_split(struct uroce_qp *qp, const struct uroce_swqe *w)
{
	return qp->tr == UR_TR_RC && w->opcode == IBV_WR_RDMA_WRITE && w->length > qp->mtu &&
	       !w->inline_data && !uroce_std_mode() &&
	       uroce_env_on("UROCE_WRITE_SPLIT", &split_mode) &&
	       uroce_ep_gather_ok(qp->ep, &qp->path);
}

/* Build and send the packet of w (a SEND or WRITE) at byte offset off with
 * PSN psn; its payload length, or -1 when the local SGEs failed (st). */
static int data_pkt_xmit(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t off, uint32_t psn,
			 bool ackreq, enum ibv_wc_status *st)
{
	uint8_t buf[UR_BTH_BYTES + 64 + 4096 + 8 + UR_PIGGY_BYTES];
	uint32_t paylen = w->length - off;
	struct uroce_pkt pkt;
	bool last, piggy;

	if (paylen > qp->mtu)
		paylen = qp->mtu;
	last = off + paylen == w->length;
	if (w->split) {
		data_pkt_hdr(qp, w, &pkt, buf, psn, paylen, true, true, ackreq);
		ur_reth_set(&pkt, w->remote_addr + off, w->rkey, paylen);
		uroce_count(qp->ctx, tx_write_split, 1);
	} else {
		data_pkt_hdr(qp, w, &pkt, buf, psn, paylen, off == 0, last, ackreq);
	}
	/* on the last packet: the ACK completes the peer's WR, and a peer
	 * that then stops polling (ib_write_lat spins on memory) must have
	 * read the message's other packets already - they come first */
	piggy = last && piggy_attach(qp, &pkt);

	if (w->inline_data) {
		memcpy(pkt.payload, w->inline_data + off, paylen);
	} else if (paylen) {
		struct iovec iov[UROCE_MAX_SGE];
		int r, n;

		pthread_rwlock_rdlock(&qp->ctx->mr_lock);
		/* the payload leaves from the MR, read again on a resend; a few
		 * bytes are copied: one piece leaves with one sendto, where a
		 * gathered packet is three iovecs and a sendmsg (endpoint.c) */
		n = paylen <= UROCE_GATHER_MIN
			? 0
			: uroce_sge_map(qp->ctx, qp->ibqp.qp_base.pd, w->sg, w->num_sge, off,
					paylen, false, iov, UROCE_MAX_SGE);
		if (n && uroce_qp_xmit_gather(qp, &pkt, iov, n)) {
			pthread_rwlock_unlock(&qp->ctx->mr_lock);
			return (int)paylen;
		}
		r = uroce_sge_copy(qp->ctx, qp->ibqp.qp_base.pd, w->sg, w->num_sge, off,
				   pkt.payload, paylen, false, st);
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		if (r) {
			qp->resp.ack_pending |= piggy; /* not sent: still owed */
			return -1;
		}
	}
	uroce_qp_xmit(qp, &pkt);
	return (int)paylen;
}

/* A run: the next packets of one SEND or WRITE built and queued as one
 * (docs/design.md, "Session 20").  The per-packet path above pays, for
 * every packet, a header built from the opcode table, an SGE map and MR
 * look-up under ctx->mr_lock, a selective-repeat record through
 * uroce_sack_tx and the transmit batch's lock; a run takes the lock and
 * maps the SGEs once, stamps each packet's header from one template (only
 * the PSN, AckReq, a split WRITE's RETH, and the first and last packet's
 * opcode differ), writes the records in one loop and queues the packets
 * under one tx_lock.  The rules stay per packet: the window, congestion
 * window and endpoint budget before each (rc_may_send), AckReq
 * (ack_wanted), the ICRC, the fault injector's decision
 * (uroce_ep_xmit_gather_run).  Only first transmissions of an RC QP that
 * gathers, not paced, not inline; a resend, a go-back, pacing, a
 * capture (no gather) and a short last packet go packet by packet.
 * UROCE_TX_RUN=0 turns it off (A/B). */
#define REQ_RUN_HDR 96u /* a packet's headers, a piggy-backed ACK included */

static int run_mode = -1;

/* The next packet's payload, pay bytes from the cursor (*ai, *aoff) in
 * all[], as pieces at out; their count. */
static int run_slice(const struct iovec *all, int *ai, size_t *aoff, uint32_t pay,
		     struct iovec *out)
{
	int m = 0;

	while (pay) {
		size_t k = all[*ai].iov_len - *aoff;

		if (k > pay)
			k = pay;
		out[m++] =
		    (struct iovec){.iov_base = (uint8_t *)all[*ai].iov_base + *aoff, .iov_len = k};
		pay -= (uint32_t)k;
		*aoff += k;
		if (*aoff == all[*ai].iov_len) {
			(*ai)++;
			*aoff = 0;
		}
	}
	return m;
}

/* Up to *npkts packets of w from qp->req.offset as a run: REQ_SENT or
 * REQ_DONE_WQE with *npkts set to the packets sent, or -1: send the
 * next packet by itself. */
static int send_data_run(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t *npkts)
{
	uint8_t hdr[REQ_CLOCK_EVERY][REQ_RUN_HDR], trl[REQ_CLOCK_EVERY][8], tmpl[REQ_RUN_HDR];
	struct iovec all[UROCE_MAX_SGE], piov[UROCE_MAX_SGE + REQ_CLOCK_EVERY];
	struct uroce_tx_pkt t[REQ_CLOCK_EVERY];
	uint32_t off = qp->req.offset, psn0 = qp->req.psn, mtu = qp->mtu, max = *npkts, n, len;
	uint32_t bytes = 0, thlen = 0;
	struct uroce_pkt tp;
	struct req_lim lim;
	bool done = false, have_tmpl = false, copy_full; /* done: w's last packet is in the run */
	size_t aoff = 0;
	int nall, ai = 0, pi = 0;

	if (max < 2 || qp->tr != UR_TR_RC || w->inline_data || mtu <= UROCE_GATHER_MIN ||
	    w->length - off <= mtu || ur_psn_diff(psn0, qp->req.max_psn) < 0 ||
	    !uroce_env_on("UROCE_TX_RUN", &run_mode) || uroce_cc_pacing(qp) ||
	    !uroce_ep_gather_ok(qp->ep, &qp->path))
		return -1;
	if (max > REQ_CLOCK_EVERY)
		max = REQ_CLOCK_EVERY;
	len = w->length - off < max * mtu ? w->length - off : max * mtu;
	/* held until the run is queued: the payload pointers stay valid */
	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	nall = uroce_sge_map(qp->ctx, qp->ibqp.qp_base.pd, w->sg, w->num_sge, off, len, false, all,
			     UROCE_MAX_SGE);
	if (!nall) {
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		return -1; /* an error shows packet by packet; ODP memory */
	}
	/* the windows cannot change during the run (qp->lock held: no ACK) */
	req_lim(qp, &lim);
	copy_full = uroce_tx_copy_wanted(mtu);
	for (n = 0; n < max && !done; n++) {
		uint32_t poff = off + n * mtu, pay = w->length - poff, psn = qp->req.psn;
		struct uroce_pkt p;
		uint8_t *h = hdr[n];
		bool ackreq, last;

		if (pay > mtu)
			pay = mtu;
		last = poff + pay == w->length;
		/* the checks req_step makes before each packet */
		if (pay <= UROCE_GATHER_MIN || (n && !rc_may_send_in(qp, 1, lim.cwnd, lim.b)))
			break;
		ackreq = ack_wanted_in(qp, last, &lim);
		if (!last && (w->split || poff)) {
			/* a full MIDDLE (a split WRITE: a WRITE ONLY): the
			 * template, built once, with this PSN and AckReq */
			if (!have_tmpl) {
				data_pkt_hdr(qp, w, &tp, tmpl, psn, mtu, w->split, w->split, false);
				if (qp->sk)
					uroce_sack_stamp(qp, tmpl);
				thlen = (uint32_t)(tp.payload - tp.bth);
				have_tmpl = true;
			}
			memcpy(h, tmpl, thlen);
			p = tp;
			p.bth = h;
			p.payload = h + thlen;
			p.psn = psn;
			p.ackreq = qp->tr != UR_TR_UC && ackreq;
			h[8] = (uint8_t)((h[8] & 0x7f) | (p.ackreq ? 0x80 : 0));
			h[9] = (uint8_t)(psn >> 16);
			h[10] = (uint8_t)(psn >> 8);
			h[11] = (uint8_t)psn;
		} else {
			data_pkt_hdr(qp, w, &p, h, psn, pay, w->split || !poff, w->split || last,
				     ackreq);
			if (qp->sk)
				uroce_sack_stamp(qp, h);
		}
		if (w->split)
			ur_reth_set(&p, w->remote_addr + poff, w->rkey, pay);
		if (last)
			piggy_attach(qp, &p);
		t[n] = (struct uroce_tx_pkt){.hdr = h,
					     .hlen = (uint32_t)(p.payload - h),
					     .iov = &piov[pi],
					     .niov = run_slice(all, &ai, &aoff, pay, &piov[pi]),
					     .tlen = p.pad + UR_ICRC_BYTES,
					     .len = p.len,
					     .trl = trl[n]};
		pi += t[n].niov;
		memset(trl[n], 0, sizeof(trl[n]));
		if (pay == mtu ? copy_full : uroce_tx_copy_wanted(pay)) {
			t[n].icrc_ip = &qp->path; /* computed while gso.c copies it */
		} else {
			uint32_t icrc = htole32(
			    uroce_icrc_gather(&qp->path, h, t[n].hlen, t[n].iov, t[n].niov, p.pad));

			memcpy(trl[n] + p.pad, &icrc, UR_ICRC_BYTES);
		}
		ur_trace("QP 0x%06x tx %s psn %u len %u (run)", qp->ibqp.qp_base.qp_num,
			 uroce_opcode_name(p.opcode), psn, p.len);
		bytes += p.len;
		done = last;
		/* the next packet's checks see this one sent */
		qp->req.psn = (psn + 1) & UR_PSN_MASK;
		qp->req.inflight++;
	}
	if (!n) {
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		return -1;
	}
	if (qp->sk)
		uroce_sack_tx_run(qp, psn0, n);
	uroce_qp_stat(qp, tx_pkts, n);
	uroce_qp_stat(qp, tx_bytes, bytes);
	if (w->split)
		uroce_count(qp->ctx, tx_write_split, n);
	uroce_count(qp->ctx, tx_run, n);
	uroce_ep_xmit_gather_run(qp->ep, &qp->path, t, (int)n);
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	/* req_advance as packet by packet: the first times the round trip */
	qp->req.psn = psn0;
	req_advance(qp, 1);
	if (n > 1)
		req_advance(qp, n - 1);
	*npkts = n;
	qp->req.offset = off + n * mtu;
	if (!done)
		return REQ_SENT;
	w->last_psn = (psn0 + n - 1) & UR_PSN_MASK;
	w->state = UROCE_WQE_SENT;
	qp->sq.req++;
	qp->req.offset = 0;
	return REQ_DONE_WQE;
}

/* Send the next packet of w (a SEND or WRITE) at qp->req.offset, or a run
 * of them (*npkts: at most, then sent). */
static enum req_result send_data_pkt(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t *npkts)
{
	uint32_t off = qp->req.offset, psn = qp->req.psn,
		 npsn = off ? 0 : uroce_pull_npkts(qp, w, false);
	enum ibv_wc_status st;
	bool last;
	int paylen, r;

	if (off == 0) {
		w->first_psn = psn;
		w->split = write_split(qp, w);
	}
	if (!npsn && (r = send_data_run(qp, w, npkts)) >= 0)
		return (enum req_result)r;
	*npkts = 1;
	if (npsn && pull_pkt_xmit(qp, w, psn, npsn)) {
		paylen = (int)w->length; /* all its PSNs in one record */
		last = true;
	} else {
		npsn = 1;
		last = off + (w->length - off > qp->mtu ? qp->mtu : w->length - off) == w->length;
		paylen = data_pkt_xmit(qp, w, off, psn, ack_wanted(qp, last), &st);
	}
	if (paylen < 0) {
		uroce_req_fail_wqe(qp, qp->sq.req, st);
		return REQ_ERROR;
	}
	req_advance(qp, npsn);
	qp->req.offset += (uint32_t)paylen;
	if (qp->tr != UR_TR_UC)
		qp->req.inflight += npsn;
	if (last) {
		w->last_psn = (psn + npsn - 1) & UR_PSN_MASK;
		w->state = UROCE_WQE_SENT;
		qp->sq.req++;
		qp->req.offset = 0;
		if (qp->tr == UR_TR_UC) {
			/* UC: complete once the last packet has left (9.8.2) */
			w->state = UROCE_WQE_DONE;
			uroce_comp_retire(qp);
		}
		return REQ_DONE_WQE;
	}
	return REQ_SENT;
}

/* The READ request for [off, off + len) of w, at psn. */
static void read_req_xmit(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t off, uint32_t len,
			  uint32_t psn)
{
	uint8_t buf[UR_BTH_BYTES + UR_XRCETH_BYTES + UR_RETH_BYTES + 8];
	struct uroce_pkt pkt;

	uroce_pkt_init(&pkt, buf, UR_OPC_READ_REQ | qp->tr, qp->attr.dest_qp_num, psn, 0);
	if (pkt.mask & URM_XRCETH)
		ur_xrceth_set(&pkt, w->xrc_srqn);
	ur_reth_set(&pkt, w->remote_addr + off, w->rkey, len);
	ur_bth_set_ackreq(&pkt, true);
	ur_bth_set_psn(&pkt, psn);
	if (qp->req.pull_off)
		pkt.bth[4] |= UR_BTH4_NOPULL; /* we failed to pull: responses by the ring */
	uroce_qp_xmit(qp, &pkt);
}

/* How much of w a READ request at offset off asks for: up to the end of
 * its chunk.  Chunks start at multiples of the chunk size, also when a
 * chunk is asked for again from a lost response on: a repeated request
 * must not reach into the next chunk, which the responder may already
 * have executed as a request of its own. */
static uint32_t read_len(const struct uroce_qp *qp, const struct uroce_swqe *w, uint32_t off)
{
	uint32_t len = w->length - off, chunk = rc_read_chunk(qp) * qp->mtu;

	return len > chunk - off % chunk ? chunk - off % chunk : len;
}

/* An RDMA READ request: one packet that consumes one PSN per response
 * packet (IBTA 9.4.4).  After a retry, offset skips what already arrived. */
static enum req_result send_read(struct uroce_qp *qp, struct uroce_swqe *w)
{
	uint32_t off = qp->req.offset, len = read_len(qp, w, off), n;

	n = len ? (len + qp->mtu - 1) / qp->mtu : 1;
	if (!rc_may_send(qp, n))
		return REQ_BLOCKED;
	if (!off) {
		w->first_psn = qp->req.psn;
		w->npkts = swqe_npkts(qp, w);
		w->last_psn = (w->first_psn + w->npkts - 1) & UR_PSN_MASK;
	}
	read_req_xmit(qp, w, off, len, qp->req.psn);
	qp->req.inflight += n;
	req_advance(qp, n);
	qp->req.rd_inflight++; /* one per READ request, chunks included */
	qp->req.offset += len;
	if (qp->req.offset < w->length)
		return REQ_SENT;
	w->state = UROCE_WQE_SENT;
	qp->sq.req++;
	qp->req.offset = 0;
	return REQ_DONE_WQE;
}

static void atomic_xmit(struct uroce_qp *qp, struct uroce_swqe *w, uint32_t psn)
{
	uint8_t buf[UR_BTH_BYTES + UR_XRCETH_BYTES + UR_ATMETH_BYTES + 8];
	struct uroce_pkt pkt;
	uint8_t opc = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? UR_OPC_CMP_SWAP : UR_OPC_FETCH_ADD;

	uroce_pkt_init(&pkt, buf, opc | qp->tr, qp->attr.dest_qp_num, psn, 0);
	if (pkt.mask & URM_XRCETH)
		ur_xrceth_set(&pkt, w->xrc_srqn);
	ur_atmeth_set(&pkt, w->remote_addr, w->rkey,
		      w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->swap : w->compare_add,
		      w->compare_add);
	ur_bth_set_ackreq(&pkt, true);
	ur_bth_set_psn(&pkt, psn);
	uroce_qp_xmit(qp, &pkt);
}

/* An atomic request: one packet, one PSN, answered by ATOMIC ACKNOWLEDGE. */
static enum req_result send_atomic(struct uroce_qp *qp, struct uroce_swqe *w)
{
	w->first_psn = w->last_psn = qp->req.psn;
	w->npkts = 1;
	atomic_xmit(qp, w, qp->req.psn);
	req_advance(qp, 1);
	qp->req.inflight++;
	qp->req.rd_inflight++;
	w->state = UROCE_WQE_SENT;
	qp->sq.req++;
	qp->req.offset = 0;
	return REQ_DONE_WQE;
}

/* Selective repeat (sack.c): the packet at psn, sent before, again - the
 * same bytes, with AckReq.  Inside a READ, the request for the rest of
 * its chunk from psn on (the responder answers a duplicate READ from
 * memory, 9.7.5.1.1).  Nothing of the send state moves. */
static bool req_resend(struct uroce_qp *qp, uint32_t psn);

bool uroce_req_resend(struct uroce_qp *qp, uint32_t psn)
{
	bool sent;

	req_clock(qp);
	sent = req_resend(qp, psn);
	qp->req.tx_ns = 0;
	return sent;
}

static bool req_resend(struct uroce_qp *qp, uint32_t psn)
{
	enum ibv_wc_status st;
	struct uroce_swqe *w;
	uint32_t i, k, n;

	if (!uroce_wqe_idx_for_psn(qp, psn, &i))
		return false;
	if (qp->req.halted && (int32_t)(i - qp->req.halt_at) >= 0)
		return false;
	w = swqe(qp, i);
	k = (uint32_t)ur_psn_diff(psn, w->first_psn);
	switch (w->opcode) {
	case IBV_WR_RDMA_READ: {
		uint32_t off = k * qp->mtu, len, n = 1;

		if (off >= (w->length ? w->length : 1))
			return false;
		/* up to the end of the chunk, or to a response already
		 * placed (comp.c): only what is missing */
		len = read_len(qp, w, off);
		while (n * qp->mtu < len && !rc_sack_placed(qp, (psn + n) & UR_PSN_MASK))
			n++;
		if (n * qp->mtu < len)
			len = n * qp->mtu;
		read_req_xmit(qp, w, off, len, psn);
		return true;
	}
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		atomic_xmit(qp, w, psn);
		return true;
	case IBV_WR_BIND_MW:
	case IBV_WR_LOCAL_INV:
		return false;
	default:
		if (k && k * qp->mtu >= w->length)
			return false;
		/* from its first PSN a pulled message is pulled again */
		if (!k && w->state == UROCE_WQE_SENT && (n = uroce_pull_npkts(qp, w, true)) &&
		    pull_pkt_xmit(qp, w, psn, n))
			return true;
		return data_pkt_xmit(qp, w, k * qp->mtu, psn, true, &st) >= 0;
	}
}

/* Memory-window binds and local invalidates execute when they reach the
 * head of the send queue, in order with the other WQEs (IBTA 10.8.3.4). */
static enum req_result exec_local(struct uroce_qp *qp, struct uroce_swqe *w)
{
	enum ibv_wc_status st = w->opcode == IBV_WR_BIND_MW
				    ? uroce_mw_bind(qp, w->mw, w->rkey, &w->bind)
				    : uroce_mw_invalidate(qp, w->imm_data, false);

	if (st != IBV_WC_SUCCESS) {
		uroce_req_fail_wqe(qp, qp->sq.req, st);
		return REQ_ERROR;
	}
	w->status = st;
	w->state = UROCE_WQE_DONE;
	qp->sq.req++;
	qp->req.offset = 0;
	uroce_comp_retire(qp);
	return REQ_DONE_WQE;
}

/* *npkts: the packets the step may send as a run (send_data_run), then
 * how many it sent. */
static enum req_result req_step(struct uroce_qp *qp, uint32_t *npkts)
{
	struct uroce_swqe *w;
	uint32_t max_rd = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1, run = *npkts;

	*npkts = 1;

	if (qp->sq.req == qp->sq.head)
		return REQ_BLOCKED;
	/* nothing after a failed WQE goes out (it completes in error) */
	if (qp->req.halted && (int32_t)(qp->sq.req - qp->req.halt_at) > 0)
		return REQ_BLOCKED;
	w = swqe(qp, qp->sq.req);
	if (w->state == UROCE_WQE_DONE) {
		/* a go-back passed over it: a local operation already
		 * executed, or the failed WQE itself */
		qp->sq.req++;
		return REQ_DONE_WQE;
	}
	/* a message pulled from our memory puts nothing in the network: it
	 * needs only PSNs the responder can hold and describe (pull.c) */
	if (!rc_may_send(qp, 1) && (qp->req.offset || !uroce_pull_npkts(qp, w, false)))
		return REQ_BLOCKED;
	if (swqe_is_rd(w) && qp->req.rd_inflight >= max_rd)
		return REQ_BLOCKED; /* C9-?: at most max_rd_atomic outstanding */
	/* IBV_SEND_FENCE: wait for outstanding READs/atomics (IBTA 10.8.3.3) */
	if ((w->send_flags & IBV_SEND_FENCE) && qp->req.offset == 0 && qp->req.rd_inflight)
		return REQ_BLOCKED;
	if (w->opcode == IBV_WR_BIND_MW || w->opcode == IBV_WR_LOCAL_INV)
		return exec_local(qp, w);
	/* no faster than the window's rate (cc.c): a wake-up sends on.  With
	 * nothing in flight there is no burst to space out: the packet goes
	 * at once.  Loss mode can be entered on host delay alone (a loaded
	 * machine's ping-pong: the delay law shrinks the window to its least
	 * and reads the queue that stays as a competitor's), and then every
	 * message of a request/response stream waited for a progress-thread
	 * wake-up - forever where the application polls alone
	 * (test_addrsock, progress threads stopped, 1 run in 8 under load). */
	if (qp->req.inflight && uroce_cc_pacing(qp) && !uroce_cc_pace_ok(qp, req_clock(qp)))
		return REQ_BLOCKED;
	if (!qp->req.tx_ns)
		req_clock(qp);
	/* same host: room in the ring for a pulled message's bytes (pull.c) */
	if (!qp->req.offset && uroce_pull_wait(qp, w))
		return REQ_BLOCKED;
	if (w->opcode == IBV_WR_RDMA_READ)
		return send_read(qp, w);
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return send_atomic(qp, w);
	*npkts = run;
	return send_data_pkt(qp, w, npkts);
}

void uroce_req_progress(struct uroce_qp *qp)
{
	uroce_req_run(qp);
	uroce_ep_flush(qp->ep);
}

void uroce_req_run(struct uroce_qp *qp)
{
	enum req_result r;
	uint64_t now = 0;		 /* the last packet's clock */
	uint32_t k = REQ_CLOCK_EVERY, n; /* packets sent on that reading */

	if (qp->attr.qp_state != IBV_QPS_RTS)
		return;
	if (qp->req.rnr_until_ns) {
		if (uroce_now_ns() < qp->req.rnr_until_ns)
			return;
		qp->req.rnr_until_ns = 0;
	}
	do {
		/* the clock read once per REQ_CLOCK_EVERY packets: a run
		 * takes at most what the reading has left */
		if (k >= REQ_CLOCK_EVERY)
			k = 0;
		qp->req.tx_ns = k ? now : 0;
		n = REQ_CLOCK_EVERY - k;
		r = req_step(qp, &n);
		ur_trace("QP 0x%06x req step: %s", qp->ibqp.qp_base.qp_num, req_result_name[r]);
		if (r == REQ_SENT || r == REQ_DONE_WQE) {
			now = qp->req.tx_ns;
			k += n;
		}
	} while (r == REQ_SENT || r == REQ_DONE_WQE);
	qp->req.tx_ns = 0;
	if (r == REQ_BLOCKED && qp->sk && qp->sk->diag)
		uroce_sd_blocked(qp);
	if (qp->req.inflight && !qp->req.deadline_ns)
		req_arm_at(qp, now);
	rc_sync_inflight(qp);
}

/* Go back to psn: the WQE that holds it becomes the next to send, from the
 * matching offset; later WQEs are sent again as well (go-back-N). */
void uroce_req_go_back(struct uroce_qp *qp, uint32_t psn)
{
	uint32_t i;

	for (i = qp->sq.tail; i != qp->sq.req; i++) {
		struct uroce_swqe *w = swqe(qp, i);

		if (w->state == UROCE_WQE_SENT && ur_psn_diff(psn, w->last_psn) <= 0)
			break;
	}
	if (i == qp->sq.req) {
		/* Not in a fully sent WQE: it can only be in the one being sent
		 * (sq.req, offset > 0), whose offset must then move back too. */
		if (ur_psn_diff(psn, qp->req.psn) >= 0 || !qp->req.offset ||
		    ur_psn_diff(psn, swqe(qp, i)->first_psn) < 0)
			return; /* nothing unacknowledged sent at or after psn */
	}
	uroce_qp_count(qp, retransmits, (unsigned long)ur_psn_diff(qp->req.psn, psn));
	uroce_qp_count(qp, retries, 1);
	{
		struct uroce_swqe *w = swqe(qp, i);
		int32_t k = ur_psn_diff(psn, w->first_psn);

		if (k < 0)
			k = 0;
		qp->req.offset = (uint32_t)k * qp->mtu;
		psn = (w->first_psn + (uint32_t)k) & UR_PSN_MASK;
		/* DONE ones stay done: a local operation is not executed
		 * twice, a failed WQE not sent again (req_step skips both) */
		for (uint32_t j = i; j != qp->sq.req; j++)
			if (swqe(qp, j)->state != UROCE_WQE_DONE)
				swqe(qp, j)->state = UROCE_WQE_POSTED;
		qp->sq.req = i;
	}
	ur_dbg("QP 0x%06x: go back to psn %u (was at %u)", qp->ibqp.qp_base.qp_num, psn,
	       qp->req.psn);
	qp->req.psn = psn;
	qp->req.inflight = 0;
	if (qp->sk)
		uroce_sack_went_back(qp); /* all of it is sent again */
	qp->req.rd_inflight = 0;
	qp->req.deadline_ns = 0;
	qp->req.rtt_on = false;
	rc_sync_inflight(qp);
}

/* IBTA 9.7.6.1.3: retries exhausted, the oldest outstanding WQE fails with
 * IBV_WC_RETRY_EXC_ERR (and the QP with it). */
void uroce_req_retry_exceeded(struct uroce_qp *qp)
{
	uint64_t now = uroce_now_ns();

	/* A clear error for the user: how long the peer has said nothing
	 * (dead, or its process not running - docs/selective-repeat.md,
	 * "Session 20, helper rex20"), and what the transport knew (info) */
	if (qp->req.heard_ns && now > qp->req.heard_ns)
		ur_warn(
		    "QP 0x%06x: transport retry counter exceeded (%d tries without progress), una "
		    "PSN %u, next PSN %u; last response from QP 0x%06x %lu ms ago",
		    qp->ibqp.qp_base.qp_num, qp->attr.retry_cnt + 1, qp->req.una_psn, qp->req.psn,
		    qp->attr.dest_qp_num, (unsigned long)((now - qp->req.heard_ns) / 1000000));
	else
		ur_warn(
		    "QP 0x%06x: transport retry counter exceeded (%d tries without progress), una "
		    "PSN %u, next PSN %u; no response from QP 0x%06x",
		    qp->ibqp.qp_base.qp_num, qp->attr.retry_cnt + 1, qp->req.una_psn, qp->req.psn,
		    qp->attr.dest_qp_num);
	uroce_sack_dump(qp, UROCE_LOG_INFO);
	if (qp->sq.tail == qp->sq.head) {
		uroce_qp_error(qp);
		return;
	}
	uroce_req_fail_wqe(qp, qp->sq.tail, IBV_WC_RETRY_EXC_ERR);
}

/* Retransmission timer (IBTA 9.7.6.1.3, C9-139..141): resend from the oldest
 * unacknowledged PSN; after retry_cnt retries the WQE fails.  retry_cnt 7 is
 * seven retries, as on hardware: only rnr_retry 7 means forever, so a peer
 * that vanished fails the WQEs of programs that use 7 (ibv_rc_pingpong,
 * perftest) instead of hanging them. */
void uroce_req_timer(struct uroce_qp *qp, uint64_t now)
{
	if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_SQD)
		return;
	if (qp->req.rnr_until_ns && now >= qp->req.rnr_until_ns) {
		uroce_req_progress(qp);
		return;
	}
	if (qp->req.wake_ns && now >= qp->req.wake_ns) {
		/* paced, or holes waiting out the reordering window (sack.c) */
		qp->req.wake_ns = 0;
		uroce_sd_cause(qp, UR_SD_WAKE);
		if (qp->sk)
			uroce_sack_rack(qp, now);
		uroce_req_progress(qp);
	}
	if (!qp->req.deadline_ns || now < qp->req.deadline_ns)
		return;
	qp->req.deadline_ns = 0;
	if (!qp->req.inflight)
		return;
	/* (a ring cannot lose a record: silence on one means a broken ring) */
	uroce_shm_recheck(qp->ep, &qp->path);
	if (now - qp->req.progress_ns < rc_timeout_ns(qp)) {
		/* A probe: the endpoint has heard nothing at all for a few of
		 * this QP's round trips, well before the timeout - a packet
		 * the responder cannot NAK was lost (the last of a burst, a
		 * resent one, or the NAK itself).  Resend from una_psn
		 * without spending a retry: retries count whole timeouts since
		 * the last progress, as before, so a dead peer fails as late
		 * as it did.  Duplicates are harmless (9.7.5.1.1).  While the
		 * endpoint hears anything, the silence is a queue (1,024 QPs
		 * behind one socket), not a loss: the probe waits. */
		unsigned int rx = atomic_load_explicit(&qp->ep->rx_batches, memory_order_relaxed);
		uint64_t next, end = qp->req.progress_ns + rc_timeout_ns(qp);
		/* no probe while READs/atomics are outstanding: resending them
		 * makes the responder replay every READ from una_psn, which
		 * against a slow responder (kernel rxe under load) never
		 * catches up; their loss is found by the timeout.  With
		 * selective repeat a probe asks only for what is missing. */
		bool probe = rx == qp->req.probe_rx && (!qp->req.rd_inflight || rc_sack_req(qp)) &&
			     probe_claim(qp, rx);

		if (probe) {
			qp->req.probes++;
			if (rc_sack_req(qp))
				uroce_sack_probe(qp); /* only what is not known received */
			else
				uroce_req_go_back(qp, qp->req.una_psn);
		}
		qp->req.probe_rx = rx;
		next = now + probe_ns(qp);
		qp->req.deadline_ns = next < end ? next : end;
		uroce_progress_arm(qp->ctx, qp->req.deadline_ns);
		if (probe)
			uroce_req_progress(qp); /* (the deadline set: not re-armed) */
		return;
	}
	uroce_qp_count(qp, timeouts, 1);
	if (qp->sk && qp->sk->diag) {
		ur_info("QP 0x%06x: timeout, retry %d left", qp->ibqp.qp_base.qp_num,
			qp->req.retry_cnt);
		uroce_sack_dump(qp, UROCE_LOG_INFO);
	}
	uroce_cc_timeout(qp);
	if (qp->req.retry_cnt == 0) {
		uroce_req_retry_exceeded(qp);
		return;
	}
	qp->req.retry_cnt--;
	if (rc_sack_req(qp)) {
		uroce_sack_timeout(qp);
		uroce_req_arm(qp);
	} else {
		uroce_req_go_back(qp, qp->req.una_psn);
	}
	uroce_req_progress(qp);
}

/* Shared by the RC requester, completer and responder (qp->lock held). */
#ifndef UROCE_RC_H
#define UROCE_RC_H

#include "uroce.h"

/* Retransmission probes (req.c): the first at four smoothed round trips,
 * at least UROCE_PROBE_MIN_NS, each next one twice as late.  The floor is
 * above what an ACK may legitimately be deferred (the progress engine's
 * grace slice, 1 ms; src/net/endpoint.c): at 1 ms a deferred ACK drew
 * probes - duplicates resent for nothing. */
#define UROCE_PROBE_MIN_NS 3000000ull

/* Packets a requester may have in flight per QP (the default of
 * uroce_window, below), and how often it asks for an ACK in a stream (the
 * last packet of its last queued message always does: req.c); a
 * responder's receive batches coalesce the ACKs nobody asked for up to
 * UROCE_ACK_STRIDE PSNs (resp.c).  512, not 256: a target that answers
 * every datagram clocked a 256-packet window into ever smaller refills
 * (docs/design.md, "The window, raised"); not 1,024: half the PSNs a
 * selective ACK describes stay for the holes of a loss. */
#define UROCE_WINDOW	   512u
#define UROCE_ACKREQ_EVERY 64u
#define UROCE_ACK_STRIDE   128u

/* The per-QP window in packets: UROCE_WINDOW, and at most
 * UROCE_WINDOW_BYTES of packets (1 MiB: 256 at MTU 4096, as before; a
 * 512-packet window of 2 MiB on loopback lost bandwidth) - or the
 * environment's UROCE_WINDOW packets whatever the MTU (read at the first
 * RTR, req.c; uroce_window_bytes 0), at most UR_SACK_WIN. */
#define UROCE_WINDOW_BYTES (1u << 20)
extern uint32_t uroce_window, uroce_window_bytes;

/* The congestion window's cap in loss mode (competing with a queue filler,
 * cc.c), UROCE_CC_LOSS_WMAX up to UR_SACK_WIN / 2, above or below
 * uroce_window, which caps it again when the mode ends. */
#define UROCE_LOSS_WINDOW 256u

/* The window against a peer without selective repeat (rc_peer_window). */
#define UROCE_GBN_WINDOW 256u

/* What all the QPs of an endpoint may have in flight together: 8 or 255
 * QPs of one process mostly send to one peer socket, whose buffer is no
 * larger than for one QP (estimated by ours: same host, same limits).
 * Half of SO_RCVBUF as read back, which the kernel doubles to allow for
 * per-packet overhead: the buffer asked for, in packets.  With the one
 * packet each idle QP may always send (rc_may_send), 255 QPs starting at
 * once still mostly fit. */
static inline uint32_t rc_ep_budget(const struct uroce_qp *qp)
{
	uint32_t b = qp->ep->rcvbuf / 2 / (qp->mtu + 128);

	return b < 8 ? 8 : b;
}

/* Packets in flight per QP: the endpoint's budget, at most uroce_window,
 * so a window does not overrun the receiver and turn into retransmissions. */
static inline uint32_t rc_window(const struct uroce_qp *qp)
{
	uint32_t w = rc_ep_budget(qp), c = uroce_window;

	if (uroce_window_bytes && qp->mtu && c > uroce_window_bytes / qp->mtu)
		c = uroce_window_bytes / qp->mtu;
	return w > c ? c : w;
}

/* The endpoint's packets in flight, this QP's latest included. */
static inline uint32_t rc_ep_inflight(const struct uroce_qp *qp)
{
	int t = atomic_load_explicit(&qp->ep->tx_inflight, memory_order_relaxed) +
		(int)(qp->req.inflight - qp->req.counted);

	return t < 0 ? 0 : (uint32_t)t;
}

static inline uint32_t rc_cwnd(const struct uroce_qp *qp);

/* May the QP put n more packets in flight?  Its own window (and its
 * congestion window between uroce peers, sack.c), and the endpoint's budget
 * unless the QP has nothing in flight (each QP may always send, so none
 * starves: a burst from 1,024 QPs is 1,024 packets). */
static inline uint32_t rc_pipe(const struct uroce_qp *qp);

/* (rc_may_send with the QP's windows given: a run reads them once, req.c) */
static inline bool rc_may_send_in(const struct uroce_qp *qp, uint32_t n, uint32_t cwnd,
				  uint32_t budget)
{
	if (!qp->req.inflight)
		return true;
	if (qp->req.inflight + n > UR_SACK_WIN)
		return false; /* more than a responder can hold and describe */
	return rc_pipe(qp) + n <= cwnd && rc_ep_inflight(qp) + n <= budget;
}

static inline bool rc_may_send(const struct uroce_qp *qp, uint32_t n)
{
	return rc_may_send_in(qp, n, rc_cwnd(qp), rc_ep_budget(qp));
}

/* Bring ep->tx_inflight up to date after qp->req.inflight changed (qp->lock
 * held; a relaxed counter: the budget is a bound on a rate, not a lock). */
static inline void rc_sync_inflight(struct uroce_qp *qp)
{
	int d = (int)qp->req.inflight - (int)qp->req.counted;

	if (!d || !qp->ep)
		return;
	atomic_fetch_add_explicit(&qp->ep->tx_inflight, d, memory_order_relaxed);
	qp->req.counted = qp->req.inflight;
}

/* Response packets one RDMA READ request asks for at most: half the send
 * window (rc_window(), fixed for the QP's life in RTS, so chunk boundaries
 * do not move).  A READ's responses come back to back, unpaced; a longer
 * READ is asked for chunk by chunk, each chunk an ordinary READ request for
 * the next part of the buffer at the next PSN (as go-back-N asks again for
 * the rest of a READ, 9.7.5.1.1), so at most a window is in flight and a
 * lost response costs at most one chunk instead of the rest of the message. */
static inline uint32_t rc_read_chunk(const struct uroce_qp *qp)
{
	return rc_window(qp) / 2;
}

static inline struct uroce_swqe *swqe(struct uroce_qp *qp, uint32_t i)
{
	return &qp->sq.wqe[i & (qp->sq.size - 1)];
}

static inline bool swqe_is_rd(const struct uroce_swqe *w)
{
	return w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static inline uint32_t swqe_npkts(const struct uroce_qp *qp, const struct uroce_swqe *w)
{
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return 1;
	return w->length ? (w->length + qp->mtu - 1) / qp->mtu : 1;
}

/* IBTA 9.7.6.1.3 / 12.7.34: local ACK timeout 4.096 us * 2^timeout; 0 is
 * infinite.  A floor keeps a software device from retransmitting into its
 * own scheduling jitter. */
static inline uint64_t rc_timeout_ns(const struct uroce_qp *qp)
{
	uint64_t t;

	if (!qp->attr.timeout)
		return 0;
	t = 4096ull << qp->attr.timeout;
	return t < 2000000ull ? 2000000ull : t;
}

/* The common-case paths of the responder (resp.c rcv_fast) and the
 * completer (comp.c ack_one; docs/latency.md, "Session 20"): bit 0 and bit
 * 1 of UROCE_RC_FAST (default 3; 0: the general steps only, for A/B). */
#define UROCE_RC_FAST_RESP 1u
#define UROCE_RC_FAST_ACK  2u
unsigned int uroce_rc_fast(void);

/* ---- Selective repeat between uroce peers (sack.c, docs/design.md) ----
 * Both ends must offer it: every packet of a QP that does carries
 * UR_BTH4_SACK, and each side notes whether its peer's packets do.  The
 * responder then holds packets that arrive after a gap (up to UR_SACK_WIN
 * PSNs ahead) and runs them through its state machine, in PSN order, once
 * the gap is filled; it answers with selective ACKs; the requester resends
 * only what they show missing.  Otherwise everything is IBTA go-back-N. */
struct uroce_sack_tx {
	uint32_t psn; /* the request packet last sent at this slot */
	uint32_t seq; /* its transmission number (uroce_sack.seq) */
	bool valid, sacked;
	bool resent;  /* UROCE_SACK_DIAG: resent, not yet known received */
	uint64_t ts;  /* when (RACK: reordering or loss, sack.c) */
	uint64_t ts0; /* UROCE_SACK_DIAG: its first transmission */
};

/* Where a loss's time goes (UROCE_SACK_DIAG=1, read at RTR; sack_diag.c):
 * what resent each packet, how long from its first transmission to the
 * first resend and from the last resend until it was known received, why
 * the requester stopped sending and for how long, and how long the
 * responder held something.  Logged at info level when the QP goes. */
enum uroce_sd_cause {
	UR_SD_RACK,
	UR_SD_WAKE,
	UR_SD_PROBE,
	UR_SD_TIMEOUT,
	UR_SD_READ,
	UR_SD_UNA,
	UR_SD_NCAUSE
};
enum uroce_sd_stall {
	UR_SD_SQ,
	UR_SD_SPAN,
	UR_SD_WIN,
	UR_SD_CWND,
	UR_SD_EP,
	UR_SD_PACE,
	UR_SD_RD,
	UR_SD_NSTALL
};
#define UR_SD_NHIST 6
struct uroce_sack_diag {
	uint8_t cause; /* what the resends now are for */
	uint64_t resends[UR_SD_NCAUSE];
	uint64_t l2r_ns, l2r_n, l2r_hist[UR_SD_NHIST];	  /* first tx -> first resend */
	uint64_t fill_ns, fill_n, fill_hist[UR_SD_NHIST]; /* last resend -> received */
	uint64_t stall_ns[UR_SD_NSTALL], stall_n[UR_SD_NSTALL];
	int stall; /* -1: sending */
	uint64_t stall_t0, t_first, t_last;
	uint64_t held_ns, held_t0, held_n; /* responder: time holding something */
	uint64_t resp_log_ns;		   /* responder: the last uroce_sack_resp_diag line */
	uint32_t resp_log_skipped;
};

struct uroce_sack {
	bool peer_req;	/* responder: the requester's packets offer SACK */
	bool peer_resp; /* requester: the responder's packets offer SACK */
	/* responder: packets held after a gap, slot psn % UR_SACK_WIN (bth
	 * NULL: empty), each a private copy; the array allocated at the
	 * first gap */
	uint32_t nheld;
	uint16_t held_epoch; /* the requester incarnation they came from */
	/* responder: the highest PSN held (a selective ACK's map ends there),
	 * and the packets held since the last selective ACK (one that tells
	 * nothing new may wait for the next: uroce_resp_ack_lazy) */
	uint32_t held_hi, held_since;
	bool hold_news; /* the last packet held opened a gap, or was held already */
	struct uroce_pkt *held;
	/* responder: placing held packets at once (rx_place.c): the SEND
	 * MIDDLE packets placed into the receive WQE of the message in
	 * progress after resp.psn = srun_base, up to srun_hi (srun_end: its
	 * LAST among them) */
	bool srun_on, srun_end;
	uint32_t srun_base, srun_hi;
	/* responder: spare buffers for the copies, a list linked through
	 * their first bytes (sack.c) */
	uint8_t *pool;
	uint32_t npool;
	/* responder: the number of the last selective ACK sent (its high
	 * byte); requester: of the newest one received, if any */
	uint8_t sack_no, sack_rx_no;
	bool sack_rx_seen;
	/* requester: what was sent at each slot, and when; how many of the
	 * packets in flight a selective ACK showed held (not in the network) */
	uint32_t seq, nsacked;
	uint32_t sacked_hi; /* no PSN after it is marked held (valid: sacked_on) */
	bool sacked_on;
	struct uroce_sack_tx tx[UR_SACK_WIN];
	/* requester: congestion control (sack.c): the window in packets
	 * << 10, the smallest round trip seen, no decrease before cc_next */
	bool cc;
	uint32_t cwnd;
	uint64_t base_rtt_ns, cc_next_ns, target_ns;
	uint64_t last_rtt_ns;
	uint64_t queue_rtt_ns; /* the smaller of the last two samples */
	bool loss_mode;	       /* competing with a queue filler (sack.c) */
	bool slow_start;       /* from CC_INIT_PKTS until a long round trip */
	uint8_t low_rtts;
	/* loss mode: one decrease per recovery episode, until una passes
	 * what had been sent at the last one (TCP NewReno's recovery point) */
	bool recover_on;
	uint32_t recover_psn;
	uint32_t loss_beta, loss_ai; /* x1024, packets (tunable for the bench) */
	uint32_t run_cwnd;	     /* the window before a run of delay decreases */
	uint64_t run_rtt_ns;	     /* and the delay that started it */
	/* loss mode: round trips since the last sign of a queue filler (a
	 * loss with a long queue, or the yield rule), and how many must pass
	 * before the mode may end (cc.c) */
	uint32_t quiet_rtts, quiet_need;
	/* pacing (cc.c): when the next packet is due at the window's rate,
	 * the burst that may go ahead of it (0: no pacing) */
	uint64_t pace_ns, pace_quantum_ns;
	uint32_t pace_gain; /* the rate against the window's, percent */
	/* UROCE_PACE_COMP=1 (cc.c): the share of the pacer's schedule that
	 * late wake-ups lost (/ 1024, smoothed), measured over periods from
	 * pl_t0, and the rate raised by as much */
	bool pace_comp;
	uint32_t pl_frac;
	uint64_t pl_t0, pl_lost;
	/* loss mode: the window's cap (UROCE_CC_LOSS_WMAX; rc_cwnd) */
	uint32_t loss_wmax;
	/* loss mode's window law (UROCE_CC_LAW, cc.c): Reno's +a per round
	 * trip, or CUBIC's W(t) = C (t - K)^3 + W_max from the last decrease
	 * (epoch), in packets; w_last: the W_max before it (fast
	 * convergence); frac: increments below 1/1024 packet not yet added;
	 * the undo's copy of the state */
	bool cubic;
	uint32_t cubic_beta; /* x1024 */
	double cubic_c, cubic_wmax, cubic_wlast, cubic_k, cubic_frac;
	uint64_t cubic_epoch_ns;
	double undo_wmax, undo_wlast, undo_k;
	uint64_t undo_epoch_ns;
	/* loss mode's two settings (cc.c): the packets sent and resent since
	 * the last look, the share resent (/ 65536, smoothed; valid once
	 * measured), below which (low_loss, / 65536; 0: never) the flow
	 * competes with the larger increase and pacing gain */
	uint32_t lf_sent, lf_resent, loss_frac, low_loss, loss_ai_hi, pace_gain_hi;
	bool loss_frac_on;
	/* reordering (sack.c): the newest transmission a selective ACK
	 * showed arrived (seq, send time, the highest PSN held), its round
	 * trip; the reordering window's steps (RACK); the first hole resent
	 * of an episode, to tell a spurious resend; the window before the
	 * last loss decrease, to undo it then; one resend watched at a
	 * time (rw_*), to see reordering where no decrease was made */
	uint32_t rack_seq, rack_hi, reo_steps;
	uint64_t rack_ts, rack_rtt_ns;
	bool rack_on, sp_on, undo_on, rw_on;
	uint32_t sp_psn, undo_cwnd, rw_psn;
	uint64_t sp_ns, reo_mark, rw_ns;
	/* what the law did, logged at info level when the QP goes (cc.c) */
	struct {
		uint64_t samples, cwnd_sum, dec_delay, dec_loss, dec_timeout, loss_entries;
		uint64_t paced, undos, reo_seen;
		uint64_t pace_gap_sum, pace_srtt_sum, pace_late_sum, pace_late_n, pace_due;
		uint64_t lf_looks, lf_low, lf_sum, loss_samples, pace_lost_ns, pace_lost_n;
		/* CUBIC (UROCE_CC_LAW=cubic): acknowledgements that grew the
		 * window by the cubic function, by the TCP-friendly estimate,
		 * at the plateau's 1/(100 W) */
		uint64_t cub_cubic, cub_friendly, cub_flat;
		/* the packets in the network (rc_pipe) at each round-trip
		 * sample: how much of the window a flow fills */
		uint64_t pipe_sum;
	} ccst;
	/* requester: READ responses placed ahead of una (comp.c), how many
	 * (not in the network: rc_pipe), the highest of them; rd_done: a
	 * chunk's last, which ended its request (rd_inflight) */
	uint32_t rsp_hi, nplaced;
	bool rsp_hi_valid;
	struct {
		uint32_t psn;
		bool valid, end, rd_done;
	} rsp[UR_SACK_WIN];
	struct uroce_sack_diag *diag; /* UROCE_SACK_DIAG=1, else NULL */
};

/* Requester: has the READ response at psn been placed ahead of una? */
static inline bool rc_sack_placed(const struct uroce_qp *qp, uint32_t psn)
{
	return qp->sk && qp->sk->rsp[psn % UR_SACK_WIN].valid &&
	       qp->sk->rsp[psn % UR_SACK_WIN].psn == psn;
}

/* The responder holds and selectively acknowledges (both ends agreed). */
static inline bool rc_sack_resp(const struct uroce_qp *qp)
{
	return qp->sk && qp->sk->peer_req;
}

/* The requester resends selectively (both ends agreed). */
static inline bool rc_sack_req(const struct uroce_qp *qp)
{
	return qp->sk && qp->sk->peer_resp;
}

/* The window against this QP's peer: rc_window(), at most
 * UROCE_GBN_WINDOW until the peer's responses showed selective repeat -
 * IBTA go-back-N resends everything after a loss, and a 512-packet window
 * was measured only between uroce peers. */
static inline uint32_t rc_peer_window(const struct uroce_qp *qp)
{
	uint32_t w = rc_window(qp);

	return (!qp->sk || !qp->sk->peer_resp) && w > UROCE_GBN_WINDOW ? UROCE_GBN_WINDOW : w;
}

/* Congestion control's cap outside loss mode (cc.c): rc_window() once the
 * path showed itself clean - under UROCE_CLEAN_LOSS of the packets sent
 * were resent lately (loss_frac, measured per 4,096 packets sent) - else
 * at most UROCE_LOSS_WINDOW: under random loss (1%, loopback) and through
 * a shared bottleneck (tbf.sh: its slow starts too) the larger window
 * resent more and kept less (docs/design.md, "The window, raised"). */
#define UROCE_CLEAN_LOSS 66u /* / 65536: 1 per mille */
static inline uint32_t rc_free_wmax(const struct uroce_qp *qp)
{
	const struct uroce_sack *sk = qp->sk;
	uint32_t w = qp->ep ? rc_window(qp) : uroce_window;

	if ((!sk->loss_frac_on || sk->loss_frac >= UROCE_CLEAN_LOSS) && w > UROCE_LOSS_WINDOW)
		return UROCE_LOSS_WINDOW;
	return w;
}

/* The requester's window: rc_peer_window(), and between uroce peers that
 * agreed on selective repeat the congestion window (sack.c). */
static inline uint32_t rc_cwnd(const struct uroce_qp *qp)
{
	uint32_t w = rc_peer_window(qp), c;

	if (!qp->sk || !qp->sk->cc || !qp->sk->peer_resp)
		return w;
	c = qp->sk->cwnd >> 10;
	/* in loss mode up to loss_wmax (cc.c), within the endpoint's budget */
	if (qp->sk->loss_mode) {
		w = rc_ep_budget(qp);
		if (w > qp->sk->loss_wmax)
			w = qp->sk->loss_wmax;
	}
	return c < w ? c : w;
}

/* Packets in the network: with selective repeat those the responder holds
 * do not count (TCP's pipe); the PSNs in flight need only fit what it can
 * hold and describe (UR_SACK_WIN, rc_may_send).  A loss then no longer
 * stops the window for the round trips its recovery takes. */
static inline uint32_t rc_pipe(const struct uroce_qp *qp)
{
	uint32_t n = qp->req.inflight, out;

	if (!qp->sk || !qp->sk->peer_resp)
		return n;
	out = qp->sk->nsacked + qp->sk->nplaced;
	return n > out ? n - out : 0;
}

/* Congestion control (cc.c): at RTR, the window and UROCE_CC (on unless
 * 0), UROCE_CC_TARGET_US. */
void uroce_cc_init(struct uroce_qp *qp);
/* Congestion control: a round-trip sample (uroce_req_rtt), n packets
 * newly acknowledged, a retransmission timeout. */
void uroce_cc_rtt(struct uroce_qp *qp, uint64_t rtt_ns);
void uroce_cc_acked(struct uroce_qp *qp, uint32_t n);
void uroce_cc_timeout(struct uroce_qp *qp);
/* A loss the requester saw (a hole a selective ACK shows, a probe):
 * true if the window was decreased for it. */
bool uroce_cc_loss(struct uroce_qp *qp);
void uroce_cc_log(const struct uroce_qp *qp);
/* Pacing at the window's rate (cc.c): only in loss mode (uroce_cc_pacing,
 * cheap: ask it before reading the clock).  May the QP send now?  If not,
 * its wake-up is armed for when it may (req.wake_ns). */
bool uroce_cc_pacing(const struct uroce_qp *qp);
bool uroce_cc_pace_ok(struct uroce_qp *qp, uint64_t now);
/* n packets' worth (a READ request: its responses) left at now. */
void uroce_cc_paced(struct uroce_qp *qp, uint32_t n, uint64_t now);
/* A request packet left (resent: not for the first time): loss mode's
 * measure of the share resent. */
void uroce_cc_sent(struct uroce_qp *qp, bool resent);
/* n request packets left for the first time (a run, req.c). */
void uroce_cc_sent_fresh(struct uroce_qp *qp, uint32_t n);
/* The time between packets at the window's rate, and the burst allowed. */
uint64_t uroce_cc_pace_gap(const struct uroce_qp *qp);
uint64_t uroce_cc_pace_burst(const struct uroce_qp *qp);
/* The last loss decrease was for a packet that had arrived: undo it. */
void uroce_cc_undo(struct uroce_qp *qp);

/* At RTR: offer selective repeat if this QP may (RC, native mode,
 * UROCE_SACK=1).  0 or -ENOMEM. */
int uroce_sack_init(struct uroce_qp *qp);
void uroce_sack_free(struct uroce_qp *qp);
/* Responder: forget every held packet (a NAK makes the requester go back). */
void uroce_sack_clear(struct uroce_qp *qp);
/* Every packet a QP sends: the capability bit, and a request's slot. */
void uroce_sack_tx(struct uroce_qp *qp, struct uroce_pkt *pkt);
/* A request's selective-repeat bits: the capability, the incarnation. */
void uroce_sack_stamp(const struct uroce_qp *qp, uint8_t *bth);
/* The slots of a run of n request packets from psn, sent for the first
 * time and not paced, their bits stamped already (req.c): what
 * uroce_sack_tx does for each. */
void uroce_sack_tx_run(struct uroce_qp *qp, uint32_t psn, uint32_t n);
/* Every packet a QP receives: does the peer offer it?  And a request
 * from another incarnation of the requester (it was reset and reuses its
 * PSNs, as IBTA allows) makes what was held from the old one void. */
static inline void uroce_sack_rx(struct uroce_qp *qp, const struct uroce_pkt *pkt)
{
	if (!qp->sk || !(pkt->bth[4] & UR_BTH4_SACK))
		return;
	if (!(pkt->mask & URM_REQ)) {
		qp->sk->peer_resp = true;
		return;
	}
	qp->sk->peer_req = true;
	if (qp->sk->nheld && ur_bth_epoch(pkt->bth) != qp->sk->held_epoch)
		uroce_sack_clear(qp);
}
/* Responder: keep a copy of pkt, which arrived after a gap; false when it
 * cannot (too far ahead, out of memory): go-back-N handles it then. */
bool uroce_sack_hold(struct uroce_qp *qp, const struct uroce_pkt *pkt);
/* Responder: may a selective ACK that tells nothing new wait
 * (UROCE_SACK_LAZY, default 1)? */
bool uroce_sack_lazy(void);
/* Responder: may pkt be held after a gap (within the window, not held
 * already, the requester's incarnation, the memory bound)? */
bool uroce_sack_may_hold(const struct uroce_qp *qp, const struct uroce_pkt *pkt);
/* Responder: hold pkt (uroce_sack_may_hold said so), its ICRC checked while
 * it is copied: 1 held (pkt->held; uroce_sack_hold then takes it as it
 * is), 0 not (the ICRC did not match: check it as any packet). */
int uroce_sack_hold_icrc(struct uroce_qp *qp, struct uroce_pkt *pkt, const struct uroce_ipinfo *ip);
/* Responder: the held packet at psn, moved to *pkt (free pkt->bth). */
bool uroce_sack_take(struct uroce_qp *qp, uint32_t psn, struct uroce_pkt *pkt);
/* Responder: a held packet's copy (uroce_sack_take's) is done with. */
void uroce_sack_put(struct uroce_qp *qp, struct uroce_pkt *pkt);
/* Responder: send a selective ACK acknowledging psn, describing the held. */
void uroce_sack_send(struct uroce_qp *qp, uint32_t psn);
/* Requester: forget what selective ACKs showed held (RFC 2018, 8: the
 * responder may have dropped it since - a NAK, a reset requester): after
 * a go-back and at every timeout. */
void uroce_sack_forget(struct uroce_qp *qp);
/* Requester: the READ response at psn (of w) was placed ahead of una: ask
 * again for the runs missing before it that were asked for before it. */
void uroce_sack_read_gaps(struct uroce_qp *qp, const struct uroce_swqe *w, uint32_t psn);
/* Requester: una's missing READ responses were asked for again after the
 * newest one placed: the answer may still come. */
bool uroce_sack_read_pending(struct uroce_qp *qp);
/* Requester: the READ response at psn was placed ahead of una: if it is
 * the last one asked for, probe soon for una's (a tail loss probe). */
void uroce_sack_read_tail(struct uroce_qp *qp, uint32_t psn);
/* Requester: went back (go-back-N after a NAK): forget as above, and
 * count every READ chunk sent again against max_rd_atomic. */
void uroce_sack_went_back(struct uroce_qp *qp);
/* Requester: una moved from old: the held ones before it leave nsacked. */
void uroce_sack_acked(struct uroce_qp *qp, uint32_t old);
/* Requester: a selective ACK's bitmap: resend what it shows lost. */
void uroce_sack_rcv(struct uroce_qp *qp, const struct uroce_pkt *pkt);
/* Requester: a retransmission probe: resend the newest packet sent, whose
 * answer says what is missing - or, when una is in a READ or atomic, what
 * is missing of it. */
void uroce_sack_probe(struct uroce_qp *qp);
/* Requester: a retransmission timeout: forget what selective ACKs showed
 * held and resend a window from una (what go-back-N would resend first),
 * without moving the send state. */
void uroce_sack_timeout(struct uroce_qp *qp);
/* Requester: the READ response at psn (of w) arrived ahead of una, from a
 * request sent after una was last asked for: una's answer was lost. */
bool uroce_sack_read_lost(struct uroce_qp *qp, const struct uroce_swqe *w, uint32_t psn);
/* UROCE_SACK_DIAG (sack_diag.c; each a no-op unless qp->sk->diag) */
void uroce_sd_init(struct uroce_qp *qp);
void uroce_sd_free(struct uroce_qp *qp);
/* Requester: psn is resent (what for: diag->cause, or cause >= 0). */
void uroce_sd_resend(struct uroce_qp *qp, uint32_t psn, int cause);
/* Requester: the resent psn is known received (held or acknowledged). */
void uroce_sd_received(struct uroce_qp *qp, struct uroce_sack_tx *t);
/* Requester: req_run stopped with nothing sent (why: recomputed). */
void uroce_sd_blocked(struct uroce_qp *qp);
/* Requester: a first transmission left (a stall, if any, is over). */
void uroce_sd_sent(struct uroce_qp *qp, uint64_t now);
/* Responder: nheld went from 0 to 1, or back to 0. */
void uroce_sd_held(struct uroce_qp *qp, bool any);
static inline void uroce_sd_cause(struct uroce_qp *qp, enum uroce_sd_cause c)
{
	if (qp->sk && qp->sk->diag)
		qp->sk->diag->cause = (uint8_t)c;
}

/* Requester: its state, in the log at level lvl (retries exhausted). */
void uroce_sack_dump(struct uroce_qp *qp, int lvl);
/* Responder: its state when a request it cannot use arrives (a duplicate,
 * one it cannot hold), at info level, rate-limited (UROCE_SACK_DIAG=1). */
void uroce_sack_resp_diag(struct uroce_qp *qp, const struct uroce_pkt *pkt, const char *why);
/* Requester: a reordering check falls due (req.wake_ns): resend the holes
 * that have waited out the reordering window. */
void uroce_sack_rack(struct uroce_qp *qp, uint64_t now);
/* Requester: the reordering window now (RACK). */
uint64_t uroce_sack_reo_wnd(const struct uroce_qp *qp);
/* Requester: send the request packet at psn again, as it was (req.c). */
bool uroce_req_resend(struct uroce_qp *qp, uint32_t psn);
/* The SQ index of the sent WQE psn belongs to (comp.c). */
bool uroce_wqe_idx_for_psn(struct uroce_qp *qp, uint32_t psn, uint32_t *idx);

uint64_t uroce_rnr_timer_ns(unsigned int code);
/* Restart sending at psn (go-back-N). */
void uroce_req_go_back(struct uroce_qp *qp, uint32_t psn);
/* The WQE at SQ index i failed with st: it and what follows it are never
 * sent (again); the WQEs before it may still be resent, and the completer
 * reports the failure once they are done, in order. */
void uroce_req_fail_wqe(struct uroce_qp *qp, uint32_t i, enum ibv_wc_status st);
/* Retries exhausted: the oldest outstanding WQE fails. */
void uroce_req_retry_exceeded(struct uroce_qp *qp);
/* Complete WQEs in order from the SQ tail. */
void uroce_comp_retire(struct uroce_qp *qp);
/* An ACK covers psn: take the round-trip sample if it is the one timed. */
void uroce_req_rtt(struct uroce_qp *qp, uint32_t psn);
/* (Re)arm the retransmission timer if packets are in flight. */
void uroce_req_arm(struct uroce_qp *qp);

/* ---- The same-host single copy (pull.c, docs/design.md) ---- */
struct iovec;
/* The PSNs w would be sent as one pull record (resend: w is in flight
 * already), or 0: packet by packet. */
uint32_t uroce_pull_npkts(struct uroce_qp *qp, const struct uroce_swqe *w, bool resend);
/* Should the requester hold w back until an ACK: pulled, and the
 * endpoint's budget or the ring has no room for it now (pull.c; shm.c, bulk
 * records)? */
bool uroce_pull_wait(struct uroce_qp *qp, const struct uroce_swqe *w);
/* PSNs per pulled READ response record: a READ chunk goes as several
 * (docs/design.md, "The bulk area"). */
uint32_t uroce_pull_read_seg(const struct uroce_qp *qp);
/* The payload of a pull record naming n pieces of memory. */
uint32_t uroce_pull_desc_len(int niov);
void uroce_pull_desc_put(uint8_t *p, uint32_t npkts, const struct iovec *iov, int n);
/* The description at p (put above) is a READ response's: the link sends
 * it only with the bytes it names (shm.c), never as a description the
 * requester would read later - by then the MR may be gone.  Was it sent? */
void uroce_pull_desc_bytes_only(uint8_t *p);
bool uroce_pull_desc_was_sent(const uint8_t *p);
/* A received pull record's pieces (up to UROCE_MAX_SGE), the PSNs it
 * stands for and its bytes; -1 when it is not a well-formed one from a
 * link we may pull from. */
int uroce_pull_desc_get(const struct uroce_qp *qp, const struct uroce_pkt *pkt, struct iovec *iov,
			uint32_t *npkts, uint64_t *total);
/* Pull total bytes described by pkt (src[nsrc]) into the local scatter
 * list sg at message offset off, its L_Keys checked for LOCAL_WRITE, under
 * mr_lock: 0, or -errno (counted) when the packet path must do it. */
int uroce_pull_to_sge(struct uroce_qp *qp, struct ibv_pd *pd, const struct uroce_sge *sg, int nsge,
		      uint32_t off, const struct uroce_pkt *pkt, const struct iovec *src, int nsrc,
		      uint64_t total);

#endif

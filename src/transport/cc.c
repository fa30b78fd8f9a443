/* Congestion control between uroce peers that agreed on selective repeat
 * (docs/selective-repeat.md, "Congestion control"): a window per RC QP,
 * in packets << 10 (sk->cwnd), at most rc_window(), that rc_cwnd() and
 * rc_may_send() apply.  Swift-like delay control from the requester's
 * round-trip samples, and a loss mode that answers loss only against
 * flows that fill queues until they drop (TCP).  ECN is out of reach
 * through UDP sockets without root; nothing here depends on it.
 *
 * All of it runs under qp->lock.
 */
#include <stdlib.h>
#include <string.h>

#include "transport/rc.h"

/* The queueing delay a flow aims at above the smallest round trip it has
 * seen, the smallest window, and how much one decrease may take (Swift's
 * beta and max_mdf). */
#define CC_TARGET_US 1000u
#define CC_MIN_PKTS  4u
#define CC_INIT_PKTS 16u
#define CC_BETA	     0.8
#define CC_MAX_MDF   0.5
/* Loss mode: the decrease on a loss (CUBIC's beta), and what ends it:
 * the samples in a row at most at the target, and the round trips that
 * must have passed without a sign of a queue filler (a loss with a long
 * queue; UROCE_CC_QUIET, 0: the first condition alone). */
#define CC_LOSS_BETA 870u /* / 1024 */
#define CC_LOW_EXIT  8u
#define CC_QUIET     128u
#define CC_LOSS_AI   2u
/* Loss mode against a flow that does not yield (TCP) or against other
 * uroce flows in loss mode (which do): told apart by the share of its
 * packets a flow resends.  Next to one TCP flow (tbf.sh) uroce resent
 * 0.6-1.7% of its packets; four uroce flows in loss mode 2.7-3.5% with
 * CC_LOSS_AI, 6.0-7.2% with the larger increase.  While the share
 * resent stays below CC_LOW_LOSS (per mille; UROCE_CC_LOW_LOSS, 0: never)
 * the window grows by CC_LOSS_AI_HI per round trip and is paced at
 * CC_PACE_GAIN_HI; above it, CC_LOSS_AI and CC_PACE_GAIN: a flow whose
 * competitors back off on loss as it does gets the same share with the
 * smaller increase and resends half as much.  Measured every
 * CC_LF_PKTS packets sent, smoothed over about four of those. */
#define CC_LOW_LOSS	20u /* per mille */
#define CC_LOSS_AI_HI	4u
#define CC_PACE_GAIN_HI 150u /* percent */
#define CC_LF_PKTS	4096u
/* Delay mode: how far a run of decreases may take the window (1/8)
 * while the queue stays before it is taken for someone else's. */
#define CC_YIELD_MAX 8u
/* Pacing: the burst that may go at once is CC_PACE_US of the window's
 * rate (UROCE_PACE_US; 0: no pacing), at least CC_PACE_MIN_PKTS packets;
 * the rate is the window per smoothed round trip times 5/4 (2 in slow
 * start), as Linux paces TCP. */
#define CC_PACE_US	 200u
#define CC_PACE_MIN_PKTS 16u
#define CC_PACE_GAIN	 125u /* percent */
#define CC_LOSS_WMAX	 UROCE_LOSS_WINDOW
/* Pacing under CPU load (session 15; on by default since session 19,
 * UROCE_PACE_COMP=0: off): the share of the pacer's schedule lost to
 * wake-ups later than the burst's credit, measured per CC_PL_PERIOD_NS and
 * smoothed over about four, raises the pacing rate by as much (at most
 * CC_PL_MAX / 1024 of the schedule made up: 4x; 2x until session 19,
 * where a loaded flow's make-up sat at that cap - half its schedule lost
 * - and 3/4 kept 1.2x as much next to TCP in 11 of 16 pairs) - spread
 * over the schedule, not caught up in one burst (which the fifth session
 * and session 14 tried and dropped). */
#define CC_PL_PERIOD_NS 10000000ull
#define CC_PL_MAX	768u
/* Loss mode's law (docs/selective-repeat.md, "Session 15", "Session 19"):
 * CUBIC's window function of the time since the last decrease (RFC 9438,
 * in packets; the default since session 19: with the make-up above, next
 * to TCP beside busy loops uroce kept more in most pairs), or with
 * UROCE_CC_LAW=reno Reno's +CC_LOSS_AI(_HI) per round trip.
 * Its constants are not Linux's: with C 0.4 segments/s^3 (0.566 packets)
 * and beta 0.7 the function takes 3-4 s back to W_max where a decrease
 * comes every 20-300 ms next to TCP, the TCP-friendly estimate (Reno,
 * +0.53 per round trip) rules, and uroce kept 0.70-0.91 of what Reno's
 * law kept (1 busy loop / quiet).  With beta 0.87 (as Reno's here) and
 * C 500,000 packets/s^3 it is back in K = 30-45 ms, as fast whatever the
 * round trip (UROCE_CC_CUBIC_C, UROCE_CC_CUBIC_BETA /1024). */
#define CC_CUBIC_C    500000.0
#define CC_CUBIC_BETA 870u /* / 1024 */

void uroce_cc_init(struct uroce_qp *qp)
{
	const char *e = getenv("UROCE_CC");

	/* on unless UROCE_CC=0: a shared bottleneck needs it (4 flows into
	 * a 1 Gbit/s tbf: 94% of the link, 2% resent, against 87% and 35%
	 * without), and with two long samples in a row needed for a
	 * decrease the loss-free rates on one host no longer suffer from
	 * CPU-scheduling delay (docs/selective-repeat.md) */
	qp->sk->cc = !(e && !strcmp(e, "0"));
	/* slow start: a flow that joins a shared bottleneck with a full
	 * window looks to the others like a queue filler (the yield rule) */
	qp->sk->cwnd = (qp->sk->cc ? CC_INIT_PKTS : uroce_window) << 10;
	qp->sk->slow_start = qp->sk->cc;
	e = getenv("UROCE_CC_TARGET_US");
	qp->sk->target_ns = (e && atoi(e) > 0 ? (uint64_t)atoi(e) : CC_TARGET_US) * 1000;
	e = getenv("UROCE_CC_LOSS_BETA");
	qp->sk->loss_beta = e && atoi(e) > 0 && atoi(e) < 1024 ? (uint32_t)atoi(e) : CC_LOSS_BETA;
	e = getenv("UROCE_CC_LOSS_AI");
	qp->sk->loss_ai = e && atoi(e) > 0 ? (uint32_t)atoi(e) : CC_LOSS_AI;
	e = getenv("UROCE_CC_QUIET");
	qp->sk->quiet_need = e && *e ? (uint32_t)atoi(e) : CC_QUIET;
	e = getenv("UROCE_PACE_US");
	qp->sk->pace_quantum_ns = (e && *e ? (uint64_t)atoi(e) : CC_PACE_US) * 1000;
	e = getenv("UROCE_PACE_GAIN");
	qp->sk->pace_gain = e && atoi(e) >= 100 ? (uint32_t)atoi(e) : CC_PACE_GAIN;
	e = getenv("UROCE_CC_LOW_LOSS");
	qp->sk->low_loss = (e && *e ? (uint32_t)atoi(e) : CC_LOW_LOSS) * 65536u / 1000u;
	e = getenv("UROCE_CC_LOSS_AI_HI");
	qp->sk->loss_ai_hi = e && atoi(e) > 0 ? (uint32_t)atoi(e) : CC_LOSS_AI_HI;
	e = getenv("UROCE_PACE_GAIN_HI");
	qp->sk->pace_gain_hi =
	    e && (atoi(e) >= 100 || !strcmp(e, "0")) ? (uint32_t)atoi(e) : CC_PACE_GAIN_HI;
	/* on unless UROCE_PACE_COMP=0, and CUBIC's law unless
	 * UROCE_CC_LAW=reno (session 19: next to TCP beside busy loops) */
	e = getenv("UROCE_PACE_COMP");
	qp->sk->pace_comp = !(e && !strcmp(e, "0"));
	qp->sk->pl_frac = 0;
	qp->sk->pl_t0 = qp->sk->pl_lost = 0;
	e = getenv("UROCE_CC_LAW");
	qp->sk->cubic = !(e && !strcmp(e, "reno"));
	e = getenv("UROCE_CC_CUBIC_C");
	qp->sk->cubic_c = e && strtod(e, NULL) > 0 ? strtod(e, NULL) : CC_CUBIC_C;
	e = getenv("UROCE_CC_CUBIC_BETA");
	qp->sk->cubic_beta = e && atoi(e) > 0 && atoi(e) < 1024 ? (uint32_t)atoi(e) : CC_CUBIC_BETA;
	qp->sk->cubic_wmax = qp->sk->cubic_wlast = qp->sk->cubic_k = qp->sk->cubic_frac = 0;
	qp->sk->cubic_epoch_ns = 0;
	e = getenv("UROCE_CC_LOSS_WMAX");
	qp->sk->loss_wmax = e && atoi(e) > 0 ? (uint32_t)atoi(e) : CC_LOSS_WMAX;
	if (qp->sk->loss_wmax > UR_SACK_WIN / 2)
		qp->sk->loss_wmax = UR_SACK_WIN / 2;
	qp->sk->lf_sent = qp->sk->lf_resent = 0;
	qp->sk->loss_frac_on = false;
	qp->sk->pace_ns = 0;
}

/* The cube root of x >= 0 (Newton's, from above; no libm), to 1e-9. */
static double cube_root(double x)
{
	double y = 1.0, p;

	if (x <= 0)
		return 0;
	while (y * y * y < x)
		y *= 2.0;
	for (int i = 0; i < 100; i++) {
		p = y;
		y = (2.0 * y + x / (y * y)) / 3.0;
		if (p - y < 1e-9)
			break;
	}
	return y;
}

/* CUBIC: a new epoch at now after a decrease from the window w to
 * after (packets << 10) - W_max is w (less, if w is below the W_max
 * before it: fast convergence, RFC 9438 4.7), K the time the cubic
 * function takes from after back to W_max. */
static void cubic_epoch(struct uroce_sack *sk, uint32_t w, uint32_t after, uint64_t now)
{
	double wp = w / 1024.0, ap = after / 1024.0, beta = sk->cubic_beta / 1024.0;

	sk->cubic_wmax = wp < sk->cubic_wlast ? wp * (1.0 + beta) / 2.0 : wp;
	sk->cubic_wlast = wp;
	sk->cubic_k = sk->cubic_wmax > ap ? cube_root((sk->cubic_wmax - ap) / sk->cubic_c) : 0;
	sk->cubic_epoch_ns = now;
	sk->cubic_frac = 0;
}

/* CUBIC's multiplicative decrease of the window w: the window after it. */
static uint32_t cubic_decrease(struct uroce_sack *sk, uint32_t w, uint64_t now)
{
	uint32_t after = (uint32_t)((uint64_t)w * sk->cubic_beta / 1024);

	cubic_epoch(sk, w, after, now);
	return after;
}

/* CUBIC's increase for n packets acknowledged (RFC 9438 4.2-4.4): toward
 * the cubic function one round trip ahead, W(t + rtt), at most 1.5 x the
 * window; toward the TCP-friendly estimate W_est = W_max beta +
 * 3 (1 - beta) / (1 + beta) t / srtt where that is larger; 1 / (100 W)
 * per packet at the plateau.  t is time since the last decrease from the
 * monotonic clock: the cubic part grows as fast whatever the round trip
 * (the smallest one seen is the "rtt" it looks ahead, as Linux's
 * delay_min), only the TCP-friendly part follows the round trip. */
static void cubic_acked(struct uroce_sack *sk, uint32_t n, uint64_t srtt_ns, uint64_t now)
{
	double w = sk->cwnd / 1024.0, beta = sk->cubic_beta / 1024.0, t, target, est, goal, inc;
	uint32_t add;

	if (!sk->cubic_epoch_ns) /* no decrease yet: the plateau at the window */
		cubic_epoch(sk, sk->cwnd, sk->cwnd, now);
	t = (double)(now - sk->cubic_epoch_ns + sk->base_rtt_ns) / 1e9;
	target = sk->cubic_c * (t - sk->cubic_k) * (t - sk->cubic_k) * (t - sk->cubic_k) +
		 sk->cubic_wmax;
	est = srtt_ns
		  ? sk->cubic_wmax * beta + 3.0 * (1.0 - beta) / (1.0 + beta) *
						(double)(now - sk->cubic_epoch_ns) / (double)srtt_ns
		  : 0;
	/* at most 1.5 x per round trip, both (after an idle time, a window
	 * of ACKs at once) */
	if (target > 1.5 * w)
		target = 1.5 * w;
	if (est > 1.5 * w)
		est = 1.5 * w;
	if (est > w && est > target) {
		goal = est;
		sk->ccst.cub_friendly++;
	} else if (target > w) {
		goal = target;
		sk->ccst.cub_cubic++;
	} else {
		goal = w + n / (100.0 * w);
		sk->ccst.cub_flat++;
	}
	/* (goal - w) / w per packet, never past the goal (a batch of more
	 * than a window) */
	inc = (goal - w) / w * n;
	sk->cubic_frac += (inc < goal - w ? inc : goal - w) * 1024.0;
	add = (uint32_t)sk->cubic_frac;
	sk->cubic_frac -= add;
	sk->cwnd += add;
}

/* A round trip sample (one per round trip, never of a resent packet).
 * Delay mode: above the target - in this sample and the one before, so
 * that one descheduled peer (CPU, not a queue) does not count - a
 * multiplicative decrease proportional to the excess (Swift), at most
 * once per round trip.  Random loss does not move the window: selective
 * repeat recovers it at the cost of the lost packets alone, and a
 * drop-tail bottleneck shows itself by delay before it drops.  Loss mode
 * (uroce_cc_loss): the window answers loss only, until CC_LOW_EXIT
 * samples in a row show the queue gone and no overflow came for
 * CC_QUIET round trips. */
void uroce_cc_rtt(struct uroce_qp *qp, uint64_t rtt_ns)
{
	struct uroce_sack *sk = qp->sk;
	uint64_t target, now, prev, d;
	double f;

	if (!sk || !sk->cc)
		return;
	if (!sk->base_rtt_ns || rtt_ns < sk->base_rtt_ns)
		sk->base_rtt_ns = rtt_ns;
	prev = sk->last_rtt_ns ? sk->last_rtt_ns : rtt_ns;
	sk->last_rtt_ns = rtt_ns;
	d = rtt_ns < prev ? rtt_ns : prev;
	sk->queue_rtt_ns = d;
	target = sk->base_rtt_ns + sk->target_ns;
	sk->ccst.samples++;
	sk->ccst.cwnd_sum += sk->cwnd >> 10;
	sk->ccst.pipe_sum += rc_pipe(qp);
	if (sk->loss_mode) {
		sk->ccst.loss_samples++;
		sk->low_rtts = rtt_ns <= target ? sk->low_rtts + 1 : 0;
		if (sk->quiet_rtts < UINT32_MAX)
			sk->quiet_rtts++;
		/* the queue gone for a moment is not the queue filler gone: a
		 * TCP flow's queue drains after each of its decreases, and
		 * the delay law, back in charge, yielded the link to it again
		 * (the sixth session: the reps that left loss mode kept 4.6-30
		 * MB/s of 125, those that stayed 39-41).  Copa's rule, for a
		 * loss-based competitor: competitive while one is seen - no
		 * overflow for CC_QUIET round trips */
		if (sk->low_rtts >= CC_LOW_EXIT && sk->quiet_rtts >= sk->quiet_need) {
			sk->loss_mode = false;
			sk->run_cwnd = 0;
			if (sk->cwnd > rc_free_wmax(qp) << 10)
				sk->cwnd = rc_free_wmax(qp) << 10; /* loss_wmax's part */
		}
		return;
	}
	if (rtt_ns > target)
		sk->slow_start = false;
	if (d <= target) {
		sk->run_cwnd = 0; /* the queue went: the decreases worked */
		return;
	}
	now = uroce_now_ns();
	if (now < sk->cc_next_ns)
		return;
	if (!sk->run_cwnd) {
		sk->run_cwnd = sk->cwnd;
		sk->run_rtt_ns = d;
	}
	if (sk->cwnd <= (2 * CC_MIN_PKTS) << 10 ||
	    (sk->cwnd * CC_YIELD_MAX <= sk->run_cwnd && d * 8 >= sk->run_rtt_ns * 7)) {
		/* the queue stays as long while our window shrank to an
		 * eighth (or its smallest): it is someone else's, a flow that fills
		 * queues until they drop (TCP).  Yielding further would
		 * hand it the link: compete on loss (uroce_cc_loss) from the
		 * window we had, reduced as for one loss */
		sk->loss_mode = true;
		sk->low_rtts = 0;
		sk->quiet_rtts = 0;
		if (sk->cubic) {
			uint32_t c = cubic_decrease(sk, sk->run_cwnd, uroce_now_ns());

			if (c > sk->cwnd)
				sk->cwnd = c;
		} else if ((uint64_t)sk->run_cwnd * sk->loss_beta / 1024 > sk->cwnd) {
			sk->cwnd = (uint32_t)((uint64_t)sk->run_cwnd * sk->loss_beta / 1024);
		}
		sk->run_cwnd = 0;
		sk->ccst.loss_entries++;
		return;
	}
	f = 1.0 - CC_BETA * (double)(d - target) / (double)d;
	if (f < 1.0 - CC_MAX_MDF)
		f = 1.0 - CC_MAX_MDF;
	sk->cwnd = (uint32_t)(sk->cwnd * f);
	sk->undo_on = false;
	if (sk->cwnd < CC_MIN_PKTS << 10)
		sk->cwnd = CC_MIN_PKTS << 10;
	sk->cc_next_ns = now + rtt_ns;
	sk->ccst.dec_delay++;
}

/* Loss mode's larger settings apply: the share of packets resent is
 * measured and low (CC_LOW_LOSS). */
static bool loss_low(const struct uroce_sack *sk)
{
	return sk->loss_frac_on && sk->loss_frac < sk->low_loss;
}

/* CC_LF_PKTS packets counted: the share resent, smoothed. */
static void lf_close(struct uroce_sack *sk)
{
	uint32_t f = (uint32_t)((uint64_t)sk->lf_resent * 65536u / sk->lf_sent);

	sk->loss_frac = sk->loss_frac_on ? (3 * sk->loss_frac + f) / 4 : f;
	sk->loss_frac_on = true;
	sk->lf_sent = sk->lf_resent = 0;
	if (sk->loss_mode) {
		sk->ccst.lf_looks++;
		sk->ccst.lf_low += loss_low(sk);
		sk->ccst.lf_sum += sk->loss_frac;
	}
}

void uroce_cc_sent(struct uroce_qp *qp, bool resent)
{
	struct uroce_sack *sk = qp->sk;

	if (!sk->cc)
		return;
	sk->lf_resent += resent;
	uroce_cc_sent_fresh(qp, 1);
}

void uroce_cc_sent_fresh(struct uroce_qp *qp, uint32_t n)
{
	struct uroce_sack *sk = qp->sk;

	if (!sk->cc)
		return;
	while (n) { /* as n calls of uroce_cc_sent(qp, false) */
		uint32_t k = CC_LF_PKTS - sk->lf_sent < n ? CC_LF_PKTS - sk->lf_sent : n;

		sk->lf_sent += k;
		n -= k;
		if (sk->lf_sent >= CC_LF_PKTS)
			lf_close(sk);
	}
}

/* Additive increase: one packet per window acknowledged; in loss mode
 * CC_LOSS_AI, as a TCP flow gains about one segment of up to 1,448 bytes
 * per round trip and uroce's packets carry 1,024 over Ethernet - or
 * CC_LOSS_AI_HI while it resends little (loss_low: the competitor is
 * not another uroce flow in loss mode). */
void uroce_cc_acked(struct uroce_qp *qp, uint32_t n)
{
	struct uroce_sack *sk = qp->sk;
	uint32_t w;

	if (!sk || !sk->cc || !n)
		return;
	w = sk->cwnd >> 10;
	if (sk->slow_start)
		sk->cwnd += n << 10; /* doubling per round trip */
	else if (sk->loss_mode && sk->cubic)
		cubic_acked(sk, n, qp->req.srtt_ns, uroce_now_ns());
	else
		sk->cwnd += (n << 10) *
			    (sk->loss_mode ? (loss_low(sk) ? sk->loss_ai_hi : sk->loss_ai) : 1) /
			    (w ? w : 1);
	w = sk->loss_mode ? sk->loss_wmax : rc_free_wmax(qp);
	if (sk->cwnd > w << 10)
		sk->cwnd = w << 10;
}

void uroce_cc_timeout(struct uroce_qp *qp)
{
	struct uroce_sack *sk = qp->sk;

	if (!sk || !sk->cc)
		return;
	sk->cwnd /= 2;
	if (sk->cubic) /* a new epoch from the halved window */
		cubic_epoch(sk, sk->cwnd * 2, sk->cwnd, uroce_now_ns());
	sk->slow_start = false;
	sk->undo_on = false;
	sk->ccst.dec_timeout++;
	if (sk->cwnd < CC_MIN_PKTS << 10)
		sk->cwnd = CC_MIN_PKTS << 10;
}

/* A loss while the queue is long (the last two round trips above the
 * target): the bottleneck overflows.  x loss_beta (0.87), once per
 * recovery episode, in either mode; in loss mode each such overflow also
 * says a queue filler (TCP) may still be there, and restarts the
 * CC_QUIET round trips that must pass before the mode ends
 * (uroce_cc_rtt).  A loss with short queues (random loss, UROCE_FAULT)
 * changes nothing. */
bool uroce_cc_loss(struct uroce_qp *qp)
{
	struct uroce_sack *sk = qp->sk;
	uint64_t now;

	if (!sk || !sk->cc || !sk->base_rtt_ns)
		return false;
	/* with short queues, random loss (in loss mode too: the queue
	 * filler's losses come with a full queue).  A long queue is two long
	 * samples in a row, as for a delay decrease: with one, on one host
	 * (a 50 us path whose round trip the delay law holds near the
	 * target) half the random losses at 1% were taken for overflows,
	 * 126-181 decreases per 3 s, and ib_send_bw kept 48-62% */
	if (sk->queue_rtt_ns <= sk->base_rtt_ns + sk->target_ns)
		return false;
	sk->slow_start = false;
	sk->quiet_rtts = 0; /* an overflow: a queue filler may be there */
	if (sk->recover_on && ur_psn_diff(qp->req.una_psn, sk->recover_psn) < 0)
		return false; /* the same episode */
	now = uroce_now_ns();
	if (now < sk->cc_next_ns)
		return false;
	sk->recover_on = true;
	sk->recover_psn = qp->req.psn;
	sk->undo_on = true;
	sk->undo_cwnd = sk->cwnd;
	sk->undo_wmax = sk->cubic_wmax;
	sk->undo_wlast = sk->cubic_wlast;
	sk->undo_k = sk->cubic_k;
	sk->undo_epoch_ns = sk->cubic_epoch_ns;
	if (sk->loss_mode && sk->cubic)
		sk->cwnd = cubic_decrease(sk, sk->cwnd, now);
	else
		sk->cwnd = (uint32_t)((uint64_t)sk->cwnd * sk->loss_beta / 1024);
	if (sk->cwnd < CC_MIN_PKTS << 10)
		sk->cwnd = CC_MIN_PKTS << 10;
	sk->cc_next_ns = now + sk->last_rtt_ns;
	sk->ccst.dec_loss++;
	return true;
}

/* The loss that made the last decrease was not one (sack.c: the packet
 * turned out to have arrived, reordered): the window it had, and the
 * episode over (Eifel, TCP's undo). */
void uroce_cc_undo(struct uroce_qp *qp)
{
	struct uroce_sack *sk = qp->sk;

	if (!sk || !sk->cc || !sk->undo_on)
		return;
	sk->undo_on = false;
	if (sk->undo_cwnd > sk->cwnd)
		sk->cwnd = sk->undo_cwnd;
	sk->cubic_wmax = sk->undo_wmax;
	sk->cubic_wlast = sk->undo_wlast;
	sk->cubic_k = sk->undo_k;
	sk->cubic_epoch_ns = sk->undo_epoch_ns;
	sk->recover_on = false;
	sk->cc_next_ns = 0;
	sk->ccst.undos++;
}

/* Pacing: the window spread over the round trip it takes, not sent in
 * the bursts that acknowledgements open (an ACK for a receive batch
 * opens dozens of packets at once, and through a drop-tail queue that a
 * TCP flow keeps full those bursts were dropped 8 times as often as
 * TCP's segments).  Earliest-departure time: pace_ns is when the next
 * packet is due; a packet may go while that is less than a burst ahead.
 * The burst (CC_PACE_US of the rate) keeps it coarse enough for a timer
 * and for segmentation offload: on a short path (one host, a few tens of
 * microseconds) the window, not the pacer, is what limits. */
uint64_t uroce_cc_pace_gap(const struct uroce_qp *qp)
{
	const struct uroce_sack *sk = qp->sk;
	uint64_t w = rc_cwnd(qp), g;

	if (!sk || !sk->cc || !sk->peer_resp || !sk->pace_quantum_ns || !qp->req.srtt_ns || !w)
		return 0;
	/* at pace_gain/100 of the window's rate (pace_gain_hi while few
	 * packets are resent: loss_low), twice it in slow start */
	g = sk->slow_start
		? qp->req.srtt_ns / (2 * w)
		: qp->req.srtt_ns * 100 / ((loss_low(sk) ? sk->pace_gain_hi : sk->pace_gain) * w);
	/* UROCE_PACE_COMP: what late wake-ups lose, made up by the rate */
	return sk->pace_comp ? g * (1024 - sk->pl_frac) / 1024 : g;
}

/* UROCE_PACE_COMP: lost ns of the pacer's schedule (a wake-up after the
 * burst's credit) at now; per CC_PL_PERIOD_NS the share lost, smoothed. */
static void pace_lost(struct uroce_sack *sk, uint64_t lost, uint64_t now)
{
	uint64_t f;

	sk->pl_lost += lost;
	if (!sk->pl_t0)
		sk->pl_t0 = now;
	if (now - sk->pl_t0 < CC_PL_PERIOD_NS)
		return;
	f = sk->pl_lost * 1024 / (now - sk->pl_t0);
	if (f > CC_PL_MAX)
		f = CC_PL_MAX;
	sk->pl_frac = (uint32_t)((3 * sk->pl_frac + f) / 4);
	sk->pl_t0 = now;
	sk->pl_lost = 0;
}

static uint64_t pace_burst(const struct uroce_qp *qp, uint64_t gap)
{
	uint64_t g = gap * CC_PACE_MIN_PKTS;

	return g > qp->sk->pace_quantum_ns ? g : qp->sk->pace_quantum_ns;
}

uint64_t uroce_cc_pace_burst(const struct uroce_qp *qp)
{
	return pace_burst(qp, uroce_cc_pace_gap(qp));
}

/* Paced only where bursts overflow a queue: in loss mode, where a queue
 * filler keeps the bottleneck full.  Elsewhere - one host, an idle path -
 * the bursts cost nothing and the holds would (always on: loopback
 * ib_write_bw about 6% slower, 10-45 thousand holds per 3 s; for a second
 * after each loss with a long queue: 8% at load 5, where reordering and
 * CPU delay make such losses on one host too).  Cheap to ask on every
 * packet: outside loss mode neither a division nor a clock read. */
bool uroce_cc_pacing(const struct uroce_qp *qp)
{
	return qp->sk && qp->sk->loss_mode && (qp->sk->pace_gain_hi || !loss_low(qp->sk));
}

bool uroce_cc_pace_ok(struct uroce_qp *qp, uint64_t now)
{
	struct uroce_sack *sk = qp->sk;
	uint64_t g, b, t;

	if (!uroce_cc_pacing(qp) || !(g = uroce_cc_pace_gap(qp)))
		return true;
	b = pace_burst(qp, g);
	if (sk->pace_ns < now + b)
		return true;
	t = sk->pace_ns - b + 1;
	sk->ccst.paced++;
	sk->ccst.pace_gap_sum += g;
	sk->ccst.pace_srtt_sum += qp->req.srtt_ns;
	sk->ccst.pace_due = t;
	if (!qp->req.wake_ns || t < qp->req.wake_ns) {
		qp->req.wake_ns = t;
		if (qp->ctx)
			uroce_progress_arm(qp->ctx, t);
	}
	return false;
}

void uroce_cc_paced(struct uroce_qp *qp, uint32_t n, uint64_t now)
{
	struct uroce_sack *sk = qp->sk;
	uint64_t g;

	if (!uroce_cc_pacing(qp) || !(g = uroce_cc_pace_gap(qp)))
		return;
	/* no credit for time idle, nor for a wake-up that came late: what
	 * it would catch up on leaves as one burst (tried: with up to 1 ms
	 * caught up, bursts of 60 packets again, and two reps in three of
	 * one uroce flow next to TCP stalled in probes, 7.5-22 MB/s) */
	if (sk->ccst.pace_due) {
		sk->ccst.pace_late_sum += now > sk->ccst.pace_due ? now - sk->ccst.pace_due : 0;
		sk->ccst.pace_late_n++;
		sk->ccst.pace_due = 0;
		/* a wake-up later than the burst: the time it lost (logged) */
		if (sk->pace_ns < now) {
			sk->ccst.pace_lost_ns += now - sk->pace_ns;
			sk->ccst.pace_lost_n++;
		}
		if (sk->pace_comp)
			pace_lost(sk, sk->pace_ns < now ? now - sk->pace_ns : 0, now);
	}
	if (sk->pace_ns < now)
		sk->pace_ns = now;
	sk->pace_ns += g * n;
}

/* What the law did over the QP's life (UROCE_LOG=info). */
void uroce_cc_log(const struct uroce_qp *qp)
{
	const struct uroce_sack *sk = qp->sk;

	if (!sk->cc || !sk->ccst.samples)
		return;
	ur_info("qp %u cc: %llu round trips, mean window %.1f packets (in flight %.1f), base rtt "
		"%llu us, "
		"decreases: %llu delay, %llu loss (%llu undone), %llu timeout; loss mode entered "
		"%llu times%s, in loss mode %.0f%% of the round trips; paced %llu times, "
		"reordering window %llu us (reordering seen %llu times)",
		qp->ibqp.qp_base.qp_num, (unsigned long long)sk->ccst.samples,
		(double)sk->ccst.cwnd_sum / (double)sk->ccst.samples,
		(double)sk->ccst.pipe_sum / (double)sk->ccst.samples,
		(unsigned long long)(sk->base_rtt_ns / 1000),
		(unsigned long long)sk->ccst.dec_delay, (unsigned long long)sk->ccst.dec_loss,
		(unsigned long long)sk->ccst.undos, (unsigned long long)sk->ccst.dec_timeout,
		(unsigned long long)sk->ccst.loss_entries, sk->loss_mode ? " (in it)" : "",
		100.0 * (double)sk->ccst.loss_samples / (double)sk->ccst.samples,
		(unsigned long long)sk->ccst.paced,
		(unsigned long long)(uroce_sack_reo_wnd(qp) / 1000),
		(unsigned long long)sk->ccst.reo_seen);
	if (sk->cubic)
		ur_info("qp %u cc cubic: grew %llu times by the cubic function, %llu by the "
			"TCP-friendly estimate, %llu at the plateau; last W_max %.1f, K %.3f s",
			qp->ibqp.qp_base.qp_num, (unsigned long long)sk->ccst.cub_cubic,
			(unsigned long long)sk->ccst.cub_friendly,
			(unsigned long long)sk->ccst.cub_flat, sk->cubic_wmax, sk->cubic_k);
	if (sk->ccst.lf_looks)
		ur_info("qp %u cc loss mode: resent %.2f%% of the packets (mean of %llu looks), "
			"below %.1f%% in %llu",
			qp->ibqp.qp_base.qp_num,
			100.0 * (double)sk->ccst.lf_sum / 65536.0 / (double)sk->ccst.lf_looks,
			(unsigned long long)sk->ccst.lf_looks, 100.0 * sk->low_loss / 65536.0,
			(unsigned long long)sk->ccst.lf_low);
	if (sk->ccst.paced && sk->ccst.pace_late_n)
		ur_info("qp %u cc pacing: mean gap %llu ns, srtt %llu us at holds; resumed %llu ns "
			"after due (%llu), after the burst's credit %llu times, %.1f ms in all",
			qp->ibqp.qp_base.qp_num,
			(unsigned long long)(sk->ccst.pace_gap_sum / sk->ccst.paced),
			(unsigned long long)(sk->ccst.pace_srtt_sum / sk->ccst.paced / 1000),
			(unsigned long long)(sk->ccst.pace_late_sum / sk->ccst.pace_late_n),
			(unsigned long long)sk->ccst.pace_late_n,
			(unsigned long long)sk->ccst.pace_lost_n,
			(double)sk->ccst.pace_lost_ns / 1e6);
}

/* Loss mode's rate-based competitor mode (UROCE_CC_COMPETE=1,
 * src/transport/cc.c, docs/selective-repeat.md "Session 21"), driven with
 * synthetic round trips, losses, acknowledgements and rate samples - no
 * packets, no speed:
 *   - off by default: a loss with a long queue in loss mode is CUBIC's
 *     decrease, no mode;
 *   - entered in loss mode by a loss with a long queue (the queue stayed
 *     while the flow yielded, and still overflows), not by one with short
 *     queues (random loss), nor outside loss mode;
 *   - in it losses do not decrease the window; the window is 2 x the
 *     rate estimate x srtt, at least 16 packets, at most UROCE_CM_WINDOW;
 *   - the estimate is the max of the last UROCE_CC_BW_RTTS round trips'
 *     samples: packets acknowledged and shown held over a round trip (at
 *     least srtt long), at most what was sent fresh the round trip before;
 *   - the pacer's gap is the estimate x the phase's gain (5/4, 3/4, 1),
 *     never slower than 16 packets per srtt; the phase moves per round;
 *   - a round that resent more than UROCE_CC_COMPETE_LOSS (20%) of its
 *     packets takes the estimate x 0.85, a lighter one does not;
 *   - it ends when the delay drains (8 samples at the target: loss mode
 *     itself stays, its quiet round trips not passed) and on a timeout.
 */
#include <stdlib.h>

#include "transport/rc.h"

#include "check.h"

#define US 1000ull
#define MS 1000000ull

static double pkts(const struct uroce_qp *qp)
{
	return qp->sk->cwnd / 1024.0;
}

static bool near(double a, double b, double tol)
{
	return a >= b - tol && a <= b + tol;
}

static void sample(struct uroce_qp *qp, uint64_t rtt)
{
	qp->sk->cc_next_ns = 0;
	uroce_cc_rtt(qp, rtt);
}

static bool loss(struct uroce_qp *qp)
{
	qp->sk->cc_next_ns = 0;
	qp->sk->recover_on = false;
	return uroce_cc_loss(qp);
}

static struct uroce_qp *new_qp(struct uroce_ep *ep)
{
	struct uroce_qp *qp = calloc(1, sizeof(*qp));

	if (!qp || !(qp->sk = calloc(1, sizeof(*qp->sk))))
		exit(1);
	qp->ep = ep;
	qp->mtu = 1024;
	uroce_cc_init(qp);
	qp->sk->peer_resp = true;
	qp->sk->slow_start = false;
	qp->sk->pace_comp = false;
	return qp;
}

/* Into loss mode by the yield rule from a window of w packets, the last
 * two samples long (a queue). */
static void enter_loss_mode(struct uroce_qp *qp, uint32_t w)
{
	qp->sk->loss_mode = false;
	qp->sk->cwnd = w << 10;
	sample(qp, 100 * US);
	for (int i = 0; i < 8 && !qp->sk->loss_mode; i++)
		sample(qp, 10 * MS);
}

/* The estimate, packets/s: every round trip's sample at r. */
static void set_bw(struct uroce_qp *qp, double r)
{
	for (uint32_t i = 0; i < UROCE_CC_BW_RTTS; i++)
		qp->sk->bw[i] = r;
}

/* The estimate: the max of the window's samples. */
static double max_bw(const struct uroce_qp *qp)
{
	double m = 0;

	for (uint32_t i = 0; i < UROCE_CC_BW_RTTS; i++)
		m = qp->sk->bw[i] > m ? qp->sk->bw[i] : m;
	return m;
}

/* A round trip of 10 ms closed at the next acknowledgement (of n). */
static void round_trip(struct uroce_qp *qp, uint32_t n)
{
	qp->req.srtt_ns = 5 * MS;
	qp->sk->dr_due = true;
	qp->sk->dr_t0 = uroce_now_ns() - 10 * MS;
	uroce_cc_acked(qp, n);
}

int main(void)
{
	struct uroce_ep ep = {.rcvbuf = 4u << 20};
	struct uroce_qp *qp;
	double w, bw;
	uint64_t g;
	uint32_t ph;

	unsetenv("UROCE_CC");
	unsetenv("UROCE_CC_COMPETE");
	unsetenv("UROCE_CC_COMPETE_LOSS");
	unsetenv("UROCE_CC_LAW");
	unsetenv("UROCE_PACE_US");
	unsetenv("UROCE_PACE_CREDIT_US");

	/* off by default: loss mode's CUBIC decrease */
	qp = new_qp(&ep);
	CHECK(!qp->sk->compete, "the competitor mode is on by default");
	enter_loss_mode(qp, 200);
	CHECK(qp->sk->loss_mode, "no loss mode");
	w = pkts(qp);
	CHECK(loss(qp) && !qp->sk->cm_on && near(pkts(qp), w * 870 / 1024.0, 1.0),
	      "off: a loss with a long queue gave window %.1f from %.1f, mode %d", pkts(qp), w,
	      qp->sk->cm_on);
	free(qp->sk);
	free(qp);

	setenv("UROCE_CC_COMPETE", "1", 1);
	qp = new_qp(&ep);
	CHECK(qp->sk->compete && qp->sk->cm_loss == 205, "UROCE_CC_COMPETE=1: %d, heavy %u",
	      qp->sk->compete, qp->sk->cm_loss);
	/* outside loss mode a loss with a long queue is delay mode's x0.87 */
	qp->sk->cwnd = 100 << 10;
	sample(qp, 100 * US);
	sample(qp, 3 * MS);
	sample(qp, 3 * MS);
	qp->sk->cwnd = 100 << 10;
	CHECK(loss(qp) && !qp->sk->cm_on && near(pkts(qp), 100 * 870 / 1024.0, 0.5),
	      "delay mode: window %.1f, mode %d", pkts(qp), qp->sk->cm_on);

	/* loss mode; a loss with short queues (random loss) is no sign */
	enter_loss_mode(qp, 200);
	CHECK(qp->sk->loss_mode && !qp->sk->cm_on, "loss mode %d, competitor mode %d",
	      qp->sk->loss_mode, qp->sk->cm_on);
	sample(qp, 200 * US);
	sample(qp, 200 * US);
	w = pkts(qp);
	CHECK(!loss(qp) && !qp->sk->cm_on && pkts(qp) == w,
	      "a loss with short queues: mode %d, window %.1f from %.1f", qp->sk->cm_on, pkts(qp),
	      w);

	/* a loss with a long queue: the mode, no decrease, the window from
	 * the estimate (20,000 packets/s x 5 ms x 2) */
	sample(qp, 6 * MS);
	sample(qp, 6 * MS);
	set_bw(qp, 20000);
	qp->req.srtt_ns = 5 * MS;
	CHECK(!loss(qp) && qp->sk->cm_on && qp->sk->ccst.cm_entries == 1,
	      "a loss with a long queue in loss mode: mode %d", qp->sk->cm_on);
	CHECK(near(pkts(qp), 200, 0.5), "window %.1f, not 2 x 20,000/s x 5 ms", pkts(qp));
	CHECK(uroce_cc_pacing(qp), "the competitor mode is not paced");
	for (int i = 0; i < 5; i++)
		CHECK(!loss(qp) && near(pkts(qp), 200, 0.5), "loss %d in the mode: window %.1f", i,
		      pkts(qp));
	CHECK(qp->sk->ccst.cm_entries == 1, "entered %llu times",
	      (unsigned long long)qp->sk->ccst.cm_entries);

	/* the window's bounds */
	set_bw(qp, 100000);
	uroce_cc_acked(qp, 1);
	CHECK(pkts(qp) == UROCE_CM_WINDOW && rc_cwnd(qp) <= UROCE_CM_WINDOW,
	      "a window of 1,000 packets: %.1f, rc_cwnd %u", pkts(qp), rc_cwnd(qp));
	set_bw(qp, 100);
	uroce_cc_acked(qp, 1);
	CHECK(pkts(qp) == 16, "a window of 1 packet: %.1f", pkts(qp));

	/* the pacer: the estimate x the phase's gain */
	set_bw(qp, 20000);
	qp->req.srtt_ns = 5 * MS;
	uroce_cc_acked(qp, 1);
	qp->sk->cm_phase = 0;
	g = uroce_cc_pace_gap(qp);
	CHECK(near((double)g, 1e9 / 25000, 2), "probing: gap %llu ns, not 1 / 25,000 s",
	      (unsigned long long)g);
	qp->sk->cm_phase = 1;
	g = uroce_cc_pace_gap(qp);
	CHECK(near((double)g, 1e9 / 15000, 2), "draining: gap %llu ns, not 1 / 15,000 s",
	      (unsigned long long)g);
	qp->sk->cm_phase = 2;
	g = uroce_cc_pace_gap(qp);
	CHECK(near((double)g, 1e9 / 20000, 2), "cruising: gap %llu ns, not 1 / 20,000 s",
	      (unsigned long long)g);
	set_bw(qp, 10);
	g = uroce_cc_pace_gap(qp);
	CHECK(g == 5 * MS / 16, "an estimate of 10 packets/s: gap %llu ns, not srtt / 16",
	      (unsigned long long)g);

	/* a round trip's sample: 300 packets acknowledged and 100 more shown
	 * held over 10 ms, sent faster before: 40,000/s, the max of the window */
	set_bw(qp, 20000);
	qp->sk->cm_phase = 2;
	qp->sk->dr_acked = 300;
	qp->sk->dr_out = qp->sk->nsacked = 0;
	qp->sk->prev_rate = 1e6;
	qp->sk->nsacked = 100;
	qp->sk->rnd_sent = 500;
	qp->sk->rnd_resent = 10;
	round_trip(qp, 1);
	qp->sk->nsacked = 0;
	bw = qp->sk->bw[(qp->sk->bw_i - 1) % UROCE_CC_BW_RTTS];
	CHECK(near(bw, 40000, 200), "a round trip's sample %.0f/s, not 40,000", bw);
	CHECK(qp->sk->cm_phase == 3 && near(qp->sk->prev_rate, 49000, 200),
	      "after a round: phase %u (not 3), sent fresh at %.0f/s (not 49,000)",
	      qp->sk->cm_phase, qp->sk->prev_rate);
	CHECK(near(pkts(qp), 2 * 40000 * 0.005, 1), "the window %.1f from an estimate of 40,000/s",
	      pkts(qp));
	/* held packets acknowledged when their hole fills are not counted
	 * twice: una moves 100, 99 of them were shown held before */
	qp->sk->nsacked = 99;
	qp->sk->dr_out = 99;
	qp->sk->dr_acked = 0;
	qp->sk->prev_rate = 1e6;
	round_trip(qp, 100);
	qp->sk->nsacked = 0;
	qp->sk->dr_due = true;
	qp->sk->dr_t0 = uroce_now_ns() - 10 * MS;
	qp->sk->prev_rate = 1e6;
	uroce_cc_acked(qp, 1); /* closes the round of the 100 */
	bw = qp->sk->bw[(qp->sk->bw_i - 1) % UROCE_CC_BW_RTTS];
	CHECK(near(bw, 100, 5), "a filled hole's round: %.0f/s, not 1 packet / 10 ms", bw);
	/* at most the rate at which the round trip before sent */
	qp->sk->dr_acked = 400;
	qp->sk->prev_rate = 5000;
	round_trip(qp, 1);
	bw = qp->sk->bw[(qp->sk->bw_i - 1) % UROCE_CC_BW_RTTS];
	CHECK(near(bw, 5000, 1), "bounded by a send rate of 5,000/s: %.0f/s", bw);
	/* a round shorter than srtt is no sample */
	ph = qp->sk->bw_i;
	qp->sk->dr_due = true;
	qp->sk->dr_t0 = uroce_now_ns() - 1 * MS;
	qp->req.srtt_ns = 5 * MS;
	uroce_cc_acked(qp, 10);
	CHECK(qp->sk->bw_i == ph, "a 1 ms round trip made a sample");

	/* heavy loss: more than 20% of a round resent takes the estimate
	 * down; 10% does not */
	set_bw(qp, 20000);
	qp->sk->rnd_sent = 100;
	qp->sk->rnd_resent = 10;
	qp->sk->dr_acked = 0;
	qp->sk->dr_out = qp->sk->nsacked;
	round_trip(qp, 1);
	CHECK(qp->sk->ccst.cm_heavy == 0 && near(max_bw(qp), 20000, 1),
	      "10%% resent: heavy %llu, estimate %.0f", (unsigned long long)qp->sk->ccst.cm_heavy,
	      max_bw(qp));
	set_bw(qp, 20000);
	qp->sk->rnd_sent = 100;
	qp->sk->rnd_resent = 30;
	round_trip(qp, 1);
	CHECK(qp->sk->ccst.cm_heavy == 1 && near(max_bw(qp), 17000, 1),
	      "30%% resent: heavy %llu, estimate %.0f (not 17,000)",
	      (unsigned long long)qp->sk->ccst.cm_heavy, max_bw(qp));
	setenv("UROCE_CC_COMPETE_LOSS", "50", 1);
	uroce_cc_init(qp);
	CHECK(qp->sk->cm_loss == 51, "UROCE_CC_COMPETE_LOSS=50: %u / 1024", qp->sk->cm_loss);
	unsetenv("UROCE_CC_COMPETE_LOSS");
	free(qp->sk);
	free(qp);

	/* leaving: the delay drains - 8 samples at the target; loss mode
	 * stays (its quiet round trips not passed) */
	qp = new_qp(&ep);
	enter_loss_mode(qp, 200);
	sample(qp, 6 * MS);
	sample(qp, 6 * MS);
	set_bw(qp, 20000);
	qp->req.srtt_ns = 5 * MS;
	CHECK(!loss(qp) && qp->sk->cm_on, "not in the mode");
	for (int i = 0; i < 7; i++)
		sample(qp, 200 * US);
	CHECK(qp->sk->cm_on, "left the mode after 7 short samples");
	sample(qp, 6 * MS);
	for (int i = 0; i < 7; i++)
		sample(qp, 200 * US);
	CHECK(qp->sk->cm_on, "left the mode after 7 short samples with a long one between");
	sample(qp, 200 * US);
	CHECK(!qp->sk->cm_on && qp->sk->loss_mode, "8 short samples: mode %d, loss mode %d",
	      qp->sk->cm_on, qp->sk->loss_mode);
	w = pkts(qp);
	CHECK(loss(qp) == false && qp->sk->cm_on == false && pkts(qp) == w,
	      "a loss with short queues brought the mode back");
	/* back in by the next overflow, out on a timeout */
	sample(qp, 6 * MS);
	sample(qp, 6 * MS);
	CHECK(!loss(qp) && qp->sk->cm_on && qp->sk->ccst.cm_entries == 2, "not back in: %d",
	      qp->sk->cm_on);
	uroce_cc_timeout(qp);
	CHECK(!qp->sk->cm_on, "a timeout did not end the mode");

	unsetenv("UROCE_CC_COMPETE");
	free(qp->sk);
	free(qp);
	printf("test_cc_compete: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* Loss mode's CUBIC law (UROCE_CC_LAW=cubic, src/transport/cc.c,
 * docs/selective-repeat.md "Session 15"), driven with synthetic samples,
 * losses and acknowledgements.  Time since the last decrease is set by
 * moving the epoch back from the clock (what passes between that and the
 * call is microseconds: the assertions allow a packet):
 *   - the default (since session 19; UROCE_CC_LAW=cubic too) is the
 *     cubic law, UROCE_CC_LAW=reno Reno's (+2 per window); beta 0.87 and C 500,000 packets/s^3
 * unless UROCE_CC_CUBIC_BETA / _C say otherwise (Linux's: 0.7 and 0.566);
 *   - entering loss mode from a window W: beta W, W_max = W and
 *     K = cbrt((1 - beta) W / C);
 *   - concave below K (the window goes to W(t) < W_max, faster the
 *     further from W_max), flat at K (1 / (100 W) per packet), convex
 *     past it (beyond W_max);
 *   - the cubic part's growth depends on time alone: the same window at
 *     the same t with round trips of 3 and 30 ms; a window acknowledged
 *     a packet at a time goes more than half the way one call goes, and
 *     not past it; a batch never past W(t) nor 1.5 x the window;
 *   - the TCP-friendly estimate (RFC 9438 4.3) where it is larger: it
 *     grows per round trip, twice as far at half the round trip;
 *   - a loss with a long queue: x0.7, once per recovery episode; fast
 *     convergence below the last W_max; the undo restores the epoch;
 *   - a loss in delay mode stays x0.87; loss mode's cap (loss_wmax,
 *     UROCE_LOSS_WINDOW) holds.
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

static void sample(struct uroce_qp *qp, uint64_t rtt)
{
	qp->sk->cc_next_ns = 0;
	uroce_cc_rtt(qp, rtt);
}

static bool loss(struct uroce_qp *qp)
{
	qp->sk->cc_next_ns = 0;
	return uroce_cc_loss(qp);
}

/* t ns since the last decrease */
static void at(struct uroce_qp *qp, uint64_t t)
{
	qp->sk->cubic_epoch_ns = uroce_now_ns() - t;
}

/* The cubic function one base round trip ahead, as cc.c computes it. */
static double cubic_w(const struct uroce_qp *qp, uint64_t t)
{
	double s = (double)(t + qp->sk->base_rtt_ns) / 1e9 - qp->sk->cubic_k;

	return qp->sk->cubic_c * s * s * s + qp->sk->cubic_wmax;
}

static bool near(double a, double b, double tol)
{
	return a >= b - tol && a <= b + tol;
}

/* Into loss mode by the yield rule from a window of w packets (the queue
 * stays long while the delay law takes the window down to an eighth). */
static void enter_loss_mode(struct uroce_qp *qp, uint32_t w)
{
	qp->sk->loss_mode = false;
	qp->sk->slow_start = false;
	qp->sk->cwnd = w << 10;
	sample(qp, 100 * US);
	for (int i = 0; i < 8 && !qp->sk->loss_mode; i++)
		sample(qp, 10 * MS);
}

int main(void)
{
	struct uroce_qp *qp = calloc(1, sizeof(*qp));
	double w, k, t1, t2;

	if (!qp || !(qp->sk = calloc(1, sizeof(*qp->sk)))) {
		printf("test_cc_cubic: out of memory\n");
		return 1;
	}
	unsetenv("UROCE_CC");
	unsetenv("UROCE_CC_LAW");
	unsetenv("UROCE_CC_CUBIC_C");
	unsetenv("UROCE_CC_CUBIC_BETA");
	unsetenv("UROCE_CC_LOSS_WMAX");
	unsetenv("UROCE_CC_LOW_LOSS");
	uroce_cc_init(qp);
	CHECK(qp->sk->cubic, "the default law is the cubic one");
	setenv("UROCE_CC_LAW", "cubic", 1);
	uroce_cc_init(qp);
	CHECK(qp->sk->cubic && qp->sk->cubic_beta == 870 && qp->sk->cubic_c == 500000,
	      "UROCE_CC_LAW=cubic: cubic %d, beta %u, C %.1f (not cubic, 870, 500000)",
	      qp->sk->cubic, qp->sk->cubic_beta, qp->sk->cubic_c);
	enter_loss_mode(qp, 200);
	CHECK(qp->sk->loss_mode && near(pkts(qp), 200 * 870 / 1024.0, 0.5) &&
		  qp->sk->cubic_wmax == 200 && near(qp->sk->cubic_k, 0.0392, 0.001),
	      "the default, loss mode from 200: window %.1f, W_max %.1f, K %.4f s", pkts(qp),
	      qp->sk->cubic_wmax, qp->sk->cubic_k);
	setenv("UROCE_CC_LAW", "reno", 1);
	uroce_cc_init(qp);
	CHECK(!qp->sk->cubic, "UROCE_CC_LAW=reno: the cubic law");
	enter_loss_mode(qp, 200);
	w = pkts(qp);
	uroce_cc_acked(qp, (uint32_t)w);
	CHECK(near(pkts(qp), w + 2, 0.01), "Reno: a window acknowledged gave %.2f, not %.2f + 2",
	      pkts(qp), w);

	/* Linux's constants (in packets) */
	setenv("UROCE_CC_LAW", "cubic", 1);
	setenv("UROCE_CC_CUBIC_BETA", "717", 1);
	setenv("UROCE_CC_CUBIC_C", "0.5656", 1);
	uroce_cc_init(qp);
	CHECK(qp->sk->cubic && qp->sk->cubic_beta == 717 && near(qp->sk->cubic_c, 0.5656, 0.001),
	      "UROCE_CC_LAW=cubic: cubic %d, beta %u, C %.4f", qp->sk->cubic, qp->sk->cubic_beta,
	      qp->sk->cubic_c);
	qp->sk->base_rtt_ns = 0;
	qp->sk->last_rtt_ns = 0;
	enter_loss_mode(qp, 200);
	CHECK(qp->sk->loss_mode, "no loss mode");
	CHECK(near(pkts(qp), 200 * 0.7, 0.5) && qp->sk->cubic_wmax == 200,
	      "entering loss mode from 200: window %.1f, W_max %.1f (not 140, 200)", pkts(qp),
	      qp->sk->cubic_wmax);
	k = qp->sk->cubic_k;
	CHECK(near(k * k * k * qp->sk->cubic_c, 200 - pkts(qp), 0.01),
	      "K %.3f s: C K^3 is not W_max - the window", k);

	/* a C that makes the cubic part govern at these round trips (K about
	 * 0.11 s): concave, flat, convex */
	setenv("UROCE_CC_CUBIC_C", "40000", 1);
	uroce_cc_init(qp);
	CHECK(qp->sk->cubic_c == 40000, "UROCE_CC_CUBIC_C=40000: C %.1f", qp->sk->cubic_c);
	qp->sk->base_rtt_ns = 0;
	qp->sk->last_rtt_ns = 0;
	enter_loss_mode(qp, 200);
	k = qp->sk->cubic_k;
	CHECK(near(k, 0.1145, 0.001), "K %.4f, not cbrt(60 / 40000)", k);
	qp->req.srtt_ns = 3 * MS;
	at(qp, (uint64_t)(k * 0.25e9));
	t1 = cubic_w(qp, (uint64_t)(k * 0.25e9));
	w = pkts(qp);
	uroce_cc_acked(qp, (uint32_t)w);
	CHECK(t1 > w && t1 < 200 && near(pkts(qp), t1, 1.0),
	      "concave, a quarter of K: window %.1f after a round trip, W(t) %.1f", pkts(qp), t1);
	t1 = pkts(qp) - w; /* the growth of a round trip at K / 4 ... */
	qp->sk->cwnd = (uint32_t)(cubic_w(qp, (uint64_t)(k * 0.75e9)) * 1024);
	w = pkts(qp);
	at(qp, (uint64_t)(k * 0.75e9) + 3 * MS);
	uroce_cc_acked(qp, (uint32_t)w);
	t2 = pkts(qp) - w; /* ... and at 3 K / 4: smaller, nearer W_max */
	CHECK(t2 > 0 && t2 < t1 && pkts(qp) < 200,
	      "concave: a round trip grew %.2f at 3K/4, %.2f at K/4 (window %.1f)", t2, t1,
	      pkts(qp));
	qp->sk->cwnd = 200 << 10;
	at(qp, (uint64_t)(k * 1e9) - qp->sk->base_rtt_ns);
	uroce_cc_acked(qp, 200);
	CHECK(near(pkts(qp), 200, 0.05) && pkts(qp) >= 200,
	      "flat at K: a window acknowledged at W_max gave %.3f", pkts(qp));
	qp->sk->cwnd = 200 << 10;
	at(qp, (uint64_t)(k * 1.5e9));
	t1 = cubic_w(qp, (uint64_t)(k * 1.5e9));
	uroce_cc_acked(qp, 200);
	CHECK(t1 > 200 && pkts(qp) > 200 && near(pkts(qp), t1, 1.0),
	      "convex past K: %.1f after a window, W(t) %.1f", pkts(qp), t1);
	qp->sk->cwnd = 100 << 10;
	at(qp, 2000 * MS);
	uroce_cc_acked(qp, 400);
	CHECK(near(pkts(qp), 150, 1.0), "at most 1.5 x per round trip: %.1f", pkts(qp));

	/* the same t, round trips of 3 and 30 ms: the same window */
	for (int i = 0; i < 2; i++) {
		qp->req.srtt_ns = i ? 30 * MS : 3 * MS;
		qp->sk->cwnd = 140 << 10;
		at(qp, 50 * MS);
		uroce_cc_acked(qp, 140);
		if (!i)
			t1 = pkts(qp);
	}
	CHECK(t1 > 140 && near(pkts(qp), t1, 0.5),
	      "50 ms after a decrease: %.1f with a round trip of 30 ms, %.1f with 3 ms", pkts(qp),
	      t1);
	/* a window acknowledged a packet at a time ends near one call's */
	qp->sk->cwnd = 140 << 10;
	at(qp, 50 * MS);
	for (int i = 0; i < 140; i++)
		uroce_cc_acked(qp, 1);
	CHECK(pkts(qp) > 140 + (t1 - 140) / 2 && pkts(qp) <= t1 + 0.5,
	      "a window a packet at a time: %.1f, one call %.1f", pkts(qp), t1);

	/* the TCP-friendly estimate (Linux's C: the cubic part is seconds
	 * away): W_max beta + 0.53 t / srtt */
	setenv("UROCE_CC_CUBIC_C", "0.5656", 1);
	uroce_cc_init(qp);
	qp->sk->base_rtt_ns = 0;
	qp->sk->last_rtt_ns = 0;
	enter_loss_mode(qp, 200);
	for (int i = 0; i < 2; i++) {
		qp->req.srtt_ns = i ? 6 * MS : 3 * MS;
		qp->sk->cwnd = (uint32_t)(200 * 0.7 * 1024);
		at(qp, 150 * MS);
		uroce_cc_acked(qp, 140);
		if (!i)
			t1 = pkts(qp) - 140;
	}
	t2 = pkts(qp) - 140;
	k = 3 * (1 - 717 / 1024.0) / (1 + 717 / 1024.0);
	CHECK(near(t1, k * 50, 1.5) && near(t2, k * 25, 1.5),
	      "TCP-friendly, 150 ms: +%.1f at 3 ms (not %.1f), +%.1f at 6 ms (not %.1f)", t1,
	      k * 50, t2, k * 25);
	CHECK(qp->sk->ccst.cub_friendly > 0, "the friendly region not counted");

	/* a loss with a long queue: x0.7 once per episode; fast convergence */
	qp->sk->cwnd = 180 << 10;
	sample(qp, 3 * MS);
	sample(qp, 3 * MS);
	qp->req.psn = 1000;
	qp->req.una_psn = 900;
	CHECK(loss(qp) && near(pkts(qp), 180 * 0.7, 0.5),
	      "a loss in loss mode: %.1f, not 0.7 x 180", pkts(qp));
	CHECK(near(qp->sk->cubic_wmax, 180 * (1 + 0.7) / 2, 0.5),
	      "fast convergence (180 below the last W_max 200): W_max %.1f", qp->sk->cubic_wmax);
	w = pkts(qp);
	CHECK(!loss(qp) && pkts(qp) == w, "two decreases in one episode");
	/* the undo: the window and the epoch before the decrease */
	t1 = qp->sk->cubic_wmax;
	qp->req.una_psn = 1000;
	qp->sk->cwnd = 150 << 10;
	uint64_t ep = qp->sk->cubic_epoch_ns;
	CHECK(loss(qp), "no decrease after the episode");
	uroce_cc_undo(qp);
	CHECK(pkts(qp) == 150 && qp->sk->cubic_wmax == t1 && qp->sk->cubic_epoch_ns == ep,
	      "undo: window %.1f, W_max %.1f (was %.1f), epoch moved", pkts(qp), qp->sk->cubic_wmax,
	      t1);

	/* the cap: loss mode's, UROCE_LOSS_WINDOW */
	CHECK(qp->sk->loss_wmax == UROCE_LOSS_WINDOW, "loss mode's cap: %u", qp->sk->loss_wmax);
	qp->sk->cwnd = (qp->sk->loss_wmax - 1) << 10;
	at(qp, 5000 * MS);
	for (int i = 0; i < 10; i++)
		uroce_cc_acked(qp, qp->sk->loss_wmax);
	CHECK(pkts(qp) == qp->sk->loss_wmax, "cubic past the cap: %.1f", pkts(qp));

	/* delay mode keeps its x0.87 */
	qp->sk->loss_mode = false;
	qp->sk->cwnd = 100 << 10;
	qp->req.una_psn = qp->req.psn;
	qp->req.psn += 100;
	sample(qp, 3 * MS);
	sample(qp, 3 * MS);
	qp->sk->cwnd = 100 << 10;
	CHECK(loss(qp) && near(pkts(qp), 100 * 870 / 1024.0, 0.5) && !qp->sk->loss_mode,
	      "a loss in delay mode: %.1f, not 0.87 x 100", pkts(qp));

	unsetenv("UROCE_CC_LAW");
	unsetenv("UROCE_CC_CUBIC_BETA");
	unsetenv("UROCE_CC_CUBIC_C");
	free(qp->sk);
	free(qp);
	printf("test_cc_cubic: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

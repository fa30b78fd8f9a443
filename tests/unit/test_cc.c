/* The congestion control law between uroce peers (src/transport/sack.c,
 * docs/selective-repeat.md "Congestion control"), driven with synthetic
 * round-trip samples and losses - no packets, no clock dependence (the
 * once-per-round-trip gate is opened by hand between steps):
 *   - slow start from 16 packets, doubling per round trip until a long
 *     round trip (random loss does not end it);
 *   - delay mode: one sample above the target (a descheduled peer) does
 *     not move the window, two in a row do (Swift's decrease, at most
 *     halving); below it the window grows one packet per window;
 *   - a loss with short queues (random loss) changes nothing; with a long
 *     queue x0.87, once per recovery episode (until una passes what was
 *     sent at the decrease), and the law stays delay-based;
 *   - a run of delay decreases that takes the window to 1/8 with the
 *     queue still long (someone else's: a TCP flow) enters loss mode from
 *     0.87 of the window before the run; a short sample ends a run;
 *   - loss mode (UROCE_CC_LAW=reno; the default law since session 19 is
 *     CUBIC's, test_cc_cubic): x0.87 per loss with a long queue (random loss still
 *     changes nothing), +2 packets per window (+4 and paced at 150% while
 *     under 2% of the packets sent are resent), no decrease on delay, until
 *     8 short samples in a row 128 round trips or more after the last
 *     overflow (a loss with a long queue) or the entry: a queue filler's
 *     sawtooth, its queue draining for a while after each overflow, keeps
 *     it there; random loss does not; UROCE_CC_QUIET=0: the short samples
 *     alone;
 *   - a long queue with the window at its floor enters loss mode too;
 *   - the window's caps: UROCE_LOSS_WINDOW in loss mode by default
 *     (UROCE_CC_LOSS_WMAX, a bench knob), above or below the loss-free
 *     cap uroce_window (UROCE_WINDOW), which holds again when the mode
 *     ends, once under UROCE_CLEAN_LOSS of the packets were resent
 *     (UROCE_LOSS_WINDOW before and above it); UROCE_GBN_WINDOW against a peer
 *     without selective repeat;
 *   - timeouts halve the window, never below the floor;
 *   - RACK's reordering window (sack.c): 0 until reordering was seen.
 */
#include <stdlib.h>

#include "transport/rc.h"

#include "check.h"

#define US 1000ull
#define MS 1000000ull

static uint32_t pkts(const struct uroce_qp *qp)
{
	return qp->sk->cwnd >> 10;
}

/* One sample, with the once-per-round-trip gate open. */
static void sample(struct uroce_qp *qp, uint64_t rtt)
{
	qp->sk->cc_next_ns = 0;
	uroce_cc_rtt(qp, rtt);
}

static void loss(struct uroce_qp *qp)
{
	qp->sk->cc_next_ns = 0;
	uroce_cc_loss(qp);
}

int main(void)
{
	struct uroce_qp *qp = calloc(1, sizeof(*qp));
	struct uroce_ep ep = {.rcvbuf = 4u << 20};
	uint32_t w, saved;

	if (!qp || !(qp->sk = calloc(1, sizeof(*qp->sk)))) {
		printf("test_cc: out of memory\n");
		return 1;
	}
	unsetenv("UROCE_CC");
	unsetenv("UROCE_CC_TARGET_US");
	unsetenv("UROCE_CC_LOSS_BETA");
	unsetenv("UROCE_CC_LOSS_AI");
	unsetenv("UROCE_CC_QUIET");
	unsetenv("UROCE_CC_LOW_LOSS");
	unsetenv("UROCE_CC_LOSS_AI_HI");
	unsetenv("UROCE_PACE_GAIN_HI");
	unsetenv("UROCE_CC_LOSS_WMAX");
	unsetenv("UROCE_CC_LAW");
	unsetenv("UROCE_PACE_COMP");
	uroce_cc_init(qp);
	/* the defaults since session 19: CUBIC's law in loss mode and the
	 * pacer's make-up (test_cc_cubic, test_cc_pace); Reno's here */
	CHECK(qp->sk->cubic && qp->sk->pace_comp, "the defaults: cubic %d, make-up %d",
	      qp->sk->cubic, qp->sk->pace_comp);
	setenv("UROCE_CC_LAW", "reno", 1);
	uroce_cc_init(qp);
	CHECK(!qp->sk->cubic, "UROCE_CC_LAW=reno: Reno's law");
	CHECK(qp->sk->cc && qp->sk->slow_start && pkts(qp) == 16 && qp->sk->target_ns == 1 * MS,
	      "the defaults: on, slow start from 16 packets, 1 ms");
	/* slow start: doubling per round trip, until a long round trip */
	sample(qp, 100 * US);
	uroce_cc_acked(qp, 16);
	CHECK(pkts(qp) == 32, "slow start: a window acknowledged gave %u, not 32", pkts(qp));
	loss(qp); /* random loss: short queues */
	CHECK(qp->sk->slow_start && pkts(qp) == 32, "slow start ended by random loss");
	sample(qp, 5 * MS);
	CHECK(!qp->sk->slow_start && pkts(qp) == 32, "slow start went on over a long round trip");
	qp->sk->cwnd = UROCE_WINDOW << 10;
	qp->sk->base_rtt_ns = 0;
	qp->sk->last_rtt_ns = 0;
	qp->sk->queue_rtt_ns = 0;

	/* delay mode, base 100 us, target 1.1 ms */
	for (int i = 0; i < 3; i++)
		sample(qp, 100 * US);
	CHECK(pkts(qp) == UROCE_WINDOW, "short round trips: window %u", pkts(qp));
	sample(qp, 5 * MS);
	CHECK(pkts(qp) == UROCE_WINDOW, "one long sample moved the window to %u", pkts(qp));
	sample(qp, 5 * MS);
	CHECK(pkts(qp) == UROCE_WINDOW / 2, "two long samples: %u, not halved", pkts(qp));
	sample(qp, 1050 * US);
	sample(qp, 1500 * US); /* the smaller of the two is within the target */
	CHECK(pkts(qp) == UROCE_WINDOW / 2, "a decrease without two long samples: %u", pkts(qp));
	sample(qp, 1500 * US); /* 0.4 ms over: x(1 - 0.8 * 0.4 / 1.5) */
	w = (UROCE_WINDOW / 2) * 1000 * (1500 - 320) / 1500 / 1000;
	CHECK(pkts(qp) >= w - 1 && pkts(qp) <= w + 1, "a decrease by the excess: %u, not ~%u",
	      pkts(qp), w);
	w = pkts(qp);
	uroce_cc_acked(qp, w);
	CHECK(pkts(qp) == w + 1, "a window acknowledged: %u, not %u", pkts(qp), w + 1);

	/* random loss: short queues */
	sample(qp, 100 * US);
	w = pkts(qp);
	loss(qp);
	CHECK(pkts(qp) == w && !qp->sk->loss_mode, "a loss with short queues moved the window");

	/* one long sample (a descheduled peer: CPU, not a queue) */
	sample(qp, 3 * MS);
	w = pkts(qp);
	loss(qp);
	CHECK(pkts(qp) == w, "a loss after one long sample moved the window to %u", pkts(qp));

	/* a loss with a long queue: a decrease, once per episode, no mode */
	sample(qp, 3 * MS);
	w = pkts(qp);
	saved = qp->sk->cwnd;
	qp->req.psn = 500;
	loss(qp);
	CHECK(!qp->sk->loss_mode, "a loss with a long queue: loss mode (delay mode can yield)");
	CHECK(qp->sk->cwnd == (uint32_t)((uint64_t)saved * 870 / 1024),
	      "a loss with a long queue: %u, not %u x 870 / 1024", pkts(qp), w);
	w = pkts(qp);
	qp->req.una_psn = 499;
	loss(qp);
	CHECK(pkts(qp) == w, "a second decrease in one recovery episode: %u", pkts(qp));
	qp->req.una_psn = 500;
	loss(qp);
	CHECK(pkts(qp) < w, "no decrease after the episode: %u", pkts(qp));

	/* a run of delay decreases that does not shorten the queue */
	qp->sk->cwnd = 200 << 10;
	sample(qp, 100 * US); /* ends any run */
	for (int i = 0; i < 2; i++)
		sample(qp, 10 * MS); /* the second: x0.5 */
	CHECK(pkts(qp) == 100 && !qp->sk->loss_mode, "a run: %u, not halved", pkts(qp));
	sample(qp, 10 * MS);
	sample(qp, 10 * MS);
	CHECK(pkts(qp) == 25 && !qp->sk->loss_mode, "a run to a quarter: %u", pkts(qp));
	sample(qp, 100 * US); /* the queue went: a new run from 25 */
	sample(qp, 10 * MS);
	sample(qp, 10 * MS);
	sample(qp, 10 * MS);
	CHECK(!qp->sk->loss_mode && pkts(qp) == 6, "a short sample did not end the run: %u",
	      pkts(qp));
	qp->sk->cwnd = 200 << 10;
	sample(qp, 100 * US);
	for (int i = 0; i < 5 && !qp->sk->loss_mode; i++)
		sample(qp, 10 * MS);
	CHECK(qp->sk->loss_mode, "200 -> 25 packets with the queue still long: no loss mode");
	CHECK(pkts(qp) == 200 * 870 / 1024, "loss mode entered at %u, not 0.87 x 200", pkts(qp));

	/* loss mode */
	w = pkts(qp);
	for (int i = 0; i < 4; i++)
		sample(qp, 3 * MS);
	CHECK(pkts(qp) == w, "loss mode: delay moved the window to %u", pkts(qp));
	uroce_cc_acked(qp, w);
	CHECK(pkts(qp) == w + 2, "loss mode: a window acknowledged gave %u, not %u", pkts(qp),
	      w + 2);
	/* the share resent: below 2% (a TCP competitor) +4 per window and
	 * paced at 150%; above it (other uroce flows in loss mode) +2 and
	 * 125% again; UROCE_CC_LOW_LOSS=0: never the larger */
	qp->ep = &ep; /* rc_cwnd(): the endpoint's budget, 256 packets */
	qp->mtu = 1024;
	qp->req.srtt_ns = 3 * MS;
	qp->sk->peer_resp = true;
	qp->sk->pace_quantum_ns = 200 * US;
	CHECK(uroce_cc_pace_gap(qp) == 3 * MS * 100 / (125 * pkts(qp)),
	      "loss mode, share unmeasured: gap %llu", (unsigned long long)uroce_cc_pace_gap(qp));
	for (int i = 0; i < 4096; i++)
		uroce_cc_sent(qp, i % 100 == 0); /* 1% */
	CHECK(qp->sk->loss_frac_on, "4,096 packets sent: the share resent not measured");
	w = pkts(qp);
	uroce_cc_acked(qp, w);
	CHECK(pkts(qp) == w + 4, "1%% resent: a window acknowledged gave %u, not %u", pkts(qp),
	      w + 4);
	CHECK(uroce_cc_pace_gap(qp) == 3 * MS * 100 / (150 * pkts(qp)),
	      "1%% resent: gap %llu, not at 150%%", (unsigned long long)uroce_cc_pace_gap(qp));
	for (int j = 0; j < 3; j++)
		for (int i = 0; i < 4096; i++)
			uroce_cc_sent(qp, i % 25 == 0); /* 4% */
	w = pkts(qp);
	uroce_cc_acked(qp, w);
	CHECK(pkts(qp) == w + 2, "4%% resent: a window acknowledged gave %u, not %u", pkts(qp),
	      w + 2);
	CHECK(uroce_cc_pace_gap(qp) == 3 * MS * 100 / (125 * pkts(qp)), "4%% resent: gap %llu",
	      (unsigned long long)uroce_cc_pace_gap(qp));
	qp->sk->loss_frac = 0;
	qp->sk->low_loss = 0; /* UROCE_CC_LOW_LOSS=0 */
	w = pkts(qp);
	uroce_cc_acked(qp, w);
	CHECK(pkts(qp) == w + 2, "UROCE_CC_LOW_LOSS=0: a window acknowledged gave %u", pkts(qp));
	qp->sk->low_loss = 20 * 65536 / 1000;
	qp->sk->loss_frac_on = false;
	qp->req.srtt_ns = 0;
	qp->sk->peer_resp = false;
	qp->ep = NULL;
	w = pkts(qp) - 2; /* (what follows checks against w + 2) */
	qp->req.psn = 900;
	qp->req.una_psn = 900;
	sample(qp, 100 * US);
	loss(qp); /* random loss, in loss mode too */
	CHECK(pkts(qp) == w + 2, "loss mode: a loss with a short queue moved the window");
	sample(qp, 3 * MS);
	loss(qp);
	CHECK(pkts(qp) == w + 2, "loss mode: a loss after one long sample moved the window");
	sample(qp, 3 * MS);
	loss(qp);
	CHECK(pkts(qp) < w + 2, "loss mode: a loss with a long queue did not decrease");
	sample(qp, 100 * US);
	for (int i = 0; i < 6; i++)
		sample(qp, 100 * US);
	sample(qp, 3 * MS); /* not 8 in a row */
	CHECK(qp->sk->loss_mode, "loss mode ended without 8 short samples in a row");
	for (int i = 0; i < 8; i++)
		sample(qp, 100 * US);
	CHECK(qp->sk->loss_mode, "loss mode ended 16 round trips after an overflow");

	/* a queue filler's sawtooth: its queue drains for a while after each
	 * of its decreases, and overflows again - loss mode stays throughout */
	for (int cycle = 0; cycle < 20; cycle++) {
		for (int i = 0; i < 60; i++)
			sample(qp, 3 * MS);
		qp->req.una_psn = qp->req.psn;
		loss(qp);
		for (int i = 0; i < 20; i++)
			sample(qp, 100 * US);
		CHECK(qp->sk->loss_mode, "loss mode ended in the filler's sawtooth (cycle %d)",
		      cycle);
	}
	/* random loss (short queues) is no sign of a filler; the filler gone:
	 * 128 round trips without an overflow, the last 8 short, end it */
	for (int i = 0; i < 120; i++) {
		sample(qp, i % 2 ? 3 * MS : 100 * US);
		loss(qp);
	}
	CHECK(qp->sk->loss_mode && qp->sk->quiet_rtts == 140,
	      "random loss: loss mode ended or taken for an overflow (%u round trips quiet)",
	      qp->sk->quiet_rtts);
	for (int i = 0; i < 7; i++)
		sample(qp, 100 * US);
	CHECK(qp->sk->loss_mode, "loss mode ended after 7 short samples");
	sample(qp, 100 * US);
	CHECK(!qp->sk->loss_mode, "loss mode stayed 128 round trips without an overflow");

	/* UROCE_CC_QUIET=0: the short samples alone end it (the rule until
	 * the seventh session) */
	qp->sk->quiet_need = 0;
	qp->sk->loss_mode = true;
	sample(qp, 3 * MS);
	sample(qp, 3 * MS);
	qp->req.una_psn = qp->req.psn;
	loss(qp);
	for (int i = 0; i < 8; i++)
		sample(qp, 100 * US);
	CHECK(!qp->sk->loss_mode, "UROCE_CC_QUIET=0: loss mode did not end after 8 short samples");
	qp->sk->quiet_need = 128;

	/* the floor with a long queue: someone else's */
	qp->sk->cwnd = 8 << 10;
	sample(qp, 3 * MS);
	sample(qp, 3 * MS);
	CHECK(qp->sk->loss_mode && pkts(qp) == 8, "a standing queue at the floor: no loss mode");
	for (int i = 0; i < 8; i++)
		sample(qp, 100 * US);
	CHECK(qp->sk->loss_mode, "loss mode ended 8 round trips after its entry");

	/* the window's caps: in loss mode loss_wmax (UROCE_LOSS_WINDOW by
	 * default; UROCE_CC_LOSS_WMAX, at most UR_SACK_WIN / 2), whether above
	 * or below the loss-free cap uroce_window, which holds again when the
	 * mode ends */
	w = UROCE_LOSS_WINDOW < UR_SACK_WIN / 2 ? UROCE_LOSS_WINDOW : UR_SACK_WIN / 2;
	CHECK(qp->sk->loss_wmax == w, "the default cap in loss mode: %u, not %u", qp->sk->loss_wmax,
	      w);
	qp->ep = &ep; /* rc_cwnd(): the endpoint's budget, 1,820 packets */
	qp->sk->peer_resp = true;
	qp->sk->cwnd = (w - 1) << 10;
	for (int i = 0; i < 64; i++)
		uroce_cc_acked(qp, w);
	CHECK(pkts(qp) == w && rc_cwnd(qp) == w,
	      "loss mode, the default cap: window %u (rc_cwnd %u)", pkts(qp), rc_cwnd(qp));
	saved = uroce_window;
	/* above the loss-free cap: a 256-packet window, UROCE_CC_LOSS_WMAX=512 */
	uroce_window = 256;
	qp->sk->loss_wmax = 512;
	for (int i = 0; i < 64; i++)
		uroce_cc_acked(qp, 256);
	CHECK(pkts(qp) > 256 && rc_cwnd(qp) == pkts(qp),
	      "UROCE_CC_LOSS_WMAX=512: the window stayed at %u (rc_cwnd %u)", pkts(qp),
	      rc_cwnd(qp));
	for (int i = 0; i < 1000; i++)
		uroce_cc_acked(qp, 256);
	CHECK(pkts(qp) == 512, "UROCE_CC_LOSS_WMAX=512: window %u", pkts(qp));
	for (int i = 0; i < 140; i++)
		sample(qp, 100 * US);
	CHECK(!qp->sk->loss_mode && pkts(qp) == 256 && rc_cwnd(qp) == 256,
	      "out of loss mode the cap is uroce_window (256) again: %u (rc_cwnd %u)", pkts(qp),
	      rc_cwnd(qp));
	uroce_cc_acked(qp, 256);
	CHECK(pkts(qp) == 256, "out of loss mode: window %u", pkts(qp));
	/* below it: a 1,024-packet window, loss mode's 256 */
	uroce_window = 1024;
	qp->sk->loss_wmax = 256;
	qp->sk->cwnd = 1000 << 10;
	CHECK(rc_cwnd(qp) == 1000, "a 1,024-packet window: rc_cwnd %u, not 1,000", rc_cwnd(qp));
	qp->sk->loss_mode = true;
	qp->sk->quiet_rtts = qp->sk->low_rtts = 0;
	CHECK(rc_cwnd(qp) == 256, "loss mode's cap 256 under a 1,024-packet window: rc_cwnd %u",
	      rc_cwnd(qp));
	uroce_cc_acked(qp, 256);
	CHECK(pkts(qp) == 256, "loss mode's cap 256 under a 1,024-packet window: %u", pkts(qp));
	for (int i = 0; i < 140; i++)
		sample(qp, 100 * US);
	CHECK(!qp->sk->loss_mode, "loss mode did not end");
	qp->sk->cwnd = 1023 << 10;
	uroce_cc_acked(qp, 1024);
	CHECK(pkts(qp) == UROCE_LOSS_WINDOW,
	      "the path not yet measured: the cap %u, not UROCE_LOSS_WINDOW", pkts(qp));
	qp->sk->loss_frac_on = true; /* measured: clean */
	qp->sk->loss_frac = 0;
	qp->sk->cwnd = 1023 << 10;
	for (int i = 0; i < 64; i++)
		uroce_cc_acked(qp, 1024);
	CHECK(pkts(qp) == 1024 && rc_cwnd(qp) == 1024,
	      "out of loss mode the 1,024-packet cap again: %u (rc_cwnd %u)", pkts(qp),
	      rc_cwnd(qp));
	/* a path that resends 1% of the packets: outside loss mode too the
	 * cap is UROCE_LOSS_WINDOW; under UROCE_CLEAN_LOSS uroce_window again */
	qp->sk->loss_frac_on = true;
	qp->sk->loss_frac = 655;
	uroce_cc_acked(qp, 1024);
	CHECK(pkts(qp) == UROCE_LOSS_WINDOW && rc_cwnd(qp) == UROCE_LOSS_WINDOW,
	      "1%% resent: the cap %u (rc_cwnd %u), not UROCE_LOSS_WINDOW", pkts(qp), rc_cwnd(qp));
	qp->sk->loss_frac = UROCE_CLEAN_LOSS - 1;
	for (int i = 0; i < 64; i++)
		uroce_cc_acked(qp, 1024);
	CHECK(pkts(qp) > UROCE_LOSS_WINDOW && pkts(qp) <= 1024,
	      "under UROCE_CLEAN_LOSS resent: the window stayed at %u", pkts(qp));
	qp->sk->loss_frac_on = false;
	qp->sk->loss_frac = 0;
	/* MTU 4096: at most UROCE_WINDOW_BYTES in flight (256 packets); the
	 * environment's UROCE_WINDOW (uroce_window_bytes 0) counts packets,
	 * within the endpoint's budget (4 MiB / 4,224: 496) */
	qp->mtu = 4096;
	CHECK(rc_window(qp) == UROCE_WINDOW_BYTES / 4096 &&
		  rc_cwnd(qp) == UROCE_WINDOW_BYTES / 4096,
	      "MTU 4096: rc_window %u, rc_cwnd %u", rc_window(qp), rc_cwnd(qp));
	uroce_window_bytes = 0;
	CHECK(rc_window(qp) == rc_ep_budget(qp) && rc_ep_budget(qp) == 496,
	      "MTU 4096, UROCE_WINDOW=1024: rc_window %u (budget %u)", rc_window(qp),
	      rc_ep_budget(qp));
	uroce_window_bytes = UROCE_WINDOW_BYTES;
	qp->mtu = 1024;
	/* a peer whose responses did not show selective repeat (IBTA
	 * go-back-N), or no selective repeat here: UROCE_GBN_WINDOW */
	qp->sk->peer_resp = false;
	CHECK(rc_cwnd(qp) == UROCE_GBN_WINDOW && rc_window(qp) == 1024,
	      "a go-back-N peer under a 1,024-packet window: rc_cwnd %u, rc_window %u", rc_cwnd(qp),
	      rc_window(qp));
	{
		struct uroce_sack *sk = qp->sk;

		qp->sk = NULL;
		CHECK(rc_cwnd(qp) == UROCE_GBN_WINDOW, "no selective repeat: rc_cwnd %u",
		      rc_cwnd(qp));
		qp->sk = sk;
	}
	uroce_window = saved;
	qp->sk->loss_wmax = w;
	qp->sk->peer_resp = false;
	qp->ep = NULL;

	/* timeouts */
	qp->sk->cwnd = 100 << 10;
	uroce_cc_timeout(qp);
	CHECK(pkts(qp) == 50, "a timeout: %u, not halved", pkts(qp));
	for (int i = 0; i < 10; i++)
		uroce_cc_timeout(qp);
	CHECK(pkts(qp) == 4, "timeouts below the floor: %u", pkts(qp));

	/* off (UROCE_CC=0): nothing moves */
	qp->sk->cc = false;
	qp->sk->cwnd = 100 << 10;
	sample(qp, 9 * MS);
	sample(qp, 9 * MS);
	loss(qp);
	uroce_cc_timeout(qp);
	CHECK(pkts(qp) == 100, "UROCE_CC off: the window moved to %u", pkts(qp));

	/* RACK's reordering window (sack.c): 0 until reordering was seen,
	 * then a step of a quarter of the smallest round trip (at least 50
	 * us) per spurious resend, never more than the smoothed round trip;
	 * one step from the start while READs are outstanding */
	unsetenv("UROCE_SACK_REO");
	qp->sk->base_rtt_ns = 400 * US;
	qp->sk->reo_steps = 0;
	qp->req.srtt_ns = 500 * US;
	CHECK(uroce_sack_reo_wnd(qp) == 0, "reordering window %llu ns before any reordering",
	      (unsigned long long)uroce_sack_reo_wnd(qp));
	qp->req.rd_inflight = 1;
	CHECK(uroce_sack_reo_wnd(qp) == 100 * US, "READs out: %llu ns, not a step",
	      (unsigned long long)uroce_sack_reo_wnd(qp));
	qp->req.rd_inflight = 0;
	qp->sk->reo_steps = 1;
	CHECK(uroce_sack_reo_wnd(qp) == 100 * US, "one step: %llu ns",
	      (unsigned long long)uroce_sack_reo_wnd(qp));
	qp->sk->base_rtt_ns = 40 * US;
	CHECK(uroce_sack_reo_wnd(qp) == 50 * US, "one step of a short round trip: %llu ns",
	      (unsigned long long)uroce_sack_reo_wnd(qp));
	qp->sk->reo_steps = 16;
	CHECK(uroce_sack_reo_wnd(qp) == 500 * US, "16 steps: %llu ns, not the smoothed round trip",
	      (unsigned long long)uroce_sack_reo_wnd(qp));

	free(qp->sk);
	free(qp);
	printf("test_cc: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

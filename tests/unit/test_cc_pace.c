/* Pacing and the undo of a spurious loss decrease (src/transport/cc.c,
 * docs/selective-repeat.md "Pacing"), driven with a synthetic clock - no
 * packets, no sleeps:
 *   - the gap between packets is the smoothed round trip over the window,
 *     at 5/4 of the window's rate (twice it in slow start);
 *   - a burst of at most the quantum (200 us) or 16 packets goes at once,
 *     then the pacer holds the QP back and names the time it may go on
 *     (req.wake_ns); a window sent through it takes about a round trip
 *     over the gain, not no time at all;
 *   - time spent idle gives no credit, nor a wake-up that came late
 *     (what it would catch up on would leave as one burst);
 *   - paced only where bursts overflow a queue: in loss mode (not after
 *     a loss out of it);
 *   - UROCE_PACE_US=0, UROCE_CC=0 and a peer without selective repeat
 *     are not paced;
 *   - a loss decrease found spurious is undone, once; a timeout or a delay
 *     decrease since makes it stand.
 */
#include <stdlib.h>

#include "transport/rc.h"

#include "check.h"

#define US 1000ull
#define MS 1000000ull

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
	return qp;
}

/* Send n packets as fast as the pacer lets, from t; the time the last one
 * left (the clock jumps to each wake-up). */
static uint64_t send_paced(struct uroce_qp *qp, uint32_t n, uint64_t t, uint32_t *holds)
{
	for (uint32_t i = 0; i < n; i++) {
		int guard = 0;

		while (!uroce_cc_pace_ok(qp, t) && guard++ < 4) {
			(*holds)++;
			CHECK(qp->req.wake_ns > t, "held back without a later wake-up (%llu, %llu)",
			      (unsigned long long)qp->req.wake_ns, (unsigned long long)t);
			t = qp->req.wake_ns;
			qp->req.wake_ns = 0;
		}
		uroce_cc_paced(qp, 1, t);
	}
	return t;
}

int main(void)
{
	struct uroce_ep ep = {.rcvbuf = 4u << 20};
	struct uroce_qp *qp;
	uint64_t t, g, end;
	uint32_t holds = 0, burst;

	unsetenv("UROCE_CC");
	unsetenv("UROCE_PACE_US");
	unsetenv("UROCE_PACE_GAIN");
	/* the pacer's own rules; its make-up for late wake-ups (on by
	 * default since session 19) is checked at the end */
	setenv("UROCE_PACE_COMP", "0", 1);
	qp = new_qp(&ep);
	CHECK(qp->sk->pace_quantum_ns == 200 * US, "the quantum: %llu ns",
	      (unsigned long long)qp->sk->pace_quantum_ns);

	/* 128 packets per 2 ms: a gap of 2 ms / 128 / 1.25 = 12.5 us */
	qp->sk->cwnd = 128 << 10;
	qp->req.srtt_ns = 2 * MS;
	g = uroce_cc_pace_gap(qp);
	CHECK(g == 12500, "the gap: %llu ns, not 12,500", (unsigned long long)g);
	CHECK(uroce_cc_pace_burst(qp) == 200 * US, "the burst: %llu ns",
	      (unsigned long long)uroce_cc_pace_burst(qp));
	qp->sk->slow_start = true;
	CHECK(uroce_cc_pace_gap(qp) == 2 * MS / 256, "slow start: twice the rate");
	qp->sk->slow_start = false;

	/* only where bursts overflow a queue: in loss mode */
	t = 10 * MS;
	CHECK(uroce_cc_pace_ok(qp, t), "held back before any loss");
	uroce_cc_paced(qp, 1000, t);
	CHECK(uroce_cc_pace_ok(qp, t), "held back before any loss, 1,000 packets sent");
	qp->sk->pace_ns = 0;
	qp->sk->loss_mode = true;

	/* a burst, then held back */
	burst = 0;
	while (uroce_cc_pace_ok(qp, t) && burst < 1000) {
		uroce_cc_paced(qp, 1, t);
		burst++;
	}
	CHECK(burst == 16, "a burst of %u packets at once, not 200 us / 12.5 us = 16", burst);
	CHECK(qp->req.wake_ns > t && qp->req.wake_ns <= t + g + 1,
	      "the wake-up: %llu ns after, not within a gap",
	      (unsigned long long)(qp->req.wake_ns - t));
	qp->req.wake_ns = 0;

	/* a window through the pacer: spread over about srtt / 1.25 */
	end = send_paced(qp, 128, t, &holds);
	CHECK(end - t >= (128 - 16) * g && end - t <= 128 * g + 200 * US,
	      "128 packets took %llu us, not about 1.6 ms", (unsigned long long)(end - t) / 1000);
	CHECK(holds >= 100, "held back %u times for 128 packets", holds);

	/* idle: no credit beyond one burst */
	t = end + 50 * MS;
	burst = 0;
	while (uroce_cc_pace_ok(qp, t) && burst < 1000) {
		uroce_cc_paced(qp, 1, t);
		burst++;
	}
	CHECK(burst == 16, "after 50 ms idle a burst of %u, not 16", burst);
	/* held back, and woken 500 us late: still one burst, no more */
	t = qp->req.wake_ns + 500 * US;
	qp->req.wake_ns = 0;
	burst = 0;
	while (uroce_cc_pace_ok(qp, t) && burst < 1000) {
		uroce_cc_paced(qp, 1, t);
		burst++;
	}
	CHECK(burst == 16, "a wake-up 500 us late sent %u at once, not 16", burst);
	qp->req.wake_ns = 0;

	/* a READ request stands for its responses */
	t += 100 * MS;
	CHECK(uroce_cc_pace_ok(qp, t), "idle: not paced");
	uroce_cc_paced(qp, 64, t);
	CHECK(!uroce_cc_pace_ok(qp, t), "64 responses' worth at once and not held back");
	qp->req.wake_ns = 0;

	/* a small window: at least 16 packets go at once */
	qp->sk->cwnd = 8 << 10;
	g = uroce_cc_pace_gap(qp);
	CHECK(uroce_cc_pace_burst(qp) == 16 * g, "a small window's burst: %llu, not 16 gaps",
	      (unsigned long long)uroce_cc_pace_burst(qp));

	/* not paced: no round trip yet, CC off, peer without selective repeat */
	qp->req.srtt_ns = 0;
	CHECK(!uroce_cc_pace_gap(qp), "paced without a round trip");
	qp->req.srtt_ns = 2 * MS;
	qp->sk->cc = false;
	CHECK(!uroce_cc_pace_gap(qp), "paced with UROCE_CC=0");
	qp->sk->cc = true;
	qp->sk->peer_resp = false;
	CHECK(!uroce_cc_pace_gap(qp), "paced without selective repeat");
	free(qp->sk);
	free(qp);
	setenv("UROCE_PACE_US", "0", 1);
	qp = new_qp(&ep);
	qp->req.srtt_ns = 2 * MS;
	CHECK(!uroce_cc_pace_gap(qp), "paced with UROCE_PACE_US=0");
	unsetenv("UROCE_PACE_US");
	free(qp->sk);
	free(qp);
	qp = new_qp(&ep);
	qp->req.srtt_ns = 2 * MS;

	/* the undo: a loss decrease with a long queue, found spurious */
	uroce_cc_rtt(qp, 100 * US);
	qp->sk->cwnd = 200 << 10;
	qp->sk->slow_start = false;
	uroce_cc_rtt(qp, 3 * MS);
	qp->sk->cc_next_ns = 0;
	uroce_cc_rtt(qp, 3 * MS); /* two long samples: a long queue */
	qp->sk->cwnd = 200 << 10;
	qp->sk->cc_next_ns = 0;
	qp->req.psn = 1000;
	CHECK(uroce_cc_loss(qp), "a loss with a long queue: no decrease");
	CHECK((qp->sk->cwnd >> 10) < 200, "no decrease");
	t = uroce_now_ns();
	uroce_cc_paced(qp, 1000, t);
	CHECK(uroce_cc_pace_ok(qp, t), "paced after a loss, out of loss mode");
	uroce_cc_undo(qp);
	CHECK((qp->sk->cwnd >> 10) == 200 && !qp->sk->recover_on && qp->sk->ccst.undos == 1,
	      "undone to %u packets, not 200", qp->sk->cwnd >> 10);
	uroce_cc_undo(qp);
	CHECK(qp->sk->ccst.undos == 1, "undone twice");
	qp->sk->cc_next_ns = 0;
	CHECK(uroce_cc_loss(qp), "the next loss: no decrease");
	uroce_cc_timeout(qp);
	uroce_cc_undo(qp);
	CHECK((qp->sk->cwnd >> 10) < 100, "a timeout since, and the decrease undone: %u",
	      qp->sk->cwnd >> 10);
	free(qp->sk);
	free(qp);

	/* the schedule that late wake-ups lose, made up by the rate
	 * (UROCE_PACE_COMP=1, session 15): woken 100 us after the burst's
	 * credit every time, a third of the schedule is lost; the gap
	 * shrinks by as much - by default since session 19 (UROCE_PACE_COMP
	 * unset or 1).  Woken 600 us late, three quarters are lost: made up
	 * to the cap, 3/4 of the gap (4x the rate; session 19, 2x before).
	 * UROCE_PACE_COMP=0: unchanged */
	for (int run = 0; run < 3; run++) {
		uint64_t g0, late = run == 2 ? 600 * US : 100 * US;
		int comp = run > 0;

		if (comp)
			unsetenv("UROCE_PACE_COMP");
		else
			setenv("UROCE_PACE_COMP", "0", 1);
		qp = new_qp(&ep);
		CHECK(qp->sk->pace_comp == comp, "UROCE_PACE_COMP %s: %d", comp ? "unset" : "0",
		      qp->sk->pace_comp);
		qp->sk->loss_mode = true;
		qp->sk->cwnd = 128 << 10;
		qp->req.srtt_ns = 2 * MS;
		g0 = uroce_cc_pace_gap(qp);
		t = 1000 * MS;
		for (int i = 0; i < 20000 && t < 1200 * MS; i++) {
			if (!uroce_cc_pace_ok(qp, t)) {
				/* late: past the burst's credit */
				t = qp->sk->pace_ns + late;
				qp->req.wake_ns = 0;
			}
			uroce_cc_paced(qp, 1, t);
		}
		g = uroce_cc_pace_gap(qp);
		if (run == 1)
			CHECK(qp->sk->pl_frac >= 200 && qp->sk->pl_frac <= 512 &&
				  g < g0 * 80 / 100 && g >= g0 / 2,
			      "late wake-ups: %u/1024 of the schedule lost, gap %llu of %llu ns",
			      qp->sk->pl_frac, (unsigned long long)g, (unsigned long long)g0);
		else if (run == 2)
			CHECK(qp->sk->pl_frac > 600 && qp->sk->pl_frac <= 768 && g < g0 / 2 &&
				  g >= g0 / 4,
			      "600 us late: %u/1024 made up (at most 768), gap %llu of %llu ns",
			      qp->sk->pl_frac, (unsigned long long)g, (unsigned long long)g0);
		else
			CHECK(qp->sk->pl_frac == 0 && g == g0,
			      "UROCE_PACE_COMP=0: %u/1024, gap %llu of %llu ns", qp->sk->pl_frac,
			      (unsigned long long)g, (unsigned long long)g0);
		free(qp->sk);
		free(qp);
	}
	unsetenv("UROCE_PACE_COMP");
	printf("test_cc_pace: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

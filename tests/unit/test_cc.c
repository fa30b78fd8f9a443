/* The congestion control law between uroce peers (src/transport/sack.c,
 * docs/selective-repeat.md "Congestion control"), driven with synthetic
 * round-trip samples and losses - no packets, no clock dependence (the
 * once-per-round-trip gate is opened by hand between steps):
 *   - delay mode: one sample above the target (a descheduled peer) does
 *     not move the window, two in a row do (Swift's decrease, at most
 *     halving); below it the window grows one packet per window;
 *   - a loss with short queues (random loss) changes nothing;
 *   - a loss with a long queue enters loss mode: x0.7 per loss, +2 packets
 *     per window, no decrease on delay, until 8 short samples in a row;
 *   - a long queue with the window at its floor enters loss mode too;
 *   - timeouts halve the window, never below the floor.
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
	uint32_t w;

	if (!qp || !(qp->sk = calloc(1, sizeof(*qp->sk)))) {
		printf("test_cc: out of memory\n");
		return 1;
	}
	qp->sk->cc = true;
	qp->sk->cwnd = UROCE_WINDOW << 10;
	qp->sk->target_ns = 1 * MS;

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

	/* a loss with a long queue: loss mode */
	sample(qp, 3 * MS);
	w = pkts(qp);
	loss(qp);
	CHECK(qp->sk->loss_mode, "a loss with a long queue: no loss mode");
	CHECK(pkts(qp) >= w * 7 / 10 - 1 && pkts(qp) <= w * 7 / 10 + 1,
	      "loss mode: %u, not %u x 0.7", pkts(qp), w);
	w = pkts(qp);
	for (int i = 0; i < 4; i++)
		sample(qp, 3 * MS);
	CHECK(pkts(qp) == w, "loss mode: delay moved the window to %u", pkts(qp));
	uroce_cc_acked(qp, w);
	CHECK(pkts(qp) == w + 2, "loss mode: a window acknowledged gave %u, not %u", pkts(qp),
	      w + 2);
	loss(qp); /* every loss counts now, queue or not */
	CHECK(pkts(qp) < w + 2, "loss mode: a loss did not decrease");
	for (int i = 0; i < 7; i++)
		sample(qp, 100 * US);
	sample(qp, 3 * MS); /* not 8 in a row */
	CHECK(qp->sk->loss_mode, "loss mode ended without 8 short samples in a row");
	for (int i = 0; i < 8; i++)
		sample(qp, 100 * US);
	CHECK(!qp->sk->loss_mode, "loss mode did not end after 8 short samples");

	/* the floor with a long queue: someone else's */
	qp->sk->cwnd = 8 << 10;
	sample(qp, 3 * MS);
	sample(qp, 3 * MS);
	CHECK(qp->sk->loss_mode && pkts(qp) == 8, "a standing queue at the floor: no loss mode");

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

	free(qp->sk);
	free(qp);
	printf("test_cc: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

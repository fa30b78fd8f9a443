/* Swift's split of host and fabric delay between uroce peers
 * (src/transport/cc.c, pkt.h UR_BTH4_HD; docs/selective-repeat.md
 * "Session 17"), without packets on a wire or a clock dependence:
 *   - the field: 10 bits of 8 us in resv8a bits 2-4 and resv7, flagged
 *     by resv8a bit 5; rounding, saturation, the bits around it (the
 *     selective-repeat offer, PIGGY_OK, NOPULL, AckReq) untouched;
 *   - the responder stamps its ACKs and selective ACKs only: not
 *     requests (whose resv8a/resv7 carry the incarnation), not READ
 *     responses, not with UROCE_CC_HD=0, not without a kernel receive
 *     time, not before the requester offered selective repeat;
 *   - the requester: a response without the flag (a responder that does
 *     not stamp, a piggy-backed ACK) leaves the round trip whole - today's
 *     behaviour; with it, the fabric round trip is the sample less the
 *     peer's host delay and our own socket wait; a host delay not shorter
 *     than the sample (hostile, a clock step) is ignored;
 *   - the law: UROCE_CC_HD=1 (the default) only measures - two long
 *     samples decrease the window as before; =2 the same samples, long by
 *     the peer's host delay alone, do not; a long fabric round trip still
 *     does; =3 the pacer's gap follows the fabric round trip.
 */
#include <stdlib.h>
#include <string.h>

#include "transport/rc.h"
#include "transport/pkt.h"

#include "check.h"

#define US 1000ull
#define MS 1000000ull

static struct uroce_qp *new_qp(struct uroce_ep *ep, const char *mode)
{
	struct uroce_qp *qp = calloc(1, sizeof(*qp));

	if (!qp || !(qp->sk = calloc(1, sizeof(*qp->sk))))
		exit(1);
	if (mode)
		setenv("UROCE_CC_HD", mode, 1);
	else
		unsetenv("UROCE_CC_HD");
	qp->ep = ep;
	qp->mtu = 1024;
	uroce_cc_init(qp);
	qp->sk->peer_resp = true;
	qp->sk->slow_start = false;
	return qp;
}

static void free_qp(struct uroce_qp *qp)
{
	free(qp->sk);
	free(qp);
}

/* A response as the requester receives it: through uroce_sack_rx, the
 * ACK's kernel receive time kns, its host delay hd (ns; -1: no field). */
static void rx_ack(struct uroce_qp *qp, struct uroce_ep *ep, int64_t hd, uint64_t kns)
{
	uint8_t buf[64];
	struct uroce_pkt p;

	uroce_pkt_init(&p, buf, UR_OPC_ACK | UR_TR_RC, 1, 7, 0);
	p.bth[4] |= UR_BTH4_SACK;
	if (hd >= 0)
		ur_bth_hd_set(p.bth, (uint64_t)hd);
	ep->rx_kns = kns;
	uroce_sack_rx(qp, &p);
}

/* Two samples in a row (the law's "long queue"), gates open. */
static void samples2(struct uroce_qp *qp, struct uroce_ep *ep, uint64_t s, int64_t hd, uint64_t now)
{
	for (int i = 0; i < 2; i++) {
		rx_ack(qp, ep, hd, now);
		qp->sk->cc_next_ns = 0;
		uroce_cc_rtt(qp, uroce_cc_fabric(qp, s, now));
	}
}

static void field(void)
{
	uint8_t bth[12];

	memset(bth, 0, sizeof(bth));
	CHECK(ur_bth_hd(bth) == -1, "no flag: no host delay");
	ur_bth_hd_set(bth, 0);
	CHECK(ur_bth_hd(bth) == 0 && (bth[4] & UR_BTH4_HD), "0 ns: the flag, 0");
	ur_bth_hd_set(bth, 12 * US);
	CHECK(ur_bth_hd(bth) == 16 * US, "12 us rounds to 16 us: %lld", (long long)ur_bth_hd(bth));
	ur_bth_hd_set(bth, 1234 * US);
	CHECK(ur_bth_hd(bth) == 1232 * US, "1,234 us: %lld", (long long)ur_bth_hd(bth));
	ur_bth_hd_set(bth, 60 * MS);
	CHECK(ur_bth_hd(bth) == (int64_t)UR_HD_MAX * UR_HD_UNIT_NS,
	      "60 ms saturates at 8,184 us: %lld", (long long)ur_bth_hd(bth));
	/* the bits around it */
	memset(bth, 0, sizeof(bth));
	bth[4] = UR_BTH4_SACK | UR_BTH4_PIGGY_OK | UR_BTH4_NOPULL;
	bth[8] = 0x80;
	bth[5] = 0x12;
	bth[9] = 0x34;
	ur_bth_hd_set(bth, 8184 * US);
	CHECK((bth[4] & (UR_BTH4_SACK | UR_BTH4_PIGGY_OK | UR_BTH4_NOPULL)) ==
		      (UR_BTH4_SACK | UR_BTH4_PIGGY_OK | UR_BTH4_NOPULL) &&
		  (bth[8] & 0x80) && bth[5] == 0x12 && bth[9] == 0x34,
	      "the other bits kept: %02x %02x", bth[4], bth[8]);
	ur_bth_hd_set(bth, 8 * US); /* a smaller one over a larger one */
	CHECK(ur_bth_hd(bth) == 8 * US && (bth[8] & 0x80), "8 us over 8,184 us: %lld",
	      (long long)ur_bth_hd(bth));
}

static void stamp(void)
{
	struct uroce_ep ep = {.rcvbuf = 4u << 20};
	struct uroce_qp *qp = new_qp(&ep, NULL);
	uint8_t buf[64];
	struct uroce_pkt p;
	uint64_t now = uroce_now_ns();

	CHECK(qp->sk->hd_mode == 1, "UROCE_CC_HD's default: stamp and measure (%u)",
	      qp->sk->hd_mode);
	/* the responder saw a request 300 us ago (its kernel timestamp) */
	qp->sk->req_kns = now > 300 * US ? now - 300 * US : 1;
	uroce_pkt_init(&p, buf, UR_OPC_ACK | UR_TR_RC, 1, 7, 0);
	CHECK(ur_bth_hd(p.bth) == -1, "an ACK from pkt_init carries no host delay");
	uroce_cc_hd_stamp(qp, &p);
	CHECK(ur_bth_hd(p.bth) == -1, "not before the requester offered selective repeat");
	qp->sk->peer_req = true;
	uroce_cc_hd_stamp(qp, &p);
	CHECK(ur_bth_hd(p.bth) >= (int64_t)(296 * US) && ur_bth_hd(p.bth) < (int64_t)(50 * MS),
	      "an ACK: the host delay since the kernel's receive time, %lld ns",
	      (long long)ur_bth_hd(p.bth));
	uroce_pkt_init(&p, buf, UR_OPC_SACK, 1, 7, UR_SACK_PAYLOAD);
	uroce_cc_hd_stamp(qp, &p);
	CHECK(ur_bth_hd(p.bth) >= (int64_t)(296 * US), "a selective ACK too");
	uroce_pkt_init(&p, buf, UR_OPC_READ_RESP_ONLY | UR_TR_RC, 1, 7, 8);
	uroce_cc_hd_stamp(qp, &p);
	CHECK(ur_bth_hd(p.bth) == -1, "not a READ response");
	uroce_pkt_init(&p, buf, UR_OPC_ACK | UR_TR_RC, 1, 7, 0);
	qp->sk->req_kns = 0;
	uroce_cc_hd_stamp(qp, &p);
	CHECK(ur_bth_hd(p.bth) == -1, "not without a kernel receive time");
	free_qp(qp);

	qp = new_qp(&ep, "0");
	qp->sk->peer_req = true;
	qp->sk->req_kns = now > 300 * US ? now - 300 * US : 1;
	uroce_pkt_init(&p, buf, UR_OPC_ACK | UR_TR_RC, 1, 7, 0);
	uroce_cc_hd_stamp(qp, &p);
	CHECK(ur_bth_hd(p.bth) == -1, "UROCE_CC_HD=0: not stamped");
	free_qp(qp);

	/* the receive side records the request's kernel time (responder) */
	qp = new_qp(&ep, NULL);
	uroce_pkt_init(&p, buf, UR_OPC_SEND_ONLY | UR_TR_RC, 1, 7, 8);
	p.bth[4] |= UR_BTH4_SACK;
	ep.rx_kns = 12345;
	uroce_sack_rx(qp, &p);
	CHECK(qp->sk->peer_req && qp->sk->req_kns == 12345, "a request's kernel time: %llu",
	      (unsigned long long)qp->sk->req_kns);
	ep.rx_kns = 0;
	free_qp(qp);
}

static void fabric(void)
{
	struct uroce_ep ep = {.rcvbuf = 4u << 20};
	struct uroce_qp *qp = new_qp(&ep, "3");
	uint64_t now = 100 * MS;

	/* a responder that does not stamp: the sample whole */
	rx_ack(qp, &ep, -1, now - 50 * US);
	CHECK(qp->sk->rsp_hd == -1 && uroce_cc_fabric(qp, 3 * MS, now) == 3 * MS,
	      "no field: the round trip whole (%llu)",
	      (unsigned long long)uroce_cc_fabric(qp, 3 * MS, now));
	/* the peer kept it 2 ms, our socket 200 us */
	rx_ack(qp, &ep, 2 * MS, now - 200 * US);
	CHECK(uroce_cc_fabric(qp, 3 * MS, now) == 800 * US, "3 ms - 2 ms - 200 us: %llu",
	      (unsigned long long)uroce_cc_fabric(qp, 3 * MS, now));
	/* no kernel time here: the peer's part only */
	rx_ack(qp, &ep, 2 * MS, 0);
	CHECK(uroce_cc_fabric(qp, 3 * MS, now) == 1 * MS, "without our kernel time: %llu",
	      (unsigned long long)uroce_cc_fabric(qp, 3 * MS, now));
	/* hostile: a host delay longer than the round trip is ignored */
	rx_ack(qp, &ep, 8 * MS, now - 10 * US);
	CHECK(uroce_cc_fabric(qp, 3 * MS, now) == 3 * MS && qp->sk->hdst.ignored >= 1,
	      "a host delay longer than the sample: ignored (%llu)",
	      (unsigned long long)uroce_cc_fabric(qp, 3 * MS, now));
	rx_ack(qp, &ep, 2900 * US, now - 100 * US);
	CHECK(uroce_cc_fabric(qp, 3 * MS, now) == 3 * MS,
	      "host delays adding up to the sample: ignored");
	free_qp(qp);

	/* UROCE_CC_HD=1 measures only */
	qp = new_qp(&ep, "1");
	rx_ack(qp, &ep, 2 * MS, now - 200 * US);
	CHECK(uroce_cc_fabric(qp, 3 * MS, now) == 3 * MS && qp->sk->fsrtt_ns == 800 * US,
	      "UROCE_CC_HD=1: the law's sample whole, the fabric's measured (%llu)",
	      (unsigned long long)qp->sk->fsrtt_ns);
	free_qp(qp);
}

static void law(void)
{
	struct uroce_ep ep = {.rcvbuf = 4u << 20};
	uint64_t now = 100 * MS;
	uint32_t w;

	/* base 200 us (target 1.2 ms); then round trips of 3.2 ms of which
	 * the peer's host kept 2.5 ms: 700 us in the fabric */
	for (int mode = 1; mode <= 2; mode++) {
		struct uroce_qp *qp = new_qp(&ep, mode == 1 ? "1" : "3");

		qp->sk->cwnd = 128 << 10;
		samples2(qp, &ep, 200 * US, 0, now);
		w = qp->sk->cwnd >> 10;
		samples2(qp, &ep, 3200 * US, 2500 * US, now);
		if (mode == 1)
			CHECK((qp->sk->cwnd >> 10) < w && qp->sk->ccst.dec_delay == 1,
			      "UROCE_CC_HD=1: host delay decreases the window as before (%u -> %u)",
			      w, qp->sk->cwnd >> 10);
		else
			CHECK((qp->sk->cwnd >> 10) == w && qp->sk->ccst.dec_delay == 0,
			      "UROCE_CC_HD=2: host delay alone does not (%u -> %u)", w,
			      qp->sk->cwnd >> 10);
		/* a queue in the fabric still does */
		if (mode == 2) {
			samples2(qp, &ep, 5000 * US, 2500 * US, now);
			CHECK(qp->sk->ccst.dec_delay == 1 && (qp->sk->cwnd >> 10) < w,
			      "a 2.5 ms fabric round trip decreases (%llu, %u -> %u)",
			      (unsigned long long)qp->sk->ccst.dec_delay, w, qp->sk->cwnd >> 10);
		}
		free_qp(qp);
		/* a peer that does not stamp: today's law */
		qp = new_qp(&ep, mode == 1 ? "1" : "3");
		qp->sk->cwnd = 128 << 10;
		samples2(qp, &ep, 200 * US, -1, now);
		samples2(qp, &ep, 3200 * US, -1, now);
		CHECK((qp->sk->cwnd >> 10) < 128 && qp->sk->ccst.dec_delay == 1,
		      "mode %d, no field: 3.2 ms decreases (128 -> %u)", mode, qp->sk->cwnd >> 10);
		free_qp(qp);
	}

	/* UROCE_CC_HD=3: the pacer spreads the window over the fabric's
	 * round trip; 2: over the whole one */
	for (int mode = 2; mode <= 3; mode++) {
		struct uroce_qp *qp = new_qp(&ep, mode == 2 ? "3" : "7");

		qp->sk->cwnd = 100 << 10;
		qp->sk->loss_mode = true;
		qp->req.srtt_ns = 4 * MS;
		rx_ack(qp, &ep, 2 * MS, now);
		uroce_cc_fabric(qp, 4 * MS, now);
		CHECK(qp->sk->fsrtt_ns == 2 * MS, "the fabric's smoothed round trip: %llu",
		      (unsigned long long)qp->sk->fsrtt_ns);
		if (mode == 2)
			CHECK(uroce_cc_pace_gap(qp) == 4 * MS * 100 / (125 * 100),
			      "UROCE_CC_HD=2: the gap from the whole round trip (%llu)",
			      (unsigned long long)uroce_cc_pace_gap(qp));
		else
			CHECK(uroce_cc_pace_gap(qp) == 2 * MS * 100 / (125 * 100),
			      "UROCE_CC_HD=3: from the fabric's (%llu)",
			      (unsigned long long)uroce_cc_pace_gap(qp));
		free_qp(qp);
	}
}

int main(void)
{
	unsetenv("UROCE_CC");
	unsetenv("UROCE_CC_TARGET_US");
	unsetenv("UROCE_PACE_US");
	unsetenv("UROCE_PACE_GAIN");
	unsetenv("UROCE_CC_LOW_LOSS");
	field();
	stamp();
	fabric();
	law();
	unsetenv("UROCE_CC_HD");
	printf("test_cc_hd: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* Selective repeat between uroce peers (docs/design.md, "Selective
 * repeat"): the responder holds what arrives after a gap and says, in a
 * selective ACK, exactly which PSNs it holds; the requester resends only
 * the missing ones.  Used only when both ends offer it (UR_BTH4_SACK on
 * their packets); everything else stays IBTA go-back-N.
 *
 * SACK packet (opcode UR_OPC_SACK = 0xD1): BTH with the PSN acknowledged
 * (every PSN up to it, as an ACKNOWLEDGE's), AETH as an ACK's, then 132
 * payload bytes: the first PSN the responder misses (base, 3 bytes, after
 * a byte numbering the QP's selective ACKs) and a 1,024-bit map, bit i
 * (byte i / 8, bit i % 8 from the least significant) set when PSN base + i
 * is held.  Bit 0 is always clear.  The number tells a late (reordered)
 * selective ACK from a newer one: only the newest says what is missing.
 *
 * All of it runs under qp->lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport/rc.h"

/* What all the QPs of a process may hold after gaps, in bytes: a bound on
 * the memory a lossy peer (or a hostile one) makes us keep. */
#define SACK_HELD_MAX (64u << 20)
static _Atomic unsigned long held_bytes;

/* The soonest a tail loss probe follows a resend or the last response
 * asked for (tlp_arm). */
#define SACK_TLP_MIN_NS 1000000ull

/* How much later than its reordering window a hole's wake-up comes when a
 * selective ACK is expected to look first (uroce_sack_rack). */
#define SACK_RACK_LATE_NS 1000000ull

/* What a retransmission timeout resends at once from una (the slow start
 * window's size, cc.c CC_INIT_PKTS; uroce_sack_timeout). */
#define SACK_RTO_BURST 16u

/* RACK (RFC 8985): a hole counts as lost once something sent at least the
 * reordering window after it has arrived; the window is 0 until a resend
 * was found spurious (reordering seen, as RFC 8985's reo_wnd in recovery
 * without it), then a quarter of the smallest round trip, at least
 * SACK_REO_MIN_NS, times the steps that spurious resends added (up to
 * SACK_REO_STEPS_MAX, and never more than the smoothed round trip); a step
 * goes again every SACK_REO_DECAY round trips.  UROCE_SACK_REO=0 (a bench
 * knob): one step more from the start, the rule until session 16. */
#define SACK_REO_MIN_NS	   50000ull
#define SACK_REO_STEPS_MAX 16u
#define SACK_REO_DECAY	   1024u

bool uroce_sack_lazy(void)
{
	static int lazy = -1;

	if (lazy < 0) {
		const char *e = getenv("UROCE_SACK_LAZY");

		lazy = !(e && !strcmp(e, "0"));
	}
	return lazy;
}

int uroce_sack_init(struct uroce_qp *qp)
{
	const char *e = getenv("UROCE_SACK");

	uroce_sack_free(qp);
	/* offered by every RC QP in native mode unless UROCE_SACK=0; used
	 * only once the peer's packets offer it too */
	if (qp->tr != UR_TR_RC || uroce_std_mode() || (e && !strcmp(e, "0")))
		return 0;
	qp->sk = calloc(1, sizeof(*qp->sk));
	if (!qp->sk)
		return -ENOMEM;
	uroce_cc_init(qp);
	uroce_sd_init(qp);
	return 0;
}

/* The copies of held packets: buffers of buf_len bytes (an MTU and any
 * headers) come from a per-QP free list and go back to it, up to
 * SACK_POOL_MAX of them.  At 1% loss most packets arrive behind a gap for
 * a round trip; a malloc and free of 4 KiB for each grew and trimmed the
 * heap every time (sysmalloc, page faults and page clearing: 15% of the
 * responder's CPU in perf). */
#define SACK_POOL_MAX 256u

static uint32_t buf_len(const struct uroce_qp *qp)
{
	return qp->mtu + 256;
}

static uint8_t *buf_get(struct uroce_qp *qp, uint32_t len)
{
	struct uroce_sack *sk = qp->sk;
	uint8_t *b;

	if (len > buf_len(qp))
		return malloc(len);
	if (!sk->pool)
		return malloc(buf_len(qp));
	b = sk->pool;
	memcpy(&sk->pool, b, sizeof(sk->pool));
	sk->npool--;
	return b;
}

void uroce_sack_put(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_sack *sk = qp->sk;

	if (!sk || pkt->len > buf_len(qp) || sk->npool >= SACK_POOL_MAX) {
		free(pkt->bth);
	} else {
		memcpy(pkt->bth, &sk->pool, sizeof(sk->pool));
		sk->pool = pkt->bth;
		sk->npool++;
	}
	pkt->bth = NULL;
}

/* The bytes a held packet keeps: all of it, or its headers only when its
 * payload is in its destination already (rx_place.c). */
static uint32_t held_size(const struct uroce_pkt *pkt)
{
	return pkt->placed ? (uint32_t)(pkt->payload - pkt->bth) : pkt->len;
}

/* A held packet leaves its slot h (not taken: dropped). */
static void held_drop(struct uroce_qp *qp, struct uroce_pkt *h)
{
	atomic_fetch_sub(&held_bytes, held_size(h));
	uroce_sack_put(qp, h);
	if (!--qp->sk->nheld)
		uroce_sd_held(qp, false);
}

void uroce_sack_clear(struct uroce_qp *qp)
{
	struct uroce_sack *sk = qp->sk;

	if (sk)
		sk->srun_on = false;
	for (uint32_t i = 0; sk && sk->held && sk->nheld && i < UR_SACK_WIN; i++)
		if (sk->held[i].bth)
			held_drop(qp, &sk->held[i]);
}

void uroce_sack_free(struct uroce_qp *qp)
{
	uroce_sack_clear(qp);
	if (qp->sk) {
		uroce_cc_log(qp);
		uroce_sd_free(qp);
		free(qp->sk->held);
		while (qp->sk->pool) {
			uint8_t *b = qp->sk->pool;

			memcpy(&qp->sk->pool, b, sizeof(qp->sk->pool));
			free(b);
		}
	}
	free(qp->sk);
	qp->sk = NULL;
}

void uroce_sack_stamp(const struct uroce_qp *qp, uint8_t *bth)
{
	bth[4] |= UR_BTH4_SACK;
	bth[4] |= (uint8_t)(((qp->sack_epoch >> 7) << 1) & UR_BTH4_EPOCH);
	bth[8] |= (uint8_t)(qp->sack_epoch & UR_BTH8_EPOCH);
}

/* psn's slot records this transmission: its number (newer than any
 * before: RACK) and time; a first transmission also its first time, and
 * one sent again no longer counts as held. */
static void tx_record(struct uroce_qp *qp, uint32_t psn, uint64_t now)
{
	struct uroce_sack *sk = qp->sk;
	struct uroce_sack_tx *t = &sk->tx[psn % UR_SACK_WIN];

	if (t->valid && t->psn == psn) {
		if (t->sacked && sk->nsacked)
			sk->nsacked--; /* sent again: in the network once more */
	} else {
		t->ts0 = now;
		t->resent = false;
	}
	t->psn = psn;
	t->seq = ++sk->seq;
	t->ts = now;
	t->valid = true;
	t->sacked = false;
}

void uroce_sack_tx_run(struct uroce_qp *qp, uint32_t psn, uint32_t n)
{
	struct uroce_sack *sk = qp->sk;
	uint64_t now = qp->req.tx_ns ? qp->req.tx_ns : uroce_now_ns();

	/* what uroce_sack_tx does for each packet of the run, none resent,
	 * not paced (req.c: a run is neither) */
	uroce_cc_sent_fresh(qp, n);
	for (uint32_t i = 0; i < n; i++, psn = (psn + 1) & UR_PSN_MASK) {
		if (sk->diag)
			uroce_sd_sent(qp, now);
		tx_record(qp, psn, now);
	}
}

void uroce_sack_tx(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	uint64_t now;

	pkt->bth[4] |= UR_BTH4_SACK;
	if (!(pkt->mask & URM_REQ))
		return;
	now = qp->req.tx_ns ? qp->req.tx_ns : uroce_now_ns(); /* (req.c: req_clock) */
	/* the pacer's account (cc.c): a packet, a READ request its
	 * responses; not the PSNs a pull record stands for (pull_pkt_xmit:
	 * nothing in the network) */
	if (pkt->len && uroce_cc_pacing(qp))
		uroce_cc_paced(qp,
			       (pkt->opcode & 0x1f) == UR_OPC_READ_REQ
				   ? (ur_reth_len(pkt) + qp->mtu - 1) / qp->mtu + !ur_reth_len(pkt)
				   : 1,
			       now);
	uroce_sack_stamp(qp, pkt->bth);
	if (pkt->len)
		uroce_cc_sent(qp, ur_psn_diff(pkt->psn, qp->req.max_psn) < 0);
	if (qp->sk->diag && ur_psn_diff(pkt->psn, qp->req.max_psn) >= 0)
		uroce_sd_sent(qp, now);
	tx_record(qp, pkt->psn, now);
}

/* The slot for pkt, emptied of a stale packet (from before the window
 * moved); NULL when pkt's PSN is held already. */
static struct uroce_pkt *hold_slot(struct uroce_qp *qp, const struct uroce_pkt *pkt)
{
	struct uroce_pkt *h = &qp->sk->held[pkt->psn % UR_SACK_WIN];

	if (h->bth && h->psn == pkt->psn)
		return NULL;
	if (h->bth)
		held_drop(qp, h);
	return h;
}

/* pkt goes into its slot h with its copy b. */
static void hold_fill(struct uroce_qp *qp, struct uroce_pkt *h, const struct uroce_pkt *pkt,
		      uint8_t *b)
{
	struct uroce_sack *sk = qp->sk;

	*h = *pkt;
	h->bth = b;
	h->payload = b + (pkt->payload - pkt->bth);
	h->held = false;
	atomic_fetch_add(&held_bytes, held_size(h));
	sk->hold_news = !sk->nheld || pkt->psn != ((sk->held_hi + 1) & UR_PSN_MASK);
	if (!sk->nheld++) {
		uroce_sd_held(qp, true);
		sk->held_hi = pkt->psn;
	} else if (ur_psn_diff(pkt->psn, sk->held_hi) > 0) {
		sk->held_hi = pkt->psn;
	}
	sk->held_since++;
	sk->held_epoch = ur_bth_epoch(pkt->bth);
}

bool uroce_sack_hold(struct uroce_qp *qp, const struct uroce_pkt *pkt)
{
	struct uroce_sack *sk = qp->sk;
	int32_t d = ur_psn_diff(pkt->psn, qp->resp.psn);
	uint32_t n = held_size(pkt);
	struct uroce_pkt *h;
	uint8_t *b;

	if (pkt->held)
		return true; /* held with its ICRC checked (uroce_sack_hold_icrc) */
	if (d <= 0 || (uint32_t)d >= UR_SACK_WIN)
		return false;
	if (sk->nheld && ur_bth_epoch(pkt->bth) != sk->held_epoch)
		uroce_sack_clear(qp); /* the requester started over */
	if (!sk->held && !(sk->held = calloc(UR_SACK_WIN, sizeof(*sk->held))))
		return false;
	if (!(h = hold_slot(qp, pkt))) {
		uroce_qp_count(qp, dup_req, 1); /* held already */
		sk->hold_news = true;		/* the requester thinks it lost */
		return true;
	}
	if (atomic_load(&held_bytes) + n > SACK_HELD_MAX || !(b = buf_get(qp, n)))
		return false;
	memcpy(b, pkt->bth, n);
	hold_fill(qp, h, pkt, b);
	return true;
}

bool uroce_sack_may_hold(const struct uroce_qp *qp, const struct uroce_pkt *pkt)
{
	const struct uroce_sack *sk = qp->sk;
	int32_t d = ur_psn_diff(pkt->psn, qp->resp.psn);
	const struct uroce_pkt *h;

	if (!rc_sack_resp(qp) || !(pkt->bth[4] & UR_BTH4_SACK) || d <= 0 ||
	    (uint32_t)d >= UR_SACK_WIN)
		return false;
	if (sk->nheld && ur_bth_epoch(pkt->bth) != sk->held_epoch)
		return false; /* the requester started over: uroce_sack_rx */
	h = sk->held ? &sk->held[pkt->psn % UR_SACK_WIN] : NULL;
	if (h && h->bth && h->psn == pkt->psn)
		return false; /* a duplicate: nothing of it is placed */
	return atomic_load(&held_bytes) + pkt->len <= SACK_HELD_MAX;
}

int uroce_sack_hold_icrc(struct uroce_qp *qp, struct uroce_pkt *pkt, const struct uroce_ipinfo *ip)
{
	struct uroce_sack *sk = qp->sk;
	uint32_t hdr = (uint32_t)(pkt->payload - pkt->bth), tail = pkt->len - hdr - pkt->paylen;
	struct uroce_pkt *h;
	uint8_t *b;

	if (pkt->len > buf_len(qp) ||
	    (!sk->held && !(sk->held = calloc(UR_SACK_WIN, sizeof(*sk->held)))) ||
	    !(b = buf_get(qp, pkt->len)))
		return 0;
	memcpy(b, pkt->bth, hdr);
	if (!uroce_icrc_ok_copy(pkt, ip, &(struct iovec){b + hdr, pkt->paylen}, 1)) {
		/* checked again as any packet (a GSO batch cut up on the
		 * way: endpoint.c), and copied then */
		struct uroce_pkt t = {.bth = b, .len = pkt->len};

		uroce_sack_put(qp, &t);
		return 0;
	}
	memcpy(b + hdr + pkt->paylen, pkt->payload + pkt->paylen, tail); /* pad, ICRC */
	h = hold_slot(qp, pkt); /* (uroce_sack_may_hold: not held yet) */
	hold_fill(qp, h, pkt, b);
	pkt->held = true;
	return 1;
}

bool uroce_sack_take(struct uroce_qp *qp, uint32_t psn, struct uroce_pkt *pkt)
{
	struct uroce_sack *sk = qp->sk;
	struct uroce_pkt *h;

	if (!sk || !sk->nheld || !sk->held)
		return false;
	h = &sk->held[psn % UR_SACK_WIN];
	if (!h->bth || h->psn != psn)
		return false;
	*pkt = *h;
	h->bth = NULL;
	if (!--sk->nheld)
		uroce_sd_held(qp, false);
	atomic_fetch_sub(&held_bytes, held_size(pkt));
	return true;
}

void uroce_sack_send(struct uroce_qp *qp, uint32_t psn)
{
	struct uroce_sack *sk = qp->sk;
	uint8_t buf[UR_BTH_BYTES + UR_AETH_BYTES + UR_SACK_PAYLOAD + 8];
	uint32_t base = qp->resp.psn;
	struct uroce_pkt pkt;
	uint8_t *map;

	uroce_pkt_init(&pkt, buf, UR_OPC_SACK, qp->attr.dest_qp_num, psn, UR_SACK_PAYLOAD);
	ur_aeth_set(&pkt, UR_AETH_ACK | UR_AETH_CREDIT_INVALID, qp->resp.msn);
	ur_put32(pkt.payload, base | (uint32_t)++sk->sack_no << 24);
	map = pkt.payload + 4;
	memset(map, 0, UR_SACK_WIN / 8);
	sk->held_since = 0;
	/* the PSNs up to the highest held: with 1,024 slots scanned for
	 * every selective ACK, the map cost more than the packet it rode in
	 * (perf, eighth session); a stale one (before base: resp.psn moved
	 * past it otherwise than by taking it) is dropped by the full scan */
	if (sk->held && sk->nheld) {
		int32_t top = ur_psn_diff(sk->held_hi, base);
		uint32_t found = 0;

		for (int32_t d = 1; d > 0 && d <= top && d < (int32_t)UR_SACK_WIN; d++) {
			const struct uroce_pkt *h = &sk->held[(base + (uint32_t)d) % UR_SACK_WIN];

			if (h->bth && h->psn == ((base + (uint32_t)d) & UR_PSN_MASK)) {
				map[d / 8] |= (uint8_t)(1u << (d % 8));
				found++;
			}
		}
		if (found == sk->nheld)
			goto send;
		memset(map, 0, UR_SACK_WIN / 8);
	}
	for (uint32_t i = 0; sk->held && i < UR_SACK_WIN; i++) {
		struct uroce_pkt *h = &sk->held[i];
		int32_t d;

		if (!h->bth)
			continue;
		d = ur_psn_diff(h->psn, base);
		if (d <= 0 || (uint32_t)d >= UR_SACK_WIN) { /* stale: passed */
			held_drop(qp, h);
			continue;
		}
		map[d / 8] |= (uint8_t)(1u << (d % 8));
	}
send:
	uroce_qp_count(qp, sacks_tx, 1);
	uroce_qp_xmit(qp, &pkt);
}

void uroce_sack_forget(struct uroce_qp *qp)
{
	for (uint32_t i = 0; i < UR_SACK_WIN; i++)
		qp->sk->tx[i].sacked = false;
	qp->sk->nsacked = 0;
	qp->sk->sacked_on = false;
	qp->sk->rack_on = false;
	qp->sk->sp_on = false;
	qp->sk->rw_on = false;
}

/* The first hole resent in an episode has arrived: sooner than half the
 * smallest round trip after its resend, it was not the resend that
 * arrived but the packet itself, reordered past later ones (Eifel's idea,
 * by time): the decrease is undone and the reordering window widened. */
static bool reordered(struct uroce_qp *qp, uint64_t sent_ns, uint64_t now)
{
	struct uroce_sack *sk = qp->sk;

	if (!sk->base_rtt_ns || now - sent_ns >= sk->base_rtt_ns / 2)
		return false;
	if (sk->reo_steps < SACK_REO_STEPS_MAX)
		sk->reo_steps++;
	sk->reo_mark = sk->ccst.samples;
	sk->ccst.reo_seen++;
	return true;
}

static void spurious_check(struct uroce_qp *qp, uint64_t now)
{
	qp->sk->sp_on = false;
	if (reordered(qp, qp->sk->sp_ns, now))
		uroce_cc_undo(qp);
}

/* The watched resend has arrived (rw_*): the same test without an undo -
 * with a reordering window of 0 every hole is resent at the first
 * selective ACK that shows it, and this is how reordering is seen. */
static void watch_check(struct uroce_qp *qp, uint64_t now)
{
	qp->sk->rw_on = false;
	reordered(qp, qp->sk->rw_ns, now);
}

static struct uroce_sack_tx *tx_slot(struct uroce_qp *qp, uint32_t psn);

void uroce_sack_acked(struct uroce_qp *qp, uint32_t old)
{
	struct uroce_sack *sk = qp->sk;

	if (sk->sp_on && ur_psn_diff(sk->sp_psn, qp->req.una_psn) < 0)
		spurious_check(qp, uroce_now_ns());
	if (sk->rw_on && ur_psn_diff(sk->rw_psn, qp->req.una_psn) < 0)
		watch_check(qp, uroce_now_ns());
	for (uint32_t p = old; sk->diag && ur_psn_diff(p, qp->req.una_psn) < 0;
	     p = (p + 1) & UR_PSN_MASK)
		if (tx_slot(qp, p))
			uroce_sd_received(qp, tx_slot(qp, p));

	for (uint32_t p = old; sk->nsacked && ur_psn_diff(p, qp->req.una_psn) < 0;
	     p = (p + 1) & UR_PSN_MASK) {
		struct uroce_sack_tx *t = &sk->tx[p % UR_SACK_WIN];

		if (t->valid && t->psn == p && t->sacked) {
			t->sacked = false;
			sk->nsacked--;
		}
	}
}

/* The slot of psn if it holds what was sent at psn. */
static struct uroce_sack_tx *tx_slot(struct uroce_qp *qp, uint32_t psn)
{
	struct uroce_sack_tx *t = &qp->sk->tx[psn % UR_SACK_WIN];

	return t->valid && t->psn == psn ? t : NULL;
}

/* A probe (uroce_req_timer) at now + wait unless one is due sooner, and
 * unless the endpoint hears something before then: a tail loss probe. */
static void tlp_arm(struct uroce_qp *qp, uint64_t wait)
{
	uint64_t t = uroce_now_ns() + (wait > SACK_TLP_MIN_NS ? wait : SACK_TLP_MIN_NS);

	if (!qp->req.deadline_ns || t >= qp->req.deadline_ns)
		return;
	qp->req.probe_rx = atomic_load_explicit(&qp->ep->rx_batches, memory_order_relaxed);
	qp->req.deadline_ns = t;
	uroce_progress_arm(qp->ctx, t);
}

/* Resend psn's packet; its slot then carries the newest transmission.  A
 * resend lost again is found when a selective ACK shows a later
 * transmission arriving without it - but the window may be full, with
 * nothing later to send: then a probe in about a round trip, not four. */
static void resend(struct uroce_qp *qp, uint32_t psn)
{
	if (qp->req.rtt_on && ur_psn_diff(psn, qp->req.rtt_psn) <= 0)
		qp->req.rtt_on = false; /* Karn: no sample across a resend */
	if (uroce_req_resend(qp, psn)) {
		struct uroce_sack *sk = qp->sk;

		if (!sk->rw_on && !qp->req.rd_inflight && tx_slot(qp, psn)) {
			sk->rw_on = true;
			sk->rw_psn = psn;
			sk->rw_ns = tx_slot(qp, psn)->ts;
		}
		uroce_sd_resend(qp, psn, -1);
		uroce_qp_count(qp, retransmits, 1);
		tlp_arm(qp, qp->req.srtt_ns + qp->req.srtt_ns / 2);
	}
}

uint64_t uroce_sack_reo_wnd(const struct uroce_qp *qp)
{
	static int fixed = -1;
	const struct uroce_sack *sk = qp->sk;
	uint64_t w = sk->base_rtt_ns / 4;

	if (fixed < 0) {
		const char *e = getenv("UROCE_SACK_REO");

		fixed = e && !strcmp(e, "0");
	}
	if (w < SACK_REO_MIN_NS)
		w = SACK_REO_MIN_NS;
	/* READs outstanding: one step from the start as before - a READ's
	 * re-request is answered while the responses of the request before
	 * it still arrive, which the watch would take for reordering */
	w *= sk->reo_steps + (uint32_t)(fixed || qp->req.rd_inflight);
	if (qp->req.srtt_ns && w > qp->req.srtt_ns && sk->reo_steps)
		w = qp->req.srtt_ns > SACK_REO_MIN_NS ? qp->req.srtt_ns : SACK_REO_MIN_NS;
	return w;
}

/* The holes before the newest transmission seen arrived (rack_seq): lost
 * once sent a reordering window before it, resent once per transmission
 * (a slot then carries a newer one); the others are looked at again when
 * their window is over (req.wake_ns), unless a selective ACK comes first. */
void uroce_sack_rack(struct uroce_qp *qp, uint64_t now)
{
	struct uroce_sack *sk = qp->sk;
	uint64_t reo, due = 0;
	uint32_t una = qp->req.una_psn, nout = 0;

	if (!sk || !sk->rack_on || !rc_sack_req(qp))
		return;
	if (sk->reo_steps && sk->ccst.samples - sk->reo_mark >= SACK_REO_DECAY) {
		sk->reo_steps--;
		sk->reo_mark = sk->ccst.samples;
	}
	reo = uroce_sack_reo_wnd(qp);
	for (uint32_t p = una; ur_psn_diff(p, sk->rack_hi) < 0; p = (p + 1) & UR_PSN_MASK) {
		struct uroce_sack_tx *t = tx_slot(qp, p);
		uint64_t at;

		if (t && !t->sacked)
			nout++;
		if (!t || t->sacked || (int32_t)(sk->rack_seq - t->seq) <= 0)
			continue;
		/* when it should have arrived, had it been only reordered:
		 * as late after the newest arrival's as it was sent before */
		at = t->ts + sk->rack_rtt_ns + reo;
		if (sk->rack_ts - t->ts >= reo || now >= at) {
			if (uroce_cc_loss(qp) && !sk->sp_on) {
				sk->sp_on = true;
				sk->sp_psn = p;
				sk->sp_ns = now;
			}
			resend(qp, p);
		} else if (!due || at < due) {
			due = at;
		}
	}
	/* Packets sent after the newest one shown arrived are still in the
	 * network (the pipe holds more than these holes): their selective
	 * ACK comes - the last one sent asks for it (req.c) - and looks
	 * again, without a wake-up of the progress thread per gap (an
	 * eventfd write and a context switch: 7-10 thousand per 4 s run at
	 * 1% loss, eighth session).  The wake-up stays, SACK_RACK_LATE_NS
	 * later, for when that selective ACK is lost (without it 1-2% of the
	 * holes waited for a probe, 3-10 ms); one armed serves the gaps
	 * after it.  READ responses do not look: with READs out, the
	 * wake-up as before. */
	if (due && !qp->req.rd_inflight && rc_pipe(qp) > nout && uroce_sack_lazy())
		due += SACK_RACK_LATE_NS;
	if (due && (!qp->req.wake_ns || due < qp->req.wake_ns)) {
		qp->req.wake_ns = due;
		if (qp->ctx)
			uroce_progress_arm(qp->ctx, due);
	}
}

void uroce_sack_rcv(struct uroce_qp *qp, const struct uroce_pkt *pkt)
{
	struct uroce_sack *sk = qp->sk;
	uint32_t base, una = qp->req.una_psn, newest = 0, hi = una;
	uint64_t now = uroce_now_ns(), newest_ts = 0;
	uint32_t mtop, end;
	const uint8_t *map;
	bool any = false;
	uint8_t no;

	if (pkt->paylen < UR_SACK_PAYLOAD)
		return;
	base = ur_get32(pkt->payload) & UR_PSN_MASK;
	no = pkt->payload[0];
	/* one that a newer one overtook describes the past: the responder
	 * may have dropped what it held then (a NAK clears it) */
	if (sk->sack_rx_seen && (int8_t)(uint8_t)(no - sk->sack_rx_no) < 0)
		return;
	sk->sack_rx_seen = true;
	sk->sack_rx_no = no;
	map = pkt->payload + 4;
	/* What the responder has: everything before base, and the map; the
	 * newest selective ACK is the truth, also about what it no longer
	 * holds - up to the map's last bit, or the last PSN an older one
	 * showed held if that is further (after both, nothing is marked) */
	mtop = UR_SACK_WIN / 8;
	while (mtop && !map[mtop - 1])
		mtop--;
	end = (base + mtop * 8) & UR_PSN_MASK;
	if (sk->sacked_on && ur_psn_diff(sk->sacked_hi, end) >= 0)
		end = (sk->sacked_hi + 1) & UR_PSN_MASK;
	if (ur_psn_diff(end, qp->req.psn) > 0)
		end = qp->req.psn;
	sk->sacked_on = false;
	for (uint32_t p = una; ur_psn_diff(p, end) < 0; p = (p + 1) & UR_PSN_MASK) {
		int32_t d = ur_psn_diff(p, base);
		struct uroce_sack_tx *t;
		bool held;

		if (d >= (int32_t)UR_SACK_WIN)
			break;
		t = tx_slot(qp, p);
		if (!t)
			continue;
		held = d < 0 || (d > 0 && (map[d / 8] & (1u << (d % 8))));
		if (!held) {
			if (t->sacked && sk->nsacked)
				sk->nsacked--;
			t->sacked = false;
			continue;
		}
		if (!t->sacked) {
			sk->nsacked++;
			uroce_sd_received(qp, t);
			/* the packet timed has arrived: its round trip is
			 * this, not the repair of a hole before it that its
			 * ACK waits for (which took the window down for
			 * delay that was never in a queue; Karn: a resent
			 * one is not timed) */
			if (qp->req.rtt_on && p == qp->req.rtt_psn)
				uroce_req_rtt(qp, p);
		}
		t->sacked = true;
		sk->sacked_on = true;
		sk->sacked_hi = p;
		if (sk->sp_on && p == sk->sp_psn)
			spurious_check(qp, now);
		if (sk->rw_on && p == sk->rw_psn)
			watch_check(qp, now);
		if (d > 0) {
			if (!any || (int32_t)(t->seq - newest) > 0) {
				newest = t->seq;
				newest_ts = t->ts;
			}
			any = true;
			hi = p;
		}
	}
	if (sk->sp_on && ur_psn_diff(sk->sp_psn, base) < 0)
		spurious_check(qp, now);
	if (sk->rw_on && ur_psn_diff(sk->rw_psn, base) < 0)
		watch_check(qp, now);
	if (!any)
		return;
	/* A hole sent before something that arrived is lost - or reordered
	 * past it (two threads sending, several receive queues): it is given
	 * the reordering window first (uroce_sack_rack) */
	if (!sk->rack_on || (int32_t)(newest - sk->rack_seq) >= 0) {
		sk->rack_seq = newest;
		sk->rack_ts = newest_ts;
		sk->rack_rtt_ns = now - newest_ts;
	}
	sk->rack_on = true;
	sk->rack_hi = hi;
	uroce_sd_cause(qp, UR_SD_RACK);
	uroce_sack_rack(qp, now);
}

void uroce_sack_timeout(struct uroce_qp *qp)
{
	uint32_t una = qp->req.una_psn;

	uroce_qp_count(qp, retries, 1);
	uroce_sd_cause(qp, UR_SD_TIMEOUT);
	/* a silence of a whole timeout: what selective ACKs said the
	 * responder held may be gone (RFC 2018, 8) - resend all of it, as
	 * go-back-N would, but without moving the send state */
	uroce_sack_forget(qp);
	resend(qp, una);
	/* at most SACK_RTO_BURST at once (until session 13 a window: 1,024
	 * PSNs in one burst overflowed the responder's socket, and a window
	 * of up to 256 from each of four flows timing out at the same moment
	 * into one full bottleneck queue - the silence that ends in a
	 * timeout is shared - overflows it again, losing the resends and
	 * starting the timeout over: one such run lost a flow to
	 * RETRY_EXC_ERR).  What lies beyond is resent as the selective ACKs
	 * of these show it missing (a later transmission arrived), or by the
	 * probes */
	for (uint32_t p = (una + 1) & UR_PSN_MASK, n = 1;
	     ur_psn_diff(p, qp->req.psn) < 0 && n < rc_cwnd(qp) && n < SACK_RTO_BURST;
	     p = (p + 1) & UR_PSN_MASK)
		if (tx_slot(qp, p)) {
			resend(qp, p);
			n++;
		}
}

/* One packet per probe, the newest one sent (as TCP's tail loss probe):
 * if it was lost, it is there now; if something before it was, the
 * responder holds this one and its selective ACK names the gap; if only
 * the acknowledgement was lost, the duplicate draws a new one.  Either way
 * the answer says exactly what to resend, where going back would resend
 * the whole window. */
void uroce_sack_probe(struct uroce_qp *qp)
{
	uint32_t p = qp->req.psn, una = qp->req.una_psn, i;

	uroce_qp_count(qp, retries, 1);
	uroce_sd_cause(qp, UR_SD_PROBE);
	uroce_cc_loss(qp);
	uroce_sack_rack(qp, uroce_now_ns()); /* holes past their window */
	do {
		p = (p - 1) & UR_PSN_MASK;
	} while (!tx_slot(qp, p) && ur_psn_diff(p, una) > 0);
	/* a READ (or atomic) at una whose responses stopped: ask for what
	 * is missing of it - and, unless it is the newest request, probe
	 * with that one too: the responder may be holding requests behind
	 * a lost one (a resent request lost again while the window is
	 * full), and only a newer transmission's selective ACK shows it */
	if (uroce_wqe_idx_for_psn(qp, una, &i) && swqe_is_rd(swqe(qp, i))) {
		uint32_t j;

		resend(qp, una);
		if (p == una || (uroce_wqe_idx_for_psn(qp, p, &j) && j == i))
			return;
	}
	resend(qp, p);
}

/* The first PSN of the READ chunk of w that psn is in: where its request
 * was sent. */
static uint32_t read_chunk_start(const struct uroce_qp *qp, const struct uroce_swqe *w,
				 uint32_t psn)
{
	uint32_t chunk = rc_read_chunk(qp), k = (uint32_t)ur_psn_diff(psn, w->first_psn);

	return (w->first_psn + k / chunk * chunk) & UR_PSN_MASK;
}

/* Was the READ response at psn (of w) asked for after the request last
 * sent at s?  The responder answers requests in the order they arrive, so
 * then s's answer came before it - and was lost (RACK, by transmission
 * order). */
static bool read_asked_after(struct uroce_qp *qp, const struct uroce_swqe *w, uint32_t psn,
			     uint32_t s)
{
	uint32_t c = read_chunk_start(qp, w, psn);
	const struct uroce_sack_tx *t = tx_slot(qp, c), *u = tx_slot(qp, s);

	return t && u && c != s && (int32_t)(t->seq - u->seq) > 0;
}

bool uroce_sack_read_lost(struct uroce_qp *qp, const struct uroce_swqe *w, uint32_t psn)
{
	return ur_psn_diff(read_chunk_start(qp, w, psn), qp->req.una_psn) > 0 &&
	       read_asked_after(qp, w, psn, qp->req.una_psn);
}

void uroce_sack_read_gaps(struct uroce_qp *qp, const struct uroce_swqe *w, uint32_t psn)
{
	uint32_t una = qp->req.una_psn, e = (psn - 1) & UR_PSN_MASK;

	uroce_sd_cause(qp, UR_SD_READ);
	/* Every run of missing responses before psn, back to the previous
	 * one placed, chunk by chunk (a request asks for one chunk at most):
	 * asked for again now, unless asked for since psn's request - not
	 * one gap per round trip as una reaches each.  The run at una is
	 * retry_from_una's (comp.c). */
	while (ur_psn_diff(e, una) > 0 && !rc_sack_placed(qp, e)) {
		const struct uroce_sack_tx *t;
		uint32_t c, s = e, i;

		if (!uroce_wqe_idx_for_psn(qp, e, &i) || swqe(qp, i)->opcode != IBV_WR_RDMA_READ)
			return;
		c = read_chunk_start(qp, swqe(qp, i), e);
		while (s != c && ur_psn_diff(s, una) > 0 &&
		       !rc_sack_placed(qp, (s - 1) & UR_PSN_MASK))
			s = (s - 1) & UR_PSN_MASK;
		if (s == una)
			return;
		t = tx_slot(qp, s);
		if (!t || read_asked_after(qp, w, psn, s) || s == read_chunk_start(qp, w, psn))
			resend(qp, s);
		if (s != c)
			return; /* the response before the run is placed */
		e = (s - 1) & UR_PSN_MASK;
	}
}

bool uroce_sack_read_pending(struct uroce_qp *qp)
{
	uint32_t i, una = qp->req.una_psn;
	struct uroce_swqe *w;

	/* una's run was asked for after the newest response placed was: its
	 * answer may be on the way */
	if (!qp->sk->rsp_hi_valid || !uroce_wqe_idx_for_psn(qp, qp->sk->rsp_hi, &i))
		return false;
	w = swqe(qp, i);
	return w->opcode == IBV_WR_RDMA_READ && tx_slot(qp, una) &&
	       !read_asked_after(qp, w, qp->sk->rsp_hi, una);
}

void uroce_sack_read_tail(struct uroce_qp *qp, uint32_t psn)
{
	/* The newest response asked for is here: the responder has answered
	 * every request but those sent after it - una's re-request, whose
	 * answer comes next, or not at all.  No later request will tell
	 * (the window may be full): a probe soon, as TCP's tail loss probe,
	 * instead of at four round trips - unless the endpoint hears more. */
	if (ur_psn_diff(qp->req.psn, psn) == 1 && qp->req.need_retry &&
	    qp->req.retry_psn == qp->req.una_psn)
		tlp_arm(qp, qp->req.srtt_ns / 2);
}

void uroce_sack_went_back(struct uroce_qp *qp)
{
	uroce_sack_forget(qp);
	/* every READ chunk from una on is asked for again and counts against
	 * max_rd_atomic until its last response, placed ahead or not */
	for (uint32_t i = 0; i < UR_SACK_WIN; i++)
		qp->sk->rsp[i].rd_done = false;
}

/* Requester: what a failure to make progress leaves behind. */
void uroce_sack_dump(struct uroce_qp *qp, int lvl)
{
	struct uroce_sack *sk = qp->sk;
	const struct uroce_qp_counters *c = &qp->stats->c;
	uint32_t una = qp->req.una_psn, shown = 0;
	uint64_t now = uroce_now_ns();

	uroce_log(
	    lvl,
	    "QP 0x%06x req: una %u psn %u max %u inflight %u rd %u retry %d need_retry %d@%u "
	    "sq %u/%u/%u off %u nsacked %u rx_no %u/%d srtt %lu progress %lu us ago probes %u "
	    "halted %d rnr %ld wake %ld deadline %ld (us from now)",
	    qp->ibqp.qp_base.qp_num, una, qp->req.psn, qp->req.max_psn, qp->req.inflight,
	    qp->req.rd_inflight, qp->req.retry_cnt, qp->req.need_retry, qp->req.retry_psn,
	    qp->sq.tail, qp->sq.req, qp->sq.head, qp->req.offset, sk ? sk->nsacked : 0,
	    sk ? sk->sack_rx_no : 0, sk ? sk->sack_rx_seen : 0, (unsigned long)qp->req.srtt_ns,
	    (unsigned long)((now - qp->req.progress_ns) / 1000), qp->req.probes, qp->req.halted,
	    qp->req.rnr_until_ns ? (long)(qp->req.rnr_until_ns - now) / 1000 : 0,
	    qp->req.wake_ns ? (long)(qp->req.wake_ns - now) / 1000 : 0,
	    qp->req.deadline_ns ? (long)(qp->req.deadline_ns - now) / 1000 : 0);
	uroce_log(
	    lvl,
	    "QP 0x%06x req: counters acks_rx %lu sacks_rx %lu piggy_rx %lu naks_rx %lu rnr_rx %lu "
	    "dup_resp %lu timeouts %lu retries %lu retransmits %lu tx %lu rx %lu send_err(dev) %lu",
	    qp->ibqp.qp_base.qp_num, (unsigned long)c->acks_rx, (unsigned long)c->sacks_rx,
	    (unsigned long)c->piggy_rx, (unsigned long)c->naks_rx, (unsigned long)c->rnr_naks_rx,
	    (unsigned long)c->duplicates, (unsigned long)c->timeouts, (unsigned long)c->retries,
	    (unsigned long)c->retransmits, (unsigned long)c->tx_pkts, (unsigned long)c->rx_pkts,
	    (unsigned long)qp->ctx->cnt->send_err);
	if (sk)
		uroce_log(
		    lvl,
		    "QP 0x%06x req: cwnd %u pipe %u loss_mode %d rack %d seq %u hi %u rack_seq %u "
		    "sacked_hi %u/%d reo %lu ep_rx %u probe_rx %u",
		    qp->ibqp.qp_base.qp_num, rc_cwnd(qp), rc_pipe(qp), sk->loss_mode, sk->rack_on,
		    sk->seq, sk->rack_hi, sk->rack_seq, sk->sacked_hi, sk->sacked_on,
		    (unsigned long)uroce_sack_reo_wnd(qp),
		    atomic_load_explicit(&qp->ep->rx_batches, memory_order_relaxed),
		    qp->req.probe_rx);
	for (uint32_t i = qp->sq.tail; i != qp->sq.head && i - qp->sq.tail < 8; i++) {
		struct uroce_swqe *w = swqe(qp, i);

		uroce_log(lvl, "  wqe %u op %d len %u state %d psn %u..%u", i, w->opcode, w->length,
			  w->state, w->first_psn, w->last_psn);
	}
	for (uint32_t p = una, n = 0; sk && ur_psn_diff(p, qp->req.psn) < 0 && n < 1100;
	     p = (p + 1) & UR_PSN_MASK, n++) {
		struct uroce_sack_tx *t = tx_slot(qp, p);

		/* what is not known received: sent and not held, or a READ
		 * response not placed */
		if (((t && !t->sacked) || (!t && !rc_sack_placed(qp, p))) && shown++ < 24)
			uroce_log(lvl, "  psn %u tx %s seq %u sacked %d placed %d sent %ld us ago",
				  p, t ? "yes" : "no", t ? t->seq : 0, t ? t->sacked : 0,
				  rc_sack_placed(qp, p), t ? (long)(now - t->ts) / 1000 : -1);
	}
	if (shown > 24)
		uroce_log(lvl, "  (%u more not known received)", shown - 24);
}

void uroce_sack_resp_diag(struct uroce_qp *qp, const struct uroce_pkt *pkt, const char *why)
{
	struct uroce_sack *sk = qp->sk;
	const struct uroce_qp_counters *c = &qp->stats->c;
	uint64_t now;

	if (!sk || !sk->diag)
		return;
	now = uroce_now_ns();
	if (now - sk->diag->resp_log_ns < 20000000ull) {
		sk->diag->resp_log_skipped++;
		return;
	}
	ur_info("QP 0x%06x resp: %s psn %u op 0x%02x epoch %u: expected %u nak_sent %d nheld %u "
		"held_hi %u epoch %u ack_pending %d ack_psn %u acked %d@%u sack_no %u msn %u "
		"(dup %lu oos %lu held %lu acks %lu sacks %lu naks %lu rnr %lu, %u lines skipped)",
		qp->ibqp.qp_base.qp_num, why, pkt->psn, pkt->opcode, ur_bth_epoch(pkt->bth),
		qp->resp.psn, qp->resp.nak_sent, sk->nheld, sk->held_hi, sk->held_epoch,
		qp->resp.ack_pending, qp->resp.ack_psn, qp->resp.acked, qp->resp.acked_psn,
		sk->sack_no, qp->resp.msn, (unsigned long)c->dup_req, (unsigned long)c->oos_req,
		(unsigned long)c->held_req, (unsigned long)c->acks_tx, (unsigned long)c->sacks_tx,
		(unsigned long)c->naks_tx, (unsigned long)c->rnr_naks_tx,
		sk->diag->resp_log_skipped);
	sk->diag->resp_log_ns = now;
	sk->diag->resp_log_skipped = 0;
}

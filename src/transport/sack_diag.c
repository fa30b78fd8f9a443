/* Where a loss's time goes, for the bench (UROCE_SACK_DIAG=1, read when
 * a QP offers selective repeat; docs/selective-repeat.md, "Eighth
 * session"): per QP, what resent each packet (a selective ACK's RACK, a
 * reordering window's wake-up, a probe, a timeout, a READ gap, una's
 * run), how long from a packet's first transmission to its first resend
 * and from its last resend until it was known received (held or
 * acknowledged), why the requester stopped sending and for how long, and
 * how long the responder held something after a gap.  One info line each
 * when the QP goes.  Off (qp->sk->diag NULL), every hook is a test of
 * that pointer.  All of it under qp->lock. */
#include <stdlib.h>
#include <string.h>

#include "transport/rc.h"

static const uint64_t hist_ns[UR_SD_NHIST - 1] = {100000, 300000, 1000000, 3000000, 10000000};

static void hist_add(uint64_t *h, uint64_t ns)
{
	unsigned int i = 0;

	while (i < UR_SD_NHIST - 1 && ns >= hist_ns[i])
		i++;
	h[i]++;
}

void uroce_sd_init(struct uroce_qp *qp)
{
	const char *e = getenv("UROCE_SACK_DIAG");

	if (!e || strcmp(e, "1") || !(qp->sk->diag = calloc(1, sizeof(*qp->sk->diag))))
		return;
	qp->sk->diag->stall = -1;
}

void uroce_sd_resend(struct uroce_qp *qp, uint32_t psn, int cause)
{
	struct uroce_sack_diag *d = qp->sk ? qp->sk->diag : NULL;
	struct uroce_sack_tx *t;
	uint64_t now;

	if (!d)
		return;
	d->resends[cause >= 0 ? cause : d->cause]++;
	t = &qp->sk->tx[psn % UR_SACK_WIN];
	if (!t->valid || t->psn != psn || t->resent)
		return;
	now = uroce_now_ns();
	t->resent = true;
	d->l2r_ns += now - t->ts0;
	d->l2r_n++;
	hist_add(d->l2r_hist, now - t->ts0);
}

void uroce_sd_received(struct uroce_qp *qp, struct uroce_sack_tx *t)
{
	struct uroce_sack_diag *d = qp->sk->diag;
	uint64_t ns;

	if (!d || !t->resent)
		return;
	t->resent = false;
	ns = uroce_now_ns() - t->ts;
	d->fill_ns += ns;
	d->fill_n++;
	hist_add(d->fill_hist, ns);
}

static void stall_end(struct uroce_sack_diag *d, uint64_t now)
{
	if (d->stall < 0)
		return;
	d->stall_ns[d->stall] += now - d->stall_t0;
	d->stall_n[d->stall]++;
	d->stall = -1;
}

void uroce_sd_blocked(struct uroce_qp *qp)
{
	struct uroce_sack_diag *d = qp->sk ? qp->sk->diag : NULL;
	uint32_t max_rd = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1, n = 1;
	int why;
	uint64_t now;

	if (!d || !d->t_first)
		return;
	/* a READ request needs room for its responses (req.c send_read: the
	 * rest of the WQE, or of its chunk; the rest here).  Counted as one,
	 * a READ held back by the window showed as "pace" (session 13) */
	if (qp->sq.req != qp->sq.head && swqe(qp, qp->sq.req)->opcode == IBV_WR_RDMA_READ &&
	    swqe(qp, qp->sq.req)->length > qp->req.offset && qp->mtu)
		n = (swqe(qp, qp->sq.req)->length - qp->req.offset + qp->mtu - 1) / qp->mtu;
	if (qp->sq.req == qp->sq.head)
		why = UR_SD_SQ;
	else if (qp->req.inflight && qp->req.inflight + n > UR_SACK_WIN)
		why = UR_SD_SPAN;
	else if (qp->req.inflight && rc_pipe(qp) + n > rc_window(qp))
		why = UR_SD_WIN;
	else if (qp->req.inflight && rc_pipe(qp) + n > rc_cwnd(qp))
		why = UR_SD_CWND;
	else if (qp->req.inflight && rc_ep_inflight(qp) + n > rc_ep_budget(qp))
		why = UR_SD_EP;
	else if (swqe_is_rd(swqe(qp, qp->sq.req)) && qp->req.rd_inflight >= max_rd)
		why = UR_SD_RD;
	else
		why = UR_SD_PACE;
	if (why == d->stall)
		return;
	now = uroce_now_ns();
	stall_end(d, now);
	d->stall = why;
	d->stall_t0 = now;
}

void uroce_sd_sent(struct uroce_qp *qp, uint64_t now)
{
	struct uroce_sack_diag *d = qp->sk->diag;

	if (!d->t_first)
		d->t_first = now;
	d->t_last = now;
	stall_end(d, now);
}

void uroce_sd_held(struct uroce_qp *qp, bool any)
{
	struct uroce_sack_diag *d = qp->sk->diag;
	uint64_t now;

	if (!d)
		return;
	now = uroce_now_ns();
	if (any) {
		d->held_t0 = now;
		d->held_n++;
	} else if (d->held_t0) {
		d->held_ns += now - d->held_t0;
		d->held_t0 = 0;
	}
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

void uroce_sd_free(struct uroce_qp *qp)
{
	struct uroce_sack_diag *d = qp->sk ? qp->sk->diag : NULL;

	if (!d)
		return;
	if (d->t_first)
		ur_info(
		    "qp %u sack diag: sent for %.1f ms; resends rack %llu wake %llu probe %llu "
		    "timeout %llu read %llu una %llu; first tx -> resend mean %.0f us "
		    "(<0.1/0.3/1/3/10/more ms: %llu/%llu/%llu/%llu/%llu/%llu); last resend -> "
		    "received mean %.0f us (%llu/%llu/%llu/%llu/%llu/%llu); stalled ms (times): "
		    "sq %.1f (%llu) span %.1f (%llu) win %.1f (%llu) cwnd %.1f (%llu) ep %.1f "
		    "(%llu) pace %.1f (%llu) rd %.1f (%llu)",
		    qp->ibqp.qp_base.qp_num, ms(d->t_last - d->t_first),
		    (unsigned long long)d->resends[UR_SD_RACK],
		    (unsigned long long)d->resends[UR_SD_WAKE],
		    (unsigned long long)d->resends[UR_SD_PROBE],
		    (unsigned long long)d->resends[UR_SD_TIMEOUT],
		    (unsigned long long)d->resends[UR_SD_READ],
		    (unsigned long long)d->resends[UR_SD_UNA],
		    d->l2r_n ? (double)d->l2r_ns / (double)d->l2r_n / 1e3 : 0.0,
		    (unsigned long long)d->l2r_hist[0], (unsigned long long)d->l2r_hist[1],
		    (unsigned long long)d->l2r_hist[2], (unsigned long long)d->l2r_hist[3],
		    (unsigned long long)d->l2r_hist[4], (unsigned long long)d->l2r_hist[5],
		    d->fill_n ? (double)d->fill_ns / (double)d->fill_n / 1e3 : 0.0,
		    (unsigned long long)d->fill_hist[0], (unsigned long long)d->fill_hist[1],
		    (unsigned long long)d->fill_hist[2], (unsigned long long)d->fill_hist[3],
		    (unsigned long long)d->fill_hist[4], (unsigned long long)d->fill_hist[5],
		    ms(d->stall_ns[UR_SD_SQ]), (unsigned long long)d->stall_n[UR_SD_SQ],
		    ms(d->stall_ns[UR_SD_SPAN]), (unsigned long long)d->stall_n[UR_SD_SPAN],
		    ms(d->stall_ns[UR_SD_WIN]), (unsigned long long)d->stall_n[UR_SD_WIN],
		    ms(d->stall_ns[UR_SD_CWND]), (unsigned long long)d->stall_n[UR_SD_CWND],
		    ms(d->stall_ns[UR_SD_EP]), (unsigned long long)d->stall_n[UR_SD_EP],
		    ms(d->stall_ns[UR_SD_PACE]), (unsigned long long)d->stall_n[UR_SD_PACE],
		    ms(d->stall_ns[UR_SD_RD]), (unsigned long long)d->stall_n[UR_SD_RD]);
	if (d->held_n)
		ur_info("qp %u sack diag: responder held something %llu times, %.1f ms in all",
			qp->ibqp.qp_base.qp_num, (unsigned long long)d->held_n, ms(d->held_ns));
	free(d);
	qp->sk->diag = NULL;
}

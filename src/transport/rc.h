/* Shared by the RC requester, completer and responder (qp->lock held). */
#ifndef UROCE_RC_H
#define UROCE_RC_H

#include "uroce.h"

/* Packets a requester may have in flight per QP, and how often it asks for
 * an ACK inside a long message (the last packet of a message always does). */
#define UROCE_WINDOW 256u
#define UROCE_ACKREQ_EVERY 32u

/* Packets in flight: at most UROCE_WINDOW, and no more than half of what the
 * peer's socket buffer holds (estimated by ours: same host, same limits), so
 * a window does not overrun the receiver and turn into retransmissions. */
static inline uint32_t rc_window(const struct uroce_qp *qp)
{
	uint32_t w = qp->ep->rcvbuf / 2 / (qp->mtu + 128);

	return w < 8 ? 8 : w > UROCE_WINDOW ? UROCE_WINDOW : w;
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

uint64_t uroce_rnr_timer_ns(unsigned int code);
/* Restart sending at psn (go-back-N). */
void uroce_req_go_back(struct uroce_qp *qp, uint32_t psn);
/* Complete WQEs in order from the SQ tail. */
void uroce_comp_retire(struct uroce_qp *qp);
/* (Re)arm the retransmission timer if packets are in flight. */
void uroce_req_arm(struct uroce_qp *qp);

#endif

/* The same-host single copy (docs/design.md, "The single copy").
 *
 * Between two processes joined by a same-host link (src/net/shm.c) whose
 * receiver showed at the handshake that it can read the sender's memory, a
 * large message does not travel through the ring packet by packet.  Its
 * sender puts one record in the ring: an ordinary packet of the message's
 * first PSN - a WRITE ONLY or SEND ONLY with the message's headers, or a
 * READ RESPONSE ONLY - flagged UR_BTH4_PULL, whose payload describes where
 * the message's bytes are in the sender's memory.  It stands for all the
 * message's PSNs: the sender counts them as sent, the receiver as received,
 * so the PSN space, the window, ACKs, go-back and selective repeat are those
 * of the packets it replaces, and any PSN of it may be sent again as an
 * ordinary packet.  The side that owns the destination memory validates
 * (the responder: PSN, opcode sequence, receive WQE, R_Key, bounds, access,
 * PD, under its own locks; the READ requester: its WQE and its SGEs) and
 * only then copies the bytes with one process_vm_readv straight into the
 * range it validated.  A pull that fails (the memory is unreadable, the
 * peer gone) is answered as if the record had been lost, with
 * UR_BTH4_NOPULL: the sender sends the message again through the ring.
 *
 * This file: which messages are pulled, and the description's format. */
#include <stdlib.h>
#include <string.h>

#include "net/shm.h"
#include "transport/rc.h"

#define PULL_MAGIC 0x4c4c5550u /* "PULL" */

/* pull_hdr.flags, for the sender's own use (the receiver ignores them) */
enum {
	PULL_F_BYTES = 1,  /* sent only with its bytes (a READ response) */
	PULL_F_UNSENT = 2, /* ... which the link could not take: not sent */
};

struct pull_hdr {
	uint32_t magic;
	uint32_t npkts; /* the PSNs the record stands for */
	uint64_t total; /* bytes */
	uint32_t niov;	/* pieces that follow */
	uint32_t flags; /* PULL_F_* */
};

struct pull_iov {
	uint64_t va, len; /* in the sender's address space */
};

uint32_t uroce_pull_desc_len(int niov)
{
	return (uint32_t)(sizeof(struct pull_hdr) + (size_t)niov * sizeof(struct pull_iov));
}

static bool pull_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
		return true;
	default:
		return false;
	}
}

/* w's PSNs if it may be pulled as far as qp and w tell (not the link) */
static uint32_t pull_npkts_qp(struct uroce_qp *qp, const struct uroce_swqe *w, bool resend)
{
	uint32_t min = uroce_pull_min(), n;

	/* RC only: a UC sender completes before the receiver has copied */
	if (!min || qp->tr != UR_TR_RC || qp->req.pull_off || w->inline_data || w->length < min ||
	    !pull_opcode(w->opcode) || uroce_pull_desc_len(w->num_sge) > qp->mtu)
		return 0;
	n = swqe_npkts(qp, w);
	/* as many PSNs in flight as the responder may hold and describe */
	if (n < 2 || n > UR_SACK_WIN || (!resend && qp->req.inflight + n > UR_SACK_WIN))
		return 0;
	return n;
}

/* The endpoint's budget (rc.h) holds for pulled messages too.  Their bytes
 * are not in the network, but the receiver copies them in the order their
 * records come, behind everything queued before them on its link, and that
 * queue is what the requester's ACK timeout measures.  Exempt, 1,024 QPs
 * (ib_write_bw -q 1024 -s 65536) each kept up to UR_SACK_WIN PSNs in flight
 * (25,000 PSNs, 100 MB, behind one endpoint against a budget of 1,985):
 * under a CPU hog the receiver needed more than seven 67 ms timeouts to
 * reach a record, every QP timed out again and again, the resends queued
 * behind the rest, and QPs failed with IBV_WC_RETRY_EXC_ERR (docs/design.md,
 * "1,024 QPs").  A message that does not fit waits for the QP's ACK; one of a
 * QP with nothing in flight goes packet by packet instead, whose first
 * packet the QP may always send (rc_may_send). */
static bool pull_fits(const struct uroce_qp *qp, uint32_t n)
{
	return rc_ep_inflight(qp) + n <= rc_ep_budget(qp);
}

uint32_t uroce_pull_npkts(struct uroce_qp *qp, const struct uroce_swqe *w, bool resend)
{
	uint32_t n = pull_npkts_qp(qp, w, resend);

	if (n && !resend && !pull_fits(qp, n))
		return 0;
	return n && uroce_shm_pull_ok(qp->ep, &qp->path) ? n : 0;
}

uint32_t uroce_pull_read_seg(const struct uroce_qp *qp)
{
	/* A READ's responder copies its chunk (512 KiB at MTU 4096) into the
	 * bulk area and the requester copies it out, one after the other.
	 * As records of UROCE_SHM_READ_SEG bytes the requester could copy
	 * the first while the responder writes the next; measured against
	 * one record per chunk (docs/design.md, "The bulk area": 128 KiB
	 * records lost in 6 of 8 ib_read_bw 1 MiB pairs on a loaded
	 * machine) it is not the default: 0 (unset), one record a chunk. */
	static uint64_t v = UINT64_MAX;
	uint64_t bytes = uroce_env_num("UROCE_SHM_READ_SEG", 0, &v);
	uint32_t n;

	if (bytes <= 1 || bytes >= (1u << 30))
		return UINT32_MAX;
	n = (uint32_t)(bytes / qp->mtu);
	return n < 2 ? 2 : n;
}

bool uroce_pull_wait(struct uroce_qp *qp, const struct uroce_swqe *w)
{
	/* Many QPs on one link (ib_write_bw -q 8) have more bulk bytes in
	 * flight than the ring takes: what does not fit went without its
	 * bytes and was pulled with process_vm_readv, at a quarter of
	 * memcpy's rate, which slowed the receiver and filled the ring
	 * further.  A QP whose own ACK is due waits for it instead (it
	 * frees ring room as it comes, and sends this QP on); one with
	 * nothing in flight sends without the bytes, so none starves.  The
	 * same for a message the endpoint's budget has no room for (above). */
	uint32_t n;

	if (!qp->req.inflight || !(n = pull_npkts_qp(qp, w, false)))
		return false;
	if (!pull_fits(qp, n)) /* (were it pulled: not over UDP) */
		return uroce_shm_pull_ok(qp->ep, &qp->path);
	return uroce_shm_bulk_full(qp->ep, &qp->path, w->length);
}

void uroce_pull_desc_put(uint8_t *p, uint32_t npkts, const struct iovec *iov, int n)
{
	struct pull_hdr h = {.magic = PULL_MAGIC, .npkts = npkts, .niov = (uint32_t)n};

	for (int i = 0; i < n; i++) {
		struct pull_iov v = {(uint64_t)(uintptr_t)iov[i].iov_base, iov[i].iov_len};

		memcpy(p + sizeof(h) + (size_t)i * sizeof(v), &v, sizeof(v));
		h.total += iov[i].iov_len;
	}
	memcpy(p, &h, sizeof(h));
}

/* The header and pieces of a description of len bytes at p: its number of
 * pieces, or -1 when it is not one (the pieces' sum must be its total). */
static int desc_decode(const uint8_t *p, uint32_t len, struct pull_hdr *h, struct iovec *iov)
{
	uint64_t sum = 0;

	if (len < sizeof(*h))
		return -1;
	memcpy(h, p, sizeof(*h));
	if (h->magic != PULL_MAGIC || !h->niov || h->niov > UROCE_MAX_SGE ||
	    len != uroce_pull_desc_len((int)h->niov))
		return -1;
	for (uint32_t i = 0; i < h->niov; i++) {
		struct pull_iov v;

		memcpy(&v, p + sizeof(*h) + (size_t)i * sizeof(v), sizeof(v));
		/* what the sender names is its business (the kernel checks
		 * it against its address space); only the sum must agree */
		if (v.len > h->total || (sum += v.len) > h->total)
			return -1;
		iov[i] = (struct iovec){(void *)(uintptr_t)v.va, (size_t)v.len};
	}
	return sum == h->total ? (int)h->niov : -1;
}

int uroce_pull_desc_get(const struct uroce_qp *qp, const struct uroce_pkt *pkt, struct iovec *iov,
			uint32_t *npkts, uint64_t *total)
{
	struct pull_hdr h;
	int n;

	if (!pkt->pull.pid || (n = desc_decode(pkt->payload, pkt->paylen, &h, iov)) < 0 ||
	    !h.total || h.total > UROCE_MAX_MSG || h.npkts != (h.total + qp->mtu - 1) / qp->mtu ||
	    h.npkts > UR_SACK_WIN)
		return -1;
	*npkts = h.npkts;
	*total = h.total;
	return n;
}

int uroce_pull_desc_own(uint8_t *buf, size_t len, struct iovec *iov, uint64_t *total,
			uint8_t **bytes_only)
{
	struct uroce_pkt pkt;
	struct pull_hdr h;
	int n;

	/* our own packet (pull_pkt_xmit, read_resp_pull): only read back */
	if (uroce_pkt_parse(&pkt, buf, len) ||
	    (n = desc_decode(pkt.payload, pkt.paylen, &h, iov)) < 0)
		return -1;
	*total = h.total;
	*bytes_only = (h.flags & PULL_F_BYTES) ? pkt.payload : NULL;
	return n;
}

void uroce_pull_desc_bytes_only(uint8_t *p)
{
	struct pull_hdr h;

	memcpy(&h, p, sizeof(h));
	h.flags |= PULL_F_BYTES;
	memcpy(p, &h, sizeof(h));
}

void uroce_pull_desc_unsent(uint8_t *p)
{
	struct pull_hdr h;

	memcpy(&h, p, sizeof(h));
	h.flags |= PULL_F_UNSENT;
	memcpy(p, &h, sizeof(h));
}

bool uroce_pull_desc_was_sent(const uint8_t *p)
{
	struct pull_hdr h;

	memcpy(&h, p, sizeof(h));
	return !(h.flags & PULL_F_UNSENT);
}

int uroce_pull_to_sge(struct uroce_qp *qp, struct ibv_pd *pd, const struct uroce_sge *sg, int nsge,
		      uint32_t off, const struct uroce_pkt *pkt, const struct iovec *src, int nsrc,
		      uint64_t total)
{
	struct iovec dst[UROCE_MAX_SGE];
	int n, r = -EFAULT;

	pthread_rwlock_rdlock(&qp->ctx->mr_lock);
	/* 0 when too small, not ours or ODP: the packet path says which */
	n = uroce_sge_map(qp->ctx, pd, sg, nsge, off, (uint32_t)total, true, dst, UROCE_MAX_SGE);
	if (n)
		r = uroce_shm_pull(qp->ctx, &pkt->pull, dst, n, src, nsrc, total);
	else
		uroce_count(qp->ctx, shm_pull_fail, 1);
	pthread_rwlock_unlock(&qp->ctx->mr_lock);
	return r;
}

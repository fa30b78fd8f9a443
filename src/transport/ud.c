/* UD transport (IBTA 9.8.3 / 10.2.5): one packet per message, SEND_ONLY
 * (with immediate) carrying a DETH (Q_Key, source QPN); no ACKs, no
 * retransmission.  A send completes as soon as its packet has left; a
 * receive gets the 40-byte GRH in front of the payload.
 */
#include <arpa/inet.h>
#include <netinet/ip.h>
#include <string.h>

#include "uroce.h"

#define UROCE_GRH_BYTES 40
enum { UROCE_WC_SL_ROCE_IPV4 = 2 }; /* mlx5's MLX5_CQE_ROCE_L3_HEADER_TYPE_IPV4 */

static void send_wc(struct uroce_qp *qp, const struct ibv_send_wr *wr, enum ibv_wc_status st)
{
	struct ibv_wc wc = {.wr_id = wr->wr_id,
			    .status = st,
			    .opcode = IBV_WC_SEND,
			    .qp_num = qp->ibqp.qp_base.qp_num};

	if (st == IBV_WC_SUCCESS && !qp->sq_sig_all && !(wr->send_flags & IBV_SEND_SIGNALED))
		return;
	uroce_cq_push(to_ucq(qp->ibqp.qp_base.send_cq), &wc, false);
}

static int ud_send_one(struct uroce_qp *qp, const struct ibv_send_wr *wr)
{
	uint8_t buf[UR_BTH_BYTES + UR_DETH_BYTES + UR_IMMDT_BYTES + 4096 + 8];
	struct uroce_ah *ah;
	struct uroce_pkt pkt;
	struct uroce_ipinfo path;
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	uint64_t len = 0;
	uint32_t qkey;
	uint8_t opc;

	if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM)
		return ur_dbg("post_send: UD supports SEND and SEND_WITH_IMM only"), EINVAL;
	if (!wr->wr.ud.ah)
		return ur_dbg("post_send: UD work request without an address handle"), EINVAL;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->sq.max_sge)
		return ur_dbg("post_send: num_sge %d > max_send_sge %u", wr->num_sge,
			      qp->sq.max_sge),
		       EINVAL;
	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	/* C10-?: a UD message fits in one packet of the path MTU */
	if (len > qp->mtu)
		return ur_dbg("post_send: UD message of %llu bytes > MTU %u",
			      (unsigned long long)len, qp->mtu),
		       EINVAL;
	if ((wr->send_flags & IBV_SEND_INLINE) && len > qp->sq.max_inline)
		return ur_dbg("post_send: %llu inline bytes > max_inline_data %u",
			      (unsigned long long)len, qp->sq.max_inline),
		       EINVAL;
	ah = to_uah(wr->wr.ud.ah);
	if (!uroce_pd_same(ah->ibah.pd, qp->ibqp.qp_base.pd))
		return ur_dbg("post_send: the AH belongs to another PD"), EINVAL;

	/* IBTA 10.2.5: a WR Q_Key with the high bit set means "use the QP's" */
	qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->attr.qkey : wr->wr.ud.remote_qkey;
	opc = UR_TR_UD |
	      (wr->opcode == IBV_WR_SEND_WITH_IMM ? UR_OPC_SEND_ONLY_IMM : UR_OPC_SEND_ONLY);
	uroce_pkt_init(&pkt, buf, opc, wr->wr.ud.remote_qpn, qp->req.psn, (uint32_t)len);
	ur_deth_set(&pkt, qkey, qp->ibqp.qp_base.qp_num);
	if (pkt.mask & URM_IMMDT)
		ur_immdt_set_raw(&pkt, wr->imm_data);
	if (wr->send_flags & IBV_SEND_SOLICITED)
		ur_bth_set_se(&pkt, true);

	if (wr->send_flags & IBV_SEND_INLINE) {
		uint32_t off = 0;

		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(pkt.payload + off, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
	} else if (len) {
		struct uroce_sge sg[UROCE_MAX_SGE];
		int r;

		for (int i = 0; i < wr->num_sge; i++) {
			sg[i].addr = wr->sg_list[i].addr;
			sg[i].length = wr->sg_list[i].length;
			sg[i].lkey = wr->sg_list[i].lkey;
		}
		pthread_rwlock_rdlock(&qp->ctx->mr_lock);
		r = uroce_sge_copy(qp->ctx, qp->ibqp.qp_base.pd, sg, wr->num_sge, 0, pkt.payload,
				   (uint32_t)len, false, &st);
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
		if (r) {
			send_wc(qp, wr, st);
			uroce_qp_error(qp);
			return 0;
		}
	}
	path = ah->path;
	path.sport = qp->ep->port;
	/* native addressing: the UDP port is in the QPN; multicast and
	 * standard-port mode (src/net/stdport.c) go to 4791 */
	path.dport = wr->wr.ud.remote_qpn == UROCE_MCAST_QPN
			 ? UR_ROCE_PORT
			 : uroce_qpn_dport(wr->wr.ud.remote_qpn);
	uroce_pkt_pad(&pkt); /* the ICRC only where the packet needs one (uroce_qp_xmit) */
	uroce_qp_stat(qp, tx_pkts, 1);
	uroce_qp_stat(qp, tx_bytes, pkt.len);
	uroce_ep_xmit_nocrc(qp->ep, &path, pkt.bth, pkt.len);
	qp->req.psn = (qp->req.psn + 1) & UR_PSN_MASK;
	send_wc(qp, wr, IBV_WC_SUCCESS);
	return 0;
}

int uroce_ud_post_send(struct uroce_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	for (; wr; wr = wr->next) {
		int err;

		if (qp->attr.qp_state == IBV_QPS_ERR) {
			send_wc(qp, wr, IBV_WC_WR_FLUSH_ERR);
			continue;
		}
		err = ud_send_one(qp, wr);
		if (err) {
			*bad_wr = wr;
			return err;
		}
	}
	return 0;
}

/* The 40-byte GRH of a RoCEv2-over-IPv4 datagram: 20 zero bytes, then the
 * IPv4 header as received (rxe/rdma-core layout, what ibv_init_ah_from_wc
 * parses). */
static void build_grh(uint8_t grh[UROCE_GRH_BYTES], const struct uroce_pkt *pkt,
		      const struct uroce_ipinfo *ip)
{
	struct iphdr h;
	uint32_t sum = 0;
	uint16_t w[10];

	memset(grh, 0, UROCE_GRH_BYTES);
	memset(&h, 0, sizeof(h));
	h.version = 4;
	h.ihl = 5;
	h.tos = ip->tos;
	h.tot_len = htons((uint16_t)(20 + 8 + pkt->len));
	h.frag_off = htons(0x4000);
	h.ttl = 64;
	h.protocol = 17;
	h.saddr = ip->src.v4.s_addr;
	h.daddr = ip->dst.v4.s_addr;
	memcpy(w, &h, sizeof(w));
	for (int i = 0; i < 10; i++)
		sum += w[i];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	h.check = (uint16_t)~sum;
	memcpy(grh + 20, &h, sizeof(h));
}

void uroce_ud_rcv(struct uroce_qp *qp, struct uroce_pkt *pkt, const struct uroce_ipinfo *ip)
{
	enum ibv_qp_state qs = qp->attr.qp_state;
	struct ibv_wc wc = {0};
	struct uroce_rwqe rwqe, *w = &rwqe;
	uint8_t grh[UROCE_GRH_BYTES];
	enum ibv_wc_status st = IBV_WC_SUCCESS;

	if (qp->init.qp_type != IBV_QPT_UD ||
	    (qs != IBV_QPS_RTR && qs != IBV_QPS_RTS && qs != IBV_QPS_SQD && qs != IBV_QPS_SQE)) {
		uroce_qp_count(qp, rx_drop_state, 1);
		return;
	}
	/* C10-?: datagrams whose Q_Key differs from the QP's are dropped */
	if (ur_deth_qkey(pkt) != qp->attr.qkey) {
		ur_dbg("QP 0x%06x: drop UD datagram: Q_Key 0x%x != 0x%x", qp->ibqp.qp_base.qp_num,
		       ur_deth_qkey(pkt), qp->attr.qkey);
		uroce_qp_count(qp, rx_drop_state, 1);
		return;
	}
	/* rxe (RESPST_ERR_LENGTH, class D): a datagram larger than the
	 * receive WQE (payload + 40-byte GRH) is dropped, counted, and the WQE
	 * stays posted for the next one */
	if (!qp->ibqp.qp_base.srq && qp->rq.head != qp->rq.tail &&
	    UROCE_GRH_BYTES + pkt->paylen > qp->rq.wqe[qp->rq.tail & (qp->rq.size - 1)].length) {
		ur_dbg("QP 0x%06x: drop UD datagram of %u bytes: the receive WQE has %u",
		       qp->ibqp.qp_base.qp_num, UROCE_GRH_BYTES + pkt->paylen,
		       qp->rq.wqe[qp->rq.tail & (qp->rq.size - 1)].length);
		uroce_qp_count(qp, rx_drop_len, 1);
		return;
	}
	if (!uroce_rq_pop(qp, &rwqe)) {
		uroce_qp_count(qp, rx_drop_state, 1); /* no receive posted: dropped */
		return;
	}
	build_grh(grh, pkt, ip);
	if (UROCE_GRH_BYTES + pkt->paylen > w->length) {
		/* an SRQ's WQE is taken before its length is known (rxe: class E) */
		st = IBV_WC_LOC_LEN_ERR;
	} else {
		pthread_rwlock_rdlock(&qp->ctx->mr_lock);
		if (!uroce_sge_copy(qp->ctx, qp->ibqp.qp_base.pd, w->sg, w->num_sge, 0, grh,
				    UROCE_GRH_BYTES, true, &st))
			uroce_sge_copy(qp->ctx, qp->ibqp.qp_base.pd, w->sg, w->num_sge,
				       UROCE_GRH_BYTES, pkt->payload, pkt->paylen, true, &st);
		pthread_rwlock_unlock(&qp->ctx->mr_lock);
	}
	wc.wr_id = w->wr_id;
	wc.status = st;
	wc.opcode = IBV_WC_RECV;
	wc.byte_len = UROCE_GRH_BYTES + pkt->paylen;
	wc.qp_num = qp->ibqp.qp_base.qp_num;
	wc.src_qp = ur_deth_sqp(pkt);
	wc.wc_flags = IBV_WC_GRH;
	/* RoCE has no SL on the wire: mlx5 reports the network-header type
	 * there (0 IB GRH, 1 IPv6, 2 IPv4), and UCX's ud_verbs reads it to
	 * know where the addresses in the GRH are; uroce receives IPv4 only */
	wc.sl = UROCE_WC_SL_ROCE_IPV4;
	if (pkt->mask & URM_IMMDT) {
		wc.imm_data = ur_immdt_raw(pkt);
		wc.wc_flags |= IBV_WC_WITH_IMM;
	}
	uroce_cq_push(to_ucq(qp->ibqp.qp_base.recv_cq), &wc, pkt->se);
}

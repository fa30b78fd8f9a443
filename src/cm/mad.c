/* The CM MAD codec: IBTA Vol. 1 ch. 12 messages, field by field.
 *
 * A MAD is 256 bytes: the common MAD header (base version 1, class 0x07 CM,
 * class version 2, method, status, transaction ID, attribute ID and
 * modifier), then 232 bytes of message laid out as IBTA tables 106-120.
 * Offsets below are from the start of the message (after the header), bit
 * fields are counted from the most significant bit of their byte, as the
 * tables do.  Everything a peer sends is checked before it is used: a MAD
 * that is not a well-formed CM message of a type uroce handles is dropped
 * and counted in cm_stats.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "cm.h"

struct cm_stats cm_stats;

#define MAD_BASE_VERSION 1
#define MAD_CLASS_CM	 0x07
#define MAD_CLASS_VER	 2
#define MAD_METHOD_SEND	 0x03

#define CMA_VERSION 0x00

static void put8(uint8_t *m, unsigned off, unsigned bit, unsigned width, unsigned v)
{
	unsigned shift = 8 - bit - width;
	uint8_t mask = (uint8_t)(((1u << width) - 1) << shift);

	m[off] = (uint8_t)((m[off] & ~mask) | ((v << shift) & mask));
}

static unsigned get8(const uint8_t *m, unsigned off, unsigned bit, unsigned width)
{
	return (m[off] >> (8 - bit - width)) & ((1u << width) - 1);
}

static void put16(uint8_t *m, unsigned off, uint16_t v)
{
	m[off] = (uint8_t)(v >> 8);
	m[off + 1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *m, unsigned off)
{
	return (uint16_t)(m[off] << 8 | m[off + 1]);
}

static void put32(uint8_t *m, unsigned off, uint32_t v)
{
	put16(m, off, (uint16_t)(v >> 16));
	put16(m, off + 2, (uint16_t)v);
}

static uint32_t get32(const uint8_t *m, unsigned off)
{
	return (uint32_t)get16(m, off) << 16 | get16(m, off + 2);
}

/* a 24-bit field in the top of a 32-bit word (QPN, PSN, EECN) */
static void put24(uint8_t *m, unsigned off, uint32_t v)
{
	m[off] = (uint8_t)(v >> 16);
	m[off + 1] = (uint8_t)(v >> 8);
	m[off + 2] = (uint8_t)v;
}

static uint32_t get24(const uint8_t *m, unsigned off)
{
	return (uint32_t)m[off] << 16 | (uint32_t)m[off + 1] << 8 | m[off + 2];
}

static void put64(uint8_t *m, unsigned off, uint64_t v)
{
	put32(m, off, (uint32_t)(v >> 32));
	put32(m, off + 4, (uint32_t)v);
}

static uint64_t get64(const uint8_t *m, unsigned off)
{
	return (uint64_t)get32(m, off) << 32 | get32(m, off + 4);
}

/* Where the private data starts and how long it is, per message type. */
static int pdata_loc(uint16_t attr, unsigned *off, unsigned *len)
{
	switch (attr) {
	case CM_ATTR_REQ:
		*off = 140, *len = 92;
		return 0;
	case CM_ATTR_MRA:
		*off = 10, *len = CM_MRA_PDATA;
		return 0;
	case CM_ATTR_REJ:
		*off = 84, *len = CM_REJ_PDATA;
		return 0;
	case CM_ATTR_REP:
		*off = 36, *len = CM_REP_PDATA;
		return 0;
	case CM_ATTR_RTU:
		*off = 8, *len = CM_RTU_PDATA;
		return 0;
	case CM_ATTR_DREQ:
		*off = 12, *len = CM_DREQ_PDATA;
		return 0;
	case CM_ATTR_DREP:
		*off = 8, *len = CM_DREP_PDATA;
		return 0;
	case CM_ATTR_SIDR_REQ:
		*off = 16, *len = 216;
		return 0;
	case CM_ATTR_SIDR_REP:
		*off = 96, *len = CM_SIDR_REP_PDATA;
		return 0;
	}
	return -EINVAL;
}

static bool has_ip_hdr(uint16_t attr)
{
	return attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ;
}

/* The rdma_cm header: version, IP version in the high nibble, source port,
 * source and destination address, IPv4 in the last 4 bytes of 16. */
static void ip_hdr_put(uint8_t *p, const struct cm_msg *m)
{
	p[0] = CMA_VERSION;
	p[1] = 4 << 4;
	put16(p, 2, m->ip_sport);
	memcpy(p + 4 + 12, &m->ip_src, 4);
	memcpy(p + 20 + 12, &m->ip_dst, 4);
}

static int ip_hdr_get(const uint8_t *p, struct cm_msg *m)
{
	if (p[0] != CMA_VERSION || (p[1] >> 4) != 4)
		return -EINVAL;
	m->ip_sport = get16(p, 2);
	memcpy(&m->ip_src, p + 16, 4);
	memcpy(&m->ip_dst, p + 32, 4);
	m->has_ip = true;
	return 0;
}

static void build_req(const struct cm_msg *m, uint8_t *b)
{
	put32(b, 0, m->local_id);
	put24(b, 5, m->vendor_id);
	put64(b, 8, m->service_id);
	put64(b, 16, m->ca_guid);
	put32(b, 28, m->qkey);
	put24(b, 32, m->qpn);
	b[35] = m->resp_res;
	b[39] = m->init_depth;
	put8(b, 43, 0, 5, m->remote_cm_timeout);
	put8(b, 43, 5, 2, m->qp_type == IBV_QPT_UC ? 1 : 0);
	put8(b, 43, 7, 1, m->flow_ctl);
	put24(b, 44, m->psn);
	put8(b, 47, 0, 5, m->local_cm_timeout);
	put8(b, 47, 5, 3, m->retry);
	put16(b, 48, m->pkey);
	put8(b, 50, 0, 4, m->mtu);
	put8(b, 50, 5, 3, m->rnr_retry);
	put8(b, 51, 0, 4, m->max_cm_retries);
	put8(b, 51, 4, 1, m->srq);
	put16(b, 52, 0xffff); /* RoCE: permissive LIDs */
	put16(b, 54, 0xffff);
	memcpy(b + 56, m->lgid, 16);
	memcpy(b + 72, m->rgid, 16);
	b[92] = m->traffic_class;
	b[93] = m->hop_limit;
	put8(b, 94, 0, 4, m->sl);
	put8(b, 94, 4, 1, 1); /* subnet local */
	put8(b, 95, 0, 5, m->local_ack_timeout);
}

static void parse_req(const uint8_t *b, struct cm_msg *m)
{
	m->local_id = get32(b, 0);
	m->vendor_id = get24(b, 5);
	m->service_id = get64(b, 8);
	m->ca_guid = get64(b, 16);
	m->qkey = get32(b, 28);
	m->qpn = get24(b, 32);
	m->resp_res = b[35];
	m->init_depth = b[39];
	m->remote_cm_timeout = (uint8_t)get8(b, 43, 0, 5);
	m->qp_type = get8(b, 43, 5, 2) == 1 ? IBV_QPT_UC : IBV_QPT_RC;
	m->flow_ctl = (uint8_t)get8(b, 43, 7, 1);
	m->psn = get24(b, 44);
	m->local_cm_timeout = (uint8_t)get8(b, 47, 0, 5);
	m->retry = (uint8_t)get8(b, 47, 5, 3);
	m->pkey = get16(b, 48);
	m->mtu = (uint8_t)get8(b, 50, 0, 4);
	m->rnr_retry = (uint8_t)get8(b, 50, 5, 3);
	m->max_cm_retries = (uint8_t)get8(b, 51, 0, 4);
	m->srq = (uint8_t)get8(b, 51, 4, 1);
	memcpy(m->lgid, b + 56, 16);
	memcpy(m->rgid, b + 72, 16);
	m->traffic_class = b[92];
	m->hop_limit = b[93];
	m->sl = (uint8_t)get8(b, 94, 0, 4);
	m->local_ack_timeout = (uint8_t)get8(b, 95, 0, 5);
}

static void build_rep(const struct cm_msg *m, uint8_t *b)
{
	put32(b, 0, m->local_id);
	put32(b, 4, m->remote_id);
	put32(b, 8, m->qkey);
	put24(b, 12, m->qpn);
	b[15] = (uint8_t)(m->vendor_id >> 16);
	b[19] = (uint8_t)(m->vendor_id >> 8);
	put24(b, 20, m->psn);
	b[23] = (uint8_t)m->vendor_id;
	b[24] = m->resp_res;
	b[25] = m->init_depth;
	put8(b, 26, 0, 5, m->target_ack_delay);
	put8(b, 26, 7, 1, m->flow_ctl);
	put8(b, 27, 0, 3, m->rnr_retry);
	put8(b, 27, 3, 1, m->srq);
	put64(b, 28, m->ca_guid);
}

static void parse_rep(const uint8_t *b, struct cm_msg *m)
{
	m->local_id = get32(b, 0);
	m->remote_id = get32(b, 4);
	m->qkey = get32(b, 8);
	m->qpn = get24(b, 12);
	m->vendor_id = (uint32_t)b[15] << 16 | (uint32_t)b[19] << 8 | b[23];
	m->psn = get24(b, 20);
	m->resp_res = b[24];
	m->init_depth = b[25];
	m->target_ack_delay = (uint8_t)get8(b, 26, 0, 5);
	m->flow_ctl = (uint8_t)get8(b, 26, 7, 1);
	m->rnr_retry = (uint8_t)get8(b, 27, 0, 3);
	m->srq = (uint8_t)get8(b, 27, 3, 1);
	m->ca_guid = get64(b, 28);
}

int cm_mad_build(const struct cm_msg *m, uint8_t *mad)
{
	uint8_t *b = mad + CM_MAD_HDR_BYTES;
	unsigned poff = 0, plen = 0, skip = 0;

	memset(mad, 0, CM_MAD_BYTES);
	mad[0] = MAD_BASE_VERSION;
	mad[1] = MAD_CLASS_CM;
	mad[2] = MAD_CLASS_VER;
	mad[3] = MAD_METHOD_SEND;
	put64(mad, 8, m->tid);
	put16(mad, 16, m->attr);
	put32(mad, 20, m->attr_mod);

	switch (m->attr) {
	case CM_ATTR_REQ:
		build_req(m, b);
		break;
	case CM_ATTR_REP:
		build_rep(m, b);
		break;
	case CM_ATTR_MRA:
		put32(b, 0, m->local_id);
		put32(b, 4, m->remote_id);
		put8(b, 8, 0, 2, m->msg_target);
		put8(b, 9, 0, 5, m->service_timeout);
		break;
	case CM_ATTR_REJ:
		put32(b, 0, m->local_id);
		put32(b, 4, m->remote_id);
		put8(b, 8, 0, 2, m->msg_target);
		put16(b, 10, m->reason);
		break;
	case CM_ATTR_DREQ:
		put32(b, 0, m->local_id);
		put32(b, 4, m->remote_id);
		put24(b, 8, m->qpn);
		break;
	case CM_ATTR_RTU:
	case CM_ATTR_DREP:
		put32(b, 0, m->local_id);
		put32(b, 4, m->remote_id);
		break;
	case CM_ATTR_SIDR_REQ:
		put32(b, 0, m->local_id);
		put16(b, 4, m->pkey);
		put64(b, 8, m->service_id);
		break;
	case CM_ATTR_SIDR_REP:
		put32(b, 0, m->remote_id);
		b[4] = m->status;
		put24(b, 8, m->qpn);
		put64(b, 12, m->service_id);
		put32(b, 20, m->qkey);
		break;
	default:
		return -EINVAL;
	}
	pdata_loc(m->attr, &poff, &plen);
	if (has_ip_hdr(m->attr)) {
		ip_hdr_put(b + poff, m);
		skip = CM_IP_HDR_BYTES;
	}
	if (m->pdata_len > plen - skip)
		return -EINVAL;
	memcpy(b + poff + skip, m->pdata, m->pdata_len);
	return CM_MAD_BYTES;
}

static int drop(uint64_t *counter)
{
	__atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
	return -EINVAL;
}

int cm_mad_parse(const uint8_t *mad, size_t len, struct cm_msg *m)
{
	const uint8_t *b = mad + CM_MAD_HDR_BYTES;
	unsigned poff, plen, skip = 0;

	memset(m, 0, sizeof(*m));
	if (len < CM_MAD_BYTES)
		return drop(&cm_stats.drop_short);
	if (mad[0] != MAD_BASE_VERSION || mad[1] != MAD_CLASS_CM || mad[2] != MAD_CLASS_VER ||
	    mad[3] != MAD_METHOD_SEND || get16(mad, 4) != 0)
		return drop(&cm_stats.drop_hdr);
	m->tid = get64(mad, 8);
	m->attr = get16(mad, 16);
	m->attr_mod = get32(mad, 20);
	/* LAP/APR load an alternate path: rdma_cm never sends them for RoCE,
	 * and Linux's CM drops a LAP on a RoCE port; so does uroce (counted). */
	if (m->attr == CM_ATTR_LAP || m->attr == CM_ATTR_APR)
		return drop(&cm_stats.drop_lap);
	if (pdata_loc(m->attr, &poff, &plen))
		return drop(&cm_stats.drop_attr);

	switch (m->attr) {
	case CM_ATTR_REQ:
		parse_req(b, m);
		if (m->qpn == 0 || m->qpn == 1 || m->mtu < IBV_MTU_256 || m->mtu > IBV_MTU_4096)
			return drop(&cm_stats.drop_attr);
		break;
	case CM_ATTR_REP:
		parse_rep(b, m);
		if (m->qpn == 0 || m->qpn == 1)
			return drop(&cm_stats.drop_attr);
		break;
	case CM_ATTR_MRA:
		m->local_id = get32(b, 0);
		m->remote_id = get32(b, 4);
		m->msg_target = (uint8_t)get8(b, 8, 0, 2);
		m->service_timeout = (uint8_t)get8(b, 9, 0, 5);
		break;
	case CM_ATTR_REJ:
		m->local_id = get32(b, 0);
		m->remote_id = get32(b, 4);
		m->msg_target = (uint8_t)get8(b, 8, 0, 2);
		m->reason = get16(b, 10);
		break;
	case CM_ATTR_DREQ:
		m->local_id = get32(b, 0);
		m->remote_id = get32(b, 4);
		m->qpn = get24(b, 8);
		break;
	case CM_ATTR_RTU:
	case CM_ATTR_DREP:
		m->local_id = get32(b, 0);
		m->remote_id = get32(b, 4);
		break;
	case CM_ATTR_SIDR_REQ:
		m->local_id = get32(b, 0);
		m->pkey = get16(b, 4);
		m->service_id = get64(b, 8);
		break;
	case CM_ATTR_SIDR_REP:
		m->remote_id = get32(b, 0);
		m->status = b[4];
		m->qpn = get24(b, 8);
		m->service_id = get64(b, 12);
		m->qkey = get32(b, 20);
		break;
	}
	if (has_ip_hdr(m->attr)) {
		if (ip_hdr_get(b + poff, m))
			return drop(&cm_stats.drop_ip_hdr);
		skip = CM_IP_HDR_BYTES;
	}
	/* The communication ID a message names us by is never 0. */
	if (m->attr != CM_ATTR_REQ && m->attr != CM_ATTR_SIDR_REQ && m->remote_id == 0 &&
	    m->attr != CM_ATTR_REJ)
		return drop(&cm_stats.drop_attr);
	m->pdata_len = (uint8_t)(plen - skip);
	memcpy(m->pdata, b + poff + skip, m->pdata_len);
	return 0;
}

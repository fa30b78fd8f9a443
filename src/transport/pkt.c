/* Parsing and building of IB transport packets (BTH through ICRC) through
 * the opcode table.  The ICRC itself is in icrc.c. */
#include <errno.h>
#include <stdint.h>

#include "transport/pkt.h"
#include "uroce_log.h"

/* BTH byte 1: SE(1) M(1) PadCnt(2) TVer(4) */
#define BTH_SE	       0x80
#define BTH_PAD_SHIFT  4
#define BTH_PAD_MASK   0x3
#define BTH_TVER_MASK  0x0f
#define BTH_ACKREQ     0x80
#define UR_MAX_PKT_LEN 65535u /* a UDP datagram never holds more */

/* Drop with the reason at debug level. */
#define parse_fail(...)                                                                            \
	do {                                                                                       \
		ur_dbg(__VA_ARGS__);                                                               \
		return -EINVAL;                                                                    \
	} while (0)

int uroce_pkt_parse(struct uroce_pkt *pkt, uint8_t *buf, size_t len)
{
	const struct uroce_opcode_info *info;
	uint32_t body, pad;
	uint8_t opcode, tver;

	if (len < UR_BTH_BYTES + UR_ICRC_BYTES)
		parse_fail("packet of %zu bytes is shorter than BTH+ICRC (%d)", len,
			   UR_BTH_BYTES + UR_ICRC_BYTES);
	if (len > UR_MAX_PKT_LEN)
		parse_fail("packet of %zu bytes is longer than a UDP datagram", len);

	opcode = buf[0];
	tver = buf[1] & BTH_TVER_MASK;
	if (tver != 0)
		parse_fail("opcode 0x%02x: BTH TVer %u, only 0 is defined", opcode, tver);

	info = &uroce_opcode[opcode];
	if (!info->name)
		parse_fail("opcode 0x%02x is unknown or not supported", opcode);
	if (len < (size_t)info->length + UR_ICRC_BYTES)
		parse_fail("%s: packet of %zu bytes, headers and ICRC need %u", info->name, len,
			   info->length + UR_ICRC_BYTES);

	/* Bytes between the headers and the ICRC: payload and pad. */
	body = (uint32_t)len - info->length - UR_ICRC_BYTES;
	pad = (buf[1] >> BTH_PAD_SHIFT) & BTH_PAD_MASK;
	if (body && !(info->mask & URM_PAYLOAD))
		parse_fail("%s carries no payload but has %u bytes after its headers", info->name,
			   body);
	if (body & 3)
		parse_fail("%s: payload+pad of %u bytes is not a multiple of 4", info->name, body);
	if (pad > body)
		parse_fail("%s: pad count %u exceeds the %u bytes of payload+pad", info->name, pad,
			   body);

	pkt->bth = buf;
	pkt->len = (uint32_t)len;
	pkt->mask = info->mask;
	pkt->opcode = opcode;
	pkt->pad = (uint8_t)pad;
	pkt->se = !!(buf[1] & BTH_SE);
	pkt->ackreq = !!(buf[8] & BTH_ACKREQ);
	pkt->qpn = ur_get32(buf + 4) & UR_QPN_MASK;
	pkt->psn = ur_get32(buf + 8) & UR_PSN_MASK;
	pkt->payload = buf + info->length;
	pkt->paylen = body - pad;
	pkt->placed = false;
	pkt->held = false;
	pkt->pull.pid = 0;
	pkt->pull.ring = NULL;
	return 0;
}

void uroce_pkt_init(struct uroce_pkt *pkt, uint8_t *buf, uint8_t opcode, uint32_t qpn, uint32_t psn,
		    uint32_t paylen)
{
	const struct uroce_opcode_info *info = &uroce_opcode[opcode];
	uint8_t pad = (uint8_t)((0u - paylen) & 3u);

	memset(buf, 0, info->length);
	buf[0] = opcode;
	buf[1] = (uint8_t)(pad << BTH_PAD_SHIFT); /* SE 0, M 0, TVer 0 */
	buf[2] = (uint8_t)(UR_DEFAULT_PKEY >> 8);
	buf[3] = (uint8_t)(UR_DEFAULT_PKEY & 0xff);
	ur_put32(buf + 4, qpn & UR_QPN_MASK); /* resv8a 0 */
	ur_put32(buf + 8, psn & UR_PSN_MASK); /* AckReq 0 */

	pkt->bth = buf;
	pkt->len = uroce_pkt_wire_len(opcode, paylen);
	pkt->mask = info->mask;
	pkt->qpn = qpn & UR_QPN_MASK;
	pkt->psn = psn & UR_PSN_MASK;
	pkt->payload = buf + info->length;
	pkt->paylen = paylen;
	pkt->opcode = opcode;
	pkt->pad = pad;
	pkt->ackreq = false;
	pkt->se = false;
	pkt->placed = false;
	pkt->held = false;
}

void uroce_pkt_pad(struct uroce_pkt *pkt)
{
	memset(pkt->payload + pkt->paylen, 0, pkt->pad);
}

void uroce_icrc_stamp(const struct uroce_ipinfo *ip, uint8_t *bth, size_t len)
{
	uint32_t n = (uint32_t)len - UR_ICRC_BYTES;
	/* The ICRC goes out least significant byte first (see icrc.c). */
	uint32_t icrc = htole32(uroce_icrc_compute(ip, bth, n));

	memcpy(bth + n, &icrc, UR_ICRC_BYTES);
}

void uroce_pkt_finish(struct uroce_pkt *pkt, const struct uroce_ipinfo *ip)
{
	uroce_pkt_pad(pkt);
	uroce_icrc_stamp(ip, pkt->bth, pkt->len);
}

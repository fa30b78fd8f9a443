/* RoCEv2 packet layout: the IBTA base and extended transport headers.
 *
 * One opcode table (uroce_opcode[], opcode.c) says, for every opcode, which
 * headers it carries, where each starts and how long the header part is.
 * All parsing and building goes through that table: there is no
 * per-opcode parsing code anywhere else.
 *
 * What travels in a UDP datagram is: BTH, extended headers, payload, pad
 * (0-3 bytes, so payload+pad is a multiple of 4) and the 4-byte ICRC.
 */
#ifndef UROCE_PKT_H
#define UROCE_PKT_H

#include <endian.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* IBTA Vol 1, 9.2.1 / Table 38: opcodes.  High 3 bits are the transport. */
enum uroce_opc {
	UR_OPC_SEND_FIRST = 0x00,
	UR_OPC_SEND_MIDDLE = 0x01,
	UR_OPC_SEND_LAST = 0x02,
	UR_OPC_SEND_LAST_IMM = 0x03,
	UR_OPC_SEND_ONLY = 0x04,
	UR_OPC_SEND_ONLY_IMM = 0x05,
	UR_OPC_WRITE_FIRST = 0x06,
	UR_OPC_WRITE_MIDDLE = 0x07,
	UR_OPC_WRITE_LAST = 0x08,
	UR_OPC_WRITE_LAST_IMM = 0x09,
	UR_OPC_WRITE_ONLY = 0x0a,
	UR_OPC_WRITE_ONLY_IMM = 0x0b,
	UR_OPC_READ_REQ = 0x0c,
	UR_OPC_READ_RESP_FIRST = 0x0d,
	UR_OPC_READ_RESP_MIDDLE = 0x0e,
	UR_OPC_READ_RESP_LAST = 0x0f,
	UR_OPC_READ_RESP_ONLY = 0x10,
	UR_OPC_ACK = 0x11,
	UR_OPC_ATOMIC_ACK = 0x12,
	UR_OPC_CMP_SWAP = 0x13,
	UR_OPC_FETCH_ADD = 0x14,
	UR_OPC_SEND_LAST_INV = 0x16,
	UR_OPC_SEND_ONLY_INV = 0x17,
};

enum uroce_transport {
	UR_TR_RC = 0x00,
	UR_TR_UC = 0x20,
	UR_TR_RD = 0x40,
	UR_TR_UD = 0x60,
	UR_TR_CNP = 0x80,
	UR_TR_XRC = 0xa0,
};
#define UR_TR_MASK 0xe0
#define UR_OPC_CNP 0x81

/* uroce's selective repeat (docs/design.md, "Selective repeat"): only
 * between uroce peers in native mode.  A selective ACK is the RC
 * ACKNOWLEDGE moved to the manufacturer-specific class (0xC0-0xFF, IBTA
 * 9.2.1), with a payload saying which PSNs the responder holds; the
 * capability is a bit of BTH resv8a, which receivers ignore and the ICRC
 * masks. */
#define UR_TR_VENDOR 0xc0
#define UR_OPC_SACK  (UR_TR_VENDOR | UR_OPC_ACK)
#define UR_BTH4_SACK 0x01
/* A requester's incarnation, 12 bits: BTH byte 4 bits 1-5 and byte 8
 * bits 0-6 (resv7) of its requests (sack.c) */
#define UR_BTH4_EPOCH 0x3e
#define UR_BTH8_EPOCH 0x7f
static inline uint16_t ur_bth_epoch(const uint8_t *bth)
{
	return (uint16_t)(((bth[4] & UR_BTH4_EPOCH) >> 1) << 7 | (bth[8] & UR_BTH8_EPOCH));
}
/* The same-host single copy (pull.c): a request or READ response whose
 * payload is a description of the sender's memory, pulled by the receiver
 * (only through a same-host link that offered it); and, on a response, "do
 * not send me such records any more" (the pull failed; ring copy instead). */
#define UR_BTH4_PULL   0x40
#define UR_BTH4_NOPULL 0x80
/* The piggy-backed ACK (docs/latency.md, "Session 11"): between uroce
 * peers in native mode, an RC SEND or WRITE request may carry the ACK its
 * QP's responder owes, as 8 bytes between its transport headers and its
 * payload (the ACK's PSN, then its AETH), flagged by resv8a bit 7 - which
 * on READ requests and on responses is UR_BTH4_NOPULL, so only SEND and
 * WRITE requests carry it.  A QP that takes them says so on its
 * responses (resv8a bit 1, where requests carry their incarnation); a
 * requester piggy-backs only once its peer's responses said so. */
#define UR_BTH4_PIGGY	 0x80 /* on a SEND or WRITE request */
#define UR_BTH4_PIGGY_OK 0x02 /* on a response */
#define UR_PIGGY_BYTES	 8
#define UR_SACK_WIN	 1024u /* PSNs one SACK describes */
#define UR_SACK_PAYLOAD	 (4 + UR_SACK_WIN / 8)

/* Header types, in the order they appear in a packet. */
enum uroce_hdr_type {
	UR_BTH,
	UR_RDETH,
	UR_DETH,
	UR_XRCETH,
	UR_RETH,
	UR_ATMETH,
	UR_AETH,
	UR_ATMACK,
	UR_IMMDT,
	UR_IETH,
	UR_PAYLOAD,
	UR_NUM_HDR_TYPES
};

enum uroce_hdr_len {
	UR_BTH_BYTES = 12,
	UR_RDETH_BYTES = 4,
	UR_DETH_BYTES = 8,
	UR_XRCETH_BYTES = 4,
	UR_RETH_BYTES = 16,
	UR_ATMETH_BYTES = 28,
	UR_AETH_BYTES = 4,
	UR_ATMACK_BYTES = 8,
	UR_IMMDT_BYTES = 4,
	UR_IETH_BYTES = 4,
	UR_ICRC_BYTES = 4,
};

/* What an opcode is and carries. */
enum uroce_hdr_mask {
	URM_BTH = 1u << UR_BTH,
	URM_RDETH = 1u << UR_RDETH,
	URM_DETH = 1u << UR_DETH,
	URM_XRCETH = 1u << UR_XRCETH,
	URM_RETH = 1u << UR_RETH,
	URM_ATMETH = 1u << UR_ATMETH,
	URM_AETH = 1u << UR_AETH,
	URM_ATMACK = 1u << UR_ATMACK,
	URM_IMMDT = 1u << UR_IMMDT,
	URM_IETH = 1u << UR_IETH,
	URM_PAYLOAD = 1u << UR_PAYLOAD,

	URM_REQ = 1u << 16,    /* sent by a requester */
	URM_RESP = 1u << 17,   /* sent by a responder: ACK, READ response, atomic ACK */
	URM_SEND = 1u << 18,   /* SEND family */
	URM_WRITE = 1u << 19,  /* RDMA WRITE family */
	URM_READ = 1u << 20,   /* RDMA READ request or response */
	URM_ATOMIC = 1u << 21, /* atomic request or atomic ACK */
	URM_RWR = 1u << 22,    /* consumes a receive WQE when the message ends */
	URM_START = 1u << 23,  /* FIRST or ONLY */
	URM_MIDDLE = 1u << 24, /* MIDDLE */
	URM_END = 1u << 25,    /* LAST or ONLY */
};

struct uroce_opcode_info {
	const char *name; /* NULL: opcode not supported, the packet is dropped */
	uint32_t mask;
	uint8_t length; /* bytes of BTH + extended headers */
	uint8_t offset[UR_NUM_HDR_TYPES];
};

extern const struct uroce_opcode_info uroce_opcode[256];

static inline const char *uroce_opcode_name(uint8_t opc)
{
	return uroce_opcode[opc].name ? uroce_opcode[opc].name : "UNKNOWN";
}

/* AETH syndrome (IBTA 9.7.5.1, Table 45). */
enum uroce_aeth_syn {
	UR_AETH_ACK = 0x00,	/* 000 + 5-bit credit count */
	UR_AETH_RNR_NAK = 0x20, /* 001 + 5-bit RNR timer */
	UR_AETH_NAK = 0x60,	/* 011 + 5-bit NAK code */
	UR_AETH_TYPE_MASK = 0xe0,
};

enum uroce_nak_code {
	UR_NAK_PSN_SEQ_ERR = 0,
	UR_NAK_INVALID_REQ = 1,
	UR_NAK_REM_ACCESS_ERR = 2,
	UR_NAK_REM_OP_ERR = 3,
	UR_NAK_INVALID_RD_REQ = 4,
};

#define UR_AETH_CREDIT_INVALID 0x1f
#define UR_PSN_MASK	       0xffffffu
#define UR_QPN_MASK	       0xffffffu
#define UR_DEFAULT_PKEY	       0xffff
#define UR_ROCE_PORT	       4791

/* A parsed (or being-built) packet: a view over a buffer. */
struct uroce_pkt {
	uint8_t *bth;  /* start of the IB transport headers */
	uint32_t len;  /* bytes from BTH through the ICRC */
	uint32_t mask; /* uroce_opcode[opcode].mask */
	uint32_t qpn;
	uint32_t psn;
	uint8_t *payload; /* first payload byte */
	uint32_t paylen;  /* payload bytes, not counting pad */
	uint8_t opcode;
	uint8_t pad;
	bool ackreq;
	bool se;
	bool placed; /* the payload is in its destination already (rx_place.c) */
	bool held;   /* kept after a gap already, its ICRC checked (sack.c) */
	/* a pull record's source process (net/shm.c; pid 0: not one) */
	struct uroce_pull_src {
		int32_t pid;
		uint64_t nonce_va, nonce; /* read with the payload: the same process */
		/* the message's bytes came in the ring record, behind the
		 * packet (shm.c "bulk"): copied from here, not the peer */
		const uint8_t *ring;
		uint64_t ring_len;
	} pull;
};

/* Parse and validate the headers of a received packet of len bytes (BTH
 * through ICRC) against the opcode table: length, TVer 0, known opcode, pad
 * not larger than the payload, payload+pad 4-byte aligned.  Fills pkt.  The
 * ICRC is not checked here.  Returns 0, or -EINVAL (reason at debug). */
int uroce_pkt_parse(struct uroce_pkt *pkt, uint8_t *buf, size_t len);

/* Start building a packet of the given opcode with paylen payload bytes into
 * buf (which must hold uroce_pkt_wire_len()).  Zeroes the headers, writes
 * opcode, pad count, TVer 0, P_Key 0xFFFF, qpn, psn; sets pkt->payload.  The
 * caller fills extended headers with the setters below and copies the
 * payload, then calls uroce_pkt_finish(). */
void uroce_pkt_init(struct uroce_pkt *pkt, uint8_t *buf, uint8_t opcode, uint32_t qpn, uint32_t psn,
		    uint32_t paylen);

static inline uint32_t uroce_pkt_wire_len(uint8_t opcode, uint32_t paylen)
{
	return uroce_opcode[opcode].length + ((paylen + 3u) & ~3u) + UR_ICRC_BYTES;
}

/* Where the packet goes: the fields of the IP and UDP headers the ICRC
 * covers.  Addresses in network order, ports in host order. */
struct uroce_ipinfo {
	int family; /* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} src, dst;
	uint16_t sport, dport;
	/* IPv4 Identification the ICRC covers: 0 as Linux sends an unconnected
	 * DF datagram; segment k of a UDP GSO send carries k (docs/design.md) */
	uint16_t ipid;
	/* IPv4 TOS: sent from the AV's grh.traffic_class, received into the
	 * GRH of UD receives (IP_TOS / IP_RECVTOS) */
	uint8_t tos;
	/* received through a same-host link whose sender we can pull from */
	const struct uroce_pull_src *pull;
};

/* ICRC (IBTA Annex A17.3.3): CRC32 over 8 bytes of 1s (the absent LRH), the
 * IP header with the variant fields masked, the UDP header with its checksum
 * masked, the BTH with the resv8a/FECN/BECN byte masked, and everything up
 * to the ICRC.  IPv4 is assumed as uroce sends it: IHL 5, ID 0, DF set. */
uint32_t uroce_icrc_compute(const struct uroce_ipinfo *ip, const uint8_t *bth,
			    uint32_t len_no_icrc);
/* The same over a packet in pieces: hdr (hlen bytes from the BTH), the
 * payload pieces iov[0..niov) and pad zero bytes. */
struct iovec;
uint32_t uroce_icrc_gather(const struct uroce_ipinfo *ip, const uint8_t *hdr, uint32_t hlen,
			   const struct iovec *iov, int niov, uint32_t pad);
/* The same, copying the payload pieces one after the other to dst in the
 * same pass (a packet built in the transmit batch, src/net/gso.c). */
uint32_t uroce_icrc_gather_copy(const struct uroce_ipinfo *ip, const uint8_t *hdr, uint32_t hlen,
				const struct iovec *iov, int niov, uint32_t pad, uint8_t *dst);
/* uroce_icrc_ok, copying the payload into the pieces dst[0..ndst) (as many
 * bytes as it has) in the same pass. */
bool uroce_icrc_ok_copy(const struct uroce_pkt *pkt, const struct uroce_ipinfo *ip,
			const struct iovec *dst, int ndst);
/* Zero the pad bytes and write the ICRC at the end of the packet. */
void uroce_pkt_finish(struct uroce_pkt *pkt, const struct uroce_ipinfo *ip);
/* Its two halves: zero the pad bytes; write the ICRC of the len-byte
 * packet at bth (uroce_ep_xmit_nocrc stamps it only where it is needed). */
void uroce_pkt_pad(struct uroce_pkt *pkt);
void uroce_icrc_stamp(const struct uroce_ipinfo *ip, uint8_t *bth, size_t len);
/* True when the packet's ICRC matches. */
bool uroce_icrc_ok(const struct uroce_pkt *pkt, const struct uroce_ipinfo *ip);
/* Plain CRC32 (Ethernet / zlib polynomial, reflected) continued from crc. */
uint32_t uroce_crc32(uint32_t crc, const void *buf, size_t len);
/* The portable slicing-by-8 CRC32 behind uroce_crc32() when ISA-L is absent;
 * always built so tests can check both give the same result. */
uint32_t uroce_crc32_sw(uint32_t crc, const void *buf, size_t len);
/* The same by carry-less multiplication (crc_clmul.c): VPCLMULQDQ or
 * PCLMULQDQ as the CPU has them (the table code otherwise, and for short
 * buffers).  uroce_crc32_copy also copies src to dst in the same pass and
 * returns the CRC of the bytes, continued from crc. */
uint32_t uroce_crc32_clmul(uint32_t crc, const void *buf, size_t len);
uint32_t uroce_crc32_copy(void *dst, const void *src, size_t len, uint32_t crc);
/* The CRC of pre16[0..16) followed by src[0..len), copying src (only) to
 * dst (NULL: no copy): a RETH and the payload behind it in one fold. */
uint32_t uroce_crc32_copy_pre(void *dst, const void *src, size_t len, const void *pre16,
			      uint32_t crc);
/* What uroce_crc32_clmul uses: 0 the table, 1 PCLMULQDQ, 2 VPCLMULQDQ. */
int uroce_crc32_clmul_level(void);

/* ---- Field accessors (network byte order on the wire). ---- */

static inline uint8_t *ur_hdr(const struct uroce_pkt *p, enum uroce_hdr_type t)
{
	return p->bth + uroce_opcode[p->opcode].offset[t];
}

static inline uint32_t ur_get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return be32toh(v);
}

static inline uint64_t ur_get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return be64toh(v);
}

static inline void ur_put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static inline void ur_put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

/* BTH: opcode(8) | SE(1) M(1) Pad(2) TVer(4) | P_Key(16) | resv8a(8) DestQP(24)
 *      | AckReq(1) resv7(7) PSN(24) */
static inline void ur_bth_set_se(struct uroce_pkt *p, bool se)
{
	p->se = se;
	p->bth[1] = (uint8_t)((p->bth[1] & 0x7f) | (se ? 0x80 : 0));
}

static inline void ur_bth_set_ackreq(struct uroce_pkt *p, bool ackreq)
{
	p->ackreq = ackreq;
	p->bth[8] = (uint8_t)((p->bth[8] & 0x7f) | (ackreq ? 0x80 : 0));
}

static inline void ur_bth_set_psn(struct uroce_pkt *p, uint32_t psn)
{
	p->psn = psn & UR_PSN_MASK;
	ur_put32(p->bth + 8, (p->ackreq ? 0x80000000u : 0) | p->psn);
}

/* IBTA 9.6.1.1 / 10.9.3: the BTH P_Key must match one in the port's table,
 * and the only one is the default 0xFFFF (the membership bit aside). */
static inline bool ur_bth_pkey_ok(const struct uroce_pkt *p)
{
	return ((p->bth[2] << 8 | p->bth[3]) & 0x7fff) == (UR_DEFAULT_PKEY & 0x7fff);
}

/* A SEND or WRITE request carrying a piggy-backed ACK (UR_BTH4_PIGGY,
 * native mode only: the caller checks): the 8 bytes are copied to ext and
 * taken out of the payload.  1 carried, 0 not, -1 too short to carry it. */
static inline int ur_piggy_strip(struct uroce_pkt *p, uint8_t *ext)
{
	if (!(p->bth[4] & UR_BTH4_PIGGY) || !(p->mask & URM_REQ) ||
	    !(p->mask & (URM_SEND | URM_WRITE)))
		return 0;
	if (p->paylen < UR_PIGGY_BYTES)
		return -1;
	memcpy(ext, p->payload, UR_PIGGY_BYTES);
	p->payload += UR_PIGGY_BYTES;
	p->paylen -= UR_PIGGY_BYTES;
	return 1;
}

/* RETH: VA(64) R_Key(32) DMA length(32) */
static inline uint64_t ur_reth_va(const struct uroce_pkt *p)
{
	return ur_get64(ur_hdr(p, UR_RETH));
}
static inline uint32_t ur_reth_rkey(const struct uroce_pkt *p)
{
	return ur_get32(ur_hdr(p, UR_RETH) + 8);
}
static inline uint32_t ur_reth_len(const struct uroce_pkt *p)
{
	return ur_get32(ur_hdr(p, UR_RETH) + 12);
}
static inline void ur_reth_set(struct uroce_pkt *p, uint64_t va, uint32_t rkey, uint32_t len)
{
	uint8_t *h = ur_hdr(p, UR_RETH);
	ur_put64(h, va);
	ur_put32(h + 8, rkey);
	ur_put32(h + 12, len);
}

/* AETH: Syndrome(8) MSN(24) */
static inline uint8_t ur_aeth_syn(const struct uroce_pkt *p)
{
	return ur_hdr(p, UR_AETH)[0];
}
static inline uint32_t ur_aeth_msn(const struct uroce_pkt *p)
{
	return ur_get32(ur_hdr(p, UR_AETH)) & 0xffffffu;
}
static inline void ur_aeth_set(struct uroce_pkt *p, uint8_t syn, uint32_t msn)
{
	ur_put32(ur_hdr(p, UR_AETH), ((uint32_t)syn << 24) | (msn & 0xffffffu));
}

/* AtomicETH: VA(64) R_Key(32) Swap/Add(64) Compare(64) */
static inline uint64_t ur_atmeth_va(const struct uroce_pkt *p)
{
	return ur_get64(ur_hdr(p, UR_ATMETH));
}
static inline uint32_t ur_atmeth_rkey(const struct uroce_pkt *p)
{
	return ur_get32(ur_hdr(p, UR_ATMETH) + 8);
}
static inline uint64_t ur_atmeth_swap_add(const struct uroce_pkt *p)
{
	return ur_get64(ur_hdr(p, UR_ATMETH) + 12);
}
static inline uint64_t ur_atmeth_cmp(const struct uroce_pkt *p)
{
	return ur_get64(ur_hdr(p, UR_ATMETH) + 20);
}
static inline void ur_atmeth_set(struct uroce_pkt *p, uint64_t va, uint32_t rkey, uint64_t swap_add,
				 uint64_t cmp)
{
	uint8_t *h = ur_hdr(p, UR_ATMETH);
	ur_put64(h, va);
	ur_put32(h + 8, rkey);
	ur_put64(h + 12, swap_add);
	ur_put64(h + 20, cmp);
}

/* AtomicAckETH: original remote data(64) */
static inline uint64_t ur_atmack_orig(const struct uroce_pkt *p)
{
	return ur_get64(ur_hdr(p, UR_ATMACK));
}
static inline void ur_atmack_set(struct uroce_pkt *p, uint64_t orig)
{
	ur_put64(ur_hdr(p, UR_ATMACK), orig);
}

/* ImmDt and IETH are carried as raw network-order words (ibv_wc.imm_data
 * is __be32 too). */
static inline uint32_t ur_immdt_raw(const struct uroce_pkt *p)
{
	uint32_t v;
	memcpy(&v, ur_hdr(p, UR_IMMDT), 4);
	return v;
}
static inline void ur_immdt_set_raw(struct uroce_pkt *p, uint32_t be_imm)
{
	memcpy(ur_hdr(p, UR_IMMDT), &be_imm, 4);
}
static inline uint32_t ur_ieth_rkey(const struct uroce_pkt *p)
{
	return ur_get32(ur_hdr(p, UR_IETH));
}
static inline void ur_ieth_set(struct uroce_pkt *p, uint32_t rkey)
{
	ur_put32(ur_hdr(p, UR_IETH), rkey);
}

/* DETH: Q_Key(32) resv8(8) SrcQP(24) */
static inline uint32_t ur_deth_qkey(const struct uroce_pkt *p)
{
	return ur_get32(ur_hdr(p, UR_DETH));
}
static inline uint32_t ur_deth_sqp(const struct uroce_pkt *p)
{
	return ur_get32(ur_hdr(p, UR_DETH) + 4) & 0xffffffu;
}
static inline void ur_deth_set(struct uroce_pkt *p, uint32_t qkey, uint32_t sqp)
{
	uint8_t *h = ur_hdr(p, UR_DETH);
	ur_put32(h, qkey);
	ur_put32(h + 4, sqp & 0xffffffu);
}

/* XRCETH: resv8(8) XRCSRQ(24) */
static inline uint32_t ur_xrceth_srqn(const struct uroce_pkt *p)
{
	return ur_get32(ur_hdr(p, UR_XRCETH)) & 0xffffffu;
}
static inline void ur_xrceth_set(struct uroce_pkt *p, uint32_t srqn)
{
	ur_put32(ur_hdr(p, UR_XRCETH), srqn & 0xffffffu);
}

/* PSN arithmetic modulo 2^24: negative when a precedes b. */
static inline int32_t ur_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

#endif

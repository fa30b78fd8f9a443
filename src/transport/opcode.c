/* The opcode table: which headers every supported opcode carries, where they
 * start, and what kind of packet it is.
 *
 * Sources (IBTA Architecture Specification Vol 1):
 *  - 9.2.1, the OpCode table (Table 38 as cited in pkt.h): the opcodes of
 *    each transport and the headers that follow the BTH in each;
 *  - 9.3: the extended transport headers and their order in a packet:
 *    BTH, RDETH, DETH, XRCETH, RETH or AtomicETH, AETH, AtomicAckETH,
 *    ImmDt or IETH, then the payload;
 *  - Annex A14 (XRC), A14.4.1: XRC *requests* carry an XRCETH right after
 *    the BTH; XRC responses (READ responses, ACK, atomic ACK) are laid out
 *    exactly like RC responses, without XRCETH;
 *  - Annex A17 (RoCEv2) carries these transport headers unchanged.
 * Cross-checked against Linux rxe (rxe_opcode.c) and Wireshark/libtins.
 *
 * Layout summary (ext headers after the 12-byte BTH):
 *   SEND_FIRST/MIDDLE/LAST/ONLY        -            + payload
 *   SEND_LAST_IMM/ONLY_IMM             ImmDt        + payload
 *   SEND_LAST_INV/ONLY_INV             IETH         + payload
 *   RDMA_WRITE_FIRST/ONLY              RETH         + payload
 *   RDMA_WRITE_MIDDLE/LAST             -            + payload
 *   RDMA_WRITE_LAST_IMM                ImmDt        + payload
 *   RDMA_WRITE_ONLY_IMM                RETH, ImmDt  + payload
 *   RDMA_READ_REQUEST                  RETH
 *   RDMA_READ_RESPONSE_FIRST/LAST/ONLY AETH         + payload
 *   RDMA_READ_RESPONSE_MIDDLE          -            + payload
 *   ACKNOWLEDGE                        AETH
 *   ATOMIC_ACKNOWLEDGE                 AETH, AtomicAckETH
 *   COMPARE_SWAP/FETCH_ADD             AtomicETH
 *   UD: DETH first; XRC requests: XRCETH first.
 *
 * Offsets are computed from the header mask at compile time, so every
 * entry is correct by construction once its header set is; the unit test
 * checks each layout against an independent hand-written list.  RD and CNP
 * are not supported: their entries stay zero (name NULL).
 */
#include "transport/pkt.h"

/* Bytes a header occupies in a packet of header mask m (0 if absent). */
#define HB(m, T) (((m)&URM_##T) ? UR_##T##_BYTES : 0)

/* Where each header would start, given the headers that precede it. */
#define OFS_RDETH(m)   (UR_BTH_BYTES)
#define OFS_DETH(m)    (OFS_RDETH(m) + HB(m, RDETH))
#define OFS_XRCETH(m)  (OFS_DETH(m) + HB(m, DETH))
#define OFS_RETH(m)    (OFS_XRCETH(m) + HB(m, XRCETH))
#define OFS_ATMETH(m)  (OFS_RETH(m) + HB(m, RETH))
#define OFS_AETH(m)    (OFS_ATMETH(m) + HB(m, ATMETH))
#define OFS_ATMACK(m)  (OFS_AETH(m) + HB(m, AETH))
#define OFS_IMMDT(m)   (OFS_ATMACK(m) + HB(m, ATMACK))
#define OFS_IETH(m)    (OFS_IMMDT(m) + HB(m, IMMDT))
#define OFS_PAYLOAD(m) (OFS_IETH(m) + HB(m, IETH))

/* Offset of a present header; absent headers are left at 0. */
#define AT(m, T) (((m)&URM_##T) ? OFS_##T(m) : 0)

#define ENTRY(nm, m)                                                                               \
	{                                                                                          \
		.name = (nm), .mask = (uint32_t)((m) | URM_BTH), .length = OFS_PAYLOAD(m),         \
		.offset = {                                                                        \
		    [UR_BTH] = 0,                                                                  \
		    [UR_RDETH] = AT(m, RDETH),                                                     \
		    [UR_DETH] = AT(m, DETH),                                                       \
		    [UR_XRCETH] = AT(m, XRCETH),                                                   \
		    [UR_RETH] = AT(m, RETH),                                                       \
		    [UR_ATMETH] = AT(m, ATMETH),                                                   \
		    [UR_AETH] = AT(m, AETH),                                                       \
		    [UR_ATMACK] = AT(m, ATMACK),                                                   \
		    [UR_IMMDT] = AT(m, IMMDT),                                                     \
		    [UR_IETH] = AT(m, IETH),                                                       \
		    [UR_PAYLOAD] = OFS_PAYLOAD(m),                                                 \
		},                                                                                 \
	}

/* Message kinds shared by RC, UC and XRC: headers + classification. */
#define M_SEND	   (URM_REQ | URM_SEND | URM_RWR | URM_PAYLOAD)
#define M_WRITE	   (URM_REQ | URM_WRITE | URM_PAYLOAD)
#define M_READ_RSP (URM_RESP | URM_READ | URM_PAYLOAD)
#define M_ONLY	   (URM_START | URM_END)

#define K_SEND_FIRST	   (M_SEND | URM_START)
#define K_SEND_MIDDLE	   (M_SEND | URM_MIDDLE)
#define K_SEND_LAST	   (M_SEND | URM_END)
#define K_SEND_LAST_IMM	   (M_SEND | URM_END | URM_IMMDT)
#define K_SEND_ONLY	   (M_SEND | M_ONLY)
#define K_SEND_ONLY_IMM	   (M_SEND | M_ONLY | URM_IMMDT)
#define K_WRITE_FIRST	   (M_WRITE | URM_START | URM_RETH)
#define K_WRITE_MIDDLE	   (M_WRITE | URM_MIDDLE)
#define K_WRITE_LAST	   (M_WRITE | URM_END)
#define K_WRITE_LAST_IMM   (M_WRITE | URM_END | URM_IMMDT | URM_RWR)
#define K_WRITE_ONLY	   (M_WRITE | M_ONLY | URM_RETH)
#define K_WRITE_ONLY_IMM   (M_WRITE | M_ONLY | URM_RETH | URM_IMMDT | URM_RWR)
#define K_READ_REQ	   (URM_REQ | URM_READ | M_ONLY | URM_RETH)
#define K_READ_RESP_FIRST  (M_READ_RSP | URM_START | URM_AETH)
#define K_READ_RESP_MIDDLE (M_READ_RSP | URM_MIDDLE)
#define K_READ_RESP_LAST   (M_READ_RSP | URM_END | URM_AETH)
#define K_READ_RESP_ONLY   (M_READ_RSP | M_ONLY | URM_AETH)
#define K_ACK		   (URM_RESP | M_ONLY | URM_AETH)
#define K_ATOMIC_ACK	   (URM_RESP | URM_ATOMIC | M_ONLY | URM_AETH | URM_ATMACK)
#define K_ATOMIC	   (URM_REQ | URM_ATOMIC | M_ONLY | URM_ATMETH)
#define K_SEND_LAST_INV	   (M_SEND | URM_END | URM_IETH)
#define K_SEND_ONLY_INV	   (M_SEND | M_ONLY | URM_IETH)

#define OPC(tr, op, tname, opname, m) [(tr) | (op)] = ENTRY(tname "_" opname, (m))

/* SEND and RDMA WRITE: RC, UC and XRC (x = extra request header). */
#define SEND_WRITE_OPS(tr, t, x)                                                                   \
	OPC(tr, UR_OPC_SEND_FIRST, t, "SEND_FIRST", K_SEND_FIRST | (x)),                           \
	    OPC(tr, UR_OPC_SEND_MIDDLE, t, "SEND_MIDDLE", K_SEND_MIDDLE | (x)),                    \
	    OPC(tr, UR_OPC_SEND_LAST, t, "SEND_LAST", K_SEND_LAST | (x)),                          \
	    OPC(tr, UR_OPC_SEND_LAST_IMM, t, "SEND_LAST_WITH_IMMEDIATE", K_SEND_LAST_IMM | (x)),   \
	    OPC(tr, UR_OPC_SEND_ONLY, t, "SEND_ONLY", K_SEND_ONLY | (x)),                          \
	    OPC(tr, UR_OPC_SEND_ONLY_IMM, t, "SEND_ONLY_WITH_IMMEDIATE", K_SEND_ONLY_IMM | (x)),   \
	    OPC(tr, UR_OPC_WRITE_FIRST, t, "RDMA_WRITE_FIRST", K_WRITE_FIRST | (x)),               \
	    OPC(tr, UR_OPC_WRITE_MIDDLE, t, "RDMA_WRITE_MIDDLE", K_WRITE_MIDDLE | (x)),            \
	    OPC(tr, UR_OPC_WRITE_LAST, t, "RDMA_WRITE_LAST", K_WRITE_LAST | (x)),                  \
	    OPC(tr, UR_OPC_WRITE_LAST_IMM, t, "RDMA_WRITE_LAST_WITH_IMMEDIATE",                    \
		K_WRITE_LAST_IMM | (x)),                                                           \
	    OPC(tr, UR_OPC_WRITE_ONLY, t, "RDMA_WRITE_ONLY", K_WRITE_ONLY | (x)),                  \
	    OPC(tr, UR_OPC_WRITE_ONLY_IMM, t, "RDMA_WRITE_ONLY_WITH_IMMEDIATE",                    \
		K_WRITE_ONLY_IMM | (x))

/* READ, atomics, ACKs and SEND with invalidate: RC and XRC.  Requests get
 * the extra header x, responses never do (IBTA A14.4.1). */
#define RELIABLE_OPS(tr, t, x)                                                                     \
	OPC(tr, UR_OPC_READ_REQ, t, "RDMA_READ_REQUEST", K_READ_REQ | (x)),                        \
	    OPC(tr, UR_OPC_READ_RESP_FIRST, t, "RDMA_READ_RESPONSE_FIRST", K_READ_RESP_FIRST),     \
	    OPC(tr, UR_OPC_READ_RESP_MIDDLE, t, "RDMA_READ_RESPONSE_MIDDLE", K_READ_RESP_MIDDLE),  \
	    OPC(tr, UR_OPC_READ_RESP_LAST, t, "RDMA_READ_RESPONSE_LAST", K_READ_RESP_LAST),        \
	    OPC(tr, UR_OPC_READ_RESP_ONLY, t, "RDMA_READ_RESPONSE_ONLY", K_READ_RESP_ONLY),        \
	    OPC(tr, UR_OPC_ACK, t, "ACKNOWLEDGE", K_ACK),                                          \
	    OPC(tr, UR_OPC_ATOMIC_ACK, t, "ATOMIC_ACKNOWLEDGE", K_ATOMIC_ACK),                     \
	    OPC(tr, UR_OPC_CMP_SWAP, t, "COMPARE_SWAP", K_ATOMIC | (x)),                           \
	    OPC(tr, UR_OPC_FETCH_ADD, t, "FETCH_ADD", K_ATOMIC | (x)),                             \
	    OPC(tr, UR_OPC_SEND_LAST_INV, t, "SEND_LAST_WITH_INVALIDATE", K_SEND_LAST_INV | (x)),  \
	    OPC(tr, UR_OPC_SEND_ONLY_INV, t, "SEND_ONLY_WITH_INVALIDATE", K_SEND_ONLY_INV | (x))

const struct uroce_opcode_info uroce_opcode[256] = {
    /* RC: 0x00-0x17 except the reserved 0x15. */
    SEND_WRITE_OPS(UR_TR_RC, "RC", 0),
    RELIABLE_OPS(UR_TR_RC, "RC", 0),

    /* UC: SEND and RDMA WRITE only (0x20-0x2b). */
    SEND_WRITE_OPS(UR_TR_UC, "UC", 0),

    /* UD: SEND only, DETH after BTH (0x64, 0x65). */
    OPC(UR_TR_UD, UR_OPC_SEND_ONLY, "UD", "SEND_ONLY", K_SEND_ONLY | URM_DETH),
    OPC(UR_TR_UD, UR_OPC_SEND_ONLY_IMM, "UD", "SEND_ONLY_WITH_IMMEDIATE",
	K_SEND_ONLY_IMM | URM_DETH),

    /* XRC: like RC, requests carry XRCETH after BTH (0xa0-0xb7). */
    SEND_WRITE_OPS(UR_TR_XRC, "XRC", URM_XRCETH),
    RELIABLE_OPS(UR_TR_XRC, "XRC", URM_XRCETH),

    /* uroce's selective ACK (pkt.h, src/transport/sack.c): AETH, then a
     * payload of the first missing PSN and a bitmap of what follows it. */
    [UR_OPC_SACK] = ENTRY("UROCE_SACK", URM_RESP | M_ONLY | URM_AETH | URM_PAYLOAD),
};

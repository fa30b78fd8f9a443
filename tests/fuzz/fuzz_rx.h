/* The receive-path fuzz target (fuzz_rx.c): input format and the fixed
 * set of QPs, memory regions and PSNs it feeds packets to.  The corpus
 * generator (gen_corpus.c) builds its seeds from the same constants.
 *
 * Input: one flags byte, then records until the input ends.  A record is a
 * 2-byte big-endian length n and n bytes of packet (BTH through ICRC, what
 * a UDP datagram carries); the last record takes what is left if fewer
 * than n bytes remain.
 *
 * Unless FZ_F_RAW is set, the harness makes packets position independent
 * before delivering them (the endpoint's UDP port and the keys are chosen
 * at run time):
 *   - a destination QPN below 0x100 is a slot (enum fz_slot): the port is
 *     filled in, so 0x000001 reaches FZ_RC_R;
 *   - an R_Key (RETH, AtomicETH, IETH) below FZ_NKEY is an index into the
 *     key table (enum fz_key);
 *   - an XRCETH SRQ number below FZ_NSRQ is an index (enum fz_srq).
 * With FZ_F_FIX_ICRC the ICRC is recomputed for the address the harness
 * delivers from, so the packet gets past the ICRC check into the transport.
 */
#ifndef FUZZ_RX_H
#define FUZZ_RX_H

#include <stdint.h>

enum fz_flags {
	FZ_F_FIX_ICRC = 0x01, /* recompute the ICRC of every packet */
	FZ_F_TIMERS = 0x02,   /* afterwards, fire every QP's timers as expired */
	FZ_F_RAW = 0x04,      /* no QPN / R_Key / SRQ number substitution */
	FZ_F_DRAIN = 0x08,    /* process what QPs send after every packet */
};

/* QP slots: the QPs are created in this order on a fresh endpoint. */
enum fz_slot {
	FZ_SINK = 0,	 /* no QP: where the requesters send */
	FZ_RC_R = 1,	 /* RC responder, all remote access, own RQ; answers go to FZ_RC_Q */
	FZ_RC_S = 2,	 /* RC responder on a basic SRQ, REMOTE_WRITE only */
	FZ_RC_Q = 3,	 /* RC requester with outstanding WQEs (FZ_Q_*) */
	FZ_UC = 4,	 /* UC, REMOTE_WRITE */
	FZ_UD = 5,	 /* UD, Q_Key FZ_QKEY */
	FZ_XRC_R = 6,	 /* XRC_RECV in XRC domain 1 */
	FZ_XRC_S = 7,	 /* XRC_SEND with outstanding WQEs (FZ_XQ_*) */
	FZ_UD_INIT = 8,	 /* UD QP left in INIT */
	FZ_RC_RESET = 9, /* RC QP left in RESET */
	FZ_NSLOT = 10,
};

/* Memory regions, by R_Key index.  MR i is addressed from FZ_IOVA(i). */
enum fz_key {
	FZ_K_ALL = 0,	   /* LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC */
	FZ_K_LOCAL = 1,	   /* LOCAL_WRITE only */
	FZ_K_RO = 2,	   /* REMOTE_READ only */
	FZ_K_OTHER_PD = 3, /* all access, but in PD 2 */
	FZ_K_DEAD = 4,	   /* registered, then deregistered: its old key */
	FZ_K_TOP = 5,	   /* all access, iova at 2^64 - FZ_MR_LEN: va+len wraps */
	FZ_K_RECV = 6,	   /* LOCAL_WRITE: receive buffers and requester buffers */
	FZ_K_SKEW = 7,	   /* all access, the aligned iova maps to host address + 4 */
	FZ_NKEY = 8,
};
#define FZ_MR_LEN   8192u
#define FZ_RECV_LEN 65536u
#define FZ_IOVA(i)  ((i) == FZ_K_TOP ? 0ull - FZ_MR_LEN : ((uint64_t)(i) + 1) << 20)
/* (FZ_K_RECV is registered at its address: local SGEs point into it) */
#define FZ_GUARD 256u /* guard bytes before and after every MR */

/* XRCETH SRQ numbers, by index. */
enum fz_srq {
	FZ_SRQ_XRC1 = 0,  /* XRC SRQ of FZ_XRC_R's domain */
	FZ_SRQ_XRC2 = 1,  /* XRC SRQ of another domain (PD 2, buffers in FZ_K_OTHER_PD) */
	FZ_SRQ_BASIC = 2, /* FZ_RC_S's basic SRQ */
	FZ_NSRQ = 3,
};

/* Every responder expects FZ_PSN first and every requester starts there:
 * close to the 24-bit wrap.  FZ_RC_R's ACKs go to FZ_RC_Q, so requests to
 * FZ_RC_R at these PSNs acknowledge FZ_RC_Q's WQEs. */
#define FZ_PSN	   0xfffffcu
#define FZ_PSN_(k) ((FZ_PSN + (uint32_t)(k)) & 0xffffffu)
#define FZ_QKEY	   0x11111111u
#define FZ_MTU	   1024u /* path MTU of the connected QPs */

/* FZ_RC_Q's send queue after every reset, PSNs from FZ_PSN on.  Local
 * buffers are in FZ_K_RECV at FZ_Q_BUF; remote addresses in FZ_K_ALL. */
#define FZ_Q_BUF	   (FZ_RECV_LEN - 8192u)
#define FZ_Q_SEND_LEN	   100u	 /* SEND, psn +0 */
#define FZ_Q_WRITE_LEN	   3000u /* RDMA WRITE, psn +1..+3 */
#define FZ_Q_READ_LEN	   2500u /* RDMA READ, psn +4..+6 */
#define FZ_Q_PSN_SEND	   0
#define FZ_Q_PSN_WRITE	   1
#define FZ_Q_PSN_READ	   4
#define FZ_Q_PSN_CAS	   7  /* COMPARE_SWAP, psn +7 */
#define FZ_Q_PSN_FADD	   8  /* FETCH_ADD, psn +8 */
#define FZ_Q_PSN_SEND_IMM  9  /* SEND_WITH_IMM, 0 bytes, psn +9 */
#define FZ_Q_PSN_WRITE_IMM 10 /* RDMA_WRITE_WITH_IMM, 10 bytes, psn +10 */
#define FZ_Q_NPSN	   11

/* FZ_XRC_S's send queue (remote SRQ FZ_SRQ_XRC1): SEND 10 bytes (+0), RDMA
 * READ 100 bytes (+1), FETCH_ADD (+2). */
#define FZ_XQ_PSN_SEND 0
#define FZ_XQ_PSN_READ 1
#define FZ_XQ_PSN_FADD 2
#define FZ_XQ_READ_LEN 100u

#endif

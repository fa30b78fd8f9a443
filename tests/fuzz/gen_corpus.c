/* Writes the seed corpus of fuzz_rx (format and topology: fuzz_rx.h):
 *
 *     fuzz_rx_gen tests/fuzz/corpus
 *
 * Packets are built with uroce's own builder (uroce_pkt_init and the
 * header setters over the opcode table), so every seed parses.  The ICRC is
 * left zero and the seeds ask the harness to fix it up (FZ_F_FIX_ICRC),
 * except those that test a bad ICRC.  There is one seed per opcode of the
 * table, aimed at a QP of its transport, and seeds for whole exchanges:
 * multi-packet messages, FZ_RC_Q's responses in order, NAKs and the
 * hostile cases of tests/unit/test_hostile.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/pkt.h"
#include "fuzz_rx.h"

static uint8_t out[1 << 16];
static size_t olen;
static const char *dir;
static int nseeds;
static struct uroce_pkt P;
static uint8_t pbuf[8192];

static void begin(uint8_t flags)
{
	olen = 0;
	out[olen++] = flags;
}

/* Start a packet for QP slot (or a raw QPN) with a patterned payload. */
static struct uroce_pkt *pkt(uint8_t opc, uint32_t qpn, uint32_t psn, uint32_t paylen)
{
	uroce_pkt_init(&P, pbuf, opc, qpn, psn, paylen);
	for (uint32_t i = 0; i < paylen; i++)
		P.payload[i] = (uint8_t)(i * 13u + opc);
	memset(P.payload + paylen, 0, P.pad + UR_ICRC_BYTES);
	if (P.mask & URM_XRCETH)
		ur_xrceth_set(&P, FZ_SRQ_XRC1);
	if (P.mask & URM_DETH)
		ur_deth_set(&P, FZ_QKEY, 0x123456);
	if (P.mask & URM_AETH)
		ur_aeth_set(&P, UR_AETH_ACK | UR_AETH_CREDIT_INVALID, 1);
	if (P.mask & URM_REQ)
		ur_bth_set_ackreq(&P, true);
	ur_bth_set_psn(&P, psn);
	return &P;
}

/* Append the packet built last (its first n bytes: n < len truncates). */
static void add_n(uint32_t n)
{
	out[olen++] = (uint8_t)(n >> 8);
	out[olen++] = (uint8_t)n;
	memcpy(out + olen, P.bth, n);
	olen += n;
}

static void add(void)
{
	add_n(P.len);
}

static void save(const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(out, 1, olen, f) != olen || fclose(f)) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		exit(1);
	}
	nseeds++;
}

/* One packet of opcode opc, aimed at a QP of its transport. */
static void one_per_opcode(void)
{
	for (int opc = 0; opc < 256; opc++) {
		const struct uroce_opcode_info *in = &uroce_opcode[opc];
		uint32_t tr = (uint32_t)opc & UR_TR_MASK, slot, paylen;
		char name[96];

		if (!in->name)
			continue;
		if (tr == UR_TR_UD)
			slot = FZ_UD;
		else if (tr == UR_TR_UC)
			slot = FZ_UC;
		else if (tr == UR_TR_XRC)
			slot = (in->mask & URM_REQ) ? FZ_XRC_R : FZ_XRC_S;
		else
			slot = (in->mask & URM_REQ) ? FZ_RC_R : FZ_RC_Q;
		paylen = (in->mask & URM_PAYLOAD) ? 24 : 0;
		if ((in->mask & URM_PAYLOAD) && !(in->mask & URM_END))
			paylen = FZ_MTU; /* FIRST and MIDDLE carry a full MTU */
		begin(FZ_F_FIX_ICRC);
		pkt((uint8_t)opc, slot, FZ_PSN, paylen);
		if (in->mask & URM_RETH)
			ur_reth_set(&P, FZ_IOVA(FZ_K_ALL) + 64, FZ_K_ALL,
				    (in->mask & URM_READ) ? 100 : paylen);
		if (in->mask & URM_ATMETH)
			ur_atmeth_set(&P, FZ_IOVA(FZ_K_ALL) + 8, FZ_K_ALL, 5, 0);
		if (in->mask & URM_IETH)
			ur_ieth_set(&P, FZ_K_ALL);
		if (in->mask & URM_IMMDT)
			ur_immdt_set_raw(&P, 0x11223344);
		add();
		snprintf(name, sizeof(name), "op_%02x_%s", opc, in->name);
		save(name);
	}
}

/* FIRST, MIDDLE..., LAST of a SEND or WRITE to slot, from psn. */
static void message(uint8_t tr, uint32_t slot, bool write, bool imm, uint32_t len, uint32_t key,
		    uint64_t va)
{
	uint32_t off = 0, psn = FZ_PSN;

	while (off < len || (!off && !len)) {
		uint32_t n = len - off > FZ_MTU ? FZ_MTU : len - off;
		bool first = !off, last = off + n == len;
		uint8_t op;

		if (write)
			op = first && last ? (imm ? UR_OPC_WRITE_ONLY_IMM : UR_OPC_WRITE_ONLY)
			     : first	   ? UR_OPC_WRITE_FIRST
			     : last	   ? (imm ? UR_OPC_WRITE_LAST_IMM : UR_OPC_WRITE_LAST)
					   : UR_OPC_WRITE_MIDDLE;
		else
			op = first && last ? (imm ? UR_OPC_SEND_ONLY_IMM : UR_OPC_SEND_ONLY)
			     : first	   ? UR_OPC_SEND_FIRST
			     : last	   ? (imm ? UR_OPC_SEND_LAST_IMM : UR_OPC_SEND_LAST)
					   : UR_OPC_SEND_MIDDLE;
		pkt(op | tr, slot, psn, n);
		if (P.mask & URM_RETH)
			ur_reth_set(&P, va, key, len);
		if (P.mask & URM_IMMDT)
			ur_immdt_set_raw(&P, 0x55667788);
		add();
		psn = (psn + 1) & UR_PSN_MASK;
		off += n;
		if (!len)
			break;
	}
}

static void messages(void)
{
	static const struct {
		uint8_t tr;
		uint32_t slot;
		const char *name;
	} t[] = {{UR_TR_RC, FZ_RC_R, "rc"},
		 {UR_TR_RC, FZ_RC_S, "rc_srq"},
		 {UR_TR_UC, FZ_UC, "uc"},
		 {UR_TR_XRC, FZ_XRC_R, "xrc"}};
	static const uint32_t lens[] = {0, 1, FZ_MTU, FZ_MTU + 1, 3 * FZ_MTU - 5};

	for (unsigned int i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		for (unsigned int l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
			for (int w = 0; w < 2; w++)
				for (int imm = 0; imm < 2; imm++) {
					char name[96];

					begin(FZ_F_FIX_ICRC);
					message(t[i].tr, t[i].slot, w, imm, lens[l], FZ_K_ALL,
						FZ_IOVA(FZ_K_ALL) + 100);
					snprintf(name, sizeof(name), "msg_%s_%s%s_%u", t[i].name,
						 w ? "write" : "send", imm ? "_imm" : "", lens[l]);
					save(name);
				}
}

static void aeth(uint8_t opc, uint32_t slot, uint32_t k, uint8_t syn, uint32_t paylen)
{
	pkt(opc, slot, FZ_PSN_(k), paylen);
	if (P.mask & URM_AETH)
		ur_aeth_set(&P, syn, 1);
	if (P.mask & URM_ATMACK)
		ur_atmack_set(&P, 0x1122334455667788ull);
	add();
}

#define ACK_OK (UR_AETH_ACK | UR_AETH_CREDIT_INVALID)

/* What the responder of FZ_RC_Q (and FZ_XRC_S) would send back. */
static void responses(void)
{
	static const uint8_t naks[] = {UR_AETH_NAK | UR_NAK_PSN_SEQ_ERR,
				       UR_AETH_NAK | UR_NAK_INVALID_REQ,
				       UR_AETH_NAK | UR_NAK_REM_ACCESS_ERR,
				       UR_AETH_NAK | UR_NAK_REM_OP_ERR,
				       UR_AETH_NAK | UR_NAK_INVALID_RD_REQ,
				       UR_AETH_RNR_NAK | 3,
				       UR_AETH_NAK | 0x1f,
				       0xe0};
	char name[96];

	/* every WQE answered in order */
	begin(FZ_F_FIX_ICRC);
	aeth(UR_OPC_ACK, FZ_RC_Q, FZ_Q_PSN_SEND, ACK_OK, 0);
	aeth(UR_OPC_ACK, FZ_RC_Q, FZ_Q_PSN_WRITE + 2, ACK_OK, 0);
	aeth(UR_OPC_READ_RESP_FIRST, FZ_RC_Q, FZ_Q_PSN_READ, ACK_OK, FZ_MTU);
	aeth(UR_OPC_READ_RESP_MIDDLE, FZ_RC_Q, FZ_Q_PSN_READ + 1, ACK_OK, FZ_MTU);
	aeth(UR_OPC_READ_RESP_LAST, FZ_RC_Q, FZ_Q_PSN_READ + 2, ACK_OK, FZ_Q_READ_LEN - 2 * FZ_MTU);
	aeth(UR_OPC_ATOMIC_ACK, FZ_RC_Q, FZ_Q_PSN_CAS, ACK_OK, 0);
	aeth(UR_OPC_ATOMIC_ACK, FZ_RC_Q, FZ_Q_PSN_FADD, ACK_OK, 0);
	aeth(UR_OPC_ACK, FZ_RC_Q, FZ_Q_PSN_WRITE_IMM, ACK_OK, 0);
	save("rsp_rc_all_in_order");

	/* one coalesced ACK over a READ: an implied NAK */
	begin(FZ_F_FIX_ICRC | FZ_F_DRAIN);
	aeth(UR_OPC_ACK, FZ_RC_Q, FZ_Q_PSN_WRITE_IMM, ACK_OK, 0);
	save("rsp_rc_ack_over_read");

	/* the READ answered by a wrong-length ONLY */
	begin(FZ_F_FIX_ICRC);
	aeth(UR_OPC_ACK, FZ_RC_Q, FZ_Q_PSN_WRITE + 2, ACK_OK, 0);
	aeth(UR_OPC_READ_RESP_ONLY, FZ_RC_Q, FZ_Q_PSN_READ, ACK_OK, 100);
	save("rsp_rc_read_short");

	for (unsigned int i = 0; i < sizeof(naks); i++)
		for (uint32_t k = 0; k < FZ_Q_NPSN; k += 4) {
			begin(FZ_F_FIX_ICRC | (i & 1 ? FZ_F_TIMERS : 0));
			aeth(UR_OPC_ACK, FZ_RC_Q, k, naks[i], 0);
			snprintf(name, sizeof(name), "rsp_rc_nak_%02x_at_%u", naks[i], k);
			save(name);
		}

	/* timers: nothing answered, the requester retries */
	begin(FZ_F_FIX_ICRC | FZ_F_TIMERS);
	aeth(UR_OPC_ACK, FZ_RC_Q, FZ_Q_PSN_SEND, ACK_OK, 0);
	save("rsp_rc_timeout");

	/* XRC_SEND's WQEs */
	begin(FZ_F_FIX_ICRC);
	aeth(UR_TR_XRC | UR_OPC_ACK, FZ_XRC_S, FZ_XQ_PSN_SEND, ACK_OK, 0);
	aeth(UR_TR_XRC | UR_OPC_READ_RESP_ONLY, FZ_XRC_S, FZ_XQ_PSN_READ, ACK_OK, FZ_XQ_READ_LEN);
	aeth(UR_TR_XRC | UR_OPC_ATOMIC_ACK, FZ_XRC_S, FZ_XQ_PSN_FADD, ACK_OK, 0);
	save("rsp_xrc_all_in_order");
}

/* A request whose answer FZ_RC_R sends to FZ_RC_Q: both sides run. */
static void exchanges(void)
{
	begin(FZ_F_FIX_ICRC | FZ_F_DRAIN);
	pkt(UR_OPC_SEND_ONLY, FZ_RC_R, FZ_PSN_(0), 100);
	add();
	pkt(UR_OPC_WRITE_ONLY, FZ_RC_R, FZ_PSN_(1), 20);
	ur_reth_set(&P, FZ_IOVA(FZ_K_ALL), FZ_K_ALL, 20);
	add();
	pkt(UR_OPC_READ_REQ, FZ_RC_R, FZ_PSN_(2), 0);
	ur_reth_set(&P, FZ_IOVA(FZ_K_ALL), FZ_K_ALL, 3000);
	add();
	pkt(UR_OPC_FETCH_ADD, FZ_RC_R, FZ_PSN_(5), 0);
	ur_atmeth_set(&P, FZ_IOVA(FZ_K_ALL) + 8, FZ_K_ALL, 1, 0);
	add();
	/* and the same again: duplicates */
	pkt(UR_OPC_READ_REQ, FZ_RC_R, FZ_PSN_(2), 0);
	ur_reth_set(&P, FZ_IOVA(FZ_K_ALL), FZ_K_ALL, 3000);
	add();
	pkt(UR_OPC_FETCH_ADD, FZ_RC_R, FZ_PSN_(5), 0);
	ur_atmeth_set(&P, FZ_IOVA(FZ_K_ALL) + 8, FZ_K_ALL, 1, 0);
	add();
	pkt(UR_OPC_SEND_ONLY, FZ_RC_R, FZ_PSN_(0), 100);
	add();
	save("xchg_rc_send_write_read_atomic_dups");

	/* UD: matching Q_Key, a wrong one, the multicast QPN */
	begin(FZ_F_FIX_ICRC);
	pkt(UR_TR_UD | UR_OPC_SEND_ONLY, FZ_UD, 0, 100);
	add();
	pkt(UR_TR_UD | UR_OPC_SEND_ONLY_IMM, FZ_UD, 1, 0);
	add();
	pkt(UR_TR_UD | UR_OPC_SEND_ONLY, FZ_UD, 2, 100);
	ur_deth_set(&P, FZ_QKEY + 1, 0x123456);
	add();
	pkt(UR_TR_UD | UR_OPC_SEND_ONLY, 0xffffff, 3, 100);
	add();
	save("ud_qkeys_mcast");
}

/* The cases of tests/unit/test_hostile.c, as seeds. */
static void hostile(void)
{
	static const struct {
		const char *name;
		uint8_t op;
		uint32_t key;
		uint64_t va;
		uint32_t len;
	} acc[] = {
	    {"write_len_past_mr", UR_OPC_WRITE_ONLY, FZ_K_ALL, FZ_IOVA(FZ_K_ALL) + FZ_MR_LEN - 8,
	     16},
	    {"write_va_wraps", UR_OPC_WRITE_ONLY, FZ_K_TOP, 0ull - 8, 16},
	    {"read_va_wraps", UR_OPC_READ_REQ, FZ_K_TOP, 0ull - 8, 4096},
	    {"write_top_ok", UR_OPC_WRITE_ONLY, FZ_K_TOP, 0ull - 16, 16},
	    {"write_wrong_rkey", UR_OPC_WRITE_ONLY, 0x5a5a5a5a, FZ_IOVA(FZ_K_ALL), 16},
	    {"write_other_pd", UR_OPC_WRITE_ONLY, FZ_K_OTHER_PD, FZ_IOVA(FZ_K_OTHER_PD), 16},
	    {"write_dead_mr", UR_OPC_WRITE_ONLY, FZ_K_DEAD, FZ_IOVA(FZ_K_DEAD), 16},
	    {"write_read_only", UR_OPC_WRITE_ONLY, FZ_K_RO, FZ_IOVA(FZ_K_RO), 16},
	    {"write_local_only", UR_OPC_WRITE_ONLY, FZ_K_LOCAL, FZ_IOVA(FZ_K_LOCAL), 16},
	    {"read_no_remote_read", UR_OPC_READ_REQ, FZ_K_LOCAL, FZ_IOVA(FZ_K_LOCAL), 64},
	    {"read_huge", UR_OPC_READ_REQ, FZ_K_ALL, FZ_IOVA(FZ_K_ALL), 0xffffffffu},
	    {"atomic_no_remote_atomic", UR_OPC_FETCH_ADD, FZ_K_RO, FZ_IOVA(FZ_K_RO), 8},
	    {"atomic_misaligned", UR_OPC_CMP_SWAP, FZ_K_ALL, FZ_IOVA(FZ_K_ALL) + 4, 8},
	    {"atomic_last_bytes", UR_OPC_FETCH_ADD, FZ_K_ALL, FZ_IOVA(FZ_K_ALL) + FZ_MR_LEN - 8, 8},
	    {"atomic_past_end", UR_OPC_FETCH_ADD, FZ_K_ALL, FZ_IOVA(FZ_K_ALL) + FZ_MR_LEN, 8},
	    {"atomic_misaligned_host", UR_OPC_FETCH_ADD, FZ_K_SKEW, FZ_IOVA(FZ_K_SKEW), 8},
	    {"write_skewed_mr", UR_OPC_WRITE_ONLY, FZ_K_SKEW, FZ_IOVA(FZ_K_SKEW) + 1, 64},
	};
	char name[96];

	for (unsigned int i = 0; i < sizeof(acc) / sizeof(acc[0]); i++)
		for (int s = 0; s < 3; s++) {
			uint32_t slot = s == 0 ? FZ_RC_R : s == 1 ? FZ_RC_S : FZ_XRC_R;
			uint8_t tr = s == 2 ? UR_TR_XRC : UR_TR_RC;
			uint32_t paylen = acc[i].op == UR_OPC_WRITE_ONLY ? acc[i].len : 0;

			begin(FZ_F_FIX_ICRC | FZ_F_DRAIN);
			pkt(acc[i].op | tr, slot, FZ_PSN, paylen);
			if (P.mask & URM_RETH)
				ur_reth_set(&P, acc[i].va, acc[i].key, acc[i].len);
			else
				ur_atmeth_set(&P, acc[i].va, acc[i].key, 1, 2);
			add();
			snprintf(name, sizeof(name), "hostile_%s_%u", acc[i].name, slot);
			save(name);
		}

	/* the UC variant of the WRITE checks: silently dropped */
	begin(FZ_F_FIX_ICRC);
	pkt(UR_TR_UC | UR_OPC_WRITE_ONLY, FZ_UC, FZ_PSN, 16);
	ur_reth_set(&P, FZ_IOVA(FZ_K_RO), FZ_K_RO, 16);
	add();
	save("hostile_uc_write_read_only");

	begin(FZ_F_FIX_ICRC);
	pkt(UR_OPC_WRITE_MIDDLE, FZ_RC_R, FZ_PSN, FZ_MTU);
	add();
	save("hostile_write_middle_alone");

	begin(FZ_F_FIX_ICRC);
	pkt(UR_OPC_SEND_ONLY, FZ_RC_R, FZ_PSN_(0x400000), 8);
	add();
	pkt(UR_OPC_SEND_ONLY, FZ_RC_R, FZ_PSN_(0x7fffff), 8);
	add();
	pkt(UR_OPC_SEND_ONLY, FZ_RC_R, FZ_PSN_(0x800000), 8);
	add();
	save("hostile_psn_far");

	/* more SENDs than receives: RNR NAK (RQ and SRQ) */
	for (uint32_t slot = FZ_RC_R; slot <= FZ_RC_S; slot++) {
		begin(FZ_F_FIX_ICRC | FZ_F_TIMERS);
		for (uint32_t k = 0; k < 10; k++) {
			pkt(UR_OPC_SEND_ONLY, slot, FZ_PSN_(k), 8);
			add();
		}
		snprintf(name, sizeof(name), "hostile_rnr_%u", slot);
		save(name);
	}

	/* SEND of 6 MTUs into a 5000-byte receive */
	begin(FZ_F_FIX_ICRC);
	message(UR_TR_RC, FZ_RC_R, false, false, 6 * FZ_MTU, 0, 0);
	save("hostile_send_too_long");

	/* XRC: the foreign domain's SRQ, a basic SRQ, no SRQ; a message
	 * whose SRQ changes half way */
	for (uint32_t x = 1; x < 4; x++) {
		begin(FZ_F_FIX_ICRC);
		pkt(UR_TR_XRC | UR_OPC_SEND_ONLY, FZ_XRC_R, FZ_PSN, 8);
		ur_xrceth_set(&P, x == 3 ? 0x777777 : x);
		add();
		snprintf(name, sizeof(name), "hostile_xrc_srq_%u", x);
		save(name);
	}
	begin(FZ_F_FIX_ICRC);
	pkt(UR_TR_XRC | UR_OPC_SEND_FIRST, FZ_XRC_R, FZ_PSN_(0), FZ_MTU);
	add();
	pkt(UR_TR_XRC | UR_OPC_SEND_LAST, FZ_XRC_R, FZ_PSN_(1), 8);
	ur_xrceth_set(&P, FZ_SRQ_XRC2);
	add();
	save("hostile_xrc_srq_changes");

	/* wrong place, wrong state, wrong bytes */
	begin(FZ_F_FIX_ICRC);
	pkt(UR_OPC_SEND_ONLY, FZ_RC_RESET, FZ_PSN, 8);
	add();
	pkt(UR_TR_UD | UR_OPC_SEND_ONLY, FZ_UD_INIT, 0, 8);
	add();
	pkt(UR_OPC_SEND_ONLY, FZ_SINK, FZ_PSN, 8);
	add();
	pkt(UR_OPC_SEND_ONLY, 0x00ff, FZ_PSN, 8);
	add();
	pkt(UR_OPC_SEND_ONLY, FZ_UD, FZ_PSN, 8); /* RC opcode to a UD QP */
	add();
	pkt(UR_TR_UD | UR_OPC_SEND_ONLY, FZ_RC_R, 0, 8); /* and the reverse */
	add();
	save("hostile_wrong_qp_or_state");

	begin(0); /* ICRC left zero: dropped */
	pkt(UR_OPC_SEND_ONLY, FZ_RC_R, FZ_PSN, 8);
	add();
	save("hostile_bad_icrc");

	begin(FZ_F_FIX_ICRC | FZ_F_RAW);
	pkt(UR_OPC_SEND_ONLY, 0x123401, FZ_PSN, 8);
	add();
	save("hostile_raw_qpn");

	begin(FZ_F_FIX_ICRC);
	pkt(UR_OPC_WRITE_ONLY, FZ_RC_R, FZ_PSN, 64);
	ur_reth_set(&P, FZ_IOVA(FZ_K_ALL), FZ_K_ALL, 64);
	for (uint32_t n = 0; n < P.len; n += 7)
		add_n(n); /* every truncation */
	save("hostile_truncated");

	begin(FZ_F_FIX_ICRC);
	for (int op = 0x15; op < 0x100; op += 0x11) {
		pkt(UR_OPC_SEND_ONLY, FZ_RC_R, FZ_PSN, 8);
		P.bth[0] = (uint8_t)op;
		add();
	}
	save("hostile_opcodes");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	one_per_opcode();
	messages();
	responses();
	exchanges();
	hostile();
	printf("%d seeds written to %s\n", nseeds, dir);
	return 0;
}

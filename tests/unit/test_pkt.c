/* Unit tests of the opcode table and of packet parse/build (pkt.c).
 *
 * The expected layout of every opcode is written out here by hand from the
 * IBTA opcode table (Vol 1 9.2.1, 9.3; Annex A14 for XRC), independently of the way
 * opcode.c builds its table. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/pkt.h"

#include "check.h"

/* ---- Expected layouts ---- */

#define Q  URM_REQ
#define R  URM_RESP
#define S  URM_START
#define MI URM_MIDDLE
#define E  URM_END
#define W  URM_RWR
#define P  URM_PAYLOAD

struct exp_op {
	uint8_t op; /* low 5 bits */
	const char *name;
	enum uroce_hdr_type hdr[3]; /* extended headers in order, 0 (UR_BTH) ends */
	uint32_t cls;		    /* classification bits + URM_PAYLOAD */
	bool response;
};

/* IBTA Vol 1 9.2.1 OpCode table, RC opcodes (UC uses the first 12). */
static const struct exp_op rc_ops[] = {
    {0x00, "SEND_FIRST", {0}, Q | URM_SEND | W | P | S, false},
    {0x01, "SEND_MIDDLE", {0}, Q | URM_SEND | W | P | MI, false},
    {0x02, "SEND_LAST", {0}, Q | URM_SEND | W | P | E, false},
    {0x03, "SEND_LAST_WITH_IMMEDIATE", {UR_IMMDT}, Q | URM_SEND | W | P | E, false},
    {0x04, "SEND_ONLY", {0}, Q | URM_SEND | W | P | S | E, false},
    {0x05, "SEND_ONLY_WITH_IMMEDIATE", {UR_IMMDT}, Q | URM_SEND | W | P | S | E, false},
    {0x06, "RDMA_WRITE_FIRST", {UR_RETH}, Q | URM_WRITE | P | S, false},
    {0x07, "RDMA_WRITE_MIDDLE", {0}, Q | URM_WRITE | P | MI, false},
    {0x08, "RDMA_WRITE_LAST", {0}, Q | URM_WRITE | P | E, false},
    {0x09, "RDMA_WRITE_LAST_WITH_IMMEDIATE", {UR_IMMDT}, Q | URM_WRITE | W | P | E, false},
    {0x0a, "RDMA_WRITE_ONLY", {UR_RETH}, Q | URM_WRITE | P | S | E, false},
    {0x0b,
     "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
     {UR_RETH, UR_IMMDT},
     Q | URM_WRITE | W | P | S | E,
     false},
    {0x0c, "RDMA_READ_REQUEST", {UR_RETH}, Q | URM_READ | S | E, false},
    {0x0d, "RDMA_READ_RESPONSE_FIRST", {UR_AETH}, R | URM_READ | P | S, true},
    {0x0e, "RDMA_READ_RESPONSE_MIDDLE", {0}, R | URM_READ | P | MI, true},
    {0x0f, "RDMA_READ_RESPONSE_LAST", {UR_AETH}, R | URM_READ | P | E, true},
    {0x10, "RDMA_READ_RESPONSE_ONLY", {UR_AETH}, R | URM_READ | P | S | E, true},
    {0x11, "ACKNOWLEDGE", {UR_AETH}, R | S | E, true},
    {0x12, "ATOMIC_ACKNOWLEDGE", {UR_AETH, UR_ATMACK}, R | URM_ATOMIC | S | E, true},
    {0x13, "COMPARE_SWAP", {UR_ATMETH}, Q | URM_ATOMIC | S | E, false},
    {0x14, "FETCH_ADD", {UR_ATMETH}, Q | URM_ATOMIC | S | E, false},
    {0x16, "SEND_LAST_WITH_INVALIDATE", {UR_IETH}, Q | URM_SEND | W | P | E, false},
    {0x17, "SEND_ONLY_WITH_INVALIDATE", {UR_IETH}, Q | URM_SEND | W | P | S | E, false},
};
#define N_RC_OPS    (sizeof(rc_ops) / sizeof(rc_ops[0]))
#define N_UC_OPS    12 /* rc_ops[0..11]: SEND and WRITE */
#define N_SUPPORTED (N_RC_OPS + N_UC_OPS + 2 + N_RC_OPS + 1)

static const uint8_t hdr_bytes[UR_NUM_HDR_TYPES] = {
    [UR_BTH] = UR_BTH_BYTES,	   [UR_RDETH] = UR_RDETH_BYTES,	  [UR_DETH] = UR_DETH_BYTES,
    [UR_XRCETH] = UR_XRCETH_BYTES, [UR_RETH] = UR_RETH_BYTES,	  [UR_ATMETH] = UR_ATMETH_BYTES,
    [UR_AETH] = UR_AETH_BYTES,	   [UR_ATMACK] = UR_ATMACK_BYTES, [UR_IMMDT] = UR_IMMDT_BYTES,
    [UR_IETH] = UR_IETH_BYTES,
};

/* One supported opcode with its complete expected layout. */
struct exp_full {
	uint8_t opcode;
	char name[64];
	enum uroce_hdr_type hdr[4];
	int nhdr;
	uint32_t mask;
};

static struct exp_full expected[N_SUPPORTED];
static int n_expected;

static void add_expected(uint8_t tr, const char *trname, const struct exp_op *e,
			 enum uroce_hdr_type first)
{
	struct exp_full *x = &expected[n_expected++];

	x->opcode = (uint8_t)(tr | e->op);
	snprintf(x->name, sizeof(x->name), "%s_%s", trname, e->name);
	x->nhdr = 0;
	x->mask = URM_BTH | e->cls;
	if (first != UR_BTH) {
		x->hdr[x->nhdr++] = first;
		x->mask |= 1u << first;
	}
	for (int i = 0; i < 3 && e->hdr[i] != UR_BTH; i++) {
		x->hdr[x->nhdr++] = e->hdr[i];
		x->mask |= 1u << e->hdr[i];
	}
}

static void build_expected(void)
{
	static const struct exp_op ud_ops[] = {
	    {0x04, "SEND_ONLY", {0}, Q | URM_SEND | W | P | S | E, false},
	    {0x05, "SEND_ONLY_WITH_IMMEDIATE", {UR_IMMDT}, Q | URM_SEND | W | P | S | E, false},
	};

	for (size_t i = 0; i < N_RC_OPS; i++)
		add_expected(UR_TR_RC, "RC", &rc_ops[i], UR_BTH);
	for (size_t i = 0; i < N_UC_OPS; i++)
		add_expected(UR_TR_UC, "UC", &rc_ops[i], UR_BTH);
	for (size_t i = 0; i < 2; i++)
		add_expected(UR_TR_UD, "UD", &ud_ops[i], UR_DETH);
	/* XRC (Annex A14): XRCETH right after BTH in requests only. */
	for (size_t i = 0; i < N_RC_OPS; i++)
		add_expected(UR_TR_XRC, "XRC", &rc_ops[i], rc_ops[i].response ? UR_BTH : UR_XRCETH);
	/* uroce's selective ACK, manufacturer-specific class (docs/design.md) */
	{
		static const struct exp_op sack = {0x11, "SACK", {UR_AETH}, R | P | S | E, true};

		add_expected(UR_TR_VENDOR, "UROCE", &sack, UR_BTH);
	}
}

/* ---- Table tests ---- */

static void test_table(void)
{
	int supported = 0;

	for (int opc = 0; opc < 256; opc++)
		if (uroce_opcode[opc].name)
			supported++;
	CHECK(supported == n_expected, "%d opcodes in the table, %d expected", supported,
	      n_expected);

	for (int i = 0; i < n_expected; i++) {
		const struct exp_full *x = &expected[i];
		const struct uroce_opcode_info *info = &uroce_opcode[x->opcode];
		uint32_t off = UR_BTH_BYTES;
		bool present[UR_NUM_HDR_TYPES] = {[UR_BTH] = true};

		CHECK(info->name && !strcmp(info->name, x->name), "0x%02x: name %s, want %s",
		      x->opcode, info->name ? info->name : "(null)", x->name);
		CHECK(!strcmp(uroce_opcode_name(x->opcode), x->name), "0x%02x name()", x->opcode);
		CHECK(info->mask == x->mask, "%s: mask 0x%08x, want 0x%08x", x->name, info->mask,
		      x->mask);
		CHECK(info->offset[UR_BTH] == 0, "%s: BTH offset %u", x->name,
		      info->offset[UR_BTH]);
		for (int h = 0; h < x->nhdr; h++) {
			CHECK(info->offset[x->hdr[h]] == off, "%s: header %d at %u, want %u",
			      x->name, x->hdr[h], info->offset[x->hdr[h]], off);
			present[x->hdr[h]] = true;
			off += hdr_bytes[x->hdr[h]];
		}
		CHECK(info->length == off, "%s: length %u, want %u", x->name, info->length, off);
		CHECK(info->offset[UR_PAYLOAD] == off, "%s: payload offset %u, want %u", x->name,
		      info->offset[UR_PAYLOAD], off);
		for (int t = UR_RDETH; t < UR_PAYLOAD; t++)
			if (!present[t])
				CHECK(info->offset[t] == 0 && !(info->mask & (1u << t)),
				      "%s: absent header %d has offset %u / mask bit", x->name, t,
				      info->offset[t]);
	}

	/* Invariants every entry must satisfy, whatever it is. */
	for (int opc = 0; opc < 256; opc++) {
		const struct uroce_opcode_info *info = &uroce_opcode[opc];
		uint32_t m = info->mask;
		uint32_t prev = 0;
		int kinds;

		if (!info->name) {
			CHECK(m == 0 && info->length == 0, "0x%02x: unsupported but has data", opc);
			CHECK(!strcmp(uroce_opcode_name((uint8_t)opc), "UNKNOWN"), "0x%02x", opc);
			continue;
		}
		CHECK(m & URM_BTH, "%s: no BTH", info->name);
		CHECK(!!(m & URM_REQ) + !!(m & URM_RESP) == 1, "%s: REQ/RESP", info->name);
		kinds =
		    !!(m & URM_SEND) + !!(m & URM_WRITE) + !!(m & URM_READ) + !!(m & URM_ATOMIC);
		CHECK(kinds == 1 || (opc & 0x1f) == UR_OPC_ACK, "%s: %d kinds", info->name, kinds);
		CHECK((m & (URM_START | URM_MIDDLE | URM_END)) &&
			  (!(m & URM_MIDDLE) || !(m & (URM_START | URM_END))),
		      "%s: position bits", info->name);
		CHECK(!(m & URM_RWR) || (m & URM_SEND) || ((m & URM_WRITE) && (m & URM_IMMDT)),
		      "%s: RWR", info->name);
		CHECK(!(m & URM_SEND) || (m & URM_RWR), "%s: SEND without RWR", info->name);
		CHECK(!!(m & URM_PAYLOAD) ==
			  !!((m & (URM_SEND | URM_WRITE)) || ((m & URM_READ) && (m & URM_RESP)) ||
			     opc == UR_OPC_SACK),
		      "%s: payload bit", info->name);
		CHECK(!((m & URM_IMMDT) && (m & URM_IETH)), "%s: ImmDt and IETH", info->name);
		CHECK(info->length >= UR_BTH_BYTES && info->offset[UR_PAYLOAD] == info->length,
		      "%s: length", info->name);
		/* Present headers are in type order and do not overlap. */
		for (int t = UR_RDETH; t < UR_PAYLOAD; t++) {
			if (!(m & (1u << t)))
				continue;
			CHECK(info->offset[t] >= UR_BTH_BYTES && info->offset[t] >= prev,
			      "%s: header %d offset %u out of order", info->name, t,
			      info->offset[t]);
			prev = info->offset[t] + hdr_bytes[t];
		}
		CHECK(prev == 0 || prev == info->length, "%s: headers end at %u, length %u",
		      info->name, prev, info->length);
	}
	/* A few spot checks written out in bytes. */
	CHECK(uroce_opcode[0x0b].length == 32 && uroce_opcode[0x0b].offset[UR_IMMDT] == 28,
	      "RC WRITE_ONLY_IMM");
	CHECK(uroce_opcode[0x12].length == 24 && uroce_opcode[0x12].offset[UR_ATMACK] == 16,
	      "RC ATOMIC_ACK");
	CHECK(uroce_opcode[0x65].length == 24 && uroce_opcode[0x65].offset[UR_IMMDT] == 20,
	      "UD SEND_ONLY_IMM");
	CHECK(uroce_opcode[0x13].length == 40, "RC CMP_SWAP");
	CHECK(uroce_opcode[0xb3].length == 44 && uroce_opcode[0xb3].offset[UR_ATMETH] == 16,
	      "XRC CMP_SWAP");
	CHECK(uroce_opcode[0xb1].length == 16, "XRC ACK");
	CHECK(uroce_opcode[0x0e].length == 12, "RC READ_RESP_MIDDLE");
	CHECK(!uroce_opcode[0x15].name && !uroce_opcode[0xb5].name && !uroce_opcode[0x2c].name &&
		  !uroce_opcode[0x40].name && !uroce_opcode[UR_OPC_CNP].name,
	      "reserved / RD / CNP opcodes unsupported");
}

/* ---- Build and parse ---- */

static uint8_t buf[8192];

static uint32_t rnd_state = 0x12345678;
static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state;
}

static struct uroce_ipinfo test_ip(int family)
{
	struct uroce_ipinfo ip;

	memset(&ip, 0, sizeof(ip));
	ip.family = family;
	if (family == AF_INET) {
		inet_pton(AF_INET, "192.0.2.1", &ip.src.v4);
		inet_pton(AF_INET, "198.51.100.7", &ip.dst.v4);
	} else {
		inet_pton(AF_INET6, "2001:db8::1", &ip.src.v6);
		inet_pton(AF_INET6, "2001:db8::abcd:7", &ip.dst.v6);
	}
	ip.sport = 49152;
	ip.dport = UR_ROCE_PORT;
	return ip;
}

struct ext_vals {
	uint64_t va, swap, cmp, orig;
	uint32_t rkey, len, msn, imm, ieth, qkey, sqp, srqn;
	uint8_t syn;
};

static void set_ext(struct uroce_pkt *p, const struct ext_vals *v)
{
	if (p->mask & URM_RETH)
		ur_reth_set(p, v->va, v->rkey, v->len);
	if (p->mask & URM_AETH)
		ur_aeth_set(p, v->syn, v->msn);
	if (p->mask & URM_ATMETH)
		ur_atmeth_set(p, v->va, v->rkey, v->swap, v->cmp);
	if (p->mask & URM_ATMACK)
		ur_atmack_set(p, v->orig);
	if (p->mask & URM_IMMDT)
		ur_immdt_set_raw(p, v->imm);
	if (p->mask & URM_IETH)
		ur_ieth_set(p, v->ieth);
	if (p->mask & URM_DETH)
		ur_deth_set(p, v->qkey, v->sqp);
	if (p->mask & URM_XRCETH)
		ur_xrceth_set(p, v->srqn);
}

static bool ext_match(const struct uroce_pkt *p, const struct ext_vals *v)
{
	bool ok = true;

	if (p->mask & URM_RETH)
		ok &= ur_reth_va(p) == v->va && ur_reth_rkey(p) == v->rkey &&
		      ur_reth_len(p) == v->len;
	if (p->mask & URM_AETH)
		ok &= ur_aeth_syn(p) == v->syn && ur_aeth_msn(p) == (v->msn & 0xffffff);
	if (p->mask & URM_ATMETH)
		ok &= ur_atmeth_va(p) == v->va && ur_atmeth_rkey(p) == v->rkey &&
		      ur_atmeth_swap_add(p) == v->swap && ur_atmeth_cmp(p) == v->cmp;
	if (p->mask & URM_ATMACK)
		ok &= ur_atmack_orig(p) == v->orig;
	if (p->mask & URM_IMMDT)
		ok &= ur_immdt_raw(p) == v->imm;
	if (p->mask & URM_IETH)
		ok &= ur_ieth_rkey(p) == v->ieth;
	if (p->mask & URM_DETH)
		ok &= ur_deth_qkey(p) == v->qkey && ur_deth_sqp(p) == (v->sqp & 0xffffff);
	if (p->mask & URM_XRCETH)
		ok &= ur_xrceth_srqn(p) == (v->srqn & 0xffffff);
	return ok;
}

static void test_build_parse(void)
{
	static const uint32_t sizes[] = {0,    1,    2,	   3,	 4,    5,    6,	  7,	8,
					 9,    63,   64,   65,	 255,  256,  257, 1023, 1024,
					 1025, 1500, 2048, 4093, 4094, 4095, 4096};
	unsigned built = 0;

	for (int opc = 0; opc < 256; opc++) {
		const struct uroce_opcode_info *info = &uroce_opcode[opc];

		if (!info->name)
			continue;
		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
			uint32_t paylen = sizes[si];
			struct uroce_ipinfo ip = test_ip(si & 1 ? AF_INET6 : AF_INET);
			struct uroce_pkt p, q;
			struct ext_vals v = {
			    .va = ((uint64_t)rnd() << 32) | rnd(),
			    .swap = ((uint64_t)rnd() << 32) | rnd(),
			    .cmp = ((uint64_t)rnd() << 32) | rnd(),
			    .orig = ((uint64_t)rnd() << 32) | rnd(),
			    .rkey = rnd(),
			    .len = rnd(),
			    .msn = rnd(),
			    .imm = rnd(),
			    .ieth = rnd(),
			    .qkey = rnd(),
			    .sqp = rnd(),
			    .srqn = rnd(),
			    .syn = (uint8_t)rnd(),
			};
			uint32_t qpn = rnd(), psn = rnd(), wire, icrc;
			bool se = rnd() & 1, ackreq = rnd() & 1;
			int rc;

			if (paylen && !(info->mask & URM_PAYLOAD))
				continue;
			wire = uroce_pkt_wire_len((uint8_t)opc, paylen);
			memset(buf, 0xaa, sizeof(buf)); /* garbage where the pad goes */
			uroce_pkt_init(&p, buf, (uint8_t)opc, qpn, psn, paylen);
			CHECK(p.len == wire && p.opcode == opc && p.paylen == paylen &&
				  p.pad == ((4 - paylen % 4) % 4) &&
				  p.payload == buf + info->length && p.mask == info->mask,
			      "%s/%u: init fields", info->name, paylen);
			CHECK(wire == info->length + paylen + p.pad + UR_ICRC_BYTES,
			      "%s/%u: wire %u", info->name, paylen, wire);
			CHECK(buf[0] == opc && (buf[1] & 0x0f) == 0 &&
				  ((buf[1] >> 4) & 3) == p.pad && buf[2] == 0xff &&
				  buf[3] == 0xff && buf[4] == 0,
			      "%s/%u: BTH bytes %02x %02x %02x %02x %02x", info->name, paylen,
			      buf[0], buf[1], buf[2], buf[3], buf[4]);
			ur_bth_set_se(&p, se);
			ur_bth_set_ackreq(&p, ackreq);
			set_ext(&p, &v);
			for (uint32_t i = 0; i < paylen; i++)
				p.payload[i] = (uint8_t)(i * 7 + opc);
			uroce_pkt_finish(&p, &ip);
			for (uint32_t i = 0; i < p.pad; i++)
				CHECK(p.payload[paylen + i] == 0, "%s/%u: pad byte %u not zeroed",
				      info->name, paylen, i);
			memcpy(&icrc, buf + wire - 4, 4);
			CHECK(le32toh(icrc) == uroce_icrc_compute(&ip, buf, wire - 4),
			      "%s/%u: ICRC not stored little-endian", info->name, paylen);

			memset(&q, 0x5a, sizeof(q));
			rc = uroce_pkt_parse(&q, buf, wire);
			CHECK(rc == 0, "%s/%u: parse returned %d", info->name, paylen, rc);
			if (rc)
				continue;
			built++;
			CHECK(q.bth == buf && q.len == wire && q.mask == info->mask &&
				  q.opcode == opc && q.pad == p.pad && q.paylen == paylen &&
				  q.payload == buf + info->length,
			      "%s/%u: parsed layout", info->name, paylen);
			CHECK(q.qpn == (qpn & UR_QPN_MASK) && q.psn == (psn & UR_PSN_MASK) &&
				  q.se == se && q.ackreq == ackreq,
			      "%s/%u: parsed BTH fields qpn %x psn %x se %d ack %d", info->name,
			      paylen, q.qpn, q.psn, q.se, q.ackreq);
			CHECK(ext_match(&q, &v), "%s/%u: extended header fields", info->name,
			      paylen);
			CHECK(uroce_icrc_ok(&q, &ip), "%s/%u: ICRC", info->name, paylen);
			for (uint32_t i = 0; i < paylen; i++)
				if (q.payload[i] != (uint8_t)(i * 7 + opc)) {
					CHECK(0, "%s/%u: payload byte %u", info->name, paylen, i);
					break;
				}

			/* PSN setter keeps AckReq; parse sees the new PSN. */
			ur_bth_set_psn(&p, psn + 1);
			CHECK(uroce_pkt_parse(&q, buf, wire) == 0 &&
				  q.psn == ((psn + 1) & UR_PSN_MASK) && q.ackreq == ackreq,
			      "%s/%u: set_psn", info->name, paylen);
		}
	}
	CHECK(built > 1000, "only %u packets built", built);
}

/* ---- Rejection of malformed packets ---- */

static int parse_len(uint8_t opc, size_t len, uint8_t byte1)
{
	struct uroce_pkt p;

	memset(buf, 0, sizeof(buf));
	buf[0] = opc;
	buf[1] = byte1;
	buf[2] = buf[3] = 0xff;
	return uroce_pkt_parse(&p, buf, len);
}

static void test_reject(void)
{
	struct uroce_pkt p;

	/* Shorter than BTH + ICRC, whatever the opcode. */
	for (size_t len = 0; len < UR_BTH_BYTES + UR_ICRC_BYTES; len++)
		CHECK(parse_len(UR_OPC_SEND_ONLY, len, 0) == -EINVAL, "len %zu accepted", len);
	CHECK(parse_len(UR_OPC_SEND_ONLY, 16, 0) == 0, "minimal SEND_ONLY rejected");
	CHECK(parse_len(UR_OPC_SEND_ONLY, 65536, 0) == -EINVAL, "64 KiB packet accepted");

	/* TVer must be 0. */
	for (uint8_t tver = 1; tver < 16; tver++)
		CHECK(parse_len(UR_OPC_SEND_ONLY, 16, tver) == -EINVAL, "TVer %u accepted", tver);

	for (int opc = 0; opc < 256; opc++) {
		const struct uroce_opcode_info *info = &uroce_opcode[opc];

		if (!info->name) {
			CHECK(parse_len((uint8_t)opc, 256, 0) == -EINVAL,
			      "unknown opcode 0x%02x accepted", opc);
			continue;
		}
		/* Exactly the headers is fine; any byte fewer is truncated. */
		CHECK(parse_len((uint8_t)opc, info->length + 4u, 0) == 0, "%s: headers only",
		      info->name);
		for (size_t len = UR_BTH_BYTES + UR_ICRC_BYTES; len < info->length + 4u; len++)
			CHECK(parse_len((uint8_t)opc, len, 0) == -EINVAL, "%s: truncated %zu",
			      info->name, len);
		/* Payload+pad not a multiple of 4. */
		for (size_t extra = 1; extra < 12; extra++) {
			int rc = parse_len((uint8_t)opc, info->length + 4u + extra, 0);

			if (!(info->mask & URM_PAYLOAD))
				CHECK(rc == -EINVAL, "%s: %zu bytes of payload accepted",
				      info->name, extra);
			else
				CHECK((rc == 0) == (extra % 4 == 0), "%s: %zu payload bytes: %d",
				      info->name, extra, rc);
		}
		/* Pad larger than the payload (no payload at all). */
		for (uint8_t pad = 1; pad < 4; pad++)
			CHECK(parse_len((uint8_t)opc, info->length + 4u, (uint8_t)(pad << 4)) ==
				  -EINVAL,
			      "%s: pad %u without payload accepted", info->name, pad);
		if (info->mask & URM_PAYLOAD)
			for (uint8_t pad = 0; pad < 4; pad++) {
				int rc =
				    parse_len((uint8_t)opc, info->length + 8u, (uint8_t)(pad << 4));

				CHECK(rc == 0 && uroce_pkt_parse(&p, buf, info->length + 8u) == 0 &&
					  p.paylen == 4u - pad && p.pad == pad,
				      "%s: 4 bytes with pad %u", info->name, pad);
			}
	}

	/* SE, M and the reserved bits do not matter to parse. */
	CHECK(parse_len(UR_OPC_SEND_ONLY, 20, 0x80 | 0x40 | 0x30) == 0, "SE|M|pad3");
	CHECK(uroce_pkt_parse(&p, buf, 20) == 0 && p.se && p.pad == 3 && p.paylen == 1,
	      "SE|M|pad3 fields");
}

static void test_psn(void)
{
	CHECK(ur_psn_diff(5, 3) == 2, "5-3");
	CHECK(ur_psn_diff(3, 5) == -2, "3-5");
	CHECK(ur_psn_diff(0, 0xffffff) == 1, "wrap forward");
	CHECK(ur_psn_diff(0xffffff, 0) == -1, "wrap back");
	CHECK(ur_psn_diff(0x7fffff, 0) == 0x7fffff, "half");
}

int main(void)
{
	build_expected();
	test_table();
	test_build_parse();
	test_reject();
	test_psn();
	printf("test_pkt: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

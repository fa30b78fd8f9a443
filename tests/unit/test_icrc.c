/* Unit tests of CRC32 and the RoCEv2 ICRC (icrc.c).
 *
 * Usage: test_icrc [VECTOR_FILE]
 * Without an argument the vectors come from $UROCE_SRC_DIR/tests/data/
 * icrc_vectors.txt (set by ctest), made by tests/tools/gen_icrc_vectors.py
 * with scapy.  One line per packet: family src dst sport dport hex, hex
 * being BTH through ICRC as on the wire. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "uroce.h"
#include "transport/pkt.h"

#include "check.h"

/* Bit-at-a-time CRC32, the definition itself, to check the fast ones. */
static uint32_t crc32_bitwise(uint32_t crc, const uint8_t *p, size_t len)
{
	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int i = 0; i < 8; i++)
			crc = (crc & 1) ? (crc >> 1) ^ 0xedb88320u : crc >> 1;
	}
	return ~crc;
}

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void test_crc_known(const char *what, crc_fn fn)
{
	static const struct {
		const char *s;
		size_t len;
		uint32_t crc;
	} kv[] = {
	    {"", 0, 0x00000000},
	    {"a", 1, 0xe8b7be43},
	    {"abc", 3, 0x352441c2},
	    {"123456789", 9, 0xcbf43926},
	    {"The quick brown fox jumps over the lazy dog", 43, 0x414fa339},
	};
	uint8_t zeros[32] = {0}, ones[32];

	memset(ones, 0xff, sizeof(ones));
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		CHECK(fn(0, kv[i].s, kv[i].len) == kv[i].crc, "%s(\"%s\") = %08x, want %08x", what,
		      kv[i].s, fn(0, kv[i].s, kv[i].len), kv[i].crc);
	CHECK(fn(0, zeros, 32) == 0x190a55ad, "%s(32 zeros) = %08x", what, fn(0, zeros, 32));
	CHECK(fn(0, ones, 32) == 0xff6cab0b, "%s(32 ones) = %08x", what, fn(0, ones, 32));
	/* Linux rxe starts its ICRC from the raw register 0xdebb20e3: the state
	 * after 8 bytes of ones.  Our chainable value is its complement. */
	CHECK(fn(0, ones, 8) == (uint32_t)~0xdebb20e3u, "%s(8 ones) = %08x", what, fn(0, ones, 8));
	/* Chaining: "1234" then "56789". */
	CHECK(fn(fn(0, "1234", 4), "56789", 5) == 0xcbf43926, "%s chained", what);
}

static uint32_t rnd_state = 0x9e3779b9;
static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state;
}

static void test_crc_random(void)
{
	static uint8_t data[4200];
	static uint8_t copy[4200 + 64];
	unsigned bad_hw = 0, bad_sw = 0, bad_chain = 0, bad_clmul = 0, bad_copy = 0, bad_pre = 0;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)rnd();
	/* Every length up to 1100 and a few big ones, at every alignment. */
	for (size_t len = 0; len <= 4096; len = len < 1100 ? len + 1 : len * 2 - 1) {
		for (size_t off = 0; off < 8; off++) {
			uint32_t seed = (len & 1) ? rnd() : 0;
			uint32_t ref = crc32_bitwise(seed, data + off, len);

			bad_hw += uroce_crc32(seed, data + off, len) != ref;
			bad_sw += uroce_crc32_sw(seed, data + off, len) != ref;
			bad_clmul += uroce_crc32_clmul(seed, data + off, len) != ref;
			/* the copy at another alignment than the source */
			memset(copy, 0xa5, sizeof(copy));
			bad_copy +=
			    uroce_crc32_copy(copy + 3 + off * 5, data + off, len, seed) != ref;
			bad_copy += memcmp(copy + 3 + off * 5, data + off, len) != 0;
			bad_copy += copy[2 + off * 5] != 0xa5 || copy[3 + off * 5 + len] != 0xa5;
			/* 16 bytes from elsewhere in front: the CRC of both, the
			 * copy of the second only (and no copy at all) */
			if (len >= 16) {
				memset(copy, 0xa5, sizeof(copy));
				bad_pre += uroce_crc32_copy_pre(copy + 3 + off * 5, data + off + 16,
								len - 16, data + off, seed) != ref;
				bad_pre +=
				    memcmp(copy + 3 + off * 5, data + off + 16, len - 16) != 0;
				bad_pre += copy[2 + off * 5] != 0xa5 ||
					   copy[3 + off * 5 + len - 16] != 0xa5;
				bad_pre += uroce_crc32_copy_pre(NULL, data + off + 16, len - 16,
								data + off, seed) != ref;
			}
		}
	}
	/* Splitting anywhere gives the same CRC, through both paths. */
	for (size_t cut = 0; cut <= 300; cut++) {
		uint32_t ref = crc32_bitwise(0, data, 300);

		bad_chain += uroce_crc32(uroce_crc32(0, data, cut), data + cut, 300 - cut) != ref;
		bad_chain +=
		    uroce_crc32_sw(uroce_crc32_sw(0, data, cut), data + cut, 300 - cut) != ref;
		bad_chain +=
		    uroce_crc32_sw(uroce_crc32(0, data, cut), data + cut, 300 - cut) != ref;
	}
	CHECK(bad_hw == 0, "uroce_crc32 differs from the bitwise CRC %u times", bad_hw);
	CHECK(bad_sw == 0, "uroce_crc32_sw differs from the bitwise CRC %u times", bad_sw);
	CHECK(bad_chain == 0, "chained CRCs differ %u times", bad_chain);
	CHECK(bad_clmul == 0, "uroce_crc32_clmul (level %d) differs from the bitwise CRC %u times",
	      uroce_crc32_clmul_level(), bad_clmul);
	CHECK(bad_copy == 0, "uroce_crc32_copy: wrong CRC or copy %u times", bad_copy);
	CHECK(bad_pre == 0, "uroce_crc32_copy_pre: wrong CRC or copy %u times", bad_pre);
}

/* The ICRC of a packet in pieces (a send from registered memory) is the
 * ICRC of the packet built whole. */
static void test_icrc_gather(void)
{
	static uint8_t pkt[UR_BTH_BYTES + 16 + 4100 + 4];
	struct uroce_ipinfo ip = {.family = AF_INET, .sport = 49152, .dport = 4791};
	unsigned bad = 0;

	ip.src.v4.s_addr = htonl(0x0a000001);
	ip.dst.v4.s_addr = htonl(0x0a000002);
	for (size_t i = 0; i < sizeof(pkt); i++)
		pkt[i] = (uint8_t)rnd();
	for (uint32_t paylen = 1; paylen <= 4096; paylen = paylen * 3 + 1) {
		for (uint32_t hlen = UR_BTH_BYTES; hlen <= UR_BTH_BYTES + 16; hlen += 16) {
			uint32_t pad = (0u - paylen) & 3u, cut = paylen / 3;
			struct iovec iov[2] = {{pkt + hlen, cut}, {pkt + hlen + cut, paylen - cut}};

			memset(pkt + hlen + paylen, 0, pad);
			bad += uroce_icrc_gather(&ip, pkt, hlen, iov, 2, pad) !=
			       uroce_icrc_compute(&ip, pkt, hlen + paylen + pad);
			bad += uroce_icrc_gather(&ip, pkt, hlen, iov, 1, 0) !=
			       uroce_icrc_compute(&ip, pkt, hlen + cut);
		}
	}
	CHECK(bad == 0, "uroce_icrc_gather differs from uroce_icrc_compute %u times", bad);
}

/* A packet below UROCE_TX_GATHER_MIN is copied into the transmit batch
 * with its ICRC computed in the same pass (gso.c, t->icrc_ip): the bytes
 * are those of the packet gathered from its MR with the ICRC req.c
 * computes (uroce_icrc_gather), and the ICRC for a segment's IPv4 ID k is
 * that of the packet sent with ID k. */
static uint32_t wire_icrc(const uint8_t *pkt, uint32_t len)
{
	uint32_t v;

	memcpy(&v, pkt + len - UR_ICRC_BYTES, sizeof(v));
	return le32toh(v);
}

static void test_tx_copy(void)
{
	static uint8_t mr[4100], gathered[UR_BTH_BYTES + 16 + 4100 + 4], copied[sizeof(gathered)];
	struct uroce_ipinfo ip = {.family = AF_INET, .sport = 49153, .dport = 4791};
	unsigned bad_bytes = 0, bad_id = 0, n = 0;
	uint8_t hdr[UR_BTH_BYTES + 16];

	ip.src.v4.s_addr = htonl(0x0a000003);
	ip.dst.v4.s_addr = htonl(0x0a000004);
	for (size_t i = 0; i < sizeof(mr); i++)
		mr[i] = (uint8_t)rnd();
	for (size_t i = 0; i < sizeof(hdr); i++)
		hdr[i] = (uint8_t)rnd();
	for (uint32_t paylen = 1; paylen <= 4096; paylen = paylen * 2 + 1) {
		for (uint32_t hlen = UR_BTH_BYTES; hlen <= UR_BTH_BYTES + 16; hlen += 16) {
			uint32_t pad = (0u - paylen) & 3u, cut = paylen / 3, icrc;
			struct iovec iov[2] = {{mr + 1, cut}, {mr + 1 + cut, paylen - cut}};
			uint8_t trl[3 + UR_ICRC_BYTES] = {0};
			struct uroce_tx_pkt t = {.hdr = hdr,
						 .hlen = hlen,
						 .iov = iov,
						 .niov = 2,
						 .trl = trl,
						 .tlen = pad + UR_ICRC_BYTES,
						 .len = hlen + paylen + pad + UR_ICRC_BYTES};

			/* the gather path: ICRC computed by req.c, bytes as the
			 * kernel joins the pieces */
			icrc = htole32(uroce_icrc_gather(&ip, hdr, hlen, iov, 2, pad));
			memcpy(trl + pad, &icrc, UR_ICRC_BYTES);
			memset(gathered, 0xa5, sizeof(gathered));
			uroce_tx_pkt_linear(&t, gathered);
			/* the copy path: trailer left to the copy */
			memset(trl, 0x5a, sizeof(trl));
			memset(trl, 0, pad);
			t.icrc_ip = &ip;
			memset(copied, 0xc3, sizeof(copied));
			uroce_tx_pkt_linear(&t, copied);
			bad_bytes += memcmp(gathered, copied, t.len) != 0;
			bad_bytes += uroce_icrc_compute(&ip, copied, t.len - UR_ICRC_BYTES) !=
				     wire_icrc(copied, t.len);
			for (uint16_t k = 1; k < 64; k += 21) {
				struct uroce_ipinfo seg = ip;

				seg.ipid = k;
				t.icrc_ip = &seg;
				uroce_tx_pkt_linear(&t, copied);
				bad_id +=
				    memcmp(gathered, copied, t.len - UR_ICRC_BYTES) != 0 ||
				    uroce_icrc_compute(&seg, gathered, t.len - UR_ICRC_BYTES) !=
					wire_icrc(copied, t.len);
			}
			n++;
		}
	}
	CHECK(n > 10 && bad_bytes == 0,
	      "copied packet differs from the gathered one %u times in %u", bad_bytes, n);
	CHECK(bad_id == 0, "copied packet's ICRC wrong for its IPv4 ID %u times", bad_id);
}

/* The ICRC by its definition (IBTA A17.3.3), bit by bit over the masked
 * pseudo-header built here, for an IPv4 packet of len bytes with ID ipid. */
static uint32_t icrc_ref4(const struct uroce_ipinfo *ip, const uint8_t *bth, uint32_t len)
{
	static uint8_t ph[36 + 70000];
	uint32_t udp_len = 8 + len + 4, tot = 20 + udp_len;
	uint8_t *h = ph + 8;

	memset(ph, 0xff, 8);
	h[0] = 0x45;
	h[1] = 0xff;
	h[2] = (uint8_t)(tot >> 8), h[3] = (uint8_t)tot;
	h[4] = (uint8_t)(ip->ipid >> 8), h[5] = (uint8_t)ip->ipid;
	h[6] = 0x40, h[7] = 0;
	h[8] = 0xff, h[9] = 17, h[10] = 0xff, h[11] = 0xff;
	memcpy(h + 12, &ip->src.v4, 4);
	memcpy(h + 16, &ip->dst.v4, 4);
	h += 20;
	h[0] = (uint8_t)(ip->sport >> 8), h[1] = (uint8_t)ip->sport;
	h[2] = (uint8_t)(ip->dport >> 8), h[3] = (uint8_t)ip->dport;
	h[4] = (uint8_t)(udp_len >> 8), h[5] = (uint8_t)udp_len;
	h[6] = 0xff, h[7] = 0xff;
	memcpy(h + 8, bth, len);
	h[8 + 4] = 0xff;
	return crc32_bitwise(0, ph, 36 + len);
}

/* The header CRC is cached per flow and length with the IPv4 ID and the
 * BTH's per-packet bytes added apart (icrc.c): every flow, length and ID, in an order that evicts
 * and refills the cache, gives the ICRC of the definition. */
static void test_icrc_hcache(void)
{
	static uint8_t pkt[UR_BTH_BYTES + 1100];
	unsigned bad = 0, n = 0;

	for (size_t i = 0; i < sizeof(pkt); i++)
		pkt[i] = (uint8_t)rnd();
	for (int round = 0; round < 3000; round++) {
		struct uroce_ipinfo ip = {.family = AF_INET};
		uint32_t flow = rnd() % 11, len = UR_BTH_BYTES + (rnd() % 3) * 512 + (flow & 3) * 4;

		ip.src.v4.s_addr = htonl(0x0a000001 + (flow % 3));
		ip.dst.v4.s_addr = htonl(0x7f000001 + (flow % 5));
		ip.sport = (uint16_t)(49152 + flow);
		ip.dport = (uint16_t)(4791 + (flow % 2));
		ip.ipid = round % 7 ? (uint16_t)(rnd() % 64) : (uint16_t)rnd();
		/* opcode, flags, AckReq and PSN change per packet; P_Key, the
		 * reserved byte and the destination QP per flow (or not) */
		pkt[0] = (uint8_t)rnd(), pkt[1] = (uint8_t)rnd();
		pkt[8] = (uint8_t)rnd(), pkt[9] = (uint8_t)rnd();
		pkt[10] = (uint8_t)rnd(), pkt[11] = (uint8_t)rnd();
		pkt[4] = (uint8_t)rnd();
		pkt[7] = (uint8_t)(flow + (round % 13 == 0));
		bad += uroce_icrc_compute(&ip, pkt, len) != icrc_ref4(&ip, pkt, len);
		n++;
	}
	CHECK(bad == 0, "cached header CRC: %u of %u ICRCs differ from the definition", bad, n);
}

/* ---- Vectors ---- */

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static uint8_t pkt_buf[70000];

/* Check one vector; returns false if the line is malformed. */
static bool check_vector(unsigned lineno, char *line)
{
	char family[8], src[64], dst[64];
	unsigned sport, dport;
	int hexoff = 0;
	struct uroce_ipinfo ip, ip2;
	struct uroce_pkt p;
	uint32_t len = 0, wire, icrc;
	const char *hex;
	unsigned flips_bad = 0, mask_bad = 0;
	int rc;

	if (sscanf(line, "%7s %63s %63s %u %u %n", family, src, dst, &sport, &dport, &hexoff) !=
		5 ||
	    !hexoff)
		return false;
	memset(&ip, 0, sizeof(ip));
	if (!strcmp(family, "ipv4")) {
		ip.family = AF_INET;
		if (inet_pton(AF_INET, src, &ip.src.v4) != 1 ||
		    inet_pton(AF_INET, dst, &ip.dst.v4) != 1)
			return false;
	} else if (!strcmp(family, "ipv6")) {
		ip.family = AF_INET6;
		if (inet_pton(AF_INET6, src, &ip.src.v6) != 1 ||
		    inet_pton(AF_INET6, dst, &ip.dst.v6) != 1)
			return false;
	} else {
		return false;
	}
	if (sport > 0xffff || dport > 0xffff)
		return false;
	ip.sport = (uint16_t)sport;
	ip.dport = (uint16_t)dport;
	for (hex = line + hexoff; hexval(hex[0]) >= 0 && hexval(hex[1]) >= 0; hex += 2) {
		if (len >= sizeof(pkt_buf))
			return false;
		pkt_buf[len++] = (uint8_t)(hexval(hex[0]) << 4 | hexval(hex[1]));
	}
	if (*hex && *hex != '\n' && *hex != '\r' && *hex != ' ')
		return false;

	rc = uroce_pkt_parse(&p, pkt_buf, len);
	CHECK(rc == 0, "line %u: parse of %u bytes failed", lineno, len);
	if (rc)
		return true;
	CHECK(uroce_icrc_ok(&p, &ip), "line %u (%s %s): ICRC rejected", lineno, family,
	      uroce_opcode_name(p.opcode));
	wire = len - UR_ICRC_BYTES;
	memcpy(&icrc, pkt_buf + wire, 4);
	CHECK(uroce_icrc_compute(&ip, pkt_buf, wire) == le32toh(icrc),
	      "line %u: computed %08x, wire %08x", lineno, uroce_icrc_compute(&ip, pkt_buf, wire),
	      le32toh(icrc));

	/* uroce_pkt_finish writes the same bytes (vectors have zero pads). */
	{
		uint32_t save;

		memcpy(&save, pkt_buf + wire, 4);
		memset(pkt_buf + wire, 0, 4);
		uroce_pkt_finish(&p, &ip);
		CHECK(!memcmp(&save, pkt_buf + wire, 4), "line %u: pkt_finish differs", lineno);
		memcpy(pkt_buf + wire, &save, 4);
	}

	/* Any single flipped bit in the covered bytes or the ICRC is caught.
	 * All 8 bits of the first 64 bytes and of the ICRC, one bit (rotating)
	 * of every other byte. */
	for (uint32_t i = 0; i < len; i++) {
		for (int b = 0; b < 8; b++) {
			if (i >= 64 && i < wire && b != (int)(i % 8))
				continue;
			if (i == 4) /* masked: handled below */
				continue;
			pkt_buf[i] ^= (uint8_t)(1u << b);
			flips_bad += uroce_icrc_ok(&p, &ip);
			pkt_buf[i] ^= (uint8_t)(1u << b);
		}
	}
	CHECK(flips_bad == 0, "line %u: %u single-bit errors not detected", lineno, flips_bad);

	/* BTH byte 4 (FECN, BECN, resv6) is masked: any value is accepted. */
	{
		uint8_t save = pkt_buf[4];

		for (int v = 0; v < 256; v++) {
			pkt_buf[4] = (uint8_t)v;
			mask_bad += !uroce_icrc_ok(&p, &ip);
		}
		pkt_buf[4] = save;
	}
	CHECK(mask_bad == 0, "line %u: %u changes of BTH byte 4 rejected", lineno, mask_bad);

	/* The IP addresses and UDP ports are covered. */
	ip2 = ip;
	ip2.sport ^= 1;
	CHECK(!uroce_icrc_ok(&p, &ip2), "line %u: sport not covered", lineno);
	ip2 = ip;
	ip2.dport ^= 0x8000;
	CHECK(!uroce_icrc_ok(&p, &ip2), "line %u: dport not covered", lineno);
	for (int k = 0; k < (ip.family == AF_INET ? 4 : 16); k++) {
		ip2 = ip;
		((uint8_t *)&ip2.src)[k] ^= 0x10;
		CHECK(!uroce_icrc_ok(&p, &ip2), "line %u: src byte %d not covered", lineno, k);
		ip2 = ip;
		((uint8_t *)&ip2.dst)[k] ^= 0x01;
		CHECK(!uroce_icrc_ok(&p, &ip2), "line %u: dst byte %d not covered", lineno, k);
	}
	ip2 = ip;
	ip2.family = ip.family == AF_INET ? AF_INET6 : AF_INET;
	CHECK(!uroce_icrc_ok(&p, &ip2), "line %u: family not covered", lineno);
	ip2.family = AF_UNIX;
	CHECK(!uroce_icrc_ok(&p, &ip2), "line %u: bad family accepted", lineno);
	/* The length is covered (through the IP/UDP lengths and the data). */
	p.len -= 4;
	CHECK(!uroce_icrc_ok(&p, &ip), "line %u: shorter packet accepted", lineno);
	return true;
}

static unsigned test_vectors(const char *path, bool *v4, bool *v6)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	unsigned n = 0, lineno = 0;

	if (!f) {
		CHECK(0, "cannot open %s: %s", path, strerror(errno));
		return 0;
	}
	while (getline(&line, &cap, f) > 0) {
		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (!check_vector(lineno, line)) {
			CHECK(0, "%s:%u: malformed line", path, lineno);
			continue;
		}
		if (!strncmp(line, "ipv4", 4))
			*v4 = true;
		else
			*v6 = true;
		n++;
	}
	free(line);
	fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	char path[4096];
	unsigned n;
	bool v4 = false, v6 = false;
	bool default_file = argc < 2;

	if (argc > 2) {
		fprintf(stderr, "usage: %s [VECTOR_FILE]\n", argv[0]);
		return 2;
	}
	if (!default_file) {
		snprintf(path, sizeof(path), "%s", argv[1]);
	} else if (getenv("UROCE_SRC_DIR")) {
		snprintf(path, sizeof(path), "%s/tests/data/icrc_vectors.txt",
			 getenv("UROCE_SRC_DIR"));
	} else {
		/* Run by hand from a build tree: find the file next to this source. */
		const char *slash = strrchr(__FILE__, '/');

		snprintf(path, sizeof(path), "%.*s/../data/icrc_vectors.txt",
			 slash ? (int)(slash - __FILE__) : 1, slash ? __FILE__ : ".");
	}

	test_crc_known("uroce_crc32", uroce_crc32);
	test_crc_known("uroce_crc32_sw", uroce_crc32_sw);
	test_crc_random();
	test_icrc_gather();
	test_tx_copy();
	test_icrc_hcache();
	n = test_vectors(path, &v4, &v6);
	printf("test_icrc: %u vectors from %s (%s)\n", n, path,
#ifdef UROCE_HAVE_ISAL
	       "uroce_crc32 = ISA-L"
#else
	       "uroce_crc32 = table"
#endif
	);
	CHECK(n >= (default_file ? 40u : 1u), "only %u vectors", n);
	CHECK(v4 && v6, "vectors lack IPv4 (%d) or IPv6 (%d)", v4, v6);
	printf("test_icrc: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

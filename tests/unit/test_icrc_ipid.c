/* Unit test of the standard-port ICRC check with an unknown IPv4 ID
 * (src/transport/icrc_ipid.c).
 *
 * The reference ICRC here is computed independently, bit by bit, over the
 * whole RoCEv2 pseudo-header with a given IPv4 ID - what Linux rdma_rxe
 * puts on the wire.  uroce_icrc_ok_any_ipid() must find that ID for every
 * length and ID, accept ID 0 as the plain check does, and let random
 * corruption through at about the 2^-16 rate the method implies.
 *
 * Optionally, frames captured from a real kernel rxe peer (one line per
 * frame: src dst sport dport ipid hex(BTH..ICRC)) in
 * $UROCE_SRC_DIR/tests/data/rxe_frames.txt are checked too. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "uroce.h"

#include "check.h"

static uint64_t rng = 0x1234567887654321ull;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

static uint32_t crc32_bitwise(const uint8_t *p, size_t len)
{
	uint32_t crc = ~0u;

	while (len--) {
		crc ^= *p++;
		for (int i = 0; i < 8; i++)
			crc = (crc & 1) ? (crc >> 1) ^ 0xedb88320u : crc >> 1;
	}
	return ~crc;
}

/* The ICRC as the kernel computes it: masked LRH, IPv4 header with the
 * given ID and DF, UDP, BTH with byte 4 masked, the rest. */
static bool ref_fast; /* uroce_crc32 (checked by test_icrc) instead of bitwise */

static uint32_t ref_icrc(const struct uroce_ipinfo *ip, uint16_t id, const uint8_t *bth, uint32_t n)
{
	static uint8_t m[8 + 20 + 8 + 8192];
	uint32_t udp_len = 8 + n + 4;
	uint8_t *h = m + 8;

	memset(m, 0xff, 8);
	h[0] = 0x45;
	h[1] = 0xff;
	h[2] = (uint8_t)((20 + udp_len) >> 8);
	h[3] = (uint8_t)(20 + udp_len);
	h[4] = (uint8_t)(id >> 8);
	h[5] = (uint8_t)id;
	h[6] = 0x40;
	h[7] = 0;
	h[8] = 0xff;
	h[9] = IPPROTO_UDP;
	h[10] = h[11] = 0xff;
	memcpy(h + 12, &ip->src.v4, 4);
	memcpy(h + 16, &ip->dst.v4, 4);
	h += 20;
	h[0] = (uint8_t)(ip->sport >> 8);
	h[1] = (uint8_t)ip->sport;
	h[2] = (uint8_t)(ip->dport >> 8);
	h[3] = (uint8_t)ip->dport;
	h[4] = (uint8_t)(udp_len >> 8);
	h[5] = (uint8_t)udp_len;
	h[6] = h[7] = 0xff;
	h += 8;
	memcpy(h, bth, n);
	h[4] = 0xff;
	if (ref_fast)
		return uroce_crc32(0, m, (size_t)(h - m) + n);
	return crc32_bitwise(m, (size_t)(h - m) + n);
}

static void put_icrc(uint8_t *bth, uint32_t n, uint32_t icrc)
{
	uint32_t le = htole32(icrc);

	memcpy(bth + n, &le, 4);
}

static void random_ip(struct uroce_ipinfo *ip)
{
	memset(ip, 0, sizeof(*ip));
	ip->family = AF_INET;
	ip->src.v4.s_addr = rnd();
	ip->dst.v4.s_addr = rnd();
	ip->sport = (uint16_t)(0xc000 | rnd());
	ip->dport = UR_ROCE_PORT;
}

static void test_find_id(void)
{
	static uint8_t buf[4200];
	static const uint32_t lens[] = {12, 16, 20, 28, 40, 44, 268, 1052, 1068, 4108, 4124};
	unsigned ok = 0, total = 0;

	for (unsigned li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		for (int t = 0; t < 60; t++) {
			struct uroce_ipinfo ip;
			struct uroce_pkt pkt = {.bth = buf, .len = lens[li] + 4};
			uint16_t id = (uint16_t)(t == 0 ? 0 : t == 1 ? 0xffff : rnd()), got = 1;

			random_ip(&ip);
			for (uint32_t i = 0; i < lens[li]; i++)
				buf[i] = (uint8_t)rnd();
			put_icrc(buf, lens[li], ref_icrc(&ip, id, buf, lens[li]));
			total++;
			if (uroce_icrc_ok_any_ipid(&pkt, &ip, &got) && got == id)
				ok++;
			else
				CHECK(0, "len %u id 0x%04x: not found (got 0x%04x)", lens[li], id,
				      got);
			if (id == 0)
				CHECK(uroce_icrc_ok(&pkt, &ip), "ID 0 must pass the plain check");
			else
				CHECK(!uroce_icrc_ok(&pkt, &ip), "ID 0x%04x passes the plain check",
				      id);
		}
	}
	CHECK(ok == total, "%u of %u IDs found", ok, total);
	printf("test_icrc_ipid: found the IPv4 ID of %u/%u packets (11 lengths)\n", ok, total);
}

/* Corrupt two to four distinct random bits anywhere in BTH..ICRC (except
 * BTH byte 4, which the ICRC does not cover), or one random 8-byte burst:
 * about 2^-16 of them may be accepted for some ID. */
static void test_corruption(void)
{
	static uint8_t buf[1100];
	const uint32_t n = 1052, trials = 100000;
	unsigned accepted = 0, plain = 0;
	struct uroce_ipinfo ip;
	struct uroce_pkt pkt = {.bth = buf, .len = n + 4};

	ref_fast = true;
	random_ip(&ip);
	for (uint32_t t = 0; t < trials; t++) {
		uint16_t id = (uint16_t)rnd(), got;
		uint32_t bits[4];
		int flips = t & 1 ? 2 + (int)(rnd() % 3) : 0;

		for (uint32_t i = 0; i < n; i++)
			buf[i] = (uint8_t)rnd();
		put_icrc(buf, n, ref_icrc(&ip, id, buf, n));
		if (!flips) {
			uint32_t p = 8 + rnd() % (n - 16);

			for (int k = 0; k < 8; k++)
				buf[p + k] ^= (uint8_t)(rnd() | 1);
		}
		for (int f = 0; f < flips; f++) {
			bool dup;

			do {
				bits[f] = rnd() % ((n + 4) * 8);
				dup = bits[f] / 8 == 4;
				for (int g = 0; g < f; g++)
					dup |= bits[g] == bits[f];
			} while (dup);
			buf[bits[f] / 8] ^= (uint8_t)(1u << (bits[f] % 8));
		}
		accepted += uroce_icrc_ok_any_ipid(&pkt, &ip, &got);
		plain += uroce_icrc_ok(&pkt, &ip);
	}
	ref_fast = false;
	printf("test_icrc_ipid: %u of %u corrupted packets accepted (2^-16 rate: %.1f expected)\n",
	       accepted, trials, trials / 65536.0);
	CHECK(plain == 0, "plain check accepted %u corrupted packets", plain);
	CHECK(accepted <= 10, "%u corrupted packets accepted", accepted);
}

static void test_not_v4(void)
{
	uint8_t buf[32] = {0};
	struct uroce_ipinfo ip = {.family = AF_INET6};
	struct uroce_pkt pkt = {.bth = buf, .len = 32};
	uint16_t id;

	CHECK(!uroce_icrc_ok_any_ipid(&pkt, &ip, &id), "IPv6 has no ID");
	pkt.len = 8;
	ip.family = AF_INET;
	CHECK(!uroce_icrc_ok_any_ipid(&pkt, &ip, &id), "short packet");
}

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Frames from the kernel's rdma_rxe (docs/interop.md), if the file exists. */
static void test_rxe_frames(void)
{
	char path[4096], line[20000], src[64], dst[64], hex[18000];
	const char *dir = getenv("UROCE_SRC_DIR");
	static uint8_t buf[9000];
	unsigned n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tests/data/rxe_frames.txt", dir ? dir : ".");
	f = fopen(path, "r");
	if (!f) {
		printf("test_icrc_ipid: no %s, skipping real rxe frames\n", path);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		struct uroce_ipinfo ip = {.family = AF_INET};
		unsigned sport, dport, id;
		uint16_t got = 0;
		size_t len = 0;

		if (line[0] == '#' || sscanf(line, "%63s %63s %u %u %u %17999s", src, dst, &sport,
					     &dport, &id, hex) != 6)
			continue;
		inet_pton(AF_INET, src, &ip.src.v4);
		inet_pton(AF_INET, dst, &ip.dst.v4);
		ip.sport = (uint16_t)sport;
		ip.dport = (uint16_t)dport;
		for (size_t i = 0; hex[i] && hex[i + 1] && len < sizeof(buf); i += 2)
			buf[len++] = (uint8_t)(hexval(hex[i]) << 4 | hexval(hex[i + 1]));
		struct uroce_pkt pkt = {.bth = buf, .len = (uint32_t)len};

		CHECK(uroce_icrc_ok_any_ipid(&pkt, &ip, &got) && got == id,
		      "rxe frame %u: IPv4 ID 0x%04x not found (got 0x%04x)", n, id, got);
		if (id)
			CHECK(!uroce_icrc_ok(&pkt, &ip), "rxe frame %u passes with ID 0", n);
		n++;
	}
	fclose(f);
	printf("test_icrc_ipid: %u frames captured from kernel rxe checked\n", n);
	CHECK(n > 0, "%s holds no frame", path);
}

int main(void)
{
	test_find_id();
	test_corruption();
	test_not_v4();
	test_rxe_frames();
	printf("test_icrc_ipid: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

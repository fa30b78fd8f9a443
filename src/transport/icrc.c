/* CRC32 and the RoCEv2 invariant CRC (ICRC).
 *
 * CRC32 here is the Ethernet/zlib one: reflected polynomial 0xEDB88320,
 * register preset to all ones and inverted at the end, and chainable like
 * zlib's crc32(): start from 0, feed the previous result back in.  ISA-L's
 * crc32_gzip_refl() has exactly these semantics (it inverts the seed on entry
 * and the result on exit), so it is a drop-in replacement for the table code;
 * so is crc_clmul.c's carry-less folding.
 *
 * ICRC (IBTA Vol 1 Annex A17.3.3, RoCEv2): the CRC32 of
 *   - 8 bytes of 0xFF standing in for the (absent) LRH,
 *   - the IP header with its variant fields set to all ones:
 *       IPv4: TOS (DSCP+ECN), TTL and header checksum; everything else as
 *             sent (version/IHL 0x45, total length, ID, flags/fragment
 *             offset, protocol 17, addresses).  uroce sends ID 0 with DF set.
 *       IPv6: traffic class, flow label and hop limit; the version nibble,
 *             payload length, next header 17 and addresses as sent.  The
 *             first word is therefore 0x6FFFFFFF.
 *   - the UDP header with its checksum set to 0xFFFF,
 *   - the BTH with byte 4 (FECN, BECN and the 6 reserved bits in front of
 *     the destination QP) set to 0xFF,
 *   - the rest of the packet up to, not including, the ICRC.
 * The register is preset to ones and the result inverted like any CRC32,
 * and the 32-bit result goes on the wire least significant byte first
 * (the byte order the CRC bits come out in).  This matches Linux rxe
 * (rxe_icrc.c, which stores ~crc as a little-endian word) and scapy's
 * contrib/roce.py (zlib.crc32 of the pseudo packet, packed little-endian).
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "transport/pkt.h"

#ifdef UROCE_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#define CRC32_POLY_REFL 0xedb88320u

static uint32_t crc_tab[8][256];
static pthread_once_t crc_tab_once = PTHREAD_ONCE_INIT;

/* crc_tab[k][b]: the CRC register after byte b followed by k zero bytes. */
static void crc_tab_build(void)
{
	for (uint32_t b = 0; b < 256; b++) {
		uint32_t c = b;

		for (int i = 0; i < 8; i++)
			c = (c >> 1) ^ (CRC32_POLY_REFL & (0u - (c & 1u)));
		crc_tab[0][b] = c;
	}
	for (uint32_t b = 0; b < 256; b++)
		for (int k = 1; k < 8; k++)
			crc_tab[k][b] =
			    (crc_tab[k - 1][b] >> 8) ^ crc_tab[0][crc_tab[k - 1][b] & 0xff];
}

static inline uint32_t load_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

/* Slicing-by-8: eight bytes per step through eight 1 KiB tables. */
uint32_t uroce_crc32_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc_tab_once, crc_tab_build);
	crc = ~crc;
	while (len >= 8) {
		uint32_t lo = load_le32(p) ^ crc;
		uint32_t hi = load_le32(p + 4);

		crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
		      crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^
		      crc_tab[2][(hi >> 8) & 0xff] ^ crc_tab[1][(hi >> 16) & 0xff] ^
		      crc_tab[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

/* The fastest there is: VPCLMULQDQ folding (crc_clmul.c) where the CPU has
 * it (twice ISA-L's PCLMULQDQ kernel on an AVX2 machine, which is what
 * ISA-L picks there: docs/design.md), else ISA-L, else PCLMULQDQ folding
 * or the table. */
uint32_t uroce_crc32(uint32_t crc, const void *buf, size_t len)
{
	if (!len)
		return crc; /* (a packet's empty pad, or nothing after a payload) */
	/* below 16 bytes ISA-L's kernel goes byte by byte: the table is two
	 * to three times as fast there (2 bytes: 16-17 against 49-56 TSC
	 * ticks a call; 10: 25-28 against 51-63), slower from 16 bytes on
	 * (docs/latency.md, "Session 20") - a ping-pong's SEND ONLY has 12
	 * bytes after its BTH, the piggy-backed ACK's 8 included */
	if (len < 16)
		return uroce_crc32_sw(crc, buf, len);
	if (len >= 128 && uroce_crc32_clmul_level() == 2)
		return uroce_crc32_clmul(crc, buf, len);
#ifdef UROCE_HAVE_ISAL
	return crc32_gzip_refl(crc, buf, len);
#else
	return uroce_crc32_clmul(crc, buf, len);
#endif
}

static inline void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

#define ICRC_LRH_BYTES	8
#define ICRC_IPV4_BYTES 20
#define ICRC_IPV6_BYTES 40
#define ICRC_UDP_BYTES	8
#define IPV4_DF		0x4000

/* The masked LRH, IP and UDP headers of a packet of len_no_icrc bytes
 * (BTH up to the ICRC) into ph; their length. */
static size_t icrc_prefix(uint8_t *ph, const struct uroce_ipinfo *ip, uint32_t len_no_icrc)
{
	uint32_t udp_len = ICRC_UDP_BYTES + len_no_icrc + UR_ICRC_BYTES;
	uint8_t *h = ph + ICRC_LRH_BYTES;

	memset(ph, 0xff, ICRC_LRH_BYTES);
	if (ip->family == AF_INET) {
		h[0] = 0x45; /* version 4, IHL 5 */
		h[1] = 0xff; /* TOS: masked */
		put16(h + 2, ICRC_IPV4_BYTES + udp_len);
		put16(h + 4, ip->ipid); /* identification */
		put16(h + 6, IPV4_DF);
		h[8] = 0xff; /* TTL: masked */
		h[9] = IPPROTO_UDP;
		put16(h + 10, 0xffff); /* header checksum: masked */
		memcpy(h + 12, &ip->src.v4, 4);
		memcpy(h + 16, &ip->dst.v4, 4);
		h += ICRC_IPV4_BYTES;
	} else {
		h[0] = 0x6f; /* version 6, traffic class and flow label masked */
		h[1] = 0xff;
		h[2] = 0xff;
		h[3] = 0xff;
		put16(h + 4, udp_len); /* payload length */
		h[6] = IPPROTO_UDP;
		h[7] = 0xff; /* hop limit: masked */
		memcpy(h + 8, &ip->src.v6, 16);
		memcpy(h + 24, &ip->dst.v6, 16);
		h += ICRC_IPV6_BYTES;
	}
	put16(h, ip->sport);
	put16(h + 2, ip->dport);
	put16(h + 4, udp_len);
	put16(h + 6, 0xffff); /* UDP checksum: masked */
	return (size_t)(h + ICRC_UDP_BYTES - ph);
}

/* The masked IPv4 header the ICRC starts with (LRH, IP, UDP, BTH: 48
 * bytes) is the same for every packet of a flow but for eight bytes: the
 * IPv4 ID (segment k of a GSO send) and BTH bytes 0-1 (opcode, SE, M, pad,
 * version) and 8-11 (AckReq, PSN).  CRC-32 is affine: for messages of one
 * length crc(x ^ d) = crc(x) ^ raw(d), raw being the register's change
 * with a zero preset, and raw is linear in d.  So the header's CRC is kept
 * per flow (addresses, ports, UDP length, P_Key and destination QP) with
 * those eight bytes zero, in a small per-thread cache, and each packet adds
 * raw() of its eight bytes from eight 256-entry tables: eight independent
 * look-ups instead of a CRC over 48 bytes.  IPv6 is computed in full. */
#define ICRC_HDR4   (ICRC_LRH_BYTES + ICRC_IPV4_BYTES + ICRC_UDP_BYTES + UR_BTH_BYTES)
#define ICRC_BTH4   (ICRC_LRH_BYTES + ICRC_IPV4_BYTES + ICRC_UDP_BYTES)
#define ICRC_IPID4  (ICRC_LRH_BYTES + 4)
#define ICRC_HCACHE 8
#define ICRC_NVARY  8

/* The varying bytes: their offsets in the 48-byte header. */
static const uint8_t hdr_vary[ICRC_NVARY] = {
    ICRC_IPID4,	   ICRC_IPID4 + 1, ICRC_BTH4 + 0,  ICRC_BTH4 + 1,
    ICRC_BTH4 + 8, ICRC_BTH4 + 9,  ICRC_BTH4 + 10, ICRC_BTH4 + 11,
};
static uint32_t hdr_raw[ICRC_NVARY][256];
static pthread_once_t hdr_raw_once = PTHREAD_ONCE_INIT;

static void hdr_raw_build(void)
{
	uint8_t z[ICRC_HDR4] = {0}, d[ICRC_HDR4] = {0};
	uint32_t c0 = uroce_crc32_sw(0, z, sizeof(z));

	for (int i = 0; i < ICRC_NVARY; i++) {
		hdr_raw[i][0] = 0;
		for (int bit = 0; bit < 8; bit++) {
			uint32_t r;

			d[hdr_vary[i]] = (uint8_t)(1u << bit);
			r = uroce_crc32_sw(0, d, sizeof(d)) ^ c0;
			d[hdr_vary[i]] = 0;
			for (uint32_t v = 1u << bit; v < (2u << bit); v++)
				hdr_raw[i][v] = hdr_raw[i][v ^ (1u << bit)] ^ r;
		}
	}
}

struct icrc_hcache {
	uint64_t addr; /* source << 32 | destination */
	uint64_t port; /* sport << 32 | dport << 16 | UDP length, bit 63: valid */
	uint64_t bth;  /* BTH bytes 2..7 (byte 4 masked) */
	uint32_t crc;  /* the header's CRC with the varying bytes zero */
};

static __thread struct {
	struct icrc_hcache e[ICRC_HCACHE];
	unsigned int next, last; /* the next to replace, the last hit */
} hcache;

static uint32_t icrc_head4(const struct uroce_ipinfo *ip, const uint8_t *bth, uint32_t len_no_icrc)
{
	uint64_t addr = (uint64_t)ip->src.v4.s_addr << 32 | ip->dst.v4.s_addr;
	uint64_t port = 1ull << 63 | (uint64_t)ip->sport << 32 | (uint64_t)ip->dport << 16 |
			((len_no_icrc + ICRC_UDP_BYTES + UR_ICRC_BYTES) & 0xffff);
	uint32_t w;
	uint16_t h;
	uint64_t key;
	struct icrc_hcache *e = NULL;
	/* one look-up of the thread's cache: in the shared library every
	 * access to a __thread variable is a call (__tls_get_addr), which GCC
	 * made again for each probe of the loop below (it recomputes the
	 * address rather than keep it in a register; the empty asm hides
	 * where the pointer came from) */
	__typeof__(hcache) *hc = &hcache;

	__asm__("" : "+r"(hc));

	/* (two loads, not a 6-byte memcpy read back as 8: no store stall) */
	memcpy(&w, bth + 2, 4);
	memcpy(&h, bth + 6, 2);
	key = ((uint64_t)h << 32 | w) | 0xffull << 16; /* byte 4: masked */
	for (unsigned int i = 0; i < ICRC_HCACHE; i++) {
		struct icrc_hcache *c = &hc->e[(hc->last + i) % ICRC_HCACHE];

		if (c->port == port && c->addr == addr && c->bth == key) {
			e = c;
			hc->last = (unsigned int)(c - hc->e);
			break;
		}
	}
	if (!e) {
		struct uroce_ipinfo ip0 = *ip;
		uint8_t ph[ICRC_HDR4];

		pthread_once(&hdr_raw_once, hdr_raw_build);
		ip0.ipid = 0;
		icrc_prefix(ph, &ip0, len_no_icrc);
		memcpy(ph + ICRC_BTH4, bth, UR_BTH_BYTES);
		ph[ICRC_BTH4 + 4] = 0xff;
		for (int i = 0; i < ICRC_NVARY; i++)
			ph[hdr_vary[i]] = 0;
		hc->last = hc->next++ % ICRC_HCACHE;
		e = &hc->e[hc->last];
		e->crc = uroce_crc32_sw(0, ph, sizeof(ph));
		e->addr = addr;
		e->port = port;
		e->bth = key;
	}
	return e->crc ^ hdr_raw[0][ip->ipid >> 8] ^ hdr_raw[1][ip->ipid & 0xff] ^
	       hdr_raw[2][bth[0]] ^ hdr_raw[3][bth[1]] ^ hdr_raw[4][bth[8]] ^ hdr_raw[5][bth[9]] ^
	       hdr_raw[6][bth[10]] ^ hdr_raw[7][bth[11]];
}

/* The CRC register after the masked LRH, IP and UDP headers and BTH of a
 * packet of len_no_icrc bytes (BTH up to the ICRC). */
static uint32_t icrc_head(const struct uroce_ipinfo *ip, const uint8_t *bth, uint32_t len_no_icrc)
{
	/* Masked LRH, IP header, UDP header and BTH: at most 8+40+8+12 bytes. */
	uint8_t ph[ICRC_LRH_BYTES + ICRC_IPV6_BYTES + ICRC_UDP_BYTES + UR_BTH_BYTES];
	size_t n;

	if (ip->family == AF_INET)
		return icrc_head4(ip, bth, len_no_icrc);
	n = icrc_prefix(ph, ip, len_no_icrc);
	memcpy(ph + n, bth, UR_BTH_BYTES);
	ph[n + 4] = 0xff; /* FECN, BECN, resv6: masked */
	return uroce_crc32(0, ph, n + UR_BTH_BYTES);
}

uint32_t uroce_icrc_compute(const struct uroce_ipinfo *ip, const uint8_t *bth, uint32_t len_no_icrc)
{
	return uroce_crc32(icrc_head(ip, bth, len_no_icrc), bth + UR_BTH_BYTES,
			   len_no_icrc - UR_BTH_BYTES);
}

uint32_t uroce_icrc_gather_copy(const struct uroce_ipinfo *ip, const uint8_t *hdr, uint32_t hlen,
				const struct iovec *iov, int niov, uint32_t pad, uint8_t *dst)
{
	static const uint8_t zero[3];
	uint32_t n = hlen + pad, crc;

	for (int i = 0; i < niov; i++)
		n += (uint32_t)iov[i].iov_len;
	crc = icrc_head(ip, hdr, n);
	if (hlen == UR_BTH_BYTES + UR_RETH_BYTES && niov) {
		/* the RETH and the first piece in one fold */
		crc = uroce_crc32_copy_pre(dst, iov[0].iov_base, iov[0].iov_len, hdr + UR_BTH_BYTES,
					   crc);
		if (dst)
			dst += iov[0].iov_len;
		iov++;
		niov--;
	} else {
		crc = uroce_crc32(crc, hdr + UR_BTH_BYTES, hlen - UR_BTH_BYTES);
	}
	for (int i = 0; i < niov; i++) {
		if (!dst) {
			crc = uroce_crc32(crc, iov[i].iov_base, iov[i].iov_len);
			continue;
		}
		crc = uroce_crc32_copy(dst, iov[i].iov_base, iov[i].iov_len, crc);
		dst += iov[i].iov_len;
	}
	return uroce_crc32(crc, zero, pad);
}

uint32_t uroce_icrc_gather(const struct uroce_ipinfo *ip, const uint8_t *hdr, uint32_t hlen,
			   const struct iovec *iov, int niov, uint32_t pad)
{
	return uroce_icrc_gather_copy(ip, hdr, hlen, iov, niov, pad, NULL);
}

bool uroce_icrc_ok(const struct uroce_pkt *pkt, const struct uroce_ipinfo *ip)
{
	uint32_t n, wire;

	if (pkt->len < UR_BTH_BYTES + UR_ICRC_BYTES)
		return false;
	if (ip->family != AF_INET && ip->family != AF_INET6)
		return false;
	n = pkt->len - UR_ICRC_BYTES;
	memcpy(&wire, pkt->bth + n, UR_ICRC_BYTES);
	return le32toh(wire) == uroce_icrc_compute(ip, pkt->bth, n);
}

bool uroce_icrc_ok_copy(const struct uroce_pkt *pkt, const struct uroce_ipinfo *ip,
			const struct iovec *dst, int ndst)
{
	uint32_t n = pkt->len - UR_ICRC_BYTES, wire, crc;
	const uint8_t *src = pkt->payload;

	crc = icrc_head(ip, pkt->bth, n);
	if (pkt->payload - pkt->bth == UR_BTH_BYTES + UR_RETH_BYTES && ndst) {
		/* a WRITE's RETH and the payload's first piece in one fold */
		crc = uroce_crc32_copy_pre(dst[0].iov_base, src, dst[0].iov_len,
					   pkt->bth + UR_BTH_BYTES, crc);
		src += dst[0].iov_len;
		dst++;
		ndst--;
	} else {
		crc = uroce_crc32(crc, pkt->bth + UR_BTH_BYTES,
				  (size_t)(pkt->payload - pkt->bth) - UR_BTH_BYTES);
	}
	for (int i = 0; i < ndst; i++) {
		crc = uroce_crc32_copy(dst[i].iov_base, src, dst[i].iov_len, crc);
		src += dst[i].iov_len;
	}
	crc = uroce_crc32(crc, src, (size_t)(pkt->bth + n - src));
	memcpy(&wire, pkt->bth + n, UR_ICRC_BYTES);
	return le32toh(wire) == crc;
}

/* ICRC check when the IPv4 ID is unknown: packets from kernel rxe or NICs in
 * standard-port mode (src/net/stdport.c), and GSO segments that arrive one
 * by one in native mode (IDs below 64, src/net/gso.c).
 *
 * The ICRC covers the IPv4 header with only TOS, TTL and the checksum
 * masked, so it covers the 16-bit Identification field.  uroce sends ID 0
 * (unconnected sockets, DF), but Linux rdma_rxe numbers its IDs
 * (__ip_select_ident) and a UDP socket does not see the received IP
 * header.  uroce_icrc_compute() assumes ID 0, so a packet from rxe fails it.
 *
 * CRC-32 is affine: for messages m1, m2 of equal length,
 *	crc(m1) ^ crc(m2) = crc0(m1 ^ m2)
 * where crc0 is the linear CRC (zero initial value, no final xor).  With
 * m1 the real header (ID x) and m2 the reconstructed one (ID 0), m1 ^ m2 is
 * zero except x at message bytes 12..13 (8 bytes of masked LRH, then the
 * IPv4 ID at offset 4), followed by N = len - 14 zero bytes, so
 *	D = icrc_wire ^ icrc(ID 0) = Z^N(c2(x))
 * with c2 the CRC register after the two bytes of x and Z one zero byte's
 * register step; both are linear over GF(2).  The 16 vectors b_i =
 * Z^N(c2(1 << i)) span the possible D; D has a solution x iff it lies in
 * their span, and then x is unique (CRC-32 detects every burst of 32 bits
 * or less, so b_i are independent).  Solving is a 16x32 GF(2) elimination
 * (Z^N by squaring: 16 precomputed powers), cached per N per thread.
 *
 * What this costs: a random corruption is now missed with probability
 * 2^-16 (one in 65536 corrupted packets) instead of 2^-32.  See
 * docs/interop.md.
 */
#include <pthread.h>
#include <string.h>

#include "uroce.h"

#define POLY	     0xedb88320u /* CRC-32, reflected */
#define IPID_MSG_OFF 14		 /* message bytes up to and including the ID */

static uint32_t tab[256];
static uint32_t zpow[16][32]; /* Z^(2^k) as 32 columns */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static uint32_t mat_apply(const uint32_t *m, uint32_t v)
{
	uint32_t r = 0;

	for (int j = 0; v; j++, v >>= 1)
		if (v & 1)
			r ^= m[j];
	return r;
}

static void tables_init(void)
{
	for (uint32_t b = 0; b < 256; b++) {
		uint32_t c = b;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		tab[b] = c;
	}
	/* one zero byte: s -> (s >> 8) ^ tab[s & 0xff] */
	for (int j = 0; j < 32; j++) {
		uint32_t s = 1u << j;

		zpow[0][j] = (s >> 8) ^ tab[s & 0xff];
	}
	for (int k = 1; k < 16; k++)
		for (int j = 0; j < 32; j++)
			zpow[k][j] = mat_apply(zpow[k - 1], zpow[k - 1][j]);
}

/* Z^n applied to v (n < 2^16) */
static uint32_t zero_advance(uint32_t v, uint32_t n)
{
	for (int k = 0; n; k++, n >>= 1)
		if (n & 1)
			v = mat_apply(zpow[k], v);
	return v;
}

/* register after the two bytes of x (big-endian) from a zero register */
static uint32_t crc0_id(uint16_t x)
{
	uint32_t s = tab[x >> 8];

	return (s >> 8) ^ tab[(s ^ x) & 0xff];
}

/* Echelon form of the 16 basis vectors for one N: piv[b] has its highest
 * set bit at b (or is empty); mask says which ID bits it combines. */
struct ipid_basis {
	uint32_t n;
	bool valid;
	uint32_t vec[32];
	uint16_t mask[32];
};

static void reduce(const struct ipid_basis *e, uint32_t *v, uint16_t *m)
{
	for (int b = 31; b >= 0 && *v; b--)
		if ((*v >> b & 1) && e->vec[b]) {
			*v ^= e->vec[b];
			*m ^= e->mask[b];
		}
}

static void basis_build(struct ipid_basis *e, uint32_t n)
{
	memset(e, 0, sizeof(*e));
	for (int i = 0; i < 16; i++) {
		uint32_t v = zero_advance(crc0_id((uint16_t)(1u << i)), n);
		uint16_t m = (uint16_t)(1u << i);

		reduce(e, &v, &m);
		if (v) {
			int b = 31 - __builtin_clz(v);

			e->vec[b] = v;
			e->mask[b] = m;
		}
	}
	e->n = n;
	e->valid = true;
}

bool uroce_icrc_ok_any_ipid(const struct uroce_pkt *pkt, const struct uroce_ipinfo *ip,
			    uint16_t *id)
{
	static __thread struct ipid_basis cache;
	uint32_t n, wire, d, total;
	uint16_t m = 0;

	if (ip->family != AF_INET || pkt->len < UR_BTH_BYTES + UR_ICRC_BYTES)
		return false;
	pthread_once(&init_once, tables_init);
	n = pkt->len - UR_ICRC_BYTES;
	memcpy(&wire, pkt->bth + n, UR_ICRC_BYTES);
	d = le32toh(wire) ^ uroce_icrc_compute(ip, pkt->bth, n);
	if (!d) {
		*id = 0;
		return true;
	}
	/* masked LRH 8 + IPv4 20 + UDP 8 + BTH..payload, minus bytes 0..13 */
	total = 8 + 20 + 8 + n;
	if (!cache.valid || cache.n != total - IPID_MSG_OFF)
		basis_build(&cache, total - IPID_MSG_OFF);
	reduce(&cache, &d, &m);
	if (d)
		return false;
	*id = m;
	return true;
}

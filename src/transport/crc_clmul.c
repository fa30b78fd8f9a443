/* CRC32 (the reflected IEEE 802.3 one of icrc.c) by carry-less
 * multiplication: the folding method of Intel's "Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ Instruction" (2009), written here
 * from the method, with the constants computed at start-up.
 *
 * The message is taken 16 bytes (a lane) at a time.  In the reflected
 * order, bit m of a lane loaded little-endian is the coefficient of
 * x^(127-m) counted from the lane's end; its first 8 bytes L are the high
 * half (x^127..x^64), its last 8 bytes H the low half.  A lane A moved D
 * bits further into the message is A * x^D = L * x^(64+D) + H * x^D, and
 * modulo P that is L * (x^(D+32) mod P) * x^32 + H * (x^(D-32) mod P) *
 * x^32: a 64x33-bit carry-less product each, which is again a lane in the
 * same bit order (PCLMULQDQ of a reflected 64-bit and a reflected 65-bit
 * value), added (xor) to the lane D bits later.  Four lanes (or four
 * 32-byte pairs of lanes with VPCLMULQDQ) are folded in parallel, then into
 * one, which is reduced to the 32-bit CRC by Barrett's method (reduce128);
 * the tail bytes (under 16) go on through the table code.
 *
 * uroce_crc32_copy() does the same while storing every lane it loads: one
 * pass over the bytes for a copy and its CRC.  uroce_crc32_copy_pre() takes
 * 16 bytes from elsewhere as the message's first lane (a packet's RETH in
 * front of its payload): one fold, and one call fewer per packet.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "transport/pkt.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CLMUL_X86 1
#endif

#define CRC32_POLY 0x04c11db7u /* x^32 + ..., normal order */

/* x^n mod P, normal order */
static uint32_t xpow_mod(uint32_t n)
{
	uint32_t r = 1; /* x^0 */

	while (n--)
		r = (r << 1) ^ ((r & 0x80000000u) ? CRC32_POLY : 0);
	return r;
}

static uint32_t reflect32(uint32_t v)
{
	uint32_t r = 0;

	for (int i = 0; i < 32; i++, v >>= 1)
		r = (r << 1) | (v & 1);
	return r;
}

/* The multiplier for a half whose product moves by x^e (see above). */
static uint64_t fold_k(uint32_t e)
{
	return (uint64_t)reflect32(xpow_mod(e)) << 1;
}

#ifdef CLMUL_X86

/* Barrett's mu = floor(x^64 / P), 33 bits, reflected as the reduction
 * multiplies it (bit 32 - i is the coefficient of x^i). */
static uint64_t barrett_mu(void)
{
	unsigned __int128 num = (unsigned __int128)1 << 64, p = 1ull << 32 | CRC32_POLY;
	uint64_t q = 0, m = 0;

	for (int i = 64; i >= 32; i--)
		if ((uint64_t)(num >> i) & 1) {
			num ^= p << (i - 32);
			q |= 1ull << (i - 32);
		}
	for (int i = 0; i <= 32; i++)
		if ((q >> i) & 1)
			m |= 1ull << (32 - i);
	return m;
}

struct clmul_k {
	uint64_t k128[2], k512[2], k256[2], k1024[2], k64[2], bar[2];
};
static struct clmul_k K;
static int have; /* 0 unknown, 1 none, 2 PCLMULQDQ, 3 VPCLMULQDQ (AVX2) */

static int detect(void)
{
	__builtin_cpu_init();
	K = (struct clmul_k){.k128 = {fold_k(128 + 32), fold_k(128 - 32)},
			     .k512 = {fold_k(512 + 32), fold_k(512 - 32)},
			     .k256 = {fold_k(256 + 32), fold_k(256 - 32)},
			     .k1024 = {fold_k(1024 + 32), fold_k(1024 - 32)},
			     .k64 = {fold_k(64), 0},
			     .bar = {(uint64_t)reflect32(CRC32_POLY) << 1 | 1, barrett_mu()}};
	if (__builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx2"))
		return 3;
	return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1") ? 2 : 1;
}

#define T128 __attribute__((target("pclmul,sse4.1")))
#define T256 __attribute__((target("vpclmulqdq,pclmul,avx2")))

static inline T128 __m128i fold128(__m128i a, __m128i k, __m128i next)
{
	return _mm_xor_si128(
	    _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)),
	    next);
}

static inline T256 __m256i fold256(__m256i a, __m256i k, __m256i next)
{
	return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00),
						 _mm256_clmulepi64_epi128(a, k, 0x11)),
				next);
}

static inline T128 __m128i ld(const uint8_t *p, uint8_t *d)
{
	__m128i v = _mm_loadu_si128((const __m128i *)p);

	if (d)
		_mm_storeu_si128((__m128i *)d, v);
	return v;
}

static inline T256 __m256i ld256(const uint8_t *p, uint8_t *d)
{
	__m256i v = _mm256_loadu_si256((const __m256i *)p);

	if (d)
		_mm256_storeu_si256((__m256i *)d, v);
	return v;
}

/* The CRC (zlib's form, inverted) of the message folded into lane x: its
 * 128 bits folded to 64 (x's first half moved by 64 bits onto its second),
 * the low 32 of those moved by 32 onto the rest, and the 64-bit remainder
 * reduced modulo P by Barrett's method (mu = x^64 / P): the register is
 * R xor ((R_lo * mu)_lo * P), found in its second 32-bit word.  Four
 * carry-less multiplies instead of the table code over 16 bytes (a fixed
 * cost of every CRC call, which at 1 KiB packets was about 40% of it). */
static inline T128 uint32_t reduce128(__m128i x)
{
	const __m128i k128 = _mm_loadu_si128((const __m128i *)K.k128);
	const __m128i k64 = _mm_loadu_si128((const __m128i *)K.k64);
	const __m128i bar = _mm_loadu_si128((const __m128i *)K.bar);
	const __m128i lo32 = _mm_setr_epi32(-1, 0, -1, 0);
	__m128i t;

	x = _mm_xor_si128(_mm_srli_si128(x, 8), _mm_clmulepi64_si128(x, k128, 0x10));
	t = _mm_srli_si128(x, 4);
	x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, lo32), k64, 0x00), t);
	t = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(x, lo32), bar, 0x10), lo32);
	x = _mm_xor_si128(x, _mm_clmulepi64_si128(t, bar, 0x00));
	return ~(uint32_t)_mm_extract_epi32(x, 1);
}

/* From one lane x (everything before p folded into it): lanes of 16 bytes,
 * then the tail.  d: where to copy the bytes, or NULL. */
static T128 uint32_t tail128(__m128i x, const uint8_t *p, uint8_t *d, size_t len)
{
	const __m128i k128 = _mm_loadu_si128((const __m128i *)K.k128);

	for (; len >= 16; p += 16, len -= 16, d = d ? d + 16 : NULL)
		x = fold128(x, k128, ld(p, d));
	if (d)
		memcpy(d, p, len);
	return len ? uroce_crc32_sw(reduce128(x), p, len) : reduce128(x);
}

/* len >= 64 */
static T128 uint32_t crc_pclmul(uint32_t crc, const uint8_t *p, uint8_t *d, size_t len)
{
	const __m128i k512 = _mm_loadu_si128((const __m128i *)K.k512);
	const __m128i k128 = _mm_loadu_si128((const __m128i *)K.k128);
	__m128i x0 = _mm_xor_si128(ld(p, d), _mm_cvtsi32_si128((int)~crc));
	__m128i x1 = ld(p + 16, d ? d + 16 : NULL), x2 = ld(p + 32, d ? d + 32 : NULL);
	__m128i x3 = ld(p + 48, d ? d + 48 : NULL);

	for (p += 64, len -= 64, d = d ? d + 64 : NULL; len >= 64;
	     p += 64, len -= 64, d = d ? d + 64 : NULL) {
		x0 = fold128(x0, k512, ld(p, d));
		x1 = fold128(x1, k512, ld(p + 16, d ? d + 16 : NULL));
		x2 = fold128(x2, k512, ld(p + 32, d ? d + 32 : NULL));
		x3 = fold128(x3, k512, ld(p + 48, d ? d + 48 : NULL));
	}
	x1 = fold128(x0, k128, x1);
	x2 = fold128(x1, k128, x2);
	x3 = fold128(x2, k128, x3);
	return tail128(x3, p, d, len);
}

/* Four pairs of lanes y[0..3] (the first 128 bytes, crc folded in) on
 * over p[0..len), copying to d: the 128-byte steps, then down to one
 * lane and the tail. */
static T256 uint32_t vpclmul_on(__m256i y0, __m256i y1, __m256i y2, __m256i y3, const uint8_t *p,
				uint8_t *d, size_t len)
{
	const __m256i k1024 =
	    _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)K.k1024));
	const __m256i k256 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)K.k256));
	const __m128i k128 = _mm_loadu_si128((const __m128i *)K.k128);
	__m128i x;

	for (; len >= 128; p += 128, len -= 128, d = d ? d + 128 : NULL) {
		y0 = fold256(y0, k1024, ld256(p, d));
		y1 = fold256(y1, k1024, ld256(p + 32, d ? d + 32 : NULL));
		y2 = fold256(y2, k1024, ld256(p + 64, d ? d + 64 : NULL));
		y3 = fold256(y3, k1024, ld256(p + 96, d ? d + 96 : NULL));
	}
	y1 = fold256(y0, k256, y1);
	y2 = fold256(y1, k256, y2);
	y3 = fold256(y2, k256, y3);
	/* the pair's first lane folds into its second */
	x = fold128(_mm256_castsi256_si128(y3), k128, _mm256_extracti128_si256(y3, 1));
	return tail128(x, p, d, len);
}

/* len >= 128 */
static T256 uint32_t crc_vpclmul(uint32_t crc, const uint8_t *p, uint8_t *d, size_t len)
{
	__m256i y0 =
	    _mm256_xor_si256(ld256(p, d), _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)~crc)));
	__m256i y1 = ld256(p + 32, d ? d + 32 : NULL), y2 = ld256(p + 64, d ? d + 64 : NULL);
	__m256i y3 = ld256(p + 96, d ? d + 96 : NULL);

	return vpclmul_on(y0, y1, y2, y3, p + 128, d ? d + 128 : NULL, len - 128);
}

/* The 16 bytes at pre, then p[0..len) (len >= 112), copying only p to d:
 * the message's first lane comes from pre, so a RETH and the payload
 * behind it are one fold (uroce_crc32_copy_pre). */
static T256 uint32_t crc_vpclmul_pre(uint32_t crc, const uint8_t *pre, const uint8_t *p, uint8_t *d,
				     size_t len)
{
	__m128i a =
	    _mm_xor_si128(_mm_loadu_si128((const __m128i *)pre), _mm_cvtsi32_si128((int)~crc));
	__m256i y0 = _mm256_inserti128_si256(_mm256_castsi128_si256(a), ld(p, d), 1);
	__m256i y1 = ld256(p + 16, d ? d + 16 : NULL), y2 = ld256(p + 48, d ? d + 48 : NULL);
	__m256i y3 = ld256(p + 80, d ? d + 80 : NULL);

	return vpclmul_on(y0, y1, y2, y3, p + 112, d ? d + 112 : NULL, len - 112);
}

static int level(void)
{
	if (!__atomic_load_n(&have, __ATOMIC_ACQUIRE))
		__atomic_store_n(&have, detect(), __ATOMIC_RELEASE);
	return have;
}

static uint32_t crc_any(uint32_t crc, const uint8_t *p, uint8_t *d, size_t len)
{
	int l = level();

	if (l == 3 && len >= 128)
		return crc_vpclmul(crc, p, d, len);
	if (l >= 2 && len >= 64)
		return crc_pclmul(crc, p, d, len);
	if (d)
		memcpy(d, p, len);
	return uroce_crc32_sw(crc, p, len);
}

int uroce_crc32_clmul_level(void)
{
	return level() - 1;
}

static uint32_t crc_pre(uint32_t crc, const uint8_t *pre, const uint8_t *p, uint8_t *d, size_t len)
{
	if (level() == 3 && len >= 112)
		return crc_vpclmul_pre(crc, pre, p, d, len);
	return crc_any(crc_any(crc, pre, NULL, 16), p, d, len);
}

#else /* not x86-64: the table code */

static uint32_t crc_any(uint32_t crc, const uint8_t *p, uint8_t *d, size_t len)
{
	(void)fold_k;
	if (d)
		memcpy(d, p, len);
	return uroce_crc32_sw(crc, p, len);
}

int uroce_crc32_clmul_level(void)
{
	return 0;
}

static uint32_t crc_pre(uint32_t crc, const uint8_t *pre, const uint8_t *p, uint8_t *d, size_t len)
{
	return crc_any(uroce_crc32_sw(crc, pre, 16), p, d, len);
}

#endif

uint32_t uroce_crc32_clmul(uint32_t crc, const void *buf, size_t len)
{
	return crc_any(crc, buf, NULL, len);
}

uint32_t uroce_crc32_copy(void *dst, const void *src, size_t len, uint32_t crc)
{
	return crc_any(crc, src, dst, len);
}

uint32_t uroce_crc32_copy_pre(void *dst, const void *src, size_t len, const void *pre16,
			      uint32_t crc)
{
	return crc_pre(crc, pre16, src, dst, len);
}

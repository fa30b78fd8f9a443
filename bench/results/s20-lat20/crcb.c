/* TSC ticks per call (least of 9 runs): uroce_crc32 (ISA-L / clmul) vs uroce_crc32_sw (slice-by-8) on small lengths */
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#include <x86intrin.h>
uint32_t uroce_crc32(uint32_t crc, const void *buf, size_t len);
uint32_t uroce_crc32_sw(uint32_t crc, const void *buf, size_t len);
int main(void)
{
	static uint8_t b[256];
	size_t lens[] = {2, 10, 16, 26, 40, 64, 128};
	for (int i = 0; i < 256; i++) b[i] = (uint8_t)(i * 7 + 1);
	volatile uint32_t sink = 0;
	double ma[7], mb[7];
	for (int k = 0; k < 7; k++) ma[k] = mb[k] = 1e9;
	for (int rep = 0; rep < 9; rep++)
	for (unsigned k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		size_t n = lens[k]; uint64_t t0, t1, t2; uint32_t c = 0;
		if (uroce_crc32(0, b, n) != uroce_crc32_sw(0, b, n)) printf("MISMATCH %zu\n", n);
		for (int i = 0; i < 100000; i++) c = uroce_crc32(c, b, n);
		t0 = __rdtsc();
		for (int i = 0; i < 2000000; i++) c = uroce_crc32(c, b, n);
		t1 = __rdtsc();
		for (int i = 0; i < 2000000; i++) c = uroce_crc32_sw(c, b, n);
		t2 = __rdtsc();
		sink ^= c;
		if ((t1 - t0) / 2e6 < ma[k]) ma[k] = (t1 - t0) / 2e6;
		if ((t2 - t1) / 2e6 < mb[k]) mb[k] = (t2 - t1) / 2e6;
	}
	for (unsigned k = 0; k < 7; k++)
		printf("len %3zu: uroce_crc32 %.1f ticks, slice-by-8 %.1f ticks (least of 9 runs of 2M calls)\n", lens[k], ma[k], mb[k]);
	return (int)(sink & 0);
}

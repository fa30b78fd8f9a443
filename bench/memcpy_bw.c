/*
 * memcpy_bw: single-thread memcpy bandwidth per block size, the floor for any
 * data path that copies. A loopback RoCEv2 byte is copied at least three
 * times in uroce (registered memory -> kernel in sendmsg, kernel -> user in
 * recvmmsg, packet buffer -> registered memory), so memcpy_bw / 3 bounds what
 * any copying design could reach on one core.
 *
 *   memcpy_bw [-t SECONDS_PER_SIZE] SIZE[,SIZE...]
 *
 * For each size it prints
 *   size=<B> hot_MBps=<x> stream_MBps=<x>
 * hot:    the same source and destination block again and again (in cache, as
 *         a perftest buffer of that size is);
 * stream: blocks walked through 64 MiB source and destination arrays (larger
 *         than the last-level cache, so every copy comes from and goes to DRAM).
 * MB = 10^6 bytes. Build: cc -O2 -o memcpy_bw memcpy_bw.c
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STREAM_BYTES (64ul << 20)

/* Called through a volatile pointer so the compiler cannot drop or fold the copies. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Copy size-byte blocks for about secs seconds; span is the array size walked. */
static double measure(char *dst, const char *src, size_t size, size_t span, double secs)
{
	size_t blocks = span / size ? span / size : 1, idx = 0;
	uint64_t copies = 0, batch = 1;
	double t0 = now_s(), t;
	for (;;) {
		for (uint64_t i = 0; i < batch; i++) {
			size_t off = idx * size;
			copy_fn(dst + off, src + off, size);
			if (++idx == blocks)
				idx = 0;
		}
		copies += batch;
		t = now_s() - t0;
		if (t >= secs)
			break;
		if (batch < (1u << 20) && t < secs / 100)
			batch *= 2;
	}
	return (double)copies * (double)size / t / 1e6;
}

int main(int argc, char **argv)
{
	double secs = 0.2;
	int argi = 1;
	if (argi + 1 < argc && !strcmp(argv[argi], "-t")) {
		secs = atof(argv[argi + 1]);
		argi += 2;
	}
	if (argi >= argc) {
		fprintf(stderr, "usage: memcpy_bw [-t SECONDS_PER_SIZE] SIZE[,SIZE...]\n");
		return 2;
	}
	char *src = aligned_alloc(4096, STREAM_BYTES), *dst = aligned_alloc(4096, STREAM_BYTES);
	if (!src || !dst) {
		perror("aligned_alloc");
		return 2;
	}
	memset(src, 0x5a, STREAM_BYTES);
	memset(dst, 0xa5, STREAM_BYTES); /* fault every page in before timing */

	char *list = strdup(argv[argi]), *save = NULL;
	for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t size = strtoul(tok, NULL, 0);
		if (size < 1 || size > STREAM_BYTES) {
			fprintf(stderr, "memcpy_bw: size %s out of range\n", tok);
			return 2;
		}
		double hot = measure(dst, src, size, size, secs);
		double stream = measure(dst, src, size, STREAM_BYTES, secs);
		printf("size=%zu hot_MBps=%.1f stream_MBps=%.1f\n", size, hot, stream);
		fflush(stdout);
	}
	free(list);
	free(src);
	free(dst);
	return 0;
}

/* bench/pull_bw.c - what the same-host single copy (src/transport/pull.c)
 * can reach: process_vm_readv from a child process's buffer against memcpy
 * of the same size, in this process, hot.
 *
 *   cc -O2 -o pull_bw bench/pull_bw.c && ./pull_bw [SIZE [ITERS]]
 *
 * Prints "size=N pull_MBps=X pull_us=Y memcpy_MBps=Z".  THP=1 in the
 * environment asks for transparent huge pages on both buffers.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	size_t sz = argc > 1 ? strtoul(argv[1], NULL, 0) : 65536;
	int iters = argc > 2 ? atoi(argv[2]) : 20000;
	size_t al = (sz + (2u << 20) - 1) & ~((size_t)(2u << 20) - 1);
	char *src = aligned_alloc(2u << 20, al), *dst = aligned_alloc(2u << 20, al);
	double t0, t1, t2;
	pid_t p;

	if (!src || !dst || !sz || iters < 1)
		return 2;
	if (getenv("THP")) {
		madvise(src, al, MADV_HUGEPAGE);
		madvise(dst, al, MADV_HUGEPAGE);
	}
	memset(src, 1, sz);
	memset(dst, 2, sz);
	p = fork();
	if (p == 0) {
		pause(); /* its copy of src is what the parent reads */
		_exit(0);
	}
	usleep(10000);
	t0 = now();
	for (int i = 0; i < iters; i++) {
		struct iovec l = {dst, sz}, r = {src, sz};

		if (process_vm_readv(p, &l, 1, &r, 1, 0) != (ssize_t)sz) {
			perror("process_vm_readv");
			kill(p, SIGKILL);
			return 1;
		}
	}
	t1 = now();
	for (int i = 0; i < iters; i++) {
		memcpy(dst, src, sz);
		__asm__ volatile("" ::"r"(dst) : "memory");
	}
	t2 = now();
	printf("size=%zu pull_MBps=%.0f pull_us=%.2f memcpy_MBps=%.0f\n", sz,
	       (double)sz * iters / (t1 - t0) / 1e6, (t1 - t0) / iters * 1e6,
	       (double)sz * iters / (t2 - t1) / 1e6);
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	return 0;
}

#define _GNU_SOURCE
#include <fcntl.h>
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
	return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv)
{
	size_t sz = argc > 1 ? strtoul(argv[1], 0, 0) : 65536;
	int iters = argc > 2 ? atoi(argv[2]) : 20000;
	size_t bufsz = sz * 16;
	char *src = aligned_alloc(4096, bufsz), *dst = aligned_alloc(4096, bufsz);
	memset(src, 1, bufsz);
	memset(dst, 2, bufsz);
	int pf[2];
	pipe(pf);
	fcntl(pf[1], F_SETPIPE_SZ, 1 << 20);
	int tok[2];
	pipe(tok);
	pid_t p = fork();
	if (!p) { /* responder: vmsplice iters chunks */
		close(pf[0]);
		for (int i = 0; i < iters; i++) {
			struct iovec v = {src + (i % 16) * sz, sz};
			size_t left = sz;
			char *b = v.iov_base;
			while (left) {
				v.iov_base = b;
				v.iov_len = left;
				ssize_t r = vmsplice(pf[1], &v, 1, 0);
				if (r <= 0) {
					perror("vmsplice");
					_exit(1);
				}
				left -= r;
				b += r;
			}
		}
		pause();
		_exit(0);
	}
	close(pf[1]);
	double t0 = now();
	for (int i = 0; i < iters; i++) {
		size_t left = sz;
		char *b = dst + (i % 16) * sz;
		while (left) {
			ssize_t r = read(pf[0], b, left);
			if (r <= 0) {
				perror("read");
				return 1;
			}
			left -= r;
			b += r;
		}
	}
	double t1 = now();
	/* process_vm_readv from child */
	for (int i = 0; i < iters; i++) {
		struct iovec l = {dst + (i % 16) * sz, sz}, r = {src + (i % 16) * sz, sz};
		if (process_vm_readv(p, &l, 1, &r, 1, 0) != (ssize_t)sz) {
			perror("pvr");
			return 1;
		}
	}
	double t2 = now();
	/* serial vmsplice+read in one process */
	int q[2];
	pipe(q);
	fcntl(q[1], F_SETPIPE_SZ, 1 << 20);
	for (int i = 0; i < iters; i++) {
		struct iovec v = {src + (i % 16) * sz, sz};
		if (vmsplice(q[1], &v, 1, 0) != (ssize_t)sz) {
			perror("vm2");
			return 1;
		}
		if (read(q[0], dst + (i % 16) * sz, sz) != (ssize_t)sz) {
			perror("rd2");
			return 1;
		}
	}
	double t3 = now();
	for (int i = 0; i < iters; i++) {
		memcpy(dst + (i % 16) * sz, src + (i % 16) * sz, sz);
		__asm__ volatile("" ::"r"(dst) : "memory");
	}
	double t4 = now();
	printf("size=%zu vmsplice_pipelined=%.0f pvr=%.0f vmsplice_serial=%.0f memcpy=%.0f MB/s\n",
	       sz, sz * (double)iters / (t1 - t0) / 1e6, sz * (double)iters / (t2 - t1) / 1e6,
	       sz * (double)iters / (t3 - t2) / 1e6, sz * (double)iters / (t4 - t3) / 1e6);
	kill(p, SIGKILL);
	waitpid(p, 0, 0);
	return 0;
}

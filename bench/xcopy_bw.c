/*
 * xcopy_bw: the cross-core copy floor of a shared-memory ring. Two processes
 * share SLOTS blocks of SIZE bytes; the producer copies its (hot) SIZE-byte
 * buffer into the next free block and marks it full, the consumer copies each
 * full block out into its own (hot) buffer and marks it free - the two copies
 * a same-host bulk record costs (src/net/shm.c, "Bulk records"), with
 * nothing else. Prints the consumer's rate:
 *   size=<B> slots=<n> xcopy_MBps=<x>
 *
 *   xcopy_bw [-t SECONDS] [-n SLOTS] [SIZE]     (default 1 s, 64 slots, 65536)
 * MB = 10^6 bytes. Build: cc -O2 -o xcopy_bw xcopy_bw.c
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct slot_flag {
	_Atomic uint32_t full;
	char pad[60];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	double secs = 1.0, t0, t;
	size_t size = 65536, slots = 64, i;
	struct slot_flag *flag;
	_Atomic int *stop;
	char *ring, *buf;
	uint64_t n = 0;
	int opt;
	pid_t pid;

	while ((opt = getopt(argc, argv, "t:n:")) != -1) {
		if (opt == 't')
			secs = atof(optarg);
		else if (opt == 'n')
			slots = strtoul(optarg, NULL, 0);
		else {
			fprintf(stderr, "usage: xcopy_bw [-t SECONDS] [-n SLOTS] [SIZE]\n");
			return 2;
		}
	}
	if (optind < argc)
		size = strtoul(argv[optind], NULL, 0);
	if (!size || !slots)
		return 2;
	flag = mmap(NULL, slots * sizeof(*flag) + 64 + slots * size, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (flag == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	stop = (_Atomic int *)(void *)(flag + slots);
	ring = (char *)(flag + slots) + 64;
	memset(ring, 1, slots * size); /* first-lap faults out of the way */
	buf = malloc(size);
	if (!buf)
		return 1;
	memset(buf, 2, size);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) { /* producer */
		for (i = 0; !atomic_load_explicit(stop, memory_order_relaxed);
		     i = (i + 1) % slots) {
			while (atomic_load_explicit(&flag[i].full, memory_order_acquire))
				if (atomic_load_explicit(stop, memory_order_relaxed))
					_exit(0);
			memcpy(ring + i * size, buf, size);
			atomic_store_explicit(&flag[i].full, 1, memory_order_release);
		}
		_exit(0);
	}
	t0 = now_s();
	for (i = 0;; i = (i + 1) % slots) {
		while (!atomic_load_explicit(&flag[i].full, memory_order_acquire))
			;
		memcpy(buf, ring + i * size, size);
		atomic_store_explicit(&flag[i].full, 0, memory_order_release);
		if (!(++n % 64) && (t = now_s()) - t0 >= secs)
			break;
	}
	atomic_store(stop, 1);
	waitpid(pid, NULL, 0);
	printf("size=%zu slots=%zu xcopy_MBps=%.1f\n", size, slots,
	       (double)n * size / (t - t0) / 1e6);
	return 0;
}

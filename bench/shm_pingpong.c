/*
 * shm_pingpong: the shared-memory floor for uroce's same-host wire
 * (src/net/shm.c). Two processes (fork) bounce a counter through one cache
 * line of a shared mapping, each spinning until the other's value arrives:
 * the least a one-way message between two processes can cost on this host.
 *
 *   shm_pingpong [-n ITERATIONS]
 *
 * Prints "oneway_us=<x>" (total time / 2 / iterations) and the median of 5
 * rounds. Build: cc -O2 -o shm_pingpong shm_pingpong.c
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

struct line {
	_Atomic uint64_t v;
	char pad[56];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void wait_for(struct line *l, uint64_t want)
{
	while (atomic_load_explicit(&l->v, memory_order_acquire) != want)
		__builtin_ia32_pause();
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	long n = 200000;
	double r[5];
	struct line *m;

	if (argc == 3 && !strcmp(argv[1], "-n"))
		n = atol(argv[2]);
	if (n <= 0) {
		fprintf(stderr, "usage: shm_pingpong [-n ITERATIONS]\n");
		return 2;
	}
	m = mmap(NULL, 2 * sizeof(*m), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	for (int k = 0; k < 5; k++) {
		pid_t pid;
		double t;

		atomic_store(&m[0].v, 0);
		atomic_store(&m[1].v, 0);
		pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			for (uint64_t i = 1; i <= (uint64_t)n; i++) {
				wait_for(&m[0], i);
				atomic_store_explicit(&m[1].v, i, memory_order_release);
			}
			_exit(0);
		}
		t = now_s();
		for (uint64_t i = 1; i <= (uint64_t)n; i++) {
			atomic_store_explicit(&m[0].v, i, memory_order_release);
			wait_for(&m[1], i);
		}
		r[k] = (now_s() - t) / 2 / (double)n * 1e6;
		waitpid(pid, NULL, 0);
	}
	qsort(r, 5, sizeof(r[0]), cmp);
	printf("oneway_us=%.3f min_us=%.3f\n", r[2], r[0]);
	return 0;
}

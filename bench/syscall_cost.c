/*
 * syscall_cost: what a system call costs on this machine, next to every
 * bench table (a UDP data path is counted in system calls: a machine where
 * they are cheap and memory is slow ranks its costs the other way round).
 *
 *   syscall_cost [-n CALLS]
 *
 * Prints one line:
 *   getppid_ns=<x> recv_eagain_ns=<x> sched_yield_ns=<x>
 * each the best of 25 rounds of CALLS calls (default 10000: short rounds, so
 * that on a loaded machine some round runs without being preempted): getppid(2) is
 * the cheapest system call there is, recv(2) on an empty non-blocking UDP
 * socket is what an empty poll of uroce's sockets costs, sched_yield(2) is
 * a yield nobody takes (more when another thread wants the CPU).
 * Build: cc -O2 -o syscall_cost syscall_cost.c
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

enum { GETPPID, RECV, YIELD };

static double best(int what, long calls, int fd)
{
	double b = 1e18;
	char c;

	for (int r = 0; r < 25; r++) {
		double t = now_ns();

		for (long i = 0; i < calls; i++)
			if (what == GETPPID)
				syscall(SYS_getppid);
			else if (what == RECV)
				(void)!recv(fd, &c, 1, MSG_DONTWAIT);
			else
				sched_yield();
		t = (now_ns() - t) / (double)calls;
		if (t < b)
			b = t;
	}
	return b;
}

int main(int argc, char **argv)
{
	long calls = 10000;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd, opt;

	while ((opt = getopt(argc, argv, "n:")) != -1) {
		if (opt != 'n' || (calls = atol(optarg)) <= 0) {
			fprintf(stderr, "usage: syscall_cost [-n CALLS]\n");
			return 2;
		}
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("syscall_cost: socket");
		return 1;
	}
	printf("getppid_ns=%.1f recv_eagain_ns=%.1f sched_yield_ns=%.1f\n",
	       best(GETPPID, calls, fd), best(RECV, calls, fd), best(YIELD, calls / 4, fd));
	close(fd);
	return 0;
}

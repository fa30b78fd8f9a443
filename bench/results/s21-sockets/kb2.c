// one thread: sendto A->B, recvfrom B, empty recvfrom B; TSC medians. THREAD=1: a second thread asleep (read on a pipe)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <x86intrin.h>
static int cmpu(const void *a, const void *b) { unsigned long x = *(unsigned long *)a, y = *(unsigned long *)b; return x < y ? -1 : x > y; }
static int pfd[2];
static void *sleeper(void *a) { char c; (void)a; read(pfd[0], &c, 1); return NULL; }
static int child(void *a) { (void)a; prctl(PR_SET_PDEATHSIG, SIGKILL); pause(); return 0; } /* ends with its parent */
static char stk[1 << 16];
int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 200000, conn = getenv("CONN") != NULL;
	if (getenv("FILES")) { if (clone(child, stk + sizeof stk, CLONE_FILES | SIGCHLD, NULL) < 0) perror("clone"); }
	if (getenv("THREADUNSHARE")) { pthread_t t; pipe(pfd); pthread_create(&t, NULL, sleeper, NULL); usleep(1000); unshare(CLONE_FILES); }
	if (getenv("THREAD")) { pthread_t t; pipe(pfd); pthread_create(&t, NULL, sleeper, NULL); }
	int a = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0), b = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)}, sb = sa, from;
	socklen_t l = sizeof sb;
	bind(a, (void *)&sa, sizeof sa); bind(b, (void *)&sb, sizeof sb); getsockname(b, (void *)&sb, &l);
	if (conn) connect(a, (void *)&sb, sizeof sb);
	unsigned long *ts = malloc(n * 8), *tr = malloc(n * 8), *te = malloc(n * 8);
	static char buf[65792];
	for (int i = 0; i < n; i++) {
		unsigned long t0 = __rdtsc();
		if (conn) send(a, buf, 32, 0); else sendto(a, buf, 32, 0, (void *)&sb, sizeof sb);
		unsigned long t1 = __rdtsc();
		socklen_t fl = sizeof from;
		recvfrom(b, buf, sizeof buf, MSG_DONTWAIT, (void *)&from, &fl);
		unsigned long t2 = __rdtsc();
		fl = sizeof from;
		recvfrom(b, buf, sizeof buf, MSG_DONTWAIT, (void *)&from, &fl);
		unsigned long t3 = __rdtsc();
		ts[i] = t1 - t0; tr[i] = t2 - t1; te[i] = t3 - t2;
	}
	qsort(ts, n, 8, cmpu); qsort(tr, n, 8, cmpu); qsort(te, n, 8, cmpu);
	printf("%-12s send %5lu | recv %5lu | empty %5lu (TSC medians)\n", argc > 2 ? argv[2] : "", ts[n / 2], tr[n / 2], te[n / 2]);
	return 0;
}

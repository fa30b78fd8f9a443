/*
 * sys_timing: where the time of a one-way message goes, from inside the
 * processes of a ping-pong.  An LD_PRELOAD library that times, with the TSC,
 * every socket read and send and sched_yield of the program (recvmmsg,
 * recvmsg, recvfrom, recv, sendmsg, sendmmsg, sendto, send), and the
 * turnaround: from the end of a read that returned data to the start of
 * the next send (what the program and the library do with a packet before
 * the answer leaves).  At exit it prints, per process, the count and the
 * 10th/50th/90th percentiles of each:
 *
 *   rx_ok     a read that returned data (the kernel's copy out, cmsgs)
 *   rx_empty  a read that found nothing (the cost of one look)
 *   tx        a send (on loopback it includes the delivery into the peer's
 *             socket: the softirq runs in the sender's system call)
 *   turn      read -> next send, user space only
 *   gap       an empty read -> the next read of the thread (within 20 us):
 *             the user space of one look of a busy poll
 *   yield     sched_yield (long ones ran another thread on this CPU)
 *
 * Use it on both sides of the same test, uroce and the floor alike:
 *   LD_PRELOAD=./sys_timing.so LD_LIBRARY_PATH=build/lib ib_send_lat -x 0 ...
 *   LD_PRELOAD=./sys_timing.so ./udp_pingpong server ...
 * docs/design.md ("Where a one-way message's time goes") quotes it.
 * Build: cc -O2 -shared -fPIC -o sys_timing.so sys_timing.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define NSAMP 400000

struct stat_ {
	uint64_t n;
	uint32_t v[NSAMP];
};

static struct stat_ s_rx_ok, s_rx_empty, s_tx, s_turn, s_yield, s_gap;
static __thread uint64_t last_rx_end, last_empty_end;
static double ticks_per_ns;

static int (*r_recvmmsg)(int, struct mmsghdr *, unsigned int, int, struct timespec *);
static ssize_t (*r_recvmsg)(int, struct msghdr *, int);
static ssize_t (*r_recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
static ssize_t (*r_recv)(int, void *, size_t, int);
static ssize_t (*r_sendmsg)(int, const struct msghdr *, int);
static int (*r_sendmmsg)(int, struct mmsghdr *, unsigned int, int);
static ssize_t (*r_sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
static ssize_t (*r_send)(int, const void *, size_t, int);
static int (*r_yield)(void);

static void add(struct stat_ *s, uint64_t d)
{
	uint64_t i = __atomic_fetch_add(&s->n, 1, __ATOMIC_RELAXED);

	if (i < NSAMP)
		s->v[i] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

__attribute__((constructor)) static void st_init(void)
{
	struct timespec a, b;
	uint64_t x, y;
	double ns;

	r_recvmmsg = dlsym(RTLD_NEXT, "recvmmsg");
	r_recvmsg = dlsym(RTLD_NEXT, "recvmsg");
	r_recvfrom = dlsym(RTLD_NEXT, "recvfrom");
	r_recv = dlsym(RTLD_NEXT, "recv");
	r_sendmsg = dlsym(RTLD_NEXT, "sendmsg");
	r_sendmmsg = dlsym(RTLD_NEXT, "sendmmsg");
	r_sendto = dlsym(RTLD_NEXT, "sendto");
	r_send = dlsym(RTLD_NEXT, "send");
	r_yield = dlsym(RTLD_NEXT, "sched_yield");
	clock_gettime(CLOCK_MONOTONIC, &a);
	x = __rdtsc();
	do {
		clock_gettime(CLOCK_MONOTONIC, &b);
		ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	} while (ns < 2e7);
	y = __rdtsc();
	ticks_per_ns = (double)(y - x) / ns;
}

static void print(const char *name, struct stat_ *s)
{
	uint64_t m = s->n < NSAMP ? s->n : NSAMP;
	double k = ticks_per_ns * 1000;

	if (!m)
		return;
	qsort(s->v, m, sizeof(s->v[0]), cmp_u32);
	fprintf(stderr, "  %-9s n=%9llu p10=%8.3f med=%8.3f p90=%8.3f us\n", name,
		(unsigned long long)s->n, s->v[m / 10] / k, s->v[m / 2] / k, s->v[m * 9 / 10] / k);
}

__attribute__((destructor)) static void st_fini(void)
{
	fprintf(stderr, "sys_timing pid %d:\n", (int)getpid());
	print("rx_ok", &s_rx_ok);
	print("rx_empty", &s_rx_empty);
	print("tx", &s_tx);
	print("turn", &s_turn);
	print("gap", &s_gap);
	print("yield", &s_yield);
}

static void rx_done(ssize_t r, uint64_t t0)
{
	uint64_t t1 = __rdtsc();

	if (last_empty_end && (double)(t0 - last_empty_end) < ticks_per_ns * 20000)
		add(&s_gap, t0 - last_empty_end);
	last_empty_end = 0;
	if (r > 0) {
		add(&s_rx_ok, t1 - t0);
		last_rx_end = t1;
	} else {
		add(&s_rx_empty, t1 - t0);
		last_empty_end = t1;
	}
}

/* a send within 200 us of a read answers it */
static void tx_start(uint64_t t0)
{
	if (last_rx_end && (double)(t0 - last_rx_end) < ticks_per_ns * 200000)
		add(&s_turn, t0 - last_rx_end);
	last_rx_end = 0;
}

#define TIMED_RX(call)                                                                             \
	uint64_t t0 = __rdtsc();                                                                   \
	ssize_t r = call;                                                                          \
	rx_done(r, t0);                                                                            \
	return r
#define TIMED_TX(call)                                                                             \
	uint64_t t0 = __rdtsc();                                                                   \
	tx_start(t0);                                                                              \
	ssize_t r = call;                                                                          \
	add(&s_tx, __rdtsc() - t0);                                                                \
	return r

int recvmmsg(int fd, struct mmsghdr *m, unsigned int n, int f, struct timespec *t)
{
	TIMED_RX(r_recvmmsg(fd, m, n, f, t));
}

ssize_t recvmsg(int fd, struct msghdr *m, int f)
{
	TIMED_RX(r_recvmsg(fd, m, f));
}

ssize_t recvfrom(int fd, void *b, size_t l, int f, struct sockaddr *a, socklen_t *al)
{
	TIMED_RX(r_recvfrom(fd, b, l, f, a, al));
}

ssize_t recv(int fd, void *b, size_t l, int f)
{
	TIMED_RX(r_recv(fd, b, l, f));
}

ssize_t sendmsg(int fd, const struct msghdr *m, int f)
{
	TIMED_TX(r_sendmsg(fd, m, f));
}

int sendmmsg(int fd, struct mmsghdr *m, unsigned int n, int f)
{
	TIMED_TX(r_sendmmsg(fd, m, n, f));
}

ssize_t sendto(int fd, const void *b, size_t l, int f, const struct sockaddr *a, socklen_t al)
{
	TIMED_TX(r_sendto(fd, b, l, f, a, al));
}

ssize_t send(int fd, const void *b, size_t l, int f)
{
	TIMED_TX(r_send(fd, b, l, f));
}

int sched_yield(void)
{
	uint64_t t0 = __rdtsc();
	int r = r_yield();

	add(&s_yield, __rdtsc() - t0);
	return r;
}

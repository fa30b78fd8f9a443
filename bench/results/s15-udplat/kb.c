// kernel-side micro: one thread, sendto A->B then recvmsg on B, TSC per call
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <x86intrin.h>
#include <sched.h>
static int opt(const char *k) { const char *v = getenv(k); return v && *v == '1'; }
static int cmpu(const void *a, const void *b) { unsigned long x = *(unsigned long *)a, y = *(unsigned long *)b; return x < y ? -1 : x > y; }
static int mk(int port, int wild_too) {
	int one = 1, pmtu = IP_PMTUDISC_DO, big = 8 << 20, w = -1;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	if (wild_too) {
		w = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
		setsockopt(w, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		setsockopt(w, IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
		if (bind(w, (void *)&sa, sizeof sa)) perror("bind w");
		if (opt("GRO")) setsockopt(w, SOL_UDP, UDP_GRO, &one, sizeof one);
	}
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	if (wild_too) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (opt("PMTU")) setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
	if (opt("BIG")) { setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big); setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big); }
	if (opt("GRO")) setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one);
	sa.sin_addr.s_addr = htonl(0x7f000001);
	if (bind(fd, (void *)&sa, sizeof sa)) perror("bind");
	if (opt("EPOLL")) { int ep = epoll_create1(0); struct epoll_event ev = {.events = EPOLLIN}; epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev); }
	return fd;
}
int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 100000, size = argc > 2 ? atoi(argv[2]) : 28;
	int pa = 20000 + getpid() % 10000, pb = pa + 1, wild = opt("WILD");
	int a = mk(pa, wild), b = mk(pb, wild);
	struct sockaddr_in tb = {.sin_family = AF_INET, .sin_port = htons(pb), .sin_addr.s_addr = htonl(0x7f000001)};
	if (opt("CONN")) connect(a, (void *)&tb, sizeof tb);
	unsigned long *ts = malloc(n * 8), *tr = malloc(n * 8), *te = malloc(n * 8);
	char buf[2048] = {0}, rb[65536 + 256]; char ctl[64]; struct sockaddr_in from;
	struct iovec iov = {rb, sizeof rb};
	for (int i = 0; i < n; i++) {
		unsigned long t0 = __rdtsc();
		if (opt("CONN")) send(a, buf, size, 0); else sendto(a, buf, size, 0, (void *)&tb, sizeof tb);
		unsigned long t1 = __rdtsc();
		if (opt("RECV")) recv(b, rb, sizeof rb, MSG_DONTWAIT);
		else if (opt("RFROM")) { socklen_t fl = sizeof from; recvfrom(b, rb, sizeof rb, MSG_DONTWAIT, (void *)&from, &fl); }
		else if (opt("RNONAME")) { struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1}; recvmsg(b, &mh, MSG_DONTWAIT); }
		else if (opt("RNOCTL")) { struct msghdr mh = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1}; recvmsg(b, &mh, MSG_DONTWAIT); }
		else { struct msghdr mh = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
		       if (recvmsg(b, &mh, MSG_DONTWAIT) < 0) perror("recvmsg"); }
		unsigned long t2 = __rdtsc();
		struct msghdr mh = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
		if (opt("RECV")) recv(b, rb, sizeof rb, MSG_DONTWAIT);
		else if (opt("RFROM")) { socklen_t fl = sizeof from; recvfrom(b, rb, sizeof rb, MSG_DONTWAIT, (void *)&from, &fl); }
		else recvmsg(b, &mh, MSG_DONTWAIT);
		unsigned long t3 = __rdtsc();
		ts[i] = t1 - t0; tr[i] = t2 - t1; te[i] = t3 - t2;
	}
	qsort(ts, n, 8, cmpu); qsort(tr, n, 8, cmpu); qsort(te, n, 8, cmpu);
	printf("%-28s send p10 %5lu med %5lu | recv p10 %5lu med %5lu | empty p10 %5lu med %5lu\n", argc > 3 ? argv[3] : "", ts[n/10], ts[n/2], tr[n/10], tr[n/2], te[n/10], te[n/2]);
	return 0;
}

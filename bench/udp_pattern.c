/*
 * udp_pattern: how much of the busy-poll UDP floor is the way a program
 * uses its socket.  A ping-pong like udp_pingpong (both sides spin on
 * non-blocking sockets on 127.0.0.1), where both sides use one socket
 * pattern, chosen by the mode:
 *
 *   connected  connect() + send() / recv()          (udp_pingpong's client)
 *   sendto     unconnected sendto() / recv()
 *   pktinfo    sendmsg() with an address and IP_PKTINFO / recv()
 *   uroce      sendmsg() with an address and IP_PKTINFO /
 *              recvmmsg() of 32 with IP_PKTINFO     (what uroce's endpoints do)
 *
 *   udp_pattern MODE PORT [ITERS]      runs both sides (a forked echo server)
 *
 * prints "mode=<m> median_one_way_us=<x>".  bench/ANALYSIS.md section 4
 * quotes it.  Build: cc -O2 -o udp_pattern udp_pattern.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum mode { M_CONNECTED, M_SENDTO, M_PKTINFO, M_UROCE };

static enum mode mode;
static struct sockaddr_in peer;

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void tx(int fd, char *buf, size_t len)
{
	union {
		char b[CMSG_SPACE(sizeof(struct in_pktinfo))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {
	    .msg_name = &peer, .msg_namelen = sizeof(peer), .msg_iov = &iov, .msg_iovlen = 1};
	struct in_pktinfo pi = {.ipi_spec_dst.s_addr = htonl(INADDR_LOOPBACK)};
	struct cmsghdr *cm;

	switch (mode) {
	case M_CONNECTED:
		(void)send(fd, buf, len, 0);
		return;
	case M_SENDTO:
		(void)sendto(fd, buf, len, 0, (struct sockaddr *)&peer, sizeof(peer));
		return;
	default:
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.b;
		mh.msg_controllen = sizeof(ctl.b);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		(void)sendmsg(fd, &mh, MSG_DONTWAIT);
	}
}

/* Packets received (0 when none was waiting). */
static int rx(int fd)
{
	static struct mmsghdr mm[32];
	static char data[32][2048], ctl[32][64];
	static struct iovec iov[32];
	static struct sockaddr_in from[32];

	if (mode != M_UROCE)
		return recv(fd, data[0], sizeof(data[0]), MSG_DONTWAIT) > 0;
	for (int i = 0; i < 32; i++) {
		iov[i] = (struct iovec){.iov_base = data[i], .iov_len = sizeof(data[i])};
		mm[i].msg_hdr = (struct msghdr){.msg_name = &from[i],
						.msg_namelen = sizeof(from[i]),
						.msg_iov = &iov[i],
						.msg_iovlen = 1,
						.msg_control = ctl[i],
						.msg_controllen = sizeof(ctl[i])};
	}
	{
		int n = recvmmsg(fd, mm, 32, MSG_DONTWAIT, NULL);

		return n > 0 ? n : 0;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int side(int server, int port, int iters)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
	struct sockaddr_in me = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)(server ? port : port + 1)),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char buf[20] = {0}; /* the size of a 2-byte RoCEv2 SEND_ONLY */
	int warm = 1000;
	uint64_t *t;

	if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&me, sizeof(me))) {
		perror("udp_pattern: socket");
		return 2;
	}
	peer = me;
	peer.sin_port = htons((uint16_t)(server ? port + 1 : port));
	if (mode == M_CONNECTED && connect(fd, (struct sockaddr *)&peer, sizeof(peer))) {
		perror("udp_pattern: connect");
		return 2;
	}
	if (server) {
		for (int i = 0; i < iters + warm;)
			if (rx(fd)) {
				i++;
				tx(fd, buf, sizeof(buf));
			}
		return 0;
	}
	t = malloc(sizeof(*t) * (size_t)iters);
	usleep(100000); /* the server binds */
	for (int i = 0; i < iters + warm; i++) {
		uint64_t t0 = now_ns();

		tx(fd, buf, sizeof(buf));
		while (!rx(fd))
			;
		if (i >= warm)
			t[i - warm] = now_ns() - t0;
	}
	qsort(t, (size_t)iters, sizeof(*t), cmp_u64);
	printf("mode=%s median_one_way_us=%.2f\n",
	       (const char *[]){"connected", "sendto", "pktinfo", "uroce"}[mode],
	       (double)t[iters / 2] / 2000.0);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const names[] = {"connected", "sendto", "pktinfo", "uroce"};
	int port, iters, st;
	pid_t pid;

	if (argc < 3) {
		fprintf(stderr, "usage: udp_pattern connected|sendto|pktinfo|uroce PORT [ITERS]\n");
		return 2;
	}
	for (mode = M_CONNECTED; mode <= M_UROCE; mode++)
		if (!strcmp(argv[1], names[mode]))
			break;
	if (mode > M_UROCE) {
		fprintf(stderr, "udp_pattern: unknown mode %s\n", argv[1]);
		return 2;
	}
	port = atoi(argv[2]);
	iters = argc > 3 ? atoi(argv[3]) : 30000;
	pid = fork();
	if (pid == 0)
		return side(1, port, iters);
	st = side(0, port, iters);
	waitpid(pid, NULL, 0);
	return st;
}

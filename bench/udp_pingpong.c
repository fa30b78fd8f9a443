/*
 * udp_pingpong: a busy-polling UDP ping-pong, the latency floor for anything
 * that runs over UDP sockets (uroce included: every RoCEv2 packet is one UDP
 * datagram through the same kernel path).
 *
 * Both sides spin on non-blocking sockets (recv with MSG_DONTWAIT in a loop),
 * so no sleep/wake-up is ever paid, exactly like a perftest latency test that
 * spins in ibv_poll_cq. One-way latency is reported as RTT/2.
 *
 *   udp_pingpong server [-b ADDR] -p PORT [-i IDLE_S]
 *       echoes every datagram back to its sender; exits when it receives an
 *       empty datagram or after IDLE_S seconds (default 30) without traffic.
 *   udp_pingpong client -H HOST -p PORT -s SIZE[,SIZE...] [-n ITERS] [-w WARMUP] [-T SECS]
 *       for each size: WARMUP untimed round trips, then ITERS timed ones (or as
 *       many as fit in SECS seconds, default 3, on a loaded machine); prints
 *       one line per size:
 *         size=<B> iters=<n> lost=<n> min_us=<x> median_us=<x> p99_us=<x> avg_us=<x>
 *       (all one-way, i.e. RTT/2). Sizes above the largest IPv4 UDP payload
 *       (65507 B) print "size=<B> n/a". At the end the server is told to exit.
 *
 * Build: cc -O2 -o udp_pingpong udp_pingpong.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_UDP_PAYLOAD	 65507
#define REPLY_TIMEOUT_NS 1000000000ull /* a reply lost on loopback: count and go on */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void usage(void)
{
	fprintf(stderr, "usage: udp_pingpong server [-b ADDR] -p PORT [-i IDLE_S]\n"
			"       udp_pingpong client -H HOST -p PORT -s SIZE[,SIZE...] [-n ITERS] "
			"[-w WARMUP] [-T SECS]\n");
	exit(2);
}

static int make_socket(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		die("socket");
	int buf = 4 << 20;
	/* best effort: the default is enough for one datagram in flight */
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	return fd;
}

static void resolve(const char *host, int port, struct sockaddr_in *sa)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res;
	int rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc) {
		fprintf(stderr, "udp_pingpong: %s: %s\n", host, gai_strerror(rc));
		exit(2);
	}
	*sa = *(struct sockaddr_in *)res->ai_addr;
	sa->sin_port = htons((uint16_t)port);
	freeaddrinfo(res);
}

static int run_server(const char *bind_addr, int port, int idle_s)
{
	int fd = make_socket();
	struct sockaddr_in sa;
	resolve(bind_addr, port, &sa);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind");
	static char buf[MAX_UDP_PAYLOAD + 1];
	uint64_t last = now_ns(), idle_ns = (uint64_t)idle_s * 1000000000ull;
	unsigned spins = 0;
	for (;;) {
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		ssize_t n =
		    recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&peer, &plen);
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				die("recvfrom");
			if (++spins == 4096) { /* check the idle clock now and then */
				spins = 0;
				if (now_ns() - last > idle_ns) {
					fprintf(stderr,
						"udp_pingpong server: idle for %d s, exiting\n",
						idle_s);
					return 0;
				}
			}
			continue;
		}
		if (n == 0)
			return 0; /* the client says goodbye */
		last = now_ns();
		while (sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&peer, plen) < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
			    errno != ENOBUFS)
				die("sendto");
		}
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* One round trip of size bytes; returns the RTT in ns, or 0 if the reply was lost. */
static uint64_t round_trip(int fd, char *buf, size_t size)
{
	uint64_t t0 = now_ns();
	while (send(fd, buf, size, 0) < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOBUFS)
			die("send");
	}
	for (;;) {
		ssize_t n = recv(fd, buf, MAX_UDP_PAYLOAD + 1, MSG_DONTWAIT);
		if (n == (ssize_t)size)
			return now_ns() - t0;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
		    errno != ECONNREFUSED)
			die("recv");
		/* n >= 0 of another size: a late reply of an earlier round, ignore */
		if (now_ns() - t0 > REPLY_TIMEOUT_NS)
			return 0;
	}
}

static int run_client(const char *host, int port, const char *sizes, long iters, long warmup,
		      double max_s)
{
	int fd = make_socket();
	struct sockaddr_in sa;
	resolve(host, port, &sa);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect");
	char *buf = calloc(1, MAX_UDP_PAYLOAD + 1);
	uint64_t *rtt = calloc((size_t)iters, sizeof(*rtt));
	if (!buf || !rtt)
		die("calloc");
	char *list = strdup(sizes), *save = NULL;
	for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long size = strtol(tok, NULL, 0);
		if (size < 1)
			usage();
		if (size > MAX_UDP_PAYLOAD) {
			printf("size=%ld n/a\n", size);
			fflush(stdout);
			continue;
		}
		memset(buf, 0x5a, (size_t)size);
		for (long i = 0; i < warmup; i++)
			(void)round_trip(fd, buf, (size_t)size);
		long got = 0, lost = 0;
		uint64_t deadline = now_ns() + (uint64_t)(max_s * 1e9);
		for (long i = 0; i < iters; i++) {
			if ((i & 63) == 63 && now_ns() > deadline)
				break;
			uint64_t t = round_trip(fd, buf, (size_t)size);
			if (t)
				rtt[got++] = t;
			else
				lost++;
		}
		if (!got) {
			printf("size=%ld fail lost=%ld\n", size, lost);
			fflush(stdout);
			continue;
		}
		qsort(rtt, (size_t)got, sizeof(*rtt), cmp_u64);
		double sum = 0;
		for (long i = 0; i < got; i++)
			sum += (double)rtt[i];
		long p99 = (long)((double)got * 0.99);
		if (p99 >= got)
			p99 = got - 1;
		/* one-way = RTT / 2, in microseconds */
		printf("size=%ld iters=%ld lost=%ld min_us=%.3f median_us=%.3f p99_us=%.3f "
		       "avg_us=%.3f\n",
		       size, got, lost, rtt[0] / 2000.0, rtt[got / 2] / 2000.0, rtt[p99] / 2000.0,
		       sum / (double)got / 2000.0);
		fflush(stdout);
	}
	/* goodbye: an empty datagram stops the server (twice, in case one is lost) */
	for (int i = 0; i < 2; i++)
		(void)send(fd, buf, 0, 0);
	free(list);
	free(rtt);
	free(buf);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	const char *mode = argv[1], *host = "127.0.0.1", *bind_addr = "0.0.0.0", *sizes = "2";
	int port = 0, idle_s = 30, opt;
	long iters = 10000, warmup = 1000;
	double max_s = 3.0;
	optind = 2;
	while ((opt = getopt(argc, argv, "H:b:p:s:n:w:i:T:")) != -1) {
		switch (opt) {
		case 'H':
			host = optarg;
			break;
		case 'b':
			bind_addr = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 's':
			sizes = optarg;
			break;
		case 'n':
			iters = atol(optarg);
			break;
		case 'w':
			warmup = atol(optarg);
			break;
		case 'i':
			idle_s = atoi(optarg);
			break;
		case 'T':
			max_s = atof(optarg);
			break;
		default:
			usage();
		}
	}
	if (port <= 0 || port > 65535 || iters < 1 || warmup < 0 || max_s <= 0)
		usage();
	if (!strcmp(mode, "server"))
		return run_server(bind_addr, port, idle_s);
	if (!strcmp(mode, "client"))
		return run_client(host, port, sizes, iters, warmup, max_s);
	usage();
	return 2;
}

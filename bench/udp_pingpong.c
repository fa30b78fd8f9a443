/*
 * udp_pingpong: a busy-polling UDP ping-pong, the latency floor for anything
 * that runs over UDP sockets (uroce included: every RoCEv2 packet is one UDP
 * datagram through the same kernel path).
 *
 * Both sides spin on non-blocking sockets (recv with MSG_DONTWAIT in a loop),
 * so no sleep/wake-up is ever paid, exactly like a perftest latency test that
 * spins in ibv_poll_cq. One-way latency is reported as RTT/2.
 *
 *   udp_pingpong server [-b ADDR] -p PORT [-i IDLE_S] [-o OPTS]
 *       echoes every datagram back to its sender; exits when it receives an
 *       empty datagram or after IDLE_S seconds (default 30) without traffic.
 *   udp_pingpong client -H HOST -p PORT -s SIZE[,SIZE...] [-n ITERS] [-w WARMUP] [-T SECS]
 *                       [-o OPTS]
 *       for each size: WARMUP untimed round trips, then ITERS timed ones (or as
 *       many as fit in SECS seconds, default 3, on a loaded machine); prints
 *       one line per size:
 *         size=<B> iters=<n> lost=<n> min_us=<x> median_us=<x> p99_us=<x> avg_us=<x>
 *       (all one-way, i.e. RTT/2). Sizes above the largest IPv4 UDP payload
 *       (65507 B) print "size=<B> n/a". At the end the server is told to exit.
 *
 * -o OPTS (both sides; docs/latency.md "Session 21"): uroce's socket setup
 * applied to the floor one step at a time, a comma-separated list of
 *   unconn   the client does not connect: sendto/recvfrom, as uroce
 *   buf8m    SO_{RCV,SND}BUFFORCE 8 MiB (uroce's SOCK_BUF)
 *   pmtu     IP_MTU_DISCOVER IP_PMTUDISC_DO
 *   gro      UDP_GRO on the socket read
 *   wild     a wildcard socket bound to the same port first (SO_REUSEADDR
 *            for the two binds), IP_PKTINFO, IP_RECVTOS and UDP_GRO on it,
 *            the address socket bound to the address beside it (uroce's
 *            address socket); the client binds to its own address too
 *   recvmsg  reads with recvmsg, name and control buffer (uroce's non-plain read)
 *   recvmmsg reads with recvmmsg of 32 (uroce's read outside prediction)
 *   epoll    the socket(s) in an epoll set nobody waits on
 *   epwait   ... and a second thread asleep in epoll_wait on it (1 ms slices)
 *   thread   a second thread waking every 1 ms (uroce's progress thread's slices)
 *   touch    between a read and the answer, write one byte in each cache line
 *            of 32 KiB (a turnaround's footprint, as uroce's state machines)
 *   all      unconn,buf8m,pmtu,wild
 *
 * Build: cc -O2 -pthread -o udp_pingpong udp_pingpong.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
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

enum {
	O_UNCONN = 1 << 0,
	O_BUF8M = 1 << 1,
	O_PMTU = 1 << 2,
	O_GRO = 1 << 3,
	O_WILD = 1 << 4,
	O_RECVMSG = 1 << 5,
	O_RECVMMSG = 1 << 6,
	O_EPOLL = 1 << 7,
	O_EPWAIT = 1 << 8,
	O_THREAD = 1 << 9,
	O_TOUCH = 1 << 10,
};
static unsigned int opts;
static int epfd = -1;

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void usage(void)
{
	fprintf(stderr, "usage: udp_pingpong server [-b ADDR] -p PORT [-i IDLE_S] [-o OPTS]\n"
			"       udp_pingpong client -H HOST -p PORT -s SIZE[,SIZE...] [-n ITERS] "
			"[-w WARMUP] [-T SECS] [-o OPTS]\n");
	exit(2);
}

static void parse_opts(const char *list)
{
	static const struct {
		const char *name;
		unsigned int bit;
	} tab[] = {{"unconn", O_UNCONN},
		   {"buf8m", O_BUF8M},
		   {"pmtu", O_PMTU},
		   {"gro", O_GRO},
		   {"wild", O_WILD},
		   {"recvmsg", O_RECVMSG},
		   {"recvmmsg", O_RECVMMSG},
		   {"epoll", O_EPOLL},
		   {"epwait", O_EPWAIT | O_EPOLL},
		   {"thread", O_THREAD},
		   {"touch", O_TOUCH},
		   {"all", O_UNCONN | O_BUF8M | O_PMTU | O_WILD},
		   {"none", 0}};
	char *l = strdup(list), *save = NULL;

	for (char *t = strtok_r(l, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		size_t i;

		for (i = 0; i < sizeof(tab) / sizeof(tab[0]) && strcmp(tab[i].name, t); i++)
			;
		if (i == sizeof(tab) / sizeof(tab[0])) {
			fprintf(stderr, "udp_pingpong: unknown option %s\n", t);
			exit(2);
		}
		opts |= tab[i].bit;
	}
	free(l);
}

static void set_int(int fd, int level, int name, int v)
{
	if (setsockopt(fd, level, name, &v, sizeof(v)))
		die("setsockopt");
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
	if (opts & O_BUF8M) {
		set_int(fd, SOL_SOCKET, SO_SNDBUFFORCE, 8 << 20);
		set_int(fd, SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20);
	}
	if (opts & O_PMTU)
		set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
	if (opts & O_GRO)
		set_int(fd, SOL_UDP, UDP_GRO, 1);
	return fd;
}

static void *side_thread(void *arg)
{
	struct epoll_event ev[4];

	(void)arg;
	for (;;) {
		if (opts & O_EPWAIT) {
			/* asleep on the sockets; a datagram the main thread reads
			 * first wakes it and it finds nothing to do */
			if (epoll_wait(epfd, ev, 4, 1) > 0)
				usleep(0);
		} else {
			usleep(1000);
		}
	}
	return NULL;
}

/* A socket bound to sa, set up as -o says (wild: uroce's address socket
 * beside a wildcard one on the same port; sa's port 0 picks one). */
static int bind_socket(struct sockaddr_in *sa)
{
	int fd, any = -1;

	if (opts & O_WILD) {
		struct sockaddr_in w = *sa;
		socklen_t wl = sizeof(w);

		any = make_socket();
		w.sin_addr.s_addr = htonl(INADDR_ANY);
		set_int(any, SOL_SOCKET, SO_REUSEADDR, 1);
		set_int(any, IPPROTO_IP, IP_PKTINFO, 1);
		set_int(any, IPPROTO_IP, IP_RECVTOS, 1);
		set_int(any, SOL_UDP, UDP_GRO, 1);
		if (bind(any, (struct sockaddr *)&w, sizeof(w)) ||
		    getsockname(any, (struct sockaddr *)&w, &wl))
			die("bind wildcard");
		sa->sin_port = w.sin_port;
	}
	fd = make_socket();
	if (opts & O_WILD)
		set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	if (bind(fd, (struct sockaddr *)sa, sizeof(*sa)) < 0)
		die("bind");
	if (opts & O_WILD) {
		set_int(fd, SOL_SOCKET, SO_REUSEADDR, 0);
		set_int(any, SOL_SOCKET, SO_REUSEADDR, 0);
	}
	if (opts & O_EPOLL) {
		struct epoll_event ev = {.events = EPOLLIN};

		epfd = epoll_create1(0);
		if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ||
		    (any >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, any, &ev)))
			die("epoll");
	}
	if (opts & (O_EPWAIT | O_THREAD)) {
		pthread_t t;

		if (pthread_create(&t, NULL, side_thread, NULL))
			die("pthread_create");
	}
	return fd;
}

/* One read as -o says; peer (may be NULL) gets the source. */
static ssize_t rx(int fd, char *buf, size_t len, struct sockaddr_in *peer, socklen_t *plen)
{
	if (opts & (O_RECVMSG | O_RECVMMSG)) {
		static struct mmsghdr mm[32];
		static struct iovec iov[32];
		static struct sockaddr_in from[32];
		static union {
			char b[64];
			struct cmsghdr align;
		} ctl[32];
		int n = opts & O_RECVMMSG ? 32 : 1;

		for (int i = 0; i < n; i++) {
			iov[i] = (struct iovec){.iov_base = buf, .iov_len = len};
			mm[i].msg_hdr = (struct msghdr){.msg_name = &from[i],
							.msg_namelen = sizeof(from[i]),
							.msg_iov = &iov[i],
							.msg_iovlen = 1,
							.msg_control = ctl[i].b,
							.msg_controllen = sizeof(ctl[i].b)};
		}
		ssize_t r = opts & O_RECVMMSG ? recvmmsg(fd, mm, 32, MSG_DONTWAIT, NULL)
					      : recvmsg(fd, &mm[0].msg_hdr, MSG_DONTWAIT);
		if (r <= 0)
			return r;
		if (opts & O_RECVMMSG)
			r = mm[0].msg_len;
		if (peer) {
			*peer = from[0];
			*plen = sizeof(from[0]);
		}
		return r;
	}
	if (peer)
		return recvfrom(fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)peer, plen);
	return recv(fd, buf, len, MSG_DONTWAIT);
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

/* -o touch: a turnaround's memory footprint (32 KiB, one write a line) */
static void touch(void)
{
	static volatile char mem[32 << 10];

	if (opts & O_TOUCH)
		for (size_t i = 0; i < sizeof(mem); i += 64)
			mem[i]++;
}

static int run_server(const char *bind_addr, int port, int idle_s)
{
	struct sockaddr_in sa;
	resolve(bind_addr, port, &sa);
	int fd = bind_socket(&sa);
	static char buf[MAX_UDP_PAYLOAD + 1];
	uint64_t last = now_ns(), idle_ns = (uint64_t)idle_s * 1000000000ull;
	unsigned spins = 0;
	for (;;) {
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		ssize_t n = rx(fd, buf, sizeof(buf), &peer, &plen);
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
		touch();
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

static struct sockaddr_in server_sa; /* -o unconn: sendto this */

/* One round trip of size bytes; returns the RTT in ns, or 0 if the reply was lost. */
static uint64_t round_trip(int fd, char *buf, size_t size)
{
	uint64_t t0 = now_ns();
	touch(); /* the answer's turnaround, in the round trip as the server's */
	while ((opts & O_UNCONN
		    ? sendto(fd, buf, size, 0, (struct sockaddr *)&server_sa, sizeof(server_sa))
		    : send(fd, buf, size, 0)) < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOBUFS)
			die("send");
	}
	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = rx(fd, buf, MAX_UDP_PAYLOAD + 1, opts & O_UNCONN ? &from : NULL, &fl);
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
	struct sockaddr_in sa, me;
	socklen_t ml = sizeof(me);
	int fd;

	resolve(host, port, &sa);
	server_sa = sa;
	/* the address the route to the server leaves from (-o wild binds it) */
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(fd, (struct sockaddr *)&me, &ml))
		die("route");
	close(fd);
	me.sin_port = 0;
	if (opts & (O_WILD | O_UNCONN | O_EPOLL | O_THREAD)) {
		fd = bind_socket(&me);
	} else {
		fd = make_socket();
	}
	if (!(opts & O_UNCONN) && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
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
		(void)sendto(fd, buf, 0, 0, (struct sockaddr *)&server_sa, sizeof(server_sa));
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
	while ((opt = getopt(argc, argv, "H:b:p:s:n:w:i:T:o:")) != -1) {
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
		case 'o':
			parse_opts(optarg);
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

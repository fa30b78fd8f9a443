/*
 * udp_blast: the ceiling of any UDP-socket bulk transport on this machine.
 * A sender and a receiver (forked) on 127.0.0.1, or on the addresses given,
 * move BYTES with no RDMA work at all, the way uroce's data path uses its
 * sockets, or the way qperf's tcp_bw uses TCP:
 *
 *   udp  sendmmsg() of GSO datagrams (UDP_SEGMENT, SEG bytes a segment,
 *        64 KiB a datagram, 16 datagrams a call) from one user buffer; the
 *        receiver reads with recvmmsg() of 16 and UDP_GRO; a credit of the
 *        bytes received goes back every 256 KiB and the sender keeps at most
 *        WINDOW bytes unacknowledged (uroce's ACK clock; a credit that does
 *        not come within 20 ms counts the window as lost and goes on).
 *   tcp  write() of 64 KiB on one TCP connection, read() of 64 KiB.
 *
 * --zerocopy sends with MSG_ZEROCOPY (SO_ZEROCOPY; completions read from the
 * error queue after every call; udp only).
 * --copy makes the receiver copy every datagram (or read) once more into a
 * 64 MiB destination, the pass an RDMA receiver needs to land the payload
 * in the MR when the socket cannot place it (TCP's own copy-out is already
 * that pass: tcp's --copy is the cost of a receive that could not place).
 * --land (udp only) has the kernel's copy land each segment's payload in
 * the destination: every datagram is read with iovecs that scatter
 * each segment into a 28-byte header buffer (BTH + RETH), its payload at
 * the destination's next offset and a 4-byte trailer (the ICRC; one
 * 32-byte iovec takes a trailer and the next segment's header) - what a
 * receiver predicting a WRITE stream's next GRO batch would do - with
 * --crc the CRC then read over header + landed payload + trailer; --vlen N
 * reads N such datagrams a call (recvmmsg, default 16; 1: recvmsg).
 * --tx gather: the sender's iovecs are those of uroce's send from registered
 * memory (gso.c): a segment's payload one iovec, its trailer and the next
 * segment's header another (the bytes as without it); --tx copy (with
 * --crc): each segment copied from a 1 MiB source into the batch by the
 * copy fused with its CRC, one iovec a datagram.
 * --dst-kb K: the destination's size (default 64 MiB, DRAM; ib_write_bw
 * writes one 64 KiB buffer over and over, in cache).
 * --crc (udp only; built with -DBLAST_CRC and uroce's crc_clmul.c, below)
 * adds the one pass RoCEv2 cannot drop: a CRC-32 over every segment on
 * send (the ICRC) and over every received segment (its check) - with
 * --copy fused with the copy, as uroce's receive placement does; without,
 * a read pass over the bytes the kernel landed in its receive buffers (a
 * bound: a receiver that lets the kernel place the payload in the MR pays
 * for the iovecs that scatter it, which --land measures).
 *
 *   udp_blast udp|tcp [--copy] [--land] [--vlen N] [--dst-kb K] [--tx gather|copy]
 *             [--zerocopy] [--crc] [--seg N] [--mb MB] [--window KB]
 *             [--port P] [--src A] [--dst A] [--rx-ns PATH] [--tx-ns PATH]
 *
 * --rx-ns / --tx-ns: the network namespace (/run/netns/NAME) the receiver /
 * the sender runs in (setns), for a veth pair between two namespaces.
 *
 * prints "mode=... MBps=<x> cpu_s_per_GB=<y> snd_cpu=<s> rcv_cpu=<s>
 * lost_windows=<n> rcvd=<bytes> sent=<bytes>" (MB = 10^6 B; CPU = user +
 * system of both processes).  A UDP receiver that hears nothing for 2 s
 * ends with what it got (lost datagrams).
 * Build: cc -O2 -o udp_blast udp_blast.c
 *   with --crc: cc -O2 -DBLAST_CRC -Isrc -Isrc/include -o udp_blast \
 *               bench/udp_blast.c src/transport/crc_clmul.c   (from the repo)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLAST_DGRAM  65000u /* payload of one GSO datagram, at most */
#define BLAST_VLEN   16
#define BLAST_DST    opt.dst_bytes /* --dst-kb; 64 MiB */
#define BLAST_CREDIT (256u << 10)

#ifdef BLAST_CRC
#include "transport/pkt.h"

/* the table CRC crc_clmul.c finishes with (reflected IEEE 802.3) */
uint32_t uroce_crc32_sw(uint32_t crc, const void *buf, size_t len)
{
	static uint32_t tab[256];
	const uint8_t *p = buf;

	if (!tab[1]) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
			tab[i] = c;
		}
	}
	crc = ~crc; /* as uroce's (icrc.c): the folding code's tail depends on it */
	while (len--)
		crc = tab[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* the CRC of each seg-sized piece of buf, into dst too when given */
static uint32_t blast_crc(char *dst, const char *buf, size_t len, size_t seg)
{
	uint32_t x = 0;

	for (size_t off = 0; off < len; off += seg) {
		size_t n = len - off < seg ? len - off : seg;

		x += dst ? uroce_crc32_copy(dst + off, buf + off, n, 0xffffffffu)
			 : uroce_crc32_clmul(0xffffffffu, buf + off, n);
	}
	return x;
}

/* --land: the CRC of one more piece of a segment */
static uint32_t crc_piece(uint32_t x, const void *p, size_t n)
{
	return uroce_crc32_clmul(x, p, n);
}
#else
static uint32_t crc_piece(uint32_t x, const void *p, size_t n)
{
	(void)p, (void)n;
	return x;
}

static uint32_t blast_crc(char *dst, const char *buf, size_t len, size_t seg)
{
	(void)dst, (void)buf, (void)len, (void)seg;
	return 0;
}
#endif

/* what the CRCs came to, so the compiler keeps them */
static volatile uint32_t crc_sink;

static struct {
	int tcp, copy, zc, crc, land, tx; /* tx: 0 one buffer, 1 gather, 2 copy */
	unsigned int seg, port, vlen;
	uint64_t bytes, window, dst_bytes;
	const char *src, *dst;
} opt = {.seg = 4136,
	 .vlen = BLAST_VLEN,
	 .port = 29999,
	 .bytes = 2000ull << 20,
	 .window = 4u << 20,
	 .dst_bytes = 64u << 20,
	 .src = "127.0.0.1",
	 .dst = "127.0.0.1"};

/* --copy: the receiver's destination, touched before it says it is ready
 * (a first touch of 64 MiB under way would look like loss to the sender) */
static char *rx_dst;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_s(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static struct sockaddr_in addr(const char *a, unsigned int port)
{
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(port)};

	if (inet_pton(AF_INET, a, &s.sin_addr) != 1) {
		fprintf(stderr, "udp_blast: bad address %s\n", a);
		exit(2);
	}
	return s;
}

static void bufs(int fd)
{
	int sz = 8 << 20;

	/* as uroce's endpoints: ask, forced where allowed */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
}

/* the receiver's socket: UDP GRO, and 2 s of nothing ends the run */
static void rx_setup(int fd)
{
	int on = 1;

	if (setsockopt(fd, IPPROTO_UDP, UDP_GRO, &on, sizeof(on)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){.tv_sec = 2},
		       sizeof(struct timeval)))
		die("UDP_GRO");
}

#define LAND_HDR    28u
#define LAND_TRL    4u
#define LAND_MAXSEG (BLAST_DGRAM / 64)

/* --land: the kernel lands each segment's payload at the destination's
 * next offset (the headers and trailers in buffers of their own) */
static uint64_t udp_rx_land(int fd, struct sockaddr_in *back)
{
	static char hdr[BLAST_VLEN][LAND_MAXSEG + 1][LAND_HDR + LAND_TRL];
	static struct iovec iov[BLAST_VLEN][2 * LAND_MAXSEG + 1];
	struct mmsghdr mm[BLAST_VLEN];
	unsigned int nseg = BLAST_DGRAM / opt.seg, pay = opt.seg - LAND_HDR - LAND_TRL;
	uint64_t got = 0, credited = 0, doff = 0;
	int i, n;

	rx_setup(fd);
	while (got < opt.bytes) {
		uint64_t o = doff;

		for (i = 0; i < (int)opt.vlen; i++) {
			if (o + (uint64_t)nseg * pay > BLAST_DST)
				o = 0;
			/* segment k's trailer and k+1's header are adjacent in the
			 * datagram: one iovec of 32 bytes (as gso.c sends them) */
			iov[i][0] = (struct iovec){hdr[i][0], LAND_HDR};
			for (unsigned int k = 0; k < nseg; k++) {
				iov[i][2 * k + 1] = (struct iovec){rx_dst + o, pay};
				iov[i][2 * k + 2] =
				    (struct iovec){hdr[i][k + 1], LAND_TRL + LAND_HDR};
				o += pay;
			}
			mm[i] = (struct mmsghdr){
			    .msg_hdr = {.msg_iov = iov[i], .msg_iovlen = 2 * nseg + 1}};
		}
		if (opt.vlen == 1) {
			ssize_t r = recvmsg(fd, &mm[0].msg_hdr, 0);

			n = r < 0 ? -1 : 1;
			if (r >= 0)
				mm[0].msg_len = (unsigned int)r;
		} else {
			n = recvmmsg(fd, mm, opt.vlen, MSG_WAITFORONE, NULL);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			die("recvmsg");
		}
		for (i = 0; i < n; i++) {
			unsigned int len = mm[i].msg_len;

			for (unsigned int k = 0; opt.crc && k * opt.seg < len; k++) {
				unsigned int sl =
				    len - k * opt.seg < opt.seg ? len - k * opt.seg : opt.seg;
				/* a short last segment fills what comes first */
				unsigned int hl = sl < LAND_HDR ? sl : LAND_HDR;
				unsigned int pl = sl - hl < pay ? sl - hl : pay;
				const char *h = k ? hdr[i][k] + LAND_TRL : hdr[i][0];
				uint32_t x = 0xffffffffu;

				/* the header, the landed payload, the trailer */
				x = crc_piece(x, h, hl);
				x = crc_piece(x, iov[i][2 * k + 1].iov_base, pl);
				x = crc_piece(x, hdr[i][k + 1], sl - hl - pl);
				crc_sink += x;
			}
			doff = (char *)iov[i][1].iov_base - rx_dst + (uint64_t)nseg * pay;
			got += len;
		}
		if (got - credited >= BLAST_CREDIT || got >= opt.bytes) {
			credited = got;
			sendto(fd, &got, sizeof(got), 0, (struct sockaddr *)back, sizeof(*back));
		}
	}
	return got;
}

/* receiver: returns its CPU seconds through the pipe */
static uint64_t udp_rx(int fd, struct sockaddr_in *back)
{
	static char buf[BLAST_VLEN][65536];
	struct iovec iov[BLAST_VLEN];
	struct mmsghdr mm[BLAST_VLEN];
	char *dst = rx_dst;
	uint64_t got = 0, credited = 0, doff = 0;
	int i, n;

	rx_setup(fd);
	while (got < opt.bytes) {
		for (i = 0; i < BLAST_VLEN; i++) {
			iov[i] = (struct iovec){buf[i], sizeof(buf[i])};
			mm[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[i], .msg_iovlen = 1}};
		}
		n = recvmmsg(fd, mm, BLAST_VLEN, MSG_WAITFORONE, NULL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break; /* 2 s of nothing: the sender is done, the rest lost */
			die("recvmmsg");
		}
		for (i = 0; i < n; i++) {
			unsigned int len = mm[i].msg_len;

			if (dst) {
				if (doff + len > BLAST_DST)
					doff = 0;
				if (opt.crc)
					crc_sink += blast_crc(dst + doff, buf[i], len, opt.seg);
				else
					memcpy(dst + doff, buf[i], len);
				doff += len;
			} else if (opt.crc) {
				crc_sink += blast_crc(NULL, buf[i], len, opt.seg);
			}
			got += len;
		}
		if (got - credited >= BLAST_CREDIT || got >= opt.bytes) {
			credited = got;
			sendto(fd, &got, sizeof(got), 0, (struct sockaddr *)back, sizeof(*back));
		}
	}
	return got;
}

/* MSG_ZEROCOPY: read the completions (the buffer is never rewritten, so
 * only the kernel's accounting waits for them) */
static void zc_reap(int fd)
{
	char ctl[256];
	struct msghdr mh = {.msg_control = ctl, .msg_controllen = sizeof(ctl)};

	while (recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) >= 0)
		mh.msg_controllen = sizeof(ctl);
}

/* --tx: datagram n of the batch (its one iovec set) as uroce's gather
 * sends it, or filled by the copy fused with the CRC */
static void tx_shape(struct msghdr *mh, int n, uint64_t sent)
{
	static struct iovec g[BLAST_VLEN][2 * LAND_MAXSEG + 1];
	static char src[1 << 20];
	char *b = mh->msg_iov[0].iov_base;
	unsigned int len = (unsigned int)mh->msg_iov[0].iov_len, ns = 0;

	if (opt.crc && opt.tx == 1)
		crc_sink += blast_crc(NULL, b, len, opt.seg); /* read in place */
	for (unsigned int off = 0; off < len; off += opt.seg, ns++) {
		unsigned int sl = len - off < opt.seg ? len - off : opt.seg;

		if (opt.tx == 2) {
			crc_sink += blast_crc(b + off, src + (sent + off) % (sizeof(src) - opt.seg),
					      sl, opt.seg);
			continue;
		}
		if (sl != opt.seg) /* a short last segment: one piece */
			break;
		g[n][2 * ns] = (struct iovec){b + off - (ns ? LAND_TRL : 0),
					      ns ? LAND_TRL + LAND_HDR : LAND_HDR};
		g[n][2 * ns + 1] =
		    (struct iovec){b + off + LAND_HDR, opt.seg - LAND_HDR - LAND_TRL};
	}
	if (opt.tx == 2)
		return;
	/* the last full segment's trailer, and the rest of the datagram */
	g[n][2 * ns] = (struct iovec){b + (size_t)ns * opt.seg - (ns ? LAND_TRL : 0),
				      len - ns * opt.seg + (ns ? LAND_TRL : 0)};
	mh->msg_iov = g[n];
	mh->msg_iovlen = 2 * ns + 1;
}

static int udp_tx(int fd, struct sockaddr_in *to)
{
	static char buf[BLAST_VLEN * BLAST_DGRAM];
	union {
		char b[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl[BLAST_VLEN];
	struct iovec iov[BLAST_VLEN];
	struct mmsghdr mm[BLAST_VLEN];
	unsigned int dgram = BLAST_DGRAM / opt.seg * opt.seg;
	uint64_t sent = 0, acked = 0;
	int i, n, lost = 0;

	for (size_t k = 0; k < sizeof(buf); k++) /* segments differ: --crc's sums mean something */
		buf[k] = (char)((k * 2654435761u) >> 24);
	while (sent < opt.bytes) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t a;

		while (recv(fd, &a, sizeof(a), MSG_DONTWAIT) == sizeof(a))
			acked = a > acked ? a : acked;
		if (sent - acked + dgram > opt.window) {
			if (poll(&p, 1, 20) == 0) {
				lost++; /* the receiver dropped: count it, go on */
				acked = sent;
			}
			continue;
		}
		for (n = 0;
		     n < BLAST_VLEN && sent - acked + dgram <= opt.window && sent < opt.bytes;
		     n++) {
			uint64_t left = opt.bytes - sent;
			unsigned int len = left < dgram ? (unsigned int)left : dgram;
			struct cmsghdr *c = &ctl[n].align;

			iov[n] = (struct iovec){buf + (size_t)n * BLAST_DGRAM, len};
			mm[n] = (struct mmsghdr){.msg_hdr = {.msg_name = to,
							     .msg_namelen = sizeof(*to),
							     .msg_iov = &iov[n],
							     .msg_iovlen = 1,
							     .msg_control = ctl[n].b,
							     .msg_controllen = sizeof(ctl[n].b)}};
			c->cmsg_level = IPPROTO_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
			*(uint16_t *)CMSG_DATA(c) = (uint16_t)opt.seg;
			if (opt.tx)
				tx_shape(&mm[n].msg_hdr, n, sent);
			else if (opt.crc)
				crc_sink += blast_crc(NULL, iov[n].iov_base, len, opt.seg);
			sent += len;
		}
		for (i = 0; i < n;) {
			int r =
			    sendmmsg(fd, mm + i, (unsigned int)(n - i), opt.zc ? MSG_ZEROCOPY : 0);

			if (opt.zc)
				zc_reap(fd);
			if (r < 0) {
				if (errno == EINTR || errno == ENOBUFS || errno == EAGAIN)
					continue;
				die("sendmmsg");
			}
			i += r;
		}
	}
	return lost;
}

static uint64_t tcp_rx(int fd)
{
	static char buf[65536];
	char *dst = rx_dst;
	uint64_t got = 0, doff = 0;

	while (got < opt.bytes) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r <= 0)
			die("read");
		if (dst) {
			if (doff + (uint64_t)r > BLAST_DST)
				doff = 0;
			memcpy(dst + doff, buf, (size_t)r);
			doff += (uint64_t)r;
		}
		got += (uint64_t)r;
	}
	if (write(fd, &got, 1) != 1) /* the end: the sender waits for it */
		die("write end");
	return got;
}

static void tcp_tx(int fd)
{
	static char buf[65536];
	uint64_t sent = 0;
	char c;

	memset(buf, 0x5a, sizeof(buf));
	while (sent < opt.bytes) {
		size_t len = opt.bytes - sent < sizeof(buf) ? opt.bytes - sent : sizeof(buf);
		ssize_t r = write(fd, buf, len);

		if (r <= 0)
			die("write");
		sent += (uint64_t)r;
	}
	if (read(fd, &c, 1) != 1)
		die("read end");
}

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: udp_blast udp|tcp [--copy] [--land] [--vlen N] [--dst-kb K] [--tx gather|copy] "
	    "[--zerocopy] [--crc] [--seg N] [--mb "
	    "MB] [--window KB] "
	    "[--port P] [--src A] [--dst A] [--rx-ns PATH] [--tx-ns PATH]\n");
	exit(2);
}

static void enter_ns(const char *path)
{
	int fd;

	if (!path)
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET))
		die(path);
	close(fd);
}

static int make_socket(const struct sockaddr_in *at)
{
	int fd = socket(AF_INET, opt.tcp ? SOCK_STREAM : SOCK_DGRAM, 0), one = 1;

	if (fd < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (!opt.tcp)
		bufs(fd);
	if (at && bind(fd, (const struct sockaddr *)at, sizeof(*at)))
		die("bind");
	return fd;
}

int main(int argc, char **argv)
{
	const char *rx_ns = NULL, *tx_ns = NULL;
	struct sockaddr_in rx, tx;
	int i, pfd[2], rdy[2], tfd, lost = 0;
	struct {
		double cpu;
		uint64_t got;
		uint32_t crc;
	} res;
	double t0, t1, rcpu, scpu;
	char c;
	pid_t pid;

	if (argc < 2)
		usage();
	opt.tcp = !strcmp(argv[1], "tcp");
	if (!opt.tcp && strcmp(argv[1], "udp"))
		usage();
	for (i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--copy")) {
			opt.copy = 1;
			continue;
		}
		if (!strcmp(a, "--land")) {
			opt.land = 1;
			opt.copy = 1; /* the destination */
			continue;
		}
		if (!strcmp(a, "--zerocopy")) {
			opt.zc = 1;
			continue;
		}
		if (!strcmp(a, "--crc")) {
#ifndef BLAST_CRC
			fprintf(stderr, "udp_blast: --crc needs a build with -DBLAST_CRC\n");
			exit(2);
#endif
			opt.crc = 1;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--seg"))
			opt.seg = (unsigned int)atoi(v);
		else if (!strcmp(a, "--mb"))
			opt.bytes = (uint64_t)atoll(v) * 1000000ull;
		else if (!strcmp(a, "--window"))
			opt.window = (uint64_t)atoll(v) << 10;
		else if (!strcmp(a, "--dst-kb"))
			opt.dst_bytes = (uint64_t)atoll(v) << 10;
		else if (!strcmp(a, "--tx") && (!strcmp(v, "gather") || !strcmp(v, "copy")))
			opt.tx = !strcmp(v, "gather") ? 1 : 2;
		else if (!strcmp(a, "--vlen"))
			opt.vlen = (unsigned int)atoi(v);
		else if (!strcmp(a, "--port"))
			opt.port = (unsigned int)atoi(v);
		else if (!strcmp(a, "--src"))
			opt.src = v;
		else if (!strcmp(a, "--dst"))
			opt.dst = v;
		else if (!strcmp(a, "--rx-ns"))
			rx_ns = v;
		else if (!strcmp(a, "--tx-ns"))
			tx_ns = v;
		else
			usage();
	}
	if (opt.seg < 64 || opt.seg > 9000 || !opt.bytes || (opt.crc && opt.tcp) ||
	    ((opt.land || opt.tx) && opt.tcp) || (opt.tx == 2 && !opt.crc) || opt.vlen < 1 ||
	    opt.vlen > BLAST_VLEN || opt.dst_bytes < BLAST_DGRAM)
		usage();
	rx = addr(opt.dst, opt.port);
	tx = addr(opt.src, opt.port + 1);
	if (pipe(pfd) || pipe(rdy))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		struct {
			double cpu;
			uint64_t got;
			uint32_t crc;
		} res;
		int rfd;

		enter_ns(rx_ns);
		if (opt.copy) {
			rx_dst = malloc(BLAST_DST);
			if (!rx_dst)
				die("malloc");
			memset(rx_dst, 0, BLAST_DST);
		}
		rfd = make_socket(&rx);
		if (opt.tcp && listen(rfd, 1))
			die("listen");
		if (write(rdy[1], "r", 1) != 1)
			die("ready");
		if (opt.tcp) {
			int a = accept(rfd, NULL, NULL);

			if (a < 0)
				die("accept");
			res.got = tcp_rx(a);
		} else {
			res.got = opt.land ? udp_rx_land(rfd, &tx) : udp_rx(rfd, &tx);
		}
		res.cpu = cpu_s(RUSAGE_SELF);
		res.crc = crc_sink;
		if (write(pfd[1], &res, sizeof(res)) != sizeof(res))
			die("result");
		_exit(0);
	}
	enter_ns(tx_ns);
	tfd = make_socket(opt.tcp ? NULL : &tx);
	if (opt.zc && setsockopt(tfd, SOL_SOCKET, SO_ZEROCOPY, &(int){1}, sizeof(int)))
		die("SO_ZEROCOPY");
	if (read(rdy[0], &c, 1) != 1)
		die("receiver");
	t0 = now_s();
	if (opt.tcp) {
		if (connect(tfd, (struct sockaddr *)&rx, sizeof(rx)))
			die("connect");
		tcp_tx(tfd);
	} else {
		lost = udp_tx(tfd, &rx);
		/* the last credit: everything arrived (or was lost) */
		for (;;) {
			struct pollfd p = {.fd = tfd, .events = POLLIN};
			uint64_t a = 0;

			if (poll(&p, 1, 200) <= 0)
				break;
			if (recv(tfd, &a, sizeof(a), 0) == sizeof(a) && a >= opt.bytes)
				break;
		}
	}
	if (read(pfd[0], &res, sizeof(res)) != sizeof(res))
		die("receiver result");
	rcpu = res.cpu;
	t1 = now_s();
	scpu = cpu_s(RUSAGE_SELF);
	waitpid(pid, NULL, 0);
	printf("mode=%s%s%s%s seg=%u MBps=%.0f cpu_s_per_GB=%.3f snd_cpu=%.2f rcv_cpu=%.2f "
	       "lost_windows=%d rcvd=%llu sent=%llu%s",
	       opt.tcp ? "tcp" : "udp",
	       opt.land	  ? (opt.vlen == 1 ? "+land1" : "+land")
	       : opt.copy ? "+copy"
	       : opt.zc	  ? "+zerocopy"
			  : "",
	       opt.tx == 1   ? "+gather"
	       : opt.tx == 2 ? "+txcopy"
			     : "",
	       opt.crc ? "+crc" : "", opt.seg, (double)opt.bytes / (t1 - t0) / 1e6,
	       (scpu + rcpu) / ((double)opt.bytes / 1e9), scpu, rcpu, lost,
	       (unsigned long long)res.got, (unsigned long long)opt.bytes, opt.crc ? "" : "\n");
	/* --crc: the sum of every segment's CRC on each side (equal when every
	 * segment arrived whole) */
	if (opt.crc)
		printf(" crc_tx=%08x crc_rx=%08x\n", crc_sink, res.crc);
	return 0;
}

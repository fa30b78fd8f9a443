/* UDP endpoints and packet demultiplexing.
 *
 * An endpoint is one unconnected UDP socket bound to an ephemeral port P and
 * serving up to 255 QPs: QPN = P << 8 | slot.  A packet for QP n is sent to
 * UDP port n >> 8 at the GID's address, so the kernel's own UDP demux
 * delivers it to the process (and socket) that owns the QP; the slot picks
 * the QP.  Ports are unique per host, so QPNs are too, across processes,
 * without any shared state or daemon.  (docs/design.md discusses this and the
 * standard-port mode.)
 *
 * Sockets stay unconnected and use IP_PMTUDISC_DO: Linux then sends IPv4 ID 0
 * and DF, the values the ICRC is computed over (a connected socket would
 * number its IDs).  IP_PKTINFO gives the destination address of received
 * packets (ICRC, GRH) and sets the source address of sent ones (the SGID).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "uroce.h"
#include "net/fault.h"
#include "transport/rc.h"
#include "transport/pkt.h"
#include "net/pcap.h"
#include "net/shm.h"

#define RX_BATCH 16
#define RX_BUFSZ (65536 + 256) /* a UDP GRO batch (src/net/gso.c) */
#define SOCK_BUF (8 << 20)

struct uroce_ep_rx {
	struct mmsghdr msg[RX_BATCH];
	struct iovec iov[RX_BATCH];
	struct sockaddr_in from[RX_BATCH];
	union {
		char buf[CMSG_SPACE(sizeof(struct in_pktinfo)) + 2 * CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl[RX_BATCH];
	uint8_t data[RX_BATCH][RX_BUFSZ];
	unsigned int singles;	 /* application reads in a row that returned one datagram */
	unsigned int predicted;	 /* reads made with recvmsg (see rx_read) */
	bool one;		 /* the last read was one of them */
	bool gro_off;		 /* UDP_GRO is off on the address socket (rx_plain) */
	uint16_t cut_seen;	 /* a GSO send came cut: its highest IPv4 ID (rx_ipid_seen) */
	uint16_t ipid_next;	 /* the IPv4 ID the next datagram is checked with first */
	unsigned int plain_try;	 /* predicted reads until the next try to turn it off */
	unsigned int plain_wait; /* and after a failed try (doubles, rx_plain_try) */
	uint64_t plain_hold_ns;	 /* no plain reads before then (rx_read) */
	int used;		 /* headers the last read filled (rx_reset) */
	/* counts summed over one datagram's packets (rx_counted) */
	struct uroce_qp *c_qp; /* whose rx_pkts and rx_bytes these are */
	uint64_t c_pkts, c_bytes, c_in_place, c_write_next;
};

static void set_bufsz(int fd, int opt_force, int opt)
{
	int v = SOCK_BUF;

	/* SO_*BUFFORCE needs CAP_NET_ADMIN; otherwise the kernel caps the
	 * request at net.core.[rw]mem_max. */
	if (setsockopt(fd, SOL_SOCKET, opt_force, &v, sizeof(v)))
		setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
}

/* A UDP socket with the options every endpoint socket has; pktinfo: the
 * wildcard socket, which needs each datagram's destination address; tos:
 * IP_RECVTOS, each datagram's IP TOS (see rx_tos_on). */
static int sock_open(bool pktinfo, bool tos)
{
	int one = 1, pmtu = IP_PMTUDISC_DO;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		ur_err("cannot create a UDP socket for QPs: %s", strerror(errno));
		return -1;
	}
	if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) ||
	    (pktinfo && setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one))) ||
	    (tos && setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one)))) {
		ur_err("UDP socket: setting IP_MTU_DISCOVER/IP_PKTINFO/IP_RECVTOS failed: %s",
		       strerror(errno));
		close(fd);
		return -1;
	}
	set_bufsz(fd, SO_RCVBUFFORCE, SO_RCVBUF);
	set_bufsz(fd, SO_SNDBUFFORCE, SO_SNDBUF);
	return fd;
}

/* The address socket.  An endpoint's wildcard socket needs IP_PKTINFO on
 * every read (the destination address is in the ICRC and the GRH) and on
 * every send (the SGID's address as source): two control messages that
 * cost a ping-pong 0.4 us per one-way message on this kind of machine
 * (docs/latency.md).  When the device has one IPv4 address, a second
 * socket is bound to that address and the same port - the kernel delivers
 * a datagram to the socket bound to its exact address first - and becomes
 * ep->fd: it is read without IP_PKTINFO and sends from that address
 * without it.  The wildcard socket was bound first, alone (so the port is
 * the host's, as for every endpoint), and keeps it: SO_REUSEADDR is on for
 * the two binds only, so no other socket can share the port afterwards.
 * It gets what comes to the port at any other address (misdirected
 * traffic only: a peer sends to our GID) and is read by the progress
 * thread's epoll and every ANY_LOOKS-th poll (with same-host links: every
 * ANY_LOOKS_SHM-th read of the address socket, see ep_poll).
 * UROCE_ADDR_SOCK=0 turns it off (measurements). */
enum { UROCE_ANY_LOOKS = 32, UROCE_ANY_LOOKS_SHM = 4 };

static bool addr_sock_wanted(void)
{
	static int mode = -1;

	return uroce_env_on("UROCE_ADDR_SOCK", &mode);
}

/* The device's one IPv4 address, or false when it has none or several. */
static bool dev_one_v4(const struct uroce_ctx *ctx, struct in_addr *a)
{
	int n = 0;

	for (int i = 0; ctx->dev && i < ctx->dev->ngid; i++)
		if (ctx->dev->gid[i].family == AF_INET && n++ == 0)
			*a = ctx->dev->gid[i].addr.v4;
	return n == 1 && a->s_addr != htonl(INADDR_ANY);
}

/* ep->fd (the wildcard socket, bound) becomes fd_any and a socket bound to
 * addr:port becomes ep->fd; on any failure the endpoint stays as it was. */
static void addr_sock_open(struct uroce_ep *ep, struct in_addr addr)
{
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_addr = addr, .sin_port = htons(ep->port)};
	int one = 1, zero = 0, fd;

	if (!addr_sock_wanted() || setsockopt(ep->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		return;
	fd = sock_open(false, ep->ctx->pcap != NULL);
	if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
			bind(fd, (struct sockaddr *)&sa, sizeof(sa)))) {
		ur_dbg("no address socket on %s:%u: %s", inet_ntoa(addr), ep->port,
		       strerror(errno));
		close(fd);
		fd = -1;
	}
	setsockopt(ep->fd, SOL_SOCKET, SO_REUSEADDR, &zero, sizeof(zero));
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &zero, sizeof(zero));
	ep->fd_any = ep->fd;
	ep->fd = fd;
	ep->fast_addr = addr;
	ep->rx_tos = ep->ctx->pcap != NULL;
}

/* The IP TOS of a received datagram is needed by a UD QP (the GRH's
 * traffic class) and a capture (what arrived), nothing else: RC, UC and
 * XRC ignore it, uroce does not use ECN.  The address socket reads its
 * datagrams without IP_RECVTOS until the endpoint gets a UD QP (a capture
 * sets it from the start), so a ping-pong's read carries no control
 * message at all (docs/latency.md, "Session 12").  The kernel fills the
 * control message at the read from the datagram's own header, so every
 * datagram read after this call carries it, those queued before it too.
 * Once on, it stays on (ctx->lock held). */
static void rx_tos_on(struct uroce_ep *ep)
{
	int one = 1;

	if (ep->rx_tos || ep->fd_any < 0)
		return;
	if (setsockopt(ep->fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one)))
		ur_err("UDP socket: setting IP_RECVTOS failed: %s", strerror(errno));
	else
		ep->rx_tos = true;
}

static void ep_close_fds(struct uroce_ep *ep)
{
	close(ep->fd);
	if (ep->fd_any >= 0)
		close(ep->fd_any);
}

/* The epoll data of an endpoint's socket: the endpoint, with bit 1 set
 * for the wildcard socket beside an address socket (bit 0 is the
 * same-host wire's, shm.h), so that a wake-up reads the wildcard socket
 * only when it holds something - otherwise one empty recvmmsg more on the
 * way to every request that wakes the progress thread. */
#define EP_EV_ANY 2u

static void *ep_ev(struct uroce_ep *ep, bool any)
{
	return any ? (void *)((char *)ep + EP_EV_ANY) : ep;
}

int uroce_ep_epoll_add(struct uroce_ep *ep)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ep_ev(ep, false)},
			   ev_any = {.events = EPOLLIN, .data.ptr = ep_ev(ep, true)};

	if (epoll_ctl(ep->ctx->epfd, EPOLL_CTL_ADD, ep->fd, &ev) ||
	    (ep->fd_any >= 0 && epoll_ctl(ep->ctx->epfd, EPOLL_CTL_ADD, ep->fd_any, &ev_any)))
		return -1;
	return 0;
}

/* Put the endpoint's UDP sockets in the progress thread's epoll set, or
 * take them out (progress.c, socks_watch); one already in or out is left
 * so (an endpoint opened meanwhile adds itself). */
void uroce_ep_epoll_watch(struct uroce_ep *ep, bool on)
{
	int fds[2] = {ep->fd, ep->fd_any};

	for (int i = 0; i < 2 && fds[i] >= 0; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ep_ev(ep, i)};

		if (epoll_ctl(ep->ctx->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fds[i], &ev) &&
		    errno != (on ? EEXIST : ENOENT))
			ur_trace("epoll_ctl: %s", strerror(errno));
	}
}

/* Open an endpoint with nslot QP slots bound to addr:port (port 0:
 * ephemeral); reuse allows several sockets on one port (multicast
 * receivers).  A failed bind is not logged: *bind_err says why. */
static struct uroce_ep *ep_open(struct uroce_ctx *ctx, struct in_addr addr, uint16_t port,
				bool reuse, uint32_t nslot, int *bind_err)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = addr, .sin_port = htons(port)};
	socklen_t sl = sizeof(sa);
	struct uroce_ep *ep;
	struct in_addr one_addr = {0};
	int one = 1;

	*bind_err = 0;
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return NULL;
	ep->fd_any = -1;
	ep->rx = calloc(1, sizeof(*ep->rx));
	ep->slot = calloc(nslot, sizeof(*ep->slot));
	ep->nslot = nslot;
	if (!ep->rx || !ep->slot)
		goto err_free;
	ep->ctx = ctx;
	pthread_mutex_init(&ep->rx_lock, NULL);
	ep->fd = sock_open(true, true);
	if (ep->fd < 0)
		goto err_free;
	if (reuse && setsockopt(ep->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one))) {
		ur_err("setsockopt(SO_REUSEADDR): %s", strerror(errno));
		goto err_sock;
	}
	if (bind(ep->fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(ep->fd, (struct sockaddr *)&sa, &sl)) {
		*bind_err = errno;
		goto err_sock;
	}
	ep->port = ntohs(sa.sin_port);
	if (!reuse && !port && addr.s_addr == htonl(INADDR_ANY) && !uroce_std_mode() &&
	    dev_one_v4(ctx, &one_addr))
		addr_sock_open(ep, one_addr);
	{
		int v = 0;
		socklen_t vl = sizeof(v);

		getsockopt(ep->fd, SOL_SOCKET, SO_RCVBUF, &v, &vl);
		ep->rcvbuf = v > 0 ? (uint32_t)v : 212992;
	}
	uroce_gso_setup(ep);
	uroce_shm_ep_init(ep, reuse);
	for (int i = 0; i < RX_BATCH; i++) {
		ep->rx->iov[i].iov_base = ep->rx->data[i];
		ep->rx->iov[i].iov_len = RX_BUFSZ;
		ep->rx->msg[i].msg_hdr.msg_iov = &ep->rx->iov[i];
		ep->rx->msg[i].msg_hdr.msg_iovlen = 1;
	}
	ep->rx->used = RX_BATCH;
	if (ctx->epfd >= 0) {
		if (uroce_ep_epoll_add(ep)) {
			ur_err("epoll_ctl: %s", strerror(errno));
			goto err_close;
		}
		uroce_shm_epoll_add(ep);
	}
	if (nslot == UROCE_EP_SLOTS)
		ur_dbg("endpoint on UDP port %u (QPNs 0x%06x-0x%06x)%s", ep->port, ep->port << 8,
		       (ep->port << 8) | 0xff, ep->fd_any >= 0 ? ", address socket" : "");
	return ep;

err_close:
	uroce_shm_ep_fini(ep);
	uroce_gso_free(ep);
err_sock:
	ep_close_fds(ep);
err_free:
	free(ep->rx);
	free(ep->slot);
	free(ep);
	return NULL;
}

struct uroce_ep *uroce_ep_open(struct uroce_ctx *ctx, struct in_addr addr, uint16_t port,
			       bool reuse)
{
	struct uroce_ep *ep;
	int err;

	ep = ep_open(ctx, addr, port, reuse, UROCE_EP_SLOTS, &err);
	if (!ep && err) {
		ur_err("cannot bind a UDP socket to %s:%u: %s", inet_ntoa(addr), port,
		       strerror(err));
		errno = err;
	}
	return ep;
}

/* Standard-port mode: the context's one endpoint, <addr>:4791 with
 * UROCE_STD_SLOTS QPN slots.  Binding fails with EADDRINUSE when any
 * socket holds 4791 on that address or on the wildcard address (the
 * kernel's rdma_rxe binds 0.0.0.0:4791), so one process per address
 * owns the port; the caller (stdport.c) explains. */
struct uroce_ep *uroce_ep_open_std(struct uroce_ctx *ctx, struct in_addr addr, int *bind_err)
{
	struct uroce_ep *ep = ep_open(ctx, addr, UR_ROCE_PORT, false, UROCE_STD_SLOTS, bind_err);

	if (ep)
		ep->std = true;
	return ep;
}

void uroce_ep_close(struct uroce_ep *ep)
{
	uroce_ep_flush(ep);
	uroce_shm_ep_fini(ep);
	uroce_gso_free(ep);
	ep_close_fds(ep);
	pthread_mutex_destroy(&ep->rx_lock);
	free(ep->rx);
	free(ep->slot);
	free(ep);
}

/* Slot of qpn on ep; 0 (never used) when ep does not serve qpn. */
static uint32_t ep_slot_of(const struct uroce_ep *ep, uint32_t qpn)
{
	if (ep->std)
		return qpn < ep->nslot ? qpn : 0;
	return (qpn >> 8) == ep->port ? qpn & 0xff : 0;
}

struct uroce_qp *uroce_ep_qp(struct uroce_ep *ep, uint32_t qpn)
{
	return __atomic_load_n(&ep->slot[ep_slot_of(ep, qpn)], __ATOMIC_RELAXED);
}

/* Give qp a free slot at or above first (ctx->lock held): the next one
 * after the slot given last, cyclically, so a destroyed QP's number is
 * reused as late as possible and a late packet for it (a retransmission,
 * an ACK its peer sent as it went) finds no QP rather than a new one. */
static int take_slot(struct uroce_ep *ep, struct uroce_qp *qp, uint32_t first, uint32_t *slot)
{
	uint32_t n = ep->nslot - first;
	uint32_t start = ep->next_slot < first ? 0 : ep->next_slot - first;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = first + (start + i) % n;

		if (ep->slot[s])
			continue;
		if (s >= ep->slot_hi) /* before the slot: ACK flush sees it */
			ep->slot_hi = s + 1;
		ep->slot[s] = qp;
		ep->nqp++;
		ep->next_slot = s + 1 < ep->nslot ? s + 1 : first;
		*slot = s;
		return 0;
	}
	return -1;
}

/* Standard-port mode: the next free QPN of the context's 4791 endpoint
 * (QPNs 0 and 1 are reserved, as on InfiniBand). */
struct uroce_ep *uroce_ep_std(struct uroce_ctx *ctx)
{
	struct uroce_ep *ep = NULL;

	for (int i = 0; i < ctx->nep && !ep; i++)
		if (ctx->ep[i]->std)
			ep = ctx->ep[i];
	if (!ep) {
		if (ctx->nep >= (int)(sizeof(ctx->ep) / sizeof(ctx->ep[0])))
			return NULL;
		ep = uroce_std_ep_open(ctx);
		if (!ep)
			return NULL;
		ctx->ep[ctx->nep] = ep;
		atomic_fetch_add(&ctx->nep, 1);
	}
	return ep;
}

static struct uroce_ep *ep_get_std(struct uroce_ctx *ctx, struct uroce_qp *qp, uint32_t *qpn)
{
	struct uroce_ep *ep = uroce_ep_std(ctx);

	if (!ep)
		return NULL;
	if (!take_slot(ep, qp, 2, qpn))
		return ep;
	errno = ENOMEM;
	return NULL;
}

/* Find a free QPN slot (ctx->lock held by the caller). */
struct uroce_ep *uroce_ep_get(struct uroce_ctx *ctx, struct uroce_qp *qp, uint32_t *qpn)
{
	struct uroce_ep *ep = NULL;

	if (uroce_std_mode())
		return ep_get_std(ctx, qp, qpn);
	for (int i = 0; i < ctx->nep && !ep; i++)
		if (ctx->ep[i]->nqp < UROCE_EP_SLOTS - 1)
			ep = ctx->ep[i];
	if (!ep) {
		if (ctx->nep >= (int)(sizeof(ctx->ep) / sizeof(ctx->ep[0])))
			return NULL;
		ep = uroce_ep_open(ctx, (struct in_addr){INADDR_ANY}, 0, false);
		if (!ep)
			return NULL;
		ctx->ep[ctx->nep] = ep;
		atomic_fetch_add(&ctx->nep, 1);
	}
	if (qp->tr == UR_TR_UD)
		rx_tos_on(ep);
	/* slot 0 stays unused: no QPN ends in 0x00 */
	if (!take_slot(ep, qp, 1, qpn)) {
		*qpn |= (uint32_t)ep->port << 8;
		return ep;
	}
	return NULL;
}

/* Release qp's slot (ctx->lock held); returns once no receive batch can
 * still be using qp. */
void uroce_ep_put(struct uroce_ctx *ctx, struct uroce_qp *qp)
{
	struct uroce_ep *ep = qp->ep;
	uint32_t s = ep ? ep_slot_of(ep, qp->ibqp.qp_base.qp_num) : 0;

	(void)ctx;
	if (!ep || !s || ep->slot[s] != qp)
		return;
	ep->slot[s] = NULL;
	ep->nqp--;
	pthread_mutex_lock(&ep->rx_lock);
	pthread_mutex_unlock(&ep->rx_lock);
}

/* What one datagram needs on the way to sendmsg: its address, and the
 * control messages IP_PKTINFO (the SGID's address as source) and, with
 * gso_size, UDP_SEGMENT (the kernel cuts buf into datagrams of that size,
 * src/net/gso.c). */
struct udp_out {
	struct sockaddr_in to;
	struct iovec iov;
	union {
		char buf[CMSG_SPACE(sizeof(struct in_pktinfo)) + CMSG_SPACE(sizeof(uint16_t)) +
			 CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
};

/* The address socket sends from its address with no IP_PKTINFO. */
static bool udp_fast(const struct uroce_ep *ep, const struct uroce_ipinfo *ip)
{
	return ep->fd_any >= 0 && ip->src.v4.s_addr == ep->fast_addr.s_addr &&
	       !IN_MULTICAST(ntohl(ip->dst.v4.s_addr));
}

/* fast: sent on the address socket (udp_fast), no IP_PKTINFO */
static void udp_msg(struct uroce_ep *ep, const struct uroce_udp_msg *m, struct udp_out *o,
		    struct msghdr *mh, bool fast)
{
	struct in_pktinfo pi = {.ipi_spec_dst = m->ip->src.v4};
	struct cmsghdr *cm;
	size_t pisz = fast ? 0 : CMSG_SPACE(sizeof(pi));

	/* multicast leaves through the device's own interface */
	if (IN_MULTICAST(ntohl(m->ip->dst.v4.s_addr)))
		pi.ipi_ifindex = ep->ctx->dev->ifindex;
	memset(o, 0, sizeof(*o));
	o->to = (struct sockaddr_in){
	    .sin_family = AF_INET, .sin_port = htons(m->ip->dport), .sin_addr = m->ip->dst.v4};
	o->iov = (struct iovec){.iov_base = (void *)m->buf, .iov_len = m->len};
	*mh = (struct msghdr){.msg_name = &o->to,
			      .msg_namelen = sizeof(o->to),
			      .msg_iov = m->iov ? (struct iovec *)m->iov : &o->iov,
			      .msg_iovlen = m->iov ? (size_t)m->iovcnt : 1,
			      .msg_control = o->ctl.buf,
			      .msg_controllen = CMSG_SPACE(sizeof(struct in_pktinfo))};
	/* CMSG_NXTHDR needs the room it may use counted in msg_controllen;
	 * the final length is what was filled */
	mh->msg_controllen = sizeof(o->ctl.buf);
	cm = CMSG_FIRSTHDR(mh);
	if (!fast) {
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		cm = CMSG_NXTHDR(mh, cm);
	}
	if (m->gso_size) {
		uint16_t g = (uint16_t)m->gso_size;

		cm->cmsg_level = SOL_UDP;
		cm->cmsg_type = 103; /* UDP_SEGMENT */
		cm->cmsg_len = CMSG_LEN(sizeof(g));
		memcpy(CMSG_DATA(cm), &g, sizeof(g));
		cm = CMSG_NXTHDR(mh, cm);
	}
	if (m->ip->tos) { /* ah_attr.grh.traffic_class (RoCEv2: the IP TOS) */
		int tos = m->ip->tos;

		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_TOS;
		cm->cmsg_len = CMSG_LEN(sizeof(tos));
		memcpy(CMSG_DATA(cm), &tos, sizeof(tos));
	}
	mh->msg_controllen = pisz + (m->gso_size ? CMSG_SPACE(sizeof(uint16_t)) : 0) +
			     (m->ip->tos ? CMSG_SPACE(sizeof(int)) : 0);
	if (!mh->msg_controllen)
		mh->msg_control = NULL;
}

/* One sendmsg: the packet(s) in buf to ip.  Returns 0 or an errno. */
int uroce_udp_send(struct uroce_ep *ep, const struct uroce_ipinfo *ip, const void *buf, size_t len,
		   uint32_t gso_size)
{
	struct uroce_udp_msg m = {.ip = ip, .buf = buf, .len = len, .gso_size = gso_size};

	return uroce_udp_send_msg(ep, &m);
}

int uroce_udp_send_msg(struct uroce_ep *ep, const struct uroce_udp_msg *m)
{
	const struct uroce_ipinfo *ip = m->ip;
	uint32_t gso_size = m->gso_size;
	struct udp_out o;
	struct msghdr mh;

	bool fast = udp_fast(ep, ip);
	/* One buffer (or a GSO batch of one piece: one packet copied in) from
	 * the address socket with nothing to say in control messages (a
	 * ping-pong's packet): sendto, which copies no msghdr and iovec in
	 * (docs/latency.md, "Session 11") */
	bool plain = fast && !gso_size && !ip->tos && (!m->iov || m->iovcnt == 1);
	const void *buf = m->iov ? m->iov[0].iov_base : m->buf;

	if (!plain)
		udp_msg(ep, m, &o, &mh, fast);
	for (;;) {
		ssize_t r;

		if (plain) {
			o.to = (struct sockaddr_in){.sin_family = AF_INET,
						    .sin_port = htons(ip->dport),
						    .sin_addr = ip->dst.v4};
			r = sendto(ep->fd, buf, m->len, MSG_DONTWAIT, (struct sockaddr *)&o.to,
				   sizeof(o.to));
		} else {
			r = sendmsg(fast || ep->fd_any < 0 ? ep->fd : ep->fd_any, &mh,
				    MSG_DONTWAIT);
		}

		if (r == (ssize_t)m->len)
			return 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (gso_size && r < 0 && (errno == EINVAL || errno == EIO || errno == EOPNOTSUPP))
			return errno; /* the caller falls back to single packets */
		/* A full socket buffer or an unreachable peer is a lost
		 * packet: the transport's retransmission deals with it. */
		uroce_count(ep->ctx, send_err, 1);
		ur_trace("sendmsg to port %u: %s", ip->dport, r < 0 ? strerror(errno) : "short");
		return r < 0 ? errno : EIO;
	}
}

/* The caller sends what this did not with uroce_udp_send, which reports
 * their errors. */
int uroce_udp_send_many(struct uroce_ep *ep, const struct uroce_udp_msg *m, int n)
{
	struct udp_out o[UROCE_UDP_MAX_MSGS];
	struct mmsghdr mm[UROCE_UDP_MAX_MSGS];
	bool fast = true;
	int r;

	if (n > UROCE_UDP_MAX_MSGS)
		n = UROCE_UDP_MAX_MSGS;
	for (int i = 0; i < n && fast; i++)
		fast = udp_fast(ep, m[i].ip);
	for (int i = 0; i < n; i++) {
		udp_msg(ep, &m[i], &o[i], &mm[i].msg_hdr, fast);
		mm[i].msg_len = 0;
	}
	do
		r = sendmmsg(fast || ep->fd_any < 0 ? ep->fd : ep->fd_any, mm, (unsigned int)n,
			     MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return 0;
	/* a datagram sent short counts as not sent */
	for (int i = 0; i < r; i++)
		if (mm[i].msg_len != m[i].len)
			return i;
	return r;
}

static int ep_xmit_raw(struct uroce_ep *ep, const struct uroce_ipinfo *ip, const void *buf,
		       size_t len)
{
	if (uroce_gso_add(ep, ip, buf, len))
		return 0;
	if (uroce_udp_send(ep, ip, buf, len, 0))
		return -1;
	uroce_count(ep->ctx, tx_pkts, 1);
	uroce_count(ep->ctx, tx_bytes, len);
	uroce_pcap(ep->ctx, UROCE_PCAP_TX, ip, buf, len);
	return 0;
}

static int place_mode = -1; /* UROCE_RX_COPY=1: check, then copy (measurements) */

/* Receive counters are summed over the packets of one datagram (a GRO
 * batch of up to 64) and added once when it has been delivered (rx_lock
 * held: a QP found in a slot stays until it is released, uroce_ep_put).
 * Five locked adds per packet were about 20 TSC ticks of it: each waits
 * for the store buffer, which the packet's copy has just filled. */
static void rx_counted(struct uroce_ep *ep)
{
	struct uroce_ep_rx *rx = ep->rx;

	if (rx->c_qp) {
		uroce_qp_stat(rx->c_qp, rx_pkts, rx->c_pkts);
		uroce_qp_stat(rx->c_qp, rx_bytes, rx->c_bytes);
		rx->c_qp = NULL;
		rx->c_pkts = rx->c_bytes = 0;
	}
	if (rx->c_in_place) {
		uroce_count(ep->ctx, rx_in_place, rx->c_in_place);
		rx->c_in_place = 0;
	}
	if (rx->c_write_next) {
		uroce_count(ep->ctx, rx_write_next, rx->c_write_next);
		rx->c_write_next = 0;
	}
}

static void rx_qp_count(struct uroce_ep *ep, struct uroce_qp *qp, size_t len)
{
	struct uroce_ep_rx *rx = ep->rx;

	if (rx->c_qp != qp) {
		rx_counted(ep);
		rx->c_qp = qp;
	}
	rx->c_pkts++;
	rx->c_bytes += len;
}

/* A wire packet that continues a message: its payload straight into place
 * while its ICRC is checked (rx_place.c); 1, -1 or 0 as uroce_rx_place.
 * On 1 the QP is returned in *held, still locked, for the rest of the
 * packet's handling: one qp->lock per placed packet, not two. */
static int rx_place(struct uroce_ep *ep, struct uroce_pkt *pkt, const struct uroce_ipinfo *ip,
		    struct uroce_qp **held)
{
	struct uroce_qp *qp;
	bool next;
	int r;

	if (place_mode < 0) {
		const char *v = getenv("UROCE_RX_COPY");

		place_mode = !(v && !strcmp(v, "1"));
	}
	/* standard-port peers number their IPv4 IDs: the ICRC is found
	 * another way (uroce_icrc_ok_any_ipid) */
	if (!place_mode || !(pkt->mask & URM_REQ) || !pkt->paylen || !ur_bth_pkey_ok(pkt) ||
	    pkt->qpn == UROCE_MCAST_QPN || pkt->qpn == 1 || ep->std || uroce_std_mode() ||
	    !(qp = ep->slot[ep_slot_of(ep, pkt->qpn)]))
		return 0;
	pthread_mutex_lock(&qp->lock);
	next = pkt->psn == qp->resp.psn; /* (else a held one: counted by rx_place.c) */
	r = uroce_rx_place(qp, pkt, ip);
	if (r > 0) {
		*held = qp;
		if (next) {
			ep->rx->c_in_place++;
			if (pkt->mask & URM_START)
				ep->rx->c_write_next++;
		}
	} else {
		pthread_mutex_unlock(&qp->lock);
	}
	return r;
}

/* A wire packet's ICRC matched with IPv4 ID id.  A GSO send that reaches
 * the socket cut into its segments (UDP_GRO off, rx_plain; or a NIC that
 * does not merge them) numbers them 0, 1, 2...: the next datagram is
 * checked with id + 1 first, so a cut send's segments after the second
 * are still placed as they are checked (rx_place) instead of checked
 * twice (uroce_icrc_ok_any_ipid, which accepts the same IDs).  A cut send
 * of several segments while UDP_GRO is off is a stream starting
 * (rx_read). */
static void rx_ipid_seen(struct uroce_ep *ep, uint16_t id)
{
	struct uroce_ep_rx *rx = ep->rx;

	rx->ipid_next = id && id < 63 ? (uint16_t)(id + 1) : 0;
	if (id > rx->cut_seen && rx->gro_off)
		rx->cut_seen = id;
}

/* Parse, check and hand one packet to its QP (rx_lock held).  A packet
 * from shared memory (src/net/shm.c) has no ICRC to check: memory is not
 * a wire. */
static void deliver_pkt(struct uroce_ep *ep, uint8_t *data, size_t len,
			const struct uroce_ipinfo *ipp, bool wire)
{
	struct uroce_ctx *ctx = ep->ctx;
	const struct uroce_ipinfo ip = *ipp;
	struct uroce_pkt pkt;
	struct uroce_qp *qp = NULL;
	uint8_t ack[UR_PIGGY_BYTES];
	int placed, piggy = 0;

	uroce_pcap(ctx, UROCE_PCAP_RX, ipp, data, len);
	if (uroce_pkt_parse(&pkt, data, len) ||
	    (!ep->std && (piggy = ur_piggy_strip(&pkt, ack)) < 0)) {
		uroce_count(ctx, rx_drop_parse, 1);
		return;
	}
	if (!wire && ip.pull)
		pkt.pull = *ip.pull; /* a same-host link we may pull from (pull.c) */
	placed = wire ? rx_place(ep, &pkt, &ip, &qp) : 0;
	if (placed > 0) {
		/* an RC/UC request of this QP, its P_Key checked: the ICRC
		 * matched, the QP is locked (rx_place) */
		rx_ipid_seen(ep, ip.ipid);
		rx_qp_count(ep, qp, len);
		uroce_rcv_request(qp, &pkt);
		if (piggy)
			uroce_rcv_piggy(qp, &pkt, ack);
		pthread_mutex_unlock(&qp->lock);
		return;
	}
	if (wire && placed <= 0 && (placed < 0 || !uroce_icrc_ok(&pkt, &ip))) {
		uint16_t ipid;

		/* Standard-port mode: the peer (kernel rxe, a NIC) may number
		 * its IPv4 IDs, which the ICRC covers and a UDP socket cannot
		 * see: accept when some ID makes the ICRC match (stdport.c). */
		/* Native mode: a GSO batch that was segmented before it
		 * reached us numbers its segments' IDs 0..63 (gso.c). */
		if (uroce_icrc_ok_any_ipid(&pkt, &ip, &ipid) && (uroce_std_mode() || ipid < 64)) {
			ur_trace("%s psn %u: ICRC matches with IPv4 ID 0x%04x",
				 uroce_opcode_name(pkt.opcode), pkt.psn, ipid);
			if (!uroce_std_mode())
				rx_ipid_seen(ep, ipid);
			pkt.placed = placed < 0; /* what was placed is the payload */
		} else {
			/* IBTA C9-?: a packet with a bad ICRC is silently dropped */
			ur_dbg("drop %s psn %u: bad ICRC", uroce_opcode_name(pkt.opcode), pkt.psn);
			uroce_count(ctx, rx_drop_icrc, 1);
			return;
		}
	} else if (wire) {
		rx_ipid_seen(ep, ip.ipid);
	}
	if (!ur_bth_pkey_ok(&pkt)) {
		ur_dbg("drop %s: P_Key 0x%02x%02x is not in the P_Key table",
		       uroce_opcode_name(pkt.opcode), pkt.bth[2], pkt.bth[3]);
		uroce_count(ctx, rx_drop_parse, 1);
		return;
	}
	if (pkt.qpn == UROCE_MCAST_QPN && (pkt.opcode & UR_TR_MASK) == UR_TR_UD) {
		uroce_mcast_deliver(ctx, &pkt, &ip);
		return;
	}
	if (pkt.qpn == 1 && ep->std && uroce_qp1_deliver(ctx, data, len, &ip))
		return; /* a CM MAD for uroce's librdmacm (src/net/qp1.c) */
	if (!(qp = ep->slot[ep_slot_of(ep, pkt.qpn)])) {
		ur_dbg("drop %s: no QP 0x%06x here", uroce_opcode_name(pkt.opcode), pkt.qpn);
		uroce_count(ctx, rx_drop_qpn, 1);
		return;
	}
	rx_qp_count(ep, qp, len);
	pthread_mutex_lock(&qp->lock);
	if ((pkt.opcode & UR_TR_MASK) == UR_TR_UD)
		uroce_ud_rcv(qp, &pkt, &ip);
	else if (pkt.mask & URM_REQ) {
		uroce_rcv_request(qp, &pkt);
		if (piggy) /* the ACK that would have followed it */
			uroce_rcv_piggy(qp, &pkt, ack);
	} else
		uroce_rcv_response(qp, &pkt);
	pthread_mutex_unlock(&qp->lock);
}

static void deliver(struct uroce_ep *ep, uint8_t *data, size_t len, const struct uroce_ipinfo *ip)
{
	deliver_pkt(ep, data, len, ip, true);
	rx_counted(ep);
}

static void deliver_shm(struct uroce_ep *ep, uint8_t *data, size_t len,
			const struct uroce_ipinfo *ip)
{
	deliver_pkt(ep, data, len, ip, false);
	rx_counted(ep);
}

/* UROCE_FAULT (src/net/fault.c) sends and delivers held packets with these. */
static const struct uroce_fault_ops fault_ops = {
    .xmit = ep_xmit_raw, .xmit_gather = uroce_gso_add_gather, .deliver = deliver};

/* Not to a destination the same-host wire may serve: all the packets of a
 * link take uroce_ep_xmit, in order. */
static int gather_mode = -1; /* UROCE_TX_COPY=1: every packet copied (measurements) */

bool uroce_ep_gather_ok(struct uroce_ep *ep, const struct uroce_ipinfo *ip)
{
	if (gather_mode < 0) {
		const char *v = getenv("UROCE_TX_COPY");

		gather_mode = !(v && !strcmp(v, "1"));
	}
	return gather_mode && ep->gso && ip->family == AF_INET && !ep->ctx->pcap &&
	       !(ep->shm && uroce_shm_dst_local(ep->ctx, ip->dst.v4));
}

void uroce_ep_xmit_gather(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			  struct uroce_tx_pkt *t)
{
	if (uroce_fault_on(ep->ctx))
		uroce_fault_tx_gather(ep, ip, t, &fault_ops);
	else
		uroce_gso_add_gather(ep, ip, t);
}

void uroce_ep_xmit_gather_run(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			      struct uroce_tx_pkt *t, int n)
{
	if (!uroce_fault_on(ep->ctx)) {
		uroce_gso_add_gather_run(ep, ip, t, n);
		return;
	}
	for (int i = 0; i < n; i++)
		uroce_fault_tx_gather(ep, ip, &t[i], &fault_ops);
}

void uroce_ctx_flush_tx(struct uroce_ctx *ctx)
{
	int nep = atomic_load(&ctx->nep);

	for (int i = 0; i < nep; i++)
		uroce_ep_flush(ctx->ep[i]);
}

/* crc: the ICRC is written already; else the same-host wire goes without
 * it and every other path stamps it first. */
static int ep_xmit(struct uroce_ep *ep, const struct uroce_ipinfo *ip, uint8_t *buf, size_t len,
		   bool crc)
{
	if (!uroce_fault_on(ep->ctx) && uroce_shm_xmit(ep, ip, buf, len, crc))
		return 0;
	if (!crc)
		uroce_icrc_stamp(ip, buf, len);
	if (uroce_fault_on(ep->ctx))
		return uroce_fault_tx(ep, ip, buf, len, &fault_ops);
	return ep_xmit_raw(ep, ip, buf, len);
}

int uroce_ep_xmit(struct uroce_ep *ep, const struct uroce_ipinfo *ip, const void *buf, size_t len)
{
	return ep_xmit(ep, ip, (uint8_t *)buf, len, true); /* not written: crc */
}

int uroce_ep_xmit_nocrc(struct uroce_ep *ep, const struct uroce_ipinfo *ip, uint8_t *buf,
			size_t len)
{
	return ep_xmit(ep, ip, buf, len, false);
}

/* any: read from the wildcard socket (IP_PKTINFO gives the destination);
 * else from the address socket, bound to it. */
static void dispatch(struct uroce_ep *ep, uint8_t *data, size_t len, const struct sockaddr_in *from,
		     const struct msghdr *mh, bool any)
{
	struct uroce_ctx *ctx = ep->ctx;
	struct uroce_ipinfo ip = {.family = AF_INET, .dst.v4 = ep->fast_addr};
	struct cmsghdr *cm;
	bool have_dst = !any;
	uint32_t gro;

	uroce_count(ctx, rx_bytes, len);
	for (cm = CMSG_FIRSTHDR((struct msghdr *)mh); cm; cm = CMSG_NXTHDR((struct msghdr *)mh, cm))
		if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			ip.dst.v4 = pi.ipi_addr;
			have_dst = true;
		} else if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS) {
			ip.tos = *(const uint8_t *)CMSG_DATA(cm);
		}
	ip.src.v4 = from->sin_addr;
	ip.sport = ntohs(from->sin_port);
	ip.dport = ep->port;
	if (!have_dst) {
		uroce_count(ctx, rx_drop_parse, 1);
		return;
	}
	/* A UDP GRO batch: segment k of a GSO send, checked with IPv4 ID k;
	 * a datagram alone first with the ID after the last one's (a cut GSO
	 * send's next segment, rx_ipid_seen) */
	gro = uroce_gro_size(mh);
	if (!gro || gro >= len) {
		gro = (uint32_t)len;
		if (!ep->std && !uroce_std_mode())
			ip.ipid = ep->rx->ipid_next;
	} else {
		uroce_count(ctx, rx_gro, 1);
	}
	uroce_count(ctx, rx_pkts, (len + gro - 1) / gro);
	for (size_t off = 0; off < len; off += gro, ip.ipid++) {
		size_t n = len - off < gro ? len - off : gro;

		if (uroce_fault_on(ctx) && uroce_fault_rx(ep, data + off, n, &ip, &fault_ops))
			continue;
		deliver_pkt(ep, data + off, n, &ip, true);
	}
	rx_counted(ep);
	if (gro < len) /* a whole batch: the next datagram starts another */
		ep->rx->ipid_next = 0;
}

/* ACK coalescing and deferral.
 *
 * The receive path marks what a QP owes (qp->resp.ack_pending) and one ACK
 * per QP goes out per recvmmsg batch.  When the batch was read by an
 * application thread inside ibv_poll_cq (uroce_ep_poll_app) and was small,
 * the ACK waits instead: a ping-pong's reply, posted right after the
 * completion is seen, then carries it in the same GSO send, and the ACK's
 * sendmsg is no longer between the packet's arrival and the application
 * seeing it.  An owed ACK leaves at the first of:
 *  - the next ibv_post_send on the endpoint (after the request it carries);
 *  - ibv_poll_cq once the CQs have been empty for 20 us (not sooner: the
 *    peer would complete and may turn to spinning on memory before our
 *    next request, which then waits for its progress thread; see cq.c),
 *    ibv_req_notify_cq, modify to ERR or RESET, destroy_qp, close_device,
 *    and process exit;
 *  - the progress engine's next look (at most UROCE_GRACE_SLICE_MS later);
 *  - UROCE_ACK_DEFER_PKTS packets on one QP, or a recvmmsg batch of
 *    UROCE_ACK_DEFER_BATCH datagrams (a stream: one ACK per batch is cheap
 *    there and the requester's window must keep moving).  A 64 KiB WRITE
 *    may still wait, at RoCE MTU 4096 (16 packets) and at 1024 (64, a
 *    veth or Ethernet MTU of 1500): a smaller bound let ib_write_lat's
 *    peer complete early and turn to spinning on memory, leaving the
 *    reply to its progress thread's look - 2 ms per iteration at 16
 *    packets on loopback, 223-2,292 us typical (median 260) at 64 across
 *    veth where 128 gives 109-233 (median 130; docs/latency.md,
 *    "Session 21").  The requester asks every UROCE_ACKREQ_EVERY (64)
 *    packets, and its window (256-512) is at least twice this bound. */
enum { UROCE_ACK_DEFER_BATCH = 8, UROCE_ACK_DEFER_PKTS = 128 };

static __thread bool deferring_acks;

bool uroce_ep_deferring_acks(void)
{
	return deferring_acks;
}

/* May this QP's ACK wait (qp->lock held)?  Not once the requester has
 * UROCE_ACK_DEFER_PKTS unacknowledged packets here. */
static __thread bool looking; /* the progress thread's look (uroce_ep_poll_look) */

static bool ack_may_wait(const struct uroce_qp *qp)
{
	if (qp->sk && qp->sk->nheld)
		return false; /* a selective ACK: a requester is recovering a loss */
	/* A look's ACK for a message still arriving: its requester may wait
	 * for it to send the rest, and no answer will carry it before that. */
	if (looking && (qp->resp.in_write || qp->resp.in_send))
		return false;
	return !qp->resp.acked ||
	       ((qp->resp.ack_psn - qp->resp.acked_psn) & UR_PSN_MASK) < UROCE_ACK_DEFER_PKTS;
}

/* Send the ACKs owed on ep, or with defer only those that may not wait,
 * with lazy not those a later packet will ask for (rx_lock held).  Lazy:
 * the progress thread's receive batches.  A stream's responder then sends
 * one ACK per UROCE_ACKREQ_EVERY packets (the requester asks that often,
 * and on the last packet of what it has queued) instead of one per batch;
 * an ACK left owed goes out at the latest when the thread stops polling
 * (uroce_ctx_send_owed_acks before it sleeps) or after UROCE_ACK_LAZY_NS
 * (a thread kept polling by other QPs' traffic).  UROCE_ACK_LAZY=0: one per
 * batch as before. */
static int lazy_mode = -1;
#define UROCE_ACK_LAZY_NS 200000ull /* and never owed longer than 200 us */

static bool ack_lazy(struct uroce_qp *qp, uint64_t *now)
{
	if (!uroce_resp_ack_lazy(qp))
		return false;
	if (!*now)
		*now = uroce_now_ns();
	if (!qp->resp.ack_lazy_ns)
		qp->resp.ack_lazy_ns = *now;
	return *now - qp->resp.ack_lazy_ns < UROCE_ACK_LAZY_NS;
}

static void flush_acks_(struct uroce_ep *ep, bool defer, bool lazy)
{
	bool owed = false, was = atomic_exchange(&ep->ack_owed, false);
	uint64_t now = 0;

	for (uint32_t s = 1; s < ep->slot_hi; s++) {
		struct uroce_qp *qp = ep->slot[s];

		if (qp && qp->resp.ack_pending) {
			pthread_mutex_lock(&qp->lock);
			if ((defer && ack_may_wait(qp)) || (lazy && ack_lazy(qp, &now)))
				owed = true;
			else
				uroce_resp_flush_ack(qp);
			pthread_mutex_unlock(&qp->lock);
		}
	}
	if (!owed)
		return;
	atomic_store(&ep->ack_owed, true);
	/* The progress engine must look within its grace slice: wake it if it
	 * sleeps on the sockets with nothing bounding the sleep (seq_cst
	 * store then load; it stores prog_deep then loads ack_owed). */
	if (!was && atomic_load(&ep->ctx->prog_deep))
		uroce_progress_wake(ep->ctx);
}

static void flush_acks(struct uroce_ep *ep, bool defer)
{
	flush_acks_(ep, defer, false);
}

/* The ACKs of a receive batch (see flush_acks_). */
static void flush_batch_acks(struct uroce_ep *ep, bool app, int n)
{
	flush_acks_(ep, app && n < UROCE_ACK_DEFER_BATCH,
		    !app && uroce_env_on("UROCE_ACK_LAZY", &lazy_mode));
}

void uroce_ep_send_owed_acks(struct uroce_ep *ep, bool wait)
{
	if (!ep || !atomic_load_explicit(&ep->ack_owed, memory_order_relaxed))
		return;
	if (wait)
		pthread_mutex_lock(&ep->rx_lock);
	else if (pthread_mutex_trylock(&ep->rx_lock))
		return;
	flush_acks(ep, false);
	uroce_ep_flush(ep);
	pthread_mutex_unlock(&ep->rx_lock);
}

bool uroce_ctx_acks_owed(struct uroce_ctx *ctx)
{
	int nep = atomic_load(&ctx->nep);

	for (int i = 0; i < nep; i++)
		if (atomic_load(&ctx->ep[i]->ack_owed))
			return true;
	return false;
}

void uroce_ctx_send_owed_acks(struct uroce_ctx *ctx, bool wait)
{
	int nep = atomic_load(&ctx->nep);

	for (int i = 0; i < nep; i++)
		uroce_ep_send_owed_acks(ctx->ep[i], wait);
}

/* A stream's sender waiting for ACKs.  ib_write_bw's requester posts until
 * its send queue is full and then polls its CQ, whose next completion can
 * only come with an ACK from the peer: spinning there (an empty recvmmsg,
 * sched_yield, again) was most of the requester's CPU time and, on a
 * machine with few cores, taken from the receiver it waits for (TCP's
 * sender sleeps in send() instead).  With at least UROCE_WAIT_INFLIGHT
 * packets in flight over UDP the next ACK is a window away, so the thread
 * sleeps in poll() on its sockets until one is readable, at most
 * UROCE_WAIT_MS (the progress thread keeps running the timers).  Packets
 * through shared memory wake it through the rings' doorbells (its own bit
 * of their "sleeping" flags, src/net/shm.c).  Not in a thread that polls
 * the CQs of other contexts too (two ends of a test in one process):
 * while it slept on one context's sockets the other's packets would wait,
 * their progress thread staying away from an application that polls
 * (progress.c). */
enum { UROCE_WAIT_INFLIGHT = 64, UROCE_WAIT_MS = 1 };
#define UROCE_WAIT_OTHER_NS 10000000ull /* another context polled: 10 ms */
static int wait_mode = -1;		/* UROCE_ACK_WAIT=0: spin as before (measurements) */

bool uroce_ctx_polled_alone(const struct uroce_ctx *ctx, uint64_t now)
{
	static __thread const struct uroce_ctx *seen; /* compared, never used */
	static __thread uint64_t other_ns;

	if (seen && seen != ctx)
		other_ns = now;
	seen = ctx;
	return now - other_ns >= UROCE_WAIT_OTHER_NS;
}

bool uroce_ctx_wait_acks(struct uroce_ctx *ctx, uint64_t now)
{
	struct pollfd pfd[2 * sizeof(ctx->ep) / sizeof(ctx->ep[0])];
	int nep = atomic_load(&ctx->nep), inflight = 0, npfd = 0, bell;

	if (!uroce_env_on("UROCE_ACK_WAIT", &wait_mode))
		return false;
	if (!uroce_ctx_polled_alone(ctx, now))
		return false;
	for (int i = 0; i < nep; i++) {
		struct uroce_ep *ep = ctx->ep[i];

		inflight += atomic_load_explicit(&ep->tx_inflight, memory_order_relaxed);
		pfd[npfd++] = (struct pollfd){.fd = ep->fd, .events = POLLIN};
	}
	if (inflight < UROCE_WAIT_INFLIGHT)
		return false;
	/* the same-host rings wake us through their doorbells (shm.c) */
	for (int i = 0; i < nep; i++) {
		if ((bell = uroce_shm_wait(ctx->ep[i], true)) == -2) {
			for (int j = 0; j <= i; j++)
				uroce_shm_wait(ctx->ep[j], false);
			return false;
		}
		if (bell >= 0)
			pfd[npfd++] = (struct pollfd){.fd = bell, .events = POLLIN};
	}
	/* not while owing ACKs: the peer may be waiting for them too */
	uroce_ctx_send_owed_acks(ctx, false);
	uroce_count(ctx, app_waits, 1);
	/* A poller sleeping here is polling still: the stamp says so until
	 * the wait's end, so the progress thread, which looks at the sockets
	 * of a poller that has paused (progress.c), does not take the ACK
	 * this thread waits for (ibv_poll_cq stamps the real time after). */
	if (atomic_load_explicit(&ctx->app_poll_ns, memory_order_relaxed))
		atomic_store_explicit(&ctx->app_poll_ns, now + UROCE_WAIT_MS * 1000000ull,
				      memory_order_relaxed);
	poll(pfd, (nfds_t)npfd, UROCE_WAIT_MS);
	for (int i = 0; i < nep; i++)
		uroce_shm_wait(ctx->ep[i], false);
	return true;
}

/* Count one receive batch (one writer, rx_lock held: no locked add). */
static void count_batch(struct uroce_ep *ep)
{
	atomic_store_explicit(&ep->rx_batches,
			      atomic_load_explicit(&ep->rx_batches, memory_order_relaxed) + 1u,
			      memory_order_relaxed);
}

/* ACK what a receive batch of n packets delivered now, not once the whole
 * budget is drained: a drain preempted on a busy host would hold the ACKs
 * back past the requester's ACK timeout. */
static void batch_done(struct uroce_ep *ep, int n, bool app)
{
	flush_batch_acks(ep, app, n);
	uroce_ep_flush(ep);				   /* and what they made the QPs send */
	__atomic_store_n(&ep->rx_ns, 0, __ATOMIC_RELAXED); /* the next batch reads it again */
}

/* One clock read per receive batch, and none for a batch that times no
 * round trip: an application's poll hands in the time it read before it
 * looked (uroce_cq_drive), which is when the batch was found. */
uint64_t uroce_ep_rx_clock(struct uroce_ep *ep)
{
	uint64_t now = __atomic_load_n(&ep->rx_ns, __ATOMIC_RELAXED);

	if (!now) {
		now = uroce_now_ns();
		__atomic_store_n(&ep->rx_ns, now, __ATOMIC_RELAXED);
	}
	return now;
}

/* Read prediction (docs/latency.md).  A recvmmsg that finds one datagram
 * goes on to try a second one, and that failed try (a second msghdr and
 * iovec copied in, the socket's queue locked) is on every ping-pong's
 * critical path.  After UROCE_RX_PREDICT reads in a row that returned one
 * datagram each, the endpoint is read with recvmsg; every
 * UROCE_RX_PROBE-th such read is a recvmmsg again, to see a stream start.
 * A datagram that is a lone ACK is followed by another look (poll_udp): an
 * owed ACK flushed on its own comes before the request it was owed for,
 * and an application that completes on the ACK and then spins on memory
 * (ib_write_lat) would leave that request to the progress thread.  The
 * progress thread leaves nothing behind: its epoll_wait is level-triggered.
 * UROCE_RX_PREDICT=0 turns it off (measurements). */
enum { UROCE_RX_PREDICT = 4, UROCE_RX_PROBE = 64 };
static int predict_mode = -1;

/* The plain read (docs/latency.md, "Session 15").  A predicted read of the
 * address socket with no control message to receive is a recvfrom: no
 * msghdr and iovec copied in, none of recvmsg's bookkeeping - 0.33 us less
 * for a read that returns a datagram and 0.22 us less for an empty look on
 * this machine (a /tmp microbenchmark, TSC medians).  What it cannot tell
 * is UDP_GRO's segment size: a GRO batch read with it would look like one
 * packet.  So the address socket reads plain only while UDP_GRO is off on
 * it, which it is from a ping-pong's predicted reads on: with it off the
 * kernel segments a GSO send at delivery and merges nothing, so every
 * datagram queued after the switch is one packet.  One queued before it
 * may be a batch, and the kernel gives a batch's segment size only while
 * UDP_GRO is on: the switch is kept only when the socket is empty right
 * after it (FIONREAD), else UDP_GRO goes back on and the next try is
 * UROCE_PLAIN_RETRY predicted reads later (doubling up to
 * UROCE_PLAIN_RETRY_MAX while tries fail).  UDP_GRO is on again as soon as
 * a read returns several datagrams (a stream: prediction ends).  Not with
 * IP_RECVTOS (a UD QP, a capture: the TOS comes in a control message), nor
 * on the wildcard socket (IP_PKTINFO).  UROCE_RX_PLAIN=0: recvmsg as
 * before (measurements). */
enum { UROCE_PLAIN_RETRY = 16, UROCE_PLAIN_RETRY_MAX = 1024 };
#define UROCE_PLAIN_HOLD_NS 1000000000ull
static int plain_mode = -1;

static void rx_gro(struct uroce_ep *ep, bool on)
{
	int v = on;

	if (setsockopt(ep->fd, SOL_UDP, UDP_GRO, &v, sizeof(v)))
		ur_trace("UDP_GRO %d: %s", v, strerror(errno));
	else
		ep->rx->gro_off = !on;
}

/* May a predicted read be plain (UDP_GRO off, no control message)? */
static bool rx_plain(const struct uroce_ep *ep)
{
	return ep->rx->gro_off && !__atomic_load_n(&ep->rx_tos, __ATOMIC_RELAXED);
}

/* After a predicted read that returned a datagram (read whole, UDP_GRO
 * on): the socket is most likely empty now, the time to turn UDP_GRO off. */
static void rx_plain_try(struct uroce_ep *ep)
{
	struct uroce_ep_rx *rx = ep->rx;
	int queued = 0;

	if (rx->gro_off || ep->fd_any < 0 || !ep->gso ||
	    __atomic_load_n(&ep->rx_tos, __ATOMIC_RELAXED) ||
	    !uroce_env_on("UROCE_RX_PLAIN", &plain_mode) || (rx->plain_try && --rx->plain_try))
		return;
	if (rx->plain_hold_ns && uroce_now_ns() < rx->plain_hold_ns) {
		rx->plain_try = UROCE_PLAIN_RETRY;
		return;
	}
	rx_gro(ep, false);
	if (!rx->gro_off)
		return;
	if (ioctl(ep->fd, FIONREAD, &queued) || queued) {
		rx_gro(ep, true); /* what is queued may be a batch: read it whole */
		rx->plain_wait = rx->plain_wait ? rx->plain_wait * 2 : UROCE_PLAIN_RETRY;
		if (rx->plain_wait > UROCE_PLAIN_RETRY_MAX)
			rx->plain_wait = UROCE_PLAIN_RETRY_MAX;
		rx->plain_try = rx->plain_wait;
		return;
	}
	rx->plain_wait = 0;
	uroce_count(ep->ctx, rx_plain_on, 1);
}

static int rx_read(struct uroce_ep *ep, int want, bool any)
{
	struct uroce_ep_rx *rx = ep->rx;
	int n;

	if (any) { /* the wildcard beside an address socket: rare, no prediction */
		rx->one = false;
		return recvmmsg(ep->fd_any, rx->msg, (unsigned int)want, MSG_DONTWAIT, NULL);
	}
	/* A GSO send came cut into its segments while UDP_GRO was off (each
	 * segment after the first then costs its ICRC twice, and is not
	 * placed as it is checked): UDP_GRO on again, and the next try in
	 * UROCE_PLAIN_RETRY predicted reads.  A send of 3 packets or more is
	 * a stream starting (2: an owed ACK and a request that left together,
	 * which a ping-pong has now and then): read in batches, and no plain
	 * reads for UROCE_PLAIN_HOLD_NS. */
	if (rx->cut_seen) {
		if (rx->gro_off) {
			rx_gro(ep, true);
			rx->plain_try = UROCE_PLAIN_RETRY;
			if (rx->cut_seen >= 2) {
				rx->singles = 0;
				rx->plain_hold_ns = uroce_now_ns() + UROCE_PLAIN_HOLD_NS;
			}
		}
		rx->cut_seen = 0;
	}

	rx->one = uroce_env_on("UROCE_RX_PREDICT", &predict_mode) &&
		  rx->singles >= UROCE_RX_PREDICT && ++rx->predicted % UROCE_RX_PROBE;
	if (rx->one) {
		struct msghdr *h = &rx->msg[0].msg_hdr;
		ssize_t len;

		if (rx_plain(ep)) {
			socklen_t fl = sizeof(rx->from[0]);

			len = recvfrom(ep->fd, rx->data[0], RX_BUFSZ, MSG_DONTWAIT,
				       (struct sockaddr *)&rx->from[0], &fl);
			if (len >= 0) { /* as recvmsg would have left the header */
				h->msg_controllen = 0;
				h->msg_flags = 0;
			}
		} else if ((len = recvmsg(ep->fd, h, MSG_DONTWAIT)) >= 0) {
			rx_plain_try(ep);
		}
		if (len < 0)
			return -1;
		rx->msg[0].msg_len = (unsigned int)len;
		return 1;
	}
	n = recvmmsg(ep->fd, rx->msg, (unsigned int)want, MSG_DONTWAIT, NULL);
	if (n > 0)
		rx->singles = n == 1 ? rx->singles + 1 : 0;
	if (n > 1 && rx->gro_off) /* a stream: its batches whole again */
		rx_gro(ep, true);
	return n;
}

/* Headers 0..n-1 ready for the next read: an empty read leaves them as
 * they were, so a look that finds nothing costs no setup. */
static void rx_reset(struct uroce_ep_rx *rx, int n)
{
	for (int i = 0; i < n; i++) {
		struct msghdr *h = &rx->msg[i].msg_hdr;

		h->msg_name = &rx->from[i];
		h->msg_namelen = sizeof(rx->from[i]);
		h->msg_control = rx->ctl[i].buf;
		h->msg_controllen = sizeof(rx->ctl[i].buf);
		h->msg_flags = 0;
	}
}

/* The datagram read is one packet, an RC or XRC ACK (or a selective one) */
static bool lone_ack(const struct uroce_ep_rx *rx)
{
	const struct msghdr *mh = &rx->msg[0].msg_hdr;
	uint32_t gro = uroce_gro_size(mh);
	uint8_t op = rx->msg[0].msg_len ? rx->data[0][0] : 0;

	return (op == UR_OPC_ACK || op == UR_OPC_SACK || op == (UR_TR_XRC | UR_OPC_ACK)) &&
	       (!gro || gro >= rx->msg[0].msg_len);
}

/* After an application's predicted read: look again, unless the datagram
 * completed something the poller may be waiting for (the reply of a
 * ping-pong, a READ response) and was not a lone ACK.  A datagram that
 * completes nothing (a UC WRITE's first packet, a WRITE without immediate)
 * may have more behind it that no completion will come to fetch. */
static bool read_on(const struct uroce_ep_rx *rx, unsigned long pushes)
{
	return uroce_cq_pushes() == pushes || lone_ack(rx);
}

/* The UDP socket (any: the wildcard one beside an address socket):
 * recvmmsg batches until budget or an empty read (rx_lock held). */
static int poll_udp(struct uroce_ep *ep, int budget, bool app, bool any)
{
	struct uroce_ep_rx *rx = ep->rx;
	unsigned long pushes;
	int done = 0;

	while (done < budget) {
		int want = budget - done < RX_BATCH ? budget - done : RX_BATCH;
		int n;

		/* the kernel rewrote the headers of the datagrams it returned */
		rx_reset(rx, rx->used);
		rx->used = 0;
		n = rx_read(ep, want, any);
		uroce_shm_udp_seen(ep, n > 0);
		if (n <= 0)
			break;
		count_batch(ep);
		rx->used = n;
		pushes = uroce_cq_pushes();
		for (int i = 0; i < n; i++) {
			if (rx->msg[i].msg_hdr.msg_flags & MSG_TRUNC) {
				uroce_count(ep->ctx, rx_drop_parse, 1);
				continue;
			}
			dispatch(ep, rx->data[i], rx->msg[i].msg_len, &rx->from[i],
				 &rx->msg[i].msg_hdr, any || ep->fd_any < 0);
		}
		done += n;
		batch_done(ep, n, app);
		if (n < want && !(rx->one && app && read_on(rx, pushes)))
			break;
	}
	return done;
}

/* A link's first record: the sender's packets before it went over UDP,
 * so they are delivered first (shm.c calls this, rx_lock held). */
static void shm_udp_first(struct uroce_ep *ep)
{
	poll_udp(ep, 16 * RX_BATCH, deferring_acks, false);
	if (ep->fd_any >= 0)
		poll_udp(ep, 16 * RX_BATCH, deferring_acks, true);
}

/* The same-host rings (src/net/shm.c): batches of up to RX_BATCH packets,
 * each ACKed or deferred as one recvmmsg batch would be. */
static int poll_shm(struct uroce_ep *ep, int budget, bool app)
{
	int done = 0;

	while (ep->shm && done < budget) {
		int want = budget - done < RX_BATCH ? budget - done : RX_BATCH;
		int n = uroce_shm_rx(ep, want, deliver_shm, shm_udp_first);

		if (n <= 0)
			break;
		count_batch(ep);
		done += n;
		batch_done(ep, n, app);
		if (n < want)
			break;
	}
	return done;
}

/* app: an application thread in ibv_poll_cq (ACKs may be deferred);
 * every_udp: read the UDP socket on every call, even while the endpoint
 * has same-host peers (the progress thread woken by the socket); any:
 * read the wildcard socket beside an address socket now (a wake-up by its
 * own event, a look), not only on its cadence below. */
static int ep_poll(struct uroce_ep *ep, int budget, bool app, bool every_udp, bool any,
		   uint64_t now)
{
	int done = 0, released = 0;
	bool udp;

	if (pthread_mutex_trylock(&ep->rx_lock))
		return -EBUSY; /* another thread is draining this socket */
	__atomic_store_n(&ep->rx_ns, now, __ATOMIC_RELAXED);
	deferring_acks = app;
	done = poll_shm(ep, budget, app);
	udp = every_udp || uroce_shm_udp_due(ep);
	if (udp)
		done += poll_udp(ep, budget - done, app, false);
	/* The wildcard socket beside an address socket (see addr_sock_open):
	 * when asked (any), else every UROCE_ANY_LOOKS-th poll, or, on an
	 * endpoint with same-host links, whose address socket is read every
	 * SHM_UDP_EVERY_NS only, with every UROCE_ANY_LOOKS_SHM-th of those
	 * reads.  Every 32nd poll was a recvmmsg every 3-4 us of a same-host
	 * ping-pong's wait (docs/design.md, "The per-message CPU of the
	 * same-host wire"). */
	if (ep->fd_any >= 0 && budget > done &&
	    (any || (uroce_shm_udp_paced(ep) ? udp && ++ep->any_looks % UROCE_ANY_LOOKS_SHM == 0
					     : ++ep->any_looks % UROCE_ANY_LOOKS == 0)))
		done += poll_udp(ep, budget - done, app, true);
	if (uroce_fault_on(ep->ctx))
		released = uroce_fault_release(ep, &fault_ops);
	if (released)
		flush_acks(ep, app);
	else if (!app && atomic_load_explicit(&ep->ack_owed, memory_order_relaxed))
		flush_batch_acks(ep, app, 0);
	deferring_acks = false;
	uroce_ep_flush(ep); /* READ responses, atomic ACKs, window refills */
	__atomic_store_n(&ep->rx_ns, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&ep->rx_lock);
	return done;
}

int uroce_ep_poll(struct uroce_ep *ep, int budget)
{
	int n = ep_poll(ep, budget, false, true, true, 0);

	return n < 0 ? 0 : n;
}

int uroce_ep_poll_woken(void *ev, int budget)
{
	bool any = (uintptr_t)ev & EP_EV_ANY;

	return ep_poll((struct uroce_ep *)(void *)((char *)ev - (any ? EP_EV_ANY : 0)), budget,
		       false, true, any, 0);
}

int uroce_ep_poll_spin(struct uroce_ep *ep, int budget)
{
	int n = ep_poll(ep, budget, false, false, false, 0);

	return n < 0 ? 0 : n;
}

int uroce_ep_poll_look(struct uroce_ep *ep, int budget)
{
	int n;

	looking = true;
	n = ep_poll(ep, budget, true, true, true, 0);
	looking = false;
	return n;
}

int uroce_ep_poll_app(struct uroce_ep *ep, int budget, uint64_t now)
{
	int n = ep_poll(ep, budget, true, false, false, now);

	return n < 0 ? 0 : n;
}

/* Tests and fuzzing (tests/fuzz/fuzz_rx.c, tests/unit/test_hostile.c): one
 * datagram from ip enters the receive path as if recvmmsg had returned it
 * (no fault injection); the ACKs it leaves pending are sent. */
void uroce_ep_inject(struct uroce_ep *ep, uint8_t *data, size_t len, const struct uroce_ipinfo *ip)
{
	pthread_mutex_lock(&ep->rx_lock);
	uroce_count(ep->ctx, rx_pkts, 1);
	uroce_count(ep->ctx, rx_bytes, len);
	deliver(ep, data, len, ip);
	flush_acks(ep, false);
	uroce_ep_flush(ep);
	pthread_mutex_unlock(&ep->rx_lock);
}

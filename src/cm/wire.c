/* The transport of CM MADs (native mode, docs/cm.md).
 *
 * A MAD travels as a RoCEv2 UD packet from QP1 to QP1: BTH (UD SEND_ONLY,
 * P_Key 0xFFFF, destination QP 1), DETH (the GSI Q_Key 0x80010000, source
 * QP 1), the MAD and the ICRC, in a UDP datagram.  A listener's QP1 is an
 * unconnected UDP socket on <address>:<rdma_cm port>; every process has one
 * more (the active socket, an ephemeral port) for everything else.  The
 * sockets send with IP_PKTINFO naming the source address, so the ICRC can
 * be computed over the IP header the kernel writes (ID 0, DF: as the data
 * path, docs/design.md), and report ICMP errors through IP_RECVERR.
 *
 * The CM thread waits in epoll for datagrams and for the earliest timer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cm.h"
#include "transport/pkt.h"

#define BTH_OP_UD_SEND_ONLY 0x64
#define GSI_QKEY	    0x80010000u
#define UR_DETH_BYTES	    8

uint64_t cm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void ipinfo(struct uroce_ipinfo *ip, struct in_addr src, uint16_t sport, struct in_addr dst,
		   uint16_t dport)
{
	memset(ip, 0, sizeof(*ip));
	ip->family = AF_INET;
	ip->src.v4 = src;
	ip->dst.v4 = dst;
	ip->sport = sport;
	ip->dport = dport;
}

void cm_pkt_build(uint8_t *pkt, const uint8_t *mad, struct in_addr src, uint16_t sport,
		  struct in_addr dst, uint16_t dport, uint32_t psn)
{
	struct uroce_ipinfo ip;
	uint32_t icrc, n = CM_PKT_BYTES - UR_ICRC_BYTES;
	uint8_t *bth = pkt, *deth = pkt + UR_BTH_BYTES;

	memset(pkt, 0, UR_BTH_BYTES + UR_DETH_BYTES);
	bth[0] = BTH_OP_UD_SEND_ONLY;
	bth[2] = 0xff; /* P_Key 0xFFFF */
	bth[3] = 0xff;
	bth[7] = 1; /* destination QP 1 */
	bth[9] = (uint8_t)(psn >> 16);
	bth[10] = (uint8_t)(psn >> 8);
	bth[11] = (uint8_t)psn;
	deth[0] = (uint8_t)(GSI_QKEY >> 24);
	deth[1] = (uint8_t)(GSI_QKEY >> 16);
	deth[7] = 1; /* source QP 1 */
	memcpy(pkt + UR_BTH_BYTES + UR_DETH_BYTES, mad, CM_MAD_BYTES);
	ipinfo(&ip, src, sport, dst, dport);
	icrc = htole32(uroce_icrc_compute(&ip, pkt, n));
	memcpy(pkt + n, &icrc, UR_ICRC_BYTES);
}

const uint8_t *cm_pkt_parse(const uint8_t *pkt, size_t len, struct in_addr src, uint16_t sport,
			    struct in_addr dst, uint16_t dport)
{
	struct uroce_ipinfo ip;
	uint32_t wire, n;

	if (len != CM_PKT_BYTES) {
		__atomic_add_fetch(&cm_stats.drop_short, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	n = (uint32_t)len - UR_ICRC_BYTES;
	ipinfo(&ip, src, sport, dst, dport);
	memcpy(&wire, pkt + n, UR_ICRC_BYTES);
	if (le32toh(wire) != uroce_icrc_compute(&ip, pkt, n)) {
		__atomic_add_fetch(&cm_stats.drop_icrc, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	return cm_pkt_mad(pkt, len);
}

/* The MAD of a packet whose ICRC was checked (by the data path in
 * standard-port mode): BTH and DETH must say UD to QP1 from QP1. */
const uint8_t *cm_pkt_mad(const uint8_t *pkt, size_t len)
{
	if (len != CM_PKT_BYTES) {
		__atomic_add_fetch(&cm_stats.drop_short, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	/* UD SEND_ONLY, no pad, to QP1 from QP1 with the GSI Q_Key */
	if (pkt[0] != BTH_OP_UD_SEND_ONLY || (pkt[1] & 0x30) || pkt[5] || pkt[6] || pkt[7] != 1 ||
	    pkt[12] != 0x80 || pkt[13] != 0x01 || pkt[14] || pkt[15] || pkt[17] || pkt[18] ||
	    pkt[19] != 1) {
		__atomic_add_fetch(&cm_stats.drop_bth, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	return pkt + UR_BTH_BYTES + UR_DETH_BYTES;
}

struct cm_sock *cm_sock_open(struct in_addr addr, uint16_t port, bool reuse, int *err)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr = addr, .sin_port = htons(port)};
	socklen_t sl = sizeof(sin);
	int one = 1, pmtu = IP_PMTUDISC_DO, rcvbuf = 8 << 20;
	struct epoll_event ev = {.events = EPOLLIN};
	struct cm_sock *s = calloc(1, sizeof(*s));

	if (!s) {
		*err = ENOMEM;
		return NULL;
	}
	s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->fd < 0)
		goto fail;
	setsockopt(s->fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	setsockopt(s->fd, IPPROTO_IP, IP_RECVERR, &one, sizeof(one));
	setsockopt(s->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	/* room for a burst of connection requests (cmtime -c 10000) */
	if (setsockopt(s->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
		setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (reuse)
		setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s->fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    getsockname(s->fd, (struct sockaddr *)&sin, &sl))
		goto fail;
	s->addr = addr;
	s->port = ntohs(sin.sin_port);
	ev.data.ptr = s;
	if (epoll_ctl(cm.epfd, EPOLL_CTL_ADD, s->fd, &ev))
		goto fail;
	return s;
fail:
	*err = errno;
	if (s->fd >= 0)
		close(s->fd);
	free(s);
	return NULL;
}

/* Under cm.lock.  The CM thread may hold an epoll event for s: the memory
 * is freed by that thread before its next epoll_wait (sock_reap). */
void cm_sock_close(struct cm_sock *s)
{
	if (!s)
		return;
	epoll_ctl(cm.epfd, EPOLL_CTL_DEL, s->fd, NULL);
	close(s->fd);
	s->fd = -1;
	s->listener = NULL;
	s->next_dead = cm.dead_socks;
	cm.dead_socks = s;
}

static void sock_reap(void)
{
	struct cm_sock *s;

	while ((s = cm.dead_socks)) {
		cm.dead_socks = s->next_dead;
		free(s);
	}
}

int cm_send_mad(struct cm_sock *s, struct in_addr src, const struct sockaddr_in *dst,
		const uint8_t *mad)
{
	uint8_t pkt[CM_PKT_BYTES];
	char cbuf[CMSG_SPACE(sizeof(struct in_pktinfo))] = {0};
	struct iovec iov = {.iov_base = pkt, .iov_len = sizeof(pkt)};
	struct msghdr mh = {
	    .msg_name = (void *)dst,
	    .msg_namelen = sizeof(*dst),
	    .msg_iov = &iov,
	    .msg_iovlen = 1,
	    .msg_control = cbuf,
	    .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	struct in_pktinfo *pi = (struct in_pktinfo *)CMSG_DATA(c);
	static uint32_t psn;

	if (s->addr.s_addr != INADDR_ANY)
		src = s->addr;
	c->cmsg_level = IPPROTO_IP;
	c->cmsg_type = IP_PKTINFO;
	c->cmsg_len = CMSG_LEN(sizeof(*pi));
	pi->ipi_spec_dst = src;
	cm_pkt_build(pkt, mad, src, s->port, dst->sin_addr, ntohs(dst->sin_port),
		     __atomic_add_fetch(&psn, 1, __ATOMIC_RELAXED) & 0xffffff);
	if (sendmsg(s->fd, &mh, MSG_DONTWAIT) < 0) {
		ur_dbg("CM send to %s:%u: %m", inet_ntoa(dst->sin_addr), ntohs(dst->sin_port));
		return -errno;
	}
	__atomic_add_fetch(&cm_stats.tx, 1, __ATOMIC_RELAXED);
	return 0;
}

int cm_xmit(struct ibv_context *ctx, struct in_addr src, const struct sockaddr_in *dst,
	    const uint8_t *mad)
{
	static uint32_t psn;
	uint8_t pkt[CM_PKT_BYTES];
	int ret;

	if (!cm.std)
		return cm_send_mad(cm.asock, src, dst, mad);
	if (!ctx)
		return -ENODEV;
	cm_pkt_build(pkt, mad, src, 4791, dst->sin_addr, 4791,
		     __atomic_add_fetch(&psn, 1, __ATOMIC_RELAXED) & 0xffffff);
	ret = uroce_cm_qp1_send(ctx, dst->sin_addr.s_addr, pkt, sizeof(pkt));
	if (!ret)
		__atomic_add_fetch(&cm_stats.tx, 1, __ATOMIC_RELAXED);
	return ret;
}

/* Standard-port mode: a packet for QP1 from the data path's receive
 * thread (its receive lock held): queue it for the CM thread. */
static void std_rx(void *arg, const uint8_t *pkt, size_t len, uint32_t src, uint32_t dst)
{
	struct cm_rxq *q;

	__atomic_add_fetch(&cm_stats.rx, 1, __ATOMIC_RELAXED);
	if (len != CM_PKT_BYTES || !(q = malloc(sizeof(*q)))) {
		__atomic_add_fetch(&cm_stats.drop_short, 1, __ATOMIC_RELAXED);
		return;
	}
	q->next = NULL;
	q->ctx = arg;
	q->from = (struct sockaddr_in){
	    .sin_family = AF_INET, .sin_addr.s_addr = src, .sin_port = htons(4791)};
	q->to.s_addr = dst;
	q->len = len;
	memcpy(q->pkt, pkt, len);
	pthread_mutex_lock(&cm.qlock);
	*cm.rxq_tail = q;
	cm.rxq_tail = &q->next;
	pthread_mutex_unlock(&cm.qlock);
	cm_wake();
}

static void std_drain(void)
{
	struct cm_rxq *q, *n;

	pthread_mutex_lock(&cm.qlock);
	q = cm.rxq;
	cm.rxq = NULL;
	cm.rxq_tail = &cm.rxq;
	pthread_mutex_unlock(&cm.qlock);
	for (; q; q = n) {
		const uint8_t *mad = cm_pkt_mad(q->pkt, q->len);

		n = q->next;
		if (mad) {
			pthread_mutex_lock(&cm.lock);
			cm_rx(NULL, q->ctx, mad, CM_MAD_BYTES, &q->from, q->to);
			pthread_mutex_unlock(&cm.lock);
		}
		free(q);
	}
}

int cm_std_attach(struct ibv_context *ctx)
{
	int ret = uroce_cm_qp1_attach(ctx, std_rx, ctx);

	if (ret)
		ur_err("rdma_cm: %s: cannot receive QP1 on UDP 4791 (standard-port mode): %s",
		       ibv_get_device_name(ctx->device), strerror(-ret));
	return ret;
}

/* ICMP errors (port unreachable: nobody listens there any more); cm.lock held. */
static void sock_errqueue(struct cm_sock *s)
{
	for (int i = 0; i < 64; i++) {
		uint8_t buf[CM_PKT_BYTES];
		char cbuf[512];
		struct sockaddr_in dst;
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr mh = {.msg_name = &dst,
				    .msg_namelen = sizeof(dst),
				    .msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};

		if (recvmsg(s->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			return;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			struct sock_extended_err *ee = (struct sock_extended_err *)CMSG_DATA(c);

			if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_RECVERR)
				continue;
			if (ee->ee_origin == SO_EE_ORIGIN_ICMP && ee->ee_errno == ECONNREFUSED) {
				__atomic_add_fetch(&cm_stats.icmp, 1, __ATOMIC_RELAXED);
				cm_rx_icmp(&dst);
			}
		}
	}
}

/* cm.lock held (the socket cannot be closed under us). */
static void sock_readable(struct cm_sock *s)
{
	for (int i = 0; i < 256; i++) {
		uint8_t pkt[CM_PKT_BYTES + 1];
		char cbuf[CMSG_SPACE(sizeof(struct in_pktinfo))];
		struct sockaddr_in from;
		struct iovec iov = {.iov_base = pkt, .iov_len = sizeof(pkt)};
		struct msghdr mh = {.msg_name = &from,
				    .msg_namelen = sizeof(from),
				    .msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};
		struct in_addr to = s->addr;
		const uint8_t *mad;
		ssize_t n = recvmsg(s->fd, &mh, MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return;
			sock_errqueue(s); /* ECONNREFUSED and friends */
			continue;
		}
		__atomic_add_fetch(&cm_stats.rx, 1, __ATOMIC_RELAXED);
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO)
				to = ((struct in_pktinfo *)CMSG_DATA(c))->ipi_addr;
		if (from.sin_family != AF_INET || (mh.msg_flags & MSG_TRUNC)) {
			__atomic_add_fetch(&cm_stats.drop_short, 1, __ATOMIC_RELAXED);
			continue;
		}
		mad =
		    cm_pkt_parse(pkt, (size_t)n, from.sin_addr, ntohs(from.sin_port), to, s->port);
		if (!mad)
			continue;
		cm_rx(s, NULL, mad, CM_MAD_BYTES, &from, to);
	}
}

/* ---- timers: a list of the ids with a message waiting for an answer ---- */
void cm_timer_arm(struct cm_id *cid, uint32_t timeout_ms, int retries)
{
	cid->timeout_ms = timeout_ms;
	cid->retries_left = retries;
	cid->deadline_ms = cm_now_ms() + timeout_ms;
	if (!cid->timer_on) {
		cid->timer_on = true;
		cid->tprev = NULL;
		cid->tnext = cm.timers;
		if (cm.timers)
			cm.timers->tprev = cid;
		cm.timers = cid;
	}
	cm_wake();
}

void cm_timer_stop(struct cm_id *cid)
{
	if (!cid->timer_on)
		return;
	if (cid->tprev)
		cid->tprev->tnext = cid->tnext;
	else
		cm.timers = cid->tnext;
	if (cid->tnext)
		cid->tnext->tprev = cid->tprev;
	cid->tnext = cid->tprev = NULL;
	cid->timer_on = false;
}

/* Fire what is due; the time until the next deadline, or -1. */
static int timers_run(void)
{
	uint64_t now = cm_now_ms(), next = UINT64_MAX;
	struct cm_id *c, *n;

	for (c = cm.timers; c; c = n) {
		n = c->tnext;
		if (c->deadline_ms <= now)
			cm_timer_fire(c); /* may stop or re-arm c */
	}
	for (c = cm.timers; c; c = c->tnext)
		if (c->deadline_ms < next)
			next = c->deadline_ms;
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now);
}

void cm_wake(void)
{
	uint64_t one = 1;

	if (cm.wakefd >= 0 && write(cm.wakefd, &one, sizeof(one)) < 0)
		ur_dbg("CM wake: %m");
}

static void *cm_thread(void *arg)
{
	struct epoll_event evs[32];
	int timeout;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&cm.lock);
		sock_reap(); /* no event of this loop's epoll_wait can name them */
		timeout = timers_run();
		pthread_mutex_unlock(&cm.lock);
		int n = epoll_wait(cm.epfd, evs, 32, timeout);

		for (int i = 0; i < n; i++) {
			struct cm_sock *s = evs[i].data.ptr;
			uint64_t v;

			if (!s) {
				if (read(cm.wakefd, &v, sizeof(v)) < 0)
					ur_dbg("CM wake read: %m");
				if (cm.std)
					std_drain();
				continue;
			}
			pthread_mutex_lock(&cm.lock);
			if (s->fd >= 0 && (evs[i].events & EPOLLERR))
				sock_errqueue(s);
			if (s->fd >= 0 && (evs[i].events & EPOLLIN))
				sock_readable(s);
			pthread_mutex_unlock(&cm.lock);
		}
	}
	return NULL;
}

/* Called with cm.lock held, once. */
int cm_wire_start(void)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	int err = 0;

	pthread_mutex_init(&cm.qlock, NULL);
	cm.rxq_tail = &cm.rxq;
	cm.epfd = epoll_create1(EPOLL_CLOEXEC);
	cm.wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (cm.epfd < 0 || cm.wakefd < 0 || epoll_ctl(cm.epfd, EPOLL_CTL_ADD, cm.wakefd, &ev))
		return -errno;
	cm.asock = cm_sock_open((struct in_addr){INADDR_ANY}, 0, false, &err);
	if (!cm.asock)
		return -err;
	err = pthread_create(&cm.thread, NULL, cm_thread, NULL);
	if (err)
		return -err;
	pthread_detach(cm.thread);
	return 0;
}

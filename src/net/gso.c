/* Batched transmission with UDP GSO, batched reception with UDP GRO.
 *
 * Packets a thread sends back to back to the same destination (the packets
 * of a send window, READ responses, a burst of ACKs) are collected in the
 * endpoint's transmit batch and leave in one sendmsg() with UDP_SEGMENT: the
 * kernel cuts the buffer into datagrams of gso_size bytes (the last may be
 * shorter), one route lookup and one system call for up to 64 packets -
 * or, when the batch holds several such GSO datagrams (packets of other
 * sizes or destinations), one sendmmsg() for up to GSO_MAX_GROUPS of them.
 * Each segment is a complete RoCEv2 packet with its own BTH and ICRC.
 *
 * The ICRC covers the IPv4 ID.  An unconnected DF socket sends ID 0, and
 * when Linux segments a GSO datagram it numbers the segments' IDs 0, 1, 2...
 * (inet_gso_segment), so segment k's ICRC is computed with ID k: right for
 * the packets as they appear on any wire.  A receiving socket with UDP_GRO
 * gets the batch unsegmented (loopback and veth pass it through) plus its
 * segment size, and checks segment k with ID k; a receiver that gets the
 * segments one by one does not know k, and finds it with
 * uroce_icrc_ok_any_ipid() (see endpoint.c).
 *
 * UROCE_GSO=0 turns batching off (every packet its own sendmsg): for
 * captures on lo, where tshark sees a GSO batch as one large datagram.
 */
#include <errno.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "uroce.h"
#include "net/pcap.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define GSO_MAX_SEGS   64
#define GSO_MAX_BYTES  63000 /* a UDP datagram carries at most 65507 bytes */
#define GSO_MAX_GROUPS UROCE_UDP_MAX_MSGS
#define GSO_BUF_BYTES  (4 * GSO_MAX_BYTES)

/* One GSO datagram of the batch: packets of one size (the last may be
 * shorter) to one destination. */
struct uroce_tx_group {
	struct uroce_ipinfo ip;
	uint32_t off, bytes; /* where in buf */
	uint32_t seg;	     /* segment size: the first packet's length */
	int nseg;
	bool short_tail; /* the last segment is shorter: the group is closed */
};

/* The transmit batch: up to GSO_MAX_GROUPS datagrams, sent with one
 * sendmmsg.  A packet that cannot join the open group (another size or
 * destination: the RETH of a WRITE_FIRST makes it 16 bytes longer than
 * the MIDDLE and LAST packets after it) starts a new group instead of a
 * new system call: ib_write_bw at 8 KiB (FIRST + LAST) paid one sendmsg
 * per message. */
struct uroce_ep_tx {
	int ngroup;
	uint32_t used;
	struct uroce_tx_group g[GSO_MAX_GROUPS];
	uint8_t buf[GSO_BUF_BYTES];
};

static int gso_mode = -1; /* -1 unknown, 0 off, 1 on */

static bool gso_wanted(void)
{
	if (gso_mode < 0) {
		const char *v = getenv("UROCE_GSO");

		gso_mode = !(v && (!strcmp(v, "0") || !strcasecmp(v, "off")));
	}
	return gso_mode;
}

void uroce_gso_setup(struct uroce_ep *ep)
{
	int one = 1;

	pthread_mutex_init(&ep->tx_lock, NULL);
	if (!gso_wanted())
		return;
	/* receive batches whole; harmless where the kernel lacks UDP_GRO */
	if (setsockopt(ep->fd, SOL_UDP, UDP_GRO, &one, sizeof(one)))
		ur_dbg("UDP_GRO not available: %s", strerror(errno));
	ep->tx = calloc(1, sizeof(*ep->tx));
	ep->gso = ep->tx != NULL;
}

void uroce_gso_free(struct uroce_ep *ep)
{
	free(ep->tx);
	ep->tx = NULL;
	pthread_mutex_destroy(&ep->tx_lock);
}

static bool same_dest(const struct uroce_ipinfo *a, const struct uroce_ipinfo *b)
{
	return a->dst.v4.s_addr == b->dst.v4.s_addr && a->src.v4.s_addr == b->src.v4.s_addr &&
	       a->dport == b->dport && a->sport == b->sport && a->tos == b->tos;
}

/* A group the kernel refused to segment: its packets one by one, and from
 * now on no batching on this endpoint. */
static void send_unbatched(struct uroce_ep *ep, const struct uroce_tx_group *g, const uint8_t *buf,
			   int err)
{
	ur_warn("UDP GSO refused (%s): sending packets one by one", strerror(err));
	ep->gso = false;
	for (uint32_t off = 0; off < g->bytes; off += g->seg) {
		uint32_t n = g->bytes - off < g->seg ? g->bytes - off : g->seg;

		uroce_udp_send(ep, &g->ip, buf + off, n, 0);
	}
}

static void flush_locked(struct uroce_ep *ep)
{
	struct uroce_ep_tx *tx = ep->tx;
	struct uroce_udp_msg m[GSO_MAX_GROUPS];
	int sent = 0;

	if (!tx->ngroup)
		return;
	for (int i = 0; i < tx->ngroup; i++)
		m[i] = (struct uroce_udp_msg){.ip = &tx->g[i].ip,
					      .buf = tx->buf + tx->g[i].off,
					      .len = tx->g[i].bytes,
					      .gso_size = tx->g[i].nseg > 1 ? tx->g[i].seg : 0};
	if (tx->ngroup > 1)
		sent = uroce_udp_send_many(ep, m, tx->ngroup);
	/* one at a time: a single group, or what sendmmsg left (an error
	 * on one datagram is reported, and dealt with, by uroce_udp_send) */
	for (int i = sent; i < tx->ngroup; i++) {
		int err = uroce_udp_send(ep, m[i].ip, m[i].buf, m[i].len, m[i].gso_size);

		if (err == EINVAL || err == EIO || err == EOPNOTSUPP)
			send_unbatched(ep, &tx->g[i], m[i].buf, err);
	}
	tx->ngroup = 0;
	tx->used = 0;
}

/* Segment k goes out with IPv4 ID k: turn the packet's ICRC (computed for
 * ID 0) into the one for ID k.  CRC-32 is affine, so the change depends on
 * the length and k only, not on the content; applying the change rather
 * than recomputing keeps a corrupted packet corrupted (UROCE_FAULT).  The
 * per-thread cache holds the changes for one packet length. */
static void ipid_fixup(const struct uroce_ipinfo *ip, uint8_t *p, uint32_t len)
{
	static __thread uint32_t cache_len, delta[GSO_MAX_SEGS];
	static __thread uint64_t have;
	struct uroce_ipinfo ip0 = *ip;
	unsigned int k = ip->ipid;
	uint32_t wire;

	if (cache_len != len) {
		cache_len = len;
		have = 0;
	}
	if (!(have & (1ull << k))) {
		ip0.ipid = 0;
		delta[k] =
		    uroce_icrc_compute(ip, p, len - 4) ^ uroce_icrc_compute(&ip0, p, len - 4);
		have |= 1ull << k;
	}
	memcpy(&wire, p + len - 4, 4);
	wire = htole32(le32toh(wire) ^ delta[k]);
	memcpy(p + len - 4, &wire, 4);
}

void uroce_ep_flush(struct uroce_ep *ep)
{
	if (!ep || !ep->tx)
		return;
	pthread_mutex_lock(&ep->tx_lock);
	flush_locked(ep);
	pthread_mutex_unlock(&ep->tx_lock);
}

/* Queue one packet (BTH..ICRC, ICRC computed for ID 0).  Returns false when
 * the endpoint does not batch: the caller sends it itself. */
bool uroce_gso_add(struct uroce_ep *ep, const struct uroce_ipinfo *ip, const void *buf, size_t len)
{
	struct uroce_ep_tx *tx = ep->tx;
	struct uroce_ipinfo seg_ip;
	struct uroce_tx_group *g;
	uint8_t *p;

	if (!ep->gso || ip->family != AF_INET || len > GSO_MAX_BYTES)
		return false;
	pthread_mutex_lock(&ep->tx_lock);
	if (tx->used + len > GSO_BUF_BYTES)
		flush_locked(ep);
	g = tx->ngroup ? &tx->g[tx->ngroup - 1] : NULL;
	if (g && (!same_dest(&g->ip, ip) || len > g->seg || g->short_tail ||
		  g->nseg == GSO_MAX_SEGS || g->bytes + len > GSO_MAX_BYTES)) {
		if (tx->ngroup == GSO_MAX_GROUPS)
			flush_locked(ep);
		g = NULL;
	}
	if (!g) {
		g = &tx->g[tx->ngroup++];
		*g = (struct uroce_tx_group){.ip = *ip, .off = tx->used, .seg = (uint32_t)len};
	}
	p = tx->buf + tx->used;
	memcpy(p, buf, len);
	seg_ip = *ip;
	seg_ip.ipid = (uint16_t)g->nseg;
	if (g->nseg)
		ipid_fixup(&seg_ip, p, (uint32_t)len);
	uroce_pcap(ep->ctx, UROCE_PCAP_TX, &seg_ip, p, len);
	g->bytes += (uint32_t)len;
	tx->used += (uint32_t)len;
	g->nseg++;
	if (len < g->seg)
		g->short_tail = true;
	pthread_mutex_unlock(&ep->tx_lock);
	uroce_count(ep->ctx, tx_pkts, 1);
	uroce_count(ep->ctx, tx_bytes, len);
	return true;
}

/* The segment size of a datagram received as a GRO batch, or 0. */
uint32_t uroce_gro_size(const struct msghdr *mh)
{
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR((struct msghdr *)mh); cm; cm = CMSG_NXTHDR((struct msghdr *)mh, cm))
		if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
			uint16_t v;

			memcpy(&v, CMSG_DATA(cm), sizeof(v));
			return v;
		}
	return 0;
}

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
#include "transport/pkt.h"

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
#define GSO_MAX_IOV    1024 /* UIO_MAXIOV: pieces of one batch */

/* One GSO datagram of the batch: packets of one size (the last may be
 * shorter) to one destination, as pieces iov[iov0 .. iov0 + niov) of the
 * batch: bytes copied into buf (whole packets, or the headers and
 * trailers of gathered ones) and payloads left in registered memory. */
struct uroce_tx_group {
	struct uroce_ipinfo ip;
	uint32_t iov0, niov;
	uint32_t bytes; /* on the wire: the sum of its pieces */
	uint32_t seg;	/* segment size: the first packet's length */
	int nseg;
	int in_place;	 /* packets with a payload read from its MR (tx_in_place) */
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
	uint32_t used; /* bytes of buf */
	uint32_t niov;
	struct uroce_tx_group g[GSO_MAX_GROUPS];
	struct iovec iov[GSO_MAX_IOV];
	uint8_t buf[GSO_BUF_BYTES];
};

static int gso_mode = -1; /* -1 unknown, 0 off, 1 on */

static bool gso_wanted(void)
{
	return uroce_env_on("UROCE_GSO", &gso_mode);
}

void uroce_gso_setup(struct uroce_ep *ep)
{
	int one = 1;

	pthread_mutex_init(&ep->tx_lock, NULL);
	if (!gso_wanted())
		return;
	/* receive batches whole; harmless where the kernel lacks UDP_GRO */
	if (ep->fd_any >= 0)
		setsockopt(ep->fd_any, SOL_UDP, UDP_GRO, &one, sizeof(one));
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
static void send_unbatched(struct uroce_ep *ep, const struct uroce_tx_group *g,
			   const struct iovec *iov, int err)
{
	uint8_t *buf = malloc(g->bytes);
	uint32_t off = 0;

	ur_warn("UDP GSO refused (%s): sending packets one by one", strerror(err));
	ep->gso = false;
	if (!buf)
		return; /* lost, as by a full socket buffer */
	for (uint32_t i = 0; i < g->niov; i++) {
		memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
		off += (uint32_t)iov[i].iov_len;
	}
	for (off = 0; off < g->bytes; off += g->seg) {
		uint32_t n = g->bytes - off < g->seg ? g->bytes - off : g->seg;

		uroce_udp_send(ep, &g->ip, buf + off, n, 0);
	}
	free(buf);
}

/* The batch's packets are counted as it leaves, three atomic adds per
 * batch instead of three per packet: a locked add waits for the store
 * buffer to drain, and a packet's copy has just filled it (about 20 TSC
 * ticks a packet, docs/design.md "Per-packet work across veth"). */
static void count_batch(struct uroce_ep *ep, const struct uroce_ep_tx *tx)
{
	uint64_t pkts = 0, bytes = 0, in_place = 0;

	for (int i = 0; i < tx->ngroup; i++) {
		pkts += (uint64_t)tx->g[i].nseg;
		bytes += tx->g[i].bytes;
		in_place += (uint64_t)tx->g[i].in_place;
	}
	uroce_count(ep->ctx, tx_pkts, pkts);
	uroce_count(ep->ctx, tx_bytes, bytes);
	if (in_place)
		uroce_count(ep->ctx, tx_in_place, in_place);
}

static void flush_locked(struct uroce_ep *ep)
{
	struct uroce_ep_tx *tx = ep->tx;
	struct uroce_udp_msg m[GSO_MAX_GROUPS];
	int sent = 0;

	if (!tx->ngroup)
		return;
	count_batch(ep, tx);
	for (int i = 0; i < tx->ngroup; i++)
		m[i] = (struct uroce_udp_msg){.ip = &tx->g[i].ip,
					      .iov = &tx->iov[tx->g[i].iov0],
					      .iovcnt = (int)tx->g[i].niov,
					      .len = tx->g[i].bytes,
					      .gso_size = tx->g[i].nseg > 1 ? tx->g[i].seg : 0};
	if (tx->ngroup > 1)
		sent = uroce_udp_send_many(ep, m, tx->ngroup);
	/* one at a time: a single group, or what sendmmsg left (an error
	 * on one datagram is reported, and dealt with, by uroce_udp_send) */
	for (int i = sent; i < tx->ngroup; i++) {
		int err = uroce_udp_send_msg(ep, &m[i]);

		if (err == EINVAL || err == EIO || err == EOPNOTSUPP)
			send_unbatched(ep, &tx->g[i], m[i].iov, err);
	}
	tx->ngroup = 0;
	tx->used = 0;
	tx->niov = 0;
}

/* Segment k goes out with IPv4 ID k: turn the packet's ICRC (computed for
 * ID 0) into the one for ID k.  CRC-32 is affine, so the change depends on
 * the length and k only, not on the content; applying the change rather
 * than recomputing keeps a corrupted packet corrupted (UROCE_FAULT).  The
 * per-thread cache holds the changes for one packet length. */
static void ipid_fixup(const struct uroce_ipinfo *ip, uint8_t *icrc, uint32_t len)
{
	static const uint8_t zero_pkt[GSO_MAX_BYTES];
	static __thread struct {
		uint32_t len, delta[GSO_MAX_SEGS];
		uint64_t have;
	} cache;
	__typeof__(cache) *c = &cache; /* one __tls_get_addr (icrc.c, icrc_head4) */
	struct uroce_ipinfo ip0 = *ip;
	unsigned int k = ip->ipid;
	uint32_t wire;

	__asm__("" : "+r"(c));

	if (c->len != len) {
		c->len = len;
		c->have = 0;
	}
	if (!(c->have & (1ull << k))) {
		ip0.ipid = 0;
		c->delta[k] = uroce_icrc_compute(ip, zero_pkt, len - 4) ^
			      uroce_icrc_compute(&ip0, zero_pkt, len - 4);
		c->have |= 1ull << k;
	}
	memcpy(&wire, icrc, 4);
	wire = htole32(le32toh(wire) ^ c->delta[k]);
	memcpy(icrc, &wire, 4);
}

void uroce_ep_flush(struct uroce_ep *ep)
{
	/* Nothing queued: no lock (a ping-pong's poll looks here on every
	 * empty read).  Another thread's group being added now is that
	 * thread's to flush; our own are seen in program order. */
	if (!ep || !ep->tx || !__atomic_load_n(&ep->tx->ngroup, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&ep->tx_lock);
	flush_locked(ep);
	pthread_mutex_unlock(&ep->tx_lock);
}

/* A piece of the open group: bytes in buf (merged with the piece before
 * when they follow it there) or a payload in place (tx_lock held). */
static void tx_piece(struct uroce_ep_tx *tx, struct uroce_tx_group *g, const void *p, size_t len)
{
	struct iovec *last = g->niov ? &tx->iov[tx->niov - 1] : NULL;

	g->bytes += (uint32_t)len;
	if (last && (const uint8_t *)last->iov_base + last->iov_len == p) {
		last->iov_len += len;
		return;
	}
	tx->iov[tx->niov++] = (struct iovec){.iov_base = (void *)p, .iov_len = len};
	g->niov++;
}

/* Copy len bytes into buf as a piece of g; where they went. */
static uint8_t *tx_copy(struct uroce_ep_tx *tx, struct uroce_tx_group *g, const void *src,
			size_t len)
{
	uint8_t *p = tx->buf + tx->used;

	memcpy(p, src, len);
	tx->used += (uint32_t)len;
	tx_piece(tx, g, p, len);
	return p;
}

/* The group a packet of len bytes to ip joins, with room for copy bytes in
 * buf and niov pieces (tx_lock held): the open one when it can take it,
 * else a new one, after sending the batch when that is full. */
static struct uroce_tx_group *tx_group(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
				       uint32_t len, uint32_t copy, uint32_t niov)
{
	struct uroce_ep_tx *tx = ep->tx;
	struct uroce_tx_group *g;

	if (tx->used + copy > GSO_BUF_BYTES || tx->niov + niov > GSO_MAX_IOV)
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
		*g = (struct uroce_tx_group){.ip = *ip, .iov0 = tx->niov, .seg = len};
	}
	return g;
}

/* The packet of len bytes is in g: its IPv4 ID (counted with the batch:
 * count_batch). */
static void tx_added(struct uroce_tx_group *g, uint32_t len)
{
	g->nseg++;
	if (len < g->seg)
		g->short_tail = true;
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
	g = tx_group(ep, ip, (uint32_t)len, (uint32_t)len, 1);
	p = tx_copy(tx, g, buf, len);
	seg_ip = *ip;
	seg_ip.ipid = (uint16_t)g->nseg;
	if (g->nseg)
		ipid_fixup(&seg_ip, p + len - UR_ICRC_BYTES, (uint32_t)len);
	uroce_pcap(ep->ctx, UROCE_PCAP_TX, &seg_ip, p, len);
	tx_added(g, (uint32_t)len);
	pthread_mutex_unlock(&ep->tx_lock);
	return true;
}

/* Payloads below this many bytes are copied into the batch, the ICRC
 * computed in the same pass, and the packet leaves as part of one piece
 * per GSO datagram; larger ones are gathered from their MR (header,
 * payload and trailer pieces).  The kernel charges each piece of a
 * sendmmsg; docs/design.md, "The MR as the kernel's landing place". */
#define TX_GATHER_MIN_DEFAULT 2048

bool uroce_tx_copy_wanted(uint32_t paylen)
{
	static uint64_t v = UINT64_MAX;

	return paylen < uroce_env_num("UROCE_TX_GATHER_MIN", TX_GATHER_MIN_DEFAULT, &v);
}

/* The t->len bytes of t into buf; when t->icrc_ip asks for it, the ICRC
 * for ip (its IPv4 ID too) computed while the payload is copied. */
static void tx_place(const struct uroce_tx_pkt *t, const struct uroce_ipinfo *ip, uint8_t *buf)
{
	uint32_t pad = t->tlen - UR_ICRC_BYTES, icrc;
	uint8_t *p = buf;

	memcpy(p, t->hdr, t->hlen);
	p += t->hlen;
	if (!t->icrc_ip) {
		for (int i = 0; i < t->niov; i++) {
			memcpy(p, t->iov[i].iov_base, t->iov[i].iov_len);
			p += t->iov[i].iov_len;
		}
		memcpy(p, t->trl, t->tlen);
		return;
	}
	icrc = htole32(uroce_icrc_gather_copy(ip, t->hdr, t->hlen, t->iov, t->niov, pad, p));
	p = buf + t->len - t->tlen;
	memset(p, 0, pad);
	memcpy(p + pad, &icrc, UR_ICRC_BYTES);
}

void uroce_tx_pkt_linear(const struct uroce_tx_pkt *t, uint8_t *buf)
{
	tx_place(t, t->icrc_ip, buf);
}

/* The gathered packet as one buffer, sent by itself: the endpoint stopped
 * batching (its GSO was refused) after the caller asked. */
static void send_linear(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			const struct uroce_tx_pkt *t)
{
	uint8_t *buf = malloc(t->len);

	if (!buf)
		return; /* lost, as by a full socket buffer */
	uroce_tx_pkt_linear(t, buf);
	if (!uroce_udp_send(ep, ip, buf, t->len, 0)) {
		uroce_count(ep->ctx, tx_pkts, 1);
		uroce_count(ep->ctx, tx_bytes, t->len);
	}
	free(buf);
}

/* t into the batch (tx_lock held, batching on). */
static void add_gather_locked(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			      struct uroce_tx_pkt *t)
{
	struct uroce_ep_tx *tx = ep->tx;
	struct uroce_ipinfo seg_ip;
	struct uroce_tx_group *g;

	if (t->icrc_ip) {
		/* copied whole, its ICRC for its segment's ID in the same pass:
		 * one piece with the packets before it in the group */
		uint8_t *p = tx->buf;

		g = tx_group(ep, ip, t->len, t->len, 1);
		seg_ip = *ip;
		seg_ip.ipid = (uint16_t)g->nseg;
		p += tx->used;
		tx_place(t, &seg_ip, p);
		tx->used += t->len;
		tx_piece(tx, g, p, t->len);
		tx_added(g, t->len);
		g->in_place++;
		return;
	}
	g = tx_group(ep, ip, t->len, t->hlen + t->tlen, (uint32_t)t->niov + 2);
	seg_ip = *ip;
	seg_ip.ipid = (uint16_t)g->nseg;
	if (g->nseg)
		ipid_fixup(&seg_ip, t->trl + t->tlen - UR_ICRC_BYTES, t->len);
	tx_copy(tx, g, t->hdr, t->hlen);
	for (int i = 0; i < t->niov; i++)
		tx_piece(tx, g, t->iov[i].iov_base, t->iov[i].iov_len);
	tx_copy(tx, g, t->trl, t->tlen);
	tx_added(g, t->len);
	g->in_place++;
}

void uroce_gso_add_gather_run(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			      struct uroce_tx_pkt *t, int n)
{
	pthread_mutex_lock(&ep->tx_lock);
	if (!ep->gso) {
		pthread_mutex_unlock(&ep->tx_lock);
		for (int i = 0; i < n; i++)
			send_linear(ep, ip, &t[i]);
		return;
	}
	for (int i = 0; i < n; i++)
		add_gather_locked(ep, ip, &t[i]);
	pthread_mutex_unlock(&ep->tx_lock);
}

void uroce_gso_add_gather(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			  struct uroce_tx_pkt *t)
{
	uroce_gso_add_gather_run(ep, ip, t, 1);
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

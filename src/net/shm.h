/* The same-host wire: RoCEv2 packets through shared memory (src/net/shm.c).
 *
 * An endpoint whose peer endpoint belongs to a uroce context of the same
 * user on the same host (same network namespace) sends its packets through
 * a shared-memory ring instead of UDP.  The packets are the ones UDP would
 * carry (BTH through ICRC); only the endpoint's transmit and receive
 * layers know which wire a packet took.  docs/design.md, "The same-host
 * wire", gives the design and its measurements.
 */
#ifndef UROCE_NET_SHM_H
#define UROCE_NET_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

struct uroce_ctx;
struct uroce_ep;
struct uroce_ipinfo;

/* Offer the wire on ep (its listening socket); no-op when UROCE_SHM=0,
 * UROCE_FAULT is set, in standard-port mode and for multicast endpoints. */
void uroce_shm_ep_init(struct uroce_ep *ep, bool reuse);
/* Release everything (the progress thread is stopped). */
void uroce_shm_ep_fini(struct uroce_ep *ep);
/* Register ep's listener and doorbell with the progress engine's epolls. */
void uroce_shm_epoll_add(struct uroce_ep *ep);

/* Send one packet through shared memory when ip's destination is a local
 * uroce endpoint reachable that way.  Returns false when the caller must
 * send it over UDP (not local, link not up yet, hostile ring).  crc: the
 * packet's ICRC is written; without it the ring carries the packet with
 * its ICRC left out (buf is written only to stamp it for a capture). */
bool uroce_shm_xmit(struct uroce_ep *ep, const struct uroce_ipinfo *ip, uint8_t *buf, size_t len,
		    bool crc);

/* A destination on this host (127/8 or one of the device's addresses): its
 * packets may take the same-host wire (endpoint.c keeps them on one path). */
bool uroce_shm_dst_local(const struct uroce_ctx *ctx, struct in_addr a);

/* Receive path (rx_lock held): up to want packets from ep's rings, each
 * handed to deliver.  A link's first record comes after what its sender
 * sent over UDP: udp_first is called before it is delivered, to keep the
 * order.  Returns how many. */
typedef void (*uroce_shm_deliver_fn)(struct uroce_ep *ep, uint8_t *data, size_t len,
				     const struct uroce_ipinfo *ip);
int uroce_shm_rx(struct uroce_ep *ep, int want, uroce_shm_deliver_fn deliver,
		 void (*udp_first)(struct uroce_ep *ep));
/* Should this poll read the UDP socket too (rx_lock held)?  While ep has
 * shared-memory peers, a polling loop reads it only every 20 us, or while
 * it returns packets (uroce_shm_udp_seen): the recvmmsg system call would
 * be most of a poll's cost, and a same-host message's latency. */
bool uroce_shm_udp_due(struct uroce_ep *ep);
void uroce_shm_udp_seen(struct uroce_ep *ep, bool got);
/* ep receives over shared memory, so uroce_shm_udp_due paces its UDP
 * reads (rx_lock held). */
bool uroce_shm_udp_paced(const struct uroce_ep *ep);
/* No packet can reach ep through shared memory (no link, none pending): a
 * hint, read without rx_lock. */
bool uroce_shm_none(const struct uroce_ep *ep);

/* Progress thread: an epoll event whose data pointer has the low bit set
 * belongs to this module. */
static inline bool uroce_shm_is_event(const void *p)
{
	return ((uintptr_t)p & 1u) != 0;
}
void uroce_shm_event(struct uroce_ctx *ctx, void *p, uint32_t events);
/* Before (on) and after (off) the progress thread sleeps on its epoll:
 * raise or clear the "consumer sleeps" flag of every ring it drains.
 * Returns true when a ring already holds packets (do not sleep). */
bool uroce_shm_sleep(struct uroce_ctx *ctx, bool on);
/* A requester's thread about to sleep until ACKs come (on), or woken
 * (off): raise or clear its own "sleeping" bit in ep's rings.  on returns
 * the doorbell to poll, -1 when ep has no same-host wire, -2 when it must
 * not sleep (a ring holds packets, or another thread drains ep). */
int uroce_shm_wait(struct uroce_ep *ep, bool on);

/* An application poller that has found nothing for a while (cq.c): sleep
 * briefly (at most 100 us) where a ring's next record or a UDP packet wakes
 * it - once its yields have been taken by a neighbour that keeps the CPU (a
 * hog).  0 when it did not sleep (the caller yields instead), 1 when the
 * sleep ran out, 2 when something woke it. */
int uroce_shm_idle(struct uroce_ctx *ctx);
/* ... and it yielded instead, for ns: how it learns that yields are taken
 * by a neighbour that keeps the CPU. */
void uroce_shm_yielded(uint64_t ns);
/* The progress thread's spin, about to yield: stop spinning instead (and
 * sleep in epoll_wait, where the doorbell wakes it) when ctx has same-host
 * links and this thread's yields have been taken by a hog. */
bool uroce_shm_spin_stop(struct uroce_ctx *ctx);

/* The progress thread's spin finds its packets only after yields that ran
 * another thread: its same-host peer shares its CPU.  Move to another CPU
 * of its mask (and spin there); true when it moved. */
bool uroce_shm_part(struct uroce_ctx *ctx);

/* The abstract Unix address of the endpoint on UDP port port; its length. */
struct sockaddr_un;
socklen_t uroce_shm_addr(struct sockaddr_un *a, uint16_t port);

/* The single copy (src/transport/pull.c, docs/design.md "The single copy").
 * The smallest message that is pulled (UROCE_SHM_PULL, bytes; 0: never). */
uint32_t uroce_pull_min(void);
/* May a packet to ip name our memory: is its link up, and did the
 * receiver show at the handshake that it can read our memory? */
bool uroce_shm_pull_ok(struct uroce_ep *ep, const struct uroce_ipinfo *ip);
/* A requester to ip has heard nothing for a while: the next record to ip
 * reads the receiver's head (checks it) whatever SHM_HEAD_EVERY says.  A
 * receiver that moved its head past our tail (a hostile or broken peer)
 * would otherwise make up to SHM_HEAD_EVERY records vanish unseen - resent
 * ones too, one per timeout, until the QP ran out of retries. */
void uroce_shm_recheck(struct uroce_ep *ep, const struct uroce_ipinfo *ip);
/* Would a pull record of bytes to ip find no room for them - in the bulk
 * area, or for larger ones in the ring (bulk records, shm.c)?  Then a requester with ACKs due waits
 * for them instead of making the receiver pull with process_vm_readv (pull.c). */
bool uroce_shm_bulk_full(struct uroce_ep *ep, const struct uroce_ipinfo *ip, uint64_t bytes);
/* Our own pull record buf (len bytes): the pieces of our memory it names
 * (up to UROCE_MAX_SGE) and their bytes; -1 when it is not one.  The link
 * may carry those bytes with the record (shm.c, "bulk").  *bytes_only: the
 * description, when it must not go without its bytes (a READ response,
 * uroce_pull_desc_bytes_only), else NULL; uroce_pull_desc_unsent marks it
 * as not sent. */
int uroce_pull_desc_own(uint8_t *buf, size_t len, struct iovec *iov, uint64_t *total,
			uint8_t **bytes_only);
void uroce_pull_desc_unsent(uint8_t *desc);
/* Copy total bytes from the pieces from[] of src's memory into dst[] with
 * one process_vm_readv - or, when the record brought them (src->ring), from
 * the ring.  0, or -errno: -EFAULT (a bad range, or short),
 * -ESRCH (gone, or the pid names another process now), -EPERM; counted. */
struct iovec;
struct uroce_pull_src;
int uroce_shm_pull(struct uroce_ctx *ctx, const struct uroce_pull_src *src, const struct iovec *dst,
		   int ndst, const struct iovec *from, int nfrom, size_t total);

/* Tests (tests/unit/test_shm.c): a new mapping (munmap it) of the ring of
 * ep's link from peer_port, or NULL, and its size in bytes. */
void *uroce_shm_test_ring(struct uroce_ep *ep, uint16_t peer_port, size_t *len);

#endif

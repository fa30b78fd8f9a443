/* The same-host wire: RoCEv2 packets through shared-memory rings.
 *
 * Discovery.  Every native endpoint (UDP port P) listens on the abstract
 * Unix socket "\0uroce-shm-P" (SOCK_SEQPACKET).  A packet whose
 * destination is a local address (127/8 or one of the device's GIDs) and
 * UDP port P is, by the QPN rule (endpoint.c), for the endpoint bound to P
 * in this network namespace - whose abstract socket namespace is the same
 * one.  The first such packet connects to that name; until the link is up
 * packets keep going over UDP.  Abstract names vanish with the last
 * descriptor, so nothing outlives a kill -9, and SO_PEERCRED on both ends
 * admits only the same effective uid.
 *
 * Links are one-way: the sender creates a memfd holding one SPSC ring,
 * seals it against shrinking (so the receiver can never fault on a
 * truncated mapping) and passes it with SCM_RIGHTS in its hello; the
 * receiver answers with its endpoint's doorbell eventfd.  Two endpoints
 * that talk both ways hold two links, so there is no tie to break when both
 * connect at once.
 *
 * The ring carries the packets UDP would (BTH through ICRC), each
 * behind a 32-byte record header (a sequence number - the record's ring
 * position + 1, stored last - length, IPv4 source and destination, flags,
 * a bulk record's place in the bulk area), records 64-byte aligned; a
 * record never wraps (a pad record skips to the start).  Behind the ring,
 * in the same memfd, the bulk area: a smaller byte ring that only pull
 * records' bytes take (pull.c), so that they stay in the caches.  There is no shared tail: the
 * receiver polls the slot at its head until its sequence number is right, one cache line a record.
 * The ICRC is neither computed nor checked: memory the kernel maps into both processes is not a
 * wire that flips bits, and the ICRC was a quarter of a bulk sender's CPU.  The record says so
 * (SHM_REC_NOCRC); a capture (UROCE_PCAP) stamps it on either side, so the file shows the packet
 * UDP would carry, and fault injection keeps every packet on UDP.  Everything else the receiver
 * reads is validated: each record's sequence number, length and extent, the head (by the sender),
 * and the packet is copied out of the shared mapping before it is parsed, so a peer that scribbles
 * over the ring can at worst lose its own link (shutdown, counted in shm_bad_ring) and never make
 * us read outside the mapping or parse a packet that changes under us.
 *
 * Progress.  The thread in ibv_poll_cq drains the rings with no system call
 * (uroce_shm_rx from the endpoint's poll).  The progress thread raises a
 * "sleeping" flag in every ring it drains before it blocks in epoll_wait;
 * a sender that sees the flag after publishing a record clears it and
 * writes the doorbell once.  So the doorbell costs a system call only when
 * the receiver really sleeps.
 *
 * Faults.  A peer that dies or closes its endpoint hangs up the Unix
 * socket: the progress thread sees EPOLLHUP, drains what is left and drops
 * the link; the sending side goes back to UDP (and retries the connection
 * after a second), so QPs aimed at a dead peer fail as they do on UDP, by
 * their retry count.  Packets that do not fit a full ring are dropped, as a
 * full socket buffer drops them (shm_ring_full).  A handshake not done
 * within two seconds is given up on both sides (SHM_HANDSHAKE_NS): a peer
 * that accepts and never answers leaves the QP on UDP, and connections
 * that never say hello cannot keep every pending slot.
 *
 * Locking: the send side of a link (its table, its tail) is under
 * ep->tx_lock, taken by whoever sends; the list of receiving links is
 * changed only by the progress thread, under ep->rx_lock, and read by the
 * drainer under rx_lock (and by the progress thread itself without it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "uroce.h"
#include "net/pcap.h"
#include "net/shm.h"
#include "transport/pkt.h"

enum {
	SHM_MAGIC = 0x5552534d, /* "URSM" */
	/* 2: the hello offers pulls; 3: bulk records; 4: a sequence number in
	 * every record instead of a shared tail; 5: the bulk area */
	SHM_VERSION = 5,
	/* twice a socket buffer: the RC budget fits (rc.h) in the half that
	 * bulk records leave to packets */
	SHM_RING_BYTES = 16 << 20,
	SHM_MIN_RING = 1 << 16,
	SHM_MAX_RING = 1 << 26,
	SHM_ALIGN = 64,
	SHM_MIN_PKT = 16,   /* BTH and ICRC */
	SHM_MAX_PKT = 8192, /* a packet is at most MTU 4096 plus headers */
	SHM_PAD = 0xffffffffu,
	SHM_REC_FIRST = 1, /* the link's first record: UDP packets came before */
	SHM_REC_NOCRC = 2, /* the sender did not compute the ICRC */
	SHM_REC_AREA = 4,  /* the bulk bytes are in the bulk area, not behind */
	/* flags bits 16-31: a bulk record's bytes behind the packet, in
	 * SHM_ALIGN units (0: none) */
	SHM_REC_BULK_SHIFT = 16,
	SHM_MAX_BULK = 2 << 20, /* bytes */
	/* the bulk area (after the ring, same memfd): a byte ring that only
	 * pull records' bytes take, small enough to stay in the caches
	 * (docs/design.md, "The bulk area"); UROCE_SHM_AREA sets it */
	SHM_AREA_BYTES = 2 << 20,
	SHM_MIN_AREA = 1 << 16,
	SHM_MAX_AREA = 1 << 26,
	SHM_HASH = 64,
	SHM_MAX_PENDING = 64,
	SHM_RX_BURST = 16,	/* records per batch: one ACK flush, as one recvmmsg */
	SHM_HELLO_PULL = 1,	/* hello: pull from me; reply: I can */
	SHM_HEAD_EVERY = 64,	/* records between two looks at the shared head */
	SHM_UDP_LOOK_EVERY = 8, /* polls between two looks at the clock for UDP */
	/* the sleeping flag's bits: a sender that sees any clears all and
	 * rings the doorbell once, which wakes both */
	SHM_SLEEP_PROGRESS = 1, /* the progress thread, in epoll_wait */
	SHM_SLEEP_APP = 2,	/* a requester waiting for ACKs (uroce_shm_wait) */
};
#define SHM_UDP_EVERY_NS 20000ull
#define SHM_RETRY_NS	 1000000000ull
/* a handshake not finished by then is given up (UDP meanwhile): a peer
 * that accepts and never answers, or connects and never says hello */
#define SHM_HANDSHAKE_NS 2000000000ull

/* The shared region: this header, then size bytes of records. */
struct shm_ring {
	uint32_t magic, version;
	uint64_t size;
	/* a random number the sender wrote: a pull reads it from the
	 * sender's mapping with the payload, proof that the pid still names
	 * the process that owns the ring (uroce_shm_pull) */
	uint64_t nonce;
	uint8_t pad0[SHM_ALIGN - 24];
	_Atomic uint64_t head; /* written by the receiver */
	uint8_t pad1[SHM_ALIGN - 8];
	/* the bulk area's position the receiver has copied out up to
	 * (version 3's tail was here: each record has its sequence now) */
	_Atomic uint64_t area_head;
	uint8_t pad2[SHM_ALIGN - 8];
	_Atomic uint32_t sleeping; /* SHM_SLEEP_*: who on the receiving side blocks */
	uint8_t pad3[SHM_ALIGN - 4];
	uint8_t data[];
};
_Static_assert(sizeof(struct shm_ring) == 4 * SHM_ALIGN, "ring header layout");

/* A record at ring position pos (a running byte count) is there once its
 * seq reads pos + 1: one cache line for the receiver to poll, which
 * brings the header and the start of the packet with it. */
struct shm_rec {
	uint64_t seq;	   /* pos + 1, stored last (release); never 0 */
	uint32_t len;	   /* packet bytes, or SHM_PAD */
	uint32_t src, dst; /* IPv4, network order */
	uint32_t flags;	   /* SHM_REC_*; bits 8-15: the IPv4 TOS (grh.traffic_class) */
	uint64_t apos;	   /* SHM_REC_AREA: where the bytes are in the bulk area */
};

struct shm_hello {
	uint32_t magic, version;
	uint16_t port; /* the sender's UDP port: the source of its packets */
	uint16_t resv;
	uint32_t ring_bytes;
	uint32_t flags;	     /* SHM_HELLO_* */
	uint32_t area_bytes; /* the bulk area behind the ring (0: none) */
	uint64_t ring_va;    /* hello: where the sender maps the ring (its nonce) */
};

enum shm_kind { SHM_LISTEN = 1, SHM_TX, SHM_RX };

/* First member of everything the progress thread's epoll points at. */
struct shm_obj {
	enum shm_kind kind;
	struct uroce_shm *s;
};

enum txl_state { TXL_NONE, TXL_CONNECTING, TXL_UP };

struct shm_txl { /* we send; ep->tx_lock */
	struct shm_obj o;
	struct shm_txl *next;
	uint16_t port;
	enum txl_state state;
	bool flushed; /* the UDP batch was sent before the first ring record */
	bool used;    /* a record was sent: the first carries SHM_REC_FIRST */
	bool pull;    /* the receiver can pull from our memory (pull.c) */
	int fd, bell;
	struct shm_ring *r;
	size_t maplen;
	uint64_t tail, size, retry_ns; /* retry_ns: also the handshake's deadline */
	/* the receiver's head as last read: the shared one is read (and
	 * checked) again only once this one leaves less than half the ring
	 * free, or every SHM_HEAD_EVERY records, so its line stays with the
	 * receiver - a cache miss less per record on both sides */
	uint64_t head;
	unsigned puts; /* records: the head is read every SHM_HEAD_EVERY too */
	bool recheck;  /* a requester heard nothing: read the head at the next record */
	/* the bulk area: asize bytes at area (0: none), written at atail
	 * (a running count), the receiver's area_head as last read */
	uint8_t *area;
	uint64_t asize, atail, ahead;
};

struct shm_rxl { /* we receive */
	struct shm_obj o;
	struct shm_rxl *next;
	uint16_t port;
	atomic_bool bad;
	struct uroce_pull_src pull; /* pid 0: we cannot pull from the sender */
	int fd;
	struct shm_ring *r;
	size_t maplen;
	uint64_t head, size;
	uint8_t *area; /* the bulk area, asize bytes */
	uint64_t asize;
	uint64_t deadline_ns; /* pending: the hello's */
};

struct uroce_shm {
	struct uroce_ep *ep;
	struct shm_obj lo;
	int lfd, bell;
	bool epolled;
	struct shm_txl *tx[SHM_HASH]; /* tx_lock */
	struct shm_rxl *rx;	      /* links up: progress thread writes, under rx_lock */
	struct shm_rxl *pending;      /* handshakes: progress thread only */
	int npending;
	bool udp_busy; /* rx_lock */
	unsigned udp_polls;
	uint64_t udp_next_ns;
	uint8_t buf[SHM_MAX_PKT]; /* the packet being delivered, out of the ring */
};

static uint64_t align_up(uint64_t n)
{
	return (n + SHM_ALIGN - 1) & ~(uint64_t)(SHM_ALIGN - 1);
}

/* UROCE_SHM_BULK=0: pull records never carry their bytes (measurements) */
static bool bulk_wanted(void)
{
	static int on = -1;

	return uroce_env_on("UROCE_SHM_BULK", &on);
}

/* The bulk area's size: UROCE_SHM_AREA (bytes, a power of two, 0: none -
 * bulk bytes then go behind their record in the ring, as in version 4) */
static uint32_t area_bytes(void)
{
	static uint64_t v = UINT64_MAX;
	uint64_t n = uroce_env_num("UROCE_SHM_AREA", SHM_AREA_BYTES, &v);

	return n < SHM_MIN_AREA || n > SHM_MAX_AREA || (n & (n - 1)) ? 0 : (uint32_t)n;
}

/* UROCE_SHM_COPY=0: bulk bytes copied with memcpy (measurements) */
static bool copy_wanted(void)
{
	static int on = -1;

	return uroce_env_on("UROCE_SHM_COPY", &on);
}

/* A bulk record's bytes, into the ring or the bulk area and out of it
 * (docs/design.md, "The bulk copy").  glibc's memcpy copies 64 KiB with
 * rep movsb on this CPU (AMD Zen 3, its threshold 2,112 bytes), and that
 * was bimodal run to run: ib_read_bw 64 KiB 3.1-22.3 GB/s, slow in 4 runs
 * of 10, against 21.2-23.0 in all 10 with glibc's vector loop instead
 * (GLIBC_TUNABLES rep_movsb_threshold, same minutes).  So the bulk bytes
 * go through a plain 16-byte vector loop, 64 bytes an iteration. */
static void bulk_copy(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	if (n >= 256 && copy_wanted()) {
		uint8_t *d = dst;
		const uint8_t *s = src;

		for (; n >= 64; n -= 64, d += 64, s += 64) {
			__m128i a = _mm_loadu_si128((const __m128i *)(const void *)s),
				b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16)),
				c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32)),
				e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));

			_mm_storeu_si128((__m128i *)(void *)d, a);
			_mm_storeu_si128((__m128i *)(void *)(d + 16), b);
			_mm_storeu_si128((__m128i *)(void *)(d + 32), c);
			_mm_storeu_si128((__m128i *)(void *)(d + 48), e);
		}
		dst = d;
		src = s;
	}
#endif
	memcpy(dst, src, n);
}

static bool shm_wanted(void)
{
	const char *v = getenv("UROCE_SHM"), *f = getenv("UROCE_FAULT");

	if (v && (!strcmp(v, "0") || !strcasecmp(v, "off")))
		return false;
	/* every fault applies to UDP packets only (docs/design.md) */
	return !(f && *f);
}

socklen_t uroce_shm_addr(struct sockaddr_un *a, uint16_t port)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "uroce-shm-%u", port);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static bool same_user(int fd)
{
	struct ucred uc;
	socklen_t l = sizeof(uc);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) && uc.uid == geteuid();
}

static void *tag(struct shm_obj *o)
{
	return (char *)o + 1;
}

static void watch(struct uroce_ctx *ctx, int fd, struct shm_obj *o)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = tag(o)};

	if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, fd, &ev) ||
	    epoll_ctl(ctx->wake_epfd, EPOLL_CTL_ADD, fd, &ev))
		ur_dbg("shm: epoll_ctl: %s", strerror(errno));
}

/* Before closing a watched socket: a process forked from this one may hold
 * the same open file, and closing ours would then leave it in the epoll
 * sets, pointing at freed memory. */
static void unwatch(struct uroce_ctx *ctx, int fd)
{
	if (ctx->epfd >= 0)
		epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, fd, NULL);
	if (ctx->wake_epfd >= 0)
		epoll_ctl(ctx->wake_epfd, EPOLL_CTL_DEL, fd, NULL);
}

void uroce_shm_ep_init(struct uroce_ep *ep, bool reuse)
{
	struct uroce_shm *s;
	struct sockaddr_un a;
	socklen_t al = uroce_shm_addr(&a, ep->port);

	if (reuse || uroce_std_mode() || !shm_wanted())
		return;
	s = calloc(1, sizeof(*s));
	if (!s)
		return;
	s->ep = ep;
	s->lo = (struct shm_obj){.kind = SHM_LISTEN, .s = s};
	s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	s->bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->lfd < 0 || s->bell < 0 || bind(s->lfd, (struct sockaddr *)&a, al) ||
	    listen(s->lfd, SHM_MAX_PENDING)) {
		/* EADDRINUSE: some other socket holds the name; UDP only */
		ur_dbg("shm: no shared-memory wire on port %u: %s", ep->port, strerror(errno));
		if (s->lfd >= 0)
			close(s->lfd);
		if (s->bell >= 0)
			close(s->bell);
		free(s);
		return;
	}
	ep->shm = s;
}

void uroce_shm_epoll_add(struct uroce_ep *ep)
{
	struct uroce_shm *s = ep->shm;
	struct uroce_ctx *ctx = ep->ctx;
	struct epoll_event bell = {.events = EPOLLIN | EPOLLET, .data.ptr = ep};

	if (!s || s->epolled || ctx->epfd < 0)
		return;
	watch(ctx, s->lfd, &s->lo);
	/* edge-triggered: a write wakes the thread, nobody needs to read it */
	if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, s->bell, &bell))
		ur_dbg("shm: epoll_ctl: %s", strerror(errno));
	s->epolled = true;
}

static void txl_down(struct shm_txl *l, uint64_t retry_ns)
{
	if (l->fd >= 0) {
		unwatch(l->o.s->ep->ctx, l->fd);
		close(l->fd);
	}
	if (l->bell >= 0)
		close(l->bell);
	if (l->r)
		munmap(l->r, l->maplen);
	l->fd = l->bell = -1;
	l->r = NULL;
	l->state = TXL_NONE;
	l->retry_ns = retry_ns;
}

static void rxl_free(struct shm_rxl *l)
{
	if (l->fd >= 0) {
		unwatch(l->o.s->ep->ctx, l->fd);
		close(l->fd);
	}
	if (l->r)
		munmap(l->r, l->maplen);
	free(l);
}

void uroce_shm_ep_fini(struct uroce_ep *ep)
{
	struct uroce_shm *s = ep->shm;

	if (!s)
		return;
	ep->shm = NULL;
	unwatch(ep->ctx, s->lfd);
	unwatch(ep->ctx, s->bell);
	close(s->lfd);
	close(s->bell);
	for (int i = 0; i < SHM_HASH; i++)
		while (s->tx[i]) {
			struct shm_txl *l = s->tx[i];

			s->tx[i] = l->next;
			txl_down(l, 0);
			free(l);
		}
	for (struct shm_rxl **list = &s->rx; list; list = list == &s->rx ? &s->pending : NULL)
		while (*list) {
			struct shm_rxl *l = *list;

			*list = l->next;
			rxl_free(l);
		}
	free(s);
}

/* ---- handshake messages ---- */

static int send_fd(int sock, const struct shm_hello *h, int fd)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} c;
	struct iovec iov = {.iov_base = (void *)h, .iov_len = sizeof(*h)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b, .msg_controllen = sizeof(c.b)};
	struct cmsghdr *cm;

	memset(&c, 0, sizeof(c));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
	return sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(*h) ? 0 : -1;
}

/* One hello or reply with exactly one descriptor: 0, 1 (nothing yet) or -1
 * (anything else; every descriptor received is closed). */
static int recv_fd(int sock, struct shm_hello *h, int *fd)
{
	union {
		char b[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} c;
	struct iovec iov = {.iov_base = h, .iov_len = sizeof(*h)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b, .msg_controllen = sizeof(c.b)};
	ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	*fd = -1;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 1;
	for (struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm;
	     cm = CMSG_NXTHDR(&mh, cm)) {
		size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < nfd; i++) {
			int f;

			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(f));
			if (*fd < 0)
				*fd = f;
			else
				close(f);
		}
	}
	if (n != (ssize_t)sizeof(*h) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || *fd < 0 ||
	    h->magic != SHM_MAGIC || h->version != SHM_VERSION) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -1;
	}
	return 0;
}

static bool is_eventfd(int fd)
{
	char p[64], t[64];
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	n = readlink(p, t, sizeof(t) - 1);
	if (n <= 0)
		return false;
	t[n] = 0;
	return !strcmp(t, "anon_inode:[eventfd]");
}

/* ---- the sending side (ep->tx_lock held) ---- */

static struct shm_txl *txl_find(struct uroce_shm *s, uint16_t port, bool create)
{
	struct shm_txl **b = &s->tx[port % SHM_HASH], *l;

	for (l = *b; l; l = l->next)
		if (l->port == port)
			return l;
	if (!create || !(l = calloc(1, sizeof(*l))))
		return NULL;
	l->o = (struct shm_obj){.kind = SHM_TX, .s = s};
	l->port = port;
	l->fd = l->bell = -1;
	l->next = *b;
	*b = l;
	return l;
}

/* Connect to the endpoint on port l->port and offer it a ring. */
static void txl_connect(struct uroce_shm *s, struct shm_txl *l)
{
	struct uroce_ctx *ctx = s->ep->ctx;
	uint32_t bytes = SHM_RING_BYTES, area = uroce_pull_min() ? area_bytes() : 0;
	size_t len = sizeof(struct shm_ring) + bytes + area;
	struct shm_hello h = {.magic = SHM_MAGIC,
			      .version = SHM_VERSION,
			      .port = s->ep->port,
			      .ring_bytes = bytes,
			      .area_bytes = area};
	struct sockaddr_un a;
	socklen_t al = uroce_shm_addr(&a, l->port);
	int mfd = -1;

	l->retry_ns = uroce_now_ns() + SHM_HANDSHAKE_NS;
	if (ctx->epfd < 0)
		return;
	l->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0 || connect(l->fd, (struct sockaddr *)&a, al))
		goto fail; /* no uroce endpoint there (or its backlog is full) */
	if (!same_user(l->fd)) {
		ur_dbg("shm: port %u belongs to another user: UDP", l->port);
		goto fail;
	}
	mfd = memfd_create("uroce-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0 || ftruncate(mfd, (off_t)len) ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		goto fail;
	l->r = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (l->r == MAP_FAILED) {
		l->r = NULL;
		goto fail;
	}
	l->maplen = len;
	l->size = bytes;
	l->tail = l->head = 0;
	l->area = area ? l->r->data + bytes : NULL;
	l->asize = area;
	l->atail = l->ahead = 0;
	l->r->magic = SHM_MAGIC;
	l->r->version = SHM_VERSION;
	l->r->size = bytes;
	if (getrandom(&l->r->nonce, sizeof(l->r->nonce), GRND_NONBLOCK) != sizeof(l->r->nonce))
		l->r->nonce = uroce_now_ns() ^ (uint64_t)(uintptr_t)l->r;
	h.flags = uroce_pull_min() ? SHM_HELLO_PULL : 0;
	h.ring_va = (uint64_t)(uintptr_t)l->r;
	if (send_fd(l->fd, &h, mfd))
		goto fail;
	close(mfd);
	l->state = TXL_CONNECTING;
	watch(ctx, l->fd, &l->o);
	return;
fail:
	ur_trace("shm: no link to port %u: %s", l->port, strerror(errno));
	if (mfd >= 0)
		close(mfd);
	txl_down(l, uroce_now_ns() + SHM_RETRY_NS);
}

/* The receiver's answer: its doorbell. */
static void txl_reply(struct shm_txl *l)
{
	struct shm_hello h;
	int bell, r = recv_fd(l->fd, &h, &bell);

	if (r > 0)
		return;
	/* non-blocking whatever the peer made it: a counter it filled must
	 * not block our sends (a failed doorbell costs only its wake-up) */
	if (r < 0 || h.port != l->port || !is_eventfd(bell) || fcntl(bell, F_SETFL, O_NONBLOCK)) {
		if (bell >= 0)
			close(bell);
		ur_dbg("shm: bad reply from port %u: UDP", l->port);
		txl_down(l, uroce_now_ns() + SHM_RETRY_NS);
		return;
	}
	l->bell = bell;
	l->flushed = false;
	l->used = false;
	l->pull = (h.flags & SHM_HELLO_PULL) != 0;
	l->state = TXL_UP;
	uroce_count(l->o.s->ep->ctx, shm_links, 1);
	ur_dbg("shm: port %u -> %u over shared memory", l->o.s->ep->port, l->port);
}

/* Is the record at position head there (published)?  (The receiver: a
 * peer can only make its own ring look empty, or hand us a header that
 * ring_drain refuses.  The sender: is the receiver's head where a record
 * of ours starts?) */
static bool rec_ready(const struct shm_ring *r, uint64_t head, uint64_t size)
{
	const struct shm_rec *h = (const void *)(r->data + (head & (size - 1)));

	return __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE) == head + 1;
}

/* Publish the record at ring position pos: its seq last, with release
 * (everything before it, the next slot's invalidation too, is visible
 * first). */
static void rec_publish(struct shm_rec *h, uint64_t pos)
{
	__atomic_store_n(&h->seq, pos + 1, __ATOMIC_RELEASE);
}

/* The same for the last record of a ring_put, as a locked exchange: the
 * store and the full barrier ring_wake needs between it and its load of
 * the flag in one instruction, instead of a store and an mfence */
static void rec_publish_last(struct shm_rec *h, uint64_t pos)
{
	(void)__atomic_exchange_n(&h->seq, pos + 1, __ATOMIC_SEQ_CST);
}

/* After a record: wake the receiver if it said it sleeps.  A Dekker pair
 * with rings_sleep: we store the record's seq, then load the flag; the
 * receiver stores the flag (a locked RMW), then loads the seq at its head.
 * Each side needs a full barrier between its store and its load - x86 lets
 * a load pass an older store - or both may read the old values: we do not
 * ring and it sleeps on a record, a lost wake-up (test_shm_idle "ring"
 * races the two 100,000 times and checks that each raise that found no
 * record finds the doorbell rung).  The fence is 82% of this function in
 * a 2-byte ping-pong; moving its cost to the sleeper with
 * membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) was tried and not kept
 * (docs/design.md: no latency gained, 11.8 us per sleep in this VM). */
static void ring_wake(struct shm_txl *l)
{
	struct shm_ring *r = l->r;

	/* (the barrier: rec_publish_last's exchange) */
	if (atomic_load_explicit(&r->sleeping, memory_order_seq_cst) &&
	    atomic_exchange(&r->sleeping, 0)) {
		uint64_t one = 1;

		if (write(l->bell, &one, sizeof(one)) < 0)
			ur_trace("shm doorbell: %s", strerror(errno));
	}
}

/* Read (and check) the receiver's head into l->head: 0, or -EIO.  A head
 * that is not where a record of ours starts (nothing of ours overwrote it:
 * it is unread) means someone wrote records we did not, and the receiver
 * went after them: it would wait where we never write - drop the link. */
static int head_read(struct shm_txl *l)
{
	uint64_t head = atomic_load_explicit(&l->r->head, memory_order_acquire);

	if (l->tail - head > l->size - SHM_ALIGN || head % SHM_ALIGN ||
	    (head != l->tail && !rec_ready(l->r, head, l->size)))
		return -EIO;
	l->head = head;
	return 0;
}

/* Where in l's bulk area ext bytes go: at *at (a running position; bytes
 * that would run past the area's end go to its start instead, a rule the
 * receiver applies too, ring_drain).  0, -EAGAIN (no room: the receiver
 * has not copied enough out yet) or -EIO (it wrote nonsense into
 * area_head).  Nothing moves until ring_put commits. */
static int area_alloc(struct shm_txl *l, uint64_t ext, uint64_t *at)
{
	uint64_t pos = l->atail, off = pos & (l->asize - 1), h;

	if (off + ext > l->asize)
		pos += l->asize - off;
	if (pos + ext - l->ahead > l->asize) {
		h = atomic_load_explicit(&l->r->area_head, memory_order_acquire);
		if (h > l->atail || l->atail - h > l->asize || h % SHM_ALIGN)
			return -EIO;
		l->ahead = h;
		/* (and the ring's head: a receiver that went after records
		 * we did not write copies nothing out of the area either) */
		if (pos + ext - h > l->asize)
			return head_read(l) ? -EIO : -EAGAIN;
	}
	*at = pos;
	return 0;
}

/* Append one record: 0, -ENOSPC (full), -EAGAIN (a bulk record that
 * would leave less than half the ring free, or find no room in the bulk
 * area: send it otherwise) or -EIO (the receiver has written nonsense into
 * head or area_head).  bulk[nbulk]: a pull record's bytes (total), copied
 * behind the packet or, in_area, into the bulk area.
 *
 * The receiver polls the slot at its head for seq == head + 1.  The slot
 * where the next record will go may hold anything from an earlier lap -
 * the middle of a packet or of bulk bytes, even a number equal to that
 * position + 1 - so it is zeroed before this record is published: the
 * receiver reaches it only through this record, and then reads 0 until
 * the next record is published there.  That slot must not be an unread
 * record: one SHM_ALIGN of the ring always stays free. */
static int ring_put(struct shm_txl *l, const struct uroce_ipinfo *ip, const void *buf, size_t len,
		    bool crc, const struct iovec *bulk, int nbulk, uint64_t total, bool in_area)
{
	struct shm_ring *r = l->r;
	uint64_t head = l->head;
	uint64_t tail = l->tail, size = l->size, off = tail & (size - 1), pad = 0;
	uint64_t pext = align_up(sizeof(struct shm_rec) + len);
	uint64_t need = pext + (in_area ? 0 : align_up(total)), apos = 0;
	uint64_t room = size - SHM_ALIGN, pos;
	struct shm_rec *h;
	uint8_t *at, *to;
	int err;

	if (in_area && (err = area_alloc(l, align_up(total), &apos)))
		return err;
	if (off + need > size)
		pad = size - off;
	if (tail + pad + need - head > room / 2 || !(++l->puts % SHM_HEAD_EVERY) || l->recheck) {
		l->recheck = false;
		if (head_read(l))
			return -EIO;
		head = l->head;
		/* bulk bytes are an option (the receiver can pull them
		 * instead): they never take the second half of the ring, the
		 * packets' (a full ring drops them).  A QP has at most
		 * UR_SACK_WIN PSNs of pulls in flight (4 MiB at MTU 4096): one
		 * stream always fits in the first half. */
		if (tail + pad + need - head > (total && !in_area ? size / 2 : room))
			return total && !in_area ? -EAGAIN : -ENOSPC;
	}
	pos = tail + pad;
	at = r->data + (pos & (size - 1));
	h = (struct shm_rec *)(void *)at;
	h->len = (uint32_t)len;
	h->src = ip->src.v4.s_addr;
	h->dst = ip->dst.v4.s_addr;
	h->flags = (l->used ? 0 : SHM_REC_FIRST) | (crc ? 0 : SHM_REC_NOCRC) |
		   (in_area ? SHM_REC_AREA : 0) | (uint32_t)ip->tos << 8 |
		   (uint32_t)(align_up(total) / SHM_ALIGN) << SHM_REC_BULK_SHIFT;
	h->apos = apos;
	memcpy(at + sizeof(*h), buf, crc ? len : len - UR_ICRC_BYTES);
	to = in_area ? l->area + (apos & (l->asize - 1)) : at + pext;
	for (uint64_t i = 0, done = 0; i < (uint64_t)nbulk && done < total;
	     done += bulk[i++].iov_len)
		bulk_copy(to + done, bulk[i].iov_base,
			  bulk[i].iov_len < total - done ? bulk[i].iov_len : total - done);
	if (in_area)
		l->atail = apos + align_up(total);
	l->tail = pos + need;
	l->used = true;
	__atomic_store_n((uint64_t *)(void *)(r->data + (l->tail & (size - 1))), 0,
			 __ATOMIC_RELAXED);
	if (pad)
		rec_publish(h, pos);
	else
		rec_publish_last(h, pos);
	if (pad) {
		/* after the record at the start: the receiver waits at the
		 * pad until then, and its slot was zeroed by the last record */
		struct shm_rec *p = (struct shm_rec *)(void *)(r->data + off);

		p->len = SHM_PAD;
		rec_publish_last(p, tail);
	}
	ring_wake(l);
	return 0;
}

bool uroce_shm_dst_local(const struct uroce_ctx *ctx, struct in_addr a)
{
	const struct uroce_dev *d = ctx->dev;

	if ((ntohl(a.s_addr) >> 24) == 127)
		return true;
	for (int i = 0; i < d->ngid; i++)
		if (d->gid[i].family == AF_INET && d->gid[i].addr.v4.s_addr == a.s_addr)
			return true;
	return false;
}

/* A READ response's pull record (only) that was not sent: say so. */
static bool pull_unsent(uint8_t *only, bool ret)
{
	if (only)
		uroce_pull_desc_unsent(only);
	return ret;
}

bool uroce_shm_xmit(struct uroce_ep *ep, const struct uroce_ipinfo *ip, uint8_t *buf, size_t len,
		    bool crc)
{
	struct uroce_shm *s = ep->shm;
	struct uroce_ctx *ctx = ep->ctx;
	/* a pull record names our memory: it never goes over UDP */
	bool pull = len > 4 && (buf[4] & UR_BTH4_PULL);
	struct iovec iov[UROCE_MAX_SGE];
	uint64_t total = 0;
	/* a READ response's description: sent with its bytes, or not at all
	 * (marked, and the responder sends packets: resp.c) - the requester
	 * must never read the responder's memory after the response, when
	 * the MR may have been deregistered (docs/design.md, "READ streams") */
	uint8_t *only = NULL;
	int n = pull ? uroce_pull_desc_own(buf, len, iov, &total, &only) : -1;
	struct shm_txl *l;
	int err;

	if (!s || ip->family != AF_INET || len > SHM_MAX_PKT || ip->dport == UR_ROCE_PORT ||
	    IN_MULTICAST(ntohl(ip->dst.v4.s_addr)) || !uroce_shm_dst_local(ctx, ip->dst.v4))
		return pull_unsent(only, pull);
	pthread_mutex_lock(&ep->tx_lock);
	l = txl_find(s, ip->dport, true);
	if (l && l->state == TXL_CONNECTING && uroce_now_ns() >= l->retry_ns) {
		ur_dbg("shm: port %u does not answer: UDP", l->port);
		txl_down(l, uroce_now_ns() + SHM_RETRY_NS);
	}
	if (l && l->state == TXL_NONE && uroce_now_ns() >= l->retry_ns)
		txl_connect(s, l);
	if (l && l->state == TXL_UP && !l->flushed) {
		/* what UDP has queued goes first, so the switch keeps order */
		pthread_mutex_unlock(&ep->tx_lock);
		uroce_ep_flush(ep);
		pthread_mutex_lock(&ep->tx_lock);
		l->flushed = true;
	}
	if (!l || l->state != TXL_UP) {
		pthread_mutex_unlock(&ep->tx_lock);
		/* (dropped: the requester's retry sends it again) */
		return pull_unsent(only, pull);
	}
	err = -EAGAIN;
	/* a pull record (pull.c) takes the bytes it names along, if the ring
	 * has room: the receiver copies them out with memcpy, not with
	 * process_vm_readv (docs/design.md, "Bulk records"); the requester
	 * holds mr_lock, so the memory is registered */
	if (pull && l->pull && n > 0 && bulk_wanted()) {
		/* into the bulk area; if it has no room, behind the record as
		 * in version 4 */
		if (l->area && align_up(total) <= l->asize / 2)
			err = ring_put(l, ip, buf, len, crc, iov, n, total, true);
		if (err == -EAGAIN && total <= SHM_MAX_BULK)
			err = ring_put(l, ip, buf, len, crc, iov, n, total, false);
		if (!err)
			uroce_count(ctx, shm_bulk, 1);
		else if (err == -EAGAIN)
			uroce_count(ctx, shm_bulk_skip, 1);
	}
	if (err == -EAGAIN && only) {
		pthread_mutex_unlock(&ep->tx_lock);
		return pull_unsent(only, true);
	}
	if (err == -EAGAIN)
		err = ring_put(l, ip, buf, len, crc, NULL, 0, 0, false);
	if (err == -EIO) {
		ur_warn("shm: the ring to port %u is corrupt: dropping the link", l->port);
		uroce_count(ctx, shm_bad, 1);
		txl_down(l, uroce_now_ns() + SHM_RETRY_NS);
	}
	pthread_mutex_unlock(&ep->tx_lock);
	if (err == -EIO)
		return pull_unsent(only, pull);
	if (err) {
		uroce_count(ctx, shm_full, 1);
		return true; /* dropped, as by a full socket buffer */
	}
	uroce_count(ctx, shm_tx, 1);
	uroce_count(ctx, tx_pkts, 1);
	uroce_count(ctx, tx_bytes, len);
	if (ctx->pcap && !crc)
		uroce_icrc_stamp(ip, buf, len); /* a capture shows the packet UDP would carry */
	uroce_pcap(ctx, UROCE_PCAP_TX, ip, buf, len);
	return true;
}

/* ---- the receiving side ---- */

static void rxl_bad(struct uroce_shm *s, struct shm_rxl *l, const char *why)
{
	if (atomic_exchange(&l->bad, true))
		return;
	ur_warn("shm: the ring from port %u is corrupt (%s): dropping the link", l->port, why);
	uroce_count(s->ep->ctx, shm_bad, 1);
	shutdown(l->fd, SHUT_RDWR); /* the progress thread sees the hangup */
}

/* Deliver up to want records of l (rx_lock held). */
static int ring_drain(struct uroce_shm *s, struct shm_rxl *l, int want,
		      uroce_shm_deliver_fn deliver, void (*udp_first)(struct uroce_ep *ep))
{
	struct shm_ring *r = l->r;
	struct uroce_ep *ep = s->ep;
	uint64_t head = l->head, size = l->size;
	int n = 0;

	while (n < want && rec_ready(r, head, size)) {
		uint64_t off = head & (size - 1), need, bulk;
		struct uroce_ipinfo ip = {.family = AF_INET, .sport = l->port, .dport = ep->port};
		struct uroce_pull_src ps;
		struct shm_rec h;
		bool area;

		memcpy(&h, r->data + off, sizeof(h));
		if (h.len == SHM_PAD) {
			if (!off) { /* a whole lap of nothing */
				rxl_bad(s, l, "pad");
				break;
			}
			head += size - off;
			continue;
		}
		need = align_up(sizeof(h) + (uint64_t)h.len);
		bulk = (uint64_t)(h.flags >> SHM_REC_BULK_SHIFT) * SHM_ALIGN;
		area = bulk && (h.flags & SHM_REC_AREA);
		if (h.len < SHM_MIN_PKT || h.len > SHM_MAX_PKT ||
		    (area ? !l->area || bulk > l->asize / 2 || h.apos % SHM_ALIGN ||
				(h.apos & (l->asize - 1)) + bulk > l->asize
			  : bulk > SHM_MAX_BULK) ||
		    off + need + (area ? 0 : bulk) > size || (bulk && !l->pull.pid)) {
			rxl_bad(s, l, "record length");
			break;
		}
		/* the headers out of the ring before they are parsed; a bulk
		 * record's bytes stay where they are (the ring's or the bulk
		 * area's head moves past them after the transport copied
		 * them, or not).  Where in the area is the sender's to say:
		 * anywhere inside it, which misplaces at most its own
		 * message's bytes. */
		memcpy(s->buf, r->data + off + sizeof(h), h.len);
		ps = l->pull;
		ps.ring = area	 ? l->area + (h.apos & (l->asize - 1))
			  : bulk ? r->data + off + need
				 : NULL;
		ps.ring_len = bulk;
		head += need + (area ? 0 : bulk);
		if (!bulk || area) {
			__atomic_store_n(&l->head, head, __ATOMIC_RELAXED); /* uroce_shm_sleep */
			atomic_store_explicit(&r->head, head, memory_order_release);
		}
		ip.src.v4.s_addr = h.src;
		ip.tos = (uint8_t)(h.flags >> 8);
		ip.dst.v4.s_addr = h.dst;
		ip.pull = l->pull.pid ? &ps : NULL;
		uroce_count(ep->ctx, shm_rx, 1);
		uroce_count(ep->ctx, rx_pkts, 1);
		uroce_count(ep->ctx, rx_bytes, h.len);
		if (h.flags & SHM_REC_FIRST)
			udp_first(ep);
		if ((h.flags & SHM_REC_NOCRC) && ep->ctx->pcap)
			uroce_icrc_stamp(&ip, s->buf, h.len); /* as a capture shows it */
		deliver(ep, s->buf, h.len, &ip);
		if (area) {
			atomic_store_explicit(&r->area_head, h.apos + bulk, memory_order_release);
		} else if (bulk) {
			__atomic_store_n(&l->head, head, __ATOMIC_RELAXED);
			atomic_store_explicit(&r->head, head, memory_order_release);
		}
		n++;
	}
	if (head != l->head) { /* pads only */
		__atomic_store_n(&l->head, head, __ATOMIC_RELAXED);
		atomic_store_explicit(&r->head, head, memory_order_release);
	}
	return n;
}

int uroce_shm_rx(struct uroce_ep *ep, int want, uroce_shm_deliver_fn deliver,
		 void (*udp_first)(struct uroce_ep *ep))
{
	struct uroce_shm *s = ep->shm;
	int n = 0;

	if (!s)
		return 0;
	if (want > SHM_RX_BURST)
		want = SHM_RX_BURST;
	for (struct shm_rxl *l = s->rx; l && n < want; l = l->next)
		if (!atomic_load_explicit(&l->bad, memory_order_relaxed))
			n += ring_drain(s, l, want - n, deliver, udp_first);
	return n;
}

bool uroce_shm_udp_due(struct uroce_ep *ep)
{
	struct uroce_shm *s = ep->shm;
	uint64_t now;

	if (!s || !s->rx || s->udp_busy)
		return true;
	/* the clock every SHM_UDP_LOOK_EVERY polls: two clock_gettime were
	 * a fifth of an empty poll's time (perf, ib_send_lat) */
	if (++s->udp_polls % SHM_UDP_LOOK_EVERY)
		return false;
	now = uroce_now_ns();
	if (now < s->udp_next_ns)
		return false;
	s->udp_next_ns = now + SHM_UDP_EVERY_NS;
	return true;
}

bool uroce_shm_udp_paced(const struct uroce_ep *ep)
{
	return ep->shm && __atomic_load_n(&ep->shm->rx, __ATOMIC_RELAXED);
}

void uroce_shm_udp_seen(struct uroce_ep *ep, bool got)
{
	if (ep->shm)
		ep->shm->udp_busy = got;
}

bool uroce_shm_none(const struct uroce_ep *ep)
{
	const struct uroce_shm *s = ep->shm;

	return !s || (!__atomic_load_n(&s->rx, __ATOMIC_RELAXED) &&
		      !__atomic_load_n(&s->pending, __ATOMIC_RELAXED));
}

/* ---- the progress thread ---- */

static void unlink_rxl(struct shm_rxl **list, struct shm_rxl *l)
{
	for (; *list; list = &(*list)->next)
		if (*list == l) {
			*list = l->next;
			return;
		}
}

/* Pending links whose hello is overdue go (each new connection looks), so
 * silent connections cannot hold every slot. */
static void rxl_expire(struct uroce_shm *s)
{
	uint64_t now = uroce_now_ns();

	for (struct shm_rxl *l = s->pending, *next; l; l = next) {
		next = l->next;
		if (now < l->deadline_ns)
			continue;
		ur_dbg("shm: no hello on port %u within the handshake timeout", s->ep->port);
		unlink_rxl(&s->pending, l);
		s->npending--;
		rxl_free(l);
	}
}

static void rxl_accept(struct uroce_shm *s)
{
	rxl_expire(s);
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct shm_rxl *l;

		if (fd < 0)
			return;
		if (!same_user(fd) || s->npending >= SHM_MAX_PENDING ||
		    !(l = calloc(1, sizeof(*l)))) {
			ur_dbg("shm: refused a connection on port %u", s->ep->port);
			close(fd);
			continue;
		}
		l->o = (struct shm_obj){.kind = SHM_RX, .s = s};
		l->fd = fd;
		l->deadline_ns = uroce_now_ns() + SHM_HANDSHAKE_NS;
		l->next = s->pending;
		s->pending = l;
		s->npending++;
		watch(s->ep->ctx, fd, &l->o);
	}
}

/* Can we read the sender's memory (same uid, dumpable; Yama's ptrace_scope
 * or a seccomp filter may say no)?  Read its copy of the nonce: the pid
 * SO_PEERCRED gives is then the process that maps this ring. */
static void pull_probe(struct uroce_shm *s, struct shm_rxl *l, uint64_t ring_va)
{
	struct ucred uc;
	socklen_t ul = sizeof(uc);
	struct uroce_pull_src src = {.nonce_va = ring_va + offsetof(struct shm_ring, nonce),
				     .nonce = l->r->nonce};
	uint64_t got = 0;
	struct iovec loc = {&got, sizeof(got)}, rem = {(void *)(uintptr_t)src.nonce_va, 8};

	if (getsockopt(l->fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) || uc.pid <= 0)
		return;
	src.pid = uc.pid;
	if (process_vm_readv(src.pid, &loc, 1, &rem, 1, 0) != (ssize_t)sizeof(got) ||
	    got != src.nonce || !got) {
		ur_dbg(
		    "shm: cannot read the memory of pid %d (%s): port %u copies through the ring",
		    (int)src.pid, strerror(errno), s->ep->port);
		return;
	}
	l->pull = src;
}

/* A hello on a pending link: map the ring, answer with the doorbell. */
static int rxl_hello(struct uroce_shm *s, struct shm_rxl *l)
{
	struct shm_hello h, rep = {.magic = SHM_MAGIC, .version = SHM_VERSION, .port = s->ep->port};
	size_t len;
	struct stat st;
	int mfd, seals, r = recv_fd(l->fd, &h, &mfd);
	void *map;

	if (r)
		return r;
	len = sizeof(struct shm_ring) + (size_t)h.ring_bytes + h.area_bytes;
	seals = fcntl(mfd, F_GET_SEALS);
	if (h.ring_bytes < SHM_MIN_RING || h.ring_bytes > SHM_MAX_RING ||
	    (h.ring_bytes & (h.ring_bytes - 1)) ||
	    (h.area_bytes && (h.area_bytes < SHM_MIN_AREA || h.area_bytes > SHM_MAX_AREA ||
			      (h.area_bytes & (h.area_bytes - 1)))) ||
	    seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(mfd, &st) || st.st_size != (off_t)len) {
		close(mfd);
		return -1;
	}
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	close(mfd);
	if (map == MAP_FAILED)
		return -1;
	l->r = map;
	l->maplen = len;
	l->size = h.ring_bytes;
	l->port = h.port;
	l->head = 0;
	l->area = h.area_bytes ? l->r->data + h.ring_bytes : NULL;
	l->asize = h.area_bytes;
	if ((h.flags & SHM_HELLO_PULL) && uroce_pull_min())
		pull_probe(s, l, h.ring_va);
	rep.flags = l->pull.pid ? SHM_HELLO_PULL : 0;
	rep.ring_bytes = h.ring_bytes;
	if (send_fd(l->fd, &rep, s->bell))
		return -1;
	unlink_rxl(&s->pending, l);
	s->npending--;
	pthread_mutex_lock(&s->ep->rx_lock);
	l->next = s->rx;
	s->rx = l;
	pthread_mutex_unlock(&s->ep->rx_lock);
	return 0;
}

static void rxl_event(struct uroce_shm *s, struct shm_rxl *l, uint32_t events)
{
	bool up = false, hup = events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR);

	for (struct shm_rxl *p = s->rx; p && !up; p = p->next)
		up = p == l;
	if (!up) {
		int r = (events & EPOLLIN) ? rxl_hello(s, l) : -1;

		if (r > 0 && !hup)
			return; /* not here yet */
		if (r) {
			unlink_rxl(&s->pending, l);
			s->npending--;
			rxl_free(l);
			return;
		}
		if (!hup)
			return; /* up */
	}
	/* a hangup (or anything else: a link carries no messages once up):
	 * deliver what the peer left - its last packets, an application may
	 * be draining the ring meanwhile - then drop the link */
	for (int i = 0; i < 1000 && !atomic_load(&l->bad) &&
			rec_ready(l->r, __atomic_load_n(&l->head, __ATOMIC_RELAXED), l->size);
	     i++)
		if (!uroce_ep_poll(s->ep, 1024))
			sched_yield();
	pthread_mutex_lock(&s->ep->rx_lock);
	unlink_rxl(&s->rx, l);
	pthread_mutex_unlock(&s->ep->rx_lock);
	ur_dbg("shm: link from port %u closed", l->port);
	rxl_free(l);
}

static void txl_event(struct uroce_shm *s, struct shm_txl *l, uint32_t events)
{
	pthread_mutex_lock(&s->ep->tx_lock);
	if (l->state == TXL_CONNECTING && (events & EPOLLIN))
		txl_reply(l);
	else if (l->state == TXL_UP && (events & EPOLLIN))
		events |= EPOLLHUP; /* nothing is ever sent after the reply */
	if (l->state != TXL_NONE && (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))) {
		ur_dbg("shm: link to port %u closed", l->port);
		txl_down(l, l->state == TXL_UP ? 0 : uroce_now_ns() + SHM_RETRY_NS);
	}
	pthread_mutex_unlock(&s->ep->tx_lock);
}

void uroce_shm_event(struct uroce_ctx *ctx, void *p, uint32_t events)
{
	struct shm_obj *o = (struct shm_obj *)((uintptr_t)p & ~(uintptr_t)1);

	(void)ctx;
	switch (o->kind) {
	case SHM_LISTEN:
		rxl_accept(o->s);
		break;
	case SHM_TX:
		txl_event(o->s, (struct shm_txl *)o, events);
		break;
	case SHM_RX:
		rxl_event(o->s, (struct shm_rxl *)o, events);
		break;
	}
}

/* Raise (on) or clear one sleeper's bit in every ring of s it drains;
 * true when one already holds packets. */
static bool rings_sleep(struct uroce_shm *s, uint32_t bit, bool on)
{
	bool busy = false;

	for (struct shm_rxl *l = s ? s->rx : NULL; l; l = l->next) {
		if (atomic_load_explicit(&l->bad, memory_order_relaxed))
			continue;
		if (!on) {
			atomic_fetch_and(&l->r->sleeping, ~bit);
			continue;
		}
		atomic_fetch_or(&l->r->sleeping, bit); /* seq_cst: then the slot (ring_wake) */
	}
	if (!on)
		return false;
	for (struct shm_rxl *l = s ? s->rx : NULL; l && !busy; l = l->next)
		/* at our own copy of head, never the shared one */
		busy = !atomic_load_explicit(&l->bad, memory_order_relaxed) &&
		       rec_ready(l->r, __atomic_load_n(&l->head, __ATOMIC_RELAXED), l->size);
	return busy;
}

bool uroce_shm_sleep(struct uroce_ctx *ctx, bool on)
{
	int nep = atomic_load(&ctx->nep);
	bool busy = false;

	/* the progress thread alone changes the lists: no rx_lock */
	for (int i = 0; i < nep; i++)
		busy |= rings_sleep(ctx->ep[i]->shm, SHM_SLEEP_PROGRESS, on);
	return busy;
}

int uroce_shm_wait(struct uroce_ep *ep, bool on)
{
	struct uroce_shm *s = ep->shm;
	uint64_t v;
	int fd;

	if (!s)
		return -1;
	if (on ? pthread_mutex_trylock(&ep->rx_lock) : pthread_mutex_lock(&ep->rx_lock))
		return -2; /* being drained: do not sleep */
	if (!on) {
		rings_sleep(s, SHM_SLEEP_APP, false);
		pthread_mutex_unlock(&ep->rx_lock);
		return -1;
	}
	/* a counter reset, so that poll() blocks until a sender rings (the
	 * progress thread's epoll is edge-triggered).  A link whose handshake
	 * is under way sends over UDP meanwhile, and the caller polls the
	 * UDP socket too; one that comes up during the sleep has no flag
	 * raised: its first records wait for the poll's timeout. */
	if (read(s->bell, &v, sizeof(v)) < 0 && errno != EAGAIN)
		ur_trace("shm doorbell: %s", strerror(errno));
	fd = rings_sleep(s, SHM_SLEEP_APP, true) ? -2 : s->bell;
	pthread_mutex_unlock(&ep->rx_lock);
	return fd;
}

/* An application thread whose CQs stay empty (src/verbs/cq.c).  A spinning
 * poller that gives the CPU away with sched_yield competes with whatever
 * else runs there at equal weight: under a CPU hog a yield costs a whole
 * scheduler slice (ib_send_lat under a spinning hog on both cores: 618 us
 * typical, kernel TCP 43 us - its receiver sleeps and the sender's wake-up
 * preempts the hog).  So a thread whose yields are taken by such a
 * neighbour sleeps in the kernel instead, on the doorbell of every ring (the
 * SHM_SLEEP_APP bit: the next record's sender rings it) and on the UDP
 * sockets, for at most SHM_IDLE_SLEEP_NS: ibv_poll_cq stays bounded and
 * short, and the progress thread still takes the application for a poller
 * (UROCE_APP_POLL_GAP_NS).
 *
 * Only then: a yield that returns at once costs nothing and keeps the quiet
 * machine's latency, and a yield that runs a peer sharing our CPU (a few
 * microseconds: it answers and yields back, cq.c's co-located mode) is the
 * fastest hand-over there is - sleeping instead cost 38 us per one-way
 * ib_send_lat with both processes pinned to one CPU, against 6.7 us.  A
 * yield that kept us off the CPU for over SHM_IDLE_HOG_NS ran something that
 * does not yield back: from then on the thread sleeps, and yields once
 * every SHM_IDLE_PROBE_NS to see whether the neighbour has gone.
 *
 * Not in a thread that polls the CQs of other contexts too: their packets
 * would not wake it.  False: nothing slept (no same-host link, no neighbour
 * seen, a probe, a ring holds packets, another thread drains): the caller
 * yields, and tells uroce_shm_yielded how long that took. */
#define SHM_IDLE_SLEEP_NS 100000ull
#define SHM_IDLE_HOG_NS	  250000ull
#define SHM_IDLE_PROBE_NS 100000000ull

static __thread struct {
	uint64_t hog_ns; /* when a yield last ran a neighbour that kept the CPU (0: none) */
	uint64_t probe_ns;
	bool probing; /* this yield is a probe */
} idle;

static int idle_mode(void)
{
	static int mode = -1;

	if (mode < 0) {
		const char *v = getenv("UROCE_SHM_IDLE");

		mode = v && *v ? atoi(v) : 2;
	}
	return mode;
}

void uroce_shm_yielded(uint64_t ns)
{
	if (ns > SHM_IDLE_HOG_NS)
		idle.hog_ns = uroce_now_ns();
	else if (idle.probing)
		idle.hog_ns = 0; /* the probe came back soon: gone */
	idle.probing = false;
}

/* Have this thread's yields been taken by a hog (and is this not the time
 * for a probe)? */
static bool idle_hogged(uint64_t now)
{
	if (!idle.hog_ns)
		return false;
	if (now - idle.probe_ns > SHM_IDLE_PROBE_NS) {
		idle.probe_ns = now;
		idle.probing = true;
		return false;
	}
	return true;
}

/* Does the context have a same-host link with a receive ring? */
static bool has_links(struct uroce_ctx *ctx)
{
	int nep = atomic_load(&ctx->nep);

	for (int i = 0; i < nep; i++) {
		struct uroce_shm *s = __atomic_load_n(&ctx->ep[i]->shm, __ATOMIC_RELAXED);

		if (s && __atomic_load_n(&s->rx, __ATOMIC_RELAXED))
			return true;
	}
	return false;
}

bool uroce_shm_spin_stop(struct uroce_ctx *ctx)
{
	return idle_mode() == 2 && has_links(ctx) && idle_hogged(uroce_now_ns());
}

/* Parting: the progress thread serves a same-host requester that shares
 * its CPU (progress.c's guess: its packets come only after a yield that
 * ran another thread).  The scheduler put it there - a doorbell wakes the
 * sleeper on the waker's CPU - and keeps it there as long as every request
 * wakes it again, so a one-sided stream whose target never polls (ib_read_lat,
 * ib_atomic_lat) ran at 8-13 us a READ in about half the runs and 0.8-2 us
 * in the others.  Instead of sleeping after each packet, the thread moves
 * to another CPU of its affinity mask (the mask without this CPU for one
 * sched_setaffinity, then its own mask again) and spins there, where the
 * requester's next packet finds it awake.  At most once a millisecond
 * (uroce_thread_part, progress.c); UROCE_SHM_PART=0: never
 * (measurements).  Counter shm_parts. */
bool uroce_shm_part(struct uroce_ctx *ctx)
{
	static int on = -1;

	if (!uroce_env_on("UROCE_SHM_PART", &on) || !has_links(ctx) || !uroce_thread_part())
		return false;
	uroce_count(ctx, shm_parts, 1);
	return true;
}

int uroce_shm_idle(struct uroce_ctx *ctx)
{
	struct pollfd pfd[2 * sizeof(ctx->ep) / sizeof(ctx->ep[0])];
	struct timespec ts = {.tv_nsec = (long)SHM_IDLE_SLEEP_NS};
	int nep = atomic_load(&ctx->nep), npfd = 0, bell, i, woke = 0;
	uint64_t now = uroce_now_ns();

	if (!idle_mode())
		return 0;
	if (idle_mode() == 2 && !idle_hogged(now))
		return 0;
	if (!uroce_ctx_polled_alone(ctx, now) || !has_links(ctx))
		return 0;
	for (i = 0; i < nep; i++) {
		if ((bell = uroce_shm_wait(ctx->ep[i], true)) == -2)
			break;
		pfd[npfd++] = (struct pollfd){.fd = ctx->ep[i]->fd, .events = POLLIN};
		if (bell >= 0)
			pfd[npfd++] = (struct pollfd){.fd = bell, .events = POLLIN};
	}
	if (i == nep) {
		uroce_count(ctx, shm_idle_sleeps, 1);
		woke = ppoll(pfd, (nfds_t)npfd, &ts, NULL) > 0;
	}
	for (int j = 0; j < i + (i < nep); j++)
		uroce_shm_wait(ctx->ep[j], false);
	return i == nep ? 1 + woke : 0;
}

void *uroce_shm_test_ring(struct uroce_ep *ep, uint16_t peer_port, size_t *len)
{
	struct uroce_shm *s = ep->shm;
	void *map = NULL;

	/* a mapping of its own, as a peer has: ours may go away any time */
	pthread_mutex_lock(&ep->rx_lock);
	for (struct shm_rxl *l = s ? s->rx : NULL; l && !map; l = l->next)
		if (l->port == peer_port && !atomic_load(&l->bad)) {
			map = mremap(l->r, 0, l->maplen, MREMAP_MAYMOVE);
			*len = l->maplen;
		}
	pthread_mutex_unlock(&ep->rx_lock);
	return map == MAP_FAILED ? NULL : map;
}

/* ---- the single copy (src/transport/pull.c) ---- */

uint32_t uroce_pull_min(void)
{
	static uint64_t v = UINT64_MAX;
	/* default: messages of 32 KiB and more (docs/design.md) */
	uint64_t n = uroce_env_num("UROCE_SHM_PULL", 32768, &v);

	return n > UINT32_MAX ? UINT32_MAX : n == 1 ? 2 : (uint32_t)n;
}

bool uroce_shm_pull_ok(struct uroce_ep *ep, const struct uroce_ipinfo *ip)
{
	struct uroce_shm *s = ep->shm;
	struct shm_txl *l;
	bool ok;

	/* a capture shows what UDP would carry: packets, not descriptions */
	if (!s || ip->family != AF_INET || ip->dport == UR_ROCE_PORT || ep->ctx->pcap)
		return false;
	pthread_mutex_lock(&ep->tx_lock);
	l = txl_find(s, ip->dport, false);
	ok = l && l->state == TXL_UP && l->pull;
	pthread_mutex_unlock(&ep->tx_lock);
	return ok;
}

void uroce_shm_recheck(struct uroce_ep *ep, const struct uroce_ipinfo *ip)
{
	struct uroce_shm *s = ep->shm;
	struct shm_txl *l;

	if (!s || ip->family != AF_INET || ip->dport == UR_ROCE_PORT)
		return;
	pthread_mutex_lock(&ep->tx_lock);
	l = txl_find(s, ip->dport, false);
	if (l && l->state == TXL_UP)
		l->recheck = true;
	pthread_mutex_unlock(&ep->tx_lock);
}

bool uroce_shm_bulk_full(struct uroce_ep *ep, const struct uroce_ipinfo *ip, uint64_t bytes)
{
	struct uroce_shm *s = ep->shm;
	struct shm_txl *l;
	bool full = false;

	if (!s || bytes > SHM_MAX_BULK || !bulk_wanted())
		return false;
	pthread_mutex_lock(&ep->tx_lock);
	l = txl_find(s, ip->dport, false);
	if (l && l->state == TXL_UP && l->pull && l->area && align_up(bytes) <= l->asize / 2) {
		uint64_t at;

		full = area_alloc(l, align_up(bytes), &at) == -EAGAIN;
	} else if (l && l->state == TXL_UP && l->pull) {
		/* ring_put's rule, with a pad at worst; the shared head is
		 * only looked at (ring_put checks it before it counts) */
		uint64_t need = SHM_ALIGN + SHM_MAX_PKT + align_up(bytes) + SHM_ALIGN,
			 head = l->head;

		if (l->tail + need - head > l->size / 2) {
			head = atomic_load_explicit(&l->r->head, memory_order_acquire);
			full = l->tail - head <= l->size && l->tail + need - head > l->size / 2;
		}
	}
	pthread_mutex_unlock(&ep->tx_lock);
	return full;
}

int uroce_shm_pull(struct uroce_ctx *ctx, const struct uroce_pull_src *src, const struct iovec *dst,
		   int ndst, const struct iovec *from, int nfrom, size_t total)
{
	struct iovec loc[UROCE_MAX_SGE + 1], rem[UROCE_MAX_SGE + 1];
	uint64_t got = 0;
	ssize_t n;

	if (!src->pid || ndst < 1 || nfrom < 1 || ndst > UROCE_MAX_SGE || nfrom > UROCE_MAX_SGE)
		return -EINVAL;
	if (src->ring) {
		/* a bulk record: the bytes are in the ring, as the sender
		 * copied them (a peer that changes them meanwhile changes only
		 * its own message's data); the caller validated dst */
		if (total > src->ring_len) {
			uroce_count(ctx, shm_pull_fail, 1);
			return -EFAULT;
		}
		for (size_t i = 0, at = 0; i < (size_t)ndst && at < total; at += dst[i++].iov_len)
			bulk_copy(dst[i].iov_base, src->ring + at,
				  dst[i].iov_len < total - at ? dst[i].iov_len : total - at);
		uroce_count(ctx, shm_pull, 1);
		uroce_count(ctx, shm_pull_bytes, total);
		return 0;
	}
	memcpy(loc, dst, sizeof(*dst) * (size_t)ndst);
	memcpy(rem, from, sizeof(*from) * (size_t)nfrom);
	/* the nonce last: the process read is the one that owns the link
	 * (a pid reused after the peer died fails here) */
	loc[ndst] = (struct iovec){&got, sizeof(got)};
	rem[nfrom] = (struct iovec){(void *)(uintptr_t)src->nonce_va, sizeof(got)};
	n = process_vm_readv(src->pid, loc, (unsigned long)ndst + 1, rem, (unsigned long)nfrom + 1,
			     0);
	if (n < 0 || (size_t)n != total + sizeof(got) || got != src->nonce) {
		int err = n < 0 ? errno : EFAULT;

		if (n >= 0 && (size_t)n == total + sizeof(got))
			err = ESRCH; /* another process */
		uroce_count(ctx, shm_pull_fail, 1);
		ur_dbg("shm: pull of %zu bytes from pid %d: %s", total, (int)src->pid,
		       n < 0 ? strerror(err) : "short or from another process");
		return -err;
	}
	uroce_count(ctx, shm_pull, 1);
	uroce_count(ctx, shm_pull_bytes, total);
	return 0;
}

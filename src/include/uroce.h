/* uroce internal object model.
 *
 * Every verbs object is allocated as the rdma-core public struct followed by
 * uroce's own state, so the inline functions of <infiniband/verbs.h> (which
 * dereference ctx->ops, qp->context, cq->context ...) work unchanged.
 *
 * Locking (see docs/design.md):
 *   ctx->lock   object lists, endpoint and QP tables, progress thread start
 *   qp->lock    all of one QP's state: SQ, RQ, requester/responder/completer
 *   cq->lock    one CQ's ring and arming state
 *   ctx->mr_lock (rwlock) the MR key table; readers hold it while copying
 *               into or out of registered memory, so dereg waits for them
 * Order: ctx->lock -> qp->lock -> cq->lock, qp->lock -> mr_lock.
 */
#ifndef UROCE_H
#define UROCE_H

#include <infiniband/verbs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "uroce_export.h"
#include "uroce_log.h"
#include "transport/pkt.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- Limits: every one is enforced (ibv_query_device reports them). ---- */
enum {
	UROCE_MAX_GID = 16,
	UROCE_MAX_QP_WR = 16384,
	UROCE_MAX_SGE = 32,
	UROCE_MAX_INLINE = 512,
	UROCE_MAX_CQE = 4194303, /* as mlx5: perftest -q 1024 asks 128 per QP */
	UROCE_MAX_CQ = 16384,
	UROCE_MAX_QP = 16384,
	UROCE_MAX_MR = 65536,
	UROCE_MAX_PD = 16384,
	UROCE_MAX_MW = 65536,
	UROCE_MAX_SRQ = 16384,
	UROCE_MAX_AH = 16384,	  /* rxe: 0x3fff */
	UROCE_MAX_RD_ATOM = 128,  /* max_qp_rd_atom / max_qp_init_rd_atom: rxe's */
	UROCE_EP_SLOTS = 256,	  /* QPNs per UDP endpoint: qpn = port << 8 | slot */
	UROCE_MAX_MSG = 1u << 31, /* max_msg_sz */
	/* rxe's: a software RoCE device, no IEEE OUI (tools treat 0 as "no
	 * device"); the part id tells uroce (0x7572, "ur") from rxe (0) */
	UROCE_VENDOR_ID = 0xffffff,
	UROCE_VENDOR_PART = 0x7572,
	UROCE_HW_VER = 1,
};
#define UROCE_MAX_MR_SIZE (1ull << 40)
#define UROCE_FW_VER	  "0.1.0" /* fw_ver: the uroce release */

/* ---- Devices (src/net/ifaddr.c, src/verbs/device.c) ---- */
struct uroce_gid_entry {
	union ibv_gid gid;
	int family; /* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} addr;
};

struct uroce_dev {
	struct ibv_device ibdev; /* must be first (ibv_device *) */
	const void *ops;	 /* verbs_device.ops slot: non-NULL, not any provider's */
	char ifname[IF_NAMESIZE];
	int ifindex;
	unsigned int if_mtu;
	enum ibv_mtu max_mtu;
	enum ibv_mtu active_mtu;
	uint64_t guid; /* network order, EUI-64 from the MAC (or the address) */
	uint8_t mac[6];
	int index;
	int ngid;
	struct uroce_gid_entry gid[UROCE_MAX_GID];
};

/* Discover interfaces; fills at most max devices; returns the count. */
int uroce_discover(struct uroce_dev **devs, int max);
/* Translate an ibv_mtu to bytes and back. */
static inline uint32_t uroce_mtu_bytes(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128u << m : 0;
}

/* ---- UDP endpoint: one socket, up to 255 QPs (src/net/endpoint.c) ---- */
struct uroce_qp;
struct uroce_ctx;

struct uroce_ep_rx; /* receive batch buffers, endpoint.c */
struct uroce_fault; /* fault injection state, src/net/fault.c */
struct uroce_stats; /* the counter file, src/core/stats.c */
struct uroce_pcap;  /* packet capture, src/net/pcap.c */
struct uroce_shm;   /* same-host shared-memory wire, src/net/shm.c */

struct uroce_ep {
	struct uroce_ctx *ctx;
	int fd;
	uint16_t port; /* host order */
	bool std;      /* standard-port mode: addr:4791, QPN = slot index */
	int nqp;
	/* Native mode on a device with one IPv4 address: fd is bound to that
	 * address (fast_addr), so its reads carry no IP_PKTINFO and its sends
	 * none either; fd_any, bound to the wildcard address on the same
	 * port, holds the port for the host and gets what is sent to any
	 * other address (src/net/endpoint.c, "The address socket").  -1:
	 * fd is the wildcard socket. */
	int fd_any;
	struct in_addr fast_addr;
	unsigned int any_looks; /* polls since fd_any was last read */
	bool rx_tos;		/* fd (the address socket) has IP_RECVTOS (endpoint.c) */
	/* Written under ctx->lock; read by the receive path under rx_lock.
	 * Destroying a QP clears its slot, then takes rx_lock once, so no
	 * receive batch still uses the QP when it is freed.  Native: 256
	 * slots, QPN = port << 8 | slot; standard (src/net/stdport.c):
	 * UROCE_STD_SLOTS slots, QPN = slot.  Slot 0 is never used. */
	struct uroce_qp **slot;
	uint32_t nslot;
	uint32_t slot_hi;   /* no slot at or above this was ever used */
	uint32_t next_slot; /* where the search for a free slot starts */
	pthread_mutex_t rx_lock;
	struct uroce_ep_rx *rx;
	uint64_t rx_ns; /* the clock of the receive batch in hand (rx_lock; 0: not read) */
	/* transmit batch for UDP GSO (src/net/gso.c); tx_lock is a leaf lock */
	pthread_mutex_t tx_lock;
	struct uroce_ep_tx *tx;
	bool gso;
	uint32_t rcvbuf;	   /* SO_RCVBUF as granted: bounds the RC send window */
	atomic_int tx_inflight;	   /* packets its RC QPs have in flight (rc.h) */
	atomic_uint rx_batches;	   /* recvmmsg calls that returned packets: a probe
				      waits while the endpoint hears anything (req.c) */
	atomic_ullong probe_owner; /* rx_batches << 32 | 1 << 31 | QPN of the one
				      QP that may probe during this silence (req.c) */
	/* Some QP on this endpoint owes an ACK that an application poll
	 * deferred (src/net/endpoint.c, "ACK deferral"). */
	atomic_bool ack_owed;
	struct uroce_shm *shm; /* same-host wire (src/net/shm.c), NULL when off */
};

/* Counters: struct uroce_counters (device) and struct uroce_stats_qp (per QP)
 * live in a shared-memory file that `uroce stat` reads; the list of
 * counters and their names is in src/core/stats.h.  All relaxed atomics. */
#include "core/stats.h"
#define uroce_count(ctx, field, n)                                                                 \
	atomic_fetch_add_explicit(&(ctx)->cnt->field, (n), memory_order_relaxed)
/* Count for a QP: its own slot and the device total. */
#define uroce_qp_count(qp, field, n)                                                               \
	(uroce_count((qp)->ctx, field, n),                                                         \
	 atomic_fetch_add_explicit(&(qp)->stats->c.field, (n), memory_order_relaxed))
/* The QP's slot only (where the device total is counted elsewhere). */
#define uroce_qp_stat(qp, field, n)                                                                \
	atomic_fetch_add_explicit(&(qp)->stats->c.field, (n), memory_order_relaxed)

/* Application polls further apart than this are a pause (progress.c). */
#define UROCE_APP_POLL_GAP_NS 200000ull
/* A yield inside ibv_poll_cq counts as polling for up to this long
 * (uroce_app_yields, progress.c). */
#define UROCE_APP_YIELD_HOLD_NS 2000000ull

/* ---- Context ---- */
struct uroce_ctx {
	struct verbs_context vctx; /* must be first; ibv_context is its last member */
	struct uroce_dev *dev;
	pthread_mutex_t lock;

	/* endpoints: appended under ctx->lock, never removed before close, so
	 * poll_cq may walk ep[0..nep) without the lock */
	struct uroce_ep *ep[UROCE_MAX_QP / (UROCE_EP_SLOTS - 1) + 1];
	atomic_int nep;

	/* progress engine (src/core/progress.c) */
	int epfd;
	int wake_fd; /* eventfd: wakes the progress thread */
	pthread_t thread;
	_Atomic pid_t prog_tid; /* the thread's kernel id, once it runs (sched.c) */
	bool thread_running;
	atomic_bool stop;
	atomic_ullong timer_ns;	   /* earliest armed QP timer, 0 = none */
	int wake_epfd;		   /* epoll with only wake_fd: sleep while the app polls */
	atomic_ullong app_poll_ns; /* last time an application thread polled a CQ */
	atomic_bool prog_deep;	   /* the thread sleeps on the sockets, unbounded by a slice */
	/* the UDP sockets are in epfd (progress.c, socks_watch); the thread's own */
	bool socks_watched;
	/* when the application's polls began to come less than
	 * UROCE_APP_POLL_GAP_NS apart (src/verbs/cq.c, src/core/progress.c) */
	atomic_ullong app_burst_ns;
	/* the thread stays out of an application poller's way (wake it when
	 * that application is about to sleep: uroce_app_sleeps) */
	atomic_bool prog_grace;
	/* when the thread last found data that a poller's pause had left in the
	 * sockets (grace_look, src/core/progress.c) */
	atomic_ullong grace_found_ns;
	/* the application's last poll returned a completion: it may stop
	 * polling now and wait elsewhere (uroce_app_done, progress.c) */
	atomic_bool app_done;
	/* QPs with timers, scanned by the progress thread */
	struct uroce_qp **qps;
	int nqps, qps_cap;

	/* MR key table: open addressing over keys */
	pthread_rwlock_t mr_lock;
	struct uroce_mr **mr_tab;
	uint32_t mr_tab_size, nmr, nmw; /* MRs and windows in it, each up to its max_* */

	/* async events */
	int async_wr_fd; /* write end; context.async_fd is the read end */
	pthread_mutex_t async_lock;
	struct uroce_qp *async_zombies; /* destroyed QPs with unread events (async.c) */

	/* UD multicast (src/net/mcast.c) */
	pthread_mutex_t mcast_lock;
	struct uroce_ep *mcast_ep; /* UDP 4791, SO_REUSEADDR, joined groups */
	struct uroce_mcast_att *mcast;
	int nmcast, mcast_cap;
	int std_err; /* standard-port mode: why 4791 could not be bound (logged once) */
	/* standard-port mode: QP1's receiver, uroce's librdmacm (src/net/qp1.c) */
	void (*qp1_rx)(void *arg, const uint8_t *pkt, size_t len, uint32_t src, uint32_t dst);
	void *qp1_arg;

	atomic_uint npd, ncq, nqp_total;
	atomic_uint nsrq, nah;	    /* against max_srq, max_ah */
	struct uroce_counters *cnt; /* in the stats file (src/core/stats.c) */
	struct uroce_stats *stats;
	struct uroce_pcap *pcap; /* UROCE_PCAP capture, NULL when off (src/net/pcap.c) */
	/* UROCE_FAULT state: NULL until first used (src/net/fault.h) */
	struct uroce_fault *fault;
	struct uroce_ctx *next_open; /* open contexts (src/verbs/device.c) */
	atomic_size_t dm_used;	     /* bytes of device memory allocated (src/verbs/dm.c) */
};

static inline struct uroce_ctx *to_uctx(struct ibv_context *c)
{
	return container_of(c, struct uroce_ctx, vctx.context);
}

/* ---- PD / MR (src/verbs/pd_mr.c) ---- */
struct uroce_pd {
	struct ibv_pd ibpd;
	atomic_uint refs; /* MRs, QPs, SRQs, AHs, MWs using it */
	/* A parent domain (src/verbs/td.c): prot is the protection domain it
	 * stands for (NULL for a plain PD), with an optional thread domain
	 * and allocators for the buffers of QPs and CQs created on it. */
	struct uroce_pd *prot;
	struct ibv_td *td;
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
		       uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type);
	void *pd_context;
};
static inline struct uroce_pd *to_upd(struct ibv_pd *p)
{
	return container_of(p, struct uroce_pd, ibpd);
}
/* The protection domain behind pd (itself, or a parent domain's PD). */
static inline struct ibv_pd *uroce_pd_prot(struct ibv_pd *pd)
{
	return to_upd(pd)->prot ? &to_upd(pd)->prot->ibpd : pd;
}
/* Do two PDs (or parent domains) protect alike?  The key checks' test. */
static inline bool uroce_pd_same(struct ibv_pd *a, struct ibv_pd *b)
{
	return a == b || (a && b && uroce_pd_prot(a) == uroce_pd_prot(b));
}
/* Buffers of QPs and CQs: from a parent domain's allocator when pd is one
 * that has them, else calloc (zeroed either way); *custom says which, for
 * uroce_pd_buf_free.  NULL when out of memory. */
void *uroce_pd_buf_alloc(struct ibv_pd *pd, size_t size, uint64_t type, bool *custom);
void uroce_pd_buf_free(struct ibv_pd *pd, void *p, uint64_t type, bool custom);
/* ibv_dealloc_pd of a parent domain that nothing uses any more */
int uroce_parent_domain_free(struct uroce_pd *pd);
/* resource_type values passed to a parent domain's allocators, numbered
 * like mlx5dv's MLX5DV_RES_TYPE_* under rxe's driver id */
#define UROCE_RES_TYPE_QP  ((uint64_t)RDMA_DRIVER_RXE << 32 | 1)
#define UROCE_RES_TYPE_SRQ ((uint64_t)RDMA_DRIVER_RXE << 32 | 4)
#define UROCE_RES_TYPE_CQ  ((uint64_t)RDMA_DRIVER_RXE << 32 | 5)

struct uroce_mr {
	struct ibv_mr ibmr;
	uint64_t iova; /* address the peer uses (== addr unless iova2) */
	uint64_t length;
	unsigned int access;
	struct uroce_mr *next; /* key hash chain */
	/* The key table also holds memory windows (src/verbs/mw.c): same
	 * fields for the bound range, plus what a window needs. */
	enum { UROCE_KEY_MR, UROCE_KEY_MW1, UROCE_KEY_MW2 } kind;
	uint32_t mw_qpn;	 /* type 2: the QP it is bound through */
	struct uroce_mr *parent; /* the MR a window is bound to */
	atomic_uint nbound;	 /* MR: windows bound to it */
	bool odp;		 /* IBV_ACCESS_ON_DEMAND: pages may be unmapped */
	struct uroce_dm *dm;	 /* ibv_reg_dm_mr: the device memory it covers */
};
int uroce_key_insert(struct uroce_ctx *ctx, struct uroce_mr *mr);
void uroce_key_remove(struct uroce_ctx *ctx, struct uroce_mr *mr);
int uroce_key_move_locked(struct uroce_ctx *ctx, struct uroce_mr *mr, uint32_t key);

/* memory windows: executed by the requester / responder (qp->lock held) */
enum ibv_wc_status uroce_mw_bind(struct uroce_qp *qp, struct ibv_mw *mw, uint32_t new_rkey,
				 const struct ibv_mw_bind_info *bi);
enum ibv_wc_status uroce_mw_invalidate(struct uroce_qp *qp, uint32_t rkey, bool remote);
static inline struct uroce_mr *to_umr(struct ibv_mr *m)
{
	return container_of(m, struct uroce_mr, ibmr);
}

/* Look up by key under ctx->mr_lock (caller holds it for read). */
struct uroce_mr *uroce_mr_lookup(struct uroce_ctx *ctx, uint32_t key);
/* Resolve [iova, iova+len) against an MR: returns the host pointer, or NULL
 * when out of bounds.  Caller holds mr_lock. */
static inline uint8_t *uroce_mr_ptr(const struct uroce_mr *mr, uint64_t iova, uint64_t len)
{
	if (iova < mr->iova || len > mr->length || iova - mr->iova > mr->length - len)
		return NULL;
	return (uint8_t *)mr->ibmr.addr + (iova - mr->iova);
}

/* Create an MR over [addr, addr+length) seen by the peer at iova, with
 * its key (access already checked).  NULL with errno set. */
struct ibv_mr *uroce_mr_new(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			    unsigned int access);

/* ---- ODP (src/verbs/odp.c) ----
 * Copies into and out of an ODP MR go through the kernel (process_vm_readv
 * and _writev on this process), which reports an unmapped page as EFAULT
 * instead of a SIGSEGV; other MRs are plain memcpy.  False on a fault. */
bool uroce_odp_read(void *dst, const void *mr_src, size_t len);
bool uroce_odp_write(void *mr_dst, const void *src, size_t len);
/* Fault in the 8 bytes at p writable (for an atomic): false when they are
 * not mapped writable. */
bool uroce_odp_atomic_ok(void *p);
int uroce_odp_reg_check(void *addr, size_t length, unsigned int access, const char *verb);
static inline bool uroce_mr_read(const struct uroce_mr *mr, void *dst, const void *src, size_t len)
{
	if (__builtin_expect(mr->odp, 0))
		return uroce_odp_read(dst, src, len);
	memcpy(dst, src, len);
	return true;
}
static inline bool uroce_mr_write(const struct uroce_mr *mr, void *dst, const void *src, size_t len)
{
	if (__builtin_expect(mr->odp, 0))
		return uroce_odp_write(dst, src, len);
	memcpy(dst, src, len);
	return true;
}

/* ---- device memory (src/verbs/dm.c) ---- */
struct uroce_dm {
	struct ibv_dm ibdm;
	uint8_t *buf;
	size_t length;
	size_t charged;	  /* of the context's device memory (length, aligned) */
	atomic_uint refs; /* MRs over it */
};
/* odp_caps, max_dm_size ... of ibv_query_device_ex (odp.c, dm.c) */
void uroce_odp_query(struct ibv_device_attr_ex *a);
void uroce_dm_query(struct ibv_device_attr_ex *a);
/* Install the ODP, DM and domain verbs in the context (odp.c, dm.c, td.c) */
void uroce_odp_set_ops(struct verbs_context *v);
void uroce_dm_set_ops(struct verbs_context *v);
void uroce_td_set_ops(struct verbs_context *v);

/* ---- CQ and completion channel (src/verbs/cq.c) ---- */
struct uroce_channel {
	struct ibv_comp_channel ibch;
	int wr_fd; /* write end of the pipe; ibch.fd is the read end */
	pthread_mutex_t lock;
	struct uroce_cq **cqs; /* live CQs attached, for handle validation */
	int ncq, cap;
};

/* When a completion was queued (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP*) */
struct uroce_cq_ts {
	uint64_t ns;	  /* CLOCK_MONOTONIC: the device clock, 1 GHz */
	uint64_t wall_ns; /* CLOCK_REALTIME */
};

struct uroce_cq {
	struct ibv_cq_ex ibcq; /* every CQ is an ibv_cq_ex */
	pthread_mutex_t lock;
	struct ibv_wc *ring;
	uint32_t size; /* ring slots (cqe + 1) */
	uint32_t head, tail, count;
	int armed; /* 0, 1 = next completion, 2 = solicited only */
	bool overflow;
	uint64_t handle;
	uint32_t events_delivered; /* read by ibv_get_cq_event */
	atomic_uint refs;	   /* QPs using it */
	struct uroce_ctx *ctx;
	/* ibv_cq_ex poll iterator and timestamps (src/verbs/cq_ex.c) */
	struct ibv_wc cur; /* the completion start_poll/next_poll took */
	struct uroce_cq_ts cur_ts;
	struct uroce_cq_ts *ts;	   /* per ring slot; NULL unless wc_flags asks */
	uint64_t wc_flags;	   /* IBV_WC_EX_WITH_* the CQ was created with */
	pthread_mutex_t poll_lock; /* start_poll..end_poll, unless single_threaded */
	bool single_threaded;
	struct ibv_pd *pdom; /* the parent domain it was created on, or NULL */
	bool ring_custom;    /* ring from pdom's allocator (src/verbs/td.c) */
};
static inline struct uroce_cq *to_ucq(struct ibv_cq *c)
{
	return container_of((struct ibv_cq_ex *)c, struct uroce_cq, ibcq);
}

/* Append one completion; notifies the channel when armed.  Takes cq->lock. */
void uroce_cq_push(struct uroce_cq *cq, const struct ibv_wc *wc, bool solicited);
unsigned long uroce_cq_pushes(void);
/* Remove the unpolled completions of QP qpn, the others keep their order
 * (a QP moved to RESET, as mlx5_cq_clean).  Takes cq->lock. */
void uroce_cq_clean(struct uroce_cq *cq, uint32_t qpn);

/* ---- Work queues ---- */
struct uroce_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

enum uroce_wqe_state {
	UROCE_WQE_POSTED, /* not fully sent yet */
	UROCE_WQE_SENT,	  /* every packet sent, awaiting ACK/response */
	UROCE_WQE_DONE,	  /* completed (success or error) */
};

struct uroce_swqe {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	unsigned int send_flags;
	uint32_t imm_data; /* raw, network order (or invalidate rkey) */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add, swap;
	uint32_t length; /* total bytes */
	int num_sge;
	bool signaled;
	enum uroce_wqe_state state;
	enum ibv_wc_status status;
	uint32_t first_psn, last_psn, npkts;
	bool split; /* an RDMA WRITE sent as one WRITE ONLY per packet (req.c) */
	uint64_t atomic_orig;
	struct uroce_sge sg[UROCE_MAX_SGE];
	uint8_t *inline_data; /* when IBV_SEND_INLINE: copy of the data */
	uint32_t xrc_srqn;    /* XRC: the remote SRQ (XRCETH) */
	struct ibv_mw *mw;    /* BIND_MW: the window, new rkey in rkey, range in bind */
	struct ibv_mw_bind_info bind;
};

struct uroce_rwqe {
	uint64_t wr_id;
	int num_sge;
	uint32_t length;
	struct uroce_sge sg[UROCE_MAX_SGE];
};

struct uroce_sq {
	struct uroce_swqe *wqe;
	uint8_t *inline_buf; /* max_inline bytes per slot */
	uint32_t size;	     /* slots (power of two) */
	uint32_t max_wr, max_sge, max_inline;
	uint32_t head; /* next to post */
	uint32_t req;  /* next WQE the requester sends from */
	uint32_t tail; /* oldest not completed */
};

struct uroce_rq {
	struct uroce_rwqe *wqe;
	uint32_t size, max_wr, max_sge;
	uint32_t head, tail;
};

/* ---- QP ---- */
struct uroce_qpx;
struct uroce_rd_res { /* a saved RDMA READ / atomic request for replay */
	uint8_t opcode;
	uint32_t psn, last_psn;
	uint64_t va;
	uint32_t rkey, len;
	uint64_t atomic_orig;
	bool valid;
};

struct uroce_qp {
	struct ibv_qp_ex ibqp; /* every QP is an ibv_qp_ex */
	struct uroce_ctx *ctx;
	/* async events naming this QP, queued and handed out (ctx->async_lock);
	 * a destroyed QP with unread ones stays on ctx->async_zombies */
	uint32_t async_queued, async_read;
	bool async_dead;
	struct uroce_qp *async_next;
	struct uroce_stats_qp *stats; /* counters, never NULL (src/core/stats.c) */
	pthread_mutex_t lock;
	struct uroce_ep *ep;
	struct ibv_qp_attr attr; /* what modify_qp set, for query_qp */
	struct ibv_qp_init_attr init;
	struct uroce_ipinfo path; /* addresses and ports for outgoing packets */
	uint32_t mtu;		  /* path MTU in bytes */
	bool sq_sig_all;
	uint8_t tr;	       /* transport class of its opcodes: UR_TR_RC/UC/UD/XRC */
	struct ibv_xrcd *xrcd; /* XRC_RECV: its domain */
	struct uroce_sq sq;
	struct uroce_rq rq;
	/* ibv_wr_* batch (src/verbs/qp_ex.c); NULL unless created with
	 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS */
	struct uroce_qpx *qpx;
	/* created on a parent domain with allocators: which of sq.wqe (1),
	 * sq.inline_buf (2), rq.wqe (4) came from them (src/verbs/td.c) */
	uint8_t buf_custom;
	/* selective repeat between uroce peers (src/transport/sack.c); NULL:
	 * IBTA go-back-N only (standard-port mode, UROCE_SACK=0, not RC) */
	struct uroce_sack *sk;
	uint16_t sack_epoch; /* this QP's requester incarnation, on its packets (sack.c) */
	/* the piggy-backed ACK (pkt.h UR_BTH4_PIGGY): this QP takes them
	 * (native-mode RC, UROCE_ACK_PIGGY), and its peer's responses said it
	 * does too (set at RTR, learned in comp.c) */
	bool piggy, piggy_peer;

	/* requester (src/transport/req.c) */
	struct {
		uint32_t psn;	      /* next PSN to send */
		uint32_t offset;      /* bytes of sq.wqe[sq.req] already sent */
		uint32_t inflight;    /* packets sent and not acknowledged */
		uint32_t counted;     /* the part of inflight in ep->tx_inflight */
		uint32_t rd_inflight; /* READ/atomic requests outstanding */
		uint32_t una_psn;     /* oldest unacknowledged PSN */
		uint32_t max_psn;     /* past the highest PSN ever sent (before a go-back) */
		int retry_cnt, rnr_retry;
		uint64_t deadline_ns; /* retransmit timer (a probe or the timeout); 0 = idle */
		uint64_t progress_ns; /* when the timeout last started over */
		uint64_t heard_ns;    /* the peer's last response (RETRY_EXC_ERR's warning) */
		uint64_t srtt_ns;     /* smoothed round trip, 0 = none measured yet */
		uint64_t rtt_t0;      /* rtt_psn's send time, while rtt_on */
		/* the clock, read once for the packet being sent (req_step, a
		 * resend) and used by its pacing, its selective-repeat record,
		 * its round-trip timing and the timer: 0 outside a send */
		uint64_t tx_ns;
		uint32_t rtt_psn;
		bool rtt_on;
		uint8_t probes;	       /* probes sent since the timeout started over */
		unsigned int probe_rx; /* ep->rx_batches when the probe was armed */
		uint64_t rnr_until_ns; /* RNR back-off: do not send before */
		uint64_t wake_ns;      /* pacing or a reordering check due (sack.c, cc.c) */
		bool need_retry;       /* went back to retry_psn; ignore gaps until una moves */
		uint32_t retry_psn;
		bool halted; /* sq.wqe[halt_at] failed: send nothing from it on */
		uint32_t halt_at;
		bool pull_off; /* the peer failed a pull: messages go through the ring */
	} req;

	/* completer state */
	struct {
		uint32_t read_psn; /* next expected READ response PSN */
	} comp;

	/* responder (src/transport/resp.c) */
	struct {
		uint32_t psn; /* expected PSN */
		uint32_t msn;
		/* complete_recv counted the message ending at this packet
		 * (its ACK may leave before resp_done runs) */
		bool msn_counted;
		bool nak_sent;	  /* a PSN sequence NAK is outstanding */
		bool pull_failed; /* a pull failed: our responses say UR_BTH4_NOPULL */
		bool in_send;	  /* a multi-packet SEND is in progress */
		bool in_write;
		bool have_rwqe;
		struct uroce_rwqe rwqe;
		uint32_t rcv_offset; /* bytes received into the current message */
		uint64_t write_va;
		uint32_t write_rkey, write_len;
		uint32_t write_offset;
		/* the last request executed was an RDMA WRITE's last packet
		 * without immediate, at write_next_psn - 1: a WRITE ONLY at
		 * write_next_psn that goes on at write_va + write_len with
		 * write_rkey is placed while checked (rx_place.c) */
		bool write_next;
		uint32_t write_next_psn;
		struct uroce_rd_res *res; /* ring of max_dest_rd_atomic */
		uint32_t res_head, nres;
		bool ack_pending;
		bool ack_eager;	      /* the pending ACK may not wait for a later one */
		uint64_t ack_lazy_ns; /* since when a lazy ACK is owed, or 0 */
		uint32_t ack_psn;
		uint8_t ack_syn;
		int rnr_timer;
		bool drop_msg; /* UC: drop the rest of a damaged message */
		bool acked;    /* an ACK for acked_psn went out */
		bool comm_est; /* IBV_EVENT_COMM_EST reported */
		uint32_t acked_psn;
		struct ibv_srq *xsrq; /* XRC: the SRQ named by this packet's XRCETH */
		uint32_t xsrqn;	      /* XRC: the SRQ number of the message in progress */
	} resp;
};
static inline struct uroce_qp *to_uqp(struct ibv_qp *q)
{
	return container_of((struct ibv_qp_ex *)q, struct uroce_qp, ibqp);
}

/* ---- shared receive queues (src/verbs/srq.c) ---- */
struct uroce_srq {
	struct ibv_srq ibsrq;
	pthread_mutex_t lock; /* taken inside qp->lock by the responder */
	struct uroce_rq rq;
	uint32_t limit; /* armed limit; 0 = not armed */
	enum ibv_srq_type type;
	struct ibv_cq *cq; /* XRC SRQ: the completion queue */
	struct ibv_xrcd *xrcd;
	uint32_t srq_num;
	atomic_uint refs; /* QPs attached */
	struct uroce_ctx *ctx;
	bool wqe_custom; /* rq.wqe from a parent domain's allocator (td.c) */
};
static inline struct uroce_srq *to_usrq(struct ibv_srq *s)
{
	return container_of(s, struct uroce_srq, ibsrq);
}

/* Take the next receive WQE for qp (from its SRQ if it has one).  False when
 * none is posted.  qp->lock held. */
bool uroce_rq_pop(struct uroce_qp *qp, struct uroce_rwqe *out);
struct ibv_srq *uroce_xrc_srq_find(struct uroce_ctx *ctx, uint32_t srqn, struct ibv_xrcd *xrcd);

/* ---- XRC domains (src/verbs/xrcd.c) ---- */
void uroce_xrcd_get(struct ibv_xrcd *xrcd);
bool uroce_xrcd_same(struct ibv_xrcd *a, struct ibv_xrcd *b);
void uroce_xrcd_put(struct ibv_xrcd *xrcd);
bool uroce_rq_empty(struct uroce_qp *qp);
int uroce_rq_post(struct uroce_rq *rq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr,
		  const char *verb);

/* ---- address handles (src/verbs/ah.c) ---- */
struct uroce_ah {
	struct ibv_ah ibah;
	struct ibv_ah_attr attr;
	struct uroce_ipinfo path; /* addresses; ports are filled per packet */
};
static inline struct uroce_ah *to_uah(struct ibv_ah *a)
{
	return container_of(a, struct uroce_ah, ibah);
}

/* Resolve an address vector (RoCE: a GRH with dgid and sgid_index) into the
 * IP addresses of a path.  Returns 0 or EINVAL with the reason in why. */
int uroce_av_resolve(struct uroce_dev *d, const struct ibv_ah_attr *ah, struct uroce_ipinfo *path,
		     char *why, size_t why_len);

/* ---- UD multicast (src/net/mcast.c) ---- */
#define UROCE_MCAST_QPN 0xffffffu
struct uroce_mcast_att {
	struct in_addr group;
	struct uroce_qp *qp;
};
/* Deliver a datagram sent to the multicast QPN to every attached QP
 * (rx_lock held, no QP lock). */
void uroce_mcast_deliver(struct uroce_ctx *ctx, struct uroce_pkt *pkt,
			 const struct uroce_ipinfo *ip);
void uroce_mcast_detach_all(struct uroce_qp *qp);
bool uroce_gid_is_mcast(const union ibv_gid *gid, struct in_addr *group);

/* ---- UD transport (src/transport/ud.c), qp->lock held ---- */
int uroce_ud_post_send(struct uroce_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
void uroce_ud_rcv(struct uroce_qp *qp, struct uroce_pkt *pkt, const struct uroce_ipinfo *ip);

/* ---- internal entry points ---- */
uint64_t uroce_now_ns(void);

/* endpoint */
struct uroce_ep *uroce_ep_open(struct uroce_ctx *ctx, struct in_addr addr, uint16_t port,
			       bool reuse);
/* Standard-port mode: bind addr:4791 exclusively; *bind_err = errno of a
 * failed bind (not logged). */
struct uroce_ep *uroce_ep_open_std(struct uroce_ctx *ctx, struct in_addr addr, int *bind_err);
/* Register the endpoint's UDP sockets with the progress thread's epoll. */
int uroce_ep_epoll_add(struct uroce_ep *ep);
void uroce_ep_epoll_watch(struct uroce_ep *ep, bool on);
struct uroce_ep *uroce_ep_get(struct uroce_ctx *ctx, struct uroce_qp *qp, uint32_t *qpn);
void uroce_ep_put(struct uroce_ctx *ctx, struct uroce_qp *qp);
int uroce_ep_xmit(struct uroce_ep *ep, const struct uroce_ipinfo *ip, const void *buf, size_t len);
/* The same with the ICRC not yet written: stamped here unless the packet
 * takes the same-host wire, which needs none (src/net/shm.c). */
int uroce_ep_xmit_nocrc(struct uroce_ep *ep, const struct uroce_ipinfo *ip, uint8_t *buf,
			size_t len);
/* standard-port mode: the context's <address>:4791 endpoint, opened on first use */
struct uroce_ep *uroce_ep_std(struct uroce_ctx *ctx);
/* A packet for QP1 in standard-port mode: true when librdmacm took it. */
bool uroce_qp1_deliver(struct uroce_ctx *ctx, const uint8_t *pkt, size_t len,
		       const struct uroce_ipinfo *ip);
/* src/net/gso.c: batching for UDP GSO/GRO */
void uroce_gso_setup(struct uroce_ep *ep);
void uroce_gso_free(struct uroce_ep *ep);
bool uroce_gso_add(struct uroce_ep *ep, const struct uroce_ipinfo *ip, const void *buf, size_t len);
/* A packet whose payload leaves from where it is (registered memory), not
 * copied into a packet buffer: hdr (BTH and extended headers), the payload
 * pieces iov[0..niov), trl (pad, then the ICRC for IPv4 ID 0); len is the
 * sum.  docs/design.md, "Send and receive paths". */
struct uroce_tx_pkt {
	const uint8_t *hdr;
	uint32_t hlen;
	const struct iovec *iov;
	int niov;
	uint8_t *trl;
	uint32_t tlen;
	uint32_t len;
	/* Not NULL: trl holds the pad only, the ICRC (for this ip) is computed
	 * while the payload is copied into the batch (uroce_tx_copy_wanted). */
	const struct uroce_ipinfo *icrc_ip;
};
/* Is a packet of paylen payload bytes copied into the transmit batch (its
 * ICRC in the same pass) rather than gathered from its MR?  Below
 * UROCE_TX_GATHER_MIN (src/net/gso.c). */
bool uroce_tx_copy_wanted(uint32_t paylen);
/* May a packet to ip go through uroce_ep_xmit_gather?  Not with capture
 * or batching off, nor to a peer the same-host wire may serve. */
bool uroce_ep_gather_ok(struct uroce_ep *ep, const struct uroce_ipinfo *ip);
/* Queue t (after uroce_ep_gather_ok).  The payload memory must stay mapped
 * until the batch leaves: the caller holds ctx->mr_lock for read, and
 * ibv_dereg_mr / ibv_rereg_mr send every batch after taking it. */
void uroce_gso_add_gather(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			  struct uroce_tx_pkt *t);
/* The n packets t[0..n) one after the other, under one lock (a run of a
 * message's packets, req.c). */
void uroce_gso_add_gather_run(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			      struct uroce_tx_pkt *t, int n);
/* The t->len bytes of t, one after the other, into buf. */
void uroce_tx_pkt_linear(const struct uroce_tx_pkt *t, uint8_t *buf);
/* uroce_gso_add_gather through UROCE_FAULT's transmit faults when they are
 * on (src/net/fault.c: a packet it lets pass is not copied). */
void uroce_ep_xmit_gather(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			  struct uroce_tx_pkt *t);
/* uroce_ep_xmit_gather for each of t[0..n): the fault injector, when on,
 * decides per packet. */
void uroce_ep_xmit_gather_run(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			      struct uroce_tx_pkt *t, int n);
/* Send every endpoint's batch (ibv_dereg_mr, ibv_rereg_mr). */
void uroce_ctx_flush_tx(struct uroce_ctx *ctx);
/* Send what the endpoint's batch holds (call before blocking or returning
 * to the application). */
void uroce_ep_flush(struct uroce_ep *ep);
uint32_t uroce_gro_size(const struct msghdr *mh);
/* One datagram for uroce_udp_send_many: len bytes of buf to ip, cut into
 * datagrams of gso_size by the kernel unless 0. */
struct uroce_udp_msg {
	const struct uroce_ipinfo *ip;
	const void *buf;
	const struct iovec *iov; /* instead of buf when not NULL */
	int iovcnt;
	size_t len;
	uint32_t gso_size;
};
#define UROCE_UDP_MAX_MSGS 16 /* datagrams per sendmmsg (gso.c's batch) */
/* Up to UROCE_UDP_MAX_MSGS datagrams in one sendmmsg: how many left in full. */
int uroce_udp_send_many(struct uroce_ep *ep, const struct uroce_udp_msg *m, int n);
/* One sendmsg to ip (with UDP_SEGMENT when gso_size): 0 or an errno. */
int uroce_udp_send(struct uroce_ep *ep, const struct uroce_ipinfo *ip, const void *buf, size_t len,
		   uint32_t gso_size);
int uroce_udp_send_msg(struct uroce_ep *ep, const struct uroce_udp_msg *m);
/* Read and dispatch up to budget packets; returns the count handled.
 * uroce_ep_poll sends every ACK it owes before returning (the progress
 * engine); uroce_ep_poll_app, for an application thread in ibv_poll_cq,
 * may defer a few (see "ACK deferral" in src/net/endpoint.c). */
int uroce_ep_poll(struct uroce_ep *ep, int budget);
int uroce_ep_poll_app(struct uroce_ep *ep, int budget, uint64_t now);
/* The clock of the receive batch being handled (read once per batch, or
 * the application poll's own): a round-trip sample's end (req.c). */
uint64_t uroce_ep_rx_clock(struct uroce_ep *ep);
/* The progress thread's spin: as uroce_ep_poll, but while ep has
 * same-host peers the UDP socket is read only now and then (shm.h). */
int uroce_ep_poll_spin(struct uroce_ep *ep, int budget);
/* As uroce_ep_poll, for the progress thread woken by an endpoint's socket;
 * ev is the epoll event's data.ptr (uroce_ep_epoll_add: which socket it
 * was; a plain endpoint pointer is its address socket).  -EBUSY when
 * another thread holds the endpoint's receive path (it is reading). */
int uroce_ep_poll_woken(void *ev, int budget);
/* The progress thread's look in an application's pause (progress.c): as
 * uroce_ep_poll_woken, but ACKs are deferred as in uroce_ep_poll_app, so
 * the application's reply still carries them. */
int uroce_ep_poll_look(struct uroce_ep *ep, int budget);
/* True while this thread runs the receive path for uroce_ep_poll_app. */
bool uroce_ep_deferring_acks(void);
/* Send the ACKs deferred on ep (wait: block for its rx_lock, else skip it
 * when another thread holds it); the ctx variant does every endpoint. */
void uroce_ep_send_owed_acks(struct uroce_ep *ep, bool wait);
void uroce_ctx_send_owed_acks(struct uroce_ctx *ctx, bool wait);
bool uroce_ctx_acks_owed(struct uroce_ctx *ctx);
/* Has the calling thread polled only this context for the last 10 ms?  A
 * thread that sleeps on one context's sockets and rings must not (two ends
 * of a test in one process: the other's packets would wait). */
bool uroce_ctx_polled_alone(const struct uroce_ctx *ctx, uint64_t now);
/* An application thread whose CQs stay empty while its QPs have many
 * packets in flight over UDP: sleep until a socket is readable (at most
 * 1 ms) instead of spinning; false when it did not (endpoint.c).  now: the
 * poll's clock reading (the empty poll reads it once). */
bool uroce_ctx_wait_acks(struct uroce_ctx *ctx, uint64_t now);
/* Tests and fuzzing: deliver one datagram from ip as if ep had received it. */
void uroce_ep_inject(struct uroce_ep *ep, uint8_t *data, size_t len, const struct uroce_ipinfo *ip);
void uroce_ep_close(struct uroce_ep *ep);
/* The QP that owns qpn on ep, or NULL (rx_lock or ctx->lock held). */
struct uroce_qp *uroce_ep_qp(struct uroce_ep *ep, uint32_t qpn);

/* Standard-port interop mode (src/net/stdport.c, docs/interop.md):
 * UROCE_PORT_MODE=standard.  Every packet goes to UDP 4791; a context
 * receives on <device IPv4 address>:4791; QPNs are slots of that one
 * endpoint. */
enum { UROCE_STD_SLOTS = UROCE_MAX_QP + 2 }; /* QPN 2..UROCE_MAX_QP+1 */
bool uroce_std_mode(void);
/* Destination UDP port of a packet for QP qpn. */
static inline uint16_t uroce_qpn_dport(uint32_t qpn)
{
	return uroce_std_mode() ? UR_ROCE_PORT : (uint16_t)(qpn >> 8);
}
/* Open the context's 4791 endpoint (ctx->lock held); NULL with errno set,
 * the reason logged once per context. */
struct uroce_ep *uroce_std_ep_open(struct uroce_ctx *ctx);
/* Standard mode receive: true when the ICRC matches for some IPv4 ID (the
 * header a UDP socket cannot see); *id is that ID. */
bool uroce_icrc_ok_any_ipid(const struct uroce_pkt *pkt, const struct uroce_ipinfo *ip,
			    uint16_t *id);

/* progress */
int uroce_progress_start(struct uroce_ctx *ctx);
void uroce_progress_stop(struct uroce_ctx *ctx);
void uroce_progress_wake(struct uroce_ctx *ctx);
/* The progress model's view of the application (src/core/progress.c): a
 * thread polls an empty CQ; a thread is about to sleep in the kernel
 * waiting for a completion event. */
void uroce_app_active(struct uroce_ctx *ctx, uint64_t now);
void uroce_app_sleeps(struct uroce_ctx *ctx);
void uroce_app_yields(struct uroce_ctx *ctx, uint64_t now);
void uroce_app_done(struct uroce_ctx *ctx);
void uroce_app_posts(struct uroce_ctx *ctx);
int uroce_progress_add_qp(struct uroce_ctx *ctx, struct uroce_qp *qp);
void uroce_progress_del_qp(struct uroce_ctx *ctx, struct uroce_qp *qp);
/* A QP armed a timer for deadline (ns, uroce_now_ns clock). */
void uroce_progress_arm(struct uroce_ctx *ctx, uint64_t deadline);
/* Move the calling thread to another CPU of its mask, at most once a
 * millisecond (progress.c, "Parting"): true if it moved. */
bool uroce_thread_part(void);
/* The progress thread parts from a UDP requester on its CPU (spin's
 * guess), unless a yield ran a neighbour for a time slice since hog_ns. */
bool uroce_progress_part(struct uroce_ctx *ctx, uint64_t hog_ns);

/* Time slices (src/core/sched.c): a thread's EEVDF slice (sched_runtime
 * of a SCHED_OTHER/BATCH thread, Linux 6.12+; tid 0 = the caller), 0 or an
 * errno (EOPNOTSUPP: the kernel ignored it).  The progress thread's short
 * slice (UROCE_SLICE_US, 0: never): it records its id as it starts
 * (uroce_progress_slice), takes the slice when it serves a pacing wake-up
 * (_paced) and gives it back a second after the last (_idle). */
uint64_t uroce_sched_slice_get(pid_t tid);
int uroce_sched_slice_set(pid_t tid, uint64_t ns);
uint64_t uroce_progress_slice_ns(void);
void uroce_progress_slice(struct uroce_ctx *ctx);
void uroce_progress_slice_paced(uint64_t now);
void uroce_progress_slice_idle(uint64_t now);

/* transport: called with qp->lock held */
void uroce_req_progress(struct uroce_qp *qp);
/* uroce_req_progress without sending the endpoint's batch: the caller
 * calls uroce_ep_flush (ibv_post_send, so deferred ACKs join the batch). */
void uroce_req_run(struct uroce_qp *qp);
void uroce_req_timer(struct uroce_qp *qp, uint64_t now);
void uroce_rcv_request(struct uroce_qp *qp, struct uroce_pkt *pkt);
void uroce_rcv_response(struct uroce_qp *qp, struct uroce_pkt *pkt);
void uroce_resp_flush_ack(struct uroce_qp *qp);
/* The owed ACK into a request of qp instead of a packet of its own (resp.c);
 * false when there is none or it cannot ride (a selective ACK) */
bool uroce_resp_piggy_ack(struct uroce_qp *qp, uint8_t *ext);
/* An ACK a request of the peer carried, after the request (comp.c) */
void uroce_rcv_piggy(struct uroce_qp *qp, const struct uroce_pkt *req, const uint8_t *ext);
/* At RTR: does the QP offer to take piggy-backed ACKs (req.c)? */
void uroce_piggy_init(struct uroce_qp *qp);
bool uroce_resp_ack_lazy(const struct uroce_qp *qp);
/* QP -> ERR and flush everything with IBV_WC_WR_FLUSH_ERR */
void uroce_qp_error(struct uroce_qp *qp);
void uroce_qp_flush(struct uroce_qp *qp);
/* Build + send one packet. */
int uroce_qp_xmit(struct uroce_qp *qp, struct uroce_pkt *pkt);
/* Send pkt (headers built, pad and ICRC not) with its payload in place at
 * iov[0..niov) (caller holds ctx->mr_lock for read); false when the
 * endpoint cannot (uroce_ep_gather_ok): build it whole instead. */
bool uroce_qp_xmit_gather(struct uroce_qp *qp, struct uroce_pkt *pkt, const struct iovec *iov,
			  int niov);

/* async events */
void uroce_async_event(struct uroce_ctx *ctx, enum ibv_event_type type, void *obj);
void uroce_async_qp_wait_acks(struct uroce_qp *qp);
bool uroce_async_qp_retire(struct uroce_qp *qp);
void uroce_async_free_zombies(struct uroce_ctx *ctx);

/* copying between scatter lists and buffers; caller holds mr_lock (read) */
int uroce_sge_copy(struct uroce_ctx *ctx, struct ibv_pd *pd, const struct uroce_sge *sg, int nsge,
		   uint32_t offset, void *buf, uint32_t len, bool to_sge, enum ibv_wc_status *st);
/* The len bytes at offset in a local scatter list as up to maxiov pieces of
 * registered memory, checked as uroce_sge_copy checks them (to_sge: to be
 * written), for a send that leaves from there (gso.c) or a receive placed
 * there (rx_place.c); their count, or 0 when they must be copied instead
 * (uroce_sge_copy says why when they are not usable at all: ODP, too many
 * pieces, an error). */
int uroce_sge_map(struct uroce_ctx *ctx, struct ibv_pd *pd, const struct uroce_sge *sg, int nsge,
		  uint32_t offset, uint32_t len, bool to_sge, struct iovec *iov, int maxiov);
/* Place the payload of a wire packet continuing the message in progress
 * straight into its destination while checking its ICRC, in one pass
 * (src/transport/rx_place.c; qp->lock held): 1 placed and the ICRC good
 * (pkt->placed), -1 the ICRC bad (drop it), 0 not such a packet (check the
 * ICRC and deliver it as any other). */
int uroce_rx_place(struct uroce_qp *qp, struct uroce_pkt *pkt, const struct uroce_ipinfo *ip);

#endif

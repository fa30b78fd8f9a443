/* Counters in shared memory, readable while programs run (src/core/stats.c).
 *
 * Every context maps one small file: by default a memfd "uroce-stats.<n>"
 * that `uroce stat` opens through /proc/<pid>/fd (the kernel frees it with
 * the process), or <UROCE_STATS_DIR>/uroce.<pid>.<n> (mode 0644) when that
 * variable names a directory.  The layout:
 *
 *   struct uroce_stats_hdr            magic, version, pid, device, times, offsets
 *   name table                        one struct uroce_stats_name per device
 *                                     counter, then one per QP counter
 *   struct uroce_counters             device counters
 *   struct uroce_stats_qp[max_qp]     per-QP slots (QPN 0: free)
 *
 * Readers (`uroce stat`, tools/uroce-stat.c) take the counter names from
 * the file, so a reader built from another version still shows them all.
 * All counters are 64-bit and only ever incremented with relaxed atomic
 * adds; a reader loads them with relaxed loads.
 *
 * A memfd is closed by ibv_close_device or goes with the process; a file
 * in UROCE_STATS_DIR is removed by ibv_close_device and at exit, and files
 * of processes that died (kill -9) by the next `uroce stat`.
 */
#ifndef UROCE_STATS_H
#define UROCE_STATS_H

#include <stdatomic.h>
#include <stdint.h>

/* X(field, name, description).  Names follow Linux rxe's hw_counters (and
 * mlx5's `rdma statistic`) where the meaning is the same. */
#define UROCE_COMMON_COUNTERS(X)                                                                   \
	X(tx_pkts, "sent_pkts", "packets sent")                                                    \
	X(tx_bytes, "sent_bytes", "bytes sent (BTH through ICRC)")                                 \
	X(rx_pkts, "rcvd_pkts", "packets received")                                                \
	X(rx_bytes, "rcvd_bytes", "bytes received (BTH through ICRC)")                             \
	X(acks_tx, "sent_acks", "ACKs sent by the responder")                                      \
	X(acks_rx, "rcvd_acks", "ACKs received by the requester")                                  \
	X(piggy_tx, "sent_piggy_acks", "ACKs carried by a request (uroce peers, docs/latency.md)") \
	X(piggy_rx, "rcvd_piggy_acks", "ACKs received on a request")                               \
	X(naks_tx, "sent_naks", "NAKs sent (PSN sequence error, invalid request, access, op)")     \
	X(naks_rx, "rcvd_naks", "NAKs received (PSN sequence error, invalid request, access, op)") \
	X(seq_naks_rx, "rcvd_seq_err", "PSN sequence error NAKs received")                         \
	X(rnr_naks_tx, "send_rnr_err", "RNR NAKs sent: a SEND found no receive WQE")               \
	X(rnr_naks_rx, "rcvd_rnr_err", "RNR NAKs received")                                        \
	X(dup_req, "duplicate_request", "duplicate requests (re-acknowledged, READs replayed)")    \
	X(oos_req, "out_of_seq_request", "requests received after a PSN gap")                      \
	X(duplicates, "duplicate_response", "duplicate, stale or unexpected responses dropped")    \
	X(out_of_seq, "out_of_seq_response", "READ responses received after a PSN gap")            \
	X(retries, "completer_retry_err", "go-back-N retries (timeout, NAK, RNR NAK)")             \
	X(retransmits, "retransmitted_pkts", "packets sent again by go-back-N retries")            \
	X(timeouts, "local_ack_timeout_err", "retransmission timer expiries")                      \
	X(sacks_tx, "sent_sacks", "selective ACKs sent (uroce peers, docs/design.md)")             \
	X(sacks_rx, "rcvd_sacks", "selective ACKs received")                                       \
	X(held_req, "held_request", "requests held after a gap for selective repeat")              \
	X(held_placed, "held_in_place",                                                            \
	  "requests held after a gap whose payload was placed at once (rx_place.c)")               \
	X(retry_exc, "retry_exceeded_err", "WQEs failed: retry_cnt exhausted")                     \
	X(rnr_retry_exc, "retry_rnr_exceeded_err", "WQEs failed: rnr_retry exhausted")             \
	X(wc_err, "completion_err", "send WQEs completed with an error (not flushes)")             \
	X(rx_drop_state, "rcvd_bad_state", "packets dropped: the QP's state does not take them")   \
	X(rx_drop_len, "rcvd_ud_too_long", "UD datagrams dropped: larger than the receive WQE")

/* Device-wide only: the endpoint and the packet checks before a QP is known,
 * and UROCE_FAULT (src/net/fault.c, docs/faults.md). */
#define UROCE_DEV_ONLY_COUNTERS(X)                                                                 \
	X(send_err, "send_err", "packets the kernel refused to send (buffer full, unreachable)")   \
	X(rx_drop_icrc, "rcvd_icrc_err", "packets dropped: bad ICRC")                              \
	X(rx_drop_parse, "rcvd_malformed", "packets dropped: malformed, truncated, no address")    \
	X(rx_drop_qpn, "rcvd_unknown_qp", "packets dropped: destination QP does not exist here")   \
	X(tx_in_place, "sent_in_place", "packets sent with the payload read from its MR (gso.c)")  \
	X(rx_in_place, "rcvd_in_place",                                                            \
	  "packets placed while their ICRC was checked (rx_place.c)")                              \
	X(rx_gro, "rcvd_gro_batches", "datagrams received as a GRO batch of several packets")      \
	X(rx_plain_on, "rcvd_plain_switches",                                                      \
	  "the address socket turned to plain reads, UDP_GRO off (endpoint.c)")                    \
	X(tx_write_split, "sent_write_split",                                                      \
	  "RDMA WRITE packets sent as WRITE ONLY, one message a packet (req.c)")                   \
	X(tx_run, "sent_in_runs",                                                                  \
	  "SEND/WRITE packets built and queued in runs of one message's packets (req.c)")          \
	X(rx_write_next, "rcvd_write_next",                                                        \
	  "WRITE ONLY packets continuing the WRITE before them, placed while checked "             \
	  "(rx_place.c)")                                                                          \
	X(rx_fast, "rcvd_fast_requests",                                                           \
	  "SEND/WRITE ONLY requests taken by the responder's common-case path (resp.c)")           \
	X(rx_fast_acks, "rcvd_fast_acks",                                                          \
	  "ACKs of the one outstanding WQE taken by the completer's common-case path (comp.c)")    \
	X(app_waits, "app_ack_waits",                                                              \
	  "ibv_poll_cq slept on the sockets: many packets in flight, CQs empty (endpoint.c)")      \
	X(app_yields, "app_yields", "ibv_poll_cq gave the CPU away: CQs empty for a while (cq.c)") \
	X(app_long_yields, "app_long_yields",                                                      \
	  "of those, yields that ran another process for a time slice: load, not the peer")        \
	X(app_hog_sleeps, "app_hog_sleeps",                                                        \
	  "ibv_poll_cq slept on the UDP sockets instead of yielding: the CPU is loaded (cq.c)")    \
	X(app_coloc_waits, "app_coloc_waits",                                                      \
	  "waits in ibv_poll_cq that yield after 1 us: the peer taken to share the CPU (cq.c)")    \
	X(fault_drop, "fault_drop", "UROCE_FAULT: packets dropped")                                \
	X(fault_dup, "fault_dup", "UROCE_FAULT: packets duplicated")                               \
	X(fault_reorder, "fault_reorder", "UROCE_FAULT: packets reordered")                        \
	X(fault_corrupt, "fault_corrupt", "UROCE_FAULT: packets corrupted")                        \
	X(fault_delay, "fault_delay", "UROCE_FAULT: packets delayed")                              \
	X(shm_tx, "shm_tx_packets", "packets sent through shared memory (same host)")              \
	X(shm_rx, "shm_rx_packets", "packets received through shared memory (same host)")          \
	X(shm_links, "shm_links", "shared-memory links set up to same-host peers")                 \
	X(shm_full, "shm_ring_full", "packets dropped: the peer's shared-memory ring was full")    \
	X(shm_bad, "shm_bad_ring", "shared-memory links dropped: the peer corrupted the ring")     \
	X(shm_pull, "shm_pull_msgs",                                                               \
	  "messages copied once, straight from the peer's memory (same host, process_vm_readv)")   \
	X(shm_pull_bytes, "shm_pull_bytes", "bytes copied that way")                               \
	X(shm_pull_fail, "shm_pull_fallback",                                                      \
	  "pulls that failed (peer memory unreadable, gone, or a bad record): ring copy instead")  \
	X(shm_bulk, "shm_bulk_msgs",                                                               \
	  "pull records sent with their bytes in the ring (bulk records, memcpy)")                 \
	X(shm_bulk_skip, "shm_bulk_no_room",                                                       \
	  "pull records sent without their bytes: no room in the ring (process_vm_readv)")         \
	X(shm_idle_sleeps, "shm_idle_sleeps",                                                      \
	  "ibv_poll_cq slept on the rings' doorbells: CQs empty for a while (shm.c)")              \
	X(shm_parts, "shm_parts",                                                                  \
	  "progress thread: moved off the CPU of a same-host peer it shared (shm.c)")

/* Device-wide: the progress thread (src/core/progress.c). */
#define UROCE_PROG_COUNTERS(X)                                                                     \
	X(prog_wakeups, "progress_wakeups",                                                        \
	  "progress thread: sleeps in epoll_wait ended by an event")                               \
	X(prog_busy_waits, "progress_busy_waits",                                                  \
	  "progress thread: woken by a socket another thread was reading; waited 200 us")          \
	X(prog_spin_rx, "progress_spin_batches",                                                   \
	  "progress thread: receive batches found spinning")                                       \
	X(prog_spin_yields, "progress_spin_yields",                                                \
	  "progress thread: yields in its spin after traffic (sockets quiet for 10 us)")           \
	X(prog_parts, "progress_parts",                                                            \
	  "progress thread: moved off the CPU of a UDP requester it shared (progress.c)")          \
	X(prog_coloc_sleeps, "progress_coloc_sleeps",                                              \
	  "progress thread: traffic bursts followed by a sleep, not a spin (peer on its CPU)")     \
	X(prog_grace_looks, "progress_grace_looks",                                                \
	  "progress thread: data found in the sockets after a poller's 200 us pause")              \
	X(prog_grace_waits, "progress_grace_waits",                                                \
	  "progress thread: waits out of a polling application's way (each ends in a wake-up)")    \
	X(prog_poll_wakes, "progress_poll_wakes",                                                  \
	  "progress thread: woken from its sleep on the sockets by an application's poll")

#define UROCE_DEV_COUNTERS(X)                                                                      \
	UROCE_COMMON_COUNTERS(X) UROCE_DEV_ONLY_COUNTERS(X) UROCE_PROG_COUNTERS(X)
#define UROCE_QP_COUNTERS(X) UROCE_COMMON_COUNTERS(X)

#define UROCE_STATS_FIELD_(field, name, desc) _Atomic uint64_t field;

/* Device counters (ctx->cnt); uroce_count() adds to them. */
struct uroce_counters {
	UROCE_DEV_COUNTERS(UROCE_STATS_FIELD_)
};

struct uroce_qp_counters {
	UROCE_QP_COUNTERS(UROCE_STATS_FIELD_)
};

/* One QP's slot (qp->stats); uroce_qp_count() adds to it.  qpn 0 marks a
 * free slot (no QPN ends in 0x00). */
struct uroce_stats_qp {
	_Atomic uint32_t qpn;
	_Atomic uint32_t state;	   /* enum ibv_qp_state */
	_Atomic uint32_t type;	   /* enum ibv_qp_type */
	_Atomic uint32_t dest_qpn; /* RC: the connected QP */
	struct uroce_qp_counters c;
} __attribute__((aligned(64)));

#define UROCE_STATS_MAGIC    0x3154534543524f55ull /* "UROCEST1" in a little-endian file */
#define UROCE_STATS_VERSION  1
#define UROCE_STATS_NAME_LEN 32
#define UROCE_STATS_MAX_QP   4096	    /* QPs beyond this count in device totals only */
#define UROCE_STATS_PREFIX   "uroce."	    /* files: <UROCE_STATS_DIR>/uroce.<pid>.<n> */
#define UROCE_STATS_MEMFD    "uroce-stats." /* memfds: /proc/<pid>/fd/N -> /memfd:uroce-stats.<n> */

struct uroce_stats_name {
	char name[UROCE_STATS_NAME_LEN];
};

/* The file header.  Offsets are from the start of the file.  The creator
 * writes everything, then stores magic last (release): a reader that sees
 * the magic sees a complete header. */
struct uroce_stats_hdr {
	_Atomic uint64_t magic;
	uint32_t version;
	uint32_t hdr_size; /* sizeof(struct uroce_stats_hdr) */
	int32_t pid;
	uint32_t ctx_seq;    /* n of uroce.<pid>.<n>: contexts opened before by this process */
	uint64_t proc_start; /* /proc/<pid>/stat starttime: detects a reused pid */
	uint64_t start_ns;   /* CLOCK_REALTIME when the context opened */
	char dev_name[64];
	char ifname[16];
	char comm[16];	       /* the program's name */
	uint32_t n_dev;	       /* device counters */
	uint32_t n_qp;	       /* counters per QP slot */
	uint64_t names_off;    /* n_dev + n_qp struct uroce_stats_name */
	uint64_t dev_off;      /* n_dev uint64 counters */
	uint64_t qp_off;       /* max_qp slots */
	uint32_t qp_slot_size; /* bytes per slot */
	uint32_t qp_cnt_off;   /* offset of the first counter in a slot */
	uint32_t max_qp;
	_Atomic uint32_t qp_hwm;       /* slots [0, qp_hwm) have been used */
	_Atomic uint32_t nqp;	       /* QPs alive */
	_Atomic uint32_t qp_untracked; /* QPs alive without a slot (over max_qp) */
	uint64_t file_size;
};

enum {
	UROCE_STATS_N_DEV = sizeof(struct uroce_counters) / sizeof(uint64_t),
	UROCE_STATS_N_QP = sizeof(struct uroce_qp_counters) / sizeof(uint64_t),
};

/* ---- library side ---- */
struct uroce_ctx;
struct uroce_qp;

/* Map the context's stats file (or private memory when the directory is not
 * usable: logged once) and point ctx->cnt at its counters.  Returns 0 or
 * -ENOMEM. */
int uroce_stats_open(struct uroce_ctx *ctx);
/* Log the counters at info level, remove the file, unmap. */
void uroce_stats_close(struct uroce_ctx *ctx);

/* A QP slot for qp (never NULL: a shared catch-all beyond max_qp).  Call
 * before the QP can receive packets; uroce_stats_qp_update() publishes it. */
struct uroce_stats_qp *uroce_stats_qp_add(struct uroce_ctx *ctx);
/* Copy QPN, type, state and destination QPN into the slot (qp->lock held or
 * the QP not yet visible). */
void uroce_stats_qp_update(struct uroce_qp *qp);
void uroce_stats_qp_del(struct uroce_ctx *ctx, struct uroce_stats_qp *st);
/* A send WQE completed with status st (not a flush). */
void uroce_stats_wc_err(struct uroce_qp *qp, int st);

#endif

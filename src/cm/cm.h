/* uroce's librdmacm: private objects shared by the files of src/cm/.
 *
 * One mutex (cm.lock) guards every id, listener and socket; each channel has
 * its own lock for its event queue, always taken after cm.lock.  The CM
 * thread (wire.c) receives MADs and runs the timers; API calls send MADs
 * from the caller's thread.  docs/cm.md describes the design.
 */
#ifndef UROCE_CM_H
#define UROCE_CM_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "uroce_export.h"
#include "uroce_log.h"

/* Log why at debug level, set errno, evaluate to -1 (librdmacm's convention). */
#define cm_fail(err, ...) (ur_dbg(__VA_ARGS__), errno = (err), -1)

/* ---- the CM MAD (mad.c) ---- */
#define CM_MAD_BYTES	 256
#define CM_MAD_HDR_BYTES 24
#define CM_MSG_BYTES	 (CM_MAD_BYTES - CM_MAD_HDR_BYTES)

enum cm_attr {
	CM_ATTR_REQ = 0x10,
	CM_ATTR_MRA = 0x11,
	CM_ATTR_REJ = 0x12,
	CM_ATTR_REP = 0x13,
	CM_ATTR_RTU = 0x14,
	CM_ATTR_DREQ = 0x15,
	CM_ATTR_DREP = 0x16,
	CM_ATTR_SIDR_REQ = 0x17,
	CM_ATTR_SIDR_REP = 0x18,
	CM_ATTR_LAP = 0x19, /* alternate paths: never used on RoCE, dropped */
	CM_ATTR_APR = 0x1A,
};

/* IBTA 12.6.7 reject reasons uroce sends or maps */
enum {
	CM_REJ_TIMEOUT = 1,
	CM_REJ_INVALID_SERVICE_ID = 8,
	CM_REJ_STALE_CONN = 10,
	CM_REJ_CONSUMER_DEFINED = 28,
};

/* SIDR_REP status (IBTA table 120) */
enum { CM_SIDR_OK = 0, CM_SIDR_NO_SERVICE = 1, CM_SIDR_REJECT = 2 };

/* The rdma_cm IP header that leads REQ and SIDR_REQ private data (cma.c). */
#define CM_IP_HDR_BYTES 36

/* Private data room for the user after the headers. */
#define CM_REQ_PDATA	  (92 - CM_IP_HDR_BYTES)
#define CM_REP_PDATA	  196
#define CM_REJ_PDATA	  148
#define CM_RTU_PDATA	  224
#define CM_DREQ_PDATA	  220
#define CM_DREP_PDATA	  224
#define CM_MRA_PDATA	  222
#define CM_SIDR_REQ_PDATA (216 - CM_IP_HDR_BYTES)
#define CM_SIDR_REP_PDATA 136

/* A decoded CM message: the fields of every message type uroce uses, host
 * order.  Unused fields are zero. */
struct cm_msg {
	uint16_t attr;
	uint64_t tid;
	uint32_t attr_mod;
	uint32_t local_id, remote_id; /* as the sender names them */
	uint64_t service_id;
	uint64_t ca_guid;
	uint32_t qkey, qpn, psn, vendor_id;
	uint8_t resp_res, init_depth, retry, rnr_retry, mtu, max_cm_retries;
	uint8_t srq, flow_ctl, qp_type; /* IBV_QPT_RC / UC / UD */
	uint8_t remote_cm_timeout, local_cm_timeout, local_ack_timeout, target_ack_delay;
	uint8_t traffic_class, hop_limit, sl;
	uint16_t pkey;
	uint8_t lgid[16], rgid[16]; /* primary path, sender's view */
	uint8_t msg_target;	    /* REJ/MRA: 0 REQ, 1 REP, 2 other */
	uint8_t service_timeout;    /* MRA */
	uint16_t reason;	    /* REJ */
	uint8_t status;		    /* SIDR_REP */
	/* rdma_cm IP header (REQ, SIDR_REQ) */
	bool has_ip;
	struct in_addr ip_src, ip_dst;
	uint16_t ip_sport;
	uint8_t pdata_len;
	uint8_t pdata[CM_MSG_BYTES];
};

struct cm_stats {
	uint64_t rx, tx, drop_short, drop_icrc, drop_bth, drop_hdr, drop_attr, drop_ip_hdr,
	    drop_unknown, drop_lap, dup_req, retrans, icmp, timewait_exit;
};
extern struct cm_stats cm_stats;

/* Fill a 256-byte MAD from m; returns CM_MAD_BYTES. */
int cm_mad_build(const struct cm_msg *m, uint8_t *mad);
/* Decode a MAD; 0 or -EINVAL (counted in cm_stats) when it is not a
 * well-formed CM message of a type uroce handles. */
int cm_mad_parse(const uint8_t *mad, size_t len, struct cm_msg *m);
/* RoCEv2 UD encapsulation (BTH+DETH+MAD+ICRC) of a MAD to QP1. */
#define CM_PKT_BYTES (12 + 8 + CM_MAD_BYTES + 4)
void cm_pkt_build(uint8_t *pkt, const uint8_t *mad, struct in_addr src, uint16_t sport,
		  struct in_addr dst, uint16_t dport, uint32_t psn);
/* The MAD inside a received packet, or NULL (counted) when it is not one. */
const uint8_t *cm_pkt_parse(const uint8_t *pkt, size_t len, struct in_addr src, uint16_t sport,
			    struct in_addr dst, uint16_t dport);

/* ---- channels and events (channel.c) ---- */
struct cm_event {
	struct rdma_cm_event ev; /* first: what the user sees */
	struct cm_event *next;
	struct cm_id *owner; /* counted on (ev.id's) */
	uint8_t pdata[CM_MSG_BYTES];
};

struct cm_chan {
	struct rdma_event_channel ch; /* first */
	pthread_mutex_t lock;
	struct cm_event *head, **tail;
	bool signalled; /* the eventfd holds a count */
	bool sync;	/* private channel of a synchronous id */
};

/* ---- ids ---- */
enum cm_state {
	CM_IDLE,
	CM_ADDR_BOUND,
	CM_ADDR_RESOLVED,
	CM_ROUTE_RESOLVED,
	CM_LISTEN,
	CM_REQ_SENT,
	CM_REP_RCVD, /* no QP on the id: waiting for rdma_establish */
	CM_REQ_RCVD,
	CM_REP_SENT,
	CM_ESTABLISHED,
	CM_DREQ_SENT,
	CM_TIMEWAIT,
	CM_SIDR_REQ_SENT,
	CM_SIDR_REQ_RCVD,
	CM_DISCONNECTED, /* rejected, unreachable or finished */
};

struct cm_sock {
	int fd;
	struct in_addr addr;	   /* bound address (may be INADDR_ANY) */
	uint16_t port;		   /* host order */
	struct cm_id *listener;	   /* NULL: the process's active socket */
	struct cm_sock *next_dead; /* closed, freed by the CM thread (wire.c) */
};

struct cm_mc {
	struct cm_mc *next;
	struct sockaddr_in addr;
	union ibv_gid mgid;
	void *context;
	bool attached;
};

struct cm_id {
	struct rdma_cm_id id; /* first */
	struct cm_chan *chan;
	bool sync, destroying;
	enum cm_state state;
	int reported, acked; /* events fetched by the user / acknowledged */

	struct ibv_context *ctx; /* == id.verbs once bound to a device */
	uint8_t sgid_index;
	uint8_t dev_max_rd; /* the device's max_qp_rd_atom */
	enum ibv_mtu mtu;
	uint8_t tos;
	uint8_t ack_timeout;
	bool reuseaddr;

	/* listener */
	struct cm_sock *lsock;
	int backlog;
	struct ibv_pd *ep_pd; /* rdma_create_ep(RAI_PASSIVE): for requests */
	bool ep_has_qp_attr;
	struct ibv_qp_init_attr ep_qp_attr;

	/* connection */
	struct cm_id *listen_parent;
	uint32_t local_comm_id, remote_comm_id;
	struct sockaddr_in peer_cm; /* where CM MADs for the peer go */
	uint64_t service_id;
	uint32_t local_psn, remote_psn, remote_qpn, remote_qkey, user_qpn;
	uint8_t resp_res, init_depth, retry, rnr_retry, remote_rnr_retry, remote_ack_timeout;
	uint8_t flow_ctl, srq_flag;
	union ibv_gid remote_gid;
	struct ibv_ece local_ece, remote_ece;

	/* the message that waits for an answer, resent on the timer */
	uint8_t mad[CM_MAD_BYTES];
	bool timer_on;
	int retries_left;
	int icmp_left; /* REQ resends after an ICMP port unreachable */
	uint64_t deadline_ms;
	uint32_t timeout_ms;
	struct cm_id *tnext, *tprev; /* timer list */

	struct cm_id *hnext; /* by local comm id */
	struct cm_id *rnext; /* by (remote comm id, peer address) */
	struct cm_id *lnext; /* cm.listeners (standard-port mode) */
	bool in_lhash, in_rhash;

	struct cm_event *stored_event; /* id.event of a synchronous id */
	pthread_cond_t cond;

	/* resources rdma_create_qp made for the user */
	bool own_cqs, own_pd;
	struct ibv_xrcd *xrcd;
	struct cm_mc *mcs;
};

static inline struct cm_id *to_cid(struct rdma_cm_id *id)
{
	return (struct cm_id *)id;
}

struct cm_rxq {
	struct cm_rxq *next;
	struct ibv_context *ctx;
	struct sockaddr_in from;
	struct in_addr to;
	size_t len;
	uint8_t pkt[CM_PKT_BYTES];
};

struct cm_global {
	pthread_mutex_t lock;
	bool started;
	int epfd, wakefd;
	pthread_t thread;
	struct cm_sock *asock;	    /* the active socket */
	struct cm_sock *dead_socks; /* closed sockets, freed by the CM thread */
	bool std;		    /* UROCE_PORT_MODE=standard: QP1 on <address>:4791 */
	struct cm_id *listeners;    /* standard-port mode: by port (lnext) */
	pthread_mutex_t qlock;	    /* standard-port mode: received QP1 packets */
	struct cm_rxq *rxq, **rxq_tail;
	struct cm_id *timers;
	uint32_t next_comm_id;
	uint32_t tid_hi;
	struct cm_id **lhash, **rhash;
	/* devices */
	int ndev;
	struct ibv_device **devs;
	struct ibv_context **ctxs;
	struct ibv_pd **pds;
};
extern struct cm_global cm;

#define CM_HASH_BITS 16

/* channel.c */
int cm_init(void);
struct cm_chan *cm_chan_new(bool sync);
void cm_chan_free(struct cm_chan *c);
struct cm_event *cm_event_new(struct cm_id *id, enum rdma_cm_event_type type, int status);
void cm_event_post(struct cm_chan *c, struct cm_event *e);
struct cm_id *cm_id_new(struct cm_chan *chan, void *context, enum rdma_port_space ps,
			enum ibv_qp_type qpt);
void cm_id_free_locked(struct cm_id *cid);
int cm_sync_wait(struct cm_id *cid, enum rdma_cm_event_type want);
int cm_sync_ack_stored(struct cm_id *cid);

/* addr.c */
int cm_dev_for_addr(struct in_addr a, struct ibv_context **ctx, uint8_t *gid_index);
struct ibv_pd *cm_dev_pd(struct ibv_context *ctx);
uint8_t cm_dev_max_rd(struct ibv_context *ctx);
struct ibv_context **rdma_get_devices_locked(int *num_devices);
int cm_check_sockaddr(const struct sockaddr *sa, const char *who);
void cm_gid_from_v4(union ibv_gid *g, struct in_addr a);
struct in_addr cm_src_v4(const struct cm_id *cid);
struct in_addr cm_dst_v4(const struct cm_id *cid);

/* wire.c */
int cm_wire_start(void);
struct cm_sock *cm_sock_open(struct in_addr addr, uint16_t port, bool reuse, int *err);
void cm_sock_close(struct cm_sock *s);
int cm_send_mad(struct cm_sock *s, struct in_addr src, const struct sockaddr_in *dst,
		const uint8_t *mad);
/* Send a MAD to a peer's QP1: from the active socket (native mode) or
 * through ctx's 4791 endpoint (standard-port mode, cm.std). */
int cm_xmit(struct ibv_context *ctx, struct in_addr src, const struct sockaddr_in *dst,
	    const uint8_t *mad);
/* Standard-port mode: receive QP1 of ctx (uroce_cm_qp1_attach). */
int cm_std_attach(struct ibv_context *ctx);
/* the private interface of uroce's libibverbs.so.1 (src/net/qp1.c) */
int uroce_cm_qp1_attach(struct ibv_context *ctx,
			void (*rx)(void *arg, const uint8_t *pkt, size_t len, uint32_t src,
				   uint32_t dst),
			void *arg);
int uroce_cm_qp1_send(struct ibv_context *ctx, uint32_t dst, const void *pkt, size_t len);
const uint8_t *cm_pkt_mad(const uint8_t *pkt, size_t len);
uint64_t cm_now_ms(void);
void cm_timer_arm(struct cm_id *cid, uint32_t timeout_ms, int retries);
void cm_timer_stop(struct cm_id *cid);
void cm_wake(void);

/* conn.c: the API side of the state machine and the helpers it shares */
#define CM_RESP_TIMEOUT	 18 /* 4.096 us * 2^18 = 1.07 s */
#define CM_MAX_RETRIES	 15
#define CM_TIMEWAIT_MS	 2000
#define CM_ICMP_RETRIES	 3
#define CM_ICMP_RETRY_MS 50
#define CM_MRA_TIMEOUT	 21 /* the service timeout an MRA asks for: 8.6 s */
uint32_t cm_timeout_ms(uint8_t t);
void cm_msg_init(struct cm_id *cid, struct cm_msg *m, uint16_t attr);
int cm_send(struct cm_id *cid, const struct cm_msg *m, bool keep);
int cm_send_rej(struct ibv_context *ctx, struct in_addr src, const struct sockaddr_in *dst,
		uint32_t local_id, uint32_t remote_id, uint8_t target, uint16_t reason,
		const void *pdata, uint8_t len);
void cm_post(struct cm_id *cid, enum rdma_cm_event_type t, int status, const struct cm_msg *m);
void cm_post_to(struct cm_chan *ch, struct cm_id *cid, struct cm_id *listener,
		enum rdma_cm_event_type t, int status, const struct cm_msg *m);
void cm_set_established(struct cm_id *cid, const struct cm_msg *m);
void cm_enter_timewait(struct cm_id *cid);

/* proto.c: received MADs, timers, ICMP */
void cm_rx(struct cm_sock *s, struct ibv_context *ctx, const uint8_t *mad, size_t len,
	   const struct sockaddr_in *from, struct in_addr to);
void cm_rx_icmp(const struct sockaddr_in *dst);
void cm_timer_fire(struct cm_id *cid);
void cm_hash_add(struct cm_id *cid);
void cm_hash_del(struct cm_id *cid);
void cm_rhash_add(struct cm_id *cid);
void cm_conn_teardown_locked(struct cm_id *cid);
uint32_t cm_new_comm_id(void);

/* qp.c */
int cm_qp_to_init(struct cm_id *cid, struct ibv_qp *qp);
int cm_qp_to_rtr(struct cm_id *cid);
int cm_qp_to_rts(struct cm_id *cid);
void cm_qp_to_err(struct cm_id *cid);
int cm_qp_ud_ready(struct cm_id *cid, struct ibv_qp *qp);
void cm_ah_attr(const struct cm_id *cid, const union ibv_gid *dgid, struct ibv_ah_attr *ah);

#endif

/* IBTA QP state machine: legal ibv_modify_qp() transitions, their required
 * and optional attribute-mask bits, and attribute value ranges.
 *
 * The transition table follows IBTA Vol 1 §11.2.5.2 (Modify QP: the
 * "required" and "optional" input modifiers of each state transition) with
 * the refinements of the Linux kernel's qp_state_table, which decides what
 * every real provider (mlx5, rxe, siw, ...) accepts and therefore what
 * applications have been written against.  The kernel's IB_QP_* and the
 * libibverbs IBV_QP_* bits have identical values; only the names differ.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "verbs/qp_rules.h"

/* Index of a supported QP type in the per-type columns of the table. */
enum qp_type_idx {
	QT_RC,
	QT_UC,
	QT_UD,
	QT_XRC_SEND,
	QT_XRC_RECV,
	QT_NUM,
};

#define QPS_NUM (IBV_QPS_ERR + 1)

struct qp_rule {
	uint32_t req; /* bits the transition needs (besides IBV_QP_STATE) */
	uint32_t opt; /* bits it may carry */
};

struct qp_transition {
	bool valid;
	struct qp_rule rule[QT_NUM];
};

/* Attribute groups, named after what they configure. */

/* RESET->INIT: port, P_Key and (connected) remote access rights, or (UD)
 * the Q_Key.  The same bits may be changed again in INIT->INIT. */
#define INIT_CONN (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define INIT_UD	  (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)

/* INIT->RTR, connected: the primary path and the receive side of the
 * connection (remote QPN, expected PSN). */
#define RTR_CONN (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)
/* ... and, for a QP with a responder that serves RDMA READ/ATOMIC and
 * sends RNR NAKs (RC, XRC target), the responder resources and RNR timer. */
#define RTR_RESP (IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
/* INIT->RTR optional, connected: alternate path, access rights, P_Key. */
#define RTR_CONN_OPT (IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX)
#define RTR_UD_OPT   (IBV_QP_PKEY_INDEX | IBV_QP_QKEY)

/* RTR->RTS, requester with acknowledged transport (RC, XRC initiator):
 * ACK timeout, retry counts, initial send PSN and outstanding RDMA READ /
 * ATOMIC limit.  UC and UD only need the send PSN. */
#define RTS_REQ                                                                                    \
	(IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |                    \
	 IBV_QP_MAX_QP_RD_ATOMIC)
/* The kernel asks an XRC target (no send queue of its own) only for the
 * timeout and the PSN. */
#define RTS_XRC_RECV (IBV_QP_TIMEOUT | IBV_QP_SQ_PSN)

/* Attributes a connected QP may alter on the way into RTS and while in RTS
 * (RTR->RTS, RTS->RTS, SQD->RTS).  IBV_QP_CUR_STATE is accepted only on
 * transitions out of RTR, RTS, SQD and SQE (kernel ib_modify_qp_is_ok()).
 * Responders (RC, XRC target) may also change their RNR NAK timer. */
#define ALTER_CONN                                                                                 \
	(IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE)
#define ALTER_RESP (ALTER_CONN | IBV_QP_MIN_RNR_TIMER)
#define ALTER_UD   (IBV_QP_CUR_STATE | IBV_QP_QKEY)

/* SQD->SQD: with the send queue drained almost everything may be changed
 * again (IBTA §11.2.5.2, "SQD to SQD"), except the MTU, PSNs and remote QPN. */
#define SQD_UD (IBV_QP_PKEY_INDEX | IBV_QP_QKEY)
#define SQD_UC                                                                                     \
	(IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |                   \
	 IBV_QP_PATH_MIG_STATE)
#define SQD_CONN_COMMON                                                                            \
	(IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |        \
	 IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE)
#define SQD_SEND_SIDE (IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)
#define SQD_RC	      (SQD_CONN_COMMON | SQD_SEND_SIDE | RTR_RESP)
#define SQD_XRC_SEND  (SQD_CONN_COMMON | SQD_SEND_SIDE)
#define SQD_XRC_RECV  (SQD_CONN_COMMON | RTR_RESP)

/* A transition with no attributes at all, legal for every type. */
#define BARE                                                                                       \
	{                                                                                          \
		.valid = true                                                                      \
	}

/* qp_transitions[cur][next]; entries left out are illegal transitions. */
static const struct qp_transition qp_transitions[QPS_NUM][QPS_NUM] = {
	[IBV_QPS_RESET] = {
		/* RESET->RESET is a no-op the kernel accepts.
		 * RESET->ERR is NOT in the kernel table (a QP in RESET owns
		 * no work requests to flush), so real devices return EINVAL
		 * for it and so do we. */
		[IBV_QPS_RESET] = BARE,
		[IBV_QPS_INIT] = {
			.valid = true,
			.rule = {
				[QT_RC] = {INIT_CONN, 0},
				[QT_UC] = {INIT_CONN, 0},
				[QT_UD] = {INIT_UD, 0},
				[QT_XRC_SEND] = {INIT_CONN, 0},
				[QT_XRC_RECV] = {INIT_CONN, 0},
			},
		},
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_RESET] = BARE,
		[IBV_QPS_ERR] = BARE,
		/* INIT->INIT: the RESET->INIT attributes, all optional. */
		[IBV_QPS_INIT] = {
			.valid = true,
			.rule = {
				[QT_RC] = {0, INIT_CONN},
				[QT_UC] = {0, INIT_CONN},
				[QT_UD] = {0, INIT_UD},
				[QT_XRC_SEND] = {0, INIT_CONN},
				[QT_XRC_RECV] = {0, INIT_CONN},
			},
		},
		/* INIT->RTR: UD needs nothing; UC and the XRC initiator have
		 * no responder resources to size. */
		[IBV_QPS_RTR] = {
			.valid = true,
			.rule = {
				[QT_RC] = {RTR_CONN | RTR_RESP, RTR_CONN_OPT},
				[QT_UC] = {RTR_CONN, RTR_CONN_OPT},
				[QT_UD] = {0, RTR_UD_OPT},
				[QT_XRC_SEND] = {RTR_CONN, RTR_CONN_OPT},
				[QT_XRC_RECV] = {RTR_CONN | RTR_RESP, RTR_CONN_OPT},
			},
		},
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RESET] = BARE,
		[IBV_QPS_ERR] = BARE,
		/* RTR->RTS.  No RTR->RTR in the kernel table. */
		[IBV_QPS_RTS] = {
			.valid = true,
			.rule = {
				[QT_RC] = {RTS_REQ, ALTER_RESP},
				[QT_UC] = {IBV_QP_SQ_PSN, ALTER_CONN},
				[QT_UD] = {IBV_QP_SQ_PSN, ALTER_UD},
				[QT_XRC_SEND] = {RTS_REQ, ALTER_CONN},
				[QT_XRC_RECV] = {RTS_XRC_RECV, ALTER_RESP},
			},
		},
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RESET] = BARE,
		[IBV_QPS_ERR] = BARE,
		[IBV_QPS_RTS] = {
			.valid = true,
			.rule = {
				[QT_RC] = {0, ALTER_RESP},
				[QT_UC] = {0, ALTER_CONN},
				[QT_UD] = {0, ALTER_UD},
				[QT_XRC_SEND] = {0, ALTER_CONN},
				[QT_XRC_RECV] = {0, ALTER_RESP},
			},
		},
		/* RTS->SQD (drain the send queue); the consumer may ask for
		 * the IBV_EVENT_SQ_DRAINED affiliated event. */
		[IBV_QPS_SQD] = {
			.valid = true,
			.rule = {
				[QT_RC] = {0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
				[QT_UC] = {0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
				[QT_UD] = {0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
				[QT_XRC_SEND] = {0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
				[QT_XRC_RECV] = {0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
			},
		},
		/* RTS->SQE is taken by the device on a send error (UD/UC),
		 * never requested by the consumer. */
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RESET] = BARE,
		[IBV_QPS_ERR] = BARE,
		[IBV_QPS_RTS] = {
			.valid = true,
			.rule = {
				[QT_RC] = {0, ALTER_RESP},
				[QT_UC] = {0, ALTER_CONN},
				[QT_UD] = {0, ALTER_UD},
				[QT_XRC_SEND] = {0, ALTER_CONN},
				[QT_XRC_RECV] = {0, ALTER_RESP},
			},
		},
		[IBV_QPS_SQD] = {
			.valid = true,
			.rule = {
				[QT_RC] = {0, SQD_RC},
				[QT_UC] = {0, SQD_UC},
				[QT_UD] = {0, SQD_UD},
				[QT_XRC_SEND] = {0, SQD_XRC_SEND},
				[QT_XRC_RECV] = {0, SQD_XRC_RECV},
			},
		},
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RESET] = BARE,
		[IBV_QPS_ERR] = BARE,
		/* SQE->RTS: the consumer resumes the send queue after
		 * handling the error.  Only UD and UC QPs ever enter SQE (RC
		 * send errors go to ERR); the kernel still marks the
		 * transition valid, with no attributes, for RC and XRC. */
		[IBV_QPS_RTS] = {
			.valid = true,
			.rule = {
				[QT_UC] = {0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS},
				[QT_UD] = {0, ALTER_UD},
			},
		},
	},
	[IBV_QPS_ERR] = {
		[IBV_QPS_RESET] = BARE,
		[IBV_QPS_ERR] = BARE,
	},
};

static const struct {
	uint32_t bit;
	const char *name;
} qp_attr_names[] = {
    {IBV_QP_STATE, "IBV_QP_STATE"},
    {IBV_QP_CUR_STATE, "IBV_QP_CUR_STATE"},
    {IBV_QP_EN_SQD_ASYNC_NOTIFY, "IBV_QP_EN_SQD_ASYNC_NOTIFY"},
    {IBV_QP_ACCESS_FLAGS, "IBV_QP_ACCESS_FLAGS"},
    {IBV_QP_PKEY_INDEX, "IBV_QP_PKEY_INDEX"},
    {IBV_QP_PORT, "IBV_QP_PORT"},
    {IBV_QP_QKEY, "IBV_QP_QKEY"},
    {IBV_QP_AV, "IBV_QP_AV"},
    {IBV_QP_PATH_MTU, "IBV_QP_PATH_MTU"},
    {IBV_QP_TIMEOUT, "IBV_QP_TIMEOUT"},
    {IBV_QP_RETRY_CNT, "IBV_QP_RETRY_CNT"},
    {IBV_QP_RNR_RETRY, "IBV_QP_RNR_RETRY"},
    {IBV_QP_RQ_PSN, "IBV_QP_RQ_PSN"},
    {IBV_QP_MAX_QP_RD_ATOMIC, "IBV_QP_MAX_QP_RD_ATOMIC"},
    {IBV_QP_ALT_PATH, "IBV_QP_ALT_PATH"},
    {IBV_QP_MIN_RNR_TIMER, "IBV_QP_MIN_RNR_TIMER"},
    {IBV_QP_SQ_PSN, "IBV_QP_SQ_PSN"},
    {IBV_QP_MAX_DEST_RD_ATOMIC, "IBV_QP_MAX_DEST_RD_ATOMIC"},
    {IBV_QP_PATH_MIG_STATE, "IBV_QP_PATH_MIG_STATE"},
    {IBV_QP_CAP, "IBV_QP_CAP"},
    {IBV_QP_DEST_QPN, "IBV_QP_DEST_QPN"},
    {IBV_QP_RATE_LIMIT, "IBV_QP_RATE_LIMIT"},
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static const char *const qp_state_names[QPS_NUM] = {
    [IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
    [IBV_QPS_RTS] = "RTS",     [IBV_QPS_SQD] = "SQD",	[IBV_QPS_SQE] = "SQE",
    [IBV_QPS_ERR] = "ERR",
};

static bool qp_state_valid(enum ibv_qp_state s)
{
	return (unsigned int)s < QPS_NUM;
}

const char *uroce_qp_state_name(enum ibv_qp_state s)
{
	return qp_state_valid(s) ? qp_state_names[s] : "UNKNOWN";
}

static int qp_type_index(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
		return QT_RC;
	case IBV_QPT_UC:
		return QT_UC;
	case IBV_QPT_UD:
		return QT_UD;
	case IBV_QPT_XRC_SEND:
		return QT_XRC_SEND;
	case IBV_QPT_XRC_RECV:
		return QT_XRC_RECV;
	default:
		return -1;
	}
}

const char *uroce_qp_type_name(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
		return "RC";
	case IBV_QPT_UC:
		return "UC";
	case IBV_QPT_UD:
		return "UD";
	case IBV_QPT_XRC_SEND:
		return "XRC_SEND";
	case IBV_QPT_XRC_RECV:
		return "XRC_RECV";
	case IBV_QPT_RAW_PACKET:
		return "RAW_PACKET";
	case IBV_QPT_DRIVER:
		return "DRIVER";
	default:
		return "unknown";
	}
}

const char *uroce_qp_attr_mask_str(int mask, char *buf, size_t len)
{
	uint32_t rest = (uint32_t)mask;
	size_t off = 0;
	size_t i;

	if (!buf || !len)
		return "";
	buf[0] = '\0';
	if (!rest) {
		snprintf(buf, len, "0");
		return buf;
	}
	for (i = 0; i < ARRAY_LEN(qp_attr_names) && off < len; i++) {
		int n;

		if (!(rest & qp_attr_names[i].bit))
			continue;
		rest &= ~qp_attr_names[i].bit;
		n = snprintf(buf + off, len - off, "%s%s", off ? "|" : "", qp_attr_names[i].name);
		if (n < 0)
			return buf;
		off += (size_t)n;
	}
	if (rest && off < len)
		snprintf(buf + off, len - off, "%s0x%x", off ? "|" : "", rest);
	return buf;
}

/* Writes "modify_qp CUR->NEXT: <message>" into why and returns EINVAL. */
__attribute__((format(printf, 5, 6))) static int qp_fail(char *why, size_t why_len,
							 enum ibv_qp_state cur,
							 enum ibv_qp_state next, const char *fmt,
							 ...)
{
	va_list ap;
	int n;

	if (!why || !why_len)
		return EINVAL;
	n = snprintf(why, why_len, "modify_qp %s->%s: ", uroce_qp_state_name(cur),
		     uroce_qp_state_name(next));
	if (n >= 0 && (size_t)n < why_len) {
		va_start(ap, fmt);
		vsnprintf(why + n, why_len - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return EINVAL;
}

/* Long enough for every name in qp_attr_names[] at once. */
#define MASK_STR_LEN 512

static int qp_illegal(char *why, size_t why_len, enum ibv_qp_state cur, enum ibv_qp_state next)
{
	if (next == IBV_QPS_SQE)
		return qp_fail(
		    why, why_len, cur, next,
		    "illegal transition (only the device moves a QP to SQE, on a send error)");
	if (cur == IBV_QPS_RESET && next == IBV_QPS_ERR)
		return qp_fail(
		    why, why_len, cur, next,
		    "illegal transition (a QP in RESET cannot be moved to ERR; use INIT first)");
	return qp_fail(why, why_len, cur, next, "illegal transition");
}

int uroce_qp_modify_check(enum ibv_qp_type type, enum ibv_qp_state cur, enum ibv_qp_state next,
			  int attr_mask, char *why, size_t why_len)
{
	const struct qp_transition *t;
	uint32_t mask = (uint32_t)attr_mask & ~(uint32_t)IBV_QP_STATE;
	uint32_t missing, extra;
	char names[MASK_STR_LEN];
	int ti = qp_type_index(type);

	if (!qp_state_valid(cur) || !qp_state_valid(next))
		return qp_fail(why, why_len, cur, next, "invalid QP state (%d->%d)", (int)cur,
			       (int)next);
	if (ti < 0)
		return qp_fail(why, why_len, cur, next, "unsupported QP type %s (%d)",
			       uroce_qp_type_name(type), (int)type);

	t = &qp_transitions[cur][next];
	if (!t->valid)
		return qp_illegal(why, why_len, cur, next);

	missing = t->rule[ti].req & ~mask;
	if (missing)
		return qp_fail(why, why_len, cur, next, "missing %s",
			       uroce_qp_attr_mask_str((int)missing, names, sizeof(names)));

	extra = mask & ~(t->rule[ti].req | t->rule[ti].opt);
	if (extra)
		return qp_fail(why, why_len, cur, next, "%s not allowed in this transition",
			       uroce_qp_attr_mask_str((int)extra, names, sizeof(names)));

	/* The kernel's _ib_modify_qp() rejects alternate paths unless both
	 * ports are InfiniBand: there is no APM on RoCE. */
	if (mask & IBV_QP_ALT_PATH)
		return qp_fail(
		    why, why_len, cur, next,
		    "IBV_QP_ALT_PATH not supported on RoCE (no automatic path migration)");
	return 0;
}

static unsigned int mtu_bytes(int mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0;
}

#define QP_ACCESS_ALLOWED                                                                          \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)
#define PSN_MAX	   0xffffffu
#define QPN_MAX	   0xffffffu
#define UROCE_PORT 1

/* RoCE carries the L3 address in a GRH (IBTA Annex A16/A17): every address
 * vector must be global and name a source GID of the port. */
static int qp_check_ah(const struct ibv_ah_attr *ah, const struct uroce_qp_limits *lim,
		       enum ibv_qp_state cur, enum ibv_qp_state next, char *why, size_t why_len)
{
	if (!ah->is_global)
		return qp_fail(
		    why, why_len, cur, next,
		    "RoCE needs a GRH: set ah_attr.is_global=1 and ah_attr.grh.sgid_index "
		    "(e.g. -g 0 / -x 0 in the tools)");
	if ((int)ah->grh.sgid_index >= lim->gid_tbl_len)
		return qp_fail(why, why_len, cur, next,
			       "ah_attr.grh.sgid_index %u out of range (GID table has %d entries)",
			       ah->grh.sgid_index, lim->gid_tbl_len > 0 ? lim->gid_tbl_len : 0);
	if (ah->port_num != UROCE_PORT)
		return qp_fail(why, why_len, cur, next,
			       "ah_attr.port_num %u invalid (the device has port %d only)",
			       ah->port_num, UROCE_PORT);
	return 0;
}

int uroce_qp_attr_check(enum ibv_qp_type type, enum ibv_qp_state cur, enum ibv_qp_state next,
			const struct ibv_qp_attr *attr, int attr_mask,
			const struct uroce_qp_limits *lim, char *why, size_t why_len)
{
	uint32_t mask = (uint32_t)attr_mask;
	int ret;

	if (!attr || !lim)
		return qp_fail(why, why_len, cur, next, "internal error: %s is NULL",
			       !attr ? "attr" : "limits");
	if (qp_type_index(type) < 0)
		return qp_fail(why, why_len, cur, next, "unsupported QP type %s (%d)",
			       uroce_qp_type_name(type), (int)type);

	if ((mask & IBV_QP_STATE) && attr->qp_state != next)
		return qp_fail(why, why_len, cur, next,
			       "attr.qp_state %s does not match the target state",
			       uroce_qp_state_name(attr->qp_state));
	/* Kernel providers take cur_qp_state as the QP's state; we know the
	 * real one and refuse a stale assertion instead. */
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		return qp_fail(why, why_len, cur, next,
			       "attr.cur_qp_state %s does not match the QP's current state",
			       uroce_qp_state_name(attr->cur_qp_state));

	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (attr->qp_access_flags & ~(unsigned int)QP_ACCESS_ALLOWED))
		return qp_fail(
		    why, why_len, cur, next,
		    "qp_access_flags 0x%x has unsupported bits 0x%x (allowed: LOCAL_WRITE|"
		    "REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC|MW_BIND)",
		    attr->qp_access_flags,
		    attr->qp_access_flags & ~(unsigned int)QP_ACCESS_ALLOWED);

	/* One P_Key (0xFFFF, the default full-membership key) at index 0. */
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index != 0)
		return qp_fail(why, why_len, cur, next,
			       "pkey_index %u out of range (the P_Key table has 1 entry, 0xFFFF)",
			       attr->pkey_index);

	if ((mask & IBV_QP_PORT) && attr->port_num != UROCE_PORT)
		return qp_fail(why, why_len, cur, next,
			       "port_num %u invalid (the device has port %d only)", attr->port_num,
			       UROCE_PORT);

	if (mask & IBV_QP_AV) {
		ret = qp_check_ah(&attr->ah_attr, lim, cur, next, why, why_len);
		if (ret)
			return ret;
	}

	if (mask & IBV_QP_PATH_MTU) {
		int mtu = (int)attr->path_mtu;

		if (!mtu_bytes(mtu))
			return qp_fail(why, why_len, cur, next,
				       "path_mtu %d invalid (must be IBV_MTU_256..IBV_MTU_4096)",
				       mtu);
		if (mtu > (int)lim->active_mtu)
			return qp_fail(why, why_len, cur, next,
				       "path_mtu %u exceeds the port's active MTU %u",
				       mtu_bytes(mtu), mtu_bytes((int)lim->active_mtu));
	}

	/* Local ACK timeout: 4.096us * 2^timeout, a 5-bit field (0 = infinite). */
	if ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31)
		return qp_fail(why, why_len, cur, next, "timeout %u out of range (0..31)",
			       attr->timeout);
	/* 3-bit retry counters; rnr_retry 7 means retry forever. */
	if ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7)
		return qp_fail(why, why_len, cur, next, "retry_cnt %u out of range (0..7)",
			       attr->retry_cnt);
	if ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7)
		return qp_fail(why, why_len, cur, next,
			       "rnr_retry %u out of range (0..7, 7 = infinite)", attr->rnr_retry);
	/* 5-bit RNR NAK timer code (IBTA Table 45). */
	if ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		return qp_fail(why, why_len, cur, next, "min_rnr_timer %u out of range (0..31)",
			       attr->min_rnr_timer);

	/* PSNs and QPNs are 24-bit fields of the BTH. */
	if ((mask & IBV_QP_RQ_PSN) && attr->rq_psn > PSN_MAX)
		return qp_fail(why, why_len, cur, next, "rq_psn 0x%x exceeds 24 bits",
			       attr->rq_psn);
	if ((mask & IBV_QP_SQ_PSN) && attr->sq_psn > PSN_MAX)
		return qp_fail(why, why_len, cur, next, "sq_psn 0x%x exceeds 24 bits",
			       attr->sq_psn);
	if ((mask & IBV_QP_DEST_QPN) && attr->dest_qp_num > QPN_MAX)
		return qp_fail(why, why_len, cur, next, "dest_qp_num 0x%x exceeds 24 bits",
			       attr->dest_qp_num);

	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > lim->max_rd_atomic)
		return qp_fail(why, why_len, cur, next,
			       "max_rd_atomic %u exceeds the device limit %u (max_qp_init_rd_atom)",
			       attr->max_rd_atomic, lim->max_rd_atomic);
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) &&
	    attr->max_dest_rd_atomic > lim->max_dest_rd_atomic)
		return qp_fail(why, why_len, cur, next,
			       "max_dest_rd_atomic %u exceeds the device limit %u (max_qp_rd_atom)",
			       attr->max_dest_rd_atomic, lim->max_dest_rd_atomic);

	if ((mask & IBV_QP_PATH_MIG_STATE) && (unsigned int)attr->path_mig_state > IBV_MIG_ARMED)
		return qp_fail(why, why_len, cur, next,
			       "path_mig_state %d invalid (MIGRATED, REARM or ARMED)",
			       (int)attr->path_mig_state);
	return 0;
}

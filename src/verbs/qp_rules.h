/* The IBTA QP state machine as seen by ibv_modify_qp(): which transitions a
 * consumer may request and which IBV_QP_* attribute bits each transition
 * requires or accepts, plus range checks on the attribute values.
 *
 * Pure functions, no device state: the caller passes the QP's current state
 * and the port limits.  Every EINVAL comes with a one-line reason naming the
 * transition and the rule, meant to be logged at debug level.
 *
 * References: IBTA Vol 1 §10.3 (QP state diagram), §11.2.5.2 (Modify QP
 * attributes per transition) and the Linux kernel's qp_state_table /
 * ib_modify_qp_is_ok() (drivers/infiniband/core/verbs.c), which every
 * in-kernel provider (mlx5, rxe, siw, ...) enforces before its own checks.
 */
#ifndef UROCE_QP_RULES_H
#define UROCE_QP_RULES_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

/* Is cur -> next with attr_mask legal for a QP of this type on a RoCE
 * (Ethernet) port?  IBV_QP_STATE is implied and always accepted.
 * Supported types: IBV_QPT_RC, UC, UD, XRC_SEND, XRC_RECV.
 * Returns 0 when legal, else EINVAL and a reason in why (if why != NULL),
 * e.g. "modify_qp RESET->INIT: missing IBV_QP_PKEY_INDEX". */
int uroce_qp_modify_check(enum ibv_qp_type type, enum ibv_qp_state cur, enum ibv_qp_state next,
			  int attr_mask, char *why, size_t why_len);

/* "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"; "UNKNOWN" otherwise. */
const char *uroce_qp_state_name(enum ibv_qp_state s);
const char *uroce_qp_type_name(enum ibv_qp_type t); /* "RC", "UC", ... */

/* Writes the names of the IBV_QP_* bits in mask, "|"-separated, into buf
 * (unknown bits as hex, "0" for an empty mask); truncates to fit, always
 * NUL-terminates.  Returns buf. */
const char *uroce_qp_attr_mask_str(int mask, char *buf, size_t len);

/* Limits of the port/device the QP lives on. */
struct uroce_qp_limits {
	enum ibv_mtu active_mtu;    /* port's active MTU */
	uint8_t max_rd_atomic;	    /* device max_qp_init_rd_atom */
	uint8_t max_dest_rd_atomic; /* device max_qp_rd_atom */
	int gid_tbl_len;	    /* port's GID table length */
};

/* Value checks on the attributes selected by attr_mask, for a transition
 * that already passed uroce_qp_modify_check().  Returns 0 or EINVAL with a
 * reason in why. */
int uroce_qp_attr_check(enum ibv_qp_type type, enum ibv_qp_state cur, enum ibv_qp_state next,
			const struct ibv_qp_attr *attr, int attr_mask,
			const struct uroce_qp_limits *lim, char *why, size_t why_len);

#endif

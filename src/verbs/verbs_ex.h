/* Extended verbs internals: the ibv_cq_ex poll iterator and CQ resizing
 * (src/verbs/cq_ex.c), the ibv_wr_* send API (src/verbs/qp_ex.c), and the
 * hooks cq.c and qp.c call into them.
 */
#ifndef UROCE_VERBS_EX_H
#define UROCE_VERBS_EX_H

#include "uroce.h"

/* Completion timestamps are CLOCK_MONOTONIC nanoseconds: the device clock
 * runs at 1 GHz (ibv_device_attr_ex.hca_core_clock is in kHz). */
#define UROCE_HCA_CLOCK_KHZ 1000000ull

/* ---- CQ (cq_ex.c) ---- */

/* ibv_create_cq_ex() checks beyond those of ibv_create_cq(): comp_mask,
 * wc_flags, flags, parent domain.  Returns 0 or an errno value. */
int uroce_cq_ex_check(struct ibv_context *context, const struct ibv_cq_init_attr_ex *attr);
/* Fill the ibv_cq_ex iterator and readers; allocate the timestamp ring when
 * wc_flags asks for timestamps.  Every CQ goes through here, plain
 * ibv_create_cq() ones with IBV_WC_STANDARD_FLAGS.  0 or ENOMEM. */
int uroce_cq_ex_init(struct uroce_cq *cq, uint64_t wc_flags, uint32_t create_flags);
void uroce_cq_ex_fini(struct uroce_cq *cq);
/* Stamp a completion that is being queued (cq->lock held). */
void uroce_cq_stamp(struct uroce_cq_ts *ts);

/* cq.c: an application polls an empty CQ; drive the receive path. */
void uroce_cq_drive(struct uroce_cq *cq);

/* ---- QP (qp_ex.c) ---- */

/* create_qp_ex comp_mask, create_flags and send_ops_flags.  0 or errno. */
int uroce_qpx_check(const struct ibv_qp_init_attr_ex *ia);
/* Set up the ibv_wr_* API when ia asks for it (IBV_QP_INIT_ATTR_SEND_OPS_FLAGS).
 * 0 or ENOMEM. */
int uroce_qpx_init(struct uroce_qp *qp, const struct ibv_qp_init_attr_ex *ia);
void uroce_qpx_fini(struct uroce_qp *qp);

/* qp.c: ibv_post_send() semantics, except that on error nothing of the
 * chain is queued (ibv_wr_complete(3): "the entire posting will be
 * aborted").  RC only: a UD datagram leaves when it is posted. */
int uroce_post_send_all(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);

#endif

/* The context operations uroce installs in ibv_context.ops and
 * verbs_context (see set_ops() in device.c). */
#ifndef UROCE_VERBS_OPS_H
#define UROCE_VERBS_OPS_H

#include <infiniband/verbs.h>

int uroce_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
int uroce_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int uroce_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int uroce_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
int uroce_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
struct ibv_mw *uroce_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int uroce_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind);
int uroce_dealloc_mw(struct ibv_mw *mw);
struct ibv_cq_ex *uroce_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr);
struct ibv_qp *uroce_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);
int uroce_query_rt_values(struct ibv_context *context, struct ibv_values_ex *values);
struct ibv_srq *uroce_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *attr);
struct ibv_xrcd *uroce_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr);
int uroce_close_xrcd(struct ibv_xrcd *xrcd);
struct ibv_qp *uroce_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr);
int uroce_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
int uroce_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);

#endif

/* IBVERBS_PRIVATE_34: the provider interface of rdma-core 44.
 *
 * These symbols are not for applications.  They exist because perftest and
 * pyverbs link provider libraries (libmlx5.so.1, libefa.so.1) that are
 * linked -z now against libibverbs: every symbol they import must resolve at
 * load time or the whole program fails with "undefined symbol".  A provider
 * only reaches them after rdma-core has matched it to a kernel device and
 * opened it, which never happens with uroce (uroce's devices are its own),
 * so apart from the load-time calls they are unreachable in practice.
 *
 * Behaviour:
 *  - verbs_register_driver_34() is called by every provider's constructor
 *    at load time: accepted and ignored.
 *  - Context creation (verbs_open_device, _verbs_init_and_alloc_context)
 *    fails with NULL + EOPNOTSUPP.
 *  - ibv_cmd_* and execute_ioctl() return EOPNOTSUPP (the kernel command
 *    path returns a positive errno; ibv_cmd_poll_cq returns -1 + errno).
 *  - Pure helpers (__ioctl_final_num_attrs, verbs_init_cq) are implemented.
 *
 * Prototypes follow rdma-core 44's libibverbs/driver.h, cmd_ioctl.h and
 * cmd_write.h.  Those headers are not installed, so the driver-private
 * types are opaque here: the stubs never look inside them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#include "uroce_export.h"
#include "uroce_log.h"

/* Stubs keep the exact rdma-core parameter lists and ignore most of them. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* driver.h / kern-abi.h types, opaque to uroce */
struct verbs_device_ops;
struct verbs_context_ops;
struct verbs_mr;
struct verbs_qp;
struct verbs_cq;
struct verbs_srq;
struct verbs_xrcd;
struct verbs_dm;
struct verbs_counters;
struct verbs_flow_action;
struct ibv_get_context;
struct ibv_query_port;
struct ibv_alloc_pd;
struct ibv_open_xrcd;
struct ibv_reg_mr;
struct ibv_rereg_mr;
struct ibv_alloc_mw;
struct ibv_create_cq;
struct ibv_create_cq_ex;
struct ibv_resize_cq;
struct ibv_modify_cq;
struct ibv_create_srq;
struct ibv_create_xsrq;
struct ibv_modify_srq;
struct ibv_query_srq;
struct ibv_create_qp;
struct ibv_create_qp_ex;
struct ibv_open_qp;
struct ibv_query_qp;
struct ibv_modify_qp;
struct ibv_modify_qp_ex;
struct ibv_create_wq;
struct ibv_modify_wq;

/*
 * struct ibv_command_buffer from cmd_ioctl.h.  Only __ioctl_final_num_attrs()
 * looks inside it, at the leading members, which must match rdma-core 44.
 */
struct ibv_command_buffer {
	struct ibv_command_buffer *next;
	struct ib_uverbs_attr *next_attr;
	struct ib_uverbs_attr *last_attr;
	uint8_t uhw_in_idx;
	uint8_t uhw_out_idx;
	uint8_t uhw_in_headroom_dwords;
	uint8_t uhw_out_headroom_dwords;
	uint8_t buffer_error : 1;
	uint8_t fallback_require_ex : 1;
	uint8_t fallback_ioctl_only : 1;
	struct ib_uverbs_ioctl_hdr hdr;
};

/* Log, set errno and return EOPNOTSUPP: the ibv_cmd_* convention. */
#define CMD_UNSUPPORTED()                                                                          \
	do {                                                                                       \
		ur_dbg("not supported by uroce");                                                  \
		errno = EOPNOTSUPP;                                                                \
		return EOPNOTSUPP;                                                                 \
	} while (0)

/* ---- Provider registration and context lifetime ---- */

/*
 * Read by providers (mlx5) to decide whether destroying an object of a
 * disassociated (hot-unplugged) device may succeed.  rdma-core sets it from
 * its own device-removal logic, which has no uroce equivalent: stays false.
 */
UROCE_EXPORT bool verbs_allow_disassociate_destroy;

UROCE_EXPORT void verbs_register_driver_34(const struct verbs_device_ops *ops)
{
	/* The first member of verbs_device_ops is "const char *name" (stable
	 * for the whole PRIVATE_34 ABI); name the provider for debugging. */
	const char *const *name = (const char *const *)ops;
	int saved = errno; /* runs in the provider's constructor */

	ur_dbg("provider \"%s\" registered: ignored, uroce serves all devices itself",
	       name && *name ? *name : "?");
	errno = saved;
}

UROCE_EXPORT void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
						 size_t alloc_size,
						 struct verbs_context *context_offset,
						 uint32_t driver_id)
{
	ur_dbg("not supported by uroce");
	errno = EOPNOTSUPP;
	return NULL;
}

UROCE_EXPORT struct ibv_context *verbs_open_device(struct ibv_device *device, void *private_data)
{
	ur_dbg("not supported by uroce");
	errno = EOPNOTSUPP;
	return NULL;
}

/* No context is ever created through the provider path, so there are no
 * ops to install and nothing to tear down. */
UROCE_EXPORT void verbs_set_ops(struct verbs_context *vctx, const struct verbs_context_ops *ops)
{
	ur_dbg("ignored by uroce");
}

UROCE_EXPORT void verbs_uninit_context(struct verbs_context *context)
{
	ur_dbg("ignored by uroce");
}

/*
 * The common part of CQ creation: only touches struct ibv_cq, whose layout is
 * public, so it is implemented rather than stubbed.
 */
UROCE_EXPORT void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
				struct ibv_comp_channel *channel, void *cq_context)
{
	cq->context = context;
	cq->channel = channel;
	if (channel) {
		pthread_mutex_lock(&context->mutex);
		channel->refcnt++;
		pthread_mutex_unlock(&context->mutex);
	}
	cq->cq_context = cq_context;
	cq->comp_events_completed = 0;
	cq->async_events_completed = 0;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
}

/*
 * Providers log through this.  rdma-core gates it with VERBS_LOG_LEVEL; here
 * it goes to stderr only when UROCE_LOG is debug or more verbose.  The format
 * carries its own prefix and newline.
 */
UROCE_EXPORT __attribute__((format(printf, 3, 4))) void
__verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	if (uroce_log_level < UROCE_LOG_DEBUG)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	errno = saved;
}

/* ---- ioctl() command machinery (cmd_ioctl.c) ---- */

/* Number of attributes in this and all the linked buffers. */
UROCE_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
						  struct ibv_command_buffer *link)
{
	for (; link; link = link->next)
		num_attrs += (unsigned int)(link->next_attr - link->hdr.attrs);
	return num_attrs;
}

UROCE_EXPORT int execute_ioctl(struct ibv_context *context, struct ibv_command_buffer *cmd)
{
	CMD_UNSUPPORTED();
}

/* ---- Device and context commands ---- */

UROCE_EXPORT int ibv_cmd_get_context(struct verbs_context *context, struct ibv_get_context *cmd,
				     size_t cmd_size, struct ib_uverbs_get_context_resp *resp,
				     size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_query_context(struct ibv_context *ctx, struct ibv_command_buffer *driver)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_query_device_any(struct ibv_context *context,
					  const struct ibv_query_device_ex_input *input,
					  struct ibv_device_attr_ex *attr, size_t attr_size,
					  struct ib_uverbs_ex_query_device_resp *resp,
					  size_t *resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
				    struct ibv_port_attr *port_attr, struct ibv_query_port *cmd,
				    size_t cmd_size)
{
	CMD_UNSUPPORTED();
}

/* ---- PD, XRCD, MR, MW, DM ---- */

UROCE_EXPORT int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
				  struct ibv_alloc_pd *cmd, size_t cmd_size,
				  struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_dealloc_pd(struct ibv_pd *pd)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_open_xrcd(struct ibv_context *context, struct verbs_xrcd *xrcd,
				   int vxrcd_size, struct ibv_xrcd_init_attr *attr,
				   struct ibv_open_xrcd *cmd, size_t cmd_size,
				   struct ib_uverbs_open_xrcd_resp *resp, size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_close_xrcd(struct verbs_xrcd *xrcd)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
				int access, struct verbs_mr *vmr, struct ibv_reg_mr *cmd,
				size_t cmd_size, struct ib_uverbs_reg_mr_resp *resp,
				size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr, size_t length,
				  uint64_t hca_va, int access, struct ibv_pd *pd,
				  struct ibv_rereg_mr *cmd, size_t cmd_sz,
				  struct ib_uverbs_rereg_mr_resp *resp, size_t resp_sz)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_dereg_mr(struct verbs_mr *vmr)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr, uint32_t mr_handle)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
				   uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
				       uint64_t iova, int fd, int access, struct verbs_mr *vmr)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw *mw,
				  struct ibv_alloc_mw *cmd, size_t cmd_size,
				  struct ib_uverbs_alloc_mw_resp *resp, size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_dealloc_mw(struct ibv_mw *mw)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_alloc_dm(struct ibv_context *ctx, const struct ibv_alloc_dm_attr *dm_attr,
				  struct verbs_dm *dm, struct ibv_command_buffer *link)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_free_dm(struct verbs_dm *dm)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_reg_dm_mr(struct ibv_pd *pd, struct verbs_dm *dm, uint64_t offset,
				   size_t length, unsigned int access, struct verbs_mr *vmr,
				   struct ibv_command_buffer *link)
{
	CMD_UNSUPPORTED();
}

/* ---- CQ ---- */

UROCE_EXPORT int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
				   struct ibv_comp_channel *channel, int comp_vector,
				   struct ibv_cq *cq, struct ibv_create_cq *cmd, size_t cmd_size,
				   struct ib_uverbs_create_cq_resp *resp, size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_create_cq_ex(struct ibv_context *context,
				      const struct ibv_cq_init_attr_ex *cq_attr,
				      struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
				      size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp,
				      size_t resp_size, uint32_t cmd_flags)
{
	CMD_UNSUPPORTED();
}

/* Returns a completion count, so failure is -1 + errno. */
UROCE_EXPORT int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc)
{
	ur_dbg("not supported by uroce");
	errno = EOPNOTSUPP;
	return -1;
}

UROCE_EXPORT int ibv_cmd_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd,
				   size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp,
				   size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_destroy_cq(struct ibv_cq *cq)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr,
				   struct ibv_modify_cq *cmd, size_t cmd_size)
{
	CMD_UNSUPPORTED();
}

/* ---- SRQ ---- */

UROCE_EXPORT int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
				    struct ibv_srq_init_attr *attr, struct ibv_create_srq *cmd,
				    size_t cmd_size, struct ib_uverbs_create_srq_resp *resp,
				    size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq,
				       struct ibv_srq_init_attr_ex *attr_ex,
				       struct ibv_create_xsrq *cmd, size_t cmd_size,
				       struct ib_uverbs_create_srq_resp *resp, size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
				    int srq_attr_mask, struct ibv_modify_srq *cmd, size_t cmd_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
				   struct ibv_query_srq *cmd, size_t cmd_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_destroy_srq(struct ibv_srq *srq)
{
	CMD_UNSUPPORTED();
}

/* ---- QP ---- */

UROCE_EXPORT int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp,
				   struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd,
				   size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
				   size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp,
				      struct ibv_qp_init_attr_ex *attr_ex,
				      struct ibv_create_qp *cmd, size_t cmd_size,
				      struct ib_uverbs_create_qp_resp *resp, size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp,
				       struct ibv_qp_init_attr_ex *qp_attr,
				       struct ibv_create_qp_ex *cmd, size_t cmd_size,
				       struct ib_uverbs_ex_create_qp_resp *resp, size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_open_qp(struct ibv_context *context, struct verbs_qp *qp, int vqp_sz,
				 struct ibv_qp_open_attr *attr, struct ibv_open_qp *cmd,
				 size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
				 size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr, int attr_mask,
				  struct ibv_qp_init_attr *qp_init_attr, struct ibv_query_qp *cmd,
				  size_t cmd_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
				   struct ibv_modify_qp *cmd, size_t cmd_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_modify_qp_ex(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
				      struct ibv_modify_qp_ex *cmd, size_t cmd_size,
				      struct ib_uverbs_ex_modify_qp_resp *resp, size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_destroy_qp(struct ibv_qp *qp)
{
	CMD_UNSUPPORTED();
}

/* On failure the first work request is the one reported as bad. */
UROCE_EXPORT int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
				   struct ibv_send_wr **bad_wr)
{
	if (bad_wr)
		*bad_wr = wr;
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
				   struct ibv_recv_wr **bad_wr)
{
	if (bad_wr)
		*bad_wr = wr;
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
				       struct ibv_recv_wr **bad_wr)
{
	if (bad_wr)
		*bad_wr = wr;
	CMD_UNSUPPORTED();
}

/* ---- AH and multicast ---- */

UROCE_EXPORT int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah, struct ibv_ah_attr *attr,
				   struct ib_uverbs_create_ah_resp *resp, size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_destroy_ah(struct ibv_ah *ah)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	CMD_UNSUPPORTED();
}

/* ---- Flow steering, WQ, RSS indirection, counters ---- */

UROCE_EXPORT int ibv_cmd_create_flow(struct ibv_qp *qp, struct ibv_flow *flow_id,
				     struct ibv_flow_attr *flow_attr, void *ucmd, size_t ucmd_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_destroy_flow(struct ibv_flow *flow_id)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_create_flow_action_esp(struct ibv_context *ctx,
						struct ibv_flow_action_esp_attr *attr,
						struct verbs_flow_action *flow_action,
						struct ibv_command_buffer *driver)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_modify_flow_action_esp(struct verbs_flow_action *flow_action,
						struct ibv_flow_action_esp_attr *attr,
						struct ibv_command_buffer *driver)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_destroy_flow_action(struct verbs_flow_action *action)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_create_wq(struct ibv_context *context,
				   struct ibv_wq_init_attr *wq_init_attr, struct ibv_wq *wq,
				   struct ibv_create_wq *cmd, size_t cmd_size,
				   struct ib_uverbs_ex_create_wq_resp *resp, size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr,
				   struct ibv_modify_wq *cmd, size_t cmd_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_destroy_wq(struct ibv_wq *wq)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_create_rwq_ind_table(struct ibv_context *context,
					      struct ibv_rwq_ind_table_init_attr *init_attr,
					      struct ibv_rwq_ind_table *rwq_ind_table,
					      struct ib_uverbs_ex_create_rwq_ind_table_resp *resp,
					      size_t resp_size)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table *rwq_ind_table)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_create_counters(struct ibv_context *context,
					 struct ibv_counters_init_attr *init_attr,
					 struct verbs_counters *vcounters,
					 struct ibv_command_buffer *link)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_destroy_counters(struct verbs_counters *vcounters)
{
	CMD_UNSUPPORTED();
}

UROCE_EXPORT int ibv_cmd_read_counters(struct verbs_counters *vcounters, uint64_t *counters_value,
				       uint32_t ncounters, uint32_t flags,
				       struct ibv_command_buffer *link)
{
	CMD_UNSUPPORTED();
}

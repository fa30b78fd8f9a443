/* Public verbs outside the uroce core: kernel-ABI marshalling helpers, fork
 * support, P_Key lookup, and the verbs uroce does not implement (object
 * import, dma-buf MRs, ECE, L2 address resolution).
 *
 * The unsupported verbs follow the return convention of each verb in
 * rdma-core 44 (NULL + errno, positive errno, or negative errno) with
 * EOPNOTSUPP, and log "<name>: not supported by uroce" at debug level.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include "uroce_export.h"
#include "uroce_log.h"

/* uroce_log_print() prefixes the calling function's name, so the line reads
 * "... debug ibv_import_pd: not supported by uroce". */
#define NOT_SUPPORTED() ur_dbg("not supported by uroce")

/* ---- Kernel ABI <-> verbs struct conversion (IBVERBS_1.0/1.1) ----
 *
 * librdmacm receives QP attributes, address vectors and path records from
 * the rdma_ucm kernel interface in the layouts of <rdma/ib_user_verbs.h> and
 * <rdma/ib_user_sa.h> and converts them with these.  Field by field: the
 * layouts differ in order, widths and padding.  Byte-order fields (LIDs,
 * P_Key, flow label in path records) are copied as they are, both sides
 * being in network order.
 */

UROCE_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;

	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

UROCE_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	/* qp_state is not converted: rdma-core leaves it to the caller too
	 * (librdmacm only uses this on the rdma_init_qp_attr() result, whose
	 * qp_state it has chosen itself). */
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = (int)src->qp_access_flags;

	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;

	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);

	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

UROCE_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					      struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = (int)src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = (int)src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = (uint8_t)src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

UROCE_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
					    struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = (uint32_t)src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->reversible = (uint32_t)src->reversible;
	dst->mtu = src->mtu;
	dst->pkey = src->pkey;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->numb_path = src->numb_path;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

/* ---- fork() support (IBVERBS_1.1, 1.13) ----
 *
 * rdma-core marks registered memory MADV_DONTFORK because a kernel HCA
 * driver pins the pages and DMAs into them: after fork() the parent's
 * copy-on-write could move a page away from under the device.  uroce
 * registers nothing with any kernel: an MR is a range the library itself
 * reads and writes with ordinary loads/stores, so after fork() both
 * processes simply see their own copy of the memory.  Fork is therefore
 * always safe and these calls have nothing to do.  (The child cannot use
 * the parent's verbs objects, exactly as with rdma-core.)
 */

UROCE_EXPORT int ibv_fork_init(void)
{
	return 0;
}

UROCE_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

UROCE_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

UROCE_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

/* ---- P_Key lookup (IBVERBS_1.5) ----
 *
 * Scan the port's P_Key table through ibv_query_pkey() until the key matches
 * (exact 16-bit compare, both in network order, like rdma-core: 0x7fff does
 * not match a 0xffff entry) or the query fails past the end of the table.
 * A uroce port has a single entry, 0xffff at index 0.
 *
 * Errors: -1 + errno.  A failure at index 0 (bad context or port) keeps the
 * errno of ibv_query_pkey(); running off the end of the table is ENOENT, as
 * with rdma-core, where the next sysfs pkeys/<i> file does not exist.
 */
UROCE_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	__be16 cur;
	int ret;

	/* P_Key indices are 16 bits wide: bound the scan in case a table
	 * never reports its end. */
	for (int i = 0; i <= UINT16_MAX; i++) {
		ret = ibv_query_pkey(context, port_num, i, &cur);
		if (ret) {
			int err = i > 0 ? ENOENT : ret > 0 ? ret : errno;

			/* (ret > 0: tolerate a positive errno return) */
			ur_dbg("P_Key 0x%04x on port %u: %s", be16toh(pkey), port_num,
			       i > 0 ? "not in the table" : "query failed");
			errno = err; /* after logging, which may clobber errno */
			return -1;
		}
		if (cur == pkey)
			return i;
	}
	errno = ENOENT;
	return -1;
}

/* ---- RoCE L2 resolution (IBVERBS_1.1) ----
 *
 * Used by kernel-backed providers (mlx4/mlx5/rxe...) to find the next-hop
 * MAC for a RoCE AH through netlink.  uroce does its own neighbour handling
 * and no provider context can exist in a uroce process.  rdma-core returns
 * a negative errno here.
 */
UROCE_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
					     uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t *vid)
{
	(void)context;
	(void)attr;
	(void)eth_mac;
	(void)vid;
	NOT_SUPPORTED();
	errno = EOPNOTSUPP;
	return -EOPNOTSUPP;
}

/* ---- Shared-object import (IBVERBS_1.10, 1.13) ----
 *
 * Import needs a kernel uverbs command FD shared between processes; uroce
 * objects live in one process's memory.  NULL + errno like rdma-core.
 */
UROCE_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	NOT_SUPPORTED();
	errno = EOPNOTSUPP;
	return NULL;
}

UROCE_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	(void)context;
	(void)pd_handle;
	NOT_SUPPORTED();
	errno = EOPNOTSUPP;
	return NULL;
}

/* Nothing can have been imported, so there is nothing to release. */
UROCE_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
	NOT_SUPPORTED();
}

UROCE_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd;
	(void)mr_handle;
	NOT_SUPPORTED();
	errno = EOPNOTSUPP;
	return NULL;
}

UROCE_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
	NOT_SUPPORTED();
}

UROCE_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	(void)context;
	(void)dm_handle;
	NOT_SUPPORTED();
	errno = EOPNOTSUPP;
	return NULL;
}

UROCE_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
	NOT_SUPPORTED();
}

/* ---- dma-buf MRs (IBVERBS_1.12) ----
 *
 * A dma-buf is device memory reachable only through a kernel driver; uroce
 * can only access memory mapped into the process.
 */
UROCE_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					      uint64_t iova, int fd, int access)
{
	(void)pd;
	(void)offset;
	(void)length;
	(void)iova;
	(void)fd;
	(void)access;
	NOT_SUPPORTED();
	errno = EOPNOTSUPP;
	return NULL;
}

/* ---- Enhanced Connection Establishment (IBVERBS_1.10) ----
 *
 * Both return the errno value itself (positive), as rdma-core does; librdmacm
 * treats a failing ibv_query_ece() after QP creation as "no ECE" and only
 * calls ibv_set_ece() when the peer advertised a vendor id.
 */
UROCE_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	NOT_SUPPORTED();
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

UROCE_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	NOT_SUPPORTED();
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

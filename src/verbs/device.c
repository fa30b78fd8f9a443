/* Device list, open/close, and the query verbs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "uroce.h"
#include "net/pcap.h"
#include "verbs/verbs_ex.h"
#include "verbs/verbs_ops.h"

#define UROCE_MAX_DEVS 32

static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uroce_dev *devs[UROCE_MAX_DEVS];
static int ndevs = -1;

/* The verbs_device.ops slot: libmlx5/libefa compare it with their own ops to
 * recognise their devices, so it must be non-NULL and unlike theirs. */
/* Open contexts, for the exit handler below. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uroce_ctx *open_ctxs;

static void uroce_ctx_list(struct uroce_ctx *ctx)
{
	pthread_mutex_lock(&open_lock);
	ctx->next_open = open_ctxs;
	open_ctxs = ctx;
	pthread_mutex_unlock(&open_lock);
}

static void uroce_ctx_unlist(struct uroce_ctx *ctx)
{
	pthread_mutex_lock(&open_lock);
	for (struct uroce_ctx **p = &open_ctxs; *p; p = &(*p)->next_open)
		if (*p == ctx) {
			*p = ctx->next_open;
			break;
		}
	pthread_mutex_unlock(&open_lock);
}

/* A process may exit right after it sees a completion, without closing
 * anything: the ACKs its last ibv_poll_cq deferred (src/net/endpoint.c)
 * still go out, or the peer would retry until its retry_cnt runs out.
 * Only try-locks: another thread may be anywhere at exit. */
__attribute__((destructor)) static void uroce_exit_send_acks(void)
{
	if (pthread_mutex_trylock(&open_lock))
		return;
	for (struct uroce_ctx *c = open_ctxs; c; c = c->next_open)
		uroce_ctx_send_owed_acks(c, false);
	pthread_mutex_unlock(&open_lock);
}

static const struct {
	const char *name;
} uroce_dev_ops = {"uroce"};

__attribute__((constructor)) static void uroce_init(void)
{
	uroce_log_init();
}

static int discover_once(void)
{
	pthread_mutex_lock(&dev_lock);
	if (ndevs < 0) {
		ndevs = uroce_discover(devs, UROCE_MAX_DEVS);
		for (int i = 0; i < ndevs; i++)
			devs[i]->ops = &uroce_dev_ops;
		ur_info("%d device(s) discovered", ndevs);
	}
	pthread_mutex_unlock(&dev_lock);
	return ndevs;
}

#undef ibv_get_device_list
UROCE_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list;
	int n = discover_once();

	list = calloc((size_t)n + 1, sizeof(*list));
	if (!list) {
		ur_dbg("get_device_list: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < n; i++)
		list[i] = &devs[i]->ibdev;
	if (num_devices)
		*num_devices = n;
	return list;
}

UROCE_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

UROCE_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

UROCE_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	return device ? ((struct uroce_dev *)device)->guid : 0;
}

UROCE_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return device ? ((struct uroce_dev *)device)->index : -1;
}

static struct uroce_dev *to_udev(struct ibv_context *c)
{
	return (struct uroce_dev *)c->device;
}

/* ---- queries ---- */

/* What rxe reports, for what uroce has: RNR NAKs, window types 1 and 2B
 * with LOCAL_INV/SEND_WITH_INV (MEM_MGT_EXTENSIONS), XRC (libfabric turns
 * it off without the flag), the one port's AV check.  Left out on purpose:
 * AUTO_PATH_MIG (no alternate paths), SRQ_RESIZE (no SRQ resize),
 * BAD_PKEY_CNTR/BAD_QKEY_CNTR (no port counters through MADs),
 * CHANGE_PHY_PORT (one port), PORT_ACTIVE_EVENT (the port never changes
 * state, so no port event is ever raised). */
#define UROCE_DEVICE_CAP_FLAGS                                                                     \
	(IBV_DEVICE_UD_AV_PORT_ENFORCE | IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN |   \
	 IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_XRC | IBV_DEVICE_MEM_MGT_EXTENSIONS |                  \
	 IBV_DEVICE_MEM_WINDOW_TYPE_2B)

static void fill_device_attr(struct uroce_dev *d, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	/* the release, in the dotted form ibv_devinfo shows for hardware */
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", UROCE_FW_VER);
	a->node_guid = d->guid;
	a->sys_image_guid = d->guid;
	a->max_mr_size = UROCE_MAX_MR_SIZE;
	a->page_size_cap = 0xfffff000; /* 4 KiB and up */
	a->vendor_id = UROCE_VENDOR_ID;
	a->vendor_part_id = UROCE_VENDOR_PART;
	a->hw_ver = UROCE_HW_VER;
	a->max_qp = UROCE_MAX_QP;
	a->max_qp_wr = UROCE_MAX_QP_WR;
	a->device_cap_flags = UROCE_DEVICE_CAP_FLAGS;
	a->max_sge = UROCE_MAX_SGE;
	a->max_sge_rd = UROCE_MAX_SGE;
	a->max_cq = UROCE_MAX_CQ;
	a->max_cqe = UROCE_MAX_CQE;
	a->max_mr = UROCE_MAX_MR;
	a->max_pd = UROCE_MAX_PD;
	a->max_qp_rd_atom = UROCE_MAX_RD_ATOM;
	a->max_ee_rd_atom = 0;
	a->max_res_rd_atom = UROCE_MAX_RD_ATOM * UROCE_MAX_QP;
	a->max_qp_init_rd_atom = UROCE_MAX_RD_ATOM;
	a->max_ee_init_rd_atom = 0;
	/* Reported as rxe does: UCX enables device atomics only for
	 * IBV_ATOMIC_HCA.  The implementation is stronger than that (CPU
	 * atomic instructions on host memory, atomic against the host's own
	 * atomics too, what IBV_ATOMIC_GLOB would promise). */
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ee = 0;
	a->max_rdd = 0;
	a->max_mw = UROCE_MAX_MW;
	a->max_raw_ipv6_qp = 0;
	a->max_raw_ethy_qp = 0;
	a->max_mcast_grp = 1024;
	a->max_mcast_qp_attach = 1024;
	a->max_total_mcast_qp_attach = 1024 * 1024;
	a->max_ah = UROCE_MAX_AH;
	a->max_fmr = 0;
	a->max_map_per_fmr = 0;
	a->max_srq = UROCE_MAX_SRQ;
	a->max_srq_wr = UROCE_MAX_QP_WR;
	a->max_srq_sge = UROCE_MAX_SGE;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

UROCE_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	if (!context || !attr)
		return ur_dbg("query_device: context and attr must not be NULL"), EINVAL;
	fill_device_attr(to_udev(context), attr);
	return 0;
}

static int uroce_query_device_ex(struct ibv_context *context,
				 const struct ibv_query_device_ex_input *input,
				 struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex a;

	if (input && input->comp_mask)
		return ur_dbg("query_device_ex: unknown input comp_mask 0x%x", input->comp_mask),
		       EINVAL;
	if (attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	memset(&a, 0, sizeof(a));
	fill_device_attr(to_udev(context), &a.orig_attr);
	a.phys_port_cnt_ex = 1;
	/* the 64-bit flags: the 32 of device_cap_flags, none of the upper
	 * ones (RAW_SCATTER_FCS, PCI_WRITE_END_PADDING are raw-packet/PCI) */
	a.device_cap_flags_ex = a.orig_attr.device_cap_flags;
	/* completion timestamps: CLOCK_MONOTONIC ns, a 1 GHz clock (cq_ex.c) */
	a.completion_timestamp_mask = UINT64_MAX;
	a.hca_core_clock = UROCE_HCA_CLOCK_KHZ;
	uroce_odp_query(&a); /* odp_caps (src/verbs/odp.c) */
	uroce_dm_query(&a);  /* max_dm_size (src/verbs/dm.c) */
	memcpy(attr, &a, attr_size < sizeof(a) ? attr_size : sizeof(a));
	return 0;
}

static void fill_port_attr(struct uroce_dev *d, struct ibv_port_attr *p)
{
	memset(p, 0, sizeof(*p));
	p->state = IBV_PORT_ACTIVE;
	p->max_mtu = d->max_mtu;
	p->active_mtu = d->active_mtu;
	p->gid_tbl_len = d->ngid;
	p->port_cap_flags = IBV_PORT_CM_SUP;
	p->max_msg_sz = UROCE_MAX_MSG;
	p->pkey_tbl_len = 1;
	p->lid = 0;
	p->sm_lid = 0;
	p->lmc = 0;
	p->max_vl_num = 1;
	p->subnet_timeout = 0;
	p->active_width = 1; /* 1X */
	p->active_speed = 4; /* QDR-class 10 Gb/s per lane: nominal */
	p->phys_state = 5;   /* LinkUp */
	p->link_layer = IBV_LINK_LAYER_ETHERNET;
	p->flags = 0;
	p->port_cap_flags2 = 0;
}

static int uroce_query_port(struct ibv_context *context, uint8_t port_num,
			    struct ibv_port_attr *port_attr, size_t port_attr_len)
{
	struct ibv_port_attr p;

	if (port_num != 1)
		return ur_dbg("query_port: port %u does not exist (uroce has port 1)", port_num),
		       EINVAL;
	fill_port_attr(to_udev(context), &p);
	memcpy(port_attr, &p, port_attr_len < sizeof(p) ? port_attr_len : sizeof(p));
	return 0;
}

/* The IBVERBS_1.1 entry point: callers compiled against old headers pass the
 * compat struct, which ends at port_cap_flags2. */
#undef ibv_query_port
UROCE_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
				struct _compat_ibv_port_attr *compat)
{
	struct ibv_port_attr *port_attr = (struct ibv_port_attr *)compat;

	if (!context || !port_attr)
		return ur_dbg("query_port: context and port_attr must not be NULL"), EINVAL;
	return uroce_query_port(context, port_num, port_attr,
				offsetof(struct ibv_port_attr, port_cap_flags2) +
				    sizeof(port_attr->port_cap_flags2));
}

UROCE_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
			       union ibv_gid *gid)
{
	struct uroce_dev *d;

	if (!context || !gid)
		return -1;
	d = to_udev(context);
	if (port_num != 1 || index < 0 || index >= d->ngid) {
		ur_dbg("query_gid: port %u index %d: the device has port 1 with GIDs 0..%d",
		       port_num, index, d->ngid - 1);
		errno = EINVAL;
		return -1;
	}
	*gid = d->gid[index].gid;
	return 0;
}

UROCE_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index,
				__be16 *pkey)
{
	if (!context || !pkey || port_num != 1 || index != 0) {
		ur_dbg(
		    "query_pkey: port %u index %d: the device has port 1 with one P_Key, index 0",
		    port_num, index);
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(UR_DEFAULT_PKEY);
	return 0;
}

/* rdma-core's enum ibv_gid_type_sysfs (private): 0 = IB/RoCE v1, 1 = RoCE v2 */
UROCE_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
				    unsigned int index, int *type)
{
	struct uroce_dev *d;

	if (!context || !type)
		return -1;
	d = to_udev(context);
	if (port_num != 1 || index >= (unsigned int)d->ngid) {
		ur_dbg("query_gid_type: port %u index %u: the device has port 1 with GIDs 0..%d",
		       port_num, index, d->ngid - 1);
		errno = EINVAL;
		return -1;
	}
	*type = 1;
	return 0;
}

static void fill_gid_entry(struct uroce_dev *d, unsigned int i, struct ibv_gid_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->gid = d->gid[i].gid;
	e->gid_index = i;
	e->port_num = 1;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = (uint32_t)d->ifindex;
}

UROCE_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
				   uint32_t gid_index, struct ibv_gid_entry *entry, uint32_t flags,
				   size_t entry_size)
{
	struct ibv_gid_entry e;
	struct uroce_dev *d;

	if (!context || !entry || flags || entry_size < sizeof(e.gid))
		return ur_dbg("query_gid_ex: NULL context/entry, flags 0x%x (must be 0) or "
			      "entry_size %zu < %zu",
			      flags, entry_size, sizeof(e.gid)),
		       EINVAL;
	d = to_udev(context);
	if (port_num != 1)
		return ur_dbg("query_gid_ex: port %u does not exist (uroce has port 1)", port_num),
		       EINVAL;
	if (gid_index >= (uint32_t)d->ngid)
		return ENODATA;
	fill_gid_entry(d, gid_index, &e);
	memcpy(entry, &e, entry_size < sizeof(e) ? entry_size : sizeof(e));
	return 0;
}

UROCE_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context,
					  struct ibv_gid_entry *entries, size_t max_entries,
					  uint32_t flags, size_t entry_size)
{
	struct uroce_dev *d;
	size_t n;

	if (!context || flags || entry_size < sizeof(struct ibv_gid_entry))
		return ur_dbg("query_gid_table: NULL context, flags 0x%x (must be 0) or "
			      "entry_size %zu < %zu",
			      flags, entry_size, sizeof(struct ibv_gid_entry)),
		       -EINVAL;
	d = to_udev(context);
	n = (size_t)d->ngid;
	if (max_entries < n)
		return ur_dbg("query_gid_table: max_entries %zu < %zu GIDs", max_entries, n),
		       -EINVAL;
	for (size_t i = 0; i < n; i++)
		fill_gid_entry(d, (unsigned int)i,
			       (struct ibv_gid_entry *)((char *)entries + i * entry_size));
	return (ssize_t)n;
}

/* ---- open / close ---- */

static void set_ops(struct uroce_ctx *ctx)
{
	struct verbs_context *v = &ctx->vctx;
	struct ibv_context_ops *o = &v->context.ops;

	o->poll_cq = uroce_poll_cq;
	o->req_notify_cq = uroce_req_notify_cq;
	o->post_send = uroce_post_send;
	o->post_recv = uroce_post_recv;
	o->post_srq_recv = uroce_post_srq_recv;
	o->alloc_mw = uroce_alloc_mw;
	o->bind_mw = uroce_bind_mw;
	o->dealloc_mw = uroce_dealloc_mw;

	v->query_port = uroce_query_port;
	v->query_device_ex = uroce_query_device_ex;
	v->create_cq_ex = uroce_create_cq_ex;
	v->create_qp_ex = uroce_create_qp_ex;
	v->query_rt_values = uroce_query_rt_values;
	v->create_srq_ex = uroce_create_srq_ex;
	v->get_srq_num = uroce_get_srq_num;
	v->open_xrcd = uroce_open_xrcd;
	v->close_xrcd = uroce_close_xrcd;
	v->open_qp = uroce_open_qp;
	v->modify_cq = uroce_modify_cq;
	uroce_odp_set_ops(v);
	uroce_dm_set_ops(v);
	uroce_td_set_ops(v);
	v->sz = sizeof(*v);
}

UROCE_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct uroce_ctx *ctx;
	int p[2];

	if (!device) {
		ur_dbg("open_device: device is NULL");
		errno = EINVAL;
		return NULL;
	}
	if (discover_once() <= 0 || ((struct uroce_dev *)device)->ops != &uroce_dev_ops) {
		ur_dbg("open_device: %p is not a uroce device", (void *)device);
		errno = ENODEV;
		return NULL;
	}
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		ur_dbg("open_device: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	ctx->dev = (struct uroce_dev *)device;
	ctx->vctx.context.device = device;
	ctx->vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->vctx.context.num_comp_vectors = 1;
	pthread_mutex_init(&ctx->vctx.context.mutex, NULL);
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->async_lock, NULL);
	pthread_mutex_init(&ctx->mcast_lock, NULL);
	pthread_rwlock_init(&ctx->mr_lock, NULL);
	ctx->epfd = -1;
	ctx->wake_epfd = -1;
	ctx->wake_fd = -1;
	set_ops(ctx);
	if (uroce_stats_open(ctx)) {
		ur_dbg("open_device: out of memory for the counters");
		free(ctx);
		errno = ENOMEM;
		return NULL;
	}
	uroce_pcap_open(ctx);

	if (pipe2(p, O_CLOEXEC))
		goto err_free;
	ctx->vctx.context.async_fd = p[0];
	ctx->async_wr_fd = p[1];
	fcntl(ctx->async_wr_fd, F_SETFL, O_NONBLOCK);
	/* No kernel command channel: an eventfd that is never signalled keeps
	 * cmd_fd a valid descriptor for programs that poll or dup it. */
	ctx->vctx.context.cmd_fd = eventfd(0, EFD_CLOEXEC);
	if (ctx->vctx.context.cmd_fd < 0)
		goto err_pipe;

	uroce_ctx_list(ctx);
	/* No IBV_EVENT_PORT_ACTIVE here: a device reports a port's state
	 * changes, and opening a context changes none (a program waiting for
	 * the event it provoked would read this one first). */
	ur_info("opened %s (interface %s)", device->name, ctx->dev->ifname);
	return &ctx->vctx.context;

err_pipe:
	close(p[0]);
	close(p[1]);
err_free:
	uroce_pcap_close(ctx);
	uroce_stats_close(ctx);
	free(ctx);
	errno = EMFILE;
	return NULL;
}

UROCE_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct uroce_ctx *ctx;

	if (!context)
		return ur_dbg("close_device: context is NULL"), EINVAL;
	ctx = to_uctx(context);
	uroce_ctx_send_owed_acks(ctx, true);
	uroce_ctx_unlist(ctx);
	uroce_progress_stop(ctx);
	for (int i = 0; i < ctx->nep; i++)
		uroce_ep_close(ctx->ep[i]);
	free(ctx->qps);
	free(ctx->mcast);
	free(ctx->mr_tab);
	close(ctx->vctx.context.async_fd);
	close(ctx->async_wr_fd);
	uroce_async_free_zombies(ctx);
	close(ctx->vctx.context.cmd_fd);
	pthread_rwlock_destroy(&ctx->mr_lock);
	pthread_mutex_destroy(&ctx->lock);
	pthread_mutex_destroy(&ctx->async_lock);
	uroce_pcap_close(ctx);
	uroce_stats_close(ctx); /* logs the counters at info level */
	free(ctx);
	return 0;
}

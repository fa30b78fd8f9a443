/* Devices and address resolution.
 *
 * The devices are uroce's (the libibverbs.so.1 this library runs with), one
 * cached context and protection domain per device, opened on first use.  An
 * IPv4 address belongs to the device whose GID table holds it as
 * ::ffff:a.b.c.d; a destination resolves to the source address the kernel's
 * routing table picks for it (a connected UDP socket, nothing sent), and so
 * to that source's device: 127.0.0.0/8 goes to uroce_lo.  uroce's data path
 * is IPv4, so IPv6 addresses are refused with EAFNOSUPPORT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm.h"

void cm_gid_from_v4(union ibv_gid *g, struct in_addr a)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	memcpy(&g->raw[12], &a, 4);
}

struct in_addr cm_src_v4(const struct cm_id *cid)
{
	return cid->id.route.addr.src_sin.sin_addr;
}

struct in_addr cm_dst_v4(const struct cm_id *cid)
{
	return cid->id.route.addr.dst_sin.sin_addr;
}

int cm_check_sockaddr(const struct sockaddr *sa, const char *who)
{
	if (!sa)
		return cm_fail(EINVAL, "%s: address is NULL", who);
	if (sa->sa_family == AF_INET6) {
		ur_warn("%s: IPv6 addresses are not supported: uroce's data path is IPv4 "
			"(use an IPv4 address)",
			who);
		errno = EAFNOSUPPORT;
		return -EAFNOSUPPORT;
	}
	if (sa->sa_family != AF_INET)
		return cm_fail(EAFNOSUPPORT, "%s: address family %d is not AF_INET", who,
			       sa->sa_family);
	return 0;
}

/* Under cm.lock. */
static int devs_load(void)
{
	int n = 0;

	if (cm.devs)
		return 0;
	cm.devs = ibv_get_device_list(&n);
	if (!cm.devs)
		return -(errno ? errno : ENODEV);
	cm.ndev = n;
	cm.ctxs = calloc((size_t)n + 1, sizeof(*cm.ctxs));
	cm.pds = calloc((size_t)n + 1, sizeof(*cm.pds));
	if (!cm.ctxs || !cm.pds)
		return -ENOMEM;
	return 0;
}

static struct ibv_context *dev_ctx(int i)
{
	if (!cm.ctxs[i]) {
		cm.ctxs[i] = ibv_open_device(cm.devs[i]);
		if (!cm.ctxs[i])
			ur_err("rdma_cm: cannot open %s: %m", ibv_get_device_name(cm.devs[i]));
	}
	return cm.ctxs[i];
}

struct ibv_pd *cm_dev_pd(struct ibv_context *ctx)
{
	for (int i = 0; i < cm.ndev; i++)
		if (cm.ctxs[i] == ctx) {
			if (!cm.pds[i])
				cm.pds[i] = ibv_alloc_pd(ctx);
			return cm.pds[i];
		}
	return NULL;
}

uint8_t cm_dev_max_rd(struct ibv_context *ctx)
{
	struct ibv_device_attr a;

	if (ibv_query_device(ctx, &a) || a.max_qp_rd_atom <= 0)
		return 1;
	return (uint8_t)(a.max_qp_rd_atom > 255 ? 255 : a.max_qp_rd_atom);
}

/* Under cm.lock: the device and GID index of a local IPv4 address. */
int cm_dev_for_addr(struct in_addr a, struct ibv_context **ctx, uint8_t *gid_index)
{
	union ibv_gid want, g;
	int ret = devs_load();

	if (ret)
		return ret;
	cm_gid_from_v4(&want, a);
	for (int i = 0; i < cm.ndev; i++) {
		struct ibv_context *c = dev_ctx(i);
		struct ibv_port_attr pa;

		if (!c || ibv_query_port(c, 1, &pa))
			continue;
		for (int k = 0; k < pa.gid_tbl_len; k++) {
			if (ibv_query_gid(c, 1, k, &g))
				break;
			if (!memcmp(&g, &want, sizeof(g))) {
				*ctx = c;
				*gid_index = (uint8_t)k;
				return 0;
			}
		}
	}
	return -EADDRNOTAVAIL;
}

/* Under cm.lock: the open contexts, NULL-terminated (free() it). */
struct ibv_context **rdma_get_devices_locked(int *num_devices)
{
	struct ibv_context **list;
	int n = 0, ret;

	ret = devs_load();
	list = ret ? NULL : calloc((size_t)cm.ndev + 1, sizeof(*list));
	for (int i = 0; list && i < cm.ndev; i++)
		if (dev_ctx(i))
			list[n++] = cm.ctxs[i];
	if (!list) {
		errno = ret ? -ret : ENOMEM;
		return NULL;
	}
	if (num_devices)
		*num_devices = n;
	return list;
}

UROCE_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;

	pthread_mutex_lock(&cm.lock);
	list = rdma_get_devices_locked(num_devices);
	pthread_mutex_unlock(&cm.lock);
	return list;
}

UROCE_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

/* Bind cid to the device of a (non-wildcard) local address. */
static int bind_dev(struct cm_id *cid, struct in_addr a)
{
	struct ibv_port_attr pa;
	int ret = cm_dev_for_addr(a, &cid->ctx, &cid->sgid_index);

	if (ret)
		return ret;
	cid->id.verbs = cid->ctx;
	cid->id.pd = cm_dev_pd(cid->ctx); /* rdma-core: the device's PD (UCX uses it) */
	cid->id.port_num = 1;
	cid->dev_max_rd = cm_dev_max_rd(cid->ctx);
	if (ibv_query_port(cid->ctx, 1, &pa) == 0)
		cid->mtu = pa.active_mtu;
	else
		cid->mtu = IBV_MTU_1024;
	cm_gid_from_v4(&cid->id.route.addr.addr.ibaddr.sgid, a);
	cid->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
	return 0;
}

UROCE_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *cid = to_cid(id);
	struct sockaddr_in sin;
	int ret;

	if (!id)
		return cm_fail(EINVAL, "rdma_bind_addr: id is NULL");
	ret = cm_check_sockaddr(addr, "rdma_bind_addr");
	if (ret)
		return -1;
	memcpy(&sin, addr, sizeof(sin));
	pthread_mutex_lock(&cm.lock);
	if (cid->state != CM_IDLE) {
		pthread_mutex_unlock(&cm.lock);
		return cm_fail(EINVAL, "rdma_bind_addr: id is already bound");
	}
	if (sin.sin_addr.s_addr != INADDR_ANY) {
		ret = bind_dev(cid, sin.sin_addr);
		if (ret) {
			pthread_mutex_unlock(&cm.lock);
			ur_dbg("rdma_bind_addr: %s is not the address of a uroce device",
			       inet_ntoa(sin.sin_addr));
			return errno = -ret, -1;
		}
	}
	memcpy(&cid->id.route.addr.src_sin, &sin, sizeof(sin));
	cid->state = CM_ADDR_BOUND;
	pthread_mutex_unlock(&cm.lock);
	return 0;
}

/* The source address the routing table picks for dst. */
static int route_src(struct in_addr dst, struct in_addr *src)
{
	struct sockaddr_in d = {.sin_family = AF_INET, .sin_addr = dst, .sin_port = htons(4791)};
	struct sockaddr_in s;
	socklen_t sl = sizeof(s);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = 0;

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&d, sizeof(d)) ||
	    getsockname(fd, (struct sockaddr *)&s, &sl))
		ret = -errno;
	else
		*src = s.sin_addr;
	close(fd);
	return ret;
}

static void post_or_log(struct cm_id *cid, enum rdma_cm_event_type t, int status)
{
	struct cm_event *e = cm_event_new(cid, t, status);

	if (e)
		cm_event_post(cid->chan, e);
	else
		ur_err("rdma_cm: out of memory for an event");
}

UROCE_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				   struct sockaddr *dst_addr, int timeout_ms)
{
	struct cm_id *cid = to_cid(id);
	struct sockaddr_in dst, src = {.sin_family = AF_INET};
	int ret;

	(void)timeout_ms;
	if (!id)
		return cm_fail(EINVAL, "rdma_resolve_addr: id is NULL");
	if (cm_check_sockaddr(dst_addr, "rdma_resolve_addr"))
		return -1;
	if (src_addr && src_addr->sa_family != AF_UNSPEC &&
	    cm_check_sockaddr(src_addr, "rdma_resolve_addr"))
		return -1;
	memcpy(&dst, dst_addr, sizeof(dst));
	if (src_addr && src_addr->sa_family == AF_INET)
		memcpy(&src, src_addr, sizeof(src));
	pthread_mutex_lock(&cm.lock);
	if (cid->state != CM_IDLE && cid->state != CM_ADDR_BOUND) {
		pthread_mutex_unlock(&cm.lock);
		return cm_fail(EINVAL, "rdma_resolve_addr: id is not idle");
	}
	if (cid->state == CM_ADDR_BOUND && !src_addr)
		src = cid->id.route.addr.src_sin;
	if (src.sin_addr.s_addr == INADDR_ANY) {
		in_port_t port = src.sin_port;

		ret = route_src(dst.sin_addr, &src.sin_addr);
		src.sin_port = port;
		if (ret)
			goto unlock;
	}
	if (IN_MULTICAST(ntohl(dst.sin_addr.s_addr)) && ntohl(src.sin_addr.s_addr) >> 24 == 127)
		src.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ret = bind_dev(cid, src.sin_addr);
	if (ret) {
		ur_warn("rdma_resolve_addr: %s routes from %s, which no uroce device has "
			"(see `uroce devices`)",
			inet_ntoa(dst.sin_addr), inet_ntoa(src.sin_addr));
		goto unlock;
	}
	src.sin_family = AF_INET;
	memcpy(&cid->id.route.addr.src_sin, &src, sizeof(src));
	memcpy(&cid->id.route.addr.dst_sin, &dst, sizeof(dst));
	cm_gid_from_v4(&cid->id.route.addr.addr.ibaddr.dgid, dst.sin_addr);
	cid->remote_gid = cid->id.route.addr.addr.ibaddr.dgid;
	cid->state = CM_ADDR_RESOLVED;
	post_or_log(cid, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
unlock:
	pthread_mutex_unlock(&cm.lock);
	if (ret)
		return errno = -ret, -1;
	return cid->sync ? cm_sync_wait(cid, RDMA_CM_EVENT_ADDR_RESOLVED) : 0;
}

UROCE_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct cm_id *cid = to_cid(id);

	(void)timeout_ms;
	if (!id)
		return cm_fail(EINVAL, "rdma_resolve_route: id is NULL");
	pthread_mutex_lock(&cm.lock);
	if (cid->state != CM_ADDR_RESOLVED) {
		pthread_mutex_unlock(&cm.lock);
		return cm_fail(EINVAL, "rdma_resolve_route: the address is not resolved");
	}
	cid->state = CM_ROUTE_RESOLVED;
	cid->id.route.num_paths = 1;
	post_or_log(cid, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	pthread_mutex_unlock(&cm.lock);
	return cid->sync ? cm_sync_wait(cid, RDMA_CM_EVENT_ROUTE_RESOLVED) : 0;
}

UROCE_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? id->route.addr.src_sin.sin_port : 0;
}

UROCE_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? id->route.addr.dst_sin.sin_port : 0;
}

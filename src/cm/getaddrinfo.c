/* rdma_getaddrinfo / rdma_freeaddrinfo and the endpoint helpers
 * rdma_create_ep / rdma_destroy_ep.
 *
 * Names and services go through getaddrinfo(3) (RAI_NUMERICHOST ->
 * AI_NUMERICHOST, service names from /etc/services); only IPv4 results
 * are kept, since uroce's data path is IPv4.  RAI_PASSIVE names the local
 * address (the wildcard when node is NULL), otherwise node is the
 * destination and hints->ai_src_addr the optional source.
 */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"

static int lookup(const char *node, const char *service, bool passive, bool numeric,
		  struct sockaddr_in *out)
{
	struct addrinfo h = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *r;
	int ret;

	if (passive)
		h.ai_flags |= AI_PASSIVE;
	if (numeric)
		h.ai_flags |= AI_NUMERICHOST;
	ret = getaddrinfo(node, service, &h, &r);
	if (ret) {
		ur_dbg("rdma_getaddrinfo: %s:%s: %s", node ? node : "*", service ? service : "",
		       gai_strerror(ret));
		return ret == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
	}
	memcpy(out, r->ai_addr, sizeof(*out));
	freeaddrinfo(r);
	return 0;
}

static struct sockaddr *dup_sa(const struct sockaddr_in *sin)
{
	struct sockaddr_in *p = malloc(sizeof(*p));

	if (p)
		*p = *sin;
	return (struct sockaddr *)p;
}

/* Neither node nor service: the addresses are the hints' own (rdma-core
 * does the same; libfabric's verbs provider passes its fi_info addresses
 * this way). */
static int from_hints(const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	const struct sockaddr *src = hints->ai_src_len ? hints->ai_src_addr : NULL;
	const struct sockaddr *dst = hints->ai_dst_len ? hints->ai_dst_addr : NULL;
	struct rdma_addrinfo *ai;

	if ((src && cm_check_sockaddr(src, "rdma_getaddrinfo")) ||
	    (dst && cm_check_sockaddr(dst, "rdma_getaddrinfo")))
		return -1;
	if ((src && hints->ai_src_len < sizeof(struct sockaddr_in)) ||
	    (dst && hints->ai_dst_len < sizeof(struct sockaddr_in)))
		return cm_fail(EINVAL,
			       "rdma_getaddrinfo: a hint address is shorter than sockaddr_in");
	ai = calloc(1, sizeof(*ai));
	if (!ai)
		return errno = ENOMEM, -1;
	ai->ai_flags = hints->ai_flags;
	ai->ai_family = AF_INET;
	ai->ai_qp_type = hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
	ai->ai_port_space = hints->ai_port_space
				? hints->ai_port_space
				: (ai->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP);
	if (src) {
		ai->ai_src_addr = dup_sa((const struct sockaddr_in *)src);
		ai->ai_src_len = sizeof(struct sockaddr_in);
	}
	if (dst) {
		ai->ai_dst_addr = dup_sa((const struct sockaddr_in *)dst);
		ai->ai_dst_len = sizeof(struct sockaddr_in);
	}
	if ((src && !ai->ai_src_addr) || (dst && !ai->ai_dst_addr)) {
		rdma_freeaddrinfo(ai);
		return errno = ENOMEM, -1;
	}
	*res = ai;
	return 0;
}

UROCE_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				  const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *ai;
	struct sockaddr_in sin = {0};
	int flags = hints ? hints->ai_flags : 0;
	bool passive = flags & RAI_PASSIVE;
	int ret;

	if (res && !node && !service && hints && (hints->ai_src_len || hints->ai_dst_len))
		return from_hints(hints, res);
	if (!res || (!node && !service))
		return cm_fail(EINVAL, "rdma_getaddrinfo: need a node or a service");
	if (hints && hints->ai_family == AF_INET6) {
		ur_warn("rdma_getaddrinfo: IPv6 is not supported: uroce's data path is IPv4");
		return errno = EAFNOSUPPORT, -1;
	}
	ret = lookup(node, service, passive, flags & RAI_NUMERICHOST, &sin);
	if (ret)
		return errno = -ret, -1;
	ai = calloc(1, sizeof(*ai));
	if (!ai)
		return errno = ENOMEM, -1;
	ai->ai_flags = flags;
	ai->ai_family = AF_INET;
	ai->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
	ai->ai_port_space = hints && hints->ai_port_space
				? hints->ai_port_space
				: (ai->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP);
	if (passive) {
		ai->ai_src_addr = dup_sa(&sin);
		ai->ai_src_len = sizeof(sin);
	} else {
		ai->ai_dst_addr = dup_sa(&sin);
		ai->ai_dst_len = sizeof(sin);
		if (hints && hints->ai_src_addr && hints->ai_src_addr->sa_family == AF_INET) {
			ai->ai_src_addr = dup_sa((const struct sockaddr_in *)hints->ai_src_addr);
			ai->ai_src_len = sizeof(sin);
		}
	}
	if ((passive && !ai->ai_src_addr) || (!passive && !ai->ai_dst_addr)) {
		rdma_freeaddrinfo(ai);
		return errno = ENOMEM, -1;
	}
	if (node && !(flags & RAI_NUMERICHOST)) {
		char **canon = passive ? &ai->ai_src_canonname : &ai->ai_dst_canonname;

		*canon = strdup(node);
	}
	*res = ai;
	return 0;
}

UROCE_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *n = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = n;
	}
}

UROCE_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
				struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cmid;
	struct cm_id *cid;
	int err;

	if (!id || !res)
		return cm_fail(EINVAL, "rdma_create_ep: NULL argument");
	if (rdma_create_id(NULL, &cmid, NULL, (enum rdma_port_space)res->ai_port_space))
		return -1;
	cid = to_cid(cmid);
	if (res->ai_qp_type)
		cmid->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	if (res->ai_flags & RAI_PASSIVE) {
		if (rdma_bind_addr(cmid, res->ai_src_addr))
			goto fail;
		cid->ep_pd = pd;
		if (qp_init_attr) {
			qp_init_attr->qp_type = cmid->qp_type;
			cid->ep_qp_attr = *qp_init_attr;
			cid->ep_has_qp_attr = true;
		}
		*id = cmid;
		return 0;
	}
	if (rdma_resolve_addr(cmid, res->ai_src_addr, res->ai_dst_addr, 2000) ||
	    rdma_resolve_route(cmid, 2000))
		goto fail;
	if (qp_init_attr)
		qp_init_attr->qp_type = cmid->qp_type;
	if (qp_init_attr && rdma_create_qp(cmid, pd, qp_init_attr))
		goto fail;
	*id = cmid;
	return 0;
fail:
	err = errno;
	rdma_destroy_id(cmid);
	return errno = err, -1;
}

UROCE_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

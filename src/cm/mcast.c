/* Multicast joins over uroce's UD multicast.
 *
 * RoCEv2 maps an IPv4 group to the MGID ::ffff:a.b.c.d; a join attaches the
 * id's UD QP to it (uroce joins the IP group on its sockets) and reports
 * MULTICAST_JOIN with the address handle attributes, QPN 0xFFFFFF and the
 * rdma_cm Q_Key to send to the group.  A send-only join does not attach.
 * There is no SA: the join completes at once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"

static int join(struct rdma_cm_id *id, struct sockaddr *addr, bool send_only, void *context)
{
	struct cm_id *cid = to_cid(id);
	struct sockaddr_in sin;
	struct cm_mc *mc;
	struct cm_event *e;

	if (!id || cm_check_sockaddr(addr, "rdma_join_multicast"))
		return errno = errno ? errno : EINVAL, -1;
	memcpy(&sin, addr, sizeof(sin));
	if (!IN_MULTICAST(ntohl(sin.sin_addr.s_addr)))
		return cm_fail(EINVAL, "rdma_join_multicast: %s is not a multicast address",
			       inet_ntoa(sin.sin_addr));
	if (!id->verbs)
		return cm_fail(EINVAL, "rdma_join_multicast: resolve or bind an address first");
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return errno = ENOMEM, -1;
	mc->addr = sin;
	mc->context = context;
	cm_gid_from_v4(&mc->mgid, sin.sin_addr);
	if (!send_only && id->qp) {
		int ret = ibv_attach_mcast(id->qp, &mc->mgid, 0);

		if (ret) {
			free(mc);
			return errno = ret, -1;
		}
		mc->attached = true;
	}
	pthread_mutex_lock(&cm.lock);
	mc->next = cid->mcs;
	cid->mcs = mc;
	e = cm_event_new(cid, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
	if (e) {
		cm_ah_attr(cid, &mc->mgid, &e->ev.param.ud.ah_attr);
		e->ev.param.ud.qp_num = 0xffffff;
		e->ev.param.ud.qkey = RDMA_UDP_QKEY;
		e->ev.param.ud.private_data = context;
		cm_event_post(cid->chan, e);
	}
	pthread_mutex_unlock(&cm.lock);
	if (cid->sync)
		return cm_sync_wait(cid, RDMA_CM_EVENT_MULTICAST_JOIN);
	return 0;
}

UROCE_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return join(id, addr, false, context);
}

UROCE_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr,
					void *context)
{
	if (!attr || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
		return cm_fail(EINVAL, "rdma_join_multicast_ex: no address");
	if ((attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) &&
	    attr->join_flags > RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return cm_fail(EINVAL, "rdma_join_multicast_ex: unknown join flags");
	return join(id, attr->addr,
		    (attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) &&
			attr->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER,
		    context);
}

UROCE_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *cid = to_cid(id);
	struct cm_mc **pp, *mc = NULL;
	struct sockaddr_in sin;

	if (!id || cm_check_sockaddr(addr, "rdma_leave_multicast"))
		return errno = errno ? errno : EINVAL, -1;
	memcpy(&sin, addr, sizeof(sin));
	pthread_mutex_lock(&cm.lock);
	for (pp = &cid->mcs; *pp; pp = &(*pp)->next)
		if ((*pp)->addr.sin_addr.s_addr == sin.sin_addr.s_addr) {
			mc = *pp;
			*pp = mc->next;
			break;
		}
	pthread_mutex_unlock(&cm.lock);
	if (!mc)
		return errno = EADDRNOTAVAIL, -1;
	if (mc->attached && id->qp)
		ibv_detach_mcast(id->qp, &mc->mgid, 0);
	free(mc);
	return 0;
}

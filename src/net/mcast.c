/* UD multicast over IP multicast.
 *
 * A RoCEv2 multicast GID is an IP multicast address (IPv4: ::ffff:224.0.0.0/4).
 * Datagrams for a group carry the multicast QPN 0xFFFFFF and go to UDP port
 * 4791 at the group address.  Each context that has attached a QP opens one
 * socket bound to 4791 with SO_REUSEADDR (so every process on the host gets
 * its copy) and joins the groups on the device's interface; a received
 * datagram is handed to every QP attached to its group (IBTA 10.5.2).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uroce.h"

/* IPv4-mapped multicast GIDs (::ffff:224.0.0.0/4) are their group.  IPv6
 * (IB-style) multicast GIDs, ff00::/8 - what perftest and librdmacm use -
 * are carried on an IPv4 group too, since uroce's data path is IPv4: the
 * administratively scoped 239.x.y.z with x.y.z a hash of the GID.  Every
 * uroce peer maps a GID to the same group. */
bool uroce_gid_is_mcast(const union ibv_gid *gid, struct in_addr *group)
{
	static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	uint32_t h = 2166136261u;

	if (!memcmp(gid->raw, v4, 12)) {
		if ((gid->raw[12] & 0xf0) != 0xe0)
			return false;
		memcpy(&group->s_addr, &gid->raw[12], 4);
		return true;
	}
	if (gid->raw[0] != 0xff)
		return false;
	for (int i = 0; i < 16; i++)
		h = (h ^ gid->raw[i]) * 16777619u;
	group->s_addr = htonl(0xef000000u | (h & 0xffffffu));
	return true;
}

static int membership(struct uroce_ctx *ctx, struct in_addr group, bool join)
{
	struct ip_mreqn m = {.imr_multiaddr = group, .imr_ifindex = ctx->dev->ifindex};

	if (setsockopt(ctx->mcast_ep->fd, IPPROTO_IP, join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP,
		       &m, sizeof(m))) {
		ur_dbg("%s %s: %s", join ? "join" : "leave", inet_ntoa(group), strerror(errno));
		return errno;
	}
	return 0;
}

/* Open the 4791 socket once (ctx->lock held). */
static int mcast_ep_open(struct uroce_ctx *ctx)
{
	struct uroce_ep *ep;

	if (ctx->mcast_ep)
		return 0;
	if (ctx->nep >= (int)(sizeof(ctx->ep) / sizeof(ctx->ep[0])))
		return ENOMEM;
	/* Standard-port mode: the context's <addr>:4791 socket was bound
	 * exclusively (one owner per address); from now on it lets this
	 * wildcard socket share the port.  Unicast still reaches it: the
	 * kernel prefers the socket bound to the exact address. */
	for (int i = 0; i < ctx->nep; i++) {
		int one = 1;

		if (ctx->ep[i]->std)
			setsockopt(ctx->ep[i]->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	}
	ep = uroce_ep_open(ctx, (struct in_addr){INADDR_ANY}, UR_ROCE_PORT, true);
	if (!ep)
		return errno ? errno : ENOMEM;
	ep->nqp = UROCE_EP_SLOTS; /* never hands out QPNs */
	ctx->ep[ctx->nep] = ep;
	atomic_fetch_add(&ctx->nep, 1);
	ctx->mcast_ep = ep;
	return 0;
}

static bool group_used(struct uroce_ctx *ctx, struct in_addr g)
{
	for (int i = 0; i < ctx->nmcast; i++)
		if (ctx->mcast[i].group.s_addr == g.s_addr)
			return true;
	return false;
}

UROCE_EXPORT int ibv_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	struct uroce_qp *qp;
	struct uroce_ctx *ctx;
	struct in_addr g;
	int err = 0;

	(void)lid; /* RoCE: no LIDs */
	if (!ibqp || !gid)
		return EINVAL;
	if (ibqp->qp_type != IBV_QPT_UD)
		return ur_dbg("attach_mcast: only UD QPs join multicast groups"), EINVAL;
	if (!uroce_gid_is_mcast(gid, &g))
		return ur_dbg("attach_mcast: not a multicast GID (ff00::/8 or ::ffff:224.0.0.0/4)"),
		       EINVAL;
	qp = to_uqp(ibqp);
	ctx = qp->ctx;
	pthread_mutex_lock(&ctx->lock);
	pthread_mutex_lock(&ctx->mcast_lock);
	for (int i = 0; i < ctx->nmcast; i++)
		if (ctx->mcast[i].qp == qp && ctx->mcast[i].group.s_addr == g.s_addr)
			goto out; /* already attached: success, as the kernel does */
	err = mcast_ep_open(ctx);
	if (err)
		goto out;
	if (ctx->nmcast == ctx->mcast_cap) {
		int cap = ctx->mcast_cap ? ctx->mcast_cap * 2 : 8;
		void *n = realloc(ctx->mcast, (size_t)cap * sizeof(*ctx->mcast));

		if (!n) {
			err = ENOMEM;
			goto out;
		}
		ctx->mcast = n;
		ctx->mcast_cap = cap;
	}
	if (!group_used(ctx, g)) {
		err = membership(ctx, g, true);
		if (err)
			goto out;
	}
	ctx->mcast[ctx->nmcast++] = (struct uroce_mcast_att){.group = g, .qp = qp};
	ur_dbg("QP 0x%06x joined %s", ibqp->qp_num, inet_ntoa(g));
out:
	pthread_mutex_unlock(&ctx->mcast_lock);
	pthread_mutex_unlock(&ctx->lock);
	return err;
}

static int detach(struct uroce_qp *qp, struct in_addr g, bool any)
{
	struct uroce_ctx *ctx = qp->ctx;
	int found = 0;

	pthread_mutex_lock(&ctx->mcast_lock);
	for (int i = 0; i < ctx->nmcast;) {
		struct uroce_mcast_att a = ctx->mcast[i];

		if (a.qp != qp || (!any && a.group.s_addr != g.s_addr)) {
			i++;
			continue;
		}
		ctx->mcast[i] = ctx->mcast[--ctx->nmcast];
		found++;
		if (!group_used(ctx, a.group))
			membership(ctx, a.group, false);
	}
	pthread_mutex_unlock(&ctx->mcast_lock);
	return found;
}

UROCE_EXPORT int ibv_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	struct in_addr g;

	(void)lid;
	if (!ibqp || !gid)
		return EINVAL;
	if (!uroce_gid_is_mcast(gid, &g))
		return ur_dbg("detach_mcast: not a multicast GID"), EINVAL;
	if (!detach(to_uqp(ibqp), g, false))
		return ur_dbg("detach_mcast: QP 0x%06x is not attached", ibqp->qp_num), EINVAL;
	return 0;
}

void uroce_mcast_detach_all(struct uroce_qp *qp)
{
	detach(qp, (struct in_addr){0}, true);
}

void uroce_mcast_deliver(struct uroce_ctx *ctx, struct uroce_pkt *pkt,
			 const struct uroce_ipinfo *ip)
{
	pthread_mutex_lock(&ctx->mcast_lock);
	for (int i = 0; i < ctx->nmcast; i++) {
		struct uroce_qp *qp = ctx->mcast[i].qp;

		if (ctx->mcast[i].group.s_addr != ip->dst.v4.s_addr)
			continue;
		pthread_mutex_lock(&qp->lock);
		uroce_ud_rcv(qp, pkt, ip);
		pthread_mutex_unlock(&qp->lock);
	}
	pthread_mutex_unlock(&ctx->mcast_lock);
}

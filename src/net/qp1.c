/* QP1 in standard-port mode, for uroce's librdmacm.so.1 (docs/cm.md).
 *
 * In standard-port mode every RoCEv2 packet of an address arrives on the
 * context's <address>:4791 socket, CM MADs to QP1 included, and only one
 * socket can bind it.  uroce's librdmacm therefore reaches QP1 through two
 * private functions, exported in their own version node
 * (UROCE_CM_PRIVATE_1, src/libibverbs.map):
 *   uroce_cm_qp1_attach  open the context's 4791 endpoint and hand every
 *                        packet for QP1 (ICRC checked) to rx;
 *   uroce_cm_qp1_send    send a complete RoCEv2 packet (BTH..ICRC, built by
 *                        the CM for source and destination port 4791) from it.
 * Addresses are IPv4, network order.  rx runs in the receiving thread with
 * the endpoint's receive lock held: it must copy and return.
 */
#include <errno.h>

#include "uroce.h"
#include "uroce_export.h"

typedef void (*uroce_qp1_rx_fn)(void *arg, const uint8_t *pkt, size_t len, uint32_t src,
				uint32_t dst);

UROCE_EXPORT int uroce_cm_qp1_attach(struct ibv_context *ibctx, uroce_qp1_rx_fn rx, void *arg);
UROCE_EXPORT int uroce_cm_qp1_send(struct ibv_context *ibctx, uint32_t dst, const void *pkt,
				   size_t len);

int uroce_cm_qp1_attach(struct ibv_context *ibctx, uroce_qp1_rx_fn rx, void *arg)
{
	struct uroce_ctx *ctx = to_uctx(ibctx);
	struct uroce_ep *ep;

	if (!uroce_std_mode())
		return -EINVAL;
	pthread_mutex_lock(&ctx->lock);
	ep = uroce_ep_std(ctx);
	/* the progress thread reads the socket while no QP exists yet */
	if (ep && uroce_progress_start(ctx))
		ep = NULL;
	if (ep) {
		ctx->qp1_arg = arg;
		__atomic_store_n(&ctx->qp1_rx, rx, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&ctx->lock);
	return ep ? 0 : -(errno ? errno : EADDRINUSE);
}

int uroce_cm_qp1_send(struct ibv_context *ibctx, uint32_t dst, const void *pkt, size_t len)
{
	struct uroce_ctx *ctx = to_uctx(ibctx);
	struct uroce_ipinfo ip = {.family = AF_INET, .sport = 4791, .dport = 4791};
	struct uroce_ep *ep = NULL;
	int ret;

	for (int i = 0; i < ctx->nep && !ep; i++)
		if (ctx->ep[i]->std)
			ep = ctx->ep[i];
	if (!ep)
		return -ENOTCONN;
	ip.dst.v4.s_addr = dst;
	for (int i = 0; i < ctx->dev->ngid; i++)
		if (ctx->dev->gid[i].family == AF_INET) {
			ip.src.v4 = ctx->dev->gid[i].addr.v4;
			break;
		}
	ret = uroce_ep_xmit(ep, &ip, pkt, len);
	uroce_ep_flush(ep);
	return ret ? -EIO : 0;
}

bool uroce_qp1_deliver(struct uroce_ctx *ctx, const uint8_t *pkt, size_t len,
		       const struct uroce_ipinfo *ip)
{
	uroce_qp1_rx_fn rx = __atomic_load_n(&ctx->qp1_rx, __ATOMIC_ACQUIRE);

	if (!rx || ip->family != AF_INET)
		return false;
	rx(ctx->qp1_arg, pkt, len, ip->src.v4.s_addr, ip->dst.v4.s_addr);
	return true;
}

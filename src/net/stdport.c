/* Standard-port interop mode: UROCE_PORT_MODE=standard (docs/interop.md).
 *
 * Linux Soft-RoCE (rdma_rxe) and RoCE NICs send every RoCEv2 packet to UDP
 * port 4791 and find the QP from the BTH's destination QPN.  uroce's native
 * mode puts the UDP port into the QPN instead (docs/design.md), which such
 * a peer cannot reach.  In standard mode a context instead
 *
 *  - binds one UDP socket to <device IPv4 address>:4791, exclusively (no
 *    SO_REUSEADDR), so one process per address owns the port, exactly as
 *    one kernel rxe device per netdev does;
 *  - numbers its QPs itself: QPN = slot of that endpoint, 2..16385 (0 and 1
 *    are reserved as on InfiniBand, 0xFFFFFF is the multicast QPN);
 *  - sends every packet to port 4791 (uroce_qpn_dport()), from 4791;
 *  - accepts a received packet whose ICRC matches for some IPv4 ID, since
 *    the peer numbers its IDs and a UDP socket cannot see them
 *    (src/transport/icrc_ipid.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "uroce.h"

static int std_mode = -1;
static pthread_once_t std_once = PTHREAD_ONCE_INIT;

static void std_mode_init(void)
{
	const char *v = getenv("UROCE_PORT_MODE");
	int m = 0;

	if (v && *v) {
		if (!strcasecmp(v, "standard") || !strcmp(v, "4791"))
			m = 1;
		else if (strcasecmp(v, "native"))
			ur_err("UROCE_PORT_MODE=%s: expected 'native' (the default) or 'standard'; "
			       "using native",
			       v);
	}
	if (m)
		ur_info("standard-port mode: every packet to UDP 4791, received on "
			"<device address>:4791");
	__atomic_store_n(&std_mode, m, __ATOMIC_RELEASE);
}

bool uroce_std_mode(void)
{
	int m = __atomic_load_n(&std_mode, __ATOMIC_ACQUIRE);

	if (__builtin_expect(m < 0, 0)) {
		pthread_once(&std_once, std_mode_init);
		m = __atomic_load_n(&std_mode, __ATOMIC_ACQUIRE);
	}
	return m;
}

/* The address the device receives on: its first IPv4 GID (GID index 0). */
static bool std_addr(const struct uroce_dev *d, struct in_addr *a)
{
	for (int i = 0; i < d->ngid; i++)
		if (d->gid[i].family == AF_INET) {
			*a = d->gid[i].addr.v4;
			return true;
		}
	return false;
}

struct uroce_ep *uroce_std_ep_open(struct uroce_ctx *ctx)
{
	const char *dev = ctx->dev->ibdev.name;
	char a[INET_ADDRSTRLEN] = "?";
	struct in_addr addr;
	struct uroce_ep *ep = NULL;
	bool first = !ctx->std_err;
	int err;

	if (!std_addr(ctx->dev, &addr)) {
		err = EADDRNOTAVAIL;
		if (first)
			ur_err("%s: standard-port mode (UROCE_PORT_MODE) receives on <IPv4 "
			       "address>:4791, but interface %s has no IPv4 address",
			       dev, ctx->dev->ifname);
		goto fail;
	}
	inet_ntop(AF_INET, &addr, a, sizeof(a));
	ep = uroce_ep_open_std(ctx, addr, &err);
	if (ep) {
		ur_info("%s: standard-port mode: receiving on UDP %s:4791", dev, a);
		ctx->std_err = 0;
		return ep;
	}
	if (!err)
		err = errno ? errno : ENOMEM; /* not the bind: logged by the endpoint */
	else if (!first)
		ur_dbg("%s: UDP 4791 on %s: %s (reported above)", dev, a, strerror(err));
	else if (err == EADDRINUSE)
		ur_err("%s: UDP 4791 on %s is in use (another uroce process or the kernel's "
		       "rdma_rxe); unset UROCE_PORT_MODE or use another address",
		       dev, a);
	else if (err == EADDRNOTAVAIL)
		ur_err("%s: cannot bind UDP 4791 on %s: the address is no longer on %s", dev, a,
		       ctx->dev->ifname);
	else
		ur_err("%s: cannot bind UDP 4791 on %s: %s", dev, a, strerror(err));
fail:
	ctx->std_err = err;
	errno = err;
	return NULL;
}

/* The small calls: event names, options, ECE. */
#include <errno.h>
#include <string.h>

#include "cm.h"

UROCE_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
	    [RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
	    [RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
	    [RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
	    [RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
	    [RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
	    [RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
	    [RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
	    [RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
	    [RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
	    [RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
	    [RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
	    [RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
	    [RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
	    [RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
	    [RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
	    [RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	if ((unsigned)event < sizeof(names) / sizeof(names[0]) && names[event])
		return names[event];
	return "UNKNOWN EVENT";
}

UROCE_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
				 size_t optlen)
{
	struct cm_id *cid = to_cid(id);

	if (!id || !optval)
		return cm_fail(EINVAL, "rdma_set_option: NULL argument");
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
			if (optlen != sizeof(uint8_t))
				break;
			cid->tos = *(uint8_t *)optval;
			return 0;
		case RDMA_OPTION_ID_REUSEADDR:
			if (optlen != sizeof(int))
				break;
			cid->reuseaddr = *(int *)optval != 0;
			return 0;
		case RDMA_OPTION_ID_AFONLY:
			return optlen == sizeof(int) ? 0 : (errno = EINVAL, -1);
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != sizeof(uint8_t))
				break;
			cid->ack_timeout = *(uint8_t *)optval > 31 ? 31 : *(uint8_t *)optval;
			return 0;
		default:
			return cm_fail(ENOSYS, "rdma_set_option: option %d unknown", optname);
		}
		return cm_fail(EINVAL, "rdma_set_option: option %d: wrong length %zu", optname,
			       optlen);
	}
	if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH)
		return 0; /* RoCE: the route is the IP route, nothing to set */
	return cm_fail(ENOSYS, "rdma_set_option: level %d option %d not supported", level, optname);
}

UROCE_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || !ece)
		return cm_fail(EINVAL, "rdma_set_local_ece: NULL argument");
	to_cid(id)->local_ece = *ece;
	return 0;
}

UROCE_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || !ece)
		return cm_fail(EINVAL, "rdma_get_remote_ece: NULL argument");
	*ece = to_cid(id)->remote_ece;
	return 0;
}

/* Asynchronous events: a pipe per context.  context.async_fd is its read end,
 * so the fd polls readable exactly when ibv_get_async_event has an event. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "uroce.h"

struct uroce_async_rec {
	uint32_t type;
	uint32_t port;
	void *obj;
};

void uroce_async_event(struct uroce_ctx *ctx, enum ibv_event_type type, void *obj)
{
	struct uroce_async_rec r = { .type = (uint32_t)type, .port = 1, .obj = obj };

	pthread_mutex_lock(&ctx->async_lock);
	if (write(ctx->async_wr_fd, &r, sizeof(r)) != sizeof(r))
		ur_warn("async event queue full: %s lost", ibv_event_type_str(type));
	pthread_mutex_unlock(&ctx->async_lock);
	ur_dbg("async event %s", ibv_event_type_str(type));
}

UROCE_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct uroce_async_rec r;

	if (!context || !event) {
		ur_dbg("get_async_event: context and event must not be NULL");
		errno = EINVAL;
		return -1;
	}
	if (read(context->async_fd, &r, sizeof(r)) != sizeof(r))
		return -1;
	memset(event, 0, sizeof(*event));
	event->event_type = (enum ibv_event_type)r.type;
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR:
		event->element.cq = ibv_cq_ex_to_cq((struct ibv_cq_ex *)r.obj);
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		event->element.qp = r.obj;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		event->element.srq = r.obj;
		break;
	default:
		event->element.port_num = (int)r.port;
		break;
	}
	return 0;
}

UROCE_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	struct ibv_qp *qp;
	struct ibv_cq *cq;

	if (!event)
		return;
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR:
		cq = event->element.cq;
		pthread_mutex_lock(&cq->mutex);
		cq->async_events_completed++;
		pthread_cond_signal(&cq->cond);
		pthread_mutex_unlock(&cq->mutex);
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		qp = event->element.qp;
		pthread_mutex_lock(&qp->mutex);
		qp->events_completed++;
		pthread_cond_signal(&qp->cond);
		pthread_mutex_unlock(&qp->mutex);
		break;
	default:
		break;
	}
}

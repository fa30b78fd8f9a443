/* Asynchronous events: a pipe per context.  context.async_fd is its read end,
 * so the fd polls readable exactly when ibv_get_async_event has an event. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uroce.h"

struct uroce_async_rec {
	uint32_t type;
	uint32_t port;
	void *obj;
};

static bool is_qp_event(enum ibv_event_type type)
{
	switch (type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return true;
	default:
		return false;
	}
}

void uroce_async_event(struct uroce_ctx *ctx, enum ibv_event_type type, void *obj)
{
	struct uroce_async_rec r = {.type = (uint32_t)type, .port = 1, .obj = obj};

	pthread_mutex_lock(&ctx->async_lock);
	if (write(ctx->async_wr_fd, &r, sizeof(r)) != sizeof(r))
		ur_warn("async event queue full: %s lost", ibv_event_type_str(type));
	else if (is_qp_event(type))
		to_uqp(obj)->async_queued++;
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
	for (;;) {
		struct uroce_ctx *ctx = to_uctx(context);
		struct uroce_qp *qp, **pp;
		bool dead;

		if (read(context->async_fd, &r, sizeof(r)) != sizeof(r))
			return -1;
		if (!is_qp_event((enum ibv_event_type)r.type))
			break;
		/* handed out: ibv_destroy_qp waits for its ack */
		qp = to_uqp(r.obj);
		pthread_mutex_lock(&ctx->async_lock);
		qp->async_read++;
		dead = qp->async_dead;
		if (dead && qp->async_read == qp->async_queued) {
			for (pp = &ctx->async_zombies; *pp != qp; pp = &(*pp)->async_next)
				;
			*pp = qp->async_next;
			free(qp);
		}
		pthread_mutex_unlock(&ctx->async_lock);
		if (!dead)
			break;
		/* as the kernel does, an event of a destroyed QP is not handed out */
	}
	memset(event, 0, sizeof(*event));
	event->event_type = (enum ibv_event_type)r.type;
	if (is_qp_event(event->event_type))
		event->element.qp = r.obj;
	else if (event->event_type == IBV_EVENT_CQ_ERR)
		event->element.cq = ibv_cq_ex_to_cq((struct ibv_cq_ex *)r.obj);
	else if (event->event_type == IBV_EVENT_SRQ_ERR ||
		 event->event_type == IBV_EVENT_SRQ_LIMIT_REACHED)
		event->element.srq = r.obj;
	else
		event->element.port_num = (int)r.port;
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

/*
 * ibv_destroy_qp's part, as rdma-core's: the kernel reports how many events
 * of the QP were read, and destroy waits until as many are acked.  UCX's
 * async thread may hold a QP_LAST_WQE_REACHED while the main thread
 * destroys the QP, and ack it afterwards: the QP must still be there.
 */
void uroce_async_qp_wait_acks(struct uroce_qp *qp)
{
	struct ibv_qp *b = &qp->ibqp.qp_base;
	uint32_t n;

	pthread_mutex_lock(&qp->ctx->async_lock);
	n = qp->async_read;
	pthread_mutex_unlock(&qp->ctx->async_lock);
	pthread_mutex_lock(&b->mutex);
	while (b->events_completed < n)
		pthread_cond_wait(&b->cond, &b->mutex);
	pthread_mutex_unlock(&b->mutex);
}

/* Once the QP's resources are gone: true if its struct must stay because
 * events naming it are still queued (the reader frees it), false if the
 * caller frees it now. */
bool uroce_async_qp_retire(struct uroce_qp *qp)
{
	struct uroce_ctx *ctx = qp->ctx;
	bool keep;

	pthread_mutex_lock(&ctx->async_lock);
	keep = qp->async_read != qp->async_queued;
	if (keep) {
		qp->async_dead = true;
		qp->async_next = ctx->async_zombies;
		ctx->async_zombies = qp;
	}
	pthread_mutex_unlock(&ctx->async_lock);
	return keep;
}

/* ibv_close_device: the events nobody read go with the queue. */
void uroce_async_free_zombies(struct uroce_ctx *ctx)
{
	while (ctx->async_zombies) {
		struct uroce_qp *qp = ctx->async_zombies;

		ctx->async_zombies = qp->async_next;
		free(qp);
	}
}

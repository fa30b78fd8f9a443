/* Async events and QP lifetime, as rdma-core: ibv_destroy_qp waits until
 * every event of the QP that ibv_get_async_event handed out is acked (UCX's
 * async thread acks a QP_LAST_WQE_REACHED after its main thread destroyed
 * the QP), and an event still queued for a destroyed QP is not handed out.
 * A QP on an SRQ moved to ERR raises QP_LAST_WQE_REACHED (qp.c).
 */
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "ext_loop.h"

static struct ibv_qp *srq_qp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .srq = srq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_send_sge = 1},
	};

	return ibv_create_qp(pd, &ia);
}

static int to_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};

	return ibv_modify_qp(qp, &init,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				 IBV_QP_ACCESS_FLAGS) ||
	       ibv_modify_qp(qp, &err, IBV_QP_STATE);
}

/* The next QP event (port events, which some builds raise at open, skipped). */
static int next_qp_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	for (;;) {
		if (ibv_get_async_event(ctx, ev))
			return -1;
		if (ev->event_type != IBV_EVENT_PORT_ACTIVE && ev->event_type != IBV_EVENT_PORT_ERR)
			return 0;
		ibv_ack_async_event(ev);
	}
}

struct destroyer {
	struct ibv_qp *qp;
	volatile int done;
	int ret;
};

static void *destroy_thread(void *arg)
{
	struct destroyer *d = arg;

	d->ret = ibv_destroy_qp(d->qp);
	d->done = 1;
	return NULL;
}

int main(void)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	struct ibv_async_event ev;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *a, *b, *c;
	struct destroyer d = {0};
	pthread_t t;

	if (!ctx)
		return 1;
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	srq = ibv_create_srq(pd, &sa);
	CHECK(pd && cq && srq, "setup");
	if (!pd || !cq || !srq)
		return finish("test_async_life");
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);

	/* 1. an event handed out and not yet acked: destroy waits for the ack */
	a = srq_qp(pd, cq, srq);
	CHECK(a && !to_err(a), "QP on the SRQ to ERR");
	CHECK(!next_qp_event(ctx, &ev), "an event is queued");
	CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == a,
	      "QP_LAST_WQE_REACHED of that QP (got %d)", ev.event_type);
	d.qp = a;
	CHECK(!pthread_create(&t, NULL, destroy_thread, &d), "thread");
	usleep(200 * 1000);
	CHECK(!d.done, "ibv_destroy_qp returned before the event was acked");
	ibv_ack_async_event(&ev); /* the QP is still there to be acked */
	pthread_join(t, NULL);
	CHECK(d.done && d.ret == 0, "ibv_destroy_qp returns 0 after the ack (%d)", d.ret);

	/* 2. an event queued for a destroyed QP is not handed out; the next is */
	b = srq_qp(pd, cq, srq);
	c = srq_qp(pd, cq, srq);
	CHECK(b && c && !to_err(b) && !to_err(c), "two QPs to ERR");
	CHECK(!ibv_destroy_qp(b), "destroy b with its event unread");
	CHECK(!next_qp_event(ctx, &ev), "c's event comes");
	CHECK(ev.element.qp == c, "the event is c's, not the destroyed b's");
	ibv_ack_async_event(&ev);
	errno = 0;
	CHECK(next_qp_event(ctx, &ev) == -1 && errno == EAGAIN, "no more events");
	CHECK(!ibv_destroy_qp(c), "destroy c");

	/* 3. a destroyed QP's unread event at close: freed with the context */
	b = srq_qp(pd, cq, srq);
	CHECK(b && !to_err(b) && !ibv_destroy_qp(b), "a third QP, destroyed unread");

	CHECK(!ibv_destroy_srq(srq) && !ibv_destroy_cq(cq) && !ibv_dealloc_pd(pd), "teardown");
	CHECK(!ibv_close_device(ctx), "close");
	return finish("test_async_life");
}

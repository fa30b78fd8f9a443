/* What the progress thread takes for an application that polls
 * (ctx->app_poll_ns, src/core/progress.c, src/verbs/cq.c):
 *   - an ibv_poll_cq of an empty CQ stamps it, an ibv_post_send does not;
 *   - ibv_req_notify_cq and ibv_get_cq_event (the application is about to
 *     sleep until an event) clear it, and a poll of an armed CQ (the last
 *     look before that sleep) does not stamp it.
 * And the traffic still completes, with the data intact.
 */
#include <fcntl.h>

#include "rc_harness.h"

static struct harness H;
#define A (&H.s[0])
#define B (&H.s[1])

static uint64_t stamp(void)
{
	return atomic_load(&to_uctx(B->ctx)->app_poll_ns);
}

static void post1(struct side *s, bool send, uint64_t id, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + off, .length = len, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_recv_wr rwr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *rbad;

	if (send)
		CHECK(ibv_post_send(s->qp, &wr, &bad) == 0, "post_send");
	else
		CHECK(ibv_post_recv(s->qp, &rwr, &rbad) == 0, "post_recv");
}

/* Wait, without polling it, until cq holds a completion (the progress
 * thread queues it); bounded. */
static bool queued(struct ibv_cq *cq)
{
	for (int i = 0; i < 5000; i++) {
		if (__atomic_load_n(&to_ucq(cq)->count, __ATOMIC_RELAXED))
			return true;
		usleep(1000);
	}
	return false;
}

static void test_stamps(void)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(B->ctx);
	struct ibv_cq *ecq = ch ? ibv_create_cq(B->ctx, 16, NULL, ch, 0) : NULL;
	struct ibv_cq *evcq;
	struct ibv_wc wc;
	void *evctx;
	uint64_t t;

	CHECK(ch && ecq, "channel and CQ: %s", strerror(errno));
	if (!ch || !ecq)
		goto out;
	CHECK(ibv_poll_cq(B->rcq, 1, &wc) == 0 && stamp() != 0, "an empty poll stamps");
	CHECK(ibv_req_notify_cq(ecq, 0) == 0 && stamp() == 0, "req_notify_cq clears the stamp");
	CHECK(ibv_poll_cq(ecq, 1, &wc) == 0 && stamp() == 0,
	      "a poll of an armed CQ does not stamp");

	/* B sends to A with no poll before it: the post starts no burst */
	memset(B->buf, 0x5a, 64);
	post1(A, false, 7, 0, 4096);
	post1(B, true, 8, 0, 64);
	CHECK(stamp() == 0, "a post alone does not stamp");
	CHECK(wait_wc(A->rcq, &wc, 1, 5000) == 0 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 &&
		  wc.byte_len == 64 && A->buf[0] == 0x5a && A->buf[63] == 0x5a,
	      "A receives the SEND intact");
	/* B's progress thread, not B, reads the ACK: the completion is queued */
	CHECK(queued(B->scq), "B's SEND completes without B polling");
	CHECK(stamp() == 0, "nothing stamped meanwhile");
	CHECK(ibv_poll_cq(B->scq, 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 8,
	      "B's send completion");
	CHECK(ibv_poll_cq(B->rcq, 1, &wc) == 0 && (t = stamp()) != 0, "an empty poll stamps");

	/* a post does not stamp */
	post1(A, false, 9, 0, 4096);
	post1(B, true, 10, 0, 64);
	CHECK(stamp() == t, "a post does not stamp");
	CHECK(wait_wc(A->rcq, &wc, 1, 5000) == 0 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9,
	      "A receives the second SEND");
	CHECK(wait_wc(B->scq, &wc, 1, 5000) == 0 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 10,
	      "B's second send completion");

	/* ibv_get_cq_event: the application sleeps in it (here: would) */
	CHECK(stamp() != 0, "stamped by the polls");
	CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0, "O_NONBLOCK");
	CHECK(ibv_get_cq_event(ch, &evcq, &evctx) == -1 && errno == EAGAIN, "no event yet");
	CHECK(stamp() == 0, "ibv_get_cq_event clears the stamp");
out:
	if (ecq)
		ibv_destroy_cq(ecq);
	if (ch)
		ibv_destroy_comp_channel(ch);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	unsetenv("UROCE_FAULT");
	if (harness_open(&H)) {
		printf("0 passed, 1 failed\n");
		return 1;
	}
	H.o = default_opts(IBV_MTU_1024);
	if (pair_create(&H, &H.o)) {
		CHECK(0, "pair");
	} else {
		test_stamps();
	}
	harness_close(&H);
	return finish("test_appsleep");
}

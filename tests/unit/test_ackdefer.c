/* ACK deferral (src/net/endpoint.c): an application thread that reads a
 * SEND in ibv_poll_cq leaves its ACK owed, and the ACK still goes out by
 * every way the responder can leave its verbs calls:
 *   - the progress engine's grace slice, when the application goes quiet;
 *   - the next ibv_post_send, in the same batch as the request;
 *   - ibv_poll_cq on empty CQs for 20 us, ibv_req_notify_cq, ibv_modify_qp
 *     to ERR, ibv_destroy_qp;
 *   - exit() without closing anything (a forked responder).
 * With its progress engine stopped, the responder is shown to really defer
 * (nothing reaches the requester until one of those calls), and the
 * requester's SEND completes successfully after each one, with one ACK
 * counted per message.
 */
#include <poll.h>
#include <sys/wait.h>

#include "rc_harness.h"

static struct harness H;
#define A (&H.s[0])
#define B (&H.s[1])

static void post_send1(struct side *s, uint64_t id, uint32_t len)
{
	CHECK(!harness_send1(s, id, len), "post_send");
}

static void post_recv1(struct side *s, uint64_t id)
{
	CHECK(!harness_recv1(s, id, 65536), "post_recv");
}

/* Poll cq until it yields one completion (a successful one for wr_id). */
static bool got_wc(struct ibv_cq *cq, uint64_t id, int timeout_ms, const char *what)
{
	struct ibv_wc wc;

	if (wait_wc(cq, &wc, 1, timeout_ms)) {
		printf("  %s: no completion in %d ms\n", what, timeout_ms);
		return false;
	}
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id) {
		printf("  %s: %s, wr_id %llu\n", what, ibv_wc_status_str(wc.status),
		       (unsigned long long)wc.wr_id);
		return false;
	}
	return true;
}

/* The requester's socket may only be drained by polling A: look at A's CQ
 * without calling any verb on B for ms milliseconds. */
static bool a_completes_within(int ms, uint64_t id)
{
	return got_wc(A->scq, id, ms, "requester");
}

/* B receives one SEND from A in ibv_poll_cq and so owes the ACK. */
static void b_receives(uint64_t id)
{
	post_recv1(B, id);
	post_send1(A, id, 100);
	CHECK(got_wc(B->rcq, id, WAIT_MS, "responder"), "B receives SEND %llu",
	      (unsigned long long)id);
}

static void test_progress_engine(void)
{
	uint64_t acks0 = CNT(&H, 1, acks_tx), dups0 = CNT(&H, 1, dup_req);

	pair_create(&H, &H.o);
	/* B then makes no verbs call at all: its progress engine sends it */
	b_receives(1);
	CHECK(a_completes_within(2000, 1), "progress engine sends the owed ACK");
	/* one ACK - and up to one more per duplicate, should A's retransmission
	 * probe have resent the SEND while B's thread was descheduled (a
	 * duplicate that arrives while the first ACK is still owed is answered
	 * by that one ACK: seen under load, with the library before and after
	 * the progress changes) */
	CHECK(CNT(&H, 1, acks_tx) - acks0 >= 1 &&
		  CNT(&H, 1, acks_tx) - acks0 <= 1 + CNT(&H, 1, dup_req) - dups0,
	      "one ACK: %llu (%llu duplicates)", (unsigned long long)(CNT(&H, 1, acks_tx) - acks0),
	      (unsigned long long)(CNT(&H, 1, dup_req) - dups0));
}

/* With B's progress engine stopped, only B's own calls send the ACK. */
static void test_flush_points(void)
{
	struct uroce_ctx *bctx = to_uctx(B->ctx);
	struct ibv_comp_channel *ch;
	struct ibv_cq *ncq;
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};
	uint64_t acks0;
	struct ibv_wc wc;

	pair_create(&H, &H.o);
	uroce_progress_stop(bctx);

	/* deferred for real: no ACK while B does nothing */
	acks0 = CNT(&H, 1, acks_tx);
	b_receives(10);
	CHECK(CNT(&H, 1, acks_tx) == acks0, "the ACK waits while B is busy elsewhere");
	CHECK(!got_wc(A->scq, 10, 20, "requester (expected to wait)"), "A waits for the ACK");

	/* polling an empty CQ for a while (20 us) sends it */
	{
		uint64_t end = now_ms() + 5;

		while (now_ms() < end)
			CHECK(ibv_poll_cq(B->rcq, 1, &wc) == 0, "B's CQ is empty");
	}
	CHECK(a_completes_within(2000, 10), "empty polls send the ACK");

	/* a post carries it: B's reply and the ACK in one batch */
	b_receives(11);
	post_recv1(A, 12);
	post_send1(B, 12, 64);
	CHECK(a_completes_within(2000, 11), "the reply's post sends the ACK");
	CHECK(got_wc(A->rcq, 12, 2000, "A's receive"), "A receives the reply");
	/* (A owes B the reply's ACK: A's progress engine sends it) */
	CHECK(got_wc(B->scq, 12, 2000, "B's reply"), "B's reply completes");

	/* ibv_req_notify_cq: the application is about to sleep */
	ch = ibv_create_comp_channel(B->ctx);
	ncq = ch ? ibv_create_cq(B->ctx, 16, NULL, ch, 0) : NULL;
	CHECK(ncq != NULL, "CQ with a channel");
	b_receives(13);
	if (ncq) {
		CHECK(ibv_req_notify_cq(ncq, 0) == 0, "req_notify_cq");
		CHECK(a_completes_within(2000, 13), "req_notify_cq sends the ACK");
		ibv_destroy_cq(ncq);
	}
	if (ch)
		ibv_destroy_comp_channel(ch);

	/* modify to ERR: the messages before it were completed and are owed */
	b_receives(14);
	CHECK(ibv_modify_qp(B->qp, &qa, IBV_QP_STATE) == 0, "B to ERR");
	CHECK(a_completes_within(2000, 14), "modify to ERR sends the ACK");

	/* destroy_qp (creating a QP starts the engine again: stop it) */
	pair_create(&H, &H.o);
	uroce_progress_stop(bctx);
	b_receives(15);
	CHECK(ibv_destroy_qp(B->qp) == 0, "destroy B's QP");
	B->qp = NULL;
	CHECK(a_completes_within(2000, 15), "destroy_qp sends the ACK");
}

/* A 64 KiB SEND at MTU 1024 is 64 packets: read in B's polls, its ACK
 * still waits for B's reply (UROCE_ACK_DEFER_PKTS, endpoint.c) - acknowledged
 * at once, A's send completed before the reply came, and ib_write_lat's peer
 * then left it to its progress thread's look (docs/latency.md, "Session
 * 21").  A round whose packets B read 8 datagrams at a time (A or B
 * descheduled meanwhile: a stream's batch, acknowledged at once by design)
 * shows nothing; with a bound of 64 no round can wait, so up to 5 are run
 * until one does. */
static void test_long_message(void)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)B->buf + 65536, .length = 65536, .lkey = B->mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;
	bool waited = false;

	/* A's whole window at once: not slow start's 16 packets, whose ACKs
	 * B's 20 us rule would send while the rest waits */
	setenv("UROCE_CC", "0", 1);
	pair_create(&H, &H.o);
	unsetenv("UROCE_CC");
	uroce_progress_stop(to_uctx(B->ctx));
	/* one message acknowledged first (the bound counts from B's last ACK) */
	b_receives(29);
	post_recv1(A, 29);
	post_send1(B, 29, 64);
	CHECK(a_completes_within(2000, 29) && got_wc(A->rcq, 29, 2000, "A's receive") &&
		  got_wc(B->scq, 29, 2000, "B's reply"),
	      "a first exchange");
	for (uint64_t id = 30; id < 40 && !waited; id += 2) {
		wr.wr_id = id;
		CHECK(!ibv_post_recv(B->qp, &wr, &bad), "post_recv 64 KiB");
		post_send1(A, id, 65536);
		CHECK(got_wc(B->rcq, id, WAIT_MS, "responder"), "B receives the 64-packet SEND");
		waited = !got_wc(A->scq, id, 20, "requester (expected to wait)");
		post_recv1(A, id + 1);
		post_send1(B, id + 1, 64);
		if (waited)
			CHECK(a_completes_within(2000, id), "the reply's post sends the ACK");
		CHECK(got_wc(A->rcq, id + 1, 2000, "A's receive"), "A receives the reply");
		CHECK(got_wc(B->scq, id + 1, 2000, "B's reply"), "B's reply completes");
	}
	CHECK(waited, "the last packet's ACK waits while B is busy elsewhere (5 rounds)");
}

/* A responder process that exits as soon as it has its completion. */
static void test_exit(void)
{
	int go[2], status = -1;
	pid_t pid;
	char c;

	pair_create(&H, &H.o);
	/* the child alone reads B's socket: B's engine stops before the fork */
	uroce_progress_stop(to_uctx(B->ctx));
	post_recv1(B, 20);
	if (pipe(go)) {
		CHECK(0, "pipe: %s", strerror(errno));
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		/* the child is B (its QP, socket and memory are inherited) */
		struct ibv_wc wc;

		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		while (ibv_poll_cq(B->rcq, 1, &wc) == 0)
			;
		exit(wc.status == IBV_WC_SUCCESS ? 0 : 3); /* no close, no destroy */
	}
	close(go[0]);
	if (write(go[1], "g", 1) != 1)
		CHECK(0, "pipe write");
	post_send1(A, 20, 100);
	CHECK(a_completes_within(5000, 20), "a responder that exits still ACKs");
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status 0x%x", status);
	close(go[1]);
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
	/* 268 ms: longer than the cases wait for an ACK not to come; few
	 * retries, so an ACK lost for good fails the case */
	H.o.timeout = 16;
	H.o.retry_cnt = 3;
	test_progress_engine();
	test_flush_points();
	test_long_message();
	test_exit();
	harness_close(&H);
	return finish("test_ackdefer");
}

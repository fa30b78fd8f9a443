/* A poller's pause does not strand data (grace_look, src/core/progress.c).
 *
 * While an application polls its CQs without pauses the progress thread
 * keeps out of its way, for 2 ms after the last poll once the polls have
 * come close for 1 ms.  An application may stop polling inside that time
 * and wait for data elsewhere - ib_write_lat spins on memory for the peer's
 * WRITE, which calls no verb - and the packets that then arrive used to lie
 * in the socket until the 2 ms were over (across veth: 2.2-4.2 ms per
 * iteration).  Here B is such an application, its polls kept continuous
 * and its last one always 300 us old (over UROCE_APP_POLL_GAP_NS, inside
 * the grace): A's WRITEs must land in B's memory with B calling no verb,
 * read by B's progress thread, and A's WRITEs must complete.  Before the
 * fix nothing read B's socket while the stamp stayed inside the grace.
 * Over UDP (the same-host wire off: the issue is the sockets).
 */
#include "rc_harness.h"

static struct harness H;
#define A (&H.s[0])
#define B (&H.s[1])

#define STALE_NS  300000ull   /* the last poll's age: over the gap, inside the grace */
#define MSG_BYTES (16u << 10) /* 16 packets at MTU 1024 */
#define OFF	  65536u
#define ROUNDS	  3

/* B is a continuous poller that paused STALE_NS ago (what cq.c's
 * uroce_app_active would have left) */
static void stale_stamp(void)
{
	struct uroce_ctx *ctx = to_uctx(B->ctx);
	uint64_t now = uroce_now_ns();

	atomic_store(&ctx->app_burst_ns, now - 100000000ull);
	atomic_store(&ctx->app_poll_ns, now - STALE_NS);
}

/* Spin on B's memory, as ib_write_lat does, keeping the stamp stale;
 * bounded (a hang guard, not a timing check). */
static bool landed(const uint8_t *p, uint8_t v)
{
	for (int i = 0; i < 50000; i++) {
		stale_stamp();
		if (__atomic_load_n(p, __ATOMIC_ACQUIRE) == v)
			return true;
		usleep(20);
	}
	return false;
}

/* Put B's thread in the grace: woken out of a sleep on the sockets (where
 * it went when the stamp aged past the grace between rounds), it finishes
 * what it was doing (its spin after the last round's traffic reads the
 * sockets anyway) and then, the stamp stale, waits out of B's way. */
static void settle(void)
{
	stale_stamp();
	uroce_progress_wake(to_uctx(B->ctx));
	for (int i = 0; i < 100; i++) {
		stale_stamp();
		usleep(50);
	}
	stale_stamp();
}

static void test_pause(void)
{
	uint64_t looks0 = CNT(&H, 1, prog_grace_looks);

	for (int r = 0; r < ROUNDS; r++) {
		uint8_t v = (uint8_t)(0xa1 + r);
		struct ibv_sge sge = {
		    .addr = (uintptr_t)A->buf, .length = MSG_BYTES, .lkey = A->mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 100u + (unsigned)r,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED,
					 .wr.rdma = {.remote_addr = (uintptr_t)B->buf + OFF,
						     .rkey = B->mr->rkey}},
				   *bad;
		struct ibv_wc wc;
		uint8_t *dst = B->buf + OFF;

		memset(A->buf, v, MSG_BYTES);
		settle();
		CHECK(ibv_post_send(A->qp, &wr, &bad) == 0, "post WRITE %d", r);
		/* the last byte: the WRITE's last packet */
		CHECK(landed(dst + MSG_BYTES - 1, v), "round %d: the WRITE lands while B pauses",
		      r);
		CHECK(dst[0] == v && dst[MSG_BYTES / 2] == v && dst[MSG_BYTES] != v,
		      "round %d: the data is intact and stays in place", r);
		CHECK(wait_wc(A->scq, &wc, 1, 5000) == 0 && wc.status == IBV_WC_SUCCESS &&
			  wc.wr_id == 100u + (unsigned)r,
		      "round %d: A's WRITE completes (B's thread ACKed it)", r);
	}
	CHECK(CNT(&H, 1, prog_grace_looks) > looks0,
	      "B's progress thread found the data in a pause (progress_grace_looks %llu)",
	      (unsigned long long)(CNT(&H, 1, prog_grace_looks) - looks0));
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	unsetenv("UROCE_FAULT");
	setenv("UROCE_SHM", "0", 1);
	if (harness_open(&H)) {
		printf("0 passed, 1 failed\n");
		return 1;
	}
	H.o = default_opts(IBV_MTU_1024);
	if (pair_create(&H, &H.o))
		CHECK(0, "pair");
	else
		test_pause();
	harness_close(&H);
	return finish("test_gracelook");
}

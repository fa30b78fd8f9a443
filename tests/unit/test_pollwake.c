/* An application's poll wakes a progress thread asleep on the sockets
 * (uroce_app_active, src/core/progress.c; docs/latency.md, "Session 18").
 * Over UDP (UROCE_SHM=0), A's progress thread asleep in its deep sleep
 * (nothing armed, nothing polling: ctx->prog_deep):
 *   - A polls its empty CQ: the thread leaves that sleep and waits out of
 *     the poller's way (ctx->prog_grace, its wait on the eventfd only),
 *     counted once in progress_poll_wakes - left asleep, it stayed on the
 *     sockets until its next timer, and every packet for the poller woke
 *     it in the sender's system call;
 *   - READs A posts and polls for complete, with B's bytes;
 *   - once A stops polling, the thread is back in its deep sleep (idle
 *     stays idle).
 */
#include <time.h>

#include "rc_harness.h"

static struct harness H;
#define A (&H.s[0])
#define B (&H.s[1])

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait (bounded: 3 s) until A's thread sleeps on the sockets with no timer
 * armed. */
static bool a_deep(void)
{
	struct uroce_ctx *ctx = to_uctx(A->ctx);
	uint64_t end = ms_now() + 3000;

	while (ms_now() < end) {
		if (atomic_load(&ctx->prog_deep) && !atomic_load(&ctx->timer_ns))
			return true;
		usleep(1000);
	}
	return false;
}

/* A reads 64 bytes of B's buffer n times, one at a time, polling for each. */
static bool reads(int n, int base)
{
	for (int i = 0; i < n; i++) {
		struct ibv_wc wc;

		int r;

		B->buf[REMOTE_BASE] = (uint8_t)(base + i);
		if ((r = harness_read1(A, B, (uint64_t)i, 64)) ||
		    (r = wait_wc(A->scq, &wc, 1, WAIT_MS)) || wc.status != IBV_WC_SUCCESS ||
		    A->buf[LOCAL_BASE] != (uint8_t)(base + i)) {
			printf("  READ %d failed: %d, status %s, wr_id %llu, byte %u\n", i, r,
			       ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id,
			       A->buf[LOCAL_BASE]);
			return false;
		}
	}
	return true;
}

static void test_poll_wakes(void)
{
	struct uroce_ctx *ctx = to_uctx(A->ctx);
	uint64_t w0, w, end;
	bool grace = false, empty = true;
	struct ibv_wc wc;

	CHECK(reads(20, 0), "20 READs complete with B's bytes");
	CHECK(a_deep(), "A's thread sleeps on the sockets once A stops polling");
	w0 = CNT(&H, 0, prog_poll_wakes);

	/* A polls (an empty CQ) until its thread waits out of its way */
	end = ms_now() + 2000;
	while (!grace && ms_now() < end) {
		empty &= ibv_poll_cq(A->scq, 1, &wc) == 0;
		grace = atomic_load(&ctx->prog_grace);
	}
	CHECK(empty, "A's CQ stayed empty");
	w = CNT(&H, 0, prog_poll_wakes) - w0;
	CHECK(grace, "A's polls took its thread out of the sleep on the sockets");
	CHECK(w >= 1, "counted: %llu poll wake(s)", (unsigned long long)w);
	printf("  %llu poll wake(s) before the thread's grace wait\n", (unsigned long long)w);

	CHECK(reads(50, 20), "50 more READs complete, A polling");
	CHECK(a_deep(), "A stops polling: its thread sleeps on the sockets again");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	unsetenv("UROCE_FAULT");
	unsetenv("UROCE_POLL_WAKE");
	setenv("UROCE_SHM", "0", 1);
	if (harness_open(&H)) {
		printf("0 passed, 1 failed\n");
		return 1;
	}
	H.o = default_opts(IBV_MTU_1024);
	/* 268 ms (eight: 2.1 s): under three CPU hogs the first READ after
	 * the pair's setup ran out of its 8 x 33.5 ms once in ~230 runs (B's
	 * thread waiting for a CPU); this test is not about retransmission */
	H.o.timeout = 16;
	if (pair_create(&H, &H.o)) {
		CHECK(0, "pair");
	} else {
		test_poll_wakes();
	}
	harness_close(&H);
	return finish("test_pollwake");
}

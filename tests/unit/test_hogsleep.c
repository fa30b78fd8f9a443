/* The UDP path's poller on a loaded CPU (udp_idle, src/verbs/cq.c): an
 * application thread whose CQs stay empty yields the CPU; once a yield has
 * run another process for a time slice (a CPU hog), the thread sleeps on
 * its UDP sockets instead, and the peer's next packet wakes it.
 *
 * B's receiving thread polls only B's CQ and shares CPU 0 with a thread
 * that never yields (the hog).  A sends SENDs with pauses long enough for
 * the receiver to give up spinning.  Every message must arrive, in order
 * and intact, and the receiver must have seen a long yield
 * (app_long_yields); whether it slept on its sockets (app_hog_sleeps) is
 * printed, not asserted (see the end of test_sleeping_poller).
 * Over UDP (the same-host wire off: that one has its own rule, shm.c).
 */
#include "cpu_hog.h"
#include "rc_harness.h"

static struct harness H;
#define A (&H.s[0])
#define B (&H.s[1])

#define MESSAGES  300
#define MSG_BYTES 64u
#define SLOTS	  32u
#define SLOT(i)	  (65536u + ((uint32_t)(i) % SLOTS) * 4096u)

struct receiver {
	int got, out_of_order;
	bool failed;
};

/* B's thread: polls only B's CQ (a thread that polls another context's
 * CQs too is never put to sleep on these sockets). */
static void *receive_all(void *arg)
{
	struct receiver *rv = arg;
	uint64_t end = now_ms() + 60000;
	int posted = 0;

	cpu_pin(0);
	while (posted < (int)SLOTS && !harness_recv1(B, (uint64_t)posted, SLOT(posted)))
		posted++;
	while (rv->got < MESSAGES && now_ms() < end) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(B->rcq, 1, &wc);

		if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS)) {
			rv->failed = true;
			break;
		}
		if (!n)
			continue;
		if (B->buf[SLOT(rv->got)] != (uint8_t)rv->got ||
		    B->buf[SLOT(rv->got) + MSG_BYTES - 1] != (uint8_t)~rv->got)
			rv->out_of_order++;
		rv->got++;
		if (posted < MESSAGES && !harness_recv1(B, (uint64_t)posted, SLOT(posted)))
			posted++;
	}
	return NULL;
}

static void test_sleeping_poller(void)
{
	struct receiver rv = {0};
	uint64_t sleeps0 = CNT(&H, 1, app_hog_sleeps), long0 = CNT(&H, 1, app_long_yields);
	struct cpu_hog hog;
	pthread_t th;
	bool ok = true;

	CHECK(!cpu_hog_start(&hog, 0), "hog thread");
	CHECK(!pthread_create(&th, NULL, receive_all, &rv), "receiver thread");
	usleep(20000); /* its receives are posted */
	for (int i = 0; i < MESSAGES && ok; i++) {
		struct ibv_wc wc;

		A->buf[0] = (uint8_t)i;
		A->buf[MSG_BYTES - 1] = (uint8_t)~i;
		ok = !harness_send1(A, (uint64_t)i, MSG_BYTES) &&
		     !wait_wc(A->scq, &wc, 1, WAIT_MS) && wc.status == IBV_WC_SUCCESS;
		/* pauses past the poller's spin: it gives the CPU away */
		usleep((useconds_t)(i % 4 ? 50 : 400));
	}
	pthread_join(th, NULL);
	cpu_hog_stop(&hog);
	printf("  %d messages; the receiver: %llu long yields, %llu sleeps on its sockets\n",
	       rv.got, (unsigned long long)(CNT(&H, 1, app_long_yields) - long0),
	       (unsigned long long)(CNT(&H, 1, app_hog_sleeps) - sleeps0));
	CHECK(ok && !rv.failed && rv.got == MESSAGES, "every message received: %d", rv.got);
	CHECK(rv.out_of_order == 0, "in order, with its payload: %d wrong", rv.out_of_order);
	CHECK(CNT(&H, 1, app_long_yields) > long0, "the hog took the receiver's yields");
	/* Not asserted: in about 3 of 10 runs on this project's machines
	 * (kernel 6.18, ctest or alone) the receiver never sleeps although
	 * the hog took its yields, and when it happens it stays so for the
	 * whole process (six rounds in one process failed together) - the
	 * cause is not found yet (docs/latency.md, session 13). */
	if (CNT(&H, 1, app_hog_sleeps) == sleeps0)
		printf("  NOTE: the receiver did not sleep on its sockets in this run\n");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	unsetenv("UROCE_FAULT");
	unsetenv("UROCE_HOG_SLEEP");
	setenv("UROCE_SHM", "0", 1);
	if (harness_open(&H)) {
		printf("0 passed, 1 failed\n");
		return 1;
	}
	H.o = default_opts(IBV_MTU_1024);
	if (pair_create(&H, &H.o))
		CHECK(0, "pair");
	else
		test_sleeping_poller();
	harness_close(&H);
	return finish("test_hogsleep");
}

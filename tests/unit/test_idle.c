/* An idle process stays idle (src/core/progress.c): after a burst of
 * one-sided traffic (RDMA READs served by the target's progress thread, the
 * target calling no verb) and SENDs, two contexts with connected RC QPs and
 * nothing in flight must let their progress threads sleep.  Over the UDP
 * wire (UROCE_SHM=0) and the same-host wire:
 *   - the process uses under 5% of a core during 1.5 s without traffic
 *     (CPU time from getrusage: it counts what the threads ran, so a loaded
 *     machine makes it smaller, not larger; the target is < 1%, bench/);
 *   - the progress threads end no more than a handful of sleeps in that
 *     time (progress_wakeups: nothing is armed, nothing arrives);
 *   - the traffic itself completed, and the READs returned B's bytes.
 */
#include <sys/resource.h>
#include <time.h>

#include "rc_harness.h"

static struct harness H;
#define A (&H.s[0])
#define B (&H.s[1])

#define READS	 200
#define IDLE_MS	 1500
#define MAX_WAKE 4

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts))
		;
}

/* A reads 64 bytes of B's buffer, READS times, one at a time: B's progress
 * thread serves them (B calls no verb). */
static bool read_burst(void)
{
	for (int i = 0; i < READS; i++) {
		struct ibv_wc wc;

		B->buf[REMOTE_BASE] = (uint8_t)i;
		if (harness_read1(A, B, (uint64_t)i, 64) || wait_wc(A->scq, &wc, 1, WAIT_MS) ||
		    wc.status != IBV_WC_SUCCESS || A->buf[LOCAL_BASE] != (uint8_t)i) {
			printf("  READ %d failed\n", i);
			return false;
		}
	}
	return true;
}

/* A sends one message to B, B polls it. */
static bool send_one(void)
{
	struct ibv_sge ss = {.addr = (uintptr_t)A->buf, .length = 100, .lkey = A->mr->lkey};
	struct ibv_sge rs = {
	    .addr = (uintptr_t)B->buf + 65536, .length = 4096, .lkey = B->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &ss,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &rs, .num_sge = 1}, *rbad;
	struct ibv_wc swc, rwc;

	return !ibv_post_recv(B->qp, &rwr, &rbad) && !ibv_post_send(A->qp, &wr, &bad) &&
	       !wait_wc2(A->scq, &swc, 1, B->rcq, &rwc, 1, WAIT_MS) &&
	       swc.status == IBV_WC_SUCCESS && rwc.status == IBV_WC_SUCCESS;
}

static void test_idle(const char *wire)
{
	struct pair_opts o;
	uint64_t w0, w1;
	double c0, c1;

	if (harness_open(&H)) {
		CHECK(0, "%s: open", wire);
		return;
	}
	o = default_opts(IBV_MTU_1024);
	if (pair_create(&H, &o)) {
		CHECK(0, "%s: pair", wire);
		harness_close(&H);
		return;
	}
	CHECK(read_burst(), "%s: %d READs served by the target's progress thread", wire, READS);
	for (int i = 0; i < 20; i++)
		CHECK(send_one(), "%s: SEND %d", wire, i);
	/* the spins and grace slices after the traffic end within a few ms */
	sleep_ms(100);
	w0 = CNT(&H, 0, prog_wakeups) + CNT(&H, 1, prog_wakeups);
	c0 = cpu_s();
	sleep_ms(IDLE_MS);
	c1 = cpu_s();
	w1 = CNT(&H, 0, prog_wakeups) + CNT(&H, 1, prog_wakeups);
	printf("  %s: idle %d ms: %.4f s of CPU (%.2f%% of a core), %llu wake-ups\n", wire, IDLE_MS,
	       c1 - c0, 100.0 * (c1 - c0) / (IDLE_MS / 1000.0), (unsigned long long)(w1 - w0));
	CHECK(c1 - c0 < 0.05 * IDLE_MS / 1000.0, "%s: idle CPU %.4f s in %d ms", wire, c1 - c0,
	      IDLE_MS);
	CHECK(w1 - w0 <= MAX_WAKE, "%s: %llu progress wake-ups while idle", wire,
	      (unsigned long long)(w1 - w0));
	harness_close(&H);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	unsetenv("UROCE_FAULT");
	setenv("UROCE_SHM", "0", 1);
	test_idle("udp");
	unsetenv("UROCE_SHM");
	test_idle("shm");
	return finish("test_idle");
}

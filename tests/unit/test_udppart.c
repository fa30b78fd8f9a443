/* Parting over UDP (src/core/progress.c, uroce_progress_part): the
 * progress thread that takes its READ requester to share its CPU moves to
 * another CPU of its mask, unless a yield of its spin has just run a
 * neighbour for a time slice (load: a move would meet it again).
 *   - a context without same-host links: uroce_shm_part never moves it;
 *   - a yield that ran a neighbour 1 ms ago: no move, nothing counted;
 *   - with two CPUs and no such yield (or one 200 ms ago): the calling
 *     thread moves and progress_parts counts it.
 * The calling thread stands in for the progress thread.  The move itself
 * (its own mask back, the rate limit, a one-CPU mask) is uroce_thread_part,
 * which test_shm_idle's test_part checks through uroce_shm_part.
 */
#include <sched.h>

#include "rc_harness.h"
#include "net/shm.h"

static struct harness H;
#define B (&H.s[1])

int main(void)
{
	cpu_set_t all;
	struct uroce_ctx *ctx;
	uint64_t parts0;
	int cpu;

	setvbuf(stdout, NULL, _IOLBF, 0);
	unsetenv("UROCE_FAULT");
	unsetenv("UROCE_UDP_PART");
	setenv("UROCE_SHM", "0", 1);
	if (harness_open(&H) || pair_create(&H, (H.o = default_opts(IBV_MTU_1024), &H.o))) {
		printf("0 passed, 1 failed\n");
		return 1;
	}
	ctx = to_uctx(B->ctx);
	CHECK(!uroce_shm_part(ctx), "no same-host link: uroce_shm_part stays");
	parts0 = CNT(&H, 1, prog_parts);
	CHECK(!uroce_progress_part(ctx, uroce_now_ns() - 1000000),
	      "a yield ran a neighbour 1 ms ago: stays");
	CHECK(CNT(&H, 1, prog_parts) == parts0, "nothing counted");
	if (!sched_getaffinity(0, sizeof(all), &all) && CPU_COUNT(&all) > 1) {
		cpu = sched_getcpu();
		CHECK(uroce_progress_part(ctx, 0), "two CPUs, no neighbour seen: parted");
		CHECK(sched_getcpu() != cpu, "on another CPU: %d -> %d", cpu, sched_getcpu());
		CHECK(CNT(&H, 1, prog_parts) == parts0 + 1, "counted");
		usleep(2000); /* the rate limit */
		cpu = sched_getcpu();
		CHECK(uroce_progress_part(ctx, uroce_now_ns() - 200000000),
		      "that neighbour 200 ms ago: parted again");
		CHECK(sched_getcpu() != cpu, "moved: %d -> %d", cpu, sched_getcpu());
		CHECK(CNT(&H, 1, prog_parts) == parts0 + 2, "counted");
	} else {
		printf("  one CPU: nothing to part to\n");
	}
	harness_close(&H);
	return finish("test_udppart");
}

/* The progress thread's time slice (docs/design.md, "The progress thread's
 * time slice").
 *
 * Linux's EEVDF scheduler (6.6) gives each runnable thread a virtual
 * deadline one time slice after its eligible time and runs the earliest;
 * since 6.12 a SCHED_OTHER thread may ask for its own slice through
 * sched_setattr's sched_runtime (0.1-100 ms, clamped; no privilege).  A
 * thread with a short slice that wakes gets an earlier deadline than a
 * busy neighbour on its default slice (and may cut that neighbour's slice
 * short: PREEMPT_SHORT), so it runs sooner - not for longer: its share of
 * the CPU is its weight's as before, only cut into shorter pieces.  That
 * is uroce's progress thread: it sleeps, wakes for a packet or a timer,
 * works for tens of microseconds and sleeps again, and a stream next to a
 * TCP flow (whose ACK clock runs in softirq) loses its share to the time
 * that thread waits to run after it became runnable (docs/selective-repeat.md,
 * "Session 17", "Session 18").
 *
 * Only while the context's flows are paced (a pacing or reordering wake-up
 * served in the last second, uroce_progress_slice_paced): a stream that is
 * not (loopback ib_write_bw beside a busy loop) lost 10-25% with the short
 * slice for the thread's whole life.
 *
 * UROCE_SLICE_US (microseconds, default 100; 0 = leave the thread's slice
 * alone); UROCE_SLICE_ALWAYS=1: from the thread's start on.  An older kernel ignores the field
 * (sched_getattr then reads back another value) or refuses it: nothing changes, one trace line says
 * so.  A thread with a real-time or deadline policy, or SCHED_IDLE, is left alone: the slice is a
 * fair-class hint.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "uroce.h"

#ifndef SCHED_BATCH
#define SCHED_BATCH 3
#endif

/* struct sched_attr as of Linux 4.x (SCHED_ATTR_SIZE_VER0, 48 bytes): the
 * fields after it (utilization clamps) are not ours to pass back. */
struct ur_sched_attr {
	uint32_t size;
	uint32_t policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime; /* SCHED_OTHER/BATCH since 6.12: the slice, ns */
	uint64_t deadline;
	uint64_t period;
};

#define UR_SCHED_FLAG_RESET_ON_FORK 0x01

/* The default: the shortest slice the kernel accepts (100 us). */
#define UROCE_SLICE_US_DEFAULT 100

uint64_t uroce_sched_slice_get(pid_t tid)
{
	struct ur_sched_attr a = {0};

	if (syscall(SYS_sched_getattr, tid, &a, (unsigned)sizeof(a), 0u))
		return 0;
	return a.runtime;
}

int uroce_sched_slice_set(pid_t tid, uint64_t ns)
{
	struct ur_sched_attr a = {0};

	if (syscall(SYS_sched_getattr, tid, &a, (unsigned)sizeof(a), 0u))
		return errno;
	if (a.policy != SCHED_OTHER && a.policy != SCHED_BATCH)
		return EPERM; /* not a fair-class thread we may retune */
	/* the same policy and nice (a nice-19 job stays nice 19), a slice */
	a.size = sizeof(a);
	a.flags &= UR_SCHED_FLAG_RESET_ON_FORK;
	a.priority = 0;
	a.runtime = ns;
	a.deadline = a.period = 0;
	if (syscall(SYS_sched_setattr, tid, &a, 0u))
		return errno;
	/* before 6.12 the field was ignored for these policies (it reads
	 * back 0); the caller passes a slice inside the kernel's range */
	if (ns && uroce_sched_slice_get(tid) != ns)
		return EOPNOTSUPP;
	return 0;
}

uint64_t uroce_progress_slice_ns(void)
{
	static uint64_t us = UINT64_MAX;
	uint64_t ns = uroce_env_num("UROCE_SLICE_US", UROCE_SLICE_US_DEFAULT, &us) * 1000;

	if (!ns)
		return 0;
	return ns > 100000000ull ? 100000000ull : ns < 100000ull ? 100000ull : ns;
}

/* UROCE_SLICE_ALWAYS=1: the short slice for the thread's whole life, not
 * only while paced (measurements: it costs a loopback stream under load). */
static bool slice_always(void)
{
	static uint64_t always = UINT64_MAX;

	return uroce_env_num("UROCE_SLICE_ALWAYS", 0, &always) != 0;
}

/* The progress thread's state (one thread per context: thread-local). */
static _Thread_local bool slice_short, slice_refused;
static _Thread_local uint64_t slice_paced_ns;

static void slice_to(bool on)
{
	uint64_t ns = on ? uroce_progress_slice_ns() : 0;
	int err = uroce_sched_slice_set(0, ns);

	/* refused once (an older kernel, a seccomp filter): never asked
	 * again, not once per pacing wake-up */
	if (err) {
		ur_trace("progress thread: no %llu us slice (%s)", (unsigned long long)(ns / 1000),
			 strerror(err));
		slice_refused = true;
	}
	slice_short = on && !err;
}

/* Called by the progress thread when it starts. */
void uroce_progress_slice(struct uroce_ctx *ctx)
{
	atomic_store(&ctx->prog_tid, (pid_t)syscall(SYS_gettid));
	slice_short = slice_refused = false;
	if (uroce_progress_slice_ns() && slice_always())
		slice_to(true);
}

/* The thread served a pacing (or reordering) wake-up of a QP at now: a
 * flow that shares a bottleneck, whose schedule is only as good as this
 * thread's wake-ups.  The short slice until none has come for
 * UROCE_SLICE_HOLD_NS.  Only then: a stream that is not paced (loopback
 * ib_write_bw, 2 GB/s) lost 10-25% with the short slice beside a busy
 * loop - its threads preempting each other per batch. */
#define UROCE_SLICE_HOLD_NS 1000000000ull

void uroce_progress_slice_paced(uint64_t now)
{
	slice_paced_ns = now;
	if (!slice_short && !slice_refused && uroce_progress_slice_ns())
		slice_to(true);
}

/* The loop's check, at now: back to the kernel's slice once the pacing
 * wake-ups have stopped. */
void uroce_progress_slice_idle(uint64_t now)
{
	if (slice_short && !slice_always() && now - slice_paced_ns > UROCE_SLICE_HOLD_NS)
		slice_to(false);
}

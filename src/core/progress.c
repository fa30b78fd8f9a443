/* The progress engine: one thread per context, started with the first QP.
 *
 * It sleeps in epoll_wait on the context's UDP sockets and an eventfd, so a
 * one-sided WRITE or READ aimed at this process completes without the
 * application calling any verb.  Its timeout is the earliest armed QP timer
 * (retransmission, RNR back-off); ctx->timer_ns holds that deadline and a QP
 * that arms an earlier one wakes the thread through the eventfd.
 *
 * Sending is not the thread's job: ibv_post_send builds and transmits packets
 * in the caller's thread; the thread only sends what incoming packets and
 * timers cause (ACKs, READ responses, the rest of a send window).
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "uroce.h"
#include "net/fault.h"
#include "net/shm.h"

uint64_t uroce_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void uroce_progress_wake(struct uroce_ctx *ctx)
{
	uint64_t one = 1;

	if (ctx->wake_fd >= 0 && write(ctx->wake_fd, &one, sizeof(one)) < 0)
		ur_trace("wake: %s", strerror(errno));
}

/* Fire expired timers; return the next deadline (0 = none). */
static uint64_t run_timers(struct uroce_ctx *ctx)
{
	uint64_t now = uroce_now_ns(), next = 0;
	bool paced = false;

	pthread_mutex_lock(&ctx->lock);
	atomic_store(&ctx->timer_ns, 0);
	for (int i = 0; i < ctx->nqps; i++) {
		struct uroce_qp *qp = ctx->qps[i];
		uint64_t d;

		pthread_mutex_lock(&qp->lock);
		if (qp->req.wake_ns && qp->req.wake_ns <= now)
			paced = true; /* (sched.c: the thread's slice) */
		uroce_req_timer(qp, now);
		d = qp->req.deadline_ns;
		if (qp->req.rnr_until_ns && (!d || qp->req.rnr_until_ns < d))
			d = qp->req.rnr_until_ns;
		if (qp->req.wake_ns && (!d || qp->req.wake_ns < d))
			d = qp->req.wake_ns;
		pthread_mutex_unlock(&qp->lock);
		if (d && (!next || d < next))
			next = d;
	}
	/* A QP may have armed an earlier timer meanwhile: keep the earliest. */
	for (;;) {
		unsigned long long cur = atomic_load(&ctx->timer_ns);

		if (cur && next && cur <= next)
			break;
		if (!next && cur)
			break;
		if (atomic_compare_exchange_weak(&ctx->timer_ns, &cur, next))
			break;
	}
	pthread_mutex_unlock(&ctx->lock);
	if (paced)
		uroce_progress_slice_paced(now);
	return atomic_load(&ctx->timer_ns);
}

/* While an application thread polled a CQ less than UROCE_APP_POLL_GRACE
 * ago it drains the sockets itself (uroce_cq_drive): the thread stays out
 * of its way, looking every UROCE_GRACE_SLICE_MS for ACKs the application
 * deferred and then left (src/net/endpoint.c). */
#define UROCE_APP_POLL_GRACE_NS 2000000ull
#define UROCE_GRACE_SLICE_MS	1

static void drain_wake(struct uroce_ctx *ctx)
{
	uint64_t v;

	if (read(ctx->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		ur_trace("wake read: %s", strerror(errno));
}

/* That holds for an application that polls without pauses (polls less
 * than UROCE_APP_POLL_GAP_NS apart, uroce.h) and has done so for
 * UROCE_APP_POLL_SPIN_NS.  One that polls in short bursts between waits
 * elsewhere (ucx_perftest's one-sided target: 0.2 ms of polls, then 1 ms in
 * poll(2) on a socket) is waited for only while a burst lasts, or every READ
 * and atomic it serves would wait for its next burst (ucp_get: a 1 ms
 * median).  Not for the first 1 ms of every burst either: a thread that
 * reads the sockets there ACKs a WRITE at once instead of letting the reply
 * carry the ACK, and ib_write_lat's peer then completes early and turns to
 * spinning on memory (2 ms stalls in 1-2% of its iterations).  Returns how
 * long the thread stays out of the way (0: not at all).
 *
 * The grace after a continuous burst does not let a socket hold data for
 * its whole length, though: an application that stops polling inside it
 * may be waiting for that data elsewhere - ib_write_lat spins on memory for
 * the peer's WRITE once its own has completed, and across veth the rest of
 * a 64 KiB WRITE arrives after that completion (2.2-4.2 ms per iteration,
 * docs/latency.md).  Once the last poll is UROCE_APP_POLL_GAP_NS old, *look
 * is set: the thread reads the sockets (grace_look) and serves what they
 * hold, until they are empty; it looks again every slice
 * (every UROCE_GRACE_LOOK_NS once learned, below) while the pause lasts.
 * A continuous poller is never read from under: its polls are closer. */
#define UROCE_APP_POLL_SPIN_NS 1000000ull

/* The thread learns whether pauses strand data: while a look has found
 * some in the last UROCE_GRACE_LEARN_NS, a pause is a poll UROCE_GRACE_LOOK_NS
 * old (not a gap), in a continuous poller's grace as after a short burst,
 * and the thread wakes when the last poll turns that old instead of at the
 * end of its 1 ms slice.  A poller whose pauses never strand anything
 * (ib_send_lat) keeps the gap and the 1 ms slices.  ib_write_lat 64 KiB
 * across veth, typical, 2 reps (docs/latency.md): 2,143 / 2,203 us before,
 * 392 / 360 with the gap, 221 / 207 with 50 us, 194 / 233 with 20 us. */
#define UROCE_GRACE_LEARN_NS 1000000000ull
#define UROCE_GRACE_LOOK_NS  50000ull

static bool grace_learned(struct uroce_ctx *ctx, uint64_t now)
{
	uint64_t t = atomic_load_explicit(&ctx->grace_found_ns, memory_order_relaxed);

	return t && now - t < UROCE_GRACE_LEARN_NS;
}

static uint64_t app_polling(struct uroce_ctx *ctx, uint64_t now, bool *look)
{
	uint64_t last = atomic_load(&ctx->app_poll_ns); /* seq_cst: uroce_app_sleeps */
	uint64_t since, wait, gap = UROCE_APP_POLL_GAP_NS;
	bool learned = grace_learned(ctx, now);

	*look = false;
	/* A poll stamped after the caller read the clock is a poll now (the
	 * difference wrapped: the thread took it for a pause and served the
	 * sockets of a continuous poller). */
	if (last > now)
		last = now;
	since = now - last;
	if (learned)
		gap = UROCE_GRACE_LOOK_NS;

	if (since < UROCE_APP_POLL_GRACE_NS &&
	    last - atomic_load_explicit(&ctx->app_burst_ns, memory_order_relaxed) >=
		UROCE_APP_POLL_SPIN_NS) {
		wait = UROCE_APP_POLL_GRACE_NS - since;
		if (since >= gap) {
			*look = true;
			if (learned && wait > gap)
				wait = gap;
		} else if (learned) {
			wait = gap - since;
		}
		return wait;
	}
	return since < gap ? gap - since : 0;
}

/* The UDP sockets in the thread's epoll set cost every packet that
 * arrives, and every one sent (its buffer freed), a call into epoll's
 * wake-up callback under two spinlocks, in the sending thread's system
 * call, even while nobody waits in that set - on the critical path of a
 * ping-pong, where the busy-poll UDP floor has none.  The thread waits on
 * the sockets only in its deep sleep; while an application polls
 * continuously (polls less than UROCE_APP_POLL_GAP_NS apart for at least
 * UROCE_APP_POLL_SPIN_NS, so that an application that sleeps between
 * short bursts does not make it add and remove them every time) they are
 * taken out of the set, and put back before the next deep sleep - where
 * epoll, level-triggered, reports what they already hold.  (docs/latency.md,
 * "Session 12".)  UROCE_SOCK_UNWATCH=0: they stay in (measurements). */
static int unwatch_mode = -1;

static void socks_watch(struct uroce_ctx *ctx, bool on)
{
	if (ctx->socks_watched == on || (!on && !uroce_env_on("UROCE_SOCK_UNWATCH", &unwatch_mode)))
		return;
	for (int i = 0; i < atomic_load(&ctx->nep); i++)
		uroce_ep_epoll_watch(ctx->ep[i], on);
	ctx->socks_watched = on;
}

static bool app_continuous(struct uroce_ctx *ctx, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&ctx->app_poll_ns, memory_order_relaxed);

	if (last > now) /* a stamp ahead: polling now (uroce_app_yields) */
		last = now;
	return last && now - last < UROCE_APP_POLL_GAP_NS &&
	       last - atomic_load_explicit(&ctx->app_burst_ns, memory_order_relaxed) >=
		   UROCE_APP_POLL_SPIN_NS;
}

/* A pause inside a poller's grace: read the sockets.  What they held was
 * left there by an application that has stopped polling for it.  Its ACKs
 * are deferred as an application poll's are (uroce_ep_poll_look): the
 * application, spinning on memory for what we just placed, answers at once
 * and its request carries them.  Acknowledged at once, ib_write_lat's peer
 * completed before our reply came, turned to spinning on memory and left
 * that reply to its own thread's look: every iteration then paid a look,
 * 2 B typical unchanged but averages 11-134 us against 7-61, p99 46-4,000
 * us against 24-1,969 (veth, 4 interleaved reps).  The owed ACKs leave at
 * the latest after the thread's next wait, as in any grace slice; those of
 * a message still arriving leave at once (ack_may_wait, endpoint.c). */
static int grace_look(struct uroce_ctx *ctx, uint64_t now)
{
	int got = 0;

	for (int i = 0; i < atomic_load(&ctx->nep); i++) {
		int r = uroce_ep_poll_look(ctx->ep[i], 256);

		if (r > 0) /* < 0: an application thread reads it (it polls) */
			got += r;
	}
	if (got) {
		uroce_count(ctx, prog_grace_looks, 1);
		/* Learned only from a poller that left with a completion
		 * (uroce_app_done): one whose last poll found nothing was
		 * waiting for this very data and was descheduled, not gone -
		 * on a loaded machine such looks set the 50 us wake-ups of
		 * the learned mode going for ib_send_lat. */
		if (atomic_load_explicit(&ctx->app_done, memory_order_relaxed))
			atomic_store_explicit(&ctx->grace_found_ns, now, memory_order_relaxed);
	}
	return got;
}

/* An application thread polls an empty CQ (src/verbs/cq.c).  A stamp
 * ahead of now (uroce_app_yields, the ACK wait) is a poll now, not a gap.
 *
 * A poll finds the thread asleep on the sockets (its deep sleep, begun
 * while nothing polled: before the application's first poll - a post's
 * timer woke it, and it went back to sleep - or after a pause): it is
 * woken, once, through the eventfd, and then keeps out of the poller's
 * way (app_polling).  Left asleep there, it slept until its next timer
 * (the first retransmission probe, 3 ms) while every packet for the
 * poller woke it in the sender's system call - a wake-up in the
 * sendto that delivers each READ response, found empty by the time the
 * thread ran: ib_read_lat's responses took 15.7 us to send instead of 4.2
 * for the first 100-250 READs of a run, 13-16 us a READ against 8-11
 * (docs/latency.md, "Session 18").  UROCE_POLL_WAKE=0: left asleep. */
static int poll_wake_mode = -1;

void uroce_app_active(struct uroce_ctx *ctx, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&ctx->app_poll_ns, memory_order_relaxed);

	if (now > last && now - last > UROCE_APP_POLL_GAP_NS)
		atomic_store_explicit(&ctx->app_burst_ns, now, memory_order_relaxed);
	atomic_store_explicit(&ctx->app_poll_ns, now, memory_order_relaxed);
	if (atomic_load_explicit(&ctx->app_done, memory_order_relaxed))
		atomic_store_explicit(&ctx->app_done, false, memory_order_relaxed);
	if (atomic_load_explicit(&ctx->prog_deep, memory_order_relaxed) &&
	    uroce_env_on("UROCE_POLL_WAKE", &poll_wake_mode) &&
	    atomic_exchange(&ctx->prog_deep, false)) {
		uroce_count(ctx, prog_poll_wakes, 1);
		uroce_progress_wake(ctx);
	}
}

/* An application thread posts work: it will poll for its completion, so
 * it has not left with the completion its last poll returned (ib_send_lat
 * posts its reply straight after one; a look while it is descheduled in
 * that post's system call taught the thread, 189 looks in a run at load 4).
 * ib_write_lat posts before the poll that returns its completion, and then
 * leaves: that pause still teaches. */
void uroce_app_posts(struct uroce_ctx *ctx)
{
	if (atomic_load_explicit(&ctx->app_done, memory_order_relaxed))
		atomic_store_explicit(&ctx->app_done, false, memory_order_relaxed);
}

/* An application's poll returns completions: it may stop polling now,
 * having what it waited for, and wait elsewhere (ib_write_lat spins on
 * memory), so data that comes while it pauses is stranded, and a look
 * that finds it teaches the thread to look sooner (grace_look).  A poll
 * that found nothing leaves it cleared (uroce_app_active). */
void uroce_app_done(struct uroce_ctx *ctx)
{
	if (!atomic_load_explicit(&ctx->app_done, memory_order_relaxed))
		atomic_store_explicit(&ctx->app_done, true, memory_order_relaxed);
}

/* A polling application thread gives the CPU away inside ibv_poll_cq
 * (sched_yield, src/verbs/cq.c): it is polling still, and comes back to
 * drain the sockets itself.  On a loaded machine such a yield may run
 * other threads for longer than UROCE_APP_POLL_GAP_NS; the thread then
 * took it for a pause, read the sockets from under the poller (a thread
 * switch on a CPU the poller or its peer wants) and, having found data,
 * learned to wake every UROCE_GRACE_LOOK_NS for a second (ib_send_lat at
 * load 5: a look that found data every 2-3 ms, 10,000 wake-ups a second
 * per process, 15% of each process's CPU samples in its progress thread).
 * The stamp now says "polling" for up to UROCE_APP_YIELD_HOLD_NS ahead,
 * as the ACK wait's does; the poll stamps the real time when the yield
 * returns.  Not for a poll of an armed CQ (the drain before a sleep). */
void uroce_app_yields(struct uroce_ctx *ctx, uint64_t now)
{
	if (atomic_load_explicit(&ctx->app_poll_ns, memory_order_relaxed))
		atomic_store_explicit(&ctx->app_poll_ns, now + UROCE_APP_YIELD_HOLD_NS,
				      memory_order_relaxed);
}

/* The application is about to sleep in the kernel until a completion event
 * (ibv_req_notify_cq, ibv_get_cq_event: src/verbs/cq.c).  Its burst of
 * polls is over: hand the sockets to the thread now rather than when the
 * burst rule sees the pause (ib_send_lat -e, which arms, posts and sleeps in
 * ibv_get_cq_event, waited up to a 1 ms slice per event).  seq_cst: the
 * thread stores prog_grace and then reads app_poll_ns again, so either it
 * sees the pause or we see it waiting and wake it. */
void uroce_app_sleeps(struct uroce_ctx *ctx)
{
	if (!atomic_load_explicit(&ctx->app_poll_ns, memory_order_relaxed))
		return;
	atomic_store(&ctx->app_poll_ns, 0);
	if (atomic_load(&ctx->prog_grace))
		uroce_progress_wake(ctx);
}

/* Bounded spin (UROCE_SPIN_US, default 50): after traffic, keep reading the
 * sockets until none has arrived for that long, yielding the CPU between
 * empty looks once they have been quiet for UROCE_SPIN_YIELD.  A
 * request/response exchange (READ, atomics, a ping-pong whose application
 * blocks elsewhere) then never waits for a thread wake-up, and a stream
 * never sleeps between its batches.  Stops as soon as an application
 * thread polls (it drains the sockets then) or a timer is due. */
static uint64_t spin_ns(void)
{
	static uint64_t ns = UINT64_MAX;

	if (ns == UINT64_MAX) {
		const char *e = getenv("UROCE_SPIN_US");
		long v = e && *e ? strtol(e, NULL, 10) : 50;

		ns = v < 0 ? 0 : (uint64_t)(v > 100000 ? 100000 : v) * 1000;
	}
	return ns;
}

/* Yield only once the sockets have been quiet this long: a response that
 * comes within it is seen one system call sooner. */
#define UROCE_SPIN_YIELD_NS 10000ull

/* What wake_epfd reports: the eventfd, and the same-host wire's sockets
 * (connections, hellos, hangups: src/net/shm.c). */
static void wake_events(struct uroce_ctx *ctx, uint64_t timeout_ns)
{
	struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000u),
			      .tv_nsec = (long)(timeout_ns % 1000000000u)};
	struct epoll_event ev[16];
	static atomic_bool no_pwait2;
	int n = -1;

	/* epoll_pwait2 (Linux 5.11) may be missing, or refused by an older
	 * container runtime's seccomp profile: then wait whole milliseconds,
	 * rounded up, rather than return at once and spin. */
	if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
		n = epoll_pwait2(ctx->wake_epfd, ev, 16, &ts, NULL);
		if (n < 0 && (errno == ENOSYS || errno == EPERM))
			atomic_store_explicit(&no_pwait2, true, memory_order_relaxed);
	}
	if (atomic_load_explicit(&no_pwait2, memory_order_relaxed))
		n = epoll_wait(ctx->wake_epfd, ev, 16,
			       (int)((timeout_ns + 999999u) / 1000000u > 1000000u
					 ? 1000000
					 : (timeout_ns + 999999u) / 1000000u));

	for (int i = 0; i < n; i++)
		if (uroce_shm_is_event(ev[i].data.ptr))
			uroce_shm_event(ctx, ev[i].data.ptr, ev[i].events);
		else
			drain_wake(ctx);
}

/* A spin handles the same-host wire's socket events this often: a stream
 * that keeps the thread spinning must not hold back a connection. */
#define UROCE_SPIN_EVENTS_NS 200000ull

/* A peer on the thread's CPU.  The scheduler wakes the thread on the CPU of
 * the process whose packet woke it (wake-affine), so the target of a short
 * READ/atomic burst often shares a CPU with its requester until the load
 * balancer parts them - for a whole run of ib_read_lat -n 100.  A spin there
 * is pure loss: the request cannot arrive until the spinner yields, and each
 * side then holds the CPU for its own spin before the other runs (measured,
 * load 12-16: every request of such a run came only after a yield of 15-20
 * us, 31-42 us per READ, against 20-26 us with the thread asleep between
 * requests and 12.5 us with the two on different CPUs, spinning).  A spin
 * that found UROCE_SPIN_COLOC_SPINS packets in a row each only after a yield
 * that ran another thread (over UROCE_SPIN_RAN_NS) takes the requester to
 * share its CPU: the thread then sleeps in epoll_wait straight after its
 * traffic instead, where the requester's packet wakes it (and the requester,
 * yielding after 1 us, src/verbs/cq.c, lets it run at once).  One traffic
 * burst in UROCE_SPIN_COLOC_PROBE spins anyway to see whether the two have
 * been parted; a packet found spinning without a yield ends the guess.
 * The thread first tries to part from it instead (it moves to another CPU
 * and spins there: uroce_shm_part with a same-host peer, uroce_progress_part
 * over UDP unless its yields ran a neighbour's time slice), and sleeps only
 * when it cannot. */
#define UROCE_SPIN_RAN_NS      5000ull
#define UROCE_SPIN_COLOC_SPINS 4u
#define UROCE_SPIN_COLOC_PROBE 16u

struct spin_learn {
	unsigned after_yield; /* consecutive packets that came only after a yield that ran */
	unsigned bursts;      /* traffic bursts while the guess holds (probe count) */
	uint64_t hog_ns;      /* when a yield of the spin last ran a neighbour for a slice */
};

/* Parting (docs/design.md, "Parting"): the calling thread moves to another
 * CPU of its affinity mask - the mask without this CPU for one
 * sched_setaffinity, then its own mask again - at most once per
 * UROCE_PART_EVERY_NS.  True: it moved. */
#define UROCE_PART_EVERY_NS 1000000ull

bool uroce_thread_part(void)
{
	static _Thread_local uint64_t last_ns;
	uint64_t now = uroce_now_ns();
	cpu_set_t mask, other;
	int cpu;
	bool moved;

	if (last_ns && now - last_ns < UROCE_PART_EVERY_NS)
		return false;
	last_ns = now;
	if ((cpu = sched_getcpu()) < 0 || sched_getaffinity(0, sizeof(mask), &mask))
		return false;
	other = mask;
	CPU_CLR(cpu, &other);
	if (!CPU_COUNT(&other) || sched_setaffinity(0, sizeof(other), &other))
		return false;
	moved = sched_getcpu() != cpu;
	if (sched_setaffinity(0, sizeof(mask), &mask))
		uroce_log(UROCE_LOG_WARN, "could not restore the progress thread's CPU mask: %s",
			  strerror(errno));
	last_ns = uroce_now_ns(); /* (a move may wait for the other CPU a while) */
	return moved;
}

/* The same over UDP (docs/latency.md, "Session 14").  The scheduler wakes
 * the thread on the CPU of the process whose packet woke it and keeps it
 * there while every request wakes it again, so the target of an
 * ib_read_lat over loopback or a veth pair slept after each READ, woken by
 * the next, in about half the runs (16-28 us a READ against 11-15 spinning
 * on the other CPU).  The guess does not tell the requester from a
 * neighbour that keeps the CPU (load): a yield of the spin that ran
 * something for longer than UROCE_PART_HOG_NS was such a neighbour's time
 * slice, and where it came from a move would meet it again - the thread
 * then sleeps after its traffic as before, for UROCE_PART_HOG_KEEP_NS.
 * UROCE_UDP_PART=0: never (measurements).  Counter progress_parts. */
#define UROCE_PART_HOG_NS      250000ull
#define UROCE_PART_HOG_KEEP_NS 100000000ull

bool uroce_progress_part(struct uroce_ctx *ctx, uint64_t hog_ns)
{
	static int on = -1;

	if (!uroce_env_on("UROCE_UDP_PART", &on) ||
	    (hog_ns && uroce_now_ns() - hog_ns < UROCE_PART_HOG_KEEP_NS) || !uroce_thread_part())
		return false;
	uroce_count(ctx, prog_parts, 1);
	return true;
}

static bool coloc_guess(const struct spin_learn *l)
{
	return l->after_yield >= UROCE_SPIN_COLOC_SPINS;
}

/* After traffic: spin, unless the guess holds and this is not a probe. */
static bool spin_skip(struct spin_learn *l)
{
	return coloc_guess(l) && ++l->bursts % UROCE_SPIN_COLOC_PROBE;
}

static void spin(struct uroce_ctx *ctx, struct spin_learn *l)
{
	uint64_t limit = spin_ns(), start = uroce_now_ns(), last = start, events = start;
	bool ran = false; /* a yield since the last packet let another thread run */
	unsigned found = 0;

	while (limit && !atomic_load(&ctx->stop)) {
		uint64_t now, t, d;
		int got = 0;

		for (int i = 0; i < atomic_load(&ctx->nep); i++)
			got += uroce_ep_poll_spin(ctx->ep[i], 256);
		now = uroce_now_ns();
		t = atomic_load(&ctx->timer_ns);
		if (atomic_load_explicit(&ctx->app_poll_ns, memory_order_relaxed) > start ||
		    (t && t <= now))
			return;
		if (now - events > UROCE_SPIN_EVENTS_NS) {
			events = now;
			wake_events(ctx, 0);
		}
		if (got) {
			uroce_count(ctx, prog_spin_rx, 1);
			if (!ran)
				l->after_yield = 0;
			else if (l->after_yield < UROCE_SPIN_COLOC_SPINS)
				l->after_yield++;
			/* part from the requester and spin (src/net/shm.c for a
			 * same-host one) */
			if (coloc_guess(l) &&
			    (uroce_shm_part(ctx) || uroce_progress_part(ctx, l->hog_ns)))
				l->after_yield = 0;
			if (spin_skip(l))
				return;
			ran = false;
			last = now;
			/* A burst: out of the epoll set while it lasts (as for an
			 * application's continuous polls, socks_watch); the next
			 * deep sleep puts them back. */
			if (++found == 2)
				socks_watch(ctx, false);
		} else if (now - last > limit) {
			return;
		} else if (now - last > UROCE_SPIN_YIELD_NS) {
			if (uroce_shm_spin_stop(ctx))
				return; /* a hog takes our yields (src/net/shm.c) */
			uroce_count(ctx, prog_spin_yields, 1);
			sched_yield();
			d = uroce_now_ns() - now;
			uroce_shm_yielded(d);
			if (d > UROCE_SPIN_RAN_NS)
				ran = true;
			if (d > UROCE_PART_HOG_NS)
				l->hog_ns = now + d;
		}
	}
}

/* Woken by a socket that another thread is reading (its receive path
 * taken: an application in ibv_poll_cq).  epoll_wait is level-triggered,
 * so going back to it reported the same datagram again until that thread
 * had read it: a stream's requester, whose application sends the window
 * refills of an ACK under the receive path (hundreds of microseconds across
 * veth, its poll stamp ageing past UROCE_APP_POLL_GAP_NS meanwhile), woke
 * its thread 5-19 times per ACK received (~125,000 times a second, every
 * wakeup a failed trylock).  The reader is an active application: stay out
 * of its way as for a poller, for one gap, watching only the eventfd. */
static void busy_wait(struct uroce_ctx *ctx, uint64_t t)
{
	uint64_t now = uroce_now_ns(), ns = UROCE_APP_POLL_GAP_NS;

	if (t && t <= now)
		return;
	if (t && t - now < ns)
		ns = t - now;
	uroce_count(ctx, prog_busy_waits, 1);
	atomic_store(&ctx->prog_grace, true); /* uroce_app_sleeps wakes it */
	wake_events(ctx, ns);
	atomic_store(&ctx->prog_grace, false);
}

static void *progress_main(void *arg)
{
	struct uroce_ctx *ctx = arg;
	struct epoll_event ev[16];
	struct spin_learn learn = {0};

	uroce_progress_slice(ctx); /* a short time slice: UROCE_SLICE_US (sched.c) */
	while (!atomic_load(&ctx->stop)) {
		uint64_t t = atomic_load(&ctx->timer_ns), now = uroce_now_ns(), grace;
		int timeout = -1, n, got = 0;
		bool busy = false, look;

		uroce_progress_slice_idle(now);
		if (t) {
			if (t <= now) {
				t = run_timers(ctx);
				uroce_fault_timer(ctx); /* held packets (UROCE_FAULT) */
				for (int i = 0; i < atomic_load(&ctx->nep); i++)
					uroce_ep_flush(ctx->ep[i]);
				continue;
			}
			timeout = (int)((t - now + 999999) / 1000000);
		}
		atomic_store(&ctx->prog_grace, true); /* then app_polling: uroce_app_sleeps */
		if ((grace = app_polling(ctx, now, &look))) {
			uint64_t ns = UROCE_GRACE_SLICE_MS * 1000000ull;

			if (look && grace_look(ctx, now))
				continue; /* and look again: the rest may be behind it */
			if (app_continuous(ctx, now))
				socks_watch(ctx, false);
			if (grace < ns)
				ns = grace;
			if (t && t - now < ns)
				ns = t - now;
			uroce_count(ctx, prog_grace_waits, 1);
			wake_events(ctx, ns);
			atomic_store(&ctx->prog_grace, false);
			uroce_ctx_send_owed_acks(ctx, false);
			/* and what an autocorked post left (qp.c) */
			for (int i = 0; i < atomic_load(&ctx->nep); i++)
				uroce_ep_flush(ctx->ep[i]);
			continue;
		}
		atomic_store(&ctx->prog_grace, false);
		socks_watch(ctx, true);
		/* Deep sleep: only a packet, a timer or a wake ends it.  An
		 * ACK deferred from now on wakes the thread (flush_acks). */
		atomic_store(&ctx->prog_deep, true);
		if (uroce_ctx_acks_owed(ctx)) {
			uroce_ctx_send_owed_acks(ctx, false);
			if (uroce_ctx_acks_owed(ctx) &&
			    (timeout < 0 || timeout > UROCE_GRACE_SLICE_MS))
				timeout = UROCE_GRACE_SLICE_MS;
		}
		/* same-host rings: raise their "sleeping" flags, and do not
		 * sleep if one already holds packets (src/net/shm.c) */
		if (uroce_shm_sleep(ctx, true)) {
			n = 0;
			for (int i = 0; i < atomic_load(&ctx->nep); i++)
				got += uroce_ep_poll(ctx->ep[i], 256);
		} else {
			n = epoll_wait(ctx->epfd, ev, 16, timeout);
		}
		uroce_shm_sleep(ctx, false);
		atomic_store(&ctx->prog_deep, false);
		if (n > 0)
			uroce_count(ctx, prog_wakeups, 1);
		for (int i = 0; i < n; i++) {
			int r;

			if (ev[i].data.ptr == NULL) {
				drain_wake(ctx);
				continue;
			}
			if (uroce_shm_is_event(ev[i].data.ptr)) {
				uroce_shm_event(ctx, ev[i].data.ptr, ev[i].events);
				continue;
			}
			r = uroce_ep_poll_woken(ev[i].data.ptr, 256);
			if (r < 0)
				busy = true;
			else
				got += r;
		}
		if (!got && busy) {
			busy_wait(ctx, t);
			continue;
		}
		if (got && spin_skip(&learn))
			uroce_count(ctx, prog_coloc_sleeps, 1);
		else if (got)
			spin(ctx, &learn);
	}
	return NULL;
}

/* Start the thread (ctx->lock held). */
int uroce_progress_start(struct uroce_ctx *ctx)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};

	if (ctx->thread_running)
		return 0;
	ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
	ctx->wake_epfd = epoll_create1(EPOLL_CLOEXEC);
	ctx->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ctx->epfd < 0 || ctx->wake_epfd < 0 || ctx->wake_fd < 0 ||
	    epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, ctx->wake_fd, &ev) ||
	    epoll_ctl(ctx->wake_epfd, EPOLL_CTL_ADD, ctx->wake_fd, &ev))
		goto err;
	for (int i = 0; i < ctx->nep; i++) {
		if (uroce_ep_epoll_add(ctx->ep[i]))
			goto err;
		uroce_shm_epoll_add(ctx->ep[i]);
	}
	ctx->socks_watched = true;
	atomic_store(&ctx->stop, false);
	if (pthread_create(&ctx->thread, NULL, progress_main, ctx))
		goto err;
	ctx->thread_running = true;
	return 0;
err:
	ur_err("cannot start the progress engine: %s", strerror(errno));
	if (ctx->epfd >= 0)
		close(ctx->epfd);
	if (ctx->wake_epfd >= 0)
		close(ctx->wake_epfd);
	if (ctx->wake_fd >= 0)
		close(ctx->wake_fd);
	ctx->epfd = ctx->wake_epfd = ctx->wake_fd = -1;
	return ENOMEM;
}

void uroce_progress_stop(struct uroce_ctx *ctx)
{
	if (ctx->thread_running) {
		atomic_store(&ctx->stop, true);
		uroce_progress_wake(ctx);
		pthread_join(ctx->thread, NULL);
		ctx->thread_running = false;
	}
	if (ctx->epfd >= 0)
		close(ctx->epfd);
	if (ctx->wake_epfd >= 0)
		close(ctx->wake_epfd);
	if (ctx->wake_fd >= 0)
		close(ctx->wake_fd);
	ctx->epfd = ctx->wake_epfd = ctx->wake_fd = -1;
	uroce_fault_fini(ctx); /* nothing sends any more: drop held packets */
}

/* Register a QP for timer scans and start the engine (ctx->lock held). */
int uroce_progress_add_qp(struct uroce_ctx *ctx, struct uroce_qp *qp)
{
	if (ctx->nqps == ctx->qps_cap) {
		int cap = ctx->qps_cap ? ctx->qps_cap * 2 : 16;
		void *n = realloc(ctx->qps, (size_t)cap * sizeof(*ctx->qps));

		if (!n)
			return ENOMEM;
		ctx->qps = n;
		ctx->qps_cap = cap;
	}
	ctx->qps[ctx->nqps++] = qp;
	return uroce_progress_start(ctx);
}

void uroce_progress_del_qp(struct uroce_ctx *ctx, struct uroce_qp *qp)
{
	for (int i = 0; i < ctx->nqps; i++)
		if (ctx->qps[i] == qp) {
			ctx->qps[i] = ctx->qps[--ctx->nqps];
			break;
		}
}

/* Called by a QP (qp->lock held) after arming a timer at deadline. */
void uroce_progress_arm(struct uroce_ctx *ctx, uint64_t deadline)
{
	unsigned long long cur = atomic_load(&ctx->timer_ns);

	while (!cur || deadline < cur) {
		if (atomic_compare_exchange_weak(&ctx->timer_ns, &cur, deadline)) {
			uroce_progress_wake(ctx);
			return;
		}
	}
}

/* The progress thread's time slice (src/core/sched.c, UROCE_SLICE_US):
 *   - uroce_sched_slice_set gives the calling thread a slice that
 *     sched_getattr reads back, and 0 gives it the kernel's default again;
 *   - it keeps the thread's nice value (a nice-5 thread stays nice 5) and
 *     leaves a SCHED_IDLE thread alone (EPERM, still SCHED_IDLE);
 *   - with UROCE_SLICE_US=250 and UROCE_SLICE_ALWAYS=1 the progress thread
 *     of a context with a QP runs with a 250 us slice;
 *   - the paced rule (the calling thread standing in for the progress
 *     thread): a pacing wake-up gives it the slice, a second without one
 *     the kernel's default again, UROCE_SLICE_ALWAYS=1 keeps it;
 *   - with UROCE_SLICE_US=0 (a second run of this program: the knobs are
 *     read once per process) the progress thread keeps the kernel's default,
 *     and so does it by default while nothing is paced.
 * On a kernel without custom slices (before Linux 6.12) the setter says
 * EOPNOTSUPP and the progress thread keeps whatever the kernel gives it:
 * the test checks that and skips the rest.
 */
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "rc_harness.h"

static struct harness H;

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* The progress thread's slice, once the thread has said who it is. */
static uint64_t progress_slice(struct ibv_context *ibctx)
{
	struct uroce_ctx *ctx = to_uctx(ibctx);
	pid_t tid = 0;

	for (int i = 0; i < 2000 && !(tid = atomic_load(&ctx->prog_tid)); i++)
		usleep(1000);
	CHECK(tid > 0, "the progress thread recorded its id");
	usleep(20000); /* the slice is set right after the id */
	return tid > 0 ? uroce_sched_slice_get(tid) : 0;
}

static void *nice_thread(void *arg)
{
	int *res = arg;

	if (setpriority(PRIO_PROCESS, (id_t)my_tid(), 5)) {
		res[0] = -1;
		return NULL;
	}
	res[0] = uroce_sched_slice_set(0, 400000);
	res[1] = getpriority(PRIO_PROCESS, (id_t)my_tid());
	res[2] = (int)(uroce_sched_slice_get(0) / 1000);
	return NULL;
}

static void *idle_thread(void *arg)
{
	int *res = arg;
	struct sched_param sp = {0};

	if (sched_setscheduler(0, SCHED_IDLE, &sp)) {
		res[0] = -1;
		return NULL;
	}
	res[0] = uroce_sched_slice_set(0, 400000);
	res[1] = sched_getscheduler(0);
	return NULL;
}

/* A thread the kernel refuses the slice (SCHED_IDLE stands in for an old
 * kernel or a seccomp filter) does not ask again on the next pacing
 * wake-up, even once it could: res[0] the policy switch worked, res[1] the
 * slice after the first wake-up, res[2] after the second (us). */
static void *refused_thread(void *arg)
{
	struct sched_param sp = {0};
	int *res = arg;

	if (sched_setscheduler(0, SCHED_IDLE, &sp)) {
		res[0] = -1;
		return NULL;
	}
	uroce_progress_slice_paced(uroce_now_ns());
	res[1] = (int)(uroce_sched_slice_get(0) / 1000);
	if (sched_setscheduler(0, SCHED_OTHER, &sp)) { /* needs RLIMIT_NICE or root */
		res[0] = -1;
		return NULL;
	}
	uroce_progress_slice_paced(uroce_now_ns());
	res[2] = (int)(uroce_sched_slice_get(0) / 1000);
	return NULL;
}

static int pair_up(void)
{
	if (harness_open(&H) || pair_create(&H, (H.o = default_opts(IBV_MTU_1024), &H.o))) {
		printf("0 passed, 1 failed\n");
		return -1;
	}
	return 0;
}

/* The later runs: UROCE_SLICE_US=0 (argv[1] "off") or unset ("dflt"); dflt
 * is the kernel's default slice. */
static int run_again(bool off, uint64_t dflt)
{
	uint64_t now = uroce_now_ns();

	if (pair_up())
		return 1;
	CHECK(progress_slice(H.s[1].ctx) == dflt, "UROCE_SLICE_US %s: the kernel's %llu ns",
	      off ? "0" : "unset", (unsigned long long)dflt);
	/* a pacing wake-up: the slice (the default knob), or none when off */
	uroce_progress_slice_paced(now);
	if (off)
		CHECK(uroce_sched_slice_get(0) == dflt, "off: paced, still the default");
	else
		CHECK(uroce_progress_slice_ns() &&
			  uroce_sched_slice_get(0) == uroce_progress_slice_ns(),
		      "paced: the default knob's slice %llu",
		      (unsigned long long)uroce_progress_slice_ns());
	uroce_progress_slice_idle(now + 2000000000ull);
	CHECK(uroce_sched_slice_get(0) == dflt, "a second later: the kernel's again");
	harness_close(&H);
	return finish(off ? "test_slice (UROCE_SLICE_US=0)" : "test_slice (the default)");
}

int main(int argc, char **argv)
{
	uint64_t dflt;
	int res[3] = {0}, err, st;
	pthread_t t;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	unsetenv("UROCE_FAULT");
	setenv("UROCE_SHM", "0", 1);
	if (argc > 2)
		return run_again(!strcmp(argv[1], "off"), strtoull(argv[2], NULL, 10));

	/* the setter on this thread */
	dflt = uroce_sched_slice_get(0);
	err = uroce_sched_slice_set(0, 300000);
	if (err == EOPNOTSUPP) {
		printf("  no custom slices on this kernel (before Linux 6.12): skipped\n");
		setenv("UROCE_SLICE_US", "250", 1);
		setenv("UROCE_SLICE_ALWAYS", "1", 1);
		if (pair_up())
			return 1;
		CHECK(progress_slice(H.s[1].ctx) != 250000, "no 250 us slice either");
		harness_close(&H);
		return finish("test_slice");
	}
	CHECK(!err, "set a 300 us slice: %s", strerror(err));
	CHECK(uroce_sched_slice_get(0) == 300000, "reads back 300 us: %llu",
	      (unsigned long long)uroce_sched_slice_get(0));
	CHECK(!uroce_sched_slice_set(0, 0), "set 0");
	CHECK(uroce_sched_slice_get(0) == dflt, "0: the default again (%llu ns)",
	      (unsigned long long)dflt);

	/* nice kept; SCHED_IDLE left alone */
	CHECK(!pthread_create(&t, NULL, nice_thread, res) && !pthread_join(t, NULL), "thread");
	if (res[0] != -1) {
		CHECK(res[0] == 0, "nice 5 thread: slice set (%s)", strerror(res[0]));
		CHECK(res[1] == 5, "nice 5 kept: %d", res[1]);
		CHECK(res[2] == 400, "its slice 400 us: %d", res[2]);
	}
	memset(res, 0, sizeof(res));
	CHECK(!pthread_create(&t, NULL, idle_thread, res) && !pthread_join(t, NULL), "thread");
	if (res[0] != -1) {
		CHECK(res[0] == EPERM, "SCHED_IDLE: refused (%d)", res[0]);
		CHECK(res[1] == SCHED_IDLE, "still SCHED_IDLE: %d", res[1]);
	}

	/* the knobs: the progress thread of a context with a QP */
	setenv("UROCE_SLICE_US", "250", 1);
	setenv("UROCE_SLICE_ALWAYS", "1", 1);
	if (pair_up())
		return 1;
	CHECK(uroce_progress_slice_ns() == 250000, "knob read: %llu",
	      (unsigned long long)uroce_progress_slice_ns());
	CHECK(progress_slice(H.s[0].ctx) == 250000, "UROCE_SLICE_US=250: progress thread 250 us");
	CHECK(progress_slice(H.s[1].ctx) == 250000, "and the other context's");
	CHECK(uroce_sched_slice_get(0) == dflt, "the application's thread untouched");
	harness_close(&H);
	/* always: a second without pacing keeps it */
	uroce_progress_slice_paced(uroce_now_ns());
	CHECK(uroce_sched_slice_get(0) == 250000, "paced: 250 us");
	uroce_progress_slice_idle(uroce_now_ns() + 2000000000ull);
	CHECK(uroce_sched_slice_get(0) == 250000, "UROCE_SLICE_ALWAYS: kept");
	CHECK(!uroce_sched_slice_set(0, 0), "back to the default");
	unsetenv("UROCE_SLICE_ALWAYS");
	memset(res, 0, sizeof(res));
	CHECK(!pthread_create(&t, NULL, refused_thread, res) && !pthread_join(t, NULL), "thread");
	if (res[0] != -1) {
		CHECK(res[1] != 250, "SCHED_IDLE: no slice (%d us)", res[1]);
		CHECK(res[2] == (int)(dflt / 1000), "refused once: not asked again (%d us)",
		      res[2]);
	} else {
		printf("  cannot leave SCHED_IDLE here: the refusal's memory not checked\n");
	}

	/* UROCE_SLICE_US=0 and unset: fresh processes (the knob is read once) */
	for (int run = 0; run < 2; run++) {
		char d[32];

		snprintf(d, sizeof(d), "%llu", (unsigned long long)dflt);
		pid = fork();
		if (pid == 0) {
			if (run == 0)
				setenv("UROCE_SLICE_US", "0", 1);
			else
				unsetenv("UROCE_SLICE_US");
			execl("/proc/self/exe", argv[0], run == 0 ? "off" : "dflt", d,
			      (char *)NULL);
			_exit(127);
		}
		CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st),
		      "the %s run passed", run == 0 ? "UROCE_SLICE_US=0" : "default");
	}
	return finish("test_slice");
}

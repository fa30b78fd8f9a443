/* The poll's clock (uroce_clock_ns, src/core/progress.c): CLOCK_MONOTONIC
 * extrapolated with the TSC for at most 16 us per real reading.
 *
 * - it stays within 2 us of CLOCK_MONOTONIC read just before and after it,
 *   and never goes back within a thread;
 * - once calibrated (50 ms after the first reading) and where the kernel
 *   keeps time with the TSC, most calls read no clock at all: this
 *   executable's clock_gettime counts the library's reads (it is linked
 *   statically, so its calls come here);
 * - with UROCE_FAST_CLOCK=0 every call is a real reading. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uroce.h"

#include "check.h"

static unsigned long reads;

int clock_gettime(clockid_t id, struct timespec *ts)
{
	reads++;
	return (int)syscall(SYS_clock_gettime, id, ts);
}

static uint64_t mono(void)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool tsc_source(void)
{
	char buf[16] = {0};
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	return n >= 3 && !strncmp(buf, "tsc", 3);
}

/* n calls spread over ms milliseconds: the largest error against the
 * real clock around each call, the calls that went back, the reads. */
static void run(unsigned n, unsigned ms, uint64_t *err, unsigned *back, unsigned long *nreads)
{
	uint64_t last = 0, t_end = mono() + (uint64_t)ms * 1000000ull;
	unsigned long r0 = reads;

	*err = 0;
	*back = 0;
	for (unsigned i = 0; i < n || mono() < t_end; i++) {
		uint64_t a = mono(), c = uroce_clock_ns(), b = mono();

		if (c < last)
			(*back)++;
		last = c;
		if (c + 2000 < a && a - c > *err)
			*err = a - c;
		if (c > b + 2000 && c - b > *err)
			*err = c - b;
	}
	*nreads = reads - r0;
}

int main(void)
{
	uint64_t err;
	unsigned back;
	unsigned long n;
	pid_t pid = fork();

	if (pid == 0) { /* off: every call a real reading */
		setenv("UROCE_FAST_CLOCK", "0", 1);
		run(0, 80, &err, &back, &n); /* past the calibration */
		run(20000, 0, &err, &back, &n);
		_exit(n >= 20000 && !back ? 0 : 1);
	}
	{
		int st = 0;

		waitpid(pid, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "UROCE_FAST_CLOCK=0: not every call read the clock (status %d)", st);
	}
	run(0, 80, &err, &back, &n); /* calibrates */
	CHECK(!back, "%u readings went back during the calibration", back);
	CHECK(err <= 2000, "off by %llu ns during the calibration", (unsigned long long)err);
	run(200000, 0, &err, &back, &n);
	CHECK(!back, "%u readings went back", back);
	CHECK(err <= 2000, "off by %llu ns", (unsigned long long)err);
	if (tsc_source())
		CHECK(n < 200000 / 4, "%lu real readings for 200000 calls", n);
	else
		printf("clocksource is not tsc: every call reads the clock (%lu)\n", n);
	printf("test_clock: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* The unit tests' assertion: CHECK(cond, fmt, ...) counts a pass, or counts
 * a failure and prints where and why (the first 60 failures, so a test that
 * checks a long loop of inputs stays readable).  Each test ends with
 * "NAME: N passed, N failed" and exits non-zero when anything failed. */
#ifndef UROCE_TEST_CHECK_H
#define UROCE_TEST_CHECK_H

#include <stdio.h>

static unsigned int passed, failed;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (cond) {                                                                        \
			passed++;                                                                  \
		} else {                                                                           \
			failed++;                                                                  \
			if (failed <= 60) {                                                        \
				printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);             \
				printf(__VA_ARGS__);                                               \
				printf("\n");                                                      \
				fflush(stdout);                                                    \
			}                                                                          \
		}                                                                                  \
	} while (0)

#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "uroce_log.h"

int uroce_log_level = UROCE_LOG_WARN;

void uroce_log_init(void)
{
	static const char *names[] = {"none", "error", "warn", "info", "debug", "trace"};
	const char *v = getenv("UROCE_LOG");

	if (!v || !*v)
		return;
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(v, names[i])) {
			uroce_log_level = (int)i;
			return;
		}
	if (v[0] >= '0' && v[0] <= '5')
		uroce_log_level = v[0] - '0';
}

void uroce_log_print(enum uroce_log_level lvl, const char *func, const char *fmt, ...)
{
	static const char *tag[] = {"", "error", "warn", "info", "debug", "trace"};
	char buf[1024];
	struct timespec ts;
	va_list ap;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	n = snprintf(buf, sizeof(buf), "uroce[%d] %ld.%06ld %s %s: ", (int)getpid(),
		     (long)ts.tv_sec, ts.tv_nsec / 1000, tag[lvl], func);
	if (n < 0 || n >= (int)sizeof(buf))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", buf);
}

bool uroce_env_on(const char *name, int *cache)
{
	if (*cache < 0) {
		const char *v = getenv(name);

		*cache = !(v && (!strcmp(v, "0") || !strcasecmp(v, "off")));
	}
	return *cache;
}

uint64_t uroce_env_num(const char *name, uint64_t dflt, uint64_t *cache)
{
	if (*cache == UINT64_MAX) {
		const char *v = getenv(name);
		char *end = NULL;
		unsigned long long n = v ? strtoull(v, &end, 0) : 0;

		*cache = !v || end == v ? dflt : n >= UINT64_MAX ? UINT64_MAX - 1 : (uint64_t)n;
	}
	return *cache;
}

/* Logging to stderr, controlled by UROCE_LOG=error|warn|info|debug|trace.
 * Every error the library returns to the application should be explainable
 * by a debug line naming the rule that was broken. */
#ifndef UROCE_LOG_H
#define UROCE_LOG_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

enum uroce_log_level {
	UROCE_LOG_NONE = 0,
	UROCE_LOG_ERROR,
	UROCE_LOG_WARN,
	UROCE_LOG_INFO,
	UROCE_LOG_DEBUG,
	UROCE_LOG_TRACE,
};

extern int uroce_log_level;

void uroce_log_init(void);
/* A switch that is on unless the environment variable name is "0" or
 * "off"; read once into *cache (-1: not read yet). */
bool uroce_env_on(const char *name, int *cache);
/* A number (strtoull, any base) from the environment variable name, dflt
 * when it is unset or not a number; read once into *cache (UINT64_MAX: not
 * read yet).  The caller checks its range. */
uint64_t uroce_env_num(const char *name, uint64_t dflt, uint64_t *cache);
void uroce_log_print(enum uroce_log_level lvl, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define uroce_log(lvl, ...)                                                                        \
	((lvl) <= uroce_log_level ? uroce_log_print((lvl), __func__, __VA_ARGS__) : (void)0)

#define ur_err(...)   uroce_log(UROCE_LOG_ERROR, __VA_ARGS__)
#define ur_warn(...)  uroce_log(UROCE_LOG_WARN, __VA_ARGS__)
#define ur_info(...)  uroce_log(UROCE_LOG_INFO, __VA_ARGS__)
#define ur_dbg(...)   uroce_log(UROCE_LOG_DEBUG, __VA_ARGS__)
#define ur_trace(...) uroce_log(UROCE_LOG_TRACE, __VA_ARGS__)

/* Log why at debug level, set errno and evaluate to -err. */
#define ur_fail(err, ...) (ur_dbg(__VA_ARGS__), errno = (err), -(err))

#endif

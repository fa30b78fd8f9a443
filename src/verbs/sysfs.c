/* sysfs helpers exported by libibverbs (IBVERBS_1.0, IBVERBS_PRIVATE_34).
 *
 * librdmacm uses ibv_get_sysfs_path()/ibv_read_sysfs_file() to read
 * /sys/class/misc/rdma_cm/abi_version and ibv_devinfo reads a few files with
 * them; providers use ibv_read_ibdev_sysfs_file() on their own devices.
 * uroce devices have no sysfs presence, but these helpers are plain file
 * readers and keep rdma-core 44's semantics for any path they are given.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "uroce_export.h"
#include "uroce_log.h"

/* From rdma-core's driver.h; opaque to uroce, which never creates one. */
struct verbs_sysfs_dev;

static const char *sysfs_root = "/sys";
static pthread_once_t sysfs_once = PTHREAD_ONCE_INIT;

static void sysfs_root_init(void)
{
	const char *env = NULL;
	char *dup;
	size_t len;

	/* Like rdma-core: SYSFS_PATH is only trusted when not set[ug]id. */
	if (getuid() == geteuid() && getgid() == getegid())
		env = getenv("SYSFS_PATH");
	if (!env)
		return;

	dup = strndup(env, IBV_SYSFS_PATH_MAX);
	if (!dup)
		return;
	len = strlen(dup);
	while (len > 0 && dup[len - 1] == '/')
		dup[--len] = '\0';
	sysfs_root = dup; /* lives for the life of the process */
}

UROCE_EXPORT const char *ibv_get_sysfs_path(void)
{
	pthread_once(&sysfs_once, sysfs_root_init);
	return sysfs_root;
}

/*
 * Read at most size bytes of path into buf.  A trailing newline is replaced
 * by a NUL and not counted; otherwise the data is NUL terminated if there is
 * room, and a read that fills buf with no room for the NUL fails (the caller
 * would otherwise get an unterminated string).  Returns the length or -1
 * with errno set.  An empty file returns 0 and leaves buf untouched.
 */
static int read_text_file(const char *path, char *buf, size_t size)
{
	ssize_t len;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	do {
		len = read(fd, buf, size);
	} while (len < 0 && errno == EINTR);
	err = errno;
	close(fd);
	if (len < 0) {
		errno = err;
		return -1;
	}
	if (len == 0)
		return 0;

	if (buf[len - 1] == '\n') {
		buf[--len] = '\0';
	} else if ((size_t)len < size) {
		buf[len] = '\0';
	} else {
		errno = EOVERFLOW;
		return -1;
	}
	return (int)len;
}

UROCE_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char *path;
	int ret;

	if (asprintf(&path, "%s/%s", dir, file) < 0)
		return -1;
	ret = read_text_file(path, buf, size);
	free(path);
	return ret;
}

/*
 * rdma-core reads <sysfs_dev->ibdev_path>/<fnfmt...>.  A verbs_sysfs_dev is
 * only ever created by rdma-core's device discovery, which uroce replaces:
 * no provider can hold one of ours, so there is no file to read.
 */
UROCE_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
					   struct verbs_sysfs_dev *sysfs_dev, const char *fnfmt,
					   ...)
{
	(void)buf;
	(void)size;
	(void)fnfmt;

	if (!sysfs_dev) {
		ur_dbg("read_ibdev_sysfs_file: sysfs_dev is NULL");
		errno = EINVAL;
		return -1;
	}
	ur_dbg("not supported by uroce (no sysfs device)");
	errno = ENOENT;
	return -1;
}

/* liburoce-sysfs.so: show uroce devices where rdma-core's world looks for
 * them (/sys/class/infiniband, /sys/class/infiniband_verbs, /dev/infiniband)
 * to unmodified programs, without root.
 *
 * `uroce run` writes a tree of those files with uroce's real values
 * (uroce-sysfs-tree) into a private directory, exports its path as
 * UROCE_SYSFS_ROOT and preloads this library.  Every file-name call below
 * whose absolute path starts with one of the served prefixes is redone on
 * <root><path>; every other path, and every call when UROCE_SYSFS_ROOT is
 * unset, goes to libc untouched.  The real call does the work, so errno is
 * the kernel's for the tree (ENOENT for a file uroce does not provide).
 *
 * /dev/infiniband/uverbsN is a symlink to /dev/null in the tree (a
 * character device anyone may open read-write, which is what UCX checks);
 * stat results for it are patched to look like the uverbs device
 * (S_IFCHR, 231:192+N) that the kernel would show.
 *
 * No lock: the only state is the root (set once) and the libc entry points,
 * resolved once each with dlsym(RTLD_NEXT) and stored atomically.
 * Design and limits: docs/design.md, "Device visibility".
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define SHIM_EXPORT __attribute__((visibility("default")))

static const char *const shim_prefixes[] = {
    "/sys/class/infiniband",
    "/sys/class/infiniband_verbs",
    "/dev/infiniband",
};

#define SHIM_UVERBS_DIR	   "/dev/infiniband/uverbs"
#define SHIM_UVERBS_MAJOR  231
#define SHIM_UVERBS_MINOR0 192

static char shim_root[PATH_MAX];
static size_t shim_root_len;
static pthread_once_t shim_once = PTHREAD_ONCE_INIT;

static void shim_init(void)
{
	const char *root = getenv("UROCE_SYSFS_ROOT");
	size_t len;

	if (!root || root[0] != '/')
		return;
	len = strlen(root);
	while (len > 1 && root[len - 1] == '/')
		len--;
	if (len >= sizeof(shim_root) - 64)
		return;
	memcpy(shim_root, root, len);
	shim_root[len] = '\0';
	shim_root_len = len;
}

static int shim_prefix_match(const char *path)
{
	size_t i, n;

	for (i = 0; i < sizeof(shim_prefixes) / sizeof(shim_prefixes[0]); i++) {
		n = strlen(shim_prefixes[i]);
		if (!strncmp(path, shim_prefixes[i], n) && (path[n] == '\0' || path[n] == '/'))
			return 1;
	}
	return 0;
}

/*
 * If path is served, write <root><path> into buf and return buf; return
 * path itself otherwise.  NULL (errno ENAMETOOLONG) if it does not fit.
 */
static const char *shim_map(const char *path, char *buf)
{
	size_t len;

	pthread_once(&shim_once, shim_init);
	if (!shim_root_len || !path || path[0] != '/' || !shim_prefix_match(path))
		return path;
	len = strlen(path);
	if (shim_root_len + len >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	memcpy(buf, shim_root, shim_root_len);
	memcpy(buf + shim_root_len, path, len + 1);
	return buf;
}

/* For the *at calls: only absolute paths are mapped (a dirfd opened on a
 * mapped directory already points into the tree). */
static const char *shim_map_at(int dirfd, const char *path, char *buf)
{
	(void)dirfd;
	return shim_map(path, buf);
}

/* The uverbs index of a mapped /dev/infiniband/uverbsN, or -1. */
static int shim_uverbs_index(const char *path, const char *mapped)
{
	const char *p;
	char *end;
	long n;

	if (path == mapped || strncmp(path, SHIM_UVERBS_DIR, sizeof(SHIM_UVERBS_DIR) - 1))
		return -1;
	p = path + sizeof(SHIM_UVERBS_DIR) - 1;
	n = strtol(p, &end, 10);
	if (end == p || *end || n < 0 || n > 63)
		return -1;
	return (int)n;
}

static void shim_fix_stat(const char *path, const char *mapped, struct stat *st)
{
	int n = shim_uverbs_index(path, mapped);

	if (n < 0)
		return;
	st->st_mode = S_IFCHR | 0666;
	st->st_size = 0;
	st->st_rdev = makedev(SHIM_UVERBS_MAJOR, SHIM_UVERBS_MINOR0 + n);
}

static void shim_fix_statx(const char *path, const char *mapped, struct statx *stx)
{
	int n = shim_uverbs_index(path, mapped);

	if (n < 0)
		return;
	stx->stx_mode = S_IFCHR | 0666;
	stx->stx_size = 0;
	stx->stx_rdev_major = SHIM_UVERBS_MAJOR;
	stx->stx_rdev_minor = SHIM_UVERBS_MINOR0 + n;
}

/* libc's entry point NAME, looked up once. */
#define SHIM_REAL(name, type)                                                                      \
	static type shim_real_##name;                                                              \
	static type shim_get_##name(void)                                                          \
	{                                                                                          \
		type fn = __atomic_load_n(&shim_real_##name, __ATOMIC_ACQUIRE);                    \
		if (!fn) {                                                                         \
			fn = (type)dlsym(RTLD_NEXT, #name);                                        \
			__atomic_store_n(&shim_real_##name, fn, __ATOMIC_RELEASE);                 \
		}                                                                                  \
		return fn;                                                                         \
	}

/* Entry points absent from this libc (old __xstat forms) fail cleanly. */
#define SHIM_CALL(name, fail, ...)                                                                 \
	do {                                                                                       \
		if (!shim_get_##name()) {                                                          \
			errno = ENOSYS;                                                            \
			return fail;                                                               \
		}                                                                                  \
		return shim_get_##name()(__VA_ARGS__);                                             \
	} while (0)

#define SHIM_MAP_OR_FAIL(var, path, fail)                                                          \
	char var##_buf[PATH_MAX];                                                                  \
	const char *var = shim_map(path, var##_buf);                                               \
	if (!var)                                                                                  \
	return fail

/* ---- open ---------------------------------------------------------------------- */

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*open2_fn)(const char *, int);
typedef int (*openat2_fn)(int, const char *, int);
SHIM_REAL(open, open_fn)
SHIM_REAL(open64, open_fn)
SHIM_REAL(openat, openat_fn)
SHIM_REAL(openat64, openat_fn)
SHIM_REAL(__open_2, open2_fn)
SHIM_REAL(__open64_2, open2_fn)
SHIM_REAL(__openat_2, openat2_fn)
SHIM_REAL(__openat64_2, openat2_fn)

static mode_t shim_mode_arg(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

#define SHIM_OPEN(name)                                                                            \
	SHIM_EXPORT int name(const char *path, int flags, ...)                                     \
	{                                                                                          \
		va_list ap;                                                                        \
		mode_t mode;                                                                       \
		va_start(ap, flags);                                                               \
		mode = shim_mode_arg(flags, ap);                                                   \
		va_end(ap);                                                                        \
		SHIM_MAP_OR_FAIL(p, path, -1);                                                     \
		SHIM_CALL(name, -1, p, flags, mode);                                               \
	}
#define SHIM_OPENAT(name)                                                                          \
	SHIM_EXPORT int name(int dirfd, const char *path, int flags, ...)                          \
	{                                                                                          \
		va_list ap;                                                                        \
		mode_t mode;                                                                       \
		char buf[PATH_MAX];                                                                \
		const char *p = shim_map_at(dirfd, path, buf);                                     \
		va_start(ap, flags);                                                               \
		mode = shim_mode_arg(flags, ap);                                                   \
		va_end(ap);                                                                        \
		if (!p)                                                                            \
			return -1;                                                                 \
		SHIM_CALL(name, -1, dirfd, p, flags, mode);                                        \
	}
SHIM_OPEN(open)
SHIM_OPEN(open64)
SHIM_OPENAT(openat)
SHIM_OPENAT(openat64)

SHIM_EXPORT int __open_2(const char *path, int flags)
{
	SHIM_MAP_OR_FAIL(p, path, -1);
	SHIM_CALL(__open_2, -1, p, flags);
}

SHIM_EXPORT int __open64_2(const char *path, int flags)
{
	SHIM_MAP_OR_FAIL(p, path, -1);
	SHIM_CALL(__open64_2, -1, p, flags);
}

SHIM_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	char buf[PATH_MAX];
	const char *p = shim_map_at(dirfd, path, buf);

	if (!p)
		return -1;
	SHIM_CALL(__openat_2, -1, dirfd, p, flags);
}

SHIM_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	char buf[PATH_MAX];
	const char *p = shim_map_at(dirfd, path, buf);

	if (!p)
		return -1;
	SHIM_CALL(__openat64_2, -1, dirfd, p, flags);
}

typedef FILE *(*fopen_fn)(const char *, const char *);
SHIM_REAL(fopen, fopen_fn)
SHIM_REAL(fopen64, fopen_fn)

SHIM_EXPORT FILE *fopen(const char *path, const char *mode)
{
	SHIM_MAP_OR_FAIL(p, path, NULL);
	SHIM_CALL(fopen, NULL, p, mode);
}

SHIM_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	SHIM_MAP_OR_FAIL(p, path, NULL);
	SHIM_CALL(fopen64, NULL, p, mode);
}

/* ---- stat ------------------------------------------------------------------------ */

typedef int (*stat_fn)(const char *, struct stat *);
typedef int (*fstatat_fn)(int, const char *, struct stat *, int);
typedef int (*xstat_fn)(int, const char *, struct stat *);
typedef int (*fxstatat_fn)(int, int, const char *, struct stat *, int);
typedef int (*statx_fn)(int, const char *, int, unsigned int, struct statx *);
SHIM_REAL(stat, stat_fn)
SHIM_REAL(stat64, stat_fn)
SHIM_REAL(lstat, stat_fn)
SHIM_REAL(lstat64, stat_fn)
SHIM_REAL(fstatat, fstatat_fn)
SHIM_REAL(fstatat64, fstatat_fn)
SHIM_REAL(__xstat, xstat_fn)
SHIM_REAL(__xstat64, xstat_fn)
SHIM_REAL(__lxstat, xstat_fn)
SHIM_REAL(__lxstat64, xstat_fn)
SHIM_REAL(__fxstatat, fxstatat_fn)
SHIM_REAL(__fxstatat64, fxstatat_fn)
SHIM_REAL(statx, statx_fn)

/* struct stat64 is struct stat on the 64-bit ABIs this is built for. */
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "stat64 layout");

#define SHIM_STAT(name)                                                                            \
	SHIM_EXPORT int name(const char *path, struct stat *st)                                    \
	{                                                                                          \
		return shim_stat_with(shim_get_##name, path, st);                                  \
	}
#define SHIM_XSTAT(name)                                                                           \
	SHIM_EXPORT int name(int ver, const char *path, struct stat *st)                           \
	{                                                                                          \
		int ret;                                                                           \
		SHIM_MAP_OR_FAIL(p, path, -1);                                                     \
		if (!shim_get_##name()) {                                                          \
			errno = ENOSYS;                                                            \
			return -1;                                                                 \
		}                                                                                  \
		ret = shim_get_##name()(ver, p, st);                                               \
		if (!ret)                                                                          \
			shim_fix_stat(path, p, st);                                                \
		return ret;                                                                        \
	}
#define SHIM_FSTATAT(name, ...)                                                                    \
	{                                                                                          \
		char buf[PATH_MAX];                                                                \
		const char *p = shim_map_at(dirfd, path, buf);                                     \
		int ret;                                                                           \
		if (!p)                                                                            \
			return -1;                                                                 \
		if (!shim_get_##name()) {                                                          \
			errno = ENOSYS;                                                            \
			return -1;                                                                 \
		}                                                                                  \
		ret = shim_get_##name()(__VA_ARGS__);                                              \
		if (!ret)                                                                          \
			shim_fix_stat(path, p, st);                                                \
		return ret;                                                                        \
	}

/* Declared here: glibc >= 2.33 exports these only for old binaries. */
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat *st, int flags);

static int shim_stat_with(stat_fn (*get)(void), const char *path, struct stat *st)
{
	int ret;
	SHIM_MAP_OR_FAIL(p, path, -1);

	if (!get()) {
		errno = ENOSYS;
		return -1;
	}
	ret = get()(p, st);
	if (!ret)
		shim_fix_stat(path, p, st);
	return ret;
}

SHIM_STAT(stat)
SHIM_STAT(lstat)
SHIM_XSTAT(__xstat)
SHIM_XSTAT(__xstat64)
SHIM_XSTAT(__lxstat)
SHIM_XSTAT(__lxstat64)

SHIM_EXPORT int stat64(const char *path, struct stat64 *st64)
{
	return shim_stat_with(shim_get_stat64, path, (struct stat *)st64);
}

SHIM_EXPORT int lstat64(const char *path, struct stat64 *st64)
{
	return shim_stat_with(shim_get_lstat64, path, (struct stat *)st64);
}

SHIM_EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
    SHIM_FSTATAT(fstatat, dirfd, p, st, flags)

	SHIM_EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st64, int flags)
{
	struct stat *st = (struct stat *)st64;
	SHIM_FSTATAT(fstatat64, dirfd, p, st, flags)
}

SHIM_EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
    SHIM_FSTATAT(__fxstatat, ver, dirfd, p, st, flags)

	SHIM_EXPORT
    int __fxstatat64(int ver, int dirfd, const char *path, struct stat *st, int flags)
	SHIM_FSTATAT(__fxstatat64, ver, dirfd, p, st, flags)

	    SHIM_EXPORT
    int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *stx)
{
	char buf[PATH_MAX];
	const char *p = shim_map_at(dirfd, path, buf);
	int ret;

	if (!p)
		return -1;
	if (!shim_get_statx()) {
		errno = ENOSYS;
		return -1;
	}
	ret = shim_get_statx()(dirfd, p, flags, mask, stx);
	if (!ret)
		shim_fix_statx(path, p, stx);
	return ret;
}

/* ---- access, readlink, directories, realpath --------------------------------------- */

typedef int (*access_fn)(const char *, int);
typedef int (*faccessat_fn)(int, const char *, int, int);
typedef ssize_t (*readlink_fn)(const char *, char *, size_t);
typedef ssize_t (*readlinkat_fn)(int, const char *, char *, size_t);
typedef ssize_t (*readlink_chk_fn)(const char *, char *, size_t, size_t);
typedef ssize_t (*readlinkat_chk_fn)(int, const char *, char *, size_t, size_t);
typedef DIR *(*opendir_fn)(const char *);
typedef int (*scandir_fn)(const char *, struct dirent ***, int (*)(const struct dirent *),
			  int (*)(const struct dirent **, const struct dirent **));
typedef int (*scandir64_fn)(const char *, struct dirent64 ***, int (*)(const struct dirent64 *),
			    int (*)(const struct dirent64 **, const struct dirent64 **));
typedef char *(*realpath_fn)(const char *, char *);
typedef char *(*realpath_chk_fn)(const char *, char *, size_t);
typedef char *(*canon_fn)(const char *);
SHIM_REAL(access, access_fn)
SHIM_REAL(faccessat, faccessat_fn)
SHIM_REAL(readlink, readlink_fn)
SHIM_REAL(readlinkat, readlinkat_fn)
SHIM_REAL(__readlink_chk, readlink_chk_fn)
SHIM_REAL(__readlinkat_chk, readlinkat_chk_fn)
SHIM_REAL(opendir, opendir_fn)
SHIM_REAL(scandir, scandir_fn)
SHIM_REAL(scandir64, scandir64_fn)
SHIM_REAL(realpath, realpath_fn)
SHIM_REAL(__realpath_chk, realpath_chk_fn)
SHIM_REAL(canonicalize_file_name, canon_fn)

ssize_t __readlink_chk(const char *path, char *buf, size_t len, size_t buflen);
ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t len, size_t buflen);
char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen);

SHIM_EXPORT int access(const char *path, int mode)
{
	SHIM_MAP_OR_FAIL(p, path, -1);
	SHIM_CALL(access, -1, p, mode);
}

SHIM_EXPORT int faccessat(int dirfd, const char *path, int mode, int flags)
{
	char buf[PATH_MAX];
	const char *p = shim_map_at(dirfd, path, buf);

	if (!p)
		return -1;
	SHIM_CALL(faccessat, -1, dirfd, p, mode, flags);
}

SHIM_EXPORT ssize_t readlink(const char *path, char *buf, size_t len)
{
	SHIM_MAP_OR_FAIL(p, path, -1);
	SHIM_CALL(readlink, -1, p, buf, len);
}

SHIM_EXPORT ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t len)
{
	char pbuf[PATH_MAX];
	const char *p = shim_map_at(dirfd, path, pbuf);

	if (!p)
		return -1;
	SHIM_CALL(readlinkat, -1, dirfd, p, buf, len);
}

SHIM_EXPORT ssize_t __readlink_chk(const char *path, char *buf, size_t len, size_t buflen)
{
	SHIM_MAP_OR_FAIL(p, path, -1);
	SHIM_CALL(__readlink_chk, -1, p, buf, len, buflen);
}

SHIM_EXPORT ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t len,
				     size_t buflen)
{
	char pbuf[PATH_MAX];
	const char *p = shim_map_at(dirfd, path, pbuf);

	if (!p)
		return -1;
	SHIM_CALL(__readlinkat_chk, -1, dirfd, p, buf, len, buflen);
}

SHIM_EXPORT DIR *opendir(const char *path)
{
	SHIM_MAP_OR_FAIL(p, path, NULL);
	SHIM_CALL(opendir, NULL, p);
}

SHIM_EXPORT int scandir(const char *path, struct dirent ***list, int (*sel)(const struct dirent *),
			int (*cmp)(const struct dirent **, const struct dirent **))
{
	SHIM_MAP_OR_FAIL(p, path, -1);
	SHIM_CALL(scandir, -1, p, list, sel, cmp);
}

SHIM_EXPORT int scandir64(const char *path, struct dirent64 ***list,
			  int (*sel)(const struct dirent64 *),
			  int (*cmp)(const struct dirent64 **, const struct dirent64 **))
{
	SHIM_MAP_OR_FAIL(p, path, -1);
	SHIM_CALL(scandir64, -1, p, list, sel, cmp);
}

/*
 * A resolved name inside the tree is given back as the path the program
 * asked about (the tree's root removed), so that it can be mapped again.
 */
static char *shim_unmap(char *res, const char *path, const char *mapped)
{
	if (res && path != mapped && !strncmp(res, shim_root, shim_root_len) &&
	    res[shim_root_len] == '/')
		memmove(res, res + shim_root_len, strlen(res + shim_root_len) + 1);
	return res;
}

SHIM_EXPORT char *realpath(const char *path, char *resolved)
{
	SHIM_MAP_OR_FAIL(p, path, NULL);
	if (!shim_get_realpath()) {
		errno = ENOSYS;
		return NULL;
	}
	return shim_unmap(shim_get_realpath()(p, resolved), path, p);
}

SHIM_EXPORT char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen)
{
	SHIM_MAP_OR_FAIL(p, path, NULL);
	if (!shim_get___realpath_chk()) {
		errno = ENOSYS;
		return NULL;
	}
	return shim_unmap(shim_get___realpath_chk()(p, resolved, resolvedlen), path, p);
}

SHIM_EXPORT char *canonicalize_file_name(const char *path)
{
	SHIM_MAP_OR_FAIL(p, path, NULL);
	if (!shim_get_canonicalize_file_name()) {
		errno = ENOSYS;
		return NULL;
	}
	return shim_unmap(shim_get_canonicalize_file_name()(p), path, p);
}

/* `cd /sys/class/infiniband` in a shell (ibstatus); getcwd() then names the
 * tree, which every served path resolves to as well. */
typedef int (*chdir_fn)(const char *);
SHIM_REAL(chdir, chdir_fn)

SHIM_EXPORT int chdir(const char *path)
{
	SHIM_MAP_OR_FAIL(p, path, -1);
	SHIM_CALL(chdir, -1, p);
}

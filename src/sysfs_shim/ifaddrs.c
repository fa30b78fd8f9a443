/* getifaddrs() as libfabric's verbs provider needs it on uroce.
 *
 * libfabric (1.17, prov/verbs vrb_getifaddrs) builds its list of FI_EP_MSG
 * domains from getifaddrs(), skipping every interface flagged IFF_LOOPBACK:
 * on real hardware no RDMA netdev is a loopback interface.  uroce's loopback
 * device uroce_lo is backed by lo, and libfabric's fi_getinfo() without a
 * node binds its rdma_cm probe to "localhost" (uroce_lo), so without this
 * the verbs provider offers no MSG endpoint and no verbs;ofi_rxm at all on
 * one host.
 *
 * For a caller inside libfabric (the first frame outside this library and a
 * sanitizer runtime lies in a library whose file name starts with
 * "libfabric"), an interface that backs a uroce device
 * in the served tree (<root>/sys/class/infiniband/uroce_<ifname> exists)
 * loses IFF_LOOPBACK in the list returned.  Every other caller, every other
 * interface, and every call without UROCE_SYSFS_ROOT get libc's list
 * untouched.  The list is libc's own (freeifaddrs() frees it as usual).
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHIM_EXPORT __attribute__((visibility("default")))
#define SHIM_FRAMES 8

typedef int (*shim_getifaddrs_fn)(struct ifaddrs **);

static shim_getifaddrs_fn shim_real_getifaddrs(void)
{
	static shim_getifaddrs_fn real;
	shim_getifaddrs_fn fn = __atomic_load_n(&real, __ATOMIC_ACQUIRE);

	if (!fn) {
		fn = (shim_getifaddrs_fn)dlsym(RTLD_NEXT, "getifaddrs");
		__atomic_store_n(&real, fn, __ATOMIC_RELEASE);
	}
	return fn;
}

static const char *shim_object_of(void *addr)
{
	Dl_info info;
	const char *base;

	if (!dladdr(addr, &info) || !info.dli_fname)
		return "";
	base = strrchr(info.dli_fname, '/');
	return base ? base + 1 : info.dli_fname;
}

static bool shim_starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* The first frame outside this library and a sanitizer runtime (ASan
 * intercepts getifaddrs and calls on to us) is libfabric's.  backtrace()
 * unwinds with the tables, so it needs no frame pointers. */
static bool shim_caller_is_libfabric(void)
{
	void *frames[SHIM_FRAMES];
	int n = backtrace(frames, SHIM_FRAMES);

	for (int i = 1; i < n; i++) {
		const char *obj = shim_object_of(frames[i]);

		if (shim_starts(obj, "liburoce-sysfs") || shim_starts(obj, "libasan") ||
		    shim_starts(obj, "libclang_rt") || shim_starts(obj, "libubsan"))
			continue;
		return shim_starts(obj, "libfabric");
	}
	return false;
}

static int shim_backs_uroce_device(const char *root, const char *ifname)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/sys/class/infiniband/uroce_%s", root, ifname);

	return n > 0 && (size_t)n < sizeof(path) && access(path, F_OK) == 0;
}

SHIM_EXPORT int getifaddrs(struct ifaddrs **list)
{
	shim_getifaddrs_fn real = shim_real_getifaddrs();
	const char *root = getenv("UROCE_SYSFS_ROOT");
	int saved, ret;

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	ret = real(list);
	if (ret || !root || root[0] != '/' || !shim_caller_is_libfabric())
		return ret;
	saved = errno;
	for (struct ifaddrs *ifa = *list; ifa; ifa = ifa->ifa_next)
		if ((ifa->ifa_flags & IFF_LOOPBACK) && ifa->ifa_name &&
		    shim_backs_uroce_device(root, ifa->ifa_name))
			ifa->ifa_flags &= ~(unsigned int)IFF_LOOPBACK;
	errno = saved;
	return 0;
}

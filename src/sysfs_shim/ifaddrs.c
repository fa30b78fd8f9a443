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
 * For a caller inside libfabric (the return address lies in a library whose
 * file name starts with "libfabric"), an interface that backs a uroce device
 * in the served tree (<root>/sys/class/infiniband/uroce_<ifname> exists)
 * loses IFF_LOOPBACK in the list returned.  Every other caller, every other
 * interface, and every call without UROCE_SYSFS_ROOT get libc's list
 * untouched.  The list is libc's own (freeifaddrs() frees it as usual).
 */
#include <dlfcn.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHIM_EXPORT __attribute__((visibility("default")))

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

static int shim_caller_is_libfabric(const void *ret_addr)
{
	Dl_info info;
	const char *base;

	if (!dladdr(ret_addr, &info) || !info.dli_fname)
		return 0;
	base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	return !strncmp(base, "libfabric", strlen("libfabric"));
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
	if (ret || !root || root[0] != '/' ||
	    !shim_caller_is_libfabric(__builtin_return_address(0)))
		return ret;
	saved = errno;
	for (struct ifaddrs *ifa = *list; ifa; ifa = ifa->ifa_next)
		if ((ifa->ifa_flags & IFF_LOOPBACK) && ifa->ifa_name &&
		    shim_backs_uroce_device(root, ifa->ifa_name))
			ifa->ifa_flags &= ~(unsigned int)IFF_LOOPBACK;
	errno = saved;
	return 0;
}

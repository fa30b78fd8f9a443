/* On-demand paging: IBV_ACCESS_ON_DEMAND MRs, explicit and implicit, and
 * ibv_advise_mr.
 *
 * An ODP MR pins nothing and checks nothing at registration: its pages may
 * be unmapped, or not yet mapped, when a packet touches them.  A NIC takes
 * a page fault and resolves it through the kernel (or fails the access);
 * uroce copies through the kernel instead of with memcpy: process_vm_readv
 * and process_vm_writev on its own process fault pages in as the CPU would
 * and return EFAULT where the CPU would raise SIGSEGV.  The data path then
 * completes with the error hardware gives: the responder NAKs with a remote
 * access error, a local access is a local protection error.  Other MRs keep
 * their memcpy: the only cost there is a test of mr->odp
 * (uroce_mr_read/uroce_mr_write in uroce.h).
 *
 * Atomics cannot be done by the kernel: the target's page is first faulted
 * in writable with madvise(MADV_POPULATE_WRITE), which fails on a page not
 * mapped writable, then the CPU's atomic runs.  A page the program unmaps
 * from another thread between the two is a SIGSEGV, as it would be for any
 * of its own accesses (docs/memory.md).
 *
 * Where process_vm_* is not allowed (a seccomp filter), the copies fall
 * back to the same populate-then-memcpy check as atomics.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "uroce.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static atomic_int odp_pid;    /* getpid(), reset in a forked child */
static atomic_bool odp_no_vm; /* process_vm_* refused: populate + memcpy */
static pthread_once_t odp_once = PTHREAD_ONCE_INIT;

static void odp_atfork_child(void)
{
	atomic_store(&odp_pid, 0);
}

static void odp_init(void)
{
	pthread_atfork(NULL, NULL, odp_atfork_child);
}

static pid_t self_pid(void)
{
	pid_t p = atomic_load_explicit(&odp_pid, memory_order_relaxed);

	if (!p) {
		pthread_once(&odp_once, odp_init);
		p = getpid();
		atomic_store(&odp_pid, p);
	}
	return p;
}

/* Fault [p, p+len) in (readable, or writable): false when some page of it
 * is not mapped so. */
static bool populate(const void *p, size_t len, bool write)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)p & ~((uintptr_t)pg - 1);
	uintptr_t end = (uintptr_t)p + len;

	if (end < (uintptr_t)p)
		return false;
	return madvise((void *)start, end - start,
		       write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0;
}

/* One process_vm_readv/writev of len bytes: 1 done, 0 fault, -1 refused. */
static int vm_copy(void *local, const void *remote, size_t len, bool write)
{
	struct iovec l = {.iov_base = local, .iov_len = len};
	struct iovec r = {.iov_base = (void *)remote, .iov_len = len};
	ssize_t n;

	n = write ? process_vm_writev(self_pid(), &l, 1, &r, 1, 0)
		  : process_vm_readv(self_pid(), &l, 1, &r, 1, 0);
	if (n == (ssize_t)len)
		return 1;
	if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
		if (!atomic_exchange(&odp_no_vm, true))
			ur_warn("ODP: process_vm_readv/writev refused (%s): ODP MRs are checked "
				"with madvise instead; a page unmapped during a copy can fault",
				strerror(errno));
		return -1;
	}
	return 0; /* EFAULT, or a partial copy: a page is missing */
}

bool uroce_odp_read(void *dst, const void *mr_src, size_t len)
{
	int r;

	if (!len)
		return true;
	if (!atomic_load_explicit(&odp_no_vm, memory_order_relaxed)) {
		r = vm_copy(dst, mr_src, len, false);
		if (r >= 0)
			return r;
	}
	if (!populate(mr_src, len, false))
		return false;
	memcpy(dst, mr_src, len);
	return true;
}

bool uroce_odp_write(void *mr_dst, const void *src, size_t len)
{
	int r;

	if (!len)
		return true;
	if (!atomic_load_explicit(&odp_no_vm, memory_order_relaxed)) {
		r = vm_copy((void *)src, mr_dst, len, true);
		if (r >= 0)
			return r;
	}
	if (!populate(mr_dst, len, true))
		return false;
	memcpy(mr_dst, src, len);
	return true;
}

bool uroce_odp_atomic_ok(void *p)
{
	return populate(p, 8, true);
}

/* Registration of an ODP MR: the range need not be mapped.  Implicit ODP
 * is addr NULL, length SIZE_MAX: the whole address space, iova = address. */
int uroce_odp_reg_check(void *addr, size_t length, unsigned int access, const char *verb)
{
	if (!addr && length == SIZE_MAX) {
		if (access & IBV_ACCESS_ZERO_BASED)
			return ur_dbg("%s: an implicit ODP MR cannot be ZERO_BASED", verb), EINVAL;
		return 0;
	}
	if (!addr || length == 0 || length > UROCE_MAX_MR_SIZE ||
	    (uintptr_t)addr + length < (uintptr_t)addr)
		return ur_dbg("%s: ODP range [%p, +%zu): a non-NULL address and 1..max_mr_size "
			      "bytes (or NULL and SIZE_MAX for an implicit MR)",
			      verb, addr, length),
		       EINVAL;
	return 0;
}

/* ibv_advise_mr(3): prefetch the pages of ODP MRs.  uroce's prefetch is
 * synchronous; with IBV_ADVISE_MR_FLAG_FLUSH a range that cannot be
 * faulted in is EFAULT, without it the advice is only a hint. */
static int uroce_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
			   struct ibv_sge *sg_list, uint32_t num_sge)
{
	struct uroce_ctx *ctx = to_uctx(pd->context);
	int err = 0;

	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return ur_dbg("advise_mr: unknown advice %d", (int)advice), EOPNOTSUPP;
	if (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH)
		return ur_dbg("advise_mr: unknown flags 0x%x", flags), EOPNOTSUPP;
	if (!sg_list || !num_sge)
		return ur_dbg("advise_mr: no SGE"), EINVAL;
	pthread_rwlock_rdlock(&ctx->mr_lock);
	for (uint32_t i = 0; i < num_sge && !err; i++) {
		struct uroce_mr *mr = uroce_mr_lookup(ctx, sg_list[i].lkey);
		uint8_t *p;

		if (!mr || mr->kind != UROCE_KEY_MR || !mr->odp ||
		    !uroce_pd_same(mr->ibmr.pd, pd)) {
			ur_dbg("advise_mr: lkey 0x%08x is not an ODP MR of the PD",
			       sg_list[i].lkey);
			err = EINVAL;
			break;
		}
		p = uroce_mr_ptr(mr, sg_list[i].addr, sg_list[i].length);
		if (!p || !sg_list[i].length) {
			ur_dbg("advise_mr: [0x%llx, +%u) is not inside MR 0x%08x",
			       (unsigned long long)sg_list[i].addr, sg_list[i].length,
			       sg_list[i].lkey);
			err = EINVAL;
			break;
		}
		if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) {
			/* only what is already there: no fault is taken */
			(void)madvise((void *)((uintptr_t)p & ~(uintptr_t)4095),
				      sg_list[i].length + ((uintptr_t)p & 4095), MADV_WILLNEED);
			continue;
		}
		if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
		    !(mr->access & IBV_ACCESS_LOCAL_WRITE)) {
			ur_dbg("advise_mr: PREFETCH_WRITE on MR 0x%08x without LOCAL_WRITE",
			       sg_list[i].lkey);
			err = EINVAL;
			break;
		}
		if (!populate(p, sg_list[i].length,
			      advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE) &&
		    (flags & IBV_ADVISE_MR_FLAG_FLUSH)) {
			ur_dbg("advise_mr: [%p, +%u) cannot be faulted in", (void *)p,
			       sg_list[i].length);
			err = EFAULT;
		}
	}
	pthread_rwlock_unlock(&ctx->mr_lock);
	return err;
}

void uroce_odp_query(struct ibv_device_attr_ex *a)
{
	const uint32_t rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
			    IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
			    IBV_ODP_SUPPORT_SRQ_RECV;

	a->odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	a->odp_caps.per_transport_caps.rc_odp_caps = rc;
	a->odp_caps.per_transport_caps.uc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
						     IBV_ODP_SUPPORT_WRITE |
						     IBV_ODP_SUPPORT_SRQ_RECV;
	a->odp_caps.per_transport_caps.ud_odp_caps =
	    IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
	a->xrc_odp_caps = rc;
}

void uroce_odp_set_ops(struct verbs_context *v)
{
	v->advise_mr = uroce_advise_mr;
}

/* Protection domains and memory regions.
 *
 * An MR's lkey and rkey are the same 32-bit key, drawn at random (and unique
 * within the context), so a peer cannot guess a valid rkey by counting.  The
 * key table is a hash of chains under ctx->mr_lock: the data path looks keys
 * up with the read lock held for the whole copy, so ibv_dereg_mr (write
 * lock) returns only when no packet is touching the memory any more.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "uroce.h"
#include "core/objreg.h"

#define MR_TAB_SIZE 4096u

UROCE_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct uroce_ctx *ctx;
	struct uroce_pd *pd;

	if (!context) {
		ur_dbg("alloc_pd: context is NULL");
		errno = EINVAL;
		return NULL;
	}
	ctx = to_uctx(context);
	if (atomic_load(&ctx->npd) >= UROCE_MAX_PD) {
		ur_dbg("alloc_pd: max_pd (%d) reached", UROCE_MAX_PD);
		errno = ENOMEM;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		ur_dbg("alloc_pd: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	pd->ibpd.context = context;
	if (uroce_obj_add(&pd->ibpd, UROCE_OBJ_PD)) {
		free(pd);
		errno = ENOMEM;
		return NULL;
	}
	pd->ibpd.handle = atomic_fetch_add(&ctx->npd, 1);
	return &pd->ibpd;
}

UROCE_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct uroce_pd *pd;
	int err = uroce_obj_check(ibpd, UROCE_OBJ_PD, "dealloc_pd");

	if (err)
		return uroce_obj_err(err);
	pd = to_upd(ibpd);
	if (atomic_load(&pd->refs)) {
		ur_dbg("dealloc_pd: PD still used by %u MR/QP/AH/SRQ objects",
		       atomic_load(&pd->refs));
		return uroce_obj_err(EBUSY);
	}
	if (pd->prot)
		return uroce_parent_domain_free(pd);
	atomic_fetch_sub(&to_uctx(ibpd->context)->npd, 1);
	uroce_obj_release(ibpd, pd);
	return 0;
}

/* ---- key table ---- */

static uint32_t key_hash(uint32_t key)
{
	key ^= key >> 16;
	key *= 0x45d9f3bu;
	key ^= key >> 16;
	return key & (MR_TAB_SIZE - 1);
}

struct uroce_mr *uroce_mr_lookup(struct uroce_ctx *ctx, uint32_t key)
{
	struct uroce_mr *mr;

	if (!ctx->mr_tab)
		return NULL;
	for (mr = ctx->mr_tab[key_hash(key)]; mr; mr = mr->next)
		if (mr->ibmr.lkey == key)
			return mr;
	return NULL;
}

/* Move an entry to another key, e.g. a memory window's new rkey after a
 * bind (ctx->mr_lock held for writing).  EEXIST if the key is taken. */
int uroce_key_move_locked(struct uroce_ctx *ctx, struct uroce_mr *mr, uint32_t key)
{
	struct uroce_mr **pp;

	if (key == mr->ibmr.lkey)
		return 0;
	if (uroce_mr_lookup(ctx, key))
		return EEXIST;
	for (pp = &ctx->mr_tab[key_hash(mr->ibmr.lkey)]; *pp; pp = &(*pp)->next)
		if (*pp == mr) {
			*pp = mr->next;
			break;
		}
	mr->ibmr.lkey = mr->ibmr.rkey = key;
	mr->next = ctx->mr_tab[key_hash(key)];
	ctx->mr_tab[key_hash(key)] = mr;
	return 0;
}

int uroce_key_insert(struct uroce_ctx *ctx, struct uroce_mr *mr)
{
	uint32_t key;

	pthread_rwlock_wrlock(&ctx->mr_lock);
	if (!ctx->mr_tab) {
		ctx->mr_tab = calloc(MR_TAB_SIZE, sizeof(*ctx->mr_tab));
		if (!ctx->mr_tab) {
			pthread_rwlock_unlock(&ctx->mr_lock);
			ur_dbg("reg_mr: out of memory for the key table");
			return ENOMEM;
		}
	}
	if (mr->kind == UROCE_KEY_MR ? ctx->nmr >= UROCE_MAX_MR : ctx->nmw >= UROCE_MAX_MW) {
		pthread_rwlock_unlock(&ctx->mr_lock);
		if (mr->kind == UROCE_KEY_MR)
			ur_dbg("reg_mr: max_mr (%d) reached", UROCE_MAX_MR);
		else
			ur_dbg("alloc_mw: max_mw (%d) reached", UROCE_MAX_MW);
		return ENOMEM;
	}
	do {
		if (getrandom(&key, sizeof(key), 0) != sizeof(key))
			key = (uint32_t)random() ^ (uint32_t)(uintptr_t)mr;
	} while (key == 0 || key == 0xffffffffu || uroce_mr_lookup(ctx, key));
	mr->ibmr.lkey = mr->ibmr.rkey = key;
	mr->next = ctx->mr_tab[key_hash(key)];
	ctx->mr_tab[key_hash(key)] = mr;
	if (mr->kind == UROCE_KEY_MR)
		ctx->nmr++;
	else
		ctx->nmw++;
	pthread_rwlock_unlock(&ctx->mr_lock);
	return 0;
}

void uroce_key_remove(struct uroce_ctx *ctx, struct uroce_mr *mr)
{
	struct uroce_mr **pp;

	pthread_rwlock_wrlock(&ctx->mr_lock);
	for (pp = &ctx->mr_tab[key_hash(mr->ibmr.lkey)]; *pp; pp = &(*pp)->next)
		if (*pp == mr) {
			*pp = mr->next;
			if (mr->kind == UROCE_KEY_MR)
				ctx->nmr--;
			else
				ctx->nmw--;
			break;
		}
	pthread_rwlock_unlock(&ctx->mr_lock);
}

/* ---- registration ---- */

#define UROCE_MR_ACCESS                                                                            \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |                   \
	 IBV_ACCESS_HUGETLB | IBV_ACCESS_ON_DEMAND)

/* The memory must be mapped, as the kernel's get_user_pages would demand:
 * msync() fails with ENOMEM on any unmapped page of the range. */
static bool range_mapped(void *addr, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)addr & ~((uintptr_t)pg - 1);
	uintptr_t end = (uintptr_t)addr + len;

	return msync((void *)start, end - start, MS_ASYNC) == 0;
}

/* ... and mapped readable, and writable when the MR grants LOCAL_WRITE
 * (which every remote write and atomic needs): get_user_pages refuses the
 * pages otherwise, and uroce would fault copying a peer's data there. */
static bool range_prot_ok(void *addr, size_t len, bool write)
{
	uintptr_t at = (uintptr_t)addr, end = at + len;
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4096 + 256];

	if (!f)
		return true; /* cannot tell: msync() found it mapped */
	while (at < end && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char prot[5];

		if (!strchr(line, '\n') || sscanf(line, "%lx-%lx %4s", &lo, &hi, prot) != 3)
			break; /* not a line we understand: refuse */
		if (hi <= at)
			continue;
		if (lo > at || prot[0] != 'r' || (write && prot[1] != 'w'))
			break;
		at = hi;
	}
	fclose(f);
	return at >= end;
}

/* The access rules of reg_mr and rereg_mr: 0 or an errno value. */
static int check_access(unsigned int access, const char *verb)
{
	if (access & ~(unsigned int)UROCE_MR_ACCESS)
		return ur_dbg("%s: unknown access flags 0x%x", verb,
			      access & ~(unsigned int)UROCE_MR_ACCESS),
		       EINVAL;
	/* IBTA 10.6.3.1 / ibv_reg_mr(3): remote write or atomic needs local write */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return ur_dbg("%s: REMOTE_WRITE/REMOTE_ATOMIC require IBV_ACCESS_LOCAL_WRITE",
			      verb),
		       EINVAL;
	return 0;
}

/* The memory rules of reg_mr and rereg_mr: 0 or an errno value. */
static int check_range(void *addr, size_t length, unsigned int access, const char *verb)
{
	bool write = access & IBV_ACCESS_LOCAL_WRITE;

	if (access & IBV_ACCESS_ON_DEMAND) /* not pinned: need not be mapped (odp.c) */
		return uroce_odp_reg_check(addr, length, access, verb);

	if (length == 0 || length > UROCE_MAX_MR_SIZE)
		return ur_dbg("%s: length %zu outside 1..max_mr_size", verb, length), EINVAL;
	if (!addr || !range_mapped(addr, length))
		return ur_dbg("%s: [%p, +%zu) is not mapped memory", verb, addr, length), EFAULT;
	if (!range_prot_ok(addr, length, write))
		return ur_dbg("%s: [%p, +%zu) is not all mapped %s", verb, addr, length,
			      write ? "readable and writable (the access has LOCAL_WRITE)"
				    : "readable"),
		       EFAULT;
	return 0;
}

static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			     unsigned int access)
{
	int err;

	if (!pd) {
		ur_dbg("reg_mr: pd is NULL");
		errno = EINVAL;
		return NULL;
	}
	access &= ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE; /* hints: accepted, ignored */
	err = check_access(access, "reg_mr");
	if (!err)
		err = check_range(addr, length, access, "reg_mr");
	if (err) {
		errno = err;
		return NULL;
	}
	return uroce_mr_new(pd, addr, length, iova, access);
}

struct ibv_mr *uroce_mr_new(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			    unsigned int access)
{
	struct uroce_mr *mr;
	int err;

	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		ur_dbg("reg_mr: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	mr->ibmr.context = pd->context;
	mr->ibmr.pd = pd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
	mr->length = length;
	mr->access = access;
	mr->odp = access & IBV_ACCESS_ON_DEMAND;
	err = uroce_key_insert(to_uctx(pd->context), mr);
	if (err) {
		free(mr);
		errno = err;
		return NULL;
	}
	if (uroce_obj_add(&mr->ibmr, UROCE_OBJ_MR)) {
		uroce_key_remove(to_uctx(pd->context), mr);
		free(mr);
		errno = ENOMEM;
		return NULL;
	}
	atomic_fetch_add(&to_upd(pd)->refs, 1);
	ur_trace("reg_mr: %p+%zu iova 0x%llx key 0x%08x access 0x%x", addr, length,
		 (unsigned long long)mr->iova, mr->ibmr.lkey, access);
	return &mr->ibmr;
}

#undef ibv_reg_mr
UROCE_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return reg_mr(pd, addr, length, (uint64_t)(uintptr_t)addr, (unsigned int)access);
}

#undef ibv_reg_mr_iova
UROCE_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					    uint64_t iova, int access)
{
	return reg_mr(pd, addr, length, iova, (unsigned int)access);
}

UROCE_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					     uint64_t iova, unsigned int access)
{
	return reg_mr(pd, addr, length, iova, access);
}

UROCE_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct uroce_mr *mr;
	int err = uroce_obj_check(ibmr, UROCE_OBJ_MR, "dereg_mr");

	if (err)
		return uroce_obj_err(err);
	mr = to_umr(ibmr);
	/* IBTA 10.6.7.2.?: an MR with memory windows bound cannot go */
	if (atomic_load(&mr->nbound))
		return ur_dbg("dereg_mr: %u memory window(s) still bound to the MR",
			      atomic_load(&mr->nbound)),
		       uroce_obj_err(EBUSY);
	uroce_key_remove(to_uctx(ibmr->context), mr);
	/* packets with payload in the MR leave before the memory may go */
	uroce_ctx_flush_tx(to_uctx(ibmr->context));
	atomic_fetch_sub(&to_upd(ibmr->pd)->refs, 1);
	if (mr->dm)
		atomic_fetch_sub(&mr->dm->refs, 1);
	uroce_obj_release(ibmr, mr);
	return 0;
}

/* ibv_rereg_mr(3)'s codes: what libibverbs itself checks before asking the
 * kernel (flags it does not know, CHANGE_TRANSLATION without an address or
 * a length, access without CHANGE_ACCESS) is IBV_REREG_MR_ERR_INPUT; what
 * the kernel refuses (no flag at all, access rights, memory, the PD, bound
 * windows) is IBV_REREG_MR_ERR_CMD.  errno says why in both. */
static int rereg_refused(int err)
{
	errno = err;
	return IBV_REREG_MR_ERR_INPUT;
}

static int rereg_cmd_refused(int err)
{
	errno = err;
	return IBV_REREG_MR_ERR_CMD;
}

/* Everything is checked before anything changes, so a failure leaves the
 * MR as it was and usable, even after IBV_REREG_MR_ERR_CMD (which only
 * allows a provider to leave it unusable).  The keys stay (as rxe keeps
 * them). */
UROCE_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr,
			      size_t length, int access)
{
	struct ibv_pd *old_pd;
	struct uroce_ctx *ctx;
	struct uroce_mr *mr;
	unsigned int acc;
	int err;

	if (!ibmr)
		return ur_dbg("rereg_mr: mr is NULL"), rereg_refused(EINVAL);
	mr = to_umr(ibmr);
	ctx = to_uctx(ibmr->context);
	if (mr->dm)
		return ur_dbg("rereg_mr: a device memory MR cannot be re-registered"),
		       rereg_refused(EINVAL);
	if (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED)
		return ur_dbg("rereg_mr: flags 0x%x: use IBV_REREG_MR_CHANGE_TRANSLATION, _PD "
			      "and/or _ACCESS",
			      flags),
		       rereg_refused(EINVAL);
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length))
		return ur_dbg("rereg_mr: CHANGE_TRANSLATION needs an address and a length"),
		       rereg_refused(EINVAL);
	if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))
		return ur_dbg("rereg_mr: access flags given without CHANGE_ACCESS"),
		       rereg_refused(EINVAL);
	if ((flags & IBV_REREG_MR_CHANGE_PD) && !pd)
		return ur_dbg("rereg_mr: CHANGE_PD needs a PD"), rereg_refused(EINVAL);
	if (!flags)
		return ur_dbg("rereg_mr: no flag: use IBV_REREG_MR_CHANGE_TRANSLATION, _PD "
			      "and/or _ACCESS"),
		       rereg_cmd_refused(EINVAL);
	if ((flags & IBV_REREG_MR_CHANGE_PD) && pd->context != ibmr->context)
		return ur_dbg("rereg_mr: CHANGE_PD needs a PD of the MR's context"),
		       rereg_cmd_refused(EINVAL);
	acc = (flags & IBV_REREG_MR_CHANGE_ACCESS)
		  ? (unsigned int)access & ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE
		  : mr->access;
	err = check_access(acc, "rereg_mr");
	if (!err && (flags & IBV_REREG_MR_CHANGE_TRANSLATION))
		err = check_range(addr, length, acc, "rereg_mr");
	else if (!err && (flags & IBV_REREG_MR_CHANGE_ACCESS))
		err = check_range(ibmr->addr, ibmr->length, acc, "rereg_mr");
	if (err)
		return rereg_cmd_refused(err);

	/* The write lock waits for every copy into or out of the old range. */
	pthread_rwlock_wrlock(&ctx->mr_lock);
	/* Windows bound to the MR took its range and PD at bind time (binds
	 * hold the write lock too, so none can start meanwhile). */
	if (atomic_load(&mr->nbound)) {
		unsigned int n = atomic_load(&mr->nbound);

		pthread_rwlock_unlock(&ctx->mr_lock);
		return ur_dbg("rereg_mr: %u memory window(s) still bound to the MR", n),
		       rereg_cmd_refused(EBUSY);
	}
	old_pd = ibmr->pd;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		ibmr->addr = addr;
		ibmr->length = length;
		mr->length = length;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		ibmr->pd = pd;
	/* The peer addresses the MR from 0 (ZERO_BASED) or by its new
	 * address; a plain access change keeps the iova (ibv_reg_mr_iova). */
	if (acc & IBV_ACCESS_ZERO_BASED)
		mr->iova = 0;
	else if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) || (mr->access & IBV_ACCESS_ZERO_BASED))
		mr->iova = (uint64_t)(uintptr_t)ibmr->addr;
	mr->access = acc;
	mr->odp = acc & IBV_ACCESS_ON_DEMAND;
	pthread_rwlock_unlock(&ctx->mr_lock);
	uroce_ctx_flush_tx(ctx); /* the old range may go once this returns */
	if (ibmr->pd != old_pd) {
		atomic_fetch_add(&to_upd(ibmr->pd)->refs, 1);
		atomic_fetch_sub(&to_upd(old_pd)->refs, 1);
	}
	ur_trace("rereg_mr: key 0x%08x flags 0x%x: %p+%zu iova 0x%llx access 0x%x", ibmr->lkey,
		 flags, ibmr->addr, ibmr->length, (unsigned long long)mr->iova, acc);
	return 0;
}

/* The memory of take bytes at offset in sg, checked against its lkey: the
 * MR must exist, belong to pd and contain the range (IBTA C10-9.x, local
 * protection); to_sge needs IBV_ACCESS_LOCAL_WRITE.  NULL when not. */
static uint8_t *sge_mem(struct uroce_ctx *ctx, struct ibv_pd *pd, const struct uroce_sge *sg,
			uint32_t offset, uint32_t take, bool to_sge, struct uroce_mr **mrp)
{
	struct uroce_mr *mr = uroce_mr_lookup(ctx, sg->lkey);

	/* memory windows have rkeys only: no local access through them */
	if (!mr || mr->kind != UROCE_KEY_MR || !uroce_pd_same(mr->ibmr.pd, pd) ||
	    (to_sge && !(mr->access & IBV_ACCESS_LOCAL_WRITE)))
		return NULL;
	*mrp = mr;
	return uroce_mr_ptr(mr, sg->addr + offset, take);
}

/* The len bytes at offset in a scatter list as pieces of memory (at most
 * one per SGE), each checked with sge_mem, with their MRs: their count, or
 * -1 with *st. */
static int sge_pieces(struct uroce_ctx *ctx, struct ibv_pd *pd, const struct uroce_sge *sg,
		      int nsge, uint32_t offset, uint32_t len, bool to_sge, struct iovec *iov,
		      struct uroce_mr **mrs, enum ibv_wc_status *st)
{
	int n = 0;

	for (int i = 0; i < nsge && len; i++) {
		uint32_t take;

		if (offset >= sg[i].length) {
			offset -= sg[i].length;
			continue;
		}
		take = sg[i].length - offset;
		if (take > len)
			take = len;
		iov[n].iov_base = sge_mem(ctx, pd, &sg[i], offset, take, to_sge, &mrs[n]);
		iov[n].iov_len = take;
		if (!iov[n++].iov_base) {
			*st = IBV_WC_LOC_PROT_ERR;
			return -1;
		}
		len -= take;
		offset = 0;
	}
	if (len) {
		*st = IBV_WC_LOC_LEN_ERR;
		return -1;
	}
	return n;
}

/* Copy between a message offset in a local scatter list and buf.
 * to_sge: buf -> memory (needs IBV_ACCESS_LOCAL_WRITE).  Each SGE is checked
 * with sge_mem.  Caller holds ctx->mr_lock for read. */
int uroce_sge_copy(struct uroce_ctx *ctx, struct ibv_pd *pd, const struct uroce_sge *sg, int nsge,
		   uint32_t offset, void *buf, uint32_t len, bool to_sge, enum ibv_wc_status *st)
{
	struct iovec iov[UROCE_MAX_SGE];
	struct uroce_mr *mrs[UROCE_MAX_SGE];
	int n = sge_pieces(ctx, pd, sg, nsge < UROCE_MAX_SGE ? nsge : UROCE_MAX_SGE, offset, len,
			   to_sge, iov, mrs, st);
	uint8_t *b = buf;

	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if (!(to_sge ? uroce_mr_write(mrs[i], iov[i].iov_base, b, iov[i].iov_len)
			     : uroce_mr_read(mrs[i], b, iov[i].iov_base, iov[i].iov_len))) {
			*st = IBV_WC_LOC_PROT_ERR; /* an ODP page is not mapped */
			return -1;
		}
		b += iov[i].iov_len;
	}
	return 0;
}

int uroce_sge_map(struct uroce_ctx *ctx, struct ibv_pd *pd, const struct uroce_sge *sg, int nsge,
		  uint32_t offset, uint32_t len, bool to_sge, struct iovec *iov, int maxiov)
{
	struct uroce_mr *mrs[UROCE_MAX_SGE];
	enum ibv_wc_status st;
	int n;

	if (nsge > maxiov || nsge > UROCE_MAX_SGE)
		return 0;
	n = sge_pieces(ctx, pd, sg, nsge, offset, len, to_sge, iov, mrs, &st);
	/* ODP memory is reached through the kernel (odp.c) */
	for (int i = 0; i < n; i++)
		if (mrs[i]->odp)
			return 0;
	return n < 0 ? 0 : n;
}

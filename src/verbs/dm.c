/* Device memory: ibv_alloc_dm, ibv_free_dm, ibv_memcpy_to_dm/from_dm (the
 * dm's own function pointers, called by verbs.h's inline functions) and
 * ibv_reg_dm_mr.
 *
 * On a NIC, device memory is a small on-chip SRAM (mlx5's MEMIC) that the
 * host reaches only through the memcpy verbs and the HCA through DM MRs,
 * which are always zero-based.  uroce's "device" is the library, so its
 * device memory is host memory that only uroce knows the address of: the
 * same rules, the same zero-based MRs, no speed-up.  Each context has
 * UROCE_MAX_DM_SIZE bytes of it (max_dm_size), as a NIC has its SRAM.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uroce.h"
#include "core/objreg.h"

#define UROCE_MAX_DM_SIZE  (1u << 20) /* per context, as mlx5's 128-256 KiB MEMIC */
#define UROCE_DM_MAX_ALIGN 12	      /* log_align_req up to a page */

static inline struct uroce_dm *to_udm(struct ibv_dm *d)
{
	return container_of(d, struct uroce_dm, ibdm);
}

/* Offsets and lengths of the memcpy verbs: inside the allocation. */
static bool dm_range_ok(const struct uroce_dm *dm, uint64_t off, size_t len)
{
	return off <= dm->length && len <= dm->length - off;
}

static int dm_memcpy_to(struct ibv_dm *ibdm, uint64_t dm_offset, const void *host, size_t length)
{
	struct uroce_dm *dm = to_udm(ibdm);

	if (!dm_range_ok(dm, dm_offset, length))
		return ur_dbg("memcpy_to_dm: [%llu, +%zu) outside the %zu bytes of the DM",
			      (unsigned long long)dm_offset, length, dm->length),
		       EINVAL;
	memcpy(dm->buf + dm_offset, host, length);
	return 0;
}

static int dm_memcpy_from(void *host, struct ibv_dm *ibdm, uint64_t dm_offset, size_t length)
{
	struct uroce_dm *dm = to_udm(ibdm);

	if (!dm_range_ok(dm, dm_offset, length))
		return ur_dbg("memcpy_from_dm: [%llu, +%zu) outside the %zu bytes of the DM",
			      (unsigned long long)dm_offset, length, dm->length),
		       EINVAL;
	memcpy(host, dm->buf + dm_offset, length);
	return 0;
}

static struct ibv_dm *uroce_alloc_dm(struct ibv_context *context, struct ibv_alloc_dm_attr *attr)
{
	struct uroce_ctx *ctx = to_uctx(context);
	struct uroce_dm *dm;
	size_t align, len;

	if (!attr || attr->comp_mask || !attr->length || attr->log_align_req > UROCE_DM_MAX_ALIGN) {
		ur_dbg("alloc_dm: attr NULL, comp_mask 0x%x (must be 0), length 0, or "
		       "log_align_req %u > %d",
		       attr ? attr->comp_mask : 0, attr ? attr->log_align_req : 0,
		       UROCE_DM_MAX_ALIGN);
		errno = EINVAL;
		return NULL;
	}
	if (attr->length > UROCE_MAX_DM_SIZE) {
		ur_dbg("alloc_dm: %zu bytes > max_dm_size %u", attr->length, UROCE_MAX_DM_SIZE);
		errno = ENOMEM;
		return NULL;
	}
	align = (size_t)1 << (attr->log_align_req > 6 ? attr->log_align_req : 6);
	len = (attr->length + align - 1) / align * align;
	/* the context's device memory is used up as a NIC's SRAM is */
	if (atomic_fetch_add(&ctx->dm_used, len) + len > UROCE_MAX_DM_SIZE) {
		atomic_fetch_sub(&ctx->dm_used, len);
		ur_dbg("alloc_dm: %zu bytes: the context's %u bytes of device memory are in use",
		       attr->length, UROCE_MAX_DM_SIZE);
		errno = ENOMEM;
		return NULL;
	}
	dm = calloc(1, sizeof(*dm));
	if (dm)
		dm->buf = aligned_alloc(align, len);
	if (!dm || !dm->buf) {
		free(dm);
		atomic_fetch_sub(&ctx->dm_used, len);
		ur_dbg("alloc_dm: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	if (uroce_obj_add(&dm->ibdm, UROCE_OBJ_DM)) {
		free(dm->buf);
		free(dm);
		atomic_fetch_sub(&ctx->dm_used, len);
		errno = ENOMEM;
		return NULL;
	}
	memset(dm->buf, 0, len);
	dm->length = attr->length;
	dm->charged = len;
	dm->ibdm.context = context;
	dm->ibdm.memcpy_to_dm = dm_memcpy_to;
	dm->ibdm.memcpy_from_dm = dm_memcpy_from;
	ur_trace("alloc_dm: %zu bytes, align %zu", attr->length, align);
	return &dm->ibdm;
}

static int uroce_free_dm(struct ibv_dm *ibdm)
{
	struct uroce_dm *dm;
	int err = uroce_obj_check(ibdm, UROCE_OBJ_DM, "free_dm");

	if (err)
		return uroce_obj_err(err);
	dm = to_udm(ibdm);
	if (atomic_load(&dm->refs)) {
		ur_dbg("free_dm: %u MR(s) still registered on it", atomic_load(&dm->refs));
		return uroce_obj_err(EBUSY);
	}
	atomic_fetch_sub(&to_uctx(ibdm->context)->dm_used, dm->charged);
	free(dm->buf);
	uroce_obj_release(ibdm, dm);
	return 0;
}

/* ibv_reg_dm_mr(3): a zero-based MR over [dm_offset, +length) of the DM;
 * the peer and the local SGEs address it from 0.  mr->addr is the DM's
 * host address (mlx5 leaves it NULL): uroce's key checks use it. */
static struct ibv_mr *uroce_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm, uint64_t dm_offset,
				      size_t length, unsigned int access)
{
	const unsigned int ok = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
				IBV_ACCESS_ZERO_BASED | IBV_ACCESS_OPTIONAL_RANGE;
	struct uroce_dm *dm;
	struct ibv_mr *mr;

	if (!pd || !ibdm || ibdm->context != pd->context) {
		ur_dbg("reg_dm_mr: PD and DM must be of one context");
		errno = EINVAL;
		return NULL;
	}
	dm = to_udm(ibdm);
	if (!(access & IBV_ACCESS_ZERO_BASED) || (access & ~ok)) {
		ur_dbg("reg_dm_mr: access 0x%x: IBV_ACCESS_ZERO_BASED is required, and only "
		       "local/remote read, write, atomic",
		       access);
		errno = EINVAL;
		return NULL;
	}
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE)) {
		ur_dbg("reg_dm_mr: REMOTE_WRITE/REMOTE_ATOMIC require IBV_ACCESS_LOCAL_WRITE");
		errno = EINVAL;
		return NULL;
	}
	if (!length || !dm_range_ok(dm, dm_offset, length)) {
		ur_dbg("reg_dm_mr: [%llu, +%zu) is not inside the %zu bytes of the DM",
		       (unsigned long long)dm_offset, length, dm->length);
		errno = EINVAL;
		return NULL;
	}
	mr = uroce_mr_new(pd, dm->buf + dm_offset, length, 0,
			  access & ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE);
	if (!mr)
		return NULL;
	to_umr(mr)->dm = dm;
	atomic_fetch_add(&dm->refs, 1);
	return mr;
}

void uroce_dm_query(struct ibv_device_attr_ex *a)
{
	a->max_dm_size = UROCE_MAX_DM_SIZE;
}

void uroce_dm_set_ops(struct verbs_context *v)
{
	v->alloc_dm = uroce_alloc_dm;
	v->free_dm = uroce_free_dm;
	v->reg_dm_mr = uroce_reg_dm_mr;
}

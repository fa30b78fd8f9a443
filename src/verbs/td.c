/* Thread domains and parent domains: ibv_alloc_td, ibv_dealloc_td,
 * ibv_alloc_parent_domain (ibv_dealloc_pd frees one, src/verbs/pd_mr.c).
 *
 * A thread domain promises that one thread at a time uses the objects
 * created with it; a NIC gives such QPs a doorbell of their own and drops
 * their locks.  uroce takes the promise and keeps its locks (they are
 * uncontended then, so they cost little): a thread domain is a handle
 * with a reference count.
 *
 * A parent domain stands for its protection domain everywhere a PD is
 * checked (uroce_pd_same in uroce.h), and carries the program's allocator
 * for the buffers of the QPs and CQs created on it: the send and receive
 * queues (resource type UROCE_RES_TYPE_QP) and the CQ ring
 * (UROCE_RES_TYPE_CQ) come from alloc() and go back through free(), unless
 * alloc() answers IBV_ALLOCATOR_USE_DEFAULT.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uroce.h"
#include "core/objreg.h"

struct uroce_td {
	struct ibv_td ibtd;
	atomic_uint refs; /* parent domains using it */
};

static inline struct uroce_td *to_utd(struct ibv_td *t)
{
	return container_of(t, struct uroce_td, ibtd);
}

static struct ibv_td *uroce_alloc_td(struct ibv_context *context, struct ibv_td_init_attr *attr)
{
	struct uroce_td *td;

	if (!attr || attr->comp_mask) {
		ur_dbg("alloc_td: init_attr NULL or comp_mask 0x%x (must be 0)",
		       attr ? attr->comp_mask : 0);
		errno = EINVAL;
		return NULL;
	}
	td = calloc(1, sizeof(*td));
	if (!td) {
		errno = ENOMEM;
		return NULL;
	}
	td->ibtd.context = context;
	if (uroce_obj_add(&td->ibtd, UROCE_OBJ_TD)) {
		free(td);
		errno = ENOMEM;
		return NULL;
	}
	return &td->ibtd;
}

static int uroce_dealloc_td(struct ibv_td *ibtd)
{
	struct uroce_td *td;
	int err = uroce_obj_check(ibtd, UROCE_OBJ_TD, "dealloc_td");

	if (err)
		return uroce_obj_err(err);
	td = to_utd(ibtd);
	if (atomic_load(&td->refs)) {
		ur_dbg("dealloc_td: %u parent domain(s) still use it", atomic_load(&td->refs));
		return uroce_obj_err(EBUSY);
	}
	uroce_obj_release(ibtd, td);
	return 0;
}

static struct ibv_pd *uroce_alloc_parent_domain(struct ibv_context *context,
						struct ibv_parent_domain_init_attr *attr)
{
	const uint32_t known =
	    IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	struct uroce_pd *pd, *prot;

	if (!attr || !attr->pd || attr->pd->context != context ||
	    (attr->td && attr->td->context != context)) {
		ur_dbg("alloc_parent_domain: a PD (and thread domain) of this context is required");
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & ~known) {
		ur_dbg("alloc_parent_domain: unknown comp_mask bits 0x%x",
		       attr->comp_mask & ~known);
		errno = EINVAL;
		return NULL;
	}
	if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
	    (!attr->alloc || !attr->free)) {
		ur_dbg("alloc_parent_domain: ALLOCATORS needs both alloc and free");
		errno = EINVAL;
		return NULL;
	}
	prot = to_upd(attr->pd);
	if (prot->prot) {
		ur_dbg("alloc_parent_domain: attr->pd is a parent domain, not a protection domain");
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->ibpd.context = context;
	pd->ibpd.handle = attr->pd->handle;
	pd->prot = prot;
	pd->td = attr->td;
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = attr->alloc;
		pd->free = attr->free;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	if (uroce_obj_add(&pd->ibpd, UROCE_OBJ_PD)) {
		free(pd);
		errno = ENOMEM;
		return NULL;
	}
	atomic_fetch_add(&prot->refs, 1);
	if (pd->td)
		atomic_fetch_add(&to_utd(pd->td)->refs, 1);
	return &pd->ibpd;
}

int uroce_parent_domain_free(struct uroce_pd *pd)
{
	atomic_fetch_sub(&pd->prot->refs, 1);
	if (pd->td)
		atomic_fetch_sub(&to_utd(pd->td)->refs, 1);
	uroce_obj_release(&pd->ibpd, pd);
	return 0;
}

void *uroce_pd_buf_alloc(struct ibv_pd *ibpd, size_t size, uint64_t type, bool *custom)
{
	struct uroce_pd *pd = ibpd ? to_upd(ibpd) : NULL;
	void *p;

	*custom = false;
	if (!pd || !pd->alloc)
		return calloc(1, size);
	p = pd->alloc(ibpd, pd->pd_context, size, 64, type);
	if (p == IBV_ALLOCATOR_USE_DEFAULT)
		return calloc(1, size);
	if (!p) {
		ur_dbg("the parent domain's allocator refused %zu bytes", size);
		return NULL;
	}
	memset(p, 0, size);
	*custom = true;
	return p;
}

void uroce_pd_buf_free(struct ibv_pd *ibpd, void *p, uint64_t type, bool custom)
{
	struct uroce_pd *pd;

	if (!p)
		return;
	if (!custom) {
		free(p);
		return;
	}
	pd = to_upd(ibpd);
	pd->free(ibpd, pd->pd_context, p, type);
}

void uroce_td_set_ops(struct verbs_context *v)
{
	v->alloc_td = uroce_alloc_td;
	v->dealloc_td = uroce_dealloc_td;
	v->alloc_parent_domain = uroce_alloc_parent_domain;
}

/* Live verbs objects, so that a destroy verb given a pointer that is not a
 * live object of its kind (destroyed already, or a copy of the struct) fails
 * with ENOENT instead of freeing memory twice - what the kernel's handle
 * table gives rdma-core's providers (src/core/objreg.c). */
#ifndef UROCE_OBJREG_H
#define UROCE_OBJREG_H

#include <errno.h>

enum uroce_obj_kind {
	UROCE_OBJ_PD = 1,
	UROCE_OBJ_MR,
	UROCE_OBJ_MW,
	UROCE_OBJ_CQ,
	UROCE_OBJ_QP,
	UROCE_OBJ_SRQ,
	UROCE_OBJ_AH,
	UROCE_OBJ_DM,
	UROCE_OBJ_TD,
};

/* Register obj (just created) as a live object of kind.  0 or ENOMEM. */
int uroce_obj_add(const void *obj, enum uroce_obj_kind kind);
/* 0 if obj is a live object of kind; else ENOENT (EINVAL for NULL), with
 * a debug line naming verb.  Never dereferences obj. */
int uroce_obj_check(const void *obj, enum uroce_obj_kind kind, const char *verb);
/* The destroy verb is done with obj: it is no longer live, and its memory
 * (mem, the allocation obj is part of) is freed only after a number of
 * later releases, so a second destroy of the same pointer - or the
 * libibverbs inline wrapper reading obj->context before calling the
 * provider - still reads valid memory and gets ENOENT. */
void uroce_obj_release(const void *obj, void *mem);

/* The last check a destroy verb makes: errno = err too (the verbs set
 * errno as well as returning it), and err returned. */
static inline int uroce_obj_err(int err)
{
	errno = err;
	return err;
}

#endif

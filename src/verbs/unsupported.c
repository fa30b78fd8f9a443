/* Verbs that uroce does not implement yet.  Each follows the verbs error
 * convention (NULL with errno EOPNOTSUPP, or an EOPNOTSUPP return) and says
 * so at UROCE_LOG=debug.  The README lists them. */
#include <errno.h>

#include "uroce.h"
#include "verbs/verbs_ops.h"

#define NOT_YET(what) ur_dbg("%s: not supported by uroce yet", what)

struct ibv_mw *uroce_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	(void)pd;
	(void)type;
	NOT_YET("alloc_mw");
	errno = EOPNOTSUPP;
	return NULL;
}

int uroce_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
	(void)qp;
	(void)mw;
	(void)mw_bind;
	NOT_YET("bind_mw");
	return EOPNOTSUPP;
}

int uroce_dealloc_mw(struct ibv_mw *mw)
{
	(void)mw;
	NOT_YET("dealloc_mw");
	return EOPNOTSUPP;
}

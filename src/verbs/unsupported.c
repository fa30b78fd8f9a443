/* Verbs that uroce does not implement yet.  Each follows the verbs error
 * convention (NULL with errno EOPNOTSUPP, or an EOPNOTSUPP return) and says
 * so at UROCE_LOG=debug.  The README lists them. */
#include <errno.h>

#include "uroce.h"
#include "verbs/verbs_ops.h"

#define NOT_YET(what) ur_dbg("%s: not supported by uroce yet", what)

UROCE_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	(void)pd;
	(void)attr;
	NOT_YET("create_srq");
	errno = EOPNOTSUPP;
	return NULL;
}

UROCE_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	(void)srq;
	(void)attr;
	(void)mask;
	NOT_YET("modify_srq");
	return EOPNOTSUPP;
}

UROCE_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	(void)srq;
	(void)attr;
	NOT_YET("query_srq");
	return EOPNOTSUPP;
}

UROCE_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	(void)srq;
	NOT_YET("destroy_srq");
	return EOPNOTSUPP;
}

int uroce_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	(void)srq;
	*bad_wr = wr;
	NOT_YET("post_srq_recv");
	return EOPNOTSUPP;
}

UROCE_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp;
	(void)gid;
	(void)lid;
	NOT_YET("attach_mcast");
	return EOPNOTSUPP;
}

UROCE_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp;
	(void)gid;
	(void)lid;
	NOT_YET("detach_mcast");
	return EOPNOTSUPP;
}

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

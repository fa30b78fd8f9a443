/* Memory windows (IBTA 10.6.7): a remotely accessible range of an MR with an
 * rkey of its own.
 *
 * A window lives in the context's key table like an MR (struct uroce_mr,
 * kind MW1/MW2), so the responder's R_Key checks treat both alike; it has no
 * local access (lkeys of windows are rejected).  Unbound, its length is 0 and
 * every access fails.
 *   type 1: bound with ibv_bind_mw(); each bind gives it a new rkey;
 *   type 2: bound with an IBV_WR_BIND_MW work request to one QP, which is
 *           then the only one it can be accessed through; invalidated by
 *           IBV_WR_LOCAL_INV or by the peer's SEND_WITH_INV.
 * Binds and local invalidates are send WQEs executed in order by the
 * requester (src/transport/req.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "uroce.h"
#include "core/objreg.h"
#include "verbs/verbs_ops.h"

#define UROCE_MW_LOCAL_BITS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)

struct uroce_mw {
	struct ibv_mw ibmw;
	struct uroce_mr key; /* the key table entry */
};

static struct uroce_mw *to_umw(struct ibv_mw *m)
{
	return container_of(m, struct uroce_mw, ibmw);
}

struct ibv_mw *uroce_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct uroce_mw *mw;
	int err;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		ur_dbg("alloc_mw: type %d is neither IBV_MW_TYPE_1 nor IBV_MW_TYPE_2", type);
		errno = EINVAL;
		return NULL;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		ur_dbg("alloc_mw: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	mw->key.kind = type == IBV_MW_TYPE_1 ? UROCE_KEY_MW1 : UROCE_KEY_MW2;
	mw->key.ibmr.context = pd->context;
	mw->key.ibmr.pd = pd;
	err = uroce_key_insert(to_uctx(pd->context), &mw->key);
	if (err) {
		free(mw);
		errno = err;
		return NULL;
	}
	mw->ibmw.context = pd->context;
	mw->ibmw.pd = pd;
	mw->ibmw.type = type;
	mw->ibmw.rkey = mw->key.ibmr.rkey;
	mw->ibmw.handle = mw->ibmw.rkey;
	if (uroce_obj_add(&mw->ibmw, UROCE_OBJ_MW)) {
		uroce_key_remove(to_uctx(pd->context), &mw->key);
		free(mw);
		errno = ENOMEM;
		return NULL;
	}
	atomic_fetch_add(&to_upd(pd)->refs, 1);
	return &mw->ibmw;
}

/* Drop the binding (ctx->mr_lock held for writing). */
static void unbind_locked(struct uroce_mr *k)
{
	if (k->parent)
		atomic_fetch_sub(&k->parent->nbound, 1);
	k->parent = NULL;
	k->length = 0;
	k->access = 0;
	k->mw_qpn = 0;
}

int uroce_dealloc_mw(struct ibv_mw *ibmw)
{
	struct uroce_mw *mw;
	struct uroce_ctx *ctx;
	int err = uroce_obj_check(ibmw, UROCE_OBJ_MW, "dealloc_mw");

	if (err)
		return uroce_obj_err(err);
	mw = to_umw(ibmw);
	ctx = to_uctx(ibmw->context);
	pthread_rwlock_wrlock(&ctx->mr_lock);
	unbind_locked(&mw->key);
	pthread_rwlock_unlock(&ctx->mr_lock);
	uroce_key_remove(ctx, &mw->key);
	atomic_fetch_sub(&to_upd(ibmw->pd)->refs, 1);
	uroce_obj_release(ibmw, mw);
	return 0;
}

/* IBTA 10.6.7.2.2: the checks of a bind.  Returns IBV_WC_SUCCESS or
 * IBV_WC_MW_BIND_ERR. */
enum ibv_wc_status uroce_mw_bind(struct uroce_qp *qp, struct ibv_mw *ibmw, uint32_t new_rkey,
				 const struct ibv_mw_bind_info *bi)
{
	struct uroce_mw *mw = to_umw(ibmw);
	struct uroce_ctx *ctx = qp->ctx;
	struct uroce_mr *k = &mw->key, *mr = NULL;
	enum ibv_wc_status st = IBV_WC_MW_BIND_ERR;
	/* windows have no local access: local bits next to the remote rights
	 * are ignored, as rxe (rxe_mw.c) and mlx5 do */
	unsigned int access = bi->mw_access_flags & ~(unsigned int)UROCE_MW_LOCAL_BITS;
	const char *why = NULL;

	pthread_rwlock_wrlock(&ctx->mr_lock);
	/* type 2: the WR's rkey gives only the key byte, the low 8 bits; the
	 * upper 24 stay the window's index (rxe_do_bind_mw, mlx5) */
	if (k->kind == UROCE_KEY_MW2)
		new_rkey = (k->ibmr.rkey & ~0xffu) | (new_rkey & 0xffu);
	if (bi->mr)
		mr = uroce_mr_lookup(ctx, bi->mr->lkey);
	if (!uroce_pd_same(ibmw->pd, qp->ibqp.qp_base.pd))
		why = "window and QP are in different PDs";
	else if (bi->length && (!mr || mr->kind != UROCE_KEY_MR || mr != to_umr(bi->mr)))
		why = "the MR is not registered";
	else if (mr && !uroce_pd_same(mr->ibmr.pd, ibmw->pd))
		why = "window and MR are in different PDs";
	else if (mr && !(mr->access & IBV_ACCESS_MW_BIND))
		why = "the MR was registered without IBV_ACCESS_MW_BIND";
	else if (bi->length && !uroce_mr_ptr(mr, bi->addr, bi->length))
		why = "the range is not inside the MR";
	else if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && mr &&
		 !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		why = "remote write/atomic access needs an MR with IBV_ACCESS_LOCAL_WRITE";
	else if (access & ~(unsigned int)(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED))
		why = "access flags other than remote read/write/atomic";
	else if (k->kind == UROCE_KEY_MW2 && k->length)
		why = "a type 2 window must be invalidated before it is bound again";
	else if (uroce_key_move_locked(ctx, k, new_rkey))
		why = "the new rkey is in use";
	if (!why) {
		unbind_locked(k);
		if (bi->length) {
			k->parent = mr;
			atomic_fetch_add(&mr->nbound, 1);
			k->ibmr.addr = uroce_mr_ptr(mr, bi->addr, bi->length);
			k->iova = (bi->mw_access_flags & IBV_ACCESS_ZERO_BASED) ? 0 : bi->addr;
			k->length = bi->length;
			k->access = access;
			k->odp = mr->odp;
			k->mw_qpn = k->kind == UROCE_KEY_MW2 ? qp->ibqp.qp_base.qp_num : 0;
		}
		ibmw->rkey = new_rkey;
		st = IBV_WC_SUCCESS;
	}
	pthread_rwlock_unlock(&ctx->mr_lock);
	if (why)
		ur_dbg("bind_mw: %s", why);
	return st;
}

/* IBV_WR_LOCAL_INV, or a SEND_WITH_INV from the peer (remote): only type 2
 * windows of the QP's PD can be invalidated (IBTA 10.6.7.2.5). */
enum ibv_wc_status uroce_mw_invalidate(struct uroce_qp *qp, uint32_t rkey, bool remote)
{
	struct uroce_ctx *ctx = qp->ctx;
	struct uroce_mr *k;
	enum ibv_wc_status st = remote ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_MW_BIND_ERR;

	pthread_rwlock_wrlock(&ctx->mr_lock);
	k = uroce_mr_lookup(ctx, rkey);
	if (k && k->kind == UROCE_KEY_MW2 && uroce_pd_same(k->ibmr.pd, qp->ibqp.qp_base.pd) &&
	    (!remote || !k->length || k->mw_qpn == qp->ibqp.qp_base.qp_num)) {
		unbind_locked(k);
		st = IBV_WC_SUCCESS;
	}
	pthread_rwlock_unlock(&ctx->mr_lock);
	if (st != IBV_WC_SUCCESS)
		ur_dbg("QP 0x%06x: invalidate rkey 0x%08x: not a type 2 window of this PD",
		       qp->ibqp.qp_base.qp_num, rkey);
	return st;
}

/* ibv_bind_mw (type 1): a bind WQE on qp's send queue, completed in order
 * with the other WQEs; the window's next rkey is known at once. */
int uroce_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr, *bad;
	int err;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = mw_bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = mw_bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = mw_bind->bind_info;
	err = qp->context->ops.post_send(qp, &wr, &bad);
	if (!err)
		mw->rkey = wr.bind_mw.rkey;
	return err;
}

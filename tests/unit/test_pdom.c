/* Thread domains and parent domains (src/verbs/td.c): ibv_alloc_td /
 * ibv_dealloc_td, ibv_alloc_parent_domain with the program's allocator
 * really called (and freed through) for the QP and CQ buffers, QPs and CQs
 * created on a parent domain carrying traffic through MRs of its PD,
 * ibv_dealloc_pd of a parent domain, and the argument checks.
 */
#include <unistd.h>

#include "mem_loop.h"

static struct mside A, B;

/* The program's allocator: counts and checks what it is asked. */
static struct {
	int alloc_qp, alloc_cq, alloc_srq, free_qp, free_cq, free_srq, bad;
	bool use_default, refuse;
	struct ibv_pd *pd;
	size_t live;
} al;

static void *my_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
		      uint64_t type)
{
	void *p;

	if (pd != al.pd || pd_context != &al || !alignment || (alignment & (alignment - 1)))
		al.bad++;
	if (type == UROCE_RES_TYPE_QP)
		al.alloc_qp++;
	else if (type == UROCE_RES_TYPE_CQ)
		al.alloc_cq++;
	else if (type == UROCE_RES_TYPE_SRQ)
		al.alloc_srq++;
	else
		al.bad++;
	if (al.refuse)
		return NULL;
	if (al.use_default)
		return IBV_ALLOCATOR_USE_DEFAULT;
	p = aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
	if (p) {
		memset(p, 0xa5, size); /* not zeroed: uroce must not rely on it */
		al.live++;
	}
	return p;
}

static void my_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t type)
{
	if (pd != al.pd || pd_context != &al || !ptr)
		al.bad++;
	if (type == UROCE_RES_TYPE_QP)
		al.free_qp++;
	else if (type == UROCE_RES_TYPE_CQ)
		al.free_cq++;
	else if (type == UROCE_RES_TYPE_SRQ)
		al.free_srq++;
	al.live--;
	free(ptr);
}

static void test_td(void)
{
	struct ibv_td_init_attr ta = {0};
	struct ibv_td *td = ibv_alloc_td(A.ctx, &ta);
	struct ibv_parent_domain_init_attr pa = {.pd = A.pd};
	struct ibv_pd *pd;

	CHECK(td && td->context == A.ctx, "alloc_td: errno %d", errno);
	ta.comp_mask = 1;
	errno = 0;
	CHECK(!ibv_alloc_td(A.ctx, &ta) && errno == EINVAL, "alloc_td, unknown comp_mask: EINVAL");
	pa.td = td;
	pd = ibv_alloc_parent_domain(A.ctx, &pa);
	CHECK(pd && pd->context == A.ctx, "parent domain with a thread domain");
	CHECK(ibv_dealloc_td(td) == EBUSY, "dealloc_td while a parent domain uses it: EBUSY");
	CHECK(ibv_dealloc_pd(A.pd) == EBUSY, "dealloc_pd of the PD under a parent domain: EBUSY");
	CHECK(!ibv_dealloc_pd(pd), "dealloc_pd of the parent domain");
	CHECK(!ibv_dealloc_td(td), "dealloc_td");
	CHECK(ibv_dealloc_td(td) == ENOENT, "dealloc_td twice: ENOENT (the object registry)");
}

static void test_args(void)
{
	struct ibv_parent_domain_init_attr pa = {.pd = NULL};
	struct ibv_pd *pd, *pd2;

	errno = 0;
	CHECK(!ibv_alloc_parent_domain(A.ctx, &pa) && errno == EINVAL, "no PD: EINVAL");
	pa.pd = B.pd;
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(A.ctx, &pa) && errno == EINVAL, "another context's PD");
	pa.pd = A.pd;
	pa.comp_mask = 1u << 5;
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(A.ctx, &pa) && errno == EINVAL, "unknown comp_mask");
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
	pa.alloc = my_alloc;
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(A.ctx, &pa) && errno == EINVAL, "alloc without free");
	pa.comp_mask = 0;
	pd = ibv_alloc_parent_domain(A.ctx, &pa);
	CHECK(pd != NULL, "plain parent domain");
	pa.pd = pd;
	errno = 0;
	pd2 = ibv_alloc_parent_domain(A.ctx, &pa);
	CHECK(!pd2 && errno == EINVAL, "a parent domain of a parent domain: EINVAL");
	if (pd)
		ibv_dealloc_pd(pd);
}

static struct ibv_cq *cq_on(struct ibv_pd *pd, int cqe)
{
	struct ibv_cq_init_attr_ex ca = {.cqe = (uint32_t)cqe,
					 .wc_flags = IBV_WC_STANDARD_FLAGS,
					 .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
					 .parent_domain = pd};
	struct ibv_cq_ex *cq = ibv_create_cq_ex(pd->context, &ca);

	return cq ? ibv_cq_ex_to_cq(cq) : NULL;
}

static void test_allocators(void)
{
	struct ibv_parent_domain_init_attr pa = {.pd = A.pd,
						 .comp_mask =
						     IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
						     IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
						 .alloc = my_alloc,
						 .free = my_free,
						 .pd_context = &al};
	struct ibv_pd *pd = ibv_alloc_parent_domain(A.ctx, &pa);
	uint8_t *buf = aligned_alloc(4096, 65536), *rbuf = aligned_alloc(4096, 65536);
	struct ibv_mr *mr = ibv_reg_mr(A.pd, buf, 65536, FULL_ACCESS); /* on the PD */
	struct ibv_mr *pmr, *rmr = ibv_reg_mr(B.pd, rbuf, 65536, FULL_ACCESS);
	struct ibv_qp *qa, *qb;
	struct ibv_cq *cq;
	uint32_t n = 0;

	CHECK(pd && mr && rmr, "parent domain with allocators");
	if (!pd)
		return;
	al.pd = pd;
	pmr = ibv_reg_mr(pd, buf + 32768, 4096, FULL_ACCESS); /* on the parent domain */
	CHECK(pmr && pmr->pd == pd, "an MR on the parent domain");
	cq = cq_on(pd, 64);
	CHECK(cq && al.alloc_cq == 1 && al.live == 1,
	      "CQ on the parent domain: ring from alloc "
	      "(%d calls)",
	      al.alloc_cq);
	if (!cq)
		return;
	CHECK(!ibv_resize_cq(cq, 200) && al.alloc_cq == 2 && al.free_cq == 1 && al.live == 1,
	      "resize_cq: a new ring from alloc, the old one to free");
	/* the QP on the parent domain, its CQs the parent domain's too */
	qa = make_qp(pd, cq, cq, 0, 0);
	qb = make_qp(B.pd, B.cq, B.cq, 0, 0);
	CHECK(qa && qa->pd == pd && al.alloc_qp >= 2, "QP on the parent domain: %d allocations",
	      al.alloc_qp);
	if (!qa || !qb)
		return;
	CHECK(!connect_pair(qa, qb), "connect");
	fill(buf, 65536, 7);
	CHECK(run_wr(qa, cq, IBV_WR_RDMA_WRITE, mr->lkey, buf, 20000, rmr->rkey, (uintptr_t)rbuf) ==
		      IBV_WC_SUCCESS &&
		  !memcmp(rbuf, buf, 20000),
	      "WRITE through an MR of the parent domain's PD");
	CHECK(run_wr(qa, cq, IBV_WR_RDMA_WRITE, pmr->lkey, buf + 32768, 4096, rmr->rkey,
		     (uintptr_t)rbuf + 40000) == IBV_WC_SUCCESS &&
		  !memcmp(rbuf + 40000, buf + 32768, 4096),
	      "WRITE through an MR of the parent domain");
	CHECK(!post_recv(qa, 9, buf + 1000, 3000, mr->lkey), "post_recv on the parent domain");
	CHECK(run_wr(qb, B.cq, IBV_WR_SEND, rmr->lkey, rbuf + 100, 2500, 0, 0) == IBV_WC_SUCCESS,
	      "SEND to the QP on the parent domain");
	CHECK(recv_status(cq, &n) == IBV_WC_SUCCESS && n == 2500 &&
		  !memcmp(buf + 1000, rbuf + 100, 2500),
	      "received into its MR (%u)", n);
	CHECK(run_wr(qa, cq, IBV_WR_RDMA_READ, mr->lkey, buf, 1000, rmr->rkey, (uintptr_t)rbuf) ==
		  IBV_WC_SUCCESS,
	      "READ");

	/* an SRQ on the parent domain: its queue from alloc too */
	{
		struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
		struct ibv_srq *srq = ibv_create_srq(pd, &sa);
		struct ibv_sge sge = {
		    .addr = (uintptr_t)buf + 8192, .length = 512, .lkey = mr->lkey};
		struct ibv_recv_wr rw = {.wr_id = 4, .sg_list = &sge, .num_sge = 1}, *bad;
		struct ibv_qp_init_attr_ex ia = {.send_cq = cq,
						 .recv_cq = cq,
						 .cap = {.max_send_wr = 4, .max_send_sge = 1},
						 .qp_type = IBV_QPT_RC,
						 .comp_mask = IBV_QP_INIT_ATTR_PD,
						 .pd = pd};
		struct ibv_qp *qs, *qr = make_qp(B.pd, B.cq, B.cq, 0, 0);

		CHECK(srq && al.alloc_srq == 1, "SRQ on the parent domain (%d allocations)",
		      al.alloc_srq);
		ia.srq = srq;
		qs = srq ? ibv_create_qp_ex(A.ctx, &ia) : NULL;
		CHECK(qs && qr && !connect_pair(qs, qr), "a QP with the SRQ, connected");
		CHECK(srq && !ibv_post_srq_recv(srq, &rw, &bad), "post_srq_recv");
		if (qs && qr) {
			CHECK(run_wr(qr, B.cq, IBV_WR_SEND, rmr->lkey, rbuf, 300, 0, 0) ==
				      IBV_WC_SUCCESS &&
				  recv_status(cq, &n) == IBV_WC_SUCCESS && n == 300 &&
				  !memcmp(buf + 8192, rbuf, 300),
			      "SEND received through the SRQ of the parent domain");
		}
		mpair_destroy(qs, qr);
		CHECK(srq && !ibv_destroy_srq(srq) && al.free_srq == 1, "destroy_srq frees it");
	}
	CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd of a parent domain with a QP/CQ: EBUSY");
	CHECK(!ibv_destroy_qp(qa) && al.free_qp == al.alloc_qp,
	      "destroy_qp frees what it took "
	      "(%d of %d)",
	      al.free_qp, al.alloc_qp);
	ibv_destroy_qp(qb);
	CHECK(!ibv_destroy_cq(cq) && al.free_cq == al.alloc_cq && al.live == 0,
	      "destroy_cq frees the ring");
	CHECK(ibv_dealloc_pd(pd) == EBUSY, "still an MR on it: EBUSY");
	ibv_dereg_mr(pmr);

	/* IBV_ALLOCATOR_USE_DEFAULT: asked, then uroce's own memory */
	al.use_default = true;
	al.alloc_cq = 0;
	cq = cq_on(pd, 8);
	CHECK(cq && al.alloc_cq == 1 && al.live == 0, "USE_DEFAULT: asked once, nothing taken");
	al.free_cq = 0;
	if (cq)
		CHECK(!ibv_destroy_cq(cq) && al.free_cq == 0, "and not given back to free()");
	al.use_default = false;
	/* an allocator that fails: the create fails */
	al.refuse = true;
	errno = 0;
	CHECK(!cq_on(pd, 8) && errno == ENOMEM, "alloc returns NULL: ENOMEM");
	al.refuse = false;
	CHECK(al.bad == 0,
	      "every call had the parent domain, pd_context and a power-of-2 "
	      "alignment (%d bad)",
	      al.bad);
	CHECK(!ibv_dealloc_pd(pd), "dealloc_pd of the parent domain");
	ibv_dereg_mr(mr);
	ibv_dereg_mr(rmr);
	free(buf);
	free(rbuf);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(110);
	mside_open(&A);
	mside_open(&B);
	test_td();
	test_args();
	test_allocators();
	mside_close(&A);
	mside_close(&B);
	return finish("test_pdom");
}

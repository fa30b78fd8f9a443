/* Device memory (src/verbs/dm.c): max_dm_size, ibv_alloc_dm limits and
 * alignment, ibv_memcpy_to_dm/from_dm (verbs.h's inline functions, which
 * call the dm's own pointers) and their bounds, zero-based DM MRs, traffic
 * from and to a DM MR (WRITE, READ, SEND/RECV, atomics), ibv_free_dm while
 * an MR is registered on it.
 */
#include <unistd.h>

#include "mem_loop.h"

static struct mside A, B;

static void test_alloc(void)
{
	struct ibv_alloc_dm_attr at = {.length = 4096};
	struct ibv_device_attr_ex a;
	struct ibv_dm *dm, *dm2;
	uint8_t buf[256], out[256];

	memset(&a, 0, sizeof(a));
	CHECK(!ibv_query_device_ex(A.ctx, NULL, &a) && a.max_dm_size >= 65536, "max_dm_size %llu",
	      (unsigned long long)a.max_dm_size);
	dm = ibv_alloc_dm(A.ctx, &at);
	CHECK(dm && dm->context == A.ctx, "alloc 4 KiB: errno %d", errno);
	if (!dm)
		return;
	fill(buf, sizeof(buf), 1);
	CHECK(!ibv_memcpy_to_dm(dm, 100, buf, sizeof(buf)), "memcpy_to_dm");
	memset(out, 0, sizeof(out));
	CHECK(!ibv_memcpy_from_dm(out, dm, 100, sizeof(out)) && !memcmp(out, buf, sizeof(out)),
	      "memcpy_from_dm reads it back");
	CHECK(ibv_memcpy_to_dm(dm, 4000, buf, 200) == EINVAL, "to_dm past the end: EINVAL");
	CHECK(ibv_memcpy_from_dm(out, dm, UINT64_MAX - 10, 20) == EINVAL,
	      "from_dm with an offset that wraps: EINVAL");
	CHECK(!ibv_memcpy_to_dm(dm, 4096, buf, 0), "0 bytes at the end");

	at.length = a.max_dm_size + 1;
	errno = 0;
	CHECK(!ibv_alloc_dm(A.ctx, &at) && errno == ENOMEM, "more than max_dm_size: ENOMEM");
	at.length = a.max_dm_size; /* 4 KiB are taken */
	errno = 0;
	CHECK(!ibv_alloc_dm(A.ctx, &at) && errno == ENOMEM, "all of it while 4 KiB are used");
	at.length = a.max_dm_size - 4096;
	dm2 = ibv_alloc_dm(A.ctx, &at);
	CHECK(dm2 != NULL, "the rest: errno %d", errno);
	if (dm2)
		CHECK(!ibv_free_dm(dm2), "free");
	at.length = 0;
	errno = 0;
	CHECK(!ibv_alloc_dm(A.ctx, &at) && errno == EINVAL, "0 bytes: EINVAL");
	at = (struct ibv_alloc_dm_attr){.length = 64, .comp_mask = 1};
	errno = 0;
	CHECK(!ibv_alloc_dm(A.ctx, &at) && errno == EINVAL, "unknown comp_mask: EINVAL");
	at = (struct ibv_alloc_dm_attr){.length = 64, .log_align_req = 12};
	dm2 = ibv_alloc_dm(A.ctx, &at);
	CHECK(dm2 && ((uintptr_t)container_of(dm2, struct uroce_dm, ibdm)->buf & 4095) == 0,
	      "4 KiB alignment");
	if (dm2)
		ibv_free_dm(dm2);
	CHECK(!ibv_free_dm(dm), "free");
	CHECK(ibv_free_dm(dm) == ENOENT, "free_dm twice: ENOENT (the object registry)");
}

static void test_traffic(void)
{
	const size_t len = 8192;
	struct ibv_alloc_dm_attr at = {.length = len};
	struct ibv_dm *dm = ibv_alloc_dm(B.ctx, &at), *ldm = ibv_alloc_dm(A.ctx, &at);
	uint8_t *host = aligned_alloc(4096, len), *chk = malloc(len);
	struct ibv_mr *hmr = ibv_reg_mr(A.pd, host, len, FULL_ACCESS);
	struct ibv_mr *mr, *lmr, *bad;
	struct ibv_qp *qa, *qb;
	uint32_t n = 0;
	uint64_t v;

	CHECK(dm && ldm && hmr, "DMs");
	if (!dm || !ldm || !hmr)
		return;
	errno = 0;
	bad = ibv_reg_dm_mr(B.pd, dm, 0, len, FULL_ACCESS);
	CHECK(!bad && errno == EINVAL, "a DM MR without ZERO_BASED: EINVAL");
	errno = 0;
	bad = ibv_reg_dm_mr(B.pd, dm, 4096, len, FULL_ACCESS | IBV_ACCESS_ZERO_BASED);
	CHECK(!bad && errno == EINVAL, "past the DM: EINVAL");
	/* the MR covers [1024, 8192) of the DM, addressed from 0 */
	mr = ibv_reg_dm_mr(B.pd, dm, 1024, len - 1024,
			   FULL_ACCESS | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED);
	lmr = ibv_reg_dm_mr(A.pd, ldm, 0, len, FULL_ACCESS | IBV_ACCESS_ZERO_BASED);
	CHECK(mr && lmr && mr->length == len - 1024, "DM MRs: errno %d", errno);
	if (!mr || !lmr)
		return;
	CHECK(!mpair(&A, NULL, &B, &qa, &qb), "pair");

	fill(host, len, 2);
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_WRITE, hmr->lkey, host, 3000, mr->rkey, 100) ==
		  IBV_WC_SUCCESS,
	      "WRITE into the DM MR at offset 100 (zero-based)");
	CHECK(!ibv_memcpy_from_dm(chk, dm, 1024 + 100, 3000) && !memcmp(chk, host, 3000),
	      "the DM holds it at 1024 + 100");
	fill(chk, len, 3);
	CHECK(!ibv_memcpy_to_dm(dm, 1024, chk, 2000), "memcpy_to_dm");
	memset(host, 0, len);
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_READ, hmr->lkey, host, 2000, mr->rkey, 0) ==
		      IBV_WC_SUCCESS &&
		  !memcmp(host, chk, 2000),
	      "READ from the DM MR");
	v = 10;
	CHECK(!ibv_memcpy_to_dm(dm, 1024 + 4096, &v, 8), "counter");
	CHECK(run_wr(qa, A.cq, IBV_WR_ATOMIC_FETCH_AND_ADD, hmr->lkey, host, 8, mr->rkey, 4096) ==
		      IBV_WC_SUCCESS &&
		  *(uint64_t *)(void *)host == 10,
	      "FETCH_ADD on the DM");
	CHECK(!ibv_memcpy_from_dm(&v, dm, 1024 + 4096, 8) && v == 15, "DM counter %llu",
	      (unsigned long long)v);

	/* SEND from a local DM MR (SGE addresses from 0) into a remote DM MR */
	fill(chk, len, 4);
	CHECK(!ibv_memcpy_to_dm(ldm, 0, chk, len), "fill the local DM");
	CHECK(!post_recv(qb, 1, (void *)(uintptr_t)512, 4096, mr->lkey), "post_recv into DM");
	CHECK(run_wr(qa, A.cq, IBV_WR_SEND, lmr->lkey, (void *)(uintptr_t)256, 4000, 0, 0) ==
		  IBV_WC_SUCCESS,
	      "SEND from the local DM");
	CHECK(recv_status(B.cq, &n) == IBV_WC_SUCCESS && n == 4000, "received %u", n);
	memset(host, 0, len);
	CHECK(!ibv_memcpy_from_dm(host, dm, 1024 + 512, 4000) && !memcmp(host, chk + 256, 4000),
	      "DM to DM data");
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_WRITE, hmr->lkey, host, 64, mr->rkey, len - 1024) ==
		  IBV_WC_REM_ACCESS_ERR,
	      "WRITE past the DM MR: remote access error");
	mpair_destroy(qa, qb);

	CHECK(ibv_free_dm(dm) == EBUSY && errno == EBUSY, "free_dm with an MR on it: EBUSY");
	CHECK(!ibv_dereg_mr(mr) && !ibv_free_dm(dm), "dereg, then free");
	CHECK(!ibv_dereg_mr(lmr) && !ibv_free_dm(ldm), "local too");
	ibv_dereg_mr(hmr);
	free(host);
	free(chk);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(110);
	mside_open(&A);
	mside_open(&B);
	test_alloc();
	test_traffic();
	mside_close(&A);
	mside_close(&B);
	return finish("test_dm");
}

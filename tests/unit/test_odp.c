/* On-demand paging (src/verbs/odp.c): odp_caps; explicit ODP MRs over
 * memory that is not faulted in yet; implicit ODP (NULL, SIZE_MAX);
 * ibv_advise_mr; pages the program unmaps: a peer's WRITE, READ or atomic
 * there completes with IBV_WC_REM_ACCESS_ERR, a local SEND from there with
 * IBV_WC_LOC_PROT_ERR, a receive there with IBV_WC_LOC_PROT_ERR - and the
 * process lives on.  RC and UD.  Prints what a copy through the kernel
 * costs next to memcpy (not asserted).
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mem_loop.h"

#define ODP_ACCESS                                                                                 \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ON_DEMAND)
#define NPAGES 8

static struct mside A, B;
static long pg;

static void test_caps(void)
{
	struct ibv_device_attr_ex a;
	const uint32_t rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
			    IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
			    IBV_ODP_SUPPORT_SRQ_RECV;
	const uint32_t ud = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;

	memset(&a, 0, sizeof(a));
	CHECK(!ibv_query_device_ex(A.ctx, NULL, &a), "query_device_ex");
	CHECK((a.odp_caps.general_caps & (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT)) ==
		  (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT),
	      "general_caps 0x%llx", (unsigned long long)a.odp_caps.general_caps);
	CHECK((a.odp_caps.per_transport_caps.rc_odp_caps & rc) == rc, "rc_odp_caps 0x%x",
	      a.odp_caps.per_transport_caps.rc_odp_caps);
	CHECK((a.odp_caps.per_transport_caps.ud_odp_caps & ud) == ud, "ud_odp_caps 0x%x",
	      a.odp_caps.per_transport_caps.ud_odp_caps);
}

/* Fresh anonymous pages, never touched: nothing is resident. */
static uint8_t *fresh(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		printf("mmap: %s\n", strerror(errno));
		exit(1);
	}
	return p;
}

static int resident(void *p, size_t n)
{
	unsigned char v[NPAGES];
	int r = 0;

	if (n / (size_t)pg > NPAGES || mincore(p, n, v))
		return -1;
	for (size_t i = 0; i < n / (size_t)pg; i++)
		r += v[i] & 1;
	return r;
}

static void test_explicit_rc(void)
{
	const size_t len = NPAGES * (size_t)pg;
	uint8_t *remote = fresh(len), *local = aligned_alloc((size_t)pg, len);
	struct ibv_mr *rmr, *lmr = ibv_reg_mr(A.pd, local, len, FULL_ACCESS);
	struct ibv_qp *qa, *qb;
	uint64_t *ctr;

	rmr = ibv_reg_mr(B.pd, remote, len, ODP_ACCESS);
	CHECK(rmr && lmr, "reg ODP MR: errno %d", errno);
	if (!rmr || !lmr)
		return;
	CHECK(resident(remote, len) == 0, "registration faults nothing in (%d pages)",
	      resident(remote, len));
	CHECK(!mpair(&A, NULL, &B, &qa, &qb), "pair");
	fill(local, len, 3);
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_WRITE, lmr->lkey, local, (uint32_t)len, rmr->rkey,
		     (uintptr_t)remote) == IBV_WC_SUCCESS,
	      "WRITE into pages not faulted in");
	CHECK(!memcmp(remote, local, len), "WRITE data");
	memset(local, 0, len);
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_READ, lmr->lkey, local, 3000, rmr->rkey,
		     (uintptr_t)remote + 100) == IBV_WC_SUCCESS,
	      "READ");
	CHECK(!memcmp(local, remote + 100, 3000), "READ data");
	ctr = (uint64_t *)(void *)(remote + 2 * pg);
	*ctr = 40;
	CHECK(run_wr(qa, A.cq, IBV_WR_ATOMIC_FETCH_AND_ADD, lmr->lkey, local, 8, rmr->rkey,
		     (uintptr_t)ctr) == IBV_WC_SUCCESS &&
		  *(uint64_t *)(void *)local == 40 && *ctr == 45,
	      "FETCH_ADD: %llu", (unsigned long long)*ctr);

	/* the program unmaps page 3 (and maps nothing there) */
	CHECK(!munmap(remote + 3 * pg, (size_t)pg), "munmap");
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_WRITE, lmr->lkey, local, 64, rmr->rkey,
		     (uintptr_t)remote + 3 * pg + 8) == IBV_WC_REM_ACCESS_ERR,
	      "WRITE to an unmapped ODP page: remote access error");
	mpair_destroy(qa, qb);
	CHECK(!mpair(&A, NULL, &B, &qa, &qb), "pair");
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_READ, lmr->lkey, local, 2 * (uint32_t)pg, rmr->rkey,
		     (uintptr_t)remote + 2 * pg) == IBV_WC_REM_ACCESS_ERR,
	      "READ across an unmapped ODP page: remote access error");
	mpair_destroy(qa, qb);
	CHECK(!mpair(&A, NULL, &B, &qa, &qb), "pair");
	CHECK(run_wr(qa, A.cq, IBV_WR_ATOMIC_CMP_AND_SWP, lmr->lkey, local, 8, rmr->rkey,
		     (uintptr_t)remote + 3 * pg) == IBV_WC_REM_ACCESS_ERR,
	      "atomic on an unmapped ODP page: remote access error");
	mpair_destroy(qa, qb);

	/* read-only now: a WRITE there is refused as the CPU would refuse it */
	CHECK(!mprotect(remote + 4 * pg, (size_t)pg, PROT_READ), "mprotect");
	CHECK(!mpair(&A, NULL, &B, &qa, &qb), "pair");
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_WRITE, lmr->lkey, local, 64, rmr->rkey,
		     (uintptr_t)remote + 4 * pg) == IBV_WC_REM_ACCESS_ERR,
	      "WRITE to a read-only ODP page: remote access error");
	mpair_destroy(qa, qb);
	CHECK(!mpair(&A, NULL, &B, &qa, &qb), "pair");
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_READ, lmr->lkey, local, 64, rmr->rkey,
		     (uintptr_t)remote + 4 * pg) == IBV_WC_SUCCESS,
	      "READ from the read-only page works");

	/* the page comes back: the MR covers it again, no re-registration */
	CHECK(mmap(remote + 3 * pg, (size_t)pg, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == remote + 3 * pg,
	      "map again");
	fill(local, 64, 9);
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_WRITE, lmr->lkey, local, 64, rmr->rkey,
		     (uintptr_t)remote + 3 * pg) == IBV_WC_SUCCESS &&
		  !memcmp(remote + 3 * pg, local, 64),
	      "WRITE to the page mapped again");
	mpair_destroy(qa, qb);
	CHECK(!ibv_dereg_mr(rmr) && !ibv_dereg_mr(lmr), "dereg");
	munmap(remote, len);
	free(local);
}

/* Local accesses: SEND from, and receive into, unmapped ODP pages. */
static void test_local(void)
{
	const size_t len = 4 * (size_t)pg;
	uint8_t *src = fresh(len), *dst = fresh(len);
	struct ibv_mr *smr = ibv_reg_mr(A.pd, src, len, ODP_ACCESS);
	struct ibv_mr *dmr = ibv_reg_mr(B.pd, dst, len, ODP_ACCESS);
	struct ibv_qp *qa, *qb;
	uint32_t n = 0;

	CHECK(smr && dmr, "reg");
	if (!smr || !dmr)
		return;
	CHECK(!mpair(&A, NULL, &B, &qa, &qb), "pair");
	fill(src, len, 5);
	CHECK(!post_recv(qb, 1, dst, (uint32_t)len, dmr->lkey), "post_recv");
	CHECK(run_wr(qa, A.cq, IBV_WR_SEND, smr->lkey, src, 5000, 0, 0) == IBV_WC_SUCCESS,
	      "SEND from ODP to ODP");
	CHECK(recv_status(B.cq, &n) == IBV_WC_SUCCESS && n == 5000 && !memcmp(dst, src, 5000),
	      "received %u", n);
	munmap(src + pg, (size_t)pg);
	CHECK(!post_recv(qb, 2, dst, (uint32_t)len, dmr->lkey), "post_recv");
	CHECK(run_wr(qa, A.cq, IBV_WR_SEND, smr->lkey, src, 2 * (uint32_t)pg, 0, 0) ==
		  IBV_WC_LOC_PROT_ERR,
	      "SEND from an unmapped ODP page: local protection error");
	mpair_destroy(qa, qb);
	ibv_poll_cq(B.cq, 16, (struct ibv_wc[16]){}); /* the flushed receive */

	CHECK(!mpair(&A, NULL, &B, &qa, &qb), "pair");
	munmap(dst + 2 * pg, (size_t)pg);
	CHECK(!post_recv(qb, 3, dst + 2 * pg, (uint32_t)pg, dmr->lkey), "post_recv");
	CHECK(run_wr(qa, A.cq, IBV_WR_SEND, smr->lkey, src, 100, 0, 0) == IBV_WC_REM_OP_ERR,
	      "SEND into an unmapped receive buffer: remote operational error at the sender");
	CHECK(recv_status(B.cq, NULL) == IBV_WC_LOC_PROT_ERR,
	      "receive into an unmapped ODP page: local protection error");
	mpair_destroy(qa, qb);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	munmap(src, len);
	munmap(dst, len);
}

static void test_implicit(void)
{
	uint8_t *a = malloc(65536), *b = fresh(4 * (size_t)pg);
	struct ibv_mr *ia = ibv_reg_mr(A.pd, NULL, SIZE_MAX, ODP_ACCESS);
	struct ibv_mr *ib = ibv_reg_mr(B.pd, NULL, SIZE_MAX, ODP_ACCESS);
	struct ibv_qp *qa, *qb;
	uint64_t x = 7;

	CHECK(ia && ib, "implicit ODP MRs: errno %d", errno);
	if (!ia || !ib)
		return;
	CHECK(ia->addr == NULL && ia->length == SIZE_MAX, "addr NULL, length SIZE_MAX");
	errno = 0;
	CHECK(!ibv_reg_mr(A.pd, NULL, SIZE_MAX, FULL_ACCESS) && errno == EINVAL,
	      "NULL/SIZE_MAX without ON_DEMAND: EINVAL (%d)", errno);
	CHECK(!mpair(&A, NULL, &B, &qa, &qb), "pair");
	fill(a, 65536, 8);
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_WRITE, ia->lkey, a + 1000, 10000, ib->rkey,
		     (uintptr_t)b + 7) == IBV_WC_SUCCESS &&
		  !memcmp(b + 7, a + 1000, 10000),
	      "WRITE malloc memory to mmap memory, both through implicit MRs");
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_READ, ia->lkey, &x, 8, ib->rkey, (uintptr_t)b + 64) ==
		      IBV_WC_SUCCESS &&
		  !memcmp(&x, b + 64, 8),
	      "READ into a stack variable");
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_WRITE, ia->lkey, a, 8, ib->rkey, 4096) ==
		  IBV_WC_REM_ACCESS_ERR,
	      "WRITE to address 4096 (never mapped): remote access error");
	mpair_destroy(qa, qb);
	ibv_dereg_mr(ia);
	ibv_dereg_mr(ib);
	free(a);
	munmap(b, 4 * (size_t)pg);
}

static void test_advise(void)
{
	const size_t len = NPAGES * (size_t)pg;
	uint8_t *m = fresh(len), *plain = aligned_alloc((size_t)pg, (size_t)pg);
	struct ibv_mr *mr = ibv_reg_mr(A.pd, m, len, ODP_ACCESS);
	struct ibv_mr *pmr = ibv_reg_mr(A.pd, plain, (size_t)pg, FULL_ACCESS);
	struct ibv_sge sge = {.addr = (uintptr_t)m, .length = 4 * (uint32_t)pg, .lkey = mr->lkey};
	struct ibv_sge bad = sge;
	int r;

	CHECK(resident(m, len) == 0, "nothing resident");
	r = ibv_advise_mr(A.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sge,
			  1);
	CHECK(r == 0, "prefetch-write: %d", r);
	CHECK(resident(m, len) == 4, "prefetch made 4 pages resident (%d)", resident(m, len));
	sge.addr = (uintptr_t)m + 4 * pg;
	CHECK(!ibv_advise_mr(A.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1), "prefetch (read)");
	CHECK(!ibv_advise_mr(A.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, &sge, 1),
	      "prefetch, no fault");
	bad.lkey = pmr->lkey;
	bad.addr = (uintptr_t)plain;
	bad.length = 64;
	CHECK(ibv_advise_mr(A.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1) == EINVAL,
	      "a non-ODP MR: EINVAL");
	bad = sge;
	bad.length = (uint32_t)len;
	CHECK(ibv_advise_mr(A.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1) == EINVAL,
	      "a range past the MR: EINVAL");
	CHECK(ibv_advise_mr(A.pd, (enum ibv_advise_mr_advice)9, 0, &sge, 1) == EOPNOTSUPP,
	      "unknown advice: EOPNOTSUPP");
	CHECK(ibv_advise_mr(B.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1) == EINVAL,
	      "another PD's MR: EINVAL");
	munmap(m + 6 * pg, (size_t)pg);
	bad = sge;
	bad.addr = (uintptr_t)m + 6 * pg;
	bad.length = (uint32_t)pg;
	CHECK(ibv_advise_mr(A.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &bad,
			    1) == EFAULT,
	      "flush-prefetch of an unmapped page: EFAULT");
	CHECK(ibv_advise_mr(A.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1) == 0,
	      "a plain prefetch is a hint: 0");
	ibv_dereg_mr(mr);
	ibv_dereg_mr(pmr);
	munmap(m, len);
	free(plain);
}

/* UD: SEND from and receive into ODP memory; a receive buffer that is
 * unmapped gives a local protection error. */
static void test_ud(void)
{
	const size_t len = 4 * (size_t)pg;
	uint8_t *s = fresh(len), *r = fresh(len);
	struct ibv_mr *smr = ibv_reg_mr(A.pd, s, len, ODP_ACCESS);
	struct ibv_mr *rmr = ibv_reg_mr(B.pd, r, len, ODP_ACCESS);
	struct ibv_qp_init_attr ia = {
	    .send_cq = A.cq, .recv_cq = A.cq, .cap = {8, 8, 1, 1, 0}, .qp_type = IBV_QPT_UD};
	struct ibv_qp *ua = ibv_create_qp(A.pd, &ia), *ub;
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11};
	struct ibv_ah_attr ah = {.is_global = 1, .port_num = 1};
	struct ibv_sge sge = {.addr = (uintptr_t)s, .length = 1000, .lkey = smr->lkey};
	struct ibv_send_wr wr = {.wr_id = 5,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	struct ibv_ah *a;
	uint32_t n = 0;

	ia.send_cq = ia.recv_cq = B.cq;
	ub = ibv_create_qp(B.pd, &ia);
	CHECK(ua && ub && smr && rmr, "UD QPs and ODP MRs");
	if (!ua || !ub || !smr || !rmr)
		return;
	for (int i = 0; i < 2; i++) {
		struct ibv_qp *q = i ? ub : ua;

		at.qp_state = IBV_QPS_INIT;
		CHECK(!ibv_modify_qp(q, &at,
				     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
		      "INIT");
		at.qp_state = IBV_QPS_RTR;
		CHECK(!ibv_modify_qp(q, &at, IBV_QP_STATE), "RTR");
		at.qp_state = IBV_QPS_RTS;
		CHECK(!ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_SQ_PSN), "RTS");
	}
	ibv_query_gid(A.ctx, 1, 0, &ah.grh.dgid);
	ah.grh.hop_limit = 1;
	a = ibv_create_ah(A.pd, &ah);
	CHECK(a != NULL, "AH");
	wr.wr.ud.ah = a;
	wr.wr.ud.remote_qpn = ub->qp_num;
	wr.wr.ud.remote_qkey = 0x11;
	fill(s, 1000, 6);
	CHECK(!post_recv(ub, 1, r, 2000, rmr->lkey), "post_recv");
	CHECK(!ibv_post_send(ua, &wr, &bad) && wait_wc(A.cq, &wc, 1) == 1 &&
		  wc.status == IBV_WC_SUCCESS,
	      "UD SEND from ODP memory");
	CHECK(recv_status(B.cq, &n) == IBV_WC_SUCCESS && n == 1040 && !memcmp(r + 40, s, 1000),
	      "UD receive into ODP memory (%u bytes with the GRH)", n);
	munmap(r + 2 * pg, (size_t)pg);
	CHECK(!post_recv(ub, 2, r + 2 * pg, 2000, rmr->lkey), "post_recv");
	CHECK(!ibv_post_send(ua, &wr, &bad) && wait_wc(A.cq, &wc, 1) == 1, "UD SEND");
	CHECK(recv_status(B.cq, NULL) == IBV_WC_LOC_PROT_ERR,
	      "UD receive into an unmapped ODP page: local protection error");
	munmap(s + pg, (size_t)pg);
	sge.addr = (uintptr_t)s + pg;
	CHECK(!ibv_post_send(ua, &wr, &bad) && wait_wc(A.cq, &wc, 1) == 1 &&
		  wc.status == IBV_WC_LOC_PROT_ERR,
	      "UD SEND from an unmapped ODP page: local protection error (%d)", wc.status);
	ibv_destroy_ah(a);
	ibv_destroy_qp(ua);
	ibv_destroy_qp(ub);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(rmr);
	munmap(s, len);
	munmap(r, len);
}

/* A memory window bound to an ODP MR is ODP too: an unmapped page behind
 * the window is a remote access error, not a fault. */
static void test_mw(void)
{
	const size_t len = 4 * (size_t)pg;
	uint8_t *m = fresh(len), *local = aligned_alloc((size_t)pg, len);
	struct ibv_mr *mr = ibv_reg_mr(B.pd, m, len, ODP_ACCESS | IBV_ACCESS_MW_BIND);
	struct ibv_mr *lmr = ibv_reg_mr(A.pd, local, len, FULL_ACCESS);
	struct ibv_mw *mw = ibv_alloc_mw(B.pd, IBV_MW_TYPE_1);
	struct ibv_mw_bind bind = {.wr_id = 1, .send_flags = IBV_SEND_SIGNALED};
	struct ibv_qp *qa, *qb;
	struct ibv_wc wc;

	CHECK(mr && lmr && mw, "ODP MR with MW_BIND, a type 1 window");
	if (!mr || !lmr || !mw)
		return;
	CHECK(!mpair(&A, NULL, &B, &qa, &qb), "pair");
	bind.bind_info = (struct ibv_mw_bind_info){.mr = mr,
						   .addr = (uintptr_t)m,
						   .length = len,
						   .mw_access_flags = IBV_ACCESS_REMOTE_WRITE};
	CHECK(!ibv_bind_mw(qb, mw, &bind) && wait_wc(B.cq, &wc, 1) == 1 &&
		  wc.status == IBV_WC_SUCCESS,
	      "bind the window over the ODP MR");
	fill(local, len, 11);
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_WRITE, lmr->lkey, local, 100, mw->rkey,
		     (uintptr_t)m + pg) == IBV_WC_SUCCESS &&
		  !memcmp(m + pg, local, 100),
	      "WRITE through the window");
	munmap(m + 2 * pg, (size_t)pg);
	CHECK(run_wr(qa, A.cq, IBV_WR_RDMA_WRITE, lmr->lkey, local, 100, mw->rkey,
		     (uintptr_t)m + 2 * pg) == IBV_WC_REM_ACCESS_ERR,
	      "WRITE through the window to an unmapped page: remote access error");
	mpair_destroy(qa, qb);
	ibv_dealloc_mw(mw);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(lmr);
	munmap(m, len);
	free(local);
}

/* Where a seccomp filter refuses process_vm_readv/writev (EPERM), ODP
 * copies fall back to madvise(MADV_POPULATE_*) + memcpy: still no fault on
 * an unmapped or read-only page.  In a child, which installs the filter. */
static int fallback_child(void)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 2, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	uint8_t *m = fresh(3 * (size_t)pg), src[64], dst[64];

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return 10;
	if (process_vm_readv(getpid(), NULL, 0, NULL, 0, 0) >= 0 || errno != EPERM)
		return 11; /* the filter is not in force */
	memset(src, 0x5a, sizeof(src));
	munmap(m + pg, (size_t)pg);
	mprotect(m + 2 * pg, (size_t)pg, PROT_READ);
	if (!uroce_odp_write(m + 8, src, sizeof(src)) || memcmp(m + 8, src, sizeof(src)))
		return 12; /* a mapped page: copied */
	if (!uroce_odp_read(dst, m + 8, sizeof(dst)) || memcmp(dst, src, sizeof(dst)))
		return 13;
	if (uroce_odp_write(m + pg, src, 8) || uroce_odp_read(dst, m + pg, 8))
		return 14; /* unmapped: refused, no SIGSEGV */
	if (uroce_odp_write(m + 2 * pg, src, 8) || !uroce_odp_read(dst, m + 2 * pg, 8))
		return 15; /* read-only: read yes, write no */
	return 0;
}

static void test_fallback(void)
{
	int status = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(fallback_child());
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "with process_vm_* refused by seccomp: %s %d",
	      WIFSIGNALED(status) ? "signal" : "exit",
	      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* What the copy through the kernel costs (printed, not asserted). */
static void measure(void)
{
	static uint8_t a[4096], b[4096];
	const int n = 20000;
	uint64_t t0, t1, t2;

	t0 = ns_of(CLOCK_MONOTONIC);
	for (int i = 0; i < n; i++) {
		a[i & 4095] = (uint8_t)i;
		memcpy(b, a, sizeof(a));
		__asm__ volatile("" ::: "memory");
	}
	t1 = ns_of(CLOCK_MONOTONIC);
	for (int i = 0; i < n; i++) {
		a[i & 4095] = (uint8_t)i;
		uroce_odp_write(b, a, sizeof(a));
	}
	t2 = ns_of(CLOCK_MONOTONIC);
	CHECK(!memcmp(a, b, sizeof(a)), "copies arrived");
	printf("4 KiB into an MR: memcpy %.0f ns, ODP (process_vm_writev) %.0f ns per copy\n",
	       (double)(t1 - t0) / n, (double)(t2 - t1) / n);
	t0 = ns_of(CLOCK_MONOTONIC);
	for (int i = 0; i < n; i++)
		uroce_odp_write(b, a, 64);
	t1 = ns_of(CLOCK_MONOTONIC);
	for (int i = 0; i < n; i++)
		uroce_odp_atomic_ok(b);
	t2 = ns_of(CLOCK_MONOTONIC);
	printf("64 B ODP copy %.0f ns; ODP atomic check (madvise) %.0f ns\n", (double)(t1 - t0) / n,
	       (double)(t2 - t1) / n);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(110);
	pg = sysconf(_SC_PAGESIZE);
	mside_open(&A);
	mside_open(&B);
	test_caps();
	test_explicit_rc();
	test_local();
	test_implicit();
	test_advise();
	test_ud();
	test_mw();
	test_fallback();
	measure();
	mside_close(&A);
	mside_close(&B);
	return finish("test_odp");
}

/* Honest limits (issue 11): every max_* ibv_query_device reports can be
 * created in one context, and one more fails with ENOMEM ("not enough
 * resources", as the man pages say); per-object caps (max_qp_wr, max_sge,
 * max_cqe, max_srq_wr, max_srq_sge, max_qp_rd_atom) are accepted at the
 * maximum and refused with EINVAL one above.  Objects are as small as their
 * verbs allow (1-entry queues, one 4 KiB buffer for all MRs), so the whole
 * run takes a few seconds.
 */
#include "rc_harness.h"

static struct ibv_context *c;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_device_attr da;
static union ibv_gid gid;
static uint8_t buf[4096];

/* create() the max of one kind, one more must fail with ENOMEM; then
 * destroy() them all.  The objects are kept in a list of pointers. */
typedef void *(*create_fn)(void);
typedef int (*destroy_fn)(void *);

static void limit(const char *name, int max, create_fn create, destroy_fn destroy)
{
	void **obj = calloc((size_t)max + 1, sizeof(*obj));
	int n = 0, bad = 0;

	if (!obj) {
		CHECK(0, "%s: out of memory for the test", name);
		return;
	}
	for (; n < max; n++) {
		obj[n] = create();
		if (!obj[n])
			break;
	}
	CHECK(n == max, "%s: %d of %d created: %s", name, n, max, strerror(errno));
	if (n == max) {
		errno = 0;
		obj[n] = create();
		CHECK(!obj[n] && errno == ENOMEM,
		      "%s: number %d: %p errno %d, want NULL and ENOMEM", name, max + 1, obj[n],
		      errno);
		if (obj[n])
			destroy(obj[n]);
	}
	for (int i = 0; i < n; i++)
		bad += destroy(obj[i]) != 0;
	CHECK(!bad, "%s: %d destroys failed", name, bad);
	free(obj);
}

static void *mk_pd(void)
{
	return ibv_alloc_pd(c);
}
static int rm_pd(void *p)
{
	return ibv_dealloc_pd(p);
}
static void *mk_cq(void)
{
	return ibv_create_cq(c, 1, NULL, NULL, 0);
}
static int rm_cq(void *p)
{
	return ibv_destroy_cq(p);
}
static void *mk_mr(void)
{
	return ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
}
static int rm_mr(void *p)
{
	return ibv_dereg_mr(p);
}
static void *mk_mw(void)
{
	return ibv_alloc_mw(pd, IBV_MW_TYPE_2);
}
static int rm_mw(void *p)
{
	return ibv_dealloc_mw(p);
}
static void *mk_srq(void)
{
	struct ibv_srq_init_attr a = {.attr = {.max_wr = 1, .max_sge = 1}};

	return ibv_create_srq(pd, &a);
}
static int rm_srq(void *p)
{
	return ibv_destroy_srq(p);
}
static void *mk_ah(void)
{
	struct ibv_ah_attr a = {.is_global = 1, .port_num = 1};

	a.grh.dgid = gid;
	a.grh.hop_limit = 1;
	return ibv_create_ah(pd, &a);
}
static int rm_ah(void *p)
{
	return ibv_destroy_ah(p);
}
static void *mk_qp(void)
{
	struct ibv_qp_init_attr a = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_UD,
	    .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};

	return ibv_create_qp(pd, &a);
}
static int rm_qp(void *p)
{
	return ibv_destroy_qp(p);
}

/* one QP with these caps: 0 when created (and destroyed), else errno */
static int qp_caps(uint32_t wr, uint32_t sge)
{
	struct ibv_qp_init_attr a = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {
		.max_send_wr = wr, .max_recv_wr = wr, .max_send_sge = sge, .max_recv_sge = sge}};
	struct ibv_qp *qp;

	errno = 0;
	qp = ibv_create_qp(pd, &a);
	if (!qp)
		return errno ? errno : -1;
	ibv_destroy_qp(qp);
	return 0;
}

static int srq_caps(uint32_t wr, uint32_t sge)
{
	struct ibv_srq_init_attr a = {.attr = {.max_wr = wr, .max_sge = sge}};
	struct ibv_srq *s;

	errno = 0;
	s = ibv_create_srq(pd, &a);
	if (!s)
		return errno ? errno : -1;
	ibv_destroy_srq(s);
	return 0;
}

static void caps(void)
{
	struct ibv_cq *big;
	int err;

	err = qp_caps((uint32_t)da.max_qp_wr, 1);
	CHECK(!err, "QP with max_qp_wr %d: %s", da.max_qp_wr, strerror(err));
	err = qp_caps((uint32_t)da.max_qp_wr + 1, 1);
	CHECK(err == EINVAL, "QP with max_qp_wr + 1: errno %d", err);
	err = qp_caps(1, (uint32_t)da.max_sge);
	CHECK(!err, "QP with max_sge %d: %s", da.max_sge, strerror(err));
	err = qp_caps(1, (uint32_t)da.max_sge + 1);
	CHECK(err == EINVAL, "QP with max_sge + 1: errno %d", err);
	err = srq_caps((uint32_t)da.max_srq_wr, (uint32_t)da.max_srq_sge);
	CHECK(!err, "SRQ with max_srq_wr %d, max_srq_sge %d: %s", da.max_srq_wr, da.max_srq_sge,
	      strerror(err));
	err = srq_caps((uint32_t)da.max_srq_wr + 1, 1);
	CHECK(err == EINVAL, "SRQ with max_srq_wr + 1: errno %d", err);
	err = srq_caps(1, (uint32_t)da.max_srq_sge + 1);
	CHECK(err == EINVAL, "SRQ with max_srq_sge + 1: errno %d", err);
	big = ibv_create_cq(c, da.max_cqe, NULL, NULL, 0);
	CHECK(big, "CQ with max_cqe %d: %s", da.max_cqe, strerror(errno));
	if (big)
		ibv_destroy_cq(big);
	errno = 0;
	big = ibv_create_cq(c, da.max_cqe + 1, NULL, NULL, 0);
	CHECK(!big && errno == EINVAL, "CQ with max_cqe + 1: errno %d", errno);
	if (big)
		ibv_destroy_cq(big);
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	setvbuf(stdout, NULL, _IOLBF, 0);
	c = list && list[0] ? ibv_open_device(list[0]) : NULL;
	if (!c || ibv_query_device(c, &da) || ibv_query_gid(c, 1, 0, &gid)) {
		printf("FAIL: cannot open a device\n");
		return 1;
	}
	ibv_free_device_list(list);
	pd = ibv_alloc_pd(c);
	cq = ibv_create_cq(c, 16, NULL, NULL, 0);
	if (!pd || !cq) {
		printf("FAIL: PD/CQ: %s\n", strerror(errno));
		return 1;
	}
	/* the PD and CQ above count */
	limit("max_pd", da.max_pd - 1, mk_pd, rm_pd);
	limit("max_cq", da.max_cq - 1, mk_cq, rm_cq);
	limit("max_mr", da.max_mr, mk_mr, rm_mr);
	limit("max_mw", da.max_mw, mk_mw, rm_mw);
	limit("max_srq", da.max_srq, mk_srq, rm_srq);
	limit("max_ah", da.max_ah, mk_ah, rm_ah);
	limit("max_qp", da.max_qp, mk_qp, rm_qp);
	caps();
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(c);
	printf("test_limits: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

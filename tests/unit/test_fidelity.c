/* uroce looks like the devices verbs programs are tested on (issue 11):
 * the attributes ibv_query_device(_ex) reports are those of rxe/mlx5 for
 * what uroce supports, and completions carry what mlx5 puts in them.
 *
 * Each test_* function is one item; main() runs them all.
 */
#include <fcntl.h>

#include "rc_harness.h"

/* ---- UD pair on the loopback device ---- */

struct ud_side {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah; /* toward the other side */
};

static int ud_up(struct harness *h, struct ud_side u[2], uint8_t tclass)
{
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr ia = {
		    .qp_type = IBV_QPT_UD,
		    .cap = {.max_send_wr = 16,
			    .max_recv_wr = 16,
			    .max_send_sge = 1,
			    .max_recv_sge = 1},
		};
		struct ibv_qp_attr a = {
		    .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111};

		u[i].cq = ibv_create_cq(h->s[i].ctx, 64, NULL, NULL, 0);
		if (!u[i].cq)
			return -1;
		ia.send_cq = ia.recv_cq = u[i].cq;
		u[i].qp = ibv_create_qp(h->s[i].pd, &ia);
		if (!u[i].qp)
			return -1;
		if (ibv_modify_qp(u[i].qp, &a,
				  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
			return -1;
		a.qp_state = IBV_QPS_RTR;
		if (ibv_modify_qp(u[i].qp, &a, IBV_QP_STATE))
			return -1;
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 1;
		if (ibv_modify_qp(u[i].qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
			return -1;
	}
	for (int i = 0; i < 2; i++) {
		struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};

		aa.grh.dgid = h->gid;
		aa.grh.hop_limit = 64;
		aa.grh.traffic_class = tclass;
		u[i].ah = ibv_create_ah(h->s[i].pd, &aa);
		if (!u[i].ah)
			return -1;
	}
	return 0;
}

static void ud_down(struct ud_side u[2])
{
	for (int i = 0; i < 2; i++) {
		if (u[i].ah)
			ibv_destroy_ah(u[i].ah);
		if (u[i].qp)
			ibv_destroy_qp(u[i].qp);
		if (u[i].cq)
			ibv_destroy_cq(u[i].cq);
	}
	memset(u, 0, 2 * sizeof(*u));
}

/* post a receive of rlen bytes at B's buf + roff */
static int ud_recv(struct harness *h, struct ud_side *b, uint32_t roff, uint32_t rlen)
{
	struct ibv_sge sge = {(uintptr_t)(h->s[1].buf + roff), rlen, h->s[1].mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 7, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(b->qp, &wr, &bad);
}

/* send len bytes from A's buf to B */
static int ud_send(struct harness *h, struct ud_side u[2], uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)h->s[0].buf, len, h->s[0].mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 9,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	wr.wr.ud.ah = u[0].ah;
	wr.wr.ud.remote_qpn = u[1].qp->qp_num;
	wr.wr.ud.remote_qkey = 0x11111111;
	if (ibv_post_send(u[0].qp, &wr, &bad))
		return -1;
	if (wait_wc(u[0].cq, &wc, 1, WAIT_MS) || wc.status != IBV_WC_SUCCESS)
		return -1;
	return 0;
}

/* UD receive completions carry the RoCE network-header type in wc.sl, as
 * mlx5 reports it: 2 = the GRH holds an IPv4 header. */
static void test_ud_wc_sl(struct harness *h)
{
	struct ud_side u[2] = {0};
	struct ibv_wc wc;

	if (ud_up(h, u, 0)) {
		CHECK(0, "UD pair: %s", strerror(errno));
		goto out;
	}
	CHECK(!ud_recv(h, &u[1], 0, 40 + 256), "post_recv");
	CHECK(!ud_send(h, u, 256), "UD send");
	CHECK(!wait_wc(u[1].cq, &wc, 1, WAIT_MS), "UD receive completion");
	CHECK(wc.status == IBV_WC_SUCCESS, "status %d", wc.status);
	CHECK(wc.wc_flags & IBV_WC_GRH, "IBV_WC_GRH not set");
	CHECK(wc.sl == 2, "wc.sl %u, want 2 (IPv4 network header, as mlx5)", wc.sl);
out:
	ud_down(u);
}

/* atomic_cap is IBV_ATOMIC_HCA, as rxe reports: UCX turns device atomics
 * on only for HCA (the implementation is globally atomic, README). */
static void test_atomic_cap(struct harness *h)
{
	CHECK(h->dattr.atomic_cap == IBV_ATOMIC_HCA, "atomic_cap %d, want IBV_ATOMIC_HCA",
	      h->dattr.atomic_cap);
}

/* vendor_id is not 0 (tools take 0 for "no device"): rxe's 0xFFFFFF, a
 * part id of uroce's own, a hardware version and a dotted firmware
 * version. */
static void test_vendor(struct harness *h)
{
	const struct ibv_device_attr *a = &h->dattr;
	unsigned int x, y, z;

	CHECK(a->vendor_id == 0xffffff, "vendor_id 0x%x, want 0xffffff (rxe's)", a->vendor_id);
	CHECK(a->vendor_part_id != 0, "vendor_part_id 0");
	CHECK(a->hw_ver != 0, "hw_ver 0");
	CHECK(sscanf(a->fw_ver, "%u.%u.%u", &x, &y, &z) == 3, "fw_ver '%s' is not N.N.N",
	      a->fw_ver);
}

/* device_cap_flags: every flag rxe sets for what uroce has, the same in
 * ibv_query_device_ex's 64-bit device_cap_flags_ex; and what they promise
 * works (an XRC domain, a type 2 window). */
static void test_cap_flags(struct harness *h)
{
	static const struct {
		unsigned int flag;
		const char *name;
	} want[] = {
	    {IBV_DEVICE_RC_RNR_NAK_GEN, "RC_RNR_NAK_GEN"},
	    {IBV_DEVICE_PORT_ACTIVE_EVENT, "PORT_ACTIVE_EVENT"},
	    {IBV_DEVICE_SYS_IMAGE_GUID, "SYS_IMAGE_GUID"},
	    {IBV_DEVICE_UD_AV_PORT_ENFORCE, "UD_AV_PORT_ENFORCE"},
	    {IBV_DEVICE_MEM_WINDOW, "MEM_WINDOW"},
	    {IBV_DEVICE_MEM_WINDOW_TYPE_2B, "MEM_WINDOW_TYPE_2B"},
	    {IBV_DEVICE_MEM_MGT_EXTENSIONS, "MEM_MGT_EXTENSIONS"},
	    {IBV_DEVICE_XRC, "XRC"},
	};
	static const unsigned int not_there =
	    IBV_DEVICE_AUTO_PATH_MIG | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_RESIZE_MAX_WR |
	    IBV_DEVICE_MANAGED_FLOW_STEERING | IBV_DEVICE_RAW_IP_CSUM | IBV_DEVICE_UD_IP_CSUM;
	struct ibv_device_attr_ex ax;
	struct ibv_xrcd_init_attr xa = {.comp_mask =
					    IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					.fd = -1,
					.oflags = O_CREAT};
	struct ibv_xrcd *x;
	struct ibv_mw *mw;
	int err;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK(h->dattr.device_cap_flags & want[i].flag, "IBV_DEVICE_%s not set",
		      want[i].name);
	CHECK(!(h->dattr.device_cap_flags & not_there), "flags 0x%x reported, not implemented",
	      h->dattr.device_cap_flags & not_there);
	memset(&ax, 0, sizeof(ax));
	err = ibv_query_device_ex(h->s[0].ctx, NULL, &ax);
	CHECK(!err, "query_device_ex: %s", strerror(err));
	CHECK(ax.device_cap_flags_ex == h->dattr.device_cap_flags,
	      "device_cap_flags_ex 0x%llx != device_cap_flags 0x%x",
	      (unsigned long long)ax.device_cap_flags_ex, h->dattr.device_cap_flags);
	x = ibv_open_xrcd(h->s[0].ctx, &xa);
	CHECK(x, "IBV_DEVICE_XRC, but ibv_open_xrcd: %s", strerror(errno));
	if (x)
		ibv_close_xrcd(x);
	mw = ibv_alloc_mw(h->s[0].pd, IBV_MW_TYPE_2);
	CHECK(mw, "MEM_WINDOW_TYPE_2B, but ibv_alloc_mw(TYPE_2): %s", strerror(errno));
	if (mw)
		ibv_dealloc_mw(mw);
}

int main(void)
{
	struct harness h;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (harness_open(&h)) {
		printf("FAIL: cannot open the loopback device\n");
		return 1;
	}
	test_ud_wc_sl(&h);
	test_atomic_cap(&h);
	test_vendor(&h);
	test_cap_flags(&h);
	harness_close(&h);
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

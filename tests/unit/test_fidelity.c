/* uroce looks like the devices verbs programs are tested on (issue 11):
 * the attributes ibv_query_device(_ex) reports are those of rxe/mlx5 for
 * what uroce supports, and completions carry what mlx5 puts in them.
 *
 * Each test_* function is one item; main() runs them all.
 */
#include <fcntl.h>
#include <poll.h>

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

/* A UD datagram larger than the receive WQE (payload + 40-byte GRH) is
 * dropped and counted, and the WQE stays for the next datagram (rxe); the
 * sender's grh.traffic_class travels as the IP TOS into the receiver's GRH
 * (and back out of ibv_init_ah_from_wc). */
static void test_ud_len_tos(struct harness *h)
{
	struct ud_side u[2] = {0};
	struct ibv_wc wc;
	struct ibv_ah_attr back;
	uint64_t before = CNT(h, 1, rx_drop_len);
	uint8_t *grh = h->s[1].buf;

	if (ud_up(h, u, 0xb8)) { /* DSCP 46 (EF) */
		CHECK(0, "UD pair: %s", strerror(errno));
		goto out;
	}
	CHECK(!ud_recv(h, &u[1], 0, 40 + 100), "post_recv");
	CHECK(!ud_send(h, u, 101), "UD send of 101 bytes");
	for (int i = 0; i < 2000 && CNT(h, 1, rx_drop_len) == before; i++)
		usleep(1000);
	CHECK(CNT(h, 1, rx_drop_len) == before + 1, "rcvd_ud_too_long %llu, want %llu",
	      (unsigned long long)CNT(h, 1, rx_drop_len), (unsigned long long)before + 1);
	CHECK(ibv_poll_cq(u[1].cq, 1, &wc) == 0, "a completion for the dropped datagram");
	memset(grh, 0, 40);
	CHECK(!ud_send(h, u, 100), "UD send of 100 bytes");
	CHECK(!wait_wc(u[1].cq, &wc, 1, WAIT_MS), "the same WQE takes the next datagram");
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 && wc.byte_len == 140,
	      "status %d wr_id %llu byte_len %u", wc.status, (unsigned long long)wc.wr_id,
	      wc.byte_len);
	CHECK(grh[20] == 0x45 && grh[21] == 0xb8, "GRH IPv4 header %02x, TOS 0x%02x, want 0xb8",
	      grh[20], grh[21]);
	CHECK(!ibv_init_ah_from_wc(h->s[1].ctx, 1, &wc, (struct ibv_grh *)grh, &back) &&
		  back.grh.traffic_class == 0xb8,
	      "init_ah_from_wc: traffic_class 0x%02x", back.grh.traffic_class);
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
	    {IBV_DEVICE_SYS_IMAGE_GUID, "SYS_IMAGE_GUID"},
	    {IBV_DEVICE_UD_AV_PORT_ENFORCE, "UD_AV_PORT_ENFORCE"},
	    {IBV_DEVICE_MEM_WINDOW, "MEM_WINDOW"},
	    {IBV_DEVICE_MEM_WINDOW_TYPE_2B, "MEM_WINDOW_TYPE_2B"},
	    {IBV_DEVICE_MEM_MGT_EXTENSIONS, "MEM_MGT_EXTENSIONS"},
	    {IBV_DEVICE_XRC, "XRC"},
	};
	static const unsigned int not_there =
	    IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_AUTO_PATH_MIG | IBV_DEVICE_SRQ_RESIZE |
	    IBV_DEVICE_RESIZE_MAX_WR | IBV_DEVICE_MANAGED_FLOW_STEERING | IBV_DEVICE_RAW_IP_CSUM |
	    IBV_DEVICE_UD_IP_CSUM;
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

/* max_qp_rd_atom, max_qp_init_rd_atom, max_res_rd_atom report rxe's 128
 * (perftest takes the peer's value: against rxe it asks 128) and a QP
 * accepts 128 and has 128 READs and then 128 atomics outstanding at once. */
static void test_rd_atom(struct harness *h)
{
	enum { N = 128, LEN = 1024 };
	struct pair_opts o = default_opts(IBV_MTU_1024);
	struct ibv_send_wr wr[N], *bad;
	struct ibv_sge sge[N];
	struct ibv_wc wc[N];
	uint64_t *counter = (uint64_t *)(h->s[1].buf + 3 * BUF_SIZE / 4);
	struct ibv_mr *amr =
	    ibv_reg_mr(h->s[1].pd, counter, 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	int err, ok = 0;

	CHECK(h->dattr.max_qp_rd_atom >= 128, "max_qp_rd_atom %d", h->dattr.max_qp_rd_atom);
	CHECK(h->dattr.max_qp_init_rd_atom >= 128, "max_qp_init_rd_atom %d",
	      h->dattr.max_qp_init_rd_atom);
	CHECK(h->dattr.max_res_rd_atom >= 128 * 1024, "max_res_rd_atom %d",
	      h->dattr.max_res_rd_atom);
	o.rd_atomic = 128;
	o.max_send_wr = 2 * N;
	o.b_access |= IBV_ACCESS_REMOTE_ATOMIC;
	if (pair_create(h, &o)) {
		CHECK(0, "RC pair with max_rd_atomic = max_dest_rd_atomic = 128");
		return;
	}
	fill_pattern(h->s[1].buf, N * LEN, 42);
	memset(h->s[0].buf, 0, N * LEN);
	for (int k = 0; k < 2; k++) {
		memset(wr, 0, sizeof(wr));
		for (int i = 0; i < N; i++) {
			sge[i].addr = (uintptr_t)(h->s[0].buf + (k ? (uint32_t)(N * LEN + 8 * i)
								   : (uint32_t)i * LEN));
			sge[i].length = k ? 8 : LEN;
			sge[i].lkey = h->s[0].mr->lkey;
			wr[i].wr_id = (uint64_t)i;
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].send_flags = IBV_SEND_SIGNALED;
			wr[i].next = i + 1 < N ? &wr[i + 1] : NULL;
			if (k) {
				wr[i].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
				wr[i].wr.atomic.remote_addr = (uintptr_t)counter;
				wr[i].wr.atomic.rkey = amr ? amr->rkey : 0;
				wr[i].wr.atomic.compare_add = 1;
			} else {
				wr[i].opcode = IBV_WR_RDMA_READ;
				wr[i].wr.rdma.remote_addr =
				    (uintptr_t)(h->s[1].buf + (uint32_t)i * LEN);
				wr[i].wr.rdma.rkey = h->s[1].mr->rkey;
			}
		}
		*counter = 0;
		err = ibv_post_send(h->s[0].qp, wr, &bad);
		CHECK(!err, "post %d %s: %s", N, k ? "atomics" : "READs", strerror(err));
		if (err)
			break;
		if (wait_wc(h->s[0].scq, wc, N, WAIT_MS)) {
			CHECK(0, "%d %s did not complete", N, k ? "atomics" : "READs");
			break;
		}
		ok = 0;
		for (int i = 0; i < N; i++)
			ok += wc[i].status == IBV_WC_SUCCESS;
		CHECK(ok == N, "%d of %d %s succeeded", ok, N, k ? "atomics" : "READs");
	}
	CHECK(!memcmp(h->s[0].buf, h->s[1].buf, N * LEN), "READ data differ");
	CHECK(*counter == N, "counter %llu after %d FETCH_ADDs", (unsigned long long)*counter, N);
	pair_destroy(h);
	if (amr)
		ibv_dereg_mr(amr);
}

/* Responder resources are sized by each QP's max_dest_rd_atomic at RTR, so
 * 1,024 QPs that all negotiate 128 fit (perftest -q 1024 against rxe). */
static void test_rd_atom_1024(struct harness *h)
{
	enum { NQP = 1024 };
	struct ibv_qp **qp = calloc(NQP, sizeof(*qp));
	struct ibv_cq *cq = ibv_create_cq(h->s[0].ctx, 4096, NULL, NULL, 0);
	int n = 0, rtr = 0;

	for (; qp && cq && n < NQP; n++) {
		struct ibv_qp_init_attr ia = {
		    .send_cq = cq,
		    .recv_cq = cq,
		    .qp_type = IBV_QPT_RC,
		    .cap = {
			.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
					.port_num = 1,
					.qp_access_flags = IBV_ACCESS_REMOTE_READ};

		qp[n] = ibv_create_qp(h->s[0].pd, &ia);
		if (!qp[n] || ibv_modify_qp(qp[n], &a,
					    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						IBV_QP_ACCESS_FLAGS))
			break;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = qp[0]->qp_num;
		a.max_dest_rd_atomic = 128;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = h->gid;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		if (ibv_modify_qp(qp[n], &a,
				  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER))
			break;
		rtr++;
	}
	CHECK(rtr == NQP, "%d of %d QPs reached RTR with max_dest_rd_atomic 128: %s", rtr, NQP,
	      strerror(errno));
	for (int i = 0; qp && i <= n && i < NQP; i++)
		if (qp[i])
			ibv_destroy_qp(qp[i]);
	if (cq)
		ibv_destroy_cq(cq);
	free(qp);
}

/* Opening a context queues no async event: PORT_ACTIVE is for a port that
 * changes state, and a program waiting for the event it provoked must read
 * that one first.  The event would be in the queue when open returns. */
static void test_no_event_at_open(struct harness *h)
{
	struct ibv_context *c = ibv_open_device(h->s[0].ctx->device);
	struct pollfd pfd;

	CHECK(c, "ibv_open_device: %s", strerror(errno));
	if (!c)
		return;
	pfd.fd = c->async_fd;
	pfd.events = POLLIN;
	CHECK(poll(&pfd, 1, 0) == 0, "an async event is queued right after ibv_open_device");
	ibv_close_device(c);
}

/* ---- memory windows ---- */

/* B binds mw (over mr, len bytes from its start) on its own QP with a
 * BIND_MW work request; returns the completion status or -1. */
static int bind_wr(struct harness *h, struct ibv_mw *mw, uint32_t rkey, struct ibv_mr *mr,
		   uint64_t len, unsigned int access)
{
	struct ibv_send_wr wr = {.wr_id = 77,
				 .opcode = IBV_WR_BIND_MW,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)mr->addr;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = access;
	if (ibv_post_send(h->s[1].qp, &wr, &bad))
		return -1;
	if (wait_wc(h->s[1].scq, &wc, 1, WAIT_MS))
		return -1;
	return wc.status;
}

/* type 1 bind through ibv_bind_mw; returns the completion status or -1 */
static int bind_t1(struct harness *h, struct ibv_mw *mw, struct ibv_mr *mr, uint64_t len,
		   unsigned int access)
{
	struct ibv_mw_bind b = {.wr_id = 78, .send_flags = IBV_SEND_SIGNALED};
	struct ibv_wc wc;

	b.bind_info.mr = mr;
	b.bind_info.addr = (uintptr_t)mr->addr;
	b.bind_info.length = len;
	b.bind_info.mw_access_flags = access;
	if (ibv_bind_mw(h->s[1].qp, mw, &b))
		return -1;
	if (wait_wc(h->s[1].scq, &wc, 1, WAIT_MS))
		return -1;
	return wc.status;
}

/* A sends 64 bytes to B with op (a WRITE to addr with rkey, or a SEND);
 * returns A's completion status or -1 */
static int a_op(struct harness *h, enum ibv_wr_opcode op, uint64_t addr, uint32_t rkey)
{
	struct ibv_sge sge = {(uintptr_t)h->s[0].buf, 64, h->s[0].mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 5,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(h->s[0].qp, &wr, &bad))
		return -1;
	if (wait_wc(h->s[0].scq, &wc, 1, WAIT_MS))
		return -1;
	return wc.status;
}

static int write_to(struct harness *h, uint64_t addr, uint32_t rkey)
{
	return a_op(h, IBV_WR_RDMA_WRITE, addr, rkey);
}

/* Windows ignore local bits: LOCAL_WRITE next to remote rights, on an MR
 * with LOCAL_WRITE | MW_BIND only, binds and grants the remote rights
 * (rxe_mw.c, mlx5).  A type 1 bind of length 0 invalidates the window.  A
 * type 2 bind takes only the low 8 bits of the WR's rkey. */
static void test_mw(struct harness *h)
{
	struct pair_opts o = default_opts(IBV_MTU_1024);
	uint8_t *wbuf = h->s[1].buf + BUF_SIZE / 2;
	struct ibv_mr *mr = NULL;
	struct ibv_mw *mw1 = NULL, *mw2 = NULL;
	uint32_t old, want;
	int st;

	if (pair_create(h, &o)) {
		CHECK(0, "RC pair");
		return;
	}
	mr = ibv_reg_mr(h->s[1].pd, wbuf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	mw1 = ibv_alloc_mw(h->s[1].pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(h->s[1].pd, IBV_MW_TYPE_2);
	CHECK(mr && mw1 && mw2, "reg_mr/alloc_mw: %s", strerror(errno));
	if (!mr || !mw1 || !mw2)
		goto out;

	/* type 1 with LOCAL_WRITE among the window's rights */
	st = bind_t1(h, mw1, mr, 4096,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(st == IBV_WC_SUCCESS, "type 1 bind with LOCAL_WRITE | REMOTE_*: status %d (%s)", st,
	      st >= 0 ? ibv_wc_status_str(st) : "no completion");
	fill_pattern(h->s[0].buf, 64, 3);
	memset(wbuf, 0, 64);
	st = write_to(h, (uintptr_t)wbuf, mw1->rkey);
	CHECK(st == IBV_WC_SUCCESS && !memcmp(wbuf, h->s[0].buf, 64),
	      "WRITE through the type 1 window: status %d", st);

	/* type 2 with an rkey whose upper 24 bits are not the window's */
	want = (mw2->rkey & ~0xffu) | 0x5a;
	if (want == mw2->rkey)
		want ^= 1;
	st = bind_wr(h, mw2, 0xabcdef00u | (want & 0xff), mr, 4096,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(st == IBV_WC_SUCCESS, "type 2 bind with rkey 0xabcdef%02x: status %d", want & 0xff,
	      st);
	fill_pattern(h->s[0].buf, 64, 4);
	st = write_to(h, (uintptr_t)wbuf, want);
	CHECK(st == IBV_WC_SUCCESS && !memcmp(wbuf, h->s[0].buf, 64),
	      "WRITE through the type 2 window with rkey 0x%08x (index kept, key byte 0x%02x): "
	      "status %d",
	      want, want & 0xff, st);

	/* type 1 bind of length 0: the window is invalid afterwards */
	old = mw1->rkey;
	st = bind_t1(h, mw1, mr, 0, IBV_ACCESS_REMOTE_WRITE);
	CHECK(st == IBV_WC_SUCCESS, "type 1 bind of length 0: status %d", st);
	st = write_to(h, (uintptr_t)wbuf, old);
	CHECK(st == IBV_WC_REM_ACCESS_ERR, "WRITE through the invalidated window: status %d (%s)",
	      st, st >= 0 ? ibv_wc_status_str(st) : "no completion");
out:
	pair_destroy(h);
	if (mw1)
		ibv_dealloc_mw(mw1);
	if (mw2)
		ibv_dealloc_mw(mw2);
	if (mr)
		ibv_dereg_mr(mr);
}

/* ---- QP recovery ---- */

static int to_state(struct ibv_qp *qp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a = {.qp_state = st};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* After an error completion, ERR -> RESET -> INIT -> RTR -> RTS brings the
 * QPs back and traffic flows again; the RESET removed the QPs' unpolled
 * (flush) completions from their CQs, as mlx5_cq_clean does. */
static void test_qp_recovery(struct harness *h)
{
	struct pair_opts o = default_opts(IBV_MTU_1024);
	struct ibv_sge sge = {(uintptr_t)h->s[0].buf, 256, h->s[0].mr->lkey};
	struct ibv_sge rsge = {(uintptr_t)h->s[1].buf, 4096, h->s[1].mr->lkey};
	struct ibv_send_wr wr[4], *bad;
	struct ibv_recv_wr rwr = {.wr_id = 100, .sg_list = &rsge, .num_sge = 1}, *rbad;
	struct ibv_wc wc[8];
	int err, n;

	if (pair_create(h, &o)) {
		CHECK(0, "RC pair");
		return;
	}
	for (int i = 0; i < 3; i++)
		CHECK(!ibv_post_recv(h->s[1].qp, &rwr, &rbad), "post_recv");
	/* a WRITE with a bad rkey, then three SENDs that will be flushed */
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < 4; i++) {
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].opcode = i ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i < 3 ? &wr[i + 1] : NULL;
	}
	wr[0].wr.rdma.remote_addr = (uintptr_t)h->s[1].buf;
	wr[0].wr.rdma.rkey = h->s[1].mr->rkey ^ 0x5a5a0000u;
	err = ibv_post_send(h->s[0].qp, wr, &bad);
	CHECK(!err, "post_send: %s", strerror(err));
	CHECK(!wait_wc(h->s[0].scq, wc, 1, WAIT_MS) && wc[0].status == IBV_WC_REM_ACCESS_ERR,
	      "first completion: status %d, want REM_ACCESS_ERR", wc[0].status);
	/* wait until the QP is in ERR with its flushes queued (unpolled) */
	for (int i = 0; i < 2000 && qp_state(h->s[0].qp) != IBV_QPS_ERR; i++)
		usleep(1000);
	CHECK(qp_state(h->s[0].qp) == IBV_QPS_ERR, "A's QP is in state %d, not ERR",
	      qp_state(h->s[0].qp));
	CHECK(!to_state(h->s[1].qp, IBV_QPS_ERR), "B to ERR"); /* flushes B's receives */
	for (int i = 0; i < 2; i++)
		CHECK(!to_state(h->s[i].qp, IBV_QPS_RESET), "QP %d ERR -> RESET", i);
	n = ibv_poll_cq(h->s[0].scq, 8, wc) + ibv_poll_cq(h->s[1].rcq, 8, wc) +
	    ibv_poll_cq(h->s[0].rcq, 8, wc) + ibv_poll_cq(h->s[1].scq, 8, wc);
	CHECK(n == 0, "%d completions of the reset QPs still in their CQs", n);
	for (int i = 0; i < 2; i++)
		CHECK(!qp_connect(h, i), "QP %d RESET -> INIT -> RTR -> RTS", i);
	CHECK(!ibv_post_recv(h->s[1].qp, &rwr, &rbad), "post_recv after recovery");
	wr[1].next = NULL;
	wr[1].wr_id = 41;
	fill_pattern(h->s[0].buf, 256, 9);
	err = ibv_post_send(h->s[0].qp, &wr[1], &bad);
	CHECK(!err, "post_send after recovery: %s", strerror(err));
	CHECK(!wait_wc(h->s[0].scq, wc, 1, WAIT_MS) && wc[0].status == IBV_WC_SUCCESS &&
		  wc[0].wr_id == 41,
	      "SEND after recovery: status %d wr_id %llu", wc[0].status,
	      (unsigned long long)wc[0].wr_id);
	CHECK(!wait_wc(h->s[1].rcq, wc, 1, WAIT_MS) && wc[0].status == IBV_WC_SUCCESS &&
		  wc[0].byte_len == 256 && !memcmp(h->s[1].buf, h->s[0].buf, 256),
	      "receive after recovery: status %d", wc[0].status);
	CHECK(stray_wcs(h) == 0, "stray completions after recovery");
	pair_destroy(h);
}

/* ---- ibv_rereg_mr ---- */

/* B's MR over r1 (4 KiB); returns NULL after a failed CHECK */
static struct ibv_mr *rereg_setup(struct harness *h, uint8_t *r1, unsigned int access)
{
	struct pair_opts o = default_opts(IBV_MTU_1024);
	struct ibv_mr *mr;

	if (pair_create(h, &o)) {
		CHECK(0, "RC pair");
		return NULL;
	}
	mr = ibv_reg_mr(h->s[1].pd, r1, 4096, access);
	CHECK(mr, "reg_mr: %s", strerror(errno));
	return mr;
}

/* CHANGE_ACCESS, CHANGE_PD and CHANGE_TRANSLATION take effect on traffic;
 * a receive posted with the old address fails (local protection); the
 * man page's codes: INPUT for flags, CMD for rights. */
static void test_rereg(struct harness *h)
{
	const unsigned int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	uint8_t *r1 = h->s[1].buf + BUF_SIZE / 2, *r2 = r1 + 8192;
	struct ibv_pd *pd2 = ibv_alloc_pd(h->s[1].ctx);
	struct ibv_mr *mr;
	int st, ret;

	/* CHANGE_ACCESS: REMOTE_WRITE taken away, a WRITE fails */
	mr = rereg_setup(h, r1, rw);
	if (mr) {
		CHECK(write_to(h, (uintptr_t)r1, mr->rkey) == IBV_WC_SUCCESS, "WRITE before");
		ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
		CHECK(ret == 0, "CHANGE_ACCESS: %d errno %d", ret, errno);
		st = write_to(h, (uintptr_t)r1, mr->rkey);
		CHECK(st == IBV_WC_REM_ACCESS_ERR, "WRITE after REMOTE_WRITE was taken: status %d",
		      st);
		ibv_dereg_mr(mr);
	}
	/* CHANGE_PD: the MR leaves the QP's PD, a WRITE fails */
	mr = rereg_setup(h, r1, rw);
	if (mr && pd2) {
		ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0);
		CHECK(ret == 0 && mr->pd == pd2, "CHANGE_PD: %d errno %d", ret, errno);
		st = write_to(h, (uintptr_t)r1, mr->rkey);
		CHECK(st == IBV_WC_REM_ACCESS_ERR, "WRITE to an MR of another PD: status %d", st);
		ibv_dereg_mr(mr);
	}
	/* CHANGE_TRANSLATION: WRITEs reach the new range; a receive WQE
	 * posted with the old address fails */
	mr = rereg_setup(h, r1, rw);
	if (mr) {
		ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, r2, 4096, 0);
		CHECK(ret == 0, "CHANGE_TRANSLATION: %d errno %d", ret, errno);
		fill_pattern(h->s[0].buf, 64, 11);
		memset(r2, 0, 64);
		st = write_to(h, (uintptr_t)r2, mr->rkey);
		CHECK(st == IBV_WC_SUCCESS && !memcmp(r2, h->s[0].buf, 64),
		      "WRITE to the new range: status %d", st);
		st = write_to(h, (uintptr_t)r1, mr->rkey);
		CHECK(st == IBV_WC_REM_ACCESS_ERR, "WRITE to the old range: status %d", st);
		ibv_dereg_mr(mr);
		mr = rereg_setup(h, r1, rw);
	}
	if (mr) {
		struct ibv_sge rsge = {(uintptr_t)r1, 256, mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = 500, .sg_list = &rsge, .num_sge = 1}, *rbad;
		struct ibv_wc wc;

		CHECK(!ibv_post_recv(h->s[1].qp, &rwr, &rbad), "post_recv");
		ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, r2, 4096, 0);
		CHECK(ret == 0, "CHANGE_TRANSLATION: %d errno %d", ret, errno);
		st = a_op(h, IBV_WR_SEND, 0, 0);
		CHECK(st != IBV_WC_SUCCESS, "SEND into a receive of the old range: status %d", st);
		CHECK(!wait_wc(h->s[1].rcq, &wc, 1, WAIT_MS) && wc.status == IBV_WC_LOC_PROT_ERR,
		      "receive posted with the old address: status %d, want LOC_PROT_ERR",
		      wc.status);
		/* the codes */
		errno = 0;
		ret = ibv_rereg_mr(mr, 1 << 5, NULL, NULL, 0, 0);
		CHECK(ret == IBV_REREG_MR_ERR_INPUT && errno == EINVAL, "unknown flag: %d errno %d",
		      ret, errno);
		errno = 0;
		ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				   IBV_ACCESS_REMOTE_WRITE);
		CHECK(ret == IBV_REREG_MR_ERR_CMD && errno == EINVAL,
		      "REMOTE_WRITE without LOCAL_WRITE: %d errno %d", ret, errno);
		ibv_dereg_mr(mr);
	}
	pair_destroy(h);
	if (pd2)
		ibv_dealloc_pd(pd2);
}

/* ---- destroy verbs: EBUSY, and objects that are not live ---- */

#define EXPECT_RC(call, want, what)                                                                \
	do {                                                                                       \
		int r_;                                                                            \
		errno = 0;                                                                         \
		r_ = (call);                                                                       \
		CHECK(r_ == (want) && errno == (want), "%s: returned %d errno %d, want %d", what,  \
		      r_, errno, want);                                                            \
	} while (0)

/* Every destroy verb on an object still in use fails with EBUSY, returned
 * and in errno. */
static void test_destroy_busy(struct harness *h)
{
	struct ibv_context *c = h->s[0].ctx;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(c);
	struct ibv_pd *pd = ibv_alloc_pd(c);
	struct ibv_cq *cq = ch ? ibv_create_cq(c, 16, NULL, ch, 0) : NULL;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
	struct ibv_srq *srq = pd ? ibv_create_srq(pd, &sa) : NULL;
	struct ibv_qp_init_attr ia = {.send_cq = cq,
				      .recv_cq = cq,
				      .srq = srq,
				      .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 4, .max_send_sge = 1}};
	struct ibv_qp *qp = cq && srq ? ibv_create_qp(pd, &ia) : NULL;
	struct ibv_mr *mr =
	    pd ? ibv_reg_mr(pd, h->s[0].buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)
	       : NULL;

	CHECK(ch && pd && cq && srq && qp && mr, "objects: %s", strerror(errno));
	if (!(ch && pd && cq && srq && qp && mr))
		return;
	EXPECT_RC(ibv_dealloc_pd(pd), EBUSY, "dealloc_pd with MR/QP/SRQ");
	EXPECT_RC(ibv_destroy_cq(cq), EBUSY, "destroy_cq with a QP");
	EXPECT_RC(ibv_destroy_srq(srq), EBUSY, "destroy_srq with a QP");
	EXPECT_RC(ibv_destroy_comp_channel(ch), EBUSY, "destroy_comp_channel with a CQ");
	CHECK(!ibv_destroy_qp(qp), "destroy_qp");
	CHECK(!ibv_destroy_srq(srq), "destroy_srq");
	CHECK(!ibv_destroy_cq(cq), "destroy_cq");
	CHECK(!ibv_destroy_comp_channel(ch), "destroy_comp_channel");
	/* an MR with a bound window: on an RC QP of the harness */
	{
		struct pair_opts o = default_opts(IBV_MTU_1024);
		struct ibv_mr *bmr;
		struct ibv_mw *mw;

		if (!pair_create(h, &o)) {
			bmr = ibv_reg_mr(h->s[1].pd, h->s[1].buf, 4096,
					 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
			mw = ibv_alloc_mw(h->s[1].pd, IBV_MW_TYPE_1);
			if (bmr && mw &&
			    bind_t1(h, mw, bmr, 4096, IBV_ACCESS_REMOTE_WRITE) == IBV_WC_SUCCESS) {
				EXPECT_RC(ibv_dereg_mr(bmr), EBUSY, "dereg_mr with a bound window");
				CHECK(!ibv_dealloc_mw(mw), "dealloc_mw");
				CHECK(!ibv_dereg_mr(bmr), "dereg_mr after the window went");
			} else {
				CHECK(0, "bound window");
			}
		}
		pair_destroy(h);
	}
	CHECK(!ibv_dereg_mr(mr), "dereg_mr");
	CHECK(!ibv_dealloc_pd(pd), "dealloc_pd");
}

/* A destroy verb given an object destroyed already, or a copy of a live
 * one's struct, fails with ENOENT (as the kernel's handle lookup) and
 * touches nothing: the live object still works and goes with its own
 * pointer. */
static void test_destroy_stale(struct harness *h)
{
	struct ibv_context *c = h->s[0].ctx;
	struct ibv_pd *pd = ibv_alloc_pd(c), pd_copy;
	struct ibv_cq *cq = ibv_create_cq(c, 16, NULL, NULL, 0), cq_copy;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
	struct ibv_srq *srq = pd ? ibv_create_srq(pd, &sa) : NULL, srq_copy;
	struct ibv_qp_init_attr ia = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = pd && cq ? ibv_create_qp(pd, &ia) : NULL, qp_copy;
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, h->s[0].buf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL,
		      mr_copy;
	struct ibv_mw *mw = pd ? ibv_alloc_mw(pd, IBV_MW_TYPE_2) : NULL, mw_copy;
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
	struct ibv_ah *ah, ah_copy;

	aa.grh.dgid = h->gid;
	aa.grh.hop_limit = 1;
	ah = pd ? ibv_create_ah(pd, &aa) : NULL;
	CHECK(pd && cq && srq && qp && mr && mw && ah, "objects: %s", strerror(errno));
	if (!(pd && cq && srq && qp && mr && mw && ah))
		return;
	pd_copy = *pd;
	cq_copy = *cq;
	srq_copy = *srq;
	qp_copy = *qp;
	mr_copy = *mr;
	mw_copy = *mw;
	ah_copy = *ah;
	EXPECT_RC(ibv_destroy_qp(&qp_copy), ENOENT, "destroy_qp(copy)");
	EXPECT_RC(ibv_destroy_srq(&srq_copy), ENOENT, "destroy_srq(copy)");
	EXPECT_RC(ibv_destroy_cq(&cq_copy), ENOENT, "destroy_cq(copy)");
	EXPECT_RC(ibv_dereg_mr(&mr_copy), ENOENT, "dereg_mr(copy)");
	EXPECT_RC(ibv_dealloc_mw(&mw_copy), ENOENT, "dealloc_mw(copy)");
	EXPECT_RC(ibv_destroy_ah(&ah_copy), ENOENT, "destroy_ah(copy)");
	EXPECT_RC(ibv_dealloc_pd(&pd_copy), ENOENT, "dealloc_pd(copy)");
	CHECK(qp_state(qp) == IBV_QPS_RESET, "the QP still answers");

	CHECK(!ibv_destroy_qp(qp), "destroy_qp");
	EXPECT_RC(ibv_destroy_qp(qp), ENOENT, "destroy_qp twice");
	CHECK(!ibv_destroy_srq(srq), "destroy_srq");
	EXPECT_RC(ibv_destroy_srq(srq), ENOENT, "destroy_srq twice");
	CHECK(!ibv_destroy_cq(cq), "destroy_cq");
	EXPECT_RC(ibv_destroy_cq(cq), ENOENT, "destroy_cq twice");
	CHECK(!ibv_dereg_mr(mr), "dereg_mr");
	EXPECT_RC(ibv_dereg_mr(mr), ENOENT, "dereg_mr twice");
	CHECK(!ibv_dealloc_mw(mw), "dealloc_mw");
	EXPECT_RC(ibv_dealloc_mw(mw), ENOENT, "dealloc_mw twice");
	CHECK(!ibv_destroy_ah(ah), "destroy_ah");
	EXPECT_RC(ibv_destroy_ah(ah), ENOENT, "destroy_ah twice");
	CHECK(!ibv_dealloc_pd(pd), "dealloc_pd");
	EXPECT_RC(ibv_dealloc_pd(pd), ENOENT, "dealloc_pd twice");
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
	test_ud_len_tos(&h);
	test_atomic_cap(&h);
	test_vendor(&h);
	test_cap_flags(&h);
	test_rd_atom(&h);
	test_rd_atom_1024(&h);
	test_no_event_at_open(&h);
	test_mw(&h);
	test_qp_recovery(&h);
	test_rereg(&h);
	test_destroy_busy(&h);
	test_destroy_stale(&h);
	harness_close(&h);
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* RC transport under fault injection (UROCE_FAULT, docs/faults.md).
 *
 * UROCE_FAULT is read by each context when it handles its first packet, so
 * every scenario opens fresh contexts after setting it.  Whatever the
 * faults, every message must arrive exactly once and intact, with success
 * completions:
 *   - SEND, RDMA WRITE and READ at sizes 0 .. 1 MiB for every MTU, and a
 *     stream of mixed WRs (with WITH_IMM) whose receive side keeps a spare
 *     receive that must stay unused, under 5% drop, 5% duplication, 5%
 *     reordering and 1% corruption on transmit;
 *   - the same on receive with a delay, and on both directions;
 *   - drop_qp, which loses chosen packets and so forces retransmissions;
 *   - the configuration parser;
 * and it measures 1 MiB RDMA WRITE throughput with and without 5% loss.
 */
#include "net/fault.h"
#include "rc_harness.h"

static void set_fault(const char *spec)
{
	if (spec)
		setenv("UROCE_FAULT", spec, 1);
	else
		unsetenv("UROCE_FAULT");
}

/* ---- the parser ---- */

static void test_parse(void)
{
	struct uroce_fault_cfg c;
	char err[160];
	static const char *const bad[] = {
	    "drop=2", "drop=-0.1",	   "drop=0.1x",	   "foo=1",
	    "dir=up", "drop_qp=0x1000000", "drop_qp=12:x", "delay_us=abc",
	    "drop",   "seed=-1",	   "reorder_ms=0", "delay_us=2000000",
	};

	CHECK(uroce_fault_parse("drop=0.05,dup=0.05,reorder=0.05,corrupt=0.01,delay_us=200,"
				"seed=42,dir=both,drop_qp=0x1a2b03:3,drop_qp=7",
				&c, err, sizeof(err)) == 0,
	      "valid spec rejected: %s", err);
	CHECK(c.drop == 0.05 && c.dup == 0.05 && c.reorder == 0.05 && c.corrupt == 0.01,
	      "rates %g %g %g %g", c.drop, c.dup, c.reorder, c.corrupt);
	CHECK(c.delay_us == 200 && c.seed == 42 && c.have_seed &&
		  c.dir == (UROCE_FAULT_TX | UROCE_FAULT_RX),
	      "delay %u seed %llu dir %u", c.delay_us, (unsigned long long)c.seed, c.dir);
	CHECK(c.ndrop_qp == 2 && c.drop_qp[0].qpn == 0x1a2b03 && c.drop_qp[0].n == 3 &&
		  c.drop_qp[1].qpn == 7 && c.drop_qp[1].n == 1,
	      "drop_qp");
	CHECK(c.thr_drop > 0 && c.thr_drop < UINT64_MAX / 10, "threshold of 0.05: %llu",
	      (unsigned long long)c.thr_drop);
	CHECK(uroce_fault_parse("drop=1,dup=0", &c, err, sizeof(err)) == 0 &&
		  c.thr_drop == UINT64_MAX && c.thr_dup == 0 && c.dir == UROCE_FAULT_TX,
	      "drop=1 / dup=0 / default direction");
	CHECK(uroce_fault_parse("dir=rx reorder=0.5 reorder_ms=5", &c, err, sizeof(err)) == 0 &&
		  c.dir == UROCE_FAULT_RX && c.reorder_ms == 5,
	      "space separated");
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(uroce_fault_parse(bad[i], &c, err, sizeof(err)) == -1 && err[0],
		      "'%s' accepted", bad[i]);
}

/* ---- data under faults ---- */

static const enum ibv_wr_opcode data_ops[] = {IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ};

struct totals {
	unsigned long drop, dup, reorder, corrupt, delay, icrc, parse, retrans, dups, timeouts;
};

static void add_totals(struct totals *t, struct harness *h)
{
	for (int s = 0; s < 2; s++) {
		t->drop += CNT(h, s, fault_drop);
		t->dup += CNT(h, s, fault_dup);
		t->reorder += CNT(h, s, fault_reorder);
		t->corrupt += CNT(h, s, fault_corrupt);
		t->delay += CNT(h, s, fault_delay);
		t->icrc += CNT(h, s, rx_drop_icrc);
		t->parse += CNT(h, s, rx_drop_parse);
		t->retrans += CNT(h, s, retransmits);
		t->dups += CNT(h, s, duplicates);
		t->timeouts += CNT(h, s, timeouts);
	}
}

static void print_totals(const char *what, const struct totals *t, double secs)
{
	printf("%s: %.2f s; injected drop %lu dup %lu reorder %lu corrupt %lu delay %lu; "
	       "bad ICRC %lu, parse %lu; retransmitted %lu, duplicates %lu, timeouts %lu\n",
	       what, secs, t->drop, t->dup, t->reorder, t->corrupt, t->delay, t->icrc, t->parse,
	       t->retrans, t->dups, t->timeouts);
}

/* A stream of mixed WRs, one spare receive that must stay unused. */
static void stream(struct harness *h, uint64_t seed, int n)
{
	struct bop *ops = calloc((size_t)n, sizeof(*ops));
	static const enum ibv_wr_opcode mix[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
						 IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
						 IBV_WR_RDMA_READ};
	uint64_t r = seed | 1;

	for (int i = 0; i < n; i++) {
		ops[i].op = mix[xs64(&r) % 5];
		ops[i].size = (uint32_t)(xs64(&r) % (3 * h->mtu + 100));
		ops[i].signaled = i == n - 1 || xs64(&r) % 2;
	}
	if (!do_batch(h, ops, n, seed, 1))
		pair_recover(h);
	free(ops);
}

/* Every op in ops at every size, on every MTU in mtus; fresh contexts (and
 * seed) per MTU. */
static void data_under(const char *what, const char *spec_fmt, const enum ibv_mtu *mtus, int nmtu,
		       const enum ibv_wr_opcode *ops, int nops, bool all_sizes, struct totals *tot)
{
	for (int m = 0; m < nmtu; m++) {
		struct pair_opts o = default_opts(mtus[m]);
		uint32_t mtu = 128u << mtus[m];
		const uint32_t sizes_all[] = {0, 1, 255, mtu - 1, mtu, mtu + 1, 65536, 1u << 20};
		const uint32_t sizes_few[] = {0, mtu + 1, 65536, 1u << 20};
		const uint32_t *sizes = all_sizes ? sizes_all : sizes_few;
		int nsizes = all_sizes ? 8 : 4;
		struct totals t = {0};
		struct harness h;
		char spec[256], name[96];
		unsigned int f0 = failed;
		double t0 = now_s();
		uint64_t seed = 7000 + 100 * (uint64_t)m;

		snprintf(spec, sizeof(spec), spec_fmt, 100 + m);
		set_fault(spec);
		if (harness_open(&h) || pair_create(&h, &o)) {
			CHECK(0, "%s: harness", what);
			harness_close(&h);
			continue;
		}
		for (int k = 0; k < nops; k++)
			for (int i = 0; i < nsizes; i++) {
				struct xfer x = {.op = ops[k],
						 .size = sizes[i],
						 .lsge = 1 + i % 3,
						 .rsge = 1 + i % 2,
						 .rslack = 3};

				if (!do_xfer(&h, &x, ++seed))
					pair_recover(&h);
			}
		stream(&h, ++seed, 64);
		add_totals(&t, &h);
		add_totals(tot, &h);
		snprintf(name, sizeof(name), "%s, MTU %4u: %s", what, mtu,
			 failed == f0 ? "ok" : "FAILED");
		print_totals(name, &t, now_s() - t0);
		harness_close(&h);
	}
	set_fault(NULL);
}

static void test_mix(void)
{
	static const enum ibv_wr_opcode rx_ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
						    IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
						    IBV_WR_RDMA_READ};
	const enum ibv_mtu m1024 = IBV_MTU_1024, m2048 = IBV_MTU_2048;
	struct totals t = {0};

	data_under("tx faults", "drop=0.05,dup=0.05,reorder=0.05,corrupt=0.01,seed=%d", all_mtus,
		   HARNESS_MTUS, data_ops, 3, true, &t);
	CHECK(t.drop && t.dup && t.reorder && t.corrupt, "some fault never happened");
	CHECK(t.icrc + t.parse > 0, "no corrupted packet was caught");
	CHECK(t.retrans && t.dups, "no retransmission / duplicate seen");
	CHECK(t.delay == 0, "delays without delay_us");

	memset(&t, 0, sizeof(t));
	data_under("rx faults + delay",
		   "drop=0.03,dup=0.03,reorder=0.03,corrupt=0.01,delay_us=100,"
		   "dir=rx,seed=%d",
		   &m1024, 1, rx_ops, 5, false, &t);
	CHECK(t.drop && t.dup && t.reorder && t.corrupt && t.delay,
	      "rx: some fault never happened");
	CHECK(t.icrc + t.parse > 0, "rx: no corrupted packet was caught");

	memset(&t, 0, sizeof(t));
	data_under("both directions",
		   "drop=0.02,dup=0.02,reorder=0.02,corrupt=0.01,dir=both,"
		   "seed=%d",
		   &m2048, 1, rx_ops, 5, false, &t);
	CHECK(t.drop && t.dup && t.reorder && t.corrupt, "both: some fault never happened");
}

/* drop_qp=Q:N: lose the first N packets to (or from) one QP.  The QPNs
 * exist only once the QPs do, so UROCE_FAULT is set after creating them
 * and before the first packet (when each context reads it). */
static void test_drop_qp(void)
{
	for (int v = 0; v < 2; v++) {
		struct pair_opts o = default_opts(IBV_MTU_1024);
		struct harness h;
		char spec[64];
		int n = v + 1;
		struct xfer x = {.op = v ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
				 .size = 3 * 1024 + 10,
				 .lsge = 2,
				 .rsge = 1};
		unsigned int f0 = failed;

		set_fault(NULL);
		if (harness_open(&h) || pair_create(&h, &o)) {
			CHECK(0, "drop_qp: harness");
			harness_close(&h);
			continue;
		}
		/* v 0: the first packet to B (the WRITE's first), and on B's
		 * side the first one B sends.  v 1: the READ request A sends,
		 * twice, and the first two READ responses to A. */
		snprintf(spec, sizeof(spec), "drop_qp=0x%06x:%d",
			 v ? h.s[0].qp->qp_num : h.s[1].qp->qp_num, n);
		set_fault(spec);
		do_xfer(&h, &x, 9100 + (uint64_t)v);
		CHECK(CNT(&h, 0, fault_drop) == (unsigned long)n &&
			  CNT(&h, 1, fault_drop) == (unsigned long)n,
		      "%s: dropped %lu / %lu, want %d each", spec, CNT(&h, 0, fault_drop),
		      CNT(&h, 1, fault_drop), n);
		CHECK(CNT(&h, 0, retransmits) > 0, "%s: nothing was retransmitted", spec);
		/* the next transfers see no fault */
		for (int i = 0; i < 3; i++)
			do_xfer(&h, &x, 9200 + (uint64_t)i);
		CHECK(CNT(&h, 0, fault_drop) == (unsigned long)n, "%s: dropped more", spec);
		printf("%s (%s): %s; A retransmitted %lu, timeouts %lu\n", spec, op_name(x.op),
		       failed == f0 ? "ok" : "FAILED", CNT(&h, 0, retransmits),
		       CNT(&h, 0, timeouts));
		harness_close(&h);
	}
	set_fault(NULL);
}

/* ---- throughput: n x 1 MiB RDMA WRITE, 8 in flight ---- */

static double write_rate(const char *spec, enum ibv_mtu mtu, int n, char *info, size_t ilen)
{
	struct pair_opts o = default_opts(mtu);
	struct harness h;
	struct ibv_sge sge;
	struct ibv_send_wr wr[8], *bad;
	struct ibv_wc wc;
	double t0, secs;
	int err = 0;

	set_fault(spec);
	if (harness_open(&h) || pair_create(&h, &o)) {
		CHECK(0, "throughput: harness");
		harness_close(&h);
		return 0;
	}
	fill_pattern(h.s[0].buf, MAX_MSG, 31337);
	sge = (struct ibv_sge){
	    .addr = (uintptr_t)h.s[0].buf, .length = MAX_MSG, .lkey = h.s[0].mr->lkey};
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < 8; i++) {
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].send_flags = i == 7 ? IBV_SEND_SIGNALED : 0;
		wr[i].wr.rdma.remote_addr = (uintptr_t)h.s[1].buf + (uint64_t)(i % 2) * MAX_MSG;
		wr[i].wr.rdma.rkey = h.s[1].mr->rkey;
		wr[i].next = i < 7 ? &wr[i + 1] : NULL;
	}
	t0 = now_s();
	for (int k = 0; k < n && !err; k += 8) {
		err = ibv_post_send(h.s[0].qp, wr, &bad);
		if (!err && wait_wc(h.s[0].scq, &wc, 1, WAIT_MS))
			err = -1;
		else if (!err && wc.status != IBV_WC_SUCCESS) {
			printf("  WRITE %d: %s\n", k, ibv_wc_status_str(wc.status));
			err = -1;
		}
	}
	secs = now_s() - t0;
	CHECK(!err, "throughput run (%s) failed", spec ? spec : "no faults");
	CHECK(!memcmp(h.s[0].buf, h.s[1].buf, MAX_MSG) &&
		  !memcmp(h.s[0].buf, h.s[1].buf + MAX_MSG, MAX_MSG),
	      "throughput run (%s): data", spec ? spec : "no faults");
	snprintf(info, ilen, "%lu retransmitted, %lu NAKs, %lu timeouts", CNT(&h, 0, retransmits),
		 CNT(&h, 0, naks_rx), CNT(&h, 0, timeouts));
	harness_close(&h);
	set_fault(NULL);
	return err ? 0 : (double)n / secs;
}

static void test_throughput(void)
{
	static const enum ibv_mtu mtus[] = {IBV_MTU_1024, IBV_MTU_4096};
	const int n = 32;

	for (unsigned int i = 0; i < 2; i++) {
		char i0[96], i1[96];
		double clean = write_rate(NULL, mtus[i], n, i0, sizeof(i0));
		double lossy = write_rate("drop=0.05,seed=5", mtus[i], n, i1, sizeof(i1));

		printf("throughput, %d x 1 MiB RDMA WRITE, MTU %u:\n"
		       "  no faults:   %7.1f MiB/s (%s)\n"
		       "  drop=0.05:   %7.1f MiB/s (%s): %.1f%% of the above\n",
		       n, 128u << mtus[i], clean, i0, lossy, i1,
		       clean > 0 ? 100.0 * lossy / clean : 0.0);
	}
}

int main(void)
{
	double t0 = now_s();

	setvbuf(stdout, NULL, _IOLBF, 0);
	test_parse();
	test_mix();
	test_drop_qp();
	test_throughput();
	printf("total %.2f s\n", now_s() - t0);
	return finish("test_rc_fault");
}

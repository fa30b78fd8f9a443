/* The same-host single copy (src/transport/pull.c): large messages copied
 * once, by the side that owns the destination, straight from the peer's
 * memory (process_vm_readv), with the transport's semantics kept.
 *
 *  - every opcode that pulls (WRITE, WRITE with immediate, SEND, SEND with
 *    immediate, READ), scattered over several SGEs on both sides, lengths
 *    that are not MTU multiples, READs over several chunks: the data lands,
 *    the bytes around it keep their guard pattern, completions carry the
 *    right lengths and immediates, and the right side counts the pull;
 *    small messages keep the ring;
 *  - a SEND larger than the receive WQE: the pull cannot place it, the
 *    message goes again through the ring, and both ends complete with the
 *    errors they give without the pull;
 *  - a hostile peer writing pull records of its own into the ring: a source
 *    range that is not mapped (the pull fails, is counted, the QP lives on
 *    and the sender is told to stop pulling), a description longer than the
 *    RETH, a PSN count that does not match, a RETH outside the MR, the flag
 *    on a packet that is not an ONLY, a bulk record (the bytes in the ring,
 *    shm.c) shorter than its description: nothing is written anywhere, and
 *    the victim only drops or NAKs that peer's message;
 *  - a READ stream (16 READs of 64 KiB in flight, eight rounds of new
 *    bytes): every byte lands, every response is pulled (with
 *    UROCE_SHM_BULK=0 none: a READ response goes only with its bytes, so
 *    as packets there), through the bulk copy (shm.c) and, with
 *    UROCE_SHM_COPY=0, memcpy;
 *  - the source MR deregistered in the middle of a READ stream, its bytes
 *    overwritten at once: every READ that succeeds carries the registered
 *    bytes, never the later ones, and the first that fails fails with a
 *    remote access error.
 *
 * Run as is (the pulled bytes travel in the ring's bulk records) and with
 * UROCE_SHM_BULK=0 (process_vm_readv).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>

#include "check.h"
#include "shm_harness.h"
#include "net/shm.h"
#include "transport/rc.h"

#define NSGE 3

static struct ibv_qp *qp_sge(struct node *n)
{
	struct ibv_qp_init_attr ia = {
	    .qp_type = IBV_QPT_RC,
	    .send_cq = n->cq,
	    .recv_cq = n->cq,
	    .cap = {.max_send_wr = 64,
		    .max_recv_wr = 64,
		    .max_send_sge = NSGE,
		    .max_recv_sge = NSGE},
	};

	return ibv_create_qp(n->pd, &ia);
}

/* A pair whose QPs take NSGE SGEs, with both links up. */
static bool pull_pair(struct pair *p)
{
	memset(p, 0, sizeof(*p));
	if (node_open(&p->a, 256) || node_open(&p->b, 256))
		return false;
	p->qa = qp_sge(&p->a);
	p->qb = qp_sge(&p->b);
	if (!p->qa || !p->qb || qp_rts(&p->a, p->qa, p->qb->qp_num, 14, 7) ||
	    qp_rts(&p->b, p->qb, p->qa->qp_num, 14, 7))
		return false;
	p->ib = (struct qpinfo){
	    .qpn = p->qb->qp_num, .rkey = p->b.mr->rkey, .addr = (uintptr_t)p->b.buf};
	return warm_up(p);
}

/* len bytes in NSGE pieces at off in n's buffer, with gaps of 100 bytes. */
static void sges(struct node *n, uint32_t off, uint32_t len, struct ibv_sge *sg)
{
	uint32_t part = len / NSGE;

	for (int i = 0; i < NSGE; i++) {
		sg[i].addr = (uintptr_t)n->buf + off + (uint32_t)i * (part + 100);
		sg[i].length = i == NSGE - 1 ? len - part * (NSGE - 1) : part;
		sg[i].lkey = n->mr->lkey;
	}
}

/* The message the NSGE pieces at off hold, gathered. */
static void gather(struct node *n, uint32_t off, uint32_t len, uint8_t *out)
{
	struct ibv_sge sg[NSGE];

	sges(n, off, len, sg);
	for (int i = 0; i < NSGE; i++) {
		memcpy(out, (void *)(uintptr_t)sg[i].addr, sg[i].length);
		out += sg[i].length;
	}
}

static int post_op(struct ibv_qp *qp, struct node *n, enum ibv_wr_opcode op, uint32_t off,
		   uint32_t len, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct ibv_sge sg[NSGE];
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = sg,
				 .num_sge = NSGE,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED,
				 .imm_data = htonl(imm)},
			   *bad;

	sges(n, off, len, sg);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv_sge(struct ibv_qp *qp, struct node *n, uint32_t off, uint32_t len)
{
	struct ibv_sge sg[NSGE];
	struct ibv_recv_wr wr = {.wr_id = 2, .sg_list = sg, .num_sge = NSGE}, *bad;

	sges(n, off, len, sg);
	return ibv_post_recv(qp, &wr, &bad);
}

/* One completion (any status) within the wait. */
static bool one_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (uint64_t end = now_ms() + WAIT_MS; now_ms() < end;)
		if (ibv_poll_cq(cq, 1, wc) == 1)
			return true;
	return false;
}

static uint8_t guard_b[BUF], want[BUF];

/* UROCE_SHM_BULK=0: pull records without their bytes (shm.c) */
static bool nobulk(void)
{
	const char *v = getenv("UROCE_SHM_BULK");

	return v && !strcmp(v, "0");
}

/* B's buffer filled with a guard, and the image it must show afterwards. */
static void guard(struct node *n)
{
	fill(n->buf, BUF, 0xbeef);
	memcpy(guard_b, n->buf, BUF);
}

static void test_ops(void)
{
	static uint8_t msg[BUF];
	struct pair p;
	struct ibv_wc wc;
	uint64_t pb, pa;
	uint32_t len = 200000; /* 48.8 packets of 4 KiB */

	if (!uroce_pull_min() || uroce_pull_min() > 65536) {
		printf("test_shm_pull: UROCE_SHM_PULL=%u: the pulls are off, ops not checked\n",
		       uroce_pull_min());
		return;
	}
	CHECK(pull_pair(&p), "a pair with both links");
	fill(p.a.buf, BUF, 1);

	/* WRITE: 3 SGEs into one RETH range */
	guard(&p.b);
	pb = CNT(&p.b, shm_pull);
	CHECK(!post_op(p.qa, &p.a, IBV_WR_RDMA_WRITE, 0, len, p.ib.addr + 1000, p.ib.rkey, 0) &&
		  one_wc(p.a.cq, &wc) && wc.status == IBV_WC_SUCCESS,
	      "WRITE of %u bytes from %d SGEs", len, NSGE);
	gather(&p.a, 0, len, msg);
	memcpy(want, guard_b, BUF);
	memcpy(want + 1000, msg, len);
	CHECK(!memcmp(p.b.buf, want, BUF), "the WRITE landed, and nothing else changed");
	CHECK(CNT(&p.b, shm_pull) == pb + 1, "pulled by the target: %lu",
	      (unsigned long)(CNT(&p.b, shm_pull) - pb));

	/* WRITE with immediate */
	pb = CNT(&p.b, shm_pull);
	CHECK(!post_recv(p.qb, &p.b, 0, 0), "a receive for the immediate");
	CHECK(!post_op(p.qa, &p.a, IBV_WR_RDMA_WRITE_WITH_IMM, 4096, 65536, p.ib.addr + 300000,
		       p.ib.rkey, 0x1234) &&
		  one_wc(p.a.cq, &wc) && wc.status == IBV_WC_SUCCESS,
	      "WRITE with immediate");
	CHECK(one_wc(p.b.cq, &wc) && wc.status == IBV_WC_SUCCESS &&
		  wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc.wc_flags & IBV_WC_WITH_IMM) &&
		  ntohl(wc.imm_data) == 0x1234 && wc.byte_len == 65536,
	      "its receive completion: opcode %d imm 0x%x len %u", wc.opcode, ntohl(wc.imm_data),
	      wc.byte_len);
	gather(&p.a, 4096, 65536, msg);
	CHECK(!memcmp(p.b.buf + 300000, msg, 65536) && CNT(&p.b, shm_pull) == pb + 1,
	      "landed, pulled");

	/* SEND (and with immediate) from 3 SGEs into 3 SGEs */
	for (int imm = 0; imm < 2; imm++) {
		uint32_t slen = 100000 + (uint32_t)imm * 3;

		guard(&p.b);
		pb = CNT(&p.b, shm_pull);
		CHECK(!post_recv_sge(p.qb, &p.b, 500000, 120000), "a receive of 3 SGEs");
		CHECK(!post_op(p.qa, &p.a, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, 8192, slen, 0,
			       0, 77) &&
			  one_wc(p.a.cq, &wc) && wc.status == IBV_WC_SUCCESS,
		      "SEND%s of %u bytes", imm ? " with immediate" : "", slen);
		CHECK(one_wc(p.b.cq, &wc) && wc.status == IBV_WC_SUCCESS &&
			  wc.opcode == IBV_WC_RECV && wc.byte_len == slen &&
			  !!(wc.wc_flags & IBV_WC_WITH_IMM) == imm &&
			  (!imm || ntohl(wc.imm_data) == 77),
		      "its receive completion: %s len %u", ibv_wc_status_str(wc.status),
		      wc.byte_len);
		gather(&p.a, 8192, slen, msg);
		memcpy(want, guard_b, BUF);
		{ /* scattered the way the receive's pieces lie */
			struct ibv_sge sg[NSGE];
			uint32_t o = 0;

			sges(&p.b, 500000, 120000, sg);
			for (int i = 0; i < NSGE && o < slen; i++) {
				uint32_t t = sg[i].length < slen - o ? sg[i].length : slen - o;

				memcpy(want + (sg[i].addr - (uintptr_t)p.b.buf), msg + o, t);
				o += t;
			}
		}
		CHECK(!memcmp(p.b.buf, want, BUF), "the SEND landed in the pieces, nothing else");
		CHECK(CNT(&p.b, shm_pull) == pb + 1, "pulled by the receiver");
	}

	/* READ over several chunks (128 responses each) into 3 SGEs */
	fill(p.b.buf, BUF, 3);
	memset(p.a.buf, 0x5a, BUF);
	memcpy(guard_b, p.a.buf, BUF);
	pa = CNT(&p.a, shm_pull);
	len = 900000 + 17;
	CHECK(!post_op(p.qa, &p.a, IBV_WR_RDMA_READ, 10000, len, p.ib.addr + 5, p.ib.rkey, 0) &&
		  one_wc(p.a.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == len,
	      "READ of %u bytes: %s", len, ibv_wc_status_str(wc.status));
	gather(&p.a, 10000, len, msg);
	CHECK(!memcmp(msg, p.b.buf + 5, len), "the READ's data");
	{
		struct ibv_sge sg[NSGE];

		memcpy(want, guard_b, BUF);
		sges(&p.a, 10000, len, sg);
		for (int i = 0; i < NSGE; i++)
			memcpy(want + (sg[i].addr - (uintptr_t)p.a.buf),
			       (void *)(uintptr_t)sg[i].addr, sg[i].length);
		CHECK(!memcmp(p.a.buf, want, BUF), "nothing outside the READ's pieces changed");
	}
	/* (UROCE_SHM_BULK=0: a READ response goes only with its bytes,
	 * so as packets) */
	CHECK(nobulk() ? CNT(&p.a, shm_pull) == pa : CNT(&p.a, shm_pull) >= pa + 2,
	      "pulled by the requester, chunk by chunk: %lu",
	      (unsigned long)(CNT(&p.a, shm_pull) - pa));

	/* small messages keep the ring */
	pb = CNT(&p.b, shm_pull);
	CHECK(!post_op(p.qa, &p.a, IBV_WR_RDMA_WRITE, 0, 3000, p.ib.addr, p.ib.rkey, 0) &&
		  one_wc(p.a.cq, &wc) && wc.status == IBV_WC_SUCCESS && CNT(&p.b, shm_pull) == pb,
	      "a small WRITE is not pulled");

	/* a SEND longer than the receive: the errors of the ring path */
	pb = CNT(&p.b, shm_pull_fail);
	CHECK(!post_recv_sge(p.qb, &p.b, 500000, 30000), "a short receive");
	CHECK(!post_op(p.qa, &p.a, IBV_WR_SEND, 0, 100000, 0, 0, 0) && one_wc(p.a.cq, &wc) &&
		  wc.status == IBV_WC_REM_INV_REQ_ERR,
	      "the SEND fails: %s", ibv_wc_status_str(wc.status));
	CHECK(one_wc(p.b.cq, &wc) && wc.status == IBV_WC_LOC_LEN_ERR, "the receive fails: %s",
	      ibv_wc_status_str(wc.status));
	CHECK(CNT(&p.b, shm_pull_fail) == pb + 1, "one pull could not place it");
	pair_close(&p);
}

/* ---- READ streams ---- */

enum { RS_LEN = 65536, RS_SLOTS = 16 };

static int post_reads(struct pair *p, int first, int n)
{
	for (int s = first; s < first + n; s++)
		if (post(p->qa, IBV_WR_RDMA_READ, &p->a, (uint32_t)s * RS_LEN, RS_LEN, &p->ib,
			 (uint32_t)s * RS_LEN, (uint64_t)s))
			return -1;
	return 0;
}

static void test_readstream(void)
{
	enum ibv_wc_status st;
	struct pair p;
	uint64_t pa;

	CHECK(pull_pair(&p), "a pair with both links");
	pa = CNT(&p.a, shm_pull);
	for (int round = 0; round < 8; round++) {
		fill(p.b.buf, (size_t)RS_SLOTS * RS_LEN, 100u + (uint32_t)round);
		memset(p.a.buf, 0, (size_t)RS_SLOTS * RS_LEN);
		CHECK(!post_reads(&p, 0, RS_SLOTS) && !wait_cq(p.a.cq, RS_SLOTS, &st) &&
			  st == IBV_WC_SUCCESS &&
			  !memcmp(p.a.buf, p.b.buf, (size_t)RS_SLOTS * RS_LEN),
		      "round %d: %d READs of 64 KiB in flight, every byte", round, RS_SLOTS);
	}
	if (nobulk()) /* a READ response goes only with its bytes */
		CHECK(CNT(&p.a, shm_pull) == pa, "UROCE_SHM_BULK=0: responses as packets");
	else
		CHECK(CNT(&p.a, shm_pull) >= pa + 8 * RS_SLOTS, "every response pulled: %lu of %d",
		      (unsigned long)(CNT(&p.a, shm_pull) - pa), 8 * RS_SLOTS);

	pair_close(&p);
}

static void test_readdereg(void)
{
	int posted, done = 0, good = 0, bad = 0, after = 0, errs = 0;
	enum ibv_wc_status first = IBV_WC_SUCCESS;
	bool gone = false;
	struct ibv_wc wc;
	struct pair p;

	CHECK(pull_pair(&p), "a pair with both links");
	fill(p.b.buf, (size_t)RS_SLOTS * RS_LEN, 21);
	memcpy(want, p.b.buf, (size_t)RS_SLOTS * RS_LEN);
	memset(p.a.buf, 0, (size_t)RS_SLOTS * RS_LEN);
	CHECK(!post_reads(&p, 0, RS_SLOTS), "%d READs posted", RS_SLOTS);
	posted = RS_SLOTS;
	while (done < posted && one_wc(p.a.cq, &wc)) {
		int s = (int)wc.wr_id;

		done++;
		if (wc.status == IBV_WC_SUCCESS) {
			good++;
			after += gone;
			bad += !!memcmp(p.a.buf + (size_t)s * RS_LEN, want + (size_t)s * RS_LEN,
					RS_LEN);
			memset(p.a.buf + (size_t)s * RS_LEN, 0, RS_LEN);
		} else if (!errs++) {
			first = wc.status;
		}
		if (done == 48) {
			/* mid-stream: gone, and its bytes are not the registered ones */
			CHECK(!ibv_dereg_mr(p.b.mr), "B's MR deregistered after %d READs", done);
			p.b.mr = NULL;
			memset(p.b.buf, 0xee, (size_t)RS_SLOTS * RS_LEN);
			gone = true;
		}
		if (!errs && posted < 2000 && !post_reads(&p, s, 1))
			posted++;
	}
	CHECK(done == posted, "every READ completed: %d of %d", done, posted);
	CHECK(!bad, "%d of %d successful READs carried bytes other than the registered ones", bad,
	      good);
	CHECK(errs && first == IBV_WC_REM_ACCESS_ERR,
	      "after the deregistration READs fail: %s (%d successful after it, %d errors)",
	      ibv_wc_status_str(first), after, errs);
	pair_close(&p);
}

/* ---- a hostile peer's pull records ---- */

enum { R_HEAD = 64, R_DATA = 256, R_REC = 32, REC_NOCRC = 2 };

enum hostile { H_UNMAPPED, H_LONGER, H_NPKTS, H_OUTSIDE, H_NOT_ONLY, H_BULK_SHORT, H_COUNT };

static const char *const hostile_name[] = {
    "a source range that is not mapped", "a description longer than the RETH",
    "a PSN count that does not match",	 "a RETH outside the MR",
    "the flag on a WRITE FIRST",	 "a bulk record shorter than its description"};

/* Append one record holding pkt (and bulk bytes of a pattern behind it:
 * a bulk record, shm.c) to B's ring from A, at B's head (A sends nothing
 * meanwhile, and B has taken every record: the test is the sender now). */
static bool inject(struct pair *p, const uint8_t *pkt, uint32_t len, uint32_t bulk)
{
	uint16_t aport = to_uctx(p->a.ctx)->ep[0]->port;
	size_t maplen = 0;
	uint8_t *r = NULL;
	uint64_t tail, size, off;
	uint32_t h[4] = {len, htonl(0x7f000001), htonl(0x7f000001), REC_NOCRC | (bulk / 64) << 16};
	uint32_t ext = (R_REC + len + 63) & ~63u;

	/* (B answers the hello before it lists the link) */
	for (int i = 0; i < 2000 && !r; i++)
		if (!(r = uroce_shm_test_ring(to_uctx(p->b.ctx)->ep[0], aport, &maplen)))
			usleep(1000);
	if (!r)
		return false;
	/* the ring's size: a power of two, larger than the bulk area behind it */
	for (size = 1; size * 2 <= maplen - R_DATA; size *= 2)
		;
	memcpy(&tail, r + R_HEAD, 8);
	off = tail & (size - 1);
	if (off + ext + bulk > size) { /* (never at this point of a fresh ring) */
		munmap(r, maplen);
		return false;
	}
	memcpy(r + R_DATA + off + 8, h, 16);
	memcpy(r + R_DATA + off + R_REC, pkt, len);
	memset(r + R_DATA + off + ext, 0x5a, bulk);
	__atomic_store_n((uint64_t *)(void *)(r + R_DATA + off), tail + 1, __ATOMIC_RELEASE);
	munmap(r, maplen);
	return true;
}

static void test_hostile(void)
{
	static uint8_t src[65536];
	struct uroce_qp *qb;
	struct pair p;

	fill(src, sizeof(src), 9);
	for (int v = 0; v < H_COUNT; v++) {
		uint8_t buf[256];
		struct uroce_pkt pkt;
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr ia;
		uint32_t len = 65536, psn;
		uint64_t fail0, drop0;
		struct iovec iov = {src, sizeof(src)};

		if (!pull_pair(&p)) {
			CHECK(0, "variant %d: a pair", v);
			pair_close(&p);
			continue;
		}
		qb = to_uqp(p.qb);
		pthread_mutex_lock(&qb->lock);
		psn = qb->resp.psn; /* what B expects next */
		pthread_mutex_unlock(&qb->lock);
		if (v == H_UNMAPPED)
			iov.iov_base = (void *)(uintptr_t)0x10000; /* (below mmap_min_addr) */
		if (v == H_LONGER)
			len = 32768; /* the description says 64 KiB */
		uroce_pkt_init(&pkt, buf,
			       (v == H_NOT_ONLY ? UR_OPC_WRITE_FIRST : UR_OPC_WRITE_ONLY) |
				   UR_TR_RC,
			       p.qb->qp_num, psn, uroce_pull_desc_len(1));
		ur_reth_set(&pkt, v == H_OUTSIDE ? p.ib.addr + BUF - 100 : p.ib.addr + 4096,
			    p.ib.rkey, len);
		ur_bth_set_ackreq(&pkt, true);
		uroce_pull_desc_put(pkt.payload, v == H_NPKTS ? 3 : 16, &iov, 1);
		pkt.bth[4] |= UR_BTH4_PULL;
		guard(&p.b);
		fail0 = CNT(&p.b, shm_pull_fail);
		drop0 = CNT(&p.b, shm_pull);
		CHECK(inject(&p, buf, pkt.len, v == H_BULK_SHORT ? 4096 : 0),
		      "variant %d (%s): injected", v, hostile_name[v]);
		for (int i = 0; i < 20; i++) { /* B's progress thread may take it too */
			uroce_ep_poll(to_uctx(p.b.ctx)->ep[0], 64);
			usleep(1000);
		}
		CHECK(!memcmp(p.b.buf, guard_b, BUF), "variant %d: nothing written", v);
		CHECK(CNT(&p.b, shm_pull) == drop0, "variant %d: nothing pulled", v);
		if (v == H_UNMAPPED || v == H_BULK_SHORT)
			CHECK(CNT(&p.b, shm_pull_fail) == fail0 + 1,
			      "variant %d: the failure counted", v);
		CHECK(!ibv_query_qp(p.qb, &qa, IBV_QP_STATE, &ia), "variant %d: B's QP", v);
		/* a pull that fails is a lost packet; a malformed request is
		 * NAKed as over UDP and ends that peer's QP (IBTA 9.9.3.1) */
		if (v == H_UNMAPPED || v == H_NOT_ONLY || v == H_BULK_SHORT)
			CHECK(qa.qp_state == IBV_QPS_RTS, "variant %d: B's QP lives on: %d", v,
			      qa.qp_state);
		else
			CHECK(qa.qp_state == IBV_QPS_ERR || qa.qp_state == IBV_QPS_RTS,
			      "variant %d: B's QP state %d", v, qa.qp_state);
		if (v == H_UNMAPPED || v == H_NOT_ONLY || v == H_BULK_SHORT) {
			/* B's head is past A's tail now: A's next head check breaks
			 * the link, the WRITEs go over UDP or a new link.  The
			 * first silence makes A look (uroce_shm_recheck): records
			 * put before that vanish, and without the look the resends
			 * did too, one per timeout, 5-6 of the QP's 7 retries */
			uint64_t to0 = CNT(&p.a, timeouts);

			CHECK(write_stream(&p, 8, 32768, 30u + (unsigned)v),
			      "variant %d: later WRITEs complete with the right data", v);
			CHECK(
			    CNT(&p.a, timeouts) - to0 <= 1,
			    "variant %d: the broken ring found by the first silence: %llu timeouts",
			    v, (unsigned long long)(CNT(&p.a, timeouts) - to0));
			if (v == H_UNMAPPED || v == H_BULK_SHORT)
				CHECK(to_uqp(p.qa)->req.pull_off ||
					  CNT(&p.a, shm_bad) + CNT(&p.b, shm_bad),
				      "variant %d: A was told to stop pulling", v);
		}
		pair_close(&p);
	}
}

int main(int argc, char **argv)
{
	const char *v = getenv("UROCE_SHM"), *only = argc > 1 ? argv[1] : "";

	if (v && !strcmp(v, "0")) {
		printf("test_shm_pull: SKIP: UROCE_SHM=0 is set\n");
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!*only || !strcmp(only, "ops"))
		test_ops();
	if ((!*only || !strcmp(only, "readstream")) && uroce_pull_min() &&
	    uroce_pull_min() <= RS_LEN) {
		test_readstream();
		test_readdereg();
	}
	if ((!*only || !strcmp(only, "hostile")) && uroce_pull_min())
		test_hostile();
	printf("test_shm_pull: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

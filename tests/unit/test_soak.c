/* A bounded soak: mixed RC traffic with random sizes for a fixed time, with
 * object churn, and memory that must stay flat.
 *
 * Two contexts, SOAK_PAIRS QP pairs between them (half of them driven from
 * each side, so both contexts are requester and responder).  Every round
 * each pair posts a batch of 1..8 WRs - SEND, SEND_WITH_IMM, RDMA_WRITE,
 * RDMA_WRITE_WITH_IMM, RDMA_READ - of 0..SOAK_MAX_SIZE bytes, and every
 * message is verified byte for byte with the bytes around it.  Each round
 * one pair is destroyed and created again, and every 16 rounds the memory
 * regions are deregistered and registered again, so the create/destroy
 * paths run thousands of times.
 *
 * VmRSS is sampled after a warm-up (a fifth of the run, at most 3 s) and at
 * the end; it may grow by at most SOAK_RSS_KB KiB (the counter files of the
 * two contexts, 2 x 772 KiB, are touched slot by slot as QPs are re-created:
 * RssShmem grows up to that; RssAnon, the heap, stays flat).  Under AddressSanitizer
 * (its quarantine holds freed memory) the growth is only reported.
 *
 * Environment: SOAK_SECONDS (default 30; 15 under AddressSanitizer), SOAK_MAX_SIZE (65536),
 * SOAK_PAIRS (8), SOAK_RSS_KB (8192; 0 = do not check).
 * tests/integration/soak_valgrind.sh runs this program under valgrind.
 */
#include "rc_harness.h"
#include "fault_util.h"

#define MAX_PAIRS 64
#define MAX_BATCH 8
#define SGUARD	  32u

static const enum ibv_wr_opcode soak_ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
					      IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ};

struct soak {
	struct fu_side s[2];
	struct ibv_qp *qp[MAX_PAIRS][2];
	struct fu_qp_opts o;
	struct ibv_qp_cap cap;
	int npairs;
	uint32_t max;
	size_t slot; /* bytes per message slot: max + guard */
	size_t area; /* bytes per pair in each side's buffer */
	uint64_t rng;
	/* totals */
	unsigned long wrs, rounds, recreated, rereg;
	double bytes;
};

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 10) : def;
}

static int reg_mrs(struct soak *k)
{
	for (int i = 0; i < 2; i++) {
		if (k->s[i].mr && ibv_dereg_mr(k->s[i].mr))
			return -1;
		k->s[i].mr = ibv_reg_mr(k->s[i].pd, k->s[i].buf, k->s[i].len,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					    IBV_ACCESS_REMOTE_READ);
		if (!k->s[i].mr)
			return -1;
	}
	return 0;
}

struct msg {
	enum ibv_wr_opcode op;
	uint32_t size;
	uint32_t imm;
};

/* One pair's batch in a round. */
struct batch {
	int n, nrecv;
	struct msg m[MAX_BATCH];
	struct ibv_wc swc[MAX_BATCH], rwc[MAX_BATCH];
	int sgot, rgot;
};

static struct batch batches[MAX_PAIRS];

#define WR_ID(p, i) ((uint64_t)(p) << 8 | (uint64_t)(i))

/* Post pair p's batch of random WRs from side p & 1.  Returns false on a
 * failure. */
static bool pair_post(struct soak *k, int p, uint64_t seed)
{
	int from = p & 1, to = !from;
	struct batch *bt = &batches[p];
	struct fu_side *rq = &k->s[from], *rs = &k->s[to];
	uint8_t *lbuf = rq->buf + (size_t)p * k->area, *rbuf = rs->buf + (size_t)p * k->area;
	struct ibv_send_wr wr[MAX_BATCH], *bad;
	struct ibv_recv_wr rwr[MAX_BATCH], *rbad;
	struct ibv_sge sge[MAX_BATCH], rsge[MAX_BATCH];
	struct msg *m = bt->m;
	int n = 1 + (int)(xs64(&k->rng) % MAX_BATCH), nrecv = 0;

	memset(bt, 0, sizeof(*bt));
	memset(wr, 0, sizeof(wr));
	memset(rwr, 0, sizeof(rwr));
	/* the pair's area on each side: n slots; guards around every message */
	memset(lbuf, 0xa5, (size_t)n * k->slot);
	memset(rbuf, 0x5a, (size_t)n * k->slot);
	for (int i = 0; i < n; i++) {
		uint8_t *l = lbuf + (size_t)i * k->slot, *r = rbuf + (size_t)i * k->slot;
		uint64_t x = xs64(&k->rng);

		m[i].op = soak_ops[x % 5];
		/* sizes: often small, sometimes the maximum */
		m[i].size = (x >> 8) % 4 == 0	? (uint32_t)((x >> 16) % 64)
			    : (x >> 8) % 4 == 1 ? k->max
						: (uint32_t)((x >> 16) % (k->max + 1));
		m[i].imm = (uint32_t)(x >> 32);
		if (m[i].op == IBV_WR_RDMA_READ)
			fill_pattern(r, m[i].size, seed + (uint64_t)i);
		else
			fill_pattern(l, m[i].size, seed + (uint64_t)i);
		sge[i] = (struct ibv_sge){(uintptr_t)l, m[i].size, rq->mr->lkey};
		wr[i].wr_id = WR_ID(p, i);
		wr[i].opcode = m[i].op;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].imm_data = htobe32(m[i].imm);
		wr[i].wr.rdma.remote_addr = (uintptr_t)r;
		wr[i].wr.rdma.rkey = rs->mr->rkey;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		if (m[i].op != IBV_WR_RDMA_WRITE && m[i].op != IBV_WR_RDMA_READ) {
			rsge[nrecv] =
			    (struct ibv_sge){(uintptr_t)r, (uint32_t)k->max, rs->mr->lkey};
			rwr[nrecv].wr_id = WR_ID(p, i);
			rwr[nrecv].sg_list = &rsge[nrecv];
			/* WRITE_WITH_IMM consumes a receive but writes no SGE */
			rwr[nrecv].num_sge = m[i].op == IBV_WR_RDMA_WRITE_WITH_IMM ? 0 : 1;
			if (nrecv)
				rwr[nrecv - 1].next = &rwr[nrecv];
			nrecv++;
		}
	}
	bt->n = n;
	bt->nrecv = nrecv;
	if (nrecv && ibv_post_recv(k->qp[p][to], rwr, &rbad)) {
		CHECK(0, "pair %d: post_recv", p);
		return false;
	}
	if (ibv_post_send(k->qp[p][from], wr, &bad)) {
		CHECK(0, "pair %d: post_send", p);
		return false;
	}
	return true;
}

/* Collect every pair's completions from the four CQs. */
static bool round_wait(struct soak *k)
{
	struct ibv_cq *cq[4] = {k->s[0].scq, k->s[0].rcq, k->s[1].scq, k->s[1].rcq};
	int want = 0, got = 0;
	double end = fu_now() + FU_WAIT_S;

	for (int p = 0; p < k->npairs; p++)
		want += batches[p].n + batches[p].nrecv;
	while (got < want) {
		for (int c = 0; c < 4; c++) {
			struct ibv_wc wc[16];
			int r = ibv_poll_cq(cq[c], 16, wc);

			for (int j = 0; j < r; j++) {
				int p = (int)(wc[j].wr_id >> 8);
				struct batch *bt = &batches[p < k->npairs ? p : 0];
				bool recv = c & 1;

				if (p >= k->npairs ||
				    (recv ? bt->rgot >= bt->nrecv : bt->sgot >= bt->n)) {
					CHECK(0, "unexpected completion wr_id 0x%llx on CQ %d",
					      (unsigned long long)wc[j].wr_id, c);
					return false;
				}
				if (recv)
					bt->rwc[bt->rgot++] = wc[j];
				else
					bt->swc[bt->sgot++] = wc[j];
				got++;
			}
		}
		if (fu_now() > end) {
			CHECK(0, "%d of %d completions", got, want);
			return false;
		}
	}
	return true;
}

/* Check pair p's completions and data. */
static bool pair_check(struct soak *k, int p)
{
	int from = p & 1, to = !from;
	struct batch *bt = &batches[p];
	uint8_t *lbuf = k->s[from].buf + (size_t)p * k->area;
	uint8_t *rbuf = k->s[to].buf + (size_t)p * k->area;
	const struct msg *m = bt->m;
	unsigned int f0 = failed;

	for (int i = 0; i < bt->n; i++)
		CHECK(bt->swc[i].status == IBV_WC_SUCCESS && bt->swc[i].wr_id == WR_ID(p, i),
		      "pair %d send wc %d: %s wr_id 0x%llx", p, i,
		      ibv_wc_status_str(bt->swc[i].status), (unsigned long long)bt->swc[i].wr_id);
	for (int j = 0; j < bt->nrecv; j++) {
		const struct ibv_wc *w = &bt->rwc[j];
		int i = (int)(w->wr_id & 0xff);

		CHECK(w->status == IBV_WC_SUCCESS && i < bt->n && w->byte_len == m[i].size &&
			  (m[i].op == IBV_WR_SEND ||
			   ((w->wc_flags & IBV_WC_WITH_IMM) && be32toh(w->imm_data) == m[i].imm)),
		      "pair %d recv wc %d: %s, byte_len %u", p, j, ibv_wc_status_str(w->status),
		      w->byte_len);
	}
	/* every destination holds its message, and the guard after it */
	for (int i = 0; i < bt->n; i++) {
		uint8_t *l = lbuf + (size_t)i * k->slot, *r = rbuf + (size_t)i * k->slot;
		bool rd = m[i].op == IBV_WR_RDMA_READ;
		const uint8_t *src = rd ? r : l;
		uint8_t *dst = rd ? l : r, g = rd ? 0xa5 : 0x5a;
		bool guard = true;

		for (uint32_t b = 0; b < SGUARD; b++)
			guard &= dst[m[i].size + b] == g;
		CHECK(!memcmp(dst, src, m[i].size) && guard,
		      "pair %d msg %d (%s %u B): data differs%s", p, i, op_name(m[i].op), m[i].size,
		      guard ? "" : " past its end");
		k->bytes += m[i].size;
	}
	k->wrs += (unsigned long)bt->n;
	return failed == f0;
}

static int pair_new(struct soak *k, int p)
{
	for (int i = 0; i < 2; i++)
		if (k->qp[p][i]) {
			if (ibv_destroy_qp(k->qp[p][i]))
				return -1;
			k->qp[p][i] = NULL;
		}
	return fu_pair_create(k->s, k->qp[p], &k->cap, &k->o);
}

int main(void)
{
	static struct soak k;
	double dur;
	long rss_bound = env_long("SOAK_RSS_KB", 8192), rss0 = -1, rss1, rss_max = 0;
	long anon0 = -1, shm0 = -1, anon1, shm1;
	double t0, t_warm, t;
	bool asan = false;

#ifdef __SANITIZE_ADDRESS__
	asan = true;
#endif
	/* the sanitizer build runs the whole suite a second time: a shorter soak */
	dur = (double)env_long("SOAK_SECONDS", asan ? 15 : 30);
	setvbuf(stdout, NULL, _IOLBF, 0);
	k.npairs = (int)env_long("SOAK_PAIRS", 8);
	k.max = (uint32_t)env_long("SOAK_MAX_SIZE", 65536);
	if (k.npairs < 2 || k.npairs > MAX_PAIRS || dur < 1 || k.max > (1u << 22)) {
		printf("bad SOAK_PAIRS (2..%d), SOAK_SECONDS or SOAK_MAX_SIZE\n", MAX_PAIRS);
		return 2;
	}
	alarm((unsigned int)dur + 80);
	k.slot = (k.max + SGUARD + 63) / 64 * 64;
	k.area = k.slot * MAX_BATCH;
	k.rng = 0x50a4;
	k.o = fu_default_opts();
	k.o.mtu = IBV_MTU_1024;
	/* under valgrind, whose scheduler runs one thread at a time, a progress
	 * thread can wait longer than 8 x 67 ms for its turn */
	k.o.timeout = (uint8_t)env_long("SOAK_QP_TIMEOUT", k.o.timeout);
	k.cap = (struct ibv_qp_cap){.max_send_wr = MAX_BATCH,
				    .max_recv_wr = MAX_BATCH,
				    .max_send_sge = 1,
				    .max_recv_sge = 1};
	if (fu_side_open(&k.s[0], k.area * (size_t)k.npairs, 1024) ||
	    fu_side_open(&k.s[1], k.area * (size_t)k.npairs, 1024)) {
		printf("cannot open the contexts: %s\n", strerror(errno));
		return 1;
	}
	for (int p = 0; p < k.npairs; p++)
		if (pair_new(&k, p)) {
			printf("cannot create QP pair %d: %s\n", p, strerror(errno));
			return 1;
		}
	printf("soak: %.0f s, %d QP pairs, messages of 0..%u bytes, MTU 1024\n", dur, k.npairs,
	       k.max);
	t0 = fu_now();
	t_warm = t0 + (dur / 5 < 3 ? dur / 5 : 3);
	while ((t = fu_now()) < t0 + dur) {
		bool ok = true;

		/* every pair's batch in flight at once, then the checks */
		for (int p = 0; p < k.npairs && ok; p++)
			ok = pair_post(&k, p, k.rounds << 8 | (unsigned long)p);
		ok = ok && round_wait(&k);
		for (int p = 0; p < k.npairs && ok; p++)
			ok = pair_check(&k, p);
		if (!ok)
			break;
		k.rounds++;
		/* churn: a new QP pair every round, new MRs every 16 rounds */
		if (pair_new(&k, (int)(k.rounds % (unsigned long)k.npairs))) {
			CHECK(0, "re-creating a QP pair: %s", strerror(errno));
			break;
		}
		k.recreated++;
		if (k.rounds % 16 == 0) {
			if (reg_mrs(&k)) {
				CHECK(0, "re-registering the MRs: %s", strerror(errno));
				break;
			}
			k.rereg++;
		}
		if (rss0 < 0 && t >= t_warm) {
			rss0 = fu_status_kb("VmRSS");
			anon0 = fu_status_kb("RssAnon");
			shm0 = fu_status_kb("RssShmem");
		}
		if (rss0 >= 0) {
			long v = fu_status_kb("VmRSS");

			rss_max = v > rss_max ? v : rss_max;
		}
	}
	t = fu_now() - t0;
	rss1 = fu_status_kb("VmRSS");
	anon1 = fu_status_kb("RssAnon");
	shm1 = fu_status_kb("RssShmem");
	CHECK(k.rounds > 0, "no round completed");
	printf("soak: %lu rounds, %lu WRs, %.1f MB verified in %.1f s (%.0f WRs/s, %.1f MB/s); "
	       "%lu QP pairs re-created, MRs re-registered %lu times\n",
	       k.rounds, k.wrs, k.bytes / 1e6, t, (double)k.wrs / t, k.bytes / 1e6 / t, k.recreated,
	       k.rereg);
	{
		unsigned long c[5] = {0};

		for (int i = 0; i < 2; i++) {
			struct uroce_counters *cn = to_uctx(k.s[i].ctx)->cnt;

			c[0] += atomic_load(&cn->tx_pkts);
			c[1] += atomic_load(&cn->retransmits);
			c[2] += atomic_load(&cn->timeouts);
			c[3] += atomic_load(&cn->rnr_naks_rx);
			c[4] += atomic_load(&cn->seq_naks_rx);
		}
		printf("soak: %lu packets sent, %lu retransmitted, %lu ACK timeouts, %lu RNR NAKs, "
		       "%lu sequence NAKs\n",
		       c[0], c[1], c[2], c[3], c[4]);
	}
	if (rss0 >= 0)
		printf("soak: VmRSS after warm-up %ld KiB, at the end %ld KiB (%+ld KiB, peak %ld "
		       "KiB), VmHWM %ld KiB%s\n",
		       rss0, rss1, rss1 - rss0, rss_max, fu_status_kb("VmHWM"),
		       asan ? " (AddressSanitizer: not checked)" : "");
	/* RssShmem: the counter files (src/core/stats.c), whose QP slots are
	 * touched one after the other as QPs come and go (bounded by the file
	 * size); RssAnon: the heap */
	if (rss0 >= 0)
		printf("soak: RssAnon %+ld KiB, RssShmem %+ld KiB\n", anon1 - anon0, shm1 - shm0);
	if (rss_bound > 0 && !asan && rss0 >= 0) {
		CHECK(rss1 - rss0 <= rss_bound, "VmRSS grew by %ld KiB (bound %ld KiB)",
		      rss1 - rss0, rss_bound);
		CHECK(anon1 - anon0 <= rss_bound / 4,
		      "RssAnon (the heap) grew by %ld KiB (bound %ld KiB)", anon1 - anon0,
		      rss_bound / 4);
	}
	for (int p = 0; p < k.npairs; p++)
		for (int i = 0; i < 2; i++)
			if (k.qp[p][i])
				CHECK(!ibv_destroy_qp(k.qp[p][i]), "destroy_qp");
	fu_side_close(&k.s[0]);
	fu_side_close(&k.s[1]);
	return finish("test_soak");
}

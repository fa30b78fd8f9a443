/*
 * bench/msg_cpu.c - the CPU time of one message through uroce, with no
 * waiting in it: one thread opens the device twice (two contexts, two
 * endpoints, as two processes would) and ping-pongs 2-byte inline RC SENDs
 * between them, polling each CQ only once the other side has posted.  Each
 * poll finds its message at once, so a one-way trip costs exactly the
 * sender's post, the receiver's receive path and the ACK's handling -
 * nothing of the scheduler, of a cross-core cache-line transfer or of a
 * sleeping peer.  Over the same-host wire (the default) it is the figure
 * the latency of a cross-process ping-pong is built from
 * (docs/design.md, "The per-message CPU of the same-host wire"); with
 * UROCE_SHM=0 the UDP path's, system calls included.
 *
 *   uroce run -- msg_cpu [ITERS]      (default 200,000 round trips)
 *
 * Prints the mean one-way time and, over chunks of 1,000 round trips, the
 * lowest, the 10th percentile and the median: on a shared VM whole runs
 * shift by 1.5-2x with the host, and the low chunks are the CPU cost.
 */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { CHUNK = 1000, WARMUP = 1000, DEPTH = 32, BUF = 4096 };

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
	union ibv_gid gid;
};

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void side_open(struct side *s, struct ibv_device *dev)
{
	struct ibv_qp_init_attr qa = {.qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = DEPTH,
					      .max_recv_wr = DEPTH,
					      .max_send_sge = 1,
					      .max_recv_sge = 1,
					      .max_inline_data = 64}};
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};

	if (!(s->ctx = ibv_open_device(dev)) || !(s->pd = ibv_alloc_pd(s->ctx)) ||
	    !(s->cq = ibv_create_cq(s->ctx, 2 * DEPTH, NULL, NULL, 0)))
		die("device");
	if (!(s->buf = calloc(1, BUF)) ||
	    !(s->mr = ibv_reg_mr(s->pd, s->buf, BUF, IBV_ACCESS_LOCAL_WRITE)))
		die("memory");
	qa.send_cq = qa.recv_cq = s->cq;
	if (!(s->qp = ibv_create_qp(s->pd, &qa)) || ibv_query_gid(s->ctx, 1, 0, &s->gid) ||
	    ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("qp");
}

static void side_connect(struct side *s, const struct side *peer)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_RTR,
	    .path_mtu = IBV_MTU_1024,
	    .dest_qp_num = peer->qp->qp_num,
	    .max_dest_rd_atomic = 1,
	    .min_rnr_timer = 12,
	    .ah_attr = {.is_global = 1, .grh = {.dgid = peer->gid, .hop_limit = 1}, .port_num = 1}};

	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("rtr");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS,
				 .timeout = 14,
				 .retry_cnt = 7,
				 .rnr_retry = 7,
				 .max_rd_atomic = 1};
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("rts");
}

static void post_recv(struct side *s)
{
	struct ibv_sge sge = {(uintptr_t)s->buf, 64, s->mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;

	if (ibv_post_recv(s->qp, &wr, &bad))
		die("post_recv");
}

static void post_send(struct side *s)
{
	struct ibv_sge sge = {(uintptr_t)s->buf + BUF / 2, 2, s->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE},
			   *bad;

	if (ibv_post_send(s->qp, &wr, &bad))
		die("post_send");
}

/* Poll until s has received a message (its own send completions pass by);
 * counts the polls that found nothing. */
static void wait_recv(struct side *s, long *empty)
{
	for (;;) {
		struct ibv_wc wc[4];
		int n = ibv_poll_cq(s->cq, 4, wc), got = 0;

		if (n < 0)
			die("poll_cq");
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "msg_cpu: %s\n", ibv_wc_status_str(wc[i].status));
				exit(1);
			}
			got += wc[i].opcode == IBV_WC_RECV;
		}
		if (got) {
			post_recv(s);
			return;
		}
		++*empty;
	}
}

static void round_trip(struct side *a, struct side *b, long *empty)
{
	post_send(a);
	wait_recv(b, empty);
	post_send(b);
	wait_recv(a, empty);
}

static int cmp_double(const void *x, const void *y)
{
	double d = *(const double *)x - *(const double *)y;

	return (d > 0) - (d < 0);
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 200000, nc, empty = 0;
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct side a, b;
	double *ct, t0;

	if (!list || !list[0]) {
		fprintf(stderr, "msg_cpu: no RDMA device (run it with uroce run --)\n");
		return 1;
	}
	nc = iters / CHUNK > 0 ? iters / CHUNK : 1;
	if (!(ct = calloc((size_t)nc, sizeof(*ct))))
		die("calloc");
	side_open(&a, list[0]);
	side_open(&b, list[0]);
	side_connect(&a, &b);
	side_connect(&b, &a);
	for (int i = 0; i < DEPTH; i++) {
		post_recv(&a);
		post_recv(&b);
	}
	for (int i = 0; i < WARMUP; i++)
		round_trip(&a, &b, &empty);
	empty = 0;
	t0 = now_ns();
	for (long c = 0; c < nc; c++) {
		double s = now_ns();

		for (int i = 0; i < CHUNK; i++)
			round_trip(&a, &b, &empty);
		ct[c] = (now_ns() - s) / CHUNK / 2;
	}
	t0 = now_ns() - t0;
	qsort(ct, (size_t)nc, sizeof(*ct), cmp_double);
	printf("msg_cpu: oneway_ns=%.1f min_ns=%.1f p10_ns=%.1f median_ns=%.1f "
	       "empty_polls_per_msg=%.3f\n",
	       t0 / (double)(nc * CHUNK) / 2, ct[0], ct[nc / 10], ct[nc / 2],
	       (double)empty / (double)(nc * CHUNK) / 2);
	ibv_free_device_list(list);
	return 0;
}

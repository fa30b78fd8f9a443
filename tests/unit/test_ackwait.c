/* A stream's requester sleeps instead of spinning (uroce_ctx_wait_acks,
 * src/net/endpoint.c): over UDP, a thread that polls only its own CQ while
 * its QP has a window of packets in flight sleeps on its sockets
 * (app_ack_waits counts it), and every WRITE still lands exactly.  A thread
 * that polls the CQs of both contexts (both ends in this process) must not
 * sleep on one while the other's packets wait: its stream completes too. */
#include "rc_harness.h"

#define MSG   65536u
#define NMSG  32u /* 2 MiB a round: eight windows of 256 packets at MTU 4096 */
#define ROUND 4

/* Post NMSG WRITEs of MSG bytes from A's buffer to B's; poll A's send CQ
 * (and B's receive CQ too with both) until all completed. */
static bool stream(struct harness *h, bool both, uint64_t seed)
{
	struct side *a = &h->s[0], *b = &h->s[1];
	struct ibv_send_wr wr[NMSG], *bad;
	struct ibv_sge sge[NMSG];
	struct ibv_wc wc[NMSG];
	uint64_t end = now_ms() + 60000;
	unsigned int got = 0;

	fill_pattern(a->buf, NMSG * MSG, seed);
	memset(b->buf, 0, NMSG * MSG);
	for (unsigned int i = 0; i < NMSG; i++) {
		sge[i] = (struct ibv_sge){
		    .addr = (uintptr_t)(a->buf + i * MSG), .length = MSG, .lkey = a->mr->lkey};
		wr[i] = (struct ibv_send_wr){.wr_id = i,
					     .next = i + 1 < NMSG ? &wr[i + 1] : NULL,
					     .sg_list = &sge[i],
					     .num_sge = 1,
					     .opcode = IBV_WR_RDMA_WRITE,
					     .send_flags = IBV_SEND_SIGNALED};
		wr[i].wr.rdma.remote_addr = (uintptr_t)(b->buf + i * MSG);
		wr[i].wr.rdma.rkey = b->mr->rkey;
	}
	if (ibv_post_send(a->qp, wr, &bad)) {
		CHECK(0, "ibv_post_send: %s", strerror(errno));
		return false;
	}
	while (got < NMSG) {
		int r = ibv_poll_cq(a->scq, (int)(NMSG - got), wc);

		if (r < 0 || now_ms() > end) {
			CHECK(0, "%u of %u WRITEs completed", got, NMSG);
			return false;
		}
		for (int i = 0; i < r; i++)
			CHECK(wc[i].status == IBV_WC_SUCCESS, "WRITE %lu: %s",
			      (unsigned long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
		got += (unsigned int)r;
		if (both && ibv_poll_cq(b->rcq, 1, wc) != 0)
			CHECK(0, "a WRITE without immediate completed at its target");
	}
	CHECK(!memcmp(a->buf, b->buf, NMSG * MSG), "the WRITEs' data differs at the target");
	return true;
}

int main(void)
{
	struct harness h;
	unsigned long waits;

	setvbuf(stdout, NULL, _IOLBF, 0);
	setenv("UROCE_SHM", "0", 1); /* the sleep is for UDP only */
	if (harness_open(&h)) {
		CHECK(0, "harness");
		return finish("test_ackwait");
	}
	{
		struct pair_opts o = default_opts(IBV_MTU_4096);

		if (pair_create(&h, &o)) {
			CHECK(0, "pair");
			harness_close(&h);
			return finish("test_ackwait");
		}
	}
	for (int r = 0; r < ROUND; r++)
		if (!stream(&h, false, 100 + (uint64_t)r))
			break;
	waits = CNT(&h, 0, app_waits);
	printf("requester alone: %lu sleeps on the sockets\n", waits);
	CHECK(waits > 0, "the requester never slept with a window in flight");
	for (int r = 0; r < ROUND; r++)
		if (!stream(&h, true, 200 + (uint64_t)r))
			break;
	printf("both CQs polled: %lu more sleeps\n", CNT(&h, 0, app_waits) - waits);
	harness_close(&h);
	return finish("test_ackwait");
}

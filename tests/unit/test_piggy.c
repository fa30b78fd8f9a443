/* The piggy-backed ACK between uroce peers in native mode (src/transport/
 * req.c piggy_attach, resp.c uroce_resp_piggy_ack, comp.c uroce_rcv_piggy;
 * docs/latency.md "Session 11"):
 *   - a ping-pong of SENDs and of WRITEs (one packet, inline and from
 *     registered memory, and three packets): each side's reply carries the
 *     ACK it owes for the message it answers, and no ACK packet goes out
 *     for it; every message arrives intact, every WR completes;
 *   - the negotiation: with UROCE_ACK_PIGGY=0 on either side (read at RTR)
 *     neither side sends one, every ACK is a packet of its own, as before.
 * Both progress engines are stopped, so only the application's polls read
 * the sockets and send the ACKs they owe; UROCE_SHM=0 keeps the two
 * contexts on UDP.
 */
#include "rc_harness.h"

static struct harness H;
#define A (&H.s[0])
#define B (&H.s[1])

enum { N = 200, SRC = 0, DST = 65536, RDST = 300000 };

static void post(struct side *s, enum ibv_wr_opcode op, uint64_t id, uint32_t len, bool inl,
		 uint8_t v, struct side *peer)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + SRC, .length = len, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0)},
			   *bad;

	memset(s->buf + SRC, v, len);
	if (op == IBV_WR_RDMA_WRITE) {
		wr.wr.rdma.remote_addr = (uintptr_t)peer->buf + RDST;
		wr.wr.rdma.rkey = peer->mr->rkey;
	}
	CHECK(ibv_post_send(s->qp, &wr, &bad) == 0, "post %s %u B", op_name(op), len);
}

static void post_recv1(struct side *s, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + DST, .length = 4096, .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;

	CHECK(ibv_post_recv(s->qp, &wr, &bad) == 0, "post_recv");
}

static bool got_wc(struct ibv_cq *cq, uint64_t id)
{
	struct ibv_wc wc;

	return !wait_wc(cq, &wc, 1, WAIT_MS) && wc.status == IBV_WC_SUCCESS && wc.wr_id == id;
}

/* The message of value v, len bytes, arrived at s (a receive of SEND, or the
 * WRITE's target, polled for as ib_write_lat does, driving s's socket by
 * polling its CQ with 0 entries). */
static bool arrived(struct side *s, enum ibv_wr_opcode op, uint64_t id, uint32_t len, uint8_t v)
{
	uint8_t *p = s->buf + (op == IBV_WR_SEND ? DST : RDST);
	uint64_t end = now_ms() + WAIT_MS;
	struct ibv_wc wc;

	if (op == IBV_WR_SEND)
		return got_wc(s->rcq, id) && p[0] == v && p[len - 1] == v;
	while ((p[0] != v || p[len - 1] != v) && now_ms() < end)
		ibv_poll_cq(s->scq, 0, &wc);
	return p[0] == v && p[len - 1] == v;
}

struct counts {
	unsigned long piggy_tx[2], piggy_rx[2], acks_tx[2];
};

static struct counts counts(void)
{
	struct counts c;

	for (int s = 0; s < 2; s++) {
		c.piggy_tx[s] = CNT(&H, s, piggy_tx);
		c.piggy_rx[s] = CNT(&H, s, piggy_rx);
		c.acks_tx[s] = CNT(&H, s, acks_tx);
	}
	return c;
}

/* n round trips of op: A sends i, B answers i; each reply is posted right
 * after the message it answers arrived, so it finds that message's ACK
 * owed.  The last ACK is sent by polls that find nothing (20 us). */
static bool pingpong(enum ibv_wr_opcode op, uint32_t len, bool inl, int n, uint64_t id0)
{
	bool ok = true;

	for (int i = 0; i < n && ok; i++) {
		uint64_t id = id0 + (uint64_t)i;
		uint8_t v = (uint8_t)(id * 7 + 1);

		if (op == IBV_WR_SEND) {
			post_recv1(B, id);
			post_recv1(A, id);
		}
		post(A, op, id, len, inl, v, B);
		ok = arrived(B, op, id, len, v);
		/* B's previous reply completed on the ACK this message carried */
		ok = ok && (i == 0 || got_wc(B->scq, id - 1));
		post(B, op, id, len, inl, (uint8_t)(v + 1), A);
		ok = ok && arrived(A, op, id, len, (uint8_t)(v + 1)) && got_wc(A->scq, id);
	}
	{
		uint64_t end = now_ms() + WAIT_MS;
		struct ibv_wc wc;
		int r;

		while (ok && (r = ibv_poll_cq(B->scq, 1, &wc)) == 0 && now_ms() < end)
			ibv_poll_cq(A->rcq, 0, &wc); /* A's last ACK: its polls send it */
		ok = ok && r == 1 && wc.status == IBV_WC_SUCCESS &&
		     wc.wr_id == id0 + (uint64_t)n - 1;
	}
	return ok;
}

/* A fresh pair, UROCE_ACK_PIGGY=0 on side plain (-1: none), progress
 * engines stopped, then the ping-pong; what the counters say. */
static void run(enum ibv_wr_opcode op, uint32_t len, bool inl, int plain)
{
	struct counts c0, c1;
	bool ok;

	pair_create(&H, &H.o);
	if (plain >= 0) {
		struct ibv_qp_attr at = {.qp_state = IBV_QPS_RESET};

		setenv("UROCE_ACK_PIGGY", "0", 1);
		CHECK(ibv_modify_qp(H.s[plain].qp, &at, IBV_QP_STATE) == 0 &&
			  qp_connect(&H, plain) == 0,
		      "reconnect with UROCE_ACK_PIGGY=0");
		unsetenv("UROCE_ACK_PIGGY");
	}
	uroce_progress_stop(to_uctx(A->ctx));
	uroce_progress_stop(to_uctx(B->ctx));
	c0 = counts();
	ok = pingpong(op, len, inl, N, 1000);
	c1 = counts();
	CHECK(ok, "%s %u B%s, side %d plain: %d round trips, every message intact and completed",
	      op_name(op), len, inl ? " inline" : "", plain, N);
	for (int s = 0; s < 2; s++) {
		unsigned long tx = c1.piggy_tx[s] - c0.piggy_tx[s],
			      rx = c1.piggy_rx[1 - s] - c0.piggy_rx[1 - s],
			      acks = c1.acks_tx[s] - c0.acks_tx[s];

		if (plain < 0) {
			/* the first reply learns that the peer takes them (B's
			 * first ACK says so; A's first piggy-backed one tells B) */
			CHECK(tx >= N - 2 && rx == tx && acks <= 3,
			      "%s: side %d carried %lu ACKs on requests (%lu taken), sent %lu "
			      "ACK packets",
			      op_name(op), s, tx, rx, acks);
		} else {
			CHECK(tx == 0 && rx == 0 && acks >= N - 1,
			      "%s, side %d plain: side %d carried %lu ACKs on requests, sent %lu "
			      "ACK packets",
			      op_name(op), plain, s, tx, acks);
		}
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	unsetenv("UROCE_FAULT");
	unsetenv("UROCE_ACK_PIGGY");
	setenv("UROCE_SHM", "0", 1);
	if (harness_open(&H)) {
		printf("0 passed, 1 failed\n");
		return 1;
	}
	H.o = default_opts(IBV_MTU_1024);
	run(IBV_WR_SEND, 8, true, -1);
	run(IBV_WR_SEND, 8, false, -1);
	run(IBV_WR_SEND, 3000, false, -1);
	run(IBV_WR_RDMA_WRITE, 8, true, -1);
	run(IBV_WR_RDMA_WRITE, 3000, false, -1);
	run(IBV_WR_SEND, 8, true, 0);
	run(IBV_WR_SEND, 8, true, 1);
	run(IBV_WR_RDMA_WRITE, 8, true, 1);
	harness_close(&H);
	return finish("test_piggy");
}

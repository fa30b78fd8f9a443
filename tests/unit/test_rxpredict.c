/* Read prediction on the UDP path (src/net/endpoint.c, rx_read): after a
 * few reads of one datagram each, an endpoint is read with recvmsg, one
 * datagram per look.  Nothing may be left behind for a thread that is not
 * coming:
 *   - a lone ACK is followed by another look: a requester that completes on
 *     it and then makes no verbs call still has the request that came in
 *     the next datagram (ib_write_lat's pattern: the peer's owed ACK
 *     flushed on its own, then its WRITE);
 *   - a datagram that completes nothing (a WRITE's first packet) is
 *     followed by another look: one poll places a whole WRITE;
 *   - a stream that starts after a ping-pong (mostly unsignaled SENDs)
 *     completes, every message intact.
 * And the plain read (rx_plain): once predicting, the address socket
 * turns UDP_GRO off and is read with recvfrom; a GSO send of several
 * packets then arrives as single datagrams, whole, and turns UDP_GRO on
 * again, as does a burst read several datagrams at a time.
 * Both progress engines are stopped, so only the application's polls read
 * the sockets; UROCE_SHM=0 keeps the two contexts on UDP.
 */
#include <netinet/udp.h>
#include <poll.h>

#include "rc_harness.h"

static struct harness H;
#define A (&H.s[0])
#define B (&H.s[1])

static void post_send1(struct side *s, uint64_t id, uint32_t off, uint32_t len, bool signaled)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + off, .length = len, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = signaled ? IBV_SEND_SIGNALED : 0},
			   *bad;

	CHECK(ibv_post_send(s->qp, &wr, &bad) == 0, "post_send");
}

static void post_recv1(struct side *s, uint64_t id, uint32_t off)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + off, .length = 4096, .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;

	CHECK(ibv_post_recv(s->qp, &wr, &bad) == 0, "post_recv");
}

/* A signaled WRITE of len bytes of value v from s->buf + off to dst. */
static void post_write(struct side *s, uint64_t id, uint32_t off, uint8_t v, uint32_t len,
		       uint8_t *dst, uint32_t rkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + off, .length = len, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	memset(s->buf + off, v, len);
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = rkey;
	CHECK(ibv_post_send(s->qp, &wr, &bad) == 0, "post a WRITE of %u bytes", len);
}

static bool got_wc(struct ibv_cq *cq, uint64_t id, const char *what)
{
	struct ibv_wc wc;

	if (wait_wc(cq, &wc, 1, WAIT_MS)) {
		printf("  %s: no completion in %d ms\n", what, WAIT_MS);
		return false;
	}
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id) {
		printf("  %s: %s, wr_id %llu (want %llu)\n", what, ibv_wc_status_str(wc.status),
		       (unsigned long long)wc.wr_id, (unsigned long long)id);
		return false;
	}
	return true;
}

/* Poll cq for wr_id id, polling other (0 entries: its socket, and after
 * 20 us the ACKs it owes) in between. */
static bool got_wc2(struct ibv_cq *cq, struct ibv_cq *other, uint64_t id, const char *what)
{
	uint64_t end = now_ms() + WAIT_MS;
	struct ibv_wc wc;
	int r;

	while ((r = ibv_poll_cq(cq, 1, &wc)) == 0 && now_ms() < end)
		ibv_poll_cq(other, 0, &wc);
	if (r != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != id) {
		printf("  %s: %s\n", what, r == 1 ? ibv_wc_status_str(wc.status) : "no completion");
		return false;
	}
	return true;
}

/* A ping-pong of n SENDs: every read of either socket finds one datagram
 * (the reply and the ACK it carries), so both endpoints predict. */
static void pingpong(uint64_t id0, int n)
{
	for (int i = 0; i < n; i++) {
		uint64_t id = id0 + (uint64_t)i;

		post_recv1(B, id, 65536);
		post_recv1(A, id, 65536);
		post_send1(A, id, 0, 8, true);
		CHECK(got_wc(B->rcq, id, "B receives the ping"), "ping %llu",
		      (unsigned long long)id);
		post_send1(B, id, 0, 8, true);
		CHECK(got_wc(A->scq, id, "A's ping completes"), "ping ACK %llu",
		      (unsigned long long)id);
		CHECK(got_wc(A->rcq, id, "A receives the pong"), "pong %llu",
		      (unsigned long long)id);
		CHECK(got_wc2(B->scq, A->rcq, id, "B's pong completes"), "pong ACK %llu",
		      (unsigned long long)id);
	}
}

/* Wait until fd has something to read, then a little longer (a loopback
 * send is delivered inside the sender's system call, or by ksoftirqd soon
 * after). */
static void settle(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	CHECK(poll(&p, 1, WAIT_MS) == 1, "the socket becomes readable");
	usleep(50 * 1000);
}

/* UDP_GRO on the endpoint's address socket (1 on, 0 off) */
static int gro_of(struct side *s)
{
	struct uroce_ep *ep = to_uctx(s->ctx)->ep[0];
	int v = -1;
	socklen_t l = sizeof(v);

	if (ep->fd_any < 0 || getsockopt(ep->fd, SOL_UDP, UDP_GRO, &v, &l))
		return -1;
	return v;
}

static void test_lone_ack(void)
{
	struct uroce_ctx *actx = to_uctx(A->ctx);
	struct ibv_wc wc;
	uint8_t *dst = A->buf + 200000;
	uint64_t end;

	pair_create(&H, &H.o);
	uroce_progress_stop(actx);
	uroce_progress_stop(to_uctx(B->ctx));
	pingpong(1, 40);

	/* B receives A's SEND in its poll and owes the ACK ... */
	post_recv1(B, 100, 65536);
	post_send1(A, 100, 0, 8, true);
	CHECK(got_wc(B->rcq, 100, "B receives"), "B receives SEND 100");
	/* ... which its empty polls send on its own (20 us) */
	end = now_ms() + 5;
	while (now_ms() < end)
		CHECK(ibv_poll_cq(B->rcq, 1, &wc) == 0, "B's CQ is empty");
	/* then B's WRITE into A's memory: a datagram after the lone ACK */
	memset(dst, 0, 64);
	post_write(B, 101, 300000, 0x5a, 64, dst, A->mr->rkey);
	settle(actx->ep[0]->fd);

	/* A completes its SEND on the ACK and calls no verb after that: the
	 * WRITE behind the ACK must have been read by that same poll */
	CHECK(got_wc(A->scq, 100, "A's SEND completes"), "A completes on the lone ACK");
	CHECK(dst[0] == 0x5a && dst[63] == 0x5a, "the WRITE behind the ACK landed (%02x %02x)",
	      dst[0], dst[63]);
	CHECK(got_wc2(B->scq, A->rcq, 101, "B's WRITE completes"), "B's WRITE completes");
}

/* A WRITE of 3 packets queued at a predicting endpoint: they complete
 * nothing there, so the one poll that reads the first reads them all (the
 * application may look at the memory next and poll nothing more). */
static void test_write_no_completion(void)
{
	struct uroce_ctx *bctx = to_uctx(B->ctx);
	struct ibv_wc wc;
	uint8_t *dst = B->buf + 400000;

	pair_create(&H, &H.o);
	uroce_progress_stop(to_uctx(A->ctx));
	uroce_progress_stop(bctx);
	uint64_t gro0;

	pingpong(2000, 20);
	/* the plain read: predicting, B's address socket turns UDP_GRO off
	 * (a try fails while a datagram is queued: a few more rounds) */
	for (int i = 0; i < 50 && gro_of(B) == 1; i++)
		pingpong(2020 + (uint64_t)i * 10, 10);
	if (bctx->ep[0]->fd_any >= 0) {
		CHECK(gro_of(B) == 0, "UDP_GRO is off on B's address socket (%d)", gro_of(B));
		CHECK(CNT(&H, 1, rx_plain_on) > 0, "B switched to plain reads");
	}
	gro0 = CNT(&H, 1, rx_gro);
	memset(dst, 0, 3072);
	post_write(A, 2100, 500000, 0x3c, 3072, dst, B->mr->rkey);
	settle(bctx->ep[0]->fd);
	CHECK(ibv_poll_cq(B->rcq, 1, &wc) == 0, "B's CQ stays empty");
	CHECK(dst[0] == 0x3c && dst[1024] == 0x3c && dst[3071] == 0x3c,
	      "one poll placed the whole WRITE (%02x %02x %02x)", dst[0], dst[1024], dst[3071]);
	/* A's 3 packets left in one GSO send: with UDP_GRO off the kernel
	 * cut it before B's socket, so B read no batch; a segment that came
	 * alone is a stream starting: the next read turns UDP_GRO on again */
	CHECK(CNT(&H, 1, rx_gro) == gro0, "no GRO batch read with UDP_GRO off (%llu)",
	      (unsigned long long)(CNT(&H, 1, rx_gro) - gro0));
	ibv_poll_cq(B->rcq, 0, &wc);
	if (bctx->ep[0]->fd_any >= 0)
		CHECK(gro_of(B) == 1, "UDP_GRO is on after the cut GSO send (%d)", gro_of(B));
	CHECK(got_wc2(A->scq, B->rcq, 2100, "A's WRITE completes"), "A's WRITE completes");
}

/* After a ping-pong, a stream of 512 SENDs, one in 64 signaled, each from
 * its own source bytes (a SEND may leave from registered memory). */
static void test_stream_after_pingpong(void)
{
	enum { N = 512, EVERY = 64, LEN = 1000, NRECV = 128, SRC = 1000000 };
	int posted = 0, got = 0, signaled = 0, bad = 0;
	uint64_t end;

	pair_create(&H, &H.o);
	uroce_progress_stop(to_uctx(A->ctx));
	uroce_progress_stop(to_uctx(B->ctx));
	pingpong(1000, 20);
	for (int i = 0; i < NRECV; i++)
		post_recv1(B, (uint64_t)i, 65536u + (uint32_t)i * 4096u);
	for (int i = 0; i < N; i++)
		memset(A->buf + SRC + (uint32_t)i * 1024u, (uint8_t)(i + 1), LEN);
	end = now_ms() + WAIT_MS;
	while (!bad && got < N && now_ms() < end) {
		struct ibv_wc wc;

		/* at most NRECV ahead of the receiver, one signaled SEND open */
		if (posted < N && posted - got < NRECV && posted / EVERY <= signaled) {
			post_send1(A, (uint64_t)posted, SRC + (uint32_t)posted * 1024u, LEN,
				   (posted + 1) % EVERY == 0);
			posted++;
		}
		if (ibv_poll_cq(B->rcq, 1, &wc) == 1) {
			uint32_t slot = (uint32_t)(wc.wr_id % NRECV);
			uint8_t *p = B->buf + 65536u + slot * 4096u;

			bad += wc.status != IBV_WC_SUCCESS || wc.byte_len != LEN ||
			       p[0] != (uint8_t)(got + 1) || p[LEN - 1] != (uint8_t)(got + 1);
			got++;
			post_recv1(B, wc.wr_id, 65536u + slot * 4096u);
		}
		if (ibv_poll_cq(A->scq, 1, &wc) == 1) {
			bad += wc.status != IBV_WC_SUCCESS ||
			       wc.wr_id != (uint64_t)(signaled * EVERY + EVERY - 1);
			signaled++;
		}
	}
	CHECK(!bad && got == N, "stream after a ping-pong: %d of %d received, %d bad", got, N, bad);
	end = now_ms() + WAIT_MS;
	while (!bad && signaled < N / EVERY && now_ms() < end) {
		struct ibv_wc wc;

		if (ibv_poll_cq(A->scq, 1, &wc) == 1)
			signaled++;
		ibv_poll_cq(B->rcq, 0, &wc);
	}
	CHECK(signaled == N / EVERY, "every signaled SEND completes: %d of %d", signaled,
	      N / EVERY);
}

/* A burst after a ping-pong: 100 SENDs queued at B before it polls.  A
 * read that returns several datagrams ends B's prediction, and with it the
 * plain reads: UDP_GRO is on again, every message intact. */
static void test_burst_gro_on(void)
{
	enum { N = 100, LEN = 600 };
	int got = 0, bad = 0;
	uint64_t end;

	pair_create(&H, &H.o);
	uroce_progress_stop(to_uctx(A->ctx));
	uroce_progress_stop(to_uctx(B->ctx));
	pingpong(3000, 20);
	for (int i = 0; i < 50 && gro_of(B) == 1; i++)
		pingpong(3020 + (uint64_t)i * 10, 10);
	if (to_uctx(B->ctx)->ep[0]->fd_any < 0)
		return; /* no address socket (UROCE_ADDR_SOCK=0): nothing to check */
	CHECK(gro_of(B) == 0, "UDP_GRO is off on B's address socket (%d)", gro_of(B));
	for (int i = 0; i < N; i++) {
		post_recv1(B, (uint64_t)i, 65536u + (uint32_t)i * 1024u);
		memset(A->buf + 100000u + (uint32_t)i * 1024u, (uint8_t)(i + 7), LEN);
		post_send1(A, (uint64_t)i, 100000u + (uint32_t)i * 1024u, LEN, i == N - 1);
	}
	settle(to_uctx(B->ctx)->ep[0]->fd);
	end = now_ms() + WAIT_MS;
	while (got < N && now_ms() < end) {
		struct ibv_wc wc;

		ibv_poll_cq(A->scq, 0, &wc); /* A's ACKs: its window moves */
		if (ibv_poll_cq(B->rcq, 1, &wc) != 1)
			continue;
		bad += wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)got ||
		       wc.byte_len != LEN ||
		       B->buf[65536u + (uint32_t)got * 1024u] != (uint8_t)(got + 7);
		got++;
	}
	CHECK(!bad && got == N, "burst after a ping-pong: %d of %d received, %d bad", got, N, bad);
	CHECK(gro_of(B) == 1, "UDP_GRO is on again after the burst (%d)", gro_of(B));
	CHECK(got_wc2(A->scq, B->rcq, N - 1, "A's last SEND completes"), "the burst completes");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	unsetenv("UROCE_FAULT");
	setenv("UROCE_SHM", "0", 1);
	if (harness_open(&H)) {
		printf("0 passed, 1 failed\n");
		return 1;
	}
	H.o = default_opts(IBV_MTU_1024);
	test_lone_ack();
	test_write_no_completion();
	test_stream_after_pingpong();
	/* new contexts: the cut GSO send above holds B's plain reads off */
	harness_close(&H);
	if (harness_open(&H)) {
		printf("0 passed, 1 failed\n");
		return 1;
	}
	H.o = default_opts(IBV_MTU_1024);
	test_burst_gro_on();
	harness_close(&H);
	return finish("test_rxpredict");
}

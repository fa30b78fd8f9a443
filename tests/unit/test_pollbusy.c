/* The progress thread woken by a socket that another thread is reading
 * (busy_wait, src/core/progress.c).  Its epoll_wait is level-triggered: a
 * datagram stays reported until the reader has read it, and a thread that
 * went straight back to epoll_wait after its failed trylock woke for it
 * again and again (5-19 times per ACK in a stream).  Here the test holds
 * the target's receive path (every endpoint's rx_lock, as an application
 * in ibv_poll_cq does) while the peer's WRITE waits in the socket: the
 * thread must keep away one 200 us gap per wake-up (at most 500 in 100 ms,
 * where a spinning thread makes tens of thousands), report -EBUSY through
 * uroce_ep_poll_woken, and serve the WRITE once the lock is released. */
#include "rc_harness.h"

#define LEN	  8192u
#define HOLD_MS	  100u
#define MAX_WAKES 1000u /* HOLD_MS / 200 us = 500, and slack */

static void hold(struct uroce_ctx *c, bool on)
{
	int nep = atomic_load(&c->nep);

	for (int i = 0; i < nep; i++) {
		if (on)
			pthread_mutex_lock(&c->ep[i]->rx_lock);
		else
			pthread_mutex_unlock(&c->ep[i]->rx_lock);
	}
}

int main(void)
{
	struct harness h;
	struct pair_opts o = default_opts(IBV_MTU_1024);
	struct ibv_sge sge;
	struct ibv_send_wr wr = {0}, *bad;
	struct ibv_wc wc;
	struct uroce_ctx *t;
	uint64_t w0, b0, w1, b1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	setenv("UROCE_SHM", "0", 1); /* the UDP socket path */
	if (harness_open(&h)) {
		CHECK(0, "harness");
		return finish("test_pollbusy");
	}
	if (pair_create(&h, &o)) {
		CHECK(0, "pair");
		harness_close(&h);
		return finish("test_pollbusy");
	}
	t = to_uctx(h.s[0].ctx);
	fill_pattern(h.s[1].buf, LEN, 7);
	memset(h.s[0].buf, 0, LEN);

	hold(t, true);
	CHECK(uroce_ep_poll_woken(t->ep[0], 16) == -EBUSY,
	      "uroce_ep_poll_woken on a held endpoint did not say -EBUSY");
	CHECK(uroce_ep_poll(t->ep[0], 16) == 0, "uroce_ep_poll on a held endpoint read something");
	w0 = CNT(&h, 0, prog_wakeups);
	b0 = CNT(&h, 0, prog_busy_waits);
	sge =
	    (struct ibv_sge){.addr = (uintptr_t)h.s[1].buf, .length = LEN, .lkey = h.s[1].mr->lkey};
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)h.s[0].buf;
	wr.wr.rdma.rkey = h.s[0].mr->rkey;
	CHECK(!ibv_post_send(h.s[1].qp, &wr, &bad), "ibv_post_send: %s", strerror(errno));
	usleep(HOLD_MS * 1000);
	w1 = CNT(&h, 0, prog_wakeups);
	b1 = CNT(&h, 0, prog_busy_waits);
	hold(t, false);

	printf("held %u ms: %lu wake-ups, %lu busy waits\n", HOLD_MS, (unsigned long)(w1 - w0),
	       (unsigned long)(b1 - b0));
	CHECK(b1 > b0, "the thread never found the endpoint busy (did the WRITE arrive?)");
	CHECK(w1 - w0 < MAX_WAKES, "the thread woke %lu times in %u ms for one unread datagram",
	      (unsigned long)(w1 - w0), HOLD_MS);
	/* released: the target's thread serves the WRITE and ACKs it */
	CHECK(wait_wc(h.s[1].scq, &wc, 1, 30000) == 0, "the WRITE did not complete");
	CHECK(wc.status == IBV_WC_SUCCESS, "WRITE: %s", ibv_wc_status_str(wc.status));
	CHECK(!memcmp(h.s[0].buf, h.s[1].buf, LEN), "the WRITE's data differs at the target");
	harness_close(&h);
	return finish("test_pollbusy");
}

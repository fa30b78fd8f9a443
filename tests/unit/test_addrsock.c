/* The address socket (src/net/endpoint.c, addr_sock_open): on a device with
 * one IPv4 address an endpoint reads and sends on a socket bound to that
 * address, beside its wildcard socket on the same port.
 *   - the port stays the endpoint's alone: no other socket binds it, on the
 *     wildcard or on the address, with or without SO_REUSEADDR;
 *   - traffic to the device's address works with the application polling
 *     alone (both progress threads stopped);
 *   - traffic that reaches the port at another local address (127.0.0.2)
 *     comes in through the wildcard socket: with the progress threads
 *     stopped (the application's polls read it too) and running, and
 *     READs served by a progress thread that each one wakes;
 *   - UROCE_ADDR_SOCK=0 has no address socket (checked in a child process);
 *   - a QP the pacer holds back (loss mode, its schedule 10 s ahead) still
 *     sends a message at once when nothing is in flight: a request/response
 *     stream never waits for a progress-thread wake-up (src/transport/req.c;
 *     loss mode comes from host delay alone on a loaded machine).
 * UROCE_SHM=0 keeps the two contexts on UDP.
 */
#include <arpa/inet.h>
#include <sys/wait.h>

#include "rc_harness.h"
#include "transport/rc.h"

static struct harness H;
#define A (&H.s[0])
#define B (&H.s[1])

static void post_send1(struct side *s, uint64_t id, uint32_t len)
{
	memset(s->buf, (int)(id & 0xff), len);
	CHECK(!harness_send1(s, id, len), "post_send");
}

static void post_recv1(struct side *s, uint64_t id)
{
	CHECK(!harness_recv1(s, id, 65536), "post_recv");
}

/* A completion for id on cq, polling other (0 entries) in between. */
static bool got(struct ibv_cq *cq, struct ibv_cq *other, uint64_t id)
{
	uint64_t end = now_ms() + WAIT_MS;
	struct ibv_wc wc;
	int r;

	while ((r = ibv_poll_cq(cq, 1, &wc)) == 0 && now_ms() < end)
		ibv_poll_cq(other, 0, &wc);
	return r == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == id;
}

/* n SENDs each way, each one received intact */
static void pingpong(uint64_t id0, int n, const char *what)
{
	int ok = 0;

	for (int i = 0; i < n; i++) {
		uint64_t id = id0 + (uint64_t)i;

		post_recv1(B, id);
		post_recv1(A, id);
		post_send1(A, id, 16);
		if (!got(B->rcq, A->scq, id) || B->buf[65536 + 15] != (uint8_t)id)
			break;
		post_send1(B, id, 16);
		if (!got(A->rcq, B->scq, id) || !got(A->scq, B->rcq, id) ||
		    !got(B->scq, A->rcq, id))
			break;
		ok++;
	}
	CHECK(ok == n, "%s: %d of %d round trips", what, ok, n);
}

/* n READs from B's buffer, B's application polling nothing: B's progress
 * thread, asleep between them, is woken by the socket the request came in
 * on and must read that one (endpoint.c, EP_EV_ANY: a wake-up reads the
 * wildcard socket only when its event says so) */
static void reads_unpolled(int n, const char *what)
{
	int ok = 0;

	for (int i = 0; i < n; i++) {
		struct ibv_wc wc;

		usleep(5000); /* past B's spin and any grace: B's thread sleeps */
		memset(B->buf + REMOTE_BASE, i + 1, 64);
		if (harness_read1(A, B, 1000u + (unsigned)i, 64) || wait_wc(A->scq, &wc, 1, 5000) ||
		    wc.status != IBV_WC_SUCCESS || A->buf[LOCAL_BASE + 63] != (uint8_t)(i + 1))
			break;
		ok++;
	}
	CHECK(ok == n, "%s: %d of %d READs", what, ok, n);
}

/* Both QPs in loss mode with their pacers 10 s ahead, progress threads
 * stopped: every message has nothing in flight when it is posted. */
static void paced_idle(int n)
{
	for (int i = 0; i < 2; i++) {
		struct uroce_qp *q = to_uqp(H.s[i].qp);

		if (!q->sk || !q->sk->cc) {
			printf("SKIP: no selective repeat or congestion control on the pair\n");
			return;
		}
		q->sk->loss_mode = true;
		q->sk->loss_frac_on = false;
		q->sk->pace_ns = uroce_now_ns() + 10000000000ull;
		CHECK(uroce_cc_pacing(q) && !uroce_cc_pace_ok(q, uroce_now_ns()),
		      "side %d: the pacer holds the QP back", i);
		q->req.wake_ns = 0; /* the wake-up armed above (no thread to serve it) */
	}
	pingpong(300, n, "paced, nothing in flight, application polls only");
}

static struct uroce_ep *ep_of(struct side *s)
{
	return to_uqp(s->qp)->ep;
}

/* Another socket cannot bind the endpoint's port at addr */
static void check_exclusive(uint16_t port, in_addr_t addr, bool reuse)
{
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(addr)};
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1, r;

	if (reuse)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	CHECK(r < 0 && errno == EADDRINUSE, "port %u at 0x%08x%s is the endpoint's (bind: %s)",
	      port, addr, reuse ? " with SO_REUSEADDR" : "", r ? strerror(errno) : "succeeded");
	close(fd);
}

static void set_gid_v4(union ibv_gid *g, const char *a)
{
	struct in_addr v;

	inet_pton(AF_INET, a, &v);
	memset(g, 0, sizeof(*g));
	g->raw[10] = g->raw[11] = 0xff;
	memcpy(&g->raw[12], &v, 4);
}

int main(int argc, char **argv)
{
	struct uroce_ep *ep;
	int st = -1;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	unsetenv("UROCE_FAULT");
	setenv("UROCE_SHM", "0", 1);
	if (argc > 1 && !strcmp(argv[1], "off")) { /* the child below */
		if (harness_open(&H) || pair_create(&H, (H.o = default_opts(IBV_MTU_1024), &H.o)))
			return 2;
		return ep_of(A)->fd_any < 0 ? 0 : 1;
	}
	if (harness_open(&H) || pair_create(&H, (H.o = default_opts(IBV_MTU_1024), &H.o))) {
		printf("0 passed, 1 failed\n");
		return 1;
	}
	ep = ep_of(A);
	if (ep->fd_any < 0) {
		/* lo with a second IPv4 address: the wildcard socket alone */
		printf("SKIP: uroce_lo has no address socket (more than one IPv4 address?)\n");
		harness_close(&H);
		return finish("test_addrsock");
	}
	CHECK(ep->fast_addr.s_addr == htonl(INADDR_LOOPBACK), "the address socket is 127.0.0.1's");
	for (int r = 0; r < 2; r++) {
		check_exclusive(ep->port, INADDR_ANY, r);
		check_exclusive(ep->port, INADDR_LOOPBACK, r);
	}

	uroce_progress_stop(to_uctx(A->ctx));
	uroce_progress_stop(to_uctx(B->ctx));
	pingpong(1, 50, "to 127.0.0.1, application polls only");
	CHECK(CNT(&H, 1, rx_pkts) >= 100, "B read the ping-pong");
	paced_idle(10);

	/* both sides send to 127.0.0.2: each reads on its wildcard socket */
	set_gid_v4(&H.gid, "127.0.0.2");
	CHECK(!pair_create(&H, &H.o), "a pair addressed to 127.0.0.2");
	uroce_progress_stop(to_uctx(A->ctx));
	uroce_progress_stop(to_uctx(B->ctx));
	pingpong(100, 50, "to 127.0.0.2, application polls only");
	uroce_progress_start(to_uctx(A->ctx));
	uroce_progress_start(to_uctx(B->ctx));
	pingpong(200, 50, "to 127.0.0.2, progress threads running");
	{
		uint64_t w = CNT(&H, 1, prog_wakeups);

		reads_unpolled(10, "to 127.0.0.2, B's application not polling");
		w = CNT(&H, 1, prog_wakeups) - w;
		/* (one that read the address socket alone came back, level-
		 * triggered, until a 32nd read the wildcard one: 202 for 10) */
		CHECK(w >= 10 && w <= 30, "B's thread woken about once per READ: %llu times",
		      (unsigned long long)w);
	}
	harness_close(&H);

	/* UROCE_ADDR_SOCK=0: the wildcard socket alone */
	pid = fork();
	if (pid == 0) {
		setenv("UROCE_ADDR_SOCK", "0", 1);
		execl("/proc/self/exe", argv[0], "off", (char *)NULL);
		_exit(3);
	}
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "UROCE_ADDR_SOCK=0: no address socket (child status %d)", st);
	return finish("test_addrsock");
}

/* rdma_cm failure scenarios for tests/integration/cm_fail.sh: an ordinary
 * librdmacm program (linked to the build's librdmacm.so.1 and
 * libibverbs.so.1).  Each mode prints what happened and how long it took
 * ("EVENT <name> status <n> after <ms> ms") and exits 0 when the outcome is
 * the one librdmacm promises; the script checks the lines.
 *
 *   noserver PORT          connect to 127.0.0.1:PORT where nobody listens:
 *                          REJECTED or UNREACHABLE
 *   diehalf PORT           listen; on the first CONNECT_REQUEST die by SIGKILL
 *   connect PORT           connect (no accept will come): REJECTED/UNREACHABLE
 *   serve PORT             listen, accept one RC connection with a QP, print
 *                          READY, then wait (to be killed)
 *   survive PORT PID       connect; once ESTABLISHED SIGKILL PID (the server),
 *                          post sends until one completes in error, then
 *                          rdma_disconnect and wait for DISCONNECTED
 *   destroyblock PORT      rdma_destroy_id of an id whose event is not acked
 *                          blocks until the ack
 *   acceptor PORT N        accept N connections one after another, destroy
 *                          each on DISCONNECTED but keep the first until its
 *                          TIMEWAIT_EXIT; RSS and open fds must not grow
 *   cycles PORT N          N times: connect, ESTABLISHED, rdma_disconnect,
 *                          DISCONNECTED, destroy (the first waits for
 *                          TIMEWAIT_EXIT); RSS and open fds must not grow
 *   ipv6                   an IPv6 address is refused with EAFNOSUPPORT
 *   rsocket                rsocket() fails with ENOSYS
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#define WAIT_MS 60000

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what)
{
	fprintf(stderr, "cm_fail: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* The next event on ch within WAIT_MS, or exit. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;

	if (poll(&p, 1, WAIT_MS) != 1) {
		fprintf(stderr, "cm_fail: no event within %d ms\n", WAIT_MS);
		exit(3);
	}
	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event");
	return ev;
}

static enum rdma_cm_event_type expect(struct rdma_event_channel *ch, enum rdma_cm_event_type t,
				      double t0)
{
	struct rdma_cm_event *ev = next_event(ch);
	enum rdma_cm_event_type got = ev->event;

	printf("EVENT %s status %d after %.0f ms\n", rdma_event_str(got), ev->status,
	       now_ms() - t0);
	fflush(stdout);
	rdma_ack_cm_event(ev);
	if ((int)t >= 0 && got != t) {
		fprintf(stderr, "cm_fail: expected %s\n", rdma_event_str(t));
		exit(4);
	}
	return got;
}

static struct sockaddr_in addr(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static void make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = {
	    .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC,
	    .sq_sig_all = 1};

	if (rdma_create_qp(id, NULL, &qa))
		die("rdma_create_qp");
}

/* Resolve, create a QP, connect: the id, its channel in *ch. */
static struct rdma_cm_id *start_connect(int port, struct rdma_event_channel **ch)
{
	struct sockaddr_in dst = addr(port);
	struct rdma_conn_param cp = {.retry_count = 3, .rnr_retry_count = 3};
	struct rdma_cm_id *id;

	*ch = rdma_create_event_channel();
	if (!*ch || rdma_create_id(*ch, &id, NULL, RDMA_PS_TCP))
		die("create");
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
		die("rdma_resolve_addr");
	expect(*ch, RDMA_CM_EVENT_ADDR_RESOLVED, now_ms());
	if (rdma_resolve_route(id, 2000))
		die("rdma_resolve_route");
	expect(*ch, RDMA_CM_EVENT_ROUTE_RESOLVED, now_ms());
	make_qp(id);
	if (rdma_connect(id, &cp))
		die("rdma_connect");
	return id;
}

static int refused(int port)
{
	struct rdma_event_channel *ch;
	double t0 = now_ms();
	struct rdma_cm_id *id = start_connect(port, &ch);
	enum rdma_cm_event_type t = expect(ch, (enum rdma_cm_event_type) - 1, t0);

	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return t == RDMA_CM_EVENT_REJECTED || t == RDMA_CM_EVENT_UNREACHABLE ? 0 : 5;
}

static struct rdma_cm_id *listen_on(int port, struct rdma_event_channel **ch)
{
	struct sockaddr_in a = addr(port);
	struct rdma_cm_id *l;

	*ch = rdma_create_event_channel();
	if (!*ch || rdma_create_id(*ch, &l, NULL, RDMA_PS_TCP))
		die("create");
	if (rdma_bind_addr(l, (struct sockaddr *)&a) || rdma_listen(l, 8))
		die("listen");
	printf("LISTENING\n");
	fflush(stdout);
	return l;
}

static int diehalf(int port)
{
	struct rdma_event_channel *ch;

	listen_on(port, &ch);
	expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, now_ms());
	raise(SIGKILL);
	return 1;
}

static int serve(int port)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = {.rnr_retry_count = 3};

	listen_on(port, &ch);
	ev = next_event(ch);
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		return 6;
	make_qp(ev->id);
	if (rdma_accept(ev->id, &cp))
		die("rdma_accept");
	rdma_ack_cm_event(ev);
	expect(ch, RDMA_CM_EVENT_ESTABLISHED, now_ms());
	printf("READY\n");
	fflush(stdout);
	for (;;)
		pause();
}

static int survive(int port, pid_t peer)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id = start_connect(port, &ch);
	static char buf[64];
	struct ibv_mr *mr;
	struct ibv_wc wc;
	double t0, deadline;
	int n, sent = 0;

	expect(ch, RDMA_CM_EVENT_ESTABLISHED, now_ms());
	mr = ibv_reg_mr(id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	if (kill(peer, SIGKILL))
		die("kill");
	t0 = now_ms();
	deadline = t0 + WAIT_MS;
	for (;;) {
		struct ibv_sge sge = {
		    .addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = mr->lkey};
		struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND},
				   *bad;

		if (sent < 4 && !ibv_post_send(id->qp, &wr, &bad))
			sent++;
		n = ibv_poll_cq(id->send_cq, 1, &wc);
		if (n == 1 && wc.status != IBV_WC_SUCCESS)
			break;
		if (n == 1)
			sent--;
		if (now_ms() > deadline) {
			fprintf(stderr, "cm_fail: no error completion\n");
			return 7;
		}
		usleep(1000);
	}
	printf("ERROR_COMPLETION %s after %.0f ms\n", ibv_wc_status_str(wc.status), now_ms() - t0);
	fflush(stdout);
	t0 = now_ms();
	if (rdma_disconnect(id))
		die("rdma_disconnect");
	expect(ch, RDMA_CM_EVENT_DISCONNECTED, t0);
	rdma_destroy_qp(id);
	ibv_dereg_mr(mr);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

static volatile int destroyed;

static void *destroyer(void *id)
{
	rdma_destroy_id(id);
	__atomic_store_n(&destroyed, 1, __ATOMIC_RELEASE);
	return NULL;
}

static int destroyblock(int port)
{
	struct sockaddr_in dst = addr(port);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	pthread_t t;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		die("create");
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
		die("rdma_resolve_addr");
	ev = next_event(ch); /* ADDR_RESOLVED, not acknowledged yet */
	pthread_create(&t, NULL, destroyer, id);
	usleep(300000);
	if (__atomic_load_n(&destroyed, __ATOMIC_ACQUIRE)) {
		fprintf(stderr, "cm_fail: rdma_destroy_id returned with an event unacknowledged\n");
		return 8;
	}
	printf("BLOCKED while the event is unacknowledged\n");
	rdma_ack_cm_event(ev);
	pthread_join(t, NULL);
	printf("DESTROYED after the ack\n");
	rdma_destroy_event_channel(ch);
	return 0;
}

/* ---- connect/disconnect cycles: TIME_WAIT must not leak ---- */
#define CYCLES_WARM	  50	      /* cycles before the reference sample */
#define CYCLES_MAX_GROWTH (16l << 20) /* bytes of RSS a leak-free run stays under */

static long rss_bytes(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f || fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = 0;
	if (f)
		fclose(f);
	return rss * sysconf(_SC_PAGESIZE);
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

struct growth {
	long rss;
	int fds;
};

static void sample(struct growth *g)
{
	g->rss = rss_bytes();
	g->fds = open_fds();
}

/* 0 when neither RSS nor the number of open fds grew since ref */
static int bounded(const char *who, int n, const struct growth *ref)
{
	struct growth now;

	sample(&now);
	printf("%s: %d cycles; after cycle %d: RSS %ld KiB, %d fds; at the end: RSS %ld KiB, "
	       "%d fds\n",
	       who, n, CYCLES_WARM, ref->rss >> 10, ref->fds, now.rss >> 10, now.fds);
	if (now.fds > ref->fds || now.rss - ref->rss > CYCLES_MAX_GROWTH) {
		fprintf(stderr, "cm_fail: %s: resources grew with the cycles\n", who);
		return 11;
	}
	return 0;
}

static int acceptor(int port, int n)
{
	struct rdma_conn_param cp = {.rnr_retry_count = 3};
	struct rdma_cm_id *first = NULL;
	struct rdma_event_channel *ch;
	struct growth ref = {0};
	int done = 0, tw_exit = 0;
	double t_first = 0;

	listen_on(port, &ch);
	while (done < n || !tw_exit) {
		struct rdma_cm_event *ev = next_event(ch);
		struct rdma_cm_id *id = ev->id;
		enum rdma_cm_event_type t = ev->event;

		if (t == RDMA_CM_EVENT_CONNECT_REQUEST) {
			make_qp(id);
			if (rdma_accept(id, &cp))
				die("rdma_accept");
		}
		rdma_ack_cm_event(ev);
		if (t == RDMA_CM_EVENT_DISCONNECTED) {
			if (++done == CYCLES_WARM)
				sample(&ref);
			if (!first) {
				first = id; /* kept until its TIME_WAIT ends */
				t_first = now_ms();
				continue;
			}
			rdma_destroy_qp(id);
			rdma_destroy_id(id);
		} else if (t == RDMA_CM_EVENT_TIMEWAIT_EXIT && id == first) {
			printf("EVENT %s after %.0f ms (passive side)\n", rdma_event_str(t),
			       now_ms() - t_first);
			rdma_destroy_qp(id);
			rdma_destroy_id(id);
			tw_exit = 1;
		} else if (t != RDMA_CM_EVENT_CONNECT_REQUEST && t != RDMA_CM_EVENT_ESTABLISHED) {
			fprintf(stderr, "cm_fail: unexpected %s\n", rdma_event_str(t));
			return 6;
		}
	}
	return bounded("acceptor", n, &ref);
}

static int cycles(int port, int n)
{
	struct growth ref = {0};

	for (int i = 1; i <= n; i++) {
		struct rdma_event_channel *ch;
		struct rdma_cm_id *id = start_connect(port, &ch);
		struct rdma_cm_event *ev;
		double t0;

		ev = next_event(ch);
		if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
			fprintf(stderr, "cm_fail: cycle %d: %s\n", i, rdma_event_str(ev->event));
			return 6;
		}
		rdma_ack_cm_event(ev);
		if (rdma_disconnect(id))
			die("rdma_disconnect");
		ev = next_event(ch);
		if (ev->event != RDMA_CM_EVENT_DISCONNECTED) {
			fprintf(stderr, "cm_fail: cycle %d: %s\n", i, rdma_event_str(ev->event));
			return 6;
		}
		rdma_ack_cm_event(ev);
		if (i == 1) {
			t0 = now_ms();
			expect(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, t0);
		}
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
		rdma_destroy_event_channel(ch);
		if (i == CYCLES_WARM)
			sample(&ref);
	}
	return bounded("cycles", n, &ref);
}

static int ipv6(void)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	struct rdma_cm_id *id;

	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		die("create");
	if (!rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000) || errno != EAFNOSUPPORT)
		return 9;
	if (!rdma_bind_addr(id, (struct sockaddr *)&a) || errno != EAFNOSUPPORT)
		return 9;
	rdma_destroy_id(id);
	printf("IPv6 refused: %s\n", strerror(EAFNOSUPPORT));
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";
	int port = argc > 2 ? atoi(argv[2]) : 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(m, "noserver") || !strcmp(m, "connect"))
		return refused(port);
	if (!strcmp(m, "diehalf"))
		return diehalf(port);
	if (!strcmp(m, "serve"))
		return serve(port);
	if (!strcmp(m, "survive") && argc > 3)
		return survive(port, (pid_t)atoi(argv[3]));
	if (!strcmp(m, "destroyblock"))
		return destroyblock(port);
	if (!strcmp(m, "acceptor") && argc > 3)
		return acceptor(port, atoi(argv[3]));
	if (!strcmp(m, "cycles") && argc > 3 && atoi(argv[3]) > CYCLES_WARM)
		return cycles(port, atoi(argv[3]));
	if (!strcmp(m, "ipv6"))
		return ipv6();
	if (!strcmp(m, "rsocket"))
		return rsocket(AF_INET, SOCK_STREAM, 0) < 0 && errno == ENOSYS ? 0 : 10;
	fprintf(stderr, "usage: cm_fail noserver|diehalf|connect|serve|survive|destroyblock|"
			"acceptor|cycles|ipv6|rsocket [PORT [PID|N]]\n");
	return 2;
}

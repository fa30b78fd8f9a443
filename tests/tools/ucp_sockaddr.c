/* A UCP tag ping-pong whose endpoints connect by socket address (UCP's
 * client-server mode: ucp_listener on the server, UCP_EP_PARAM_FIELD_SOCK_ADDR
 * on the client), for tests/integration/ucx.sh and middleware_netns.sh.  UCX
 * wires such endpoints up through a connection manager component: with
 * UCX_SOCKADDR_TLS_PRIORITY=rdmacm that is rdma_cm (librdmacm), which is what
 * ucx_perftest (its own TCP exchange of worker addresses) never exercises.
 *
 *   ucp_sockaddr server ADDR PORT ITERS SIZE
 *   ucp_sockaddr client ADDR PORT ITERS SIZE
 *
 * The client sends ITERS messages of SIZE bytes, the server returns each one
 * inverted; both check every byte.  The client prints
 * "ucp_sockaddr: OK: ITERS x SIZE B, median half round trip X us" and both
 * exit 0 only if every transfer arrived intact.  Every wait is bounded.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>

#define TAG_DATA  1
#define TAG_BYE	  2
#define WAIT_SECS 60

static ucp_worker_h worker;
static ucp_listener_h listener;
static ucp_conn_request_h conn_req;
static ucs_status_t ep_status = UCS_OK;

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static unsigned char pattern(size_t i, int it)
{
	return (unsigned char)(i * 131u + (unsigned)it * 17u + 1u);
}

static void on_conn(ucp_conn_request_h req, void *arg)
{
	(void)arg;
	if (conn_req)
		ucp_listener_reject(listener, req); /* one client only */
	else
		conn_req = req;
}

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	(void)arg;
	(void)ep;
	ep_status = status;
}

static void on_done(void *req, ucs_status_t status, void *user)
{
	(void)req;
	(void)status;
	(void)user;
}

static void on_recv(void *req, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user)
{
	(void)req;
	(void)status;
	(void)info;
	(void)user;
}

/* Progress until req completes; its status, or UCS_ERR_TIMED_OUT. */
static ucs_status_t wait_req(void *req)
{
	double deadline = now_us() + WAIT_SECS * 1e6;
	ucs_status_t st;

	if (!UCS_PTR_IS_PTR(req))
		return UCS_PTR_STATUS(req);
	while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS && now_us() < deadline)
		ucp_worker_progress(worker);
	ucp_request_free(req);
	return st;
}

static ucs_status_t xfer(ucp_ep_h ep, int send, void *buf, size_t len, ucp_tag_t tag)
{
	ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK};

	if (send) {
		p.cb.send = on_done;
		return wait_req(ucp_tag_send_nbx(ep, buf, len, tag, &p));
	}
	p.cb.recv = on_recv;
	return wait_req(ucp_tag_recv_nbx(worker, buf, len, tag, (ucp_tag_t)-1, &p));
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int fail(const char *what, long at)
{
	fprintf(stderr, "ucp_sockaddr: %s (at %ld)\n", what, at);
	return 1;
}

static int pingpong(ucp_ep_h ep, int server, int iters, size_t len)
{
	unsigned char *buf = malloc(len ? len : 1);
	double *rtt = calloc((size_t)iters, sizeof(*rtt));
	int bad = 0;

	if (!buf || !rtt)
		bad = fail("out of memory", 0);
	for (int it = 0; it < iters && !bad; it++) {
		double t0 = now_us();

		if (!server) {
			for (size_t i = 0; i < len; i++)
				buf[i] = pattern(i, it);
			if (xfer(ep, 1, buf, len, TAG_DATA) != UCS_OK)
				bad = fail("send failed", it);
		}
		memset(buf, 0, len);
		if (!bad && xfer(ep, 0, buf, len, TAG_DATA) != UCS_OK)
			bad = fail("receive failed", it);
		for (size_t i = 0; i < len && !bad; i++)
			if (buf[i] !=
			    (unsigned char)(server ? pattern(i, it) : pattern(i, it) ^ 0xff))
				bad = fail("data wrong", (long)i);
		if (server) {
			for (size_t i = 0; i < len; i++)
				buf[i] ^= 0xff;
			if (!bad && xfer(ep, 1, buf, len, TAG_DATA) != UCS_OK)
				bad = fail("send failed", it);
		}
		rtt[it] = now_us() - t0;
	}
	if (!bad && !server) {
		qsort(rtt, (size_t)iters, sizeof(*rtt), cmp_double);
		printf("ucp_sockaddr: OK: %d x %zu B, median half round trip %.2f us\n", iters, len,
		       rtt[iters / 2] / 2);
	}
	free(buf);
	free(rtt);
	return bad;
}

static ucp_ep_h connect_ep(int server, const struct sockaddr_in *sin)
{
	ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
					    UCP_EP_PARAM_FIELD_ERR_HANDLER,
			      .err_mode = UCP_ERR_HANDLING_MODE_PEER,
			      .err_handler = {.cb = on_ep_error}};
	ucp_ep_h h = NULL;

	if (server) {
		double deadline = now_us() + WAIT_SECS * 1e6;

		while (!conn_req && now_us() < deadline)
			ucp_worker_progress(worker);
		if (!conn_req)
			return NULL;
		ep.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
		ep.conn_request = conn_req;
	} else {
		ep.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
		ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
		ep.sockaddr.addr = (const struct sockaddr *)sin;
		ep.sockaddr.addrlen = sizeof(*sin);
	}
	return ucp_ep_create(worker, &ep, &h) == UCS_OK ? h : NULL;
}

static int run(int server, const struct sockaddr_in *sin, int iters, size_t len)
{
	ucp_listener_params_t lp = {
	    .field_mask =
		UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
	    .sockaddr = {.addr = (const struct sockaddr *)sin, .addrlen = sizeof(*sin)},
	    .conn_handler = {.cb = on_conn}};
	ucp_request_param_t close = {.op_attr_mask = 0};
	ucp_ep_h ep;
	char bye = 0;
	int bad;

	if (server && ucp_listener_create(worker, &lp, &listener) != UCS_OK)
		return fail("ucp_listener_create failed", 0);
	if (server)
		printf("ucp_sockaddr: listening on %s:%u\n", inet_ntoa(sin->sin_addr),
		       ntohs(sin->sin_port));
	fflush(stdout);
	ep = connect_ep(server, sin);
	if (!ep) {
		if (listener)
			ucp_listener_destroy(listener);
		return fail(server ? "no connection request" : "ucp_ep_create failed", 0);
	}
	bad = pingpong(ep, server, iters, len);
	/* An endpoint error during the ping-pong is a failure; once the goodbye
	 * is under way the peer may close first (the server's endpoint then
	 * reports a reset), which is the normal end. */
	if (ep_status != UCS_OK && !bad)
		bad = fail(ucs_status_string(ep_status), 0);
	/* The client says goodbye so that the server closes after the last reply. */
	if (!bad && xfer(ep, !server, &bye, 1, TAG_BYE) != UCS_OK)
		bad = fail("goodbye failed", 0);
	wait_req(ucp_ep_close_nbx(ep, &close)); /* a peer that closed first is not an error */
	if (listener)
		ucp_listener_destroy(listener);
	return bad;
}

int main(int argc, char **argv)
{
	ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
	ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				  .thread_mode = UCS_THREAD_MODE_SINGLE};
	struct sockaddr_in sin = {.sin_family = AF_INET};
	ucp_context_h ctx;
	int server, iters, bad;
	long size;

	if (argc != 6 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
	    inet_pton(AF_INET, argv[2], &sin.sin_addr) != 1 || (iters = atoi(argv[4])) <= 0 ||
	    (size = atol(argv[5])) < 0 || size > (64L << 20)) {
		fprintf(stderr, "usage: %s server|client IPV4 PORT ITERS SIZE\n", argv[0]);
		return 2;
	}
	server = !strcmp(argv[1], "server");
	sin.sin_port = htons((uint16_t)atoi(argv[3]));
	if (ucp_init(&params, NULL, &ctx) != UCS_OK)
		return fail("ucp_init failed", 0);
	if (ucp_worker_create(ctx, &wp, &worker) != UCS_OK) {
		ucp_cleanup(ctx);
		return fail("ucp_worker_create failed", 0);
	}
	bad = run(server, &sin, iters, (size_t)size);
	ucp_worker_destroy(worker);
	ucp_cleanup(ctx);
	return bad;
}

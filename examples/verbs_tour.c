/*
 * verbs_tour.c - a guided tour of the RDMA verbs API, one step at a time.
 *
 * This program is uroce's main tutorial. It is an ordinary libibverbs
 * program (it runs unchanged on a Mellanox NIC, on the kernel's soft-RoCE
 * and on uroce) that walks through every object and call an RDMA
 * application needs, printing what it does and why as it goes.
 *
 *   server:  verbs_tour [options]
 *   client:  verbs_tour [options] <server-host>
 *
 * The two sides open a device, create their verbs objects, swap the
 * addressing information over a plain TCP socket, connect their queue
 * pairs, and then the client performs three operations:
 *
 *   (a) SEND / RECV                  client -> server, a two-sided copy
 *   (b) RDMA WRITE WITH IMMEDIATE    client writes into server memory and
 *                                    the server is told by a completion
 *   (c) RDMA READ                    client reads server memory; the
 *                                    server's CPU takes no part
 *
 * Every byte that moved is checked. Each side prints "OK" and exits 0 only
 * if its own checks passed and the peer reported that its checks passed.
 *
 * Reading guide: main() at the bottom shows the whole flow; each step_*()
 * function is one step of the tour, in the order they run. The teardown at
 * the end shows the order in which verbs objects must be destroyed.
 */

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* Ports of an RDMA device are numbered from 1; uroce devices have one. */
#define IB_PORT 1

#define DEFAULT_TCP_PORT 18600
#define DEFAULT_SIZE	 4096
#define MAX_SIZE	 (256u << 20) /* per region; the MR holds three */

/* Queue sizes: the tour never has more than two WRs outstanding. */
#define CQ_DEPTH 16
#define QP_DEPTH 4

/* How long we wait for a completion or for the peer before giving up. */
#define COMPLETION_TIMEOUT_MS 20000
#define CONNECT_TIMEOUT_MS    20000
#define SOCKET_TIMEOUT_S      60

/*
 * Access rights of our memory region: the device may write it locally (to
 * place received data), and the peer may write and read it remotely.
 */
#define MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* The 32-bit value carried by the RDMA WRITE WITH IMMEDIATE. */
#define IMM_VALUE 0x5eed1234u

/*
 * Each side registers one buffer of three equal regions (size bytes each):
 *
 *   region   client                         server
 *   0 SEND   data it sends                  receives the SEND
 *   1 WRITE  data it RDMA-writes            target of the RDMA WRITE
 *   2 READ   receives the RDMA READ         data the client RDMA-reads
 */
enum region { REGION_SEND = 0, REGION_WRITE = 1, REGION_READ = 2, NUM_REGIONS = 3 };

/* Each region gets its own pattern so data landing in the wrong place shows. */
static const uint8_t region_seed[NUM_REGIONS] = {0x11, 0x5a, 0xc3};
#define POISON 0xee /* what a region holds before data arrives */

/* wr_id is an opaque 64-bit cookie: the CQ hands it back on completion. */
enum wr_id {
	WRID_RECV_SEND = 1, /* server: receive for the SEND of (a) */
	WRID_RECV_IMM,	    /* server: receive consumed by (b) */
	WRID_SEND,	    /* client: (a) */
	WRID_WRITE_IMM,	    /* client: (b) */
	WRID_READ,	    /* client: (c) */
};

/* What one side must tell the other before their QPs can talk. */
struct conn_info {
	uint32_t qpn;	   /* queue pair number */
	uint32_t psn;	   /* first packet sequence number it will send */
	union ibv_gid gid; /* network address of its port */
	uint32_t rkey;	   /* key that grants access to its buffer */
	uint64_t addr;	   /* virtual address of its buffer */
	uint64_t size;	   /* size of one region */
	int mtu;	   /* its port's active MTU (enum ibv_mtu) */
};

struct tour {
	/* options */
	bool is_client;		 /* false: we are the server */
	const char *server_host; /* client: where the server runs */
	const char *devname;
	int gid_index;
	int tcp_port;
	size_t size;
	bool use_events;

	const char *role;
	int step;

	/* verbs objects, in the order they are created */
	struct ibv_device **dev_list;
	struct ibv_device *dev;
	struct ibv_context *ctx;
	struct ibv_device_attr dev_attr;
	struct ibv_port_attr port_attr;
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
	unsigned int cq_events; /* CQ events received, to acknowledge */
	struct ibv_qp *qp;
	uint8_t *buf;
	size_t buf_len;
	struct ibv_mr *mr;

	int sock;
	struct conn_info local;
	struct conn_info remote;
};

/* ------------------------------------------------------------------------
 * Printing: every line is tagged with the role, so that the output of both
 * sides can be read side by side or interleaved in one terminal.
 */

static void step(struct tour *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void show(const struct tour *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why(const struct tour *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int problem(const struct tour *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void vout(const struct tour *t, FILE *f, const char *lead, const char *fmt, va_list ap)
{
	fprintf(f, "[%s] %s", t->role, lead);
	vfprintf(f, fmt, ap);
	fputc('\n', f);
}

/* A new step of the tour: names the verb or concept. */
static void step(struct tour *t, const char *fmt, ...)
{
	va_list ap;

	printf("\n");
	va_start(ap, fmt);
	t->step++;
	fprintf(stdout, "[%s] step %d: ", t->role, t->step);
	vfprintf(stdout, fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
}

/* A result of the current step. */
static void show(const struct tour *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vout(t, stdout, "    ", fmt, ap);
	va_end(ap);
}

/* The one-line explanation of a concept, printed where it first appears. */
static void why(const struct tour *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vout(t, stdout, "    why: ", fmt, ap);
	va_end(ap);
}

/*
 * Report a failed call. Verbs report errors in two ways: calls returning a
 * pointer return NULL and set errno; calls returning int return the error
 * number itself (and usually set errno too). Either way we get an errno
 * value to print, like perror() does. Returns -1 for "return fail(...)".
 */
static int fail(const struct tour *t, const char *what, int err)
{
	if (err > 0)
		fprintf(stderr, "[%s] ERROR: %s failed: %s (errno %d)\n", t->role, what,
			strerror(err), err);
	else
		fprintf(stderr, "[%s] ERROR: %s failed (no errno was set, return value %d)\n",
			t->role, what, err);
	return -1;
}

/* An error that is not a failed call: a check the tour makes itself. */
static int problem(const struct tour *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vout(t, stderr, "ERROR: ", fmt, ap);
	va_end(ap);
	return -1;
}

/* ------------------------------------------------------------------------
 * Small helpers for names of enum values and for the data patterns.
 */

static int mtu_bytes(enum ibv_mtu mtu)
{
	switch (mtu) {
	case IBV_MTU_256:
		return 256;
	case IBV_MTU_512:
		return 512;
	case IBV_MTU_1024:
		return 1024;
	case IBV_MTU_2048:
		return 2048;
	case IBV_MTU_4096:
		return 4096;
	}
	return 0;
}

static const char *port_state_str(enum ibv_port_state state)
{
	switch (state) {
	case IBV_PORT_DOWN:
		return "PORT_DOWN";
	case IBV_PORT_INIT:
		return "PORT_INIT";
	case IBV_PORT_ARMED:
		return "PORT_ARMED";
	case IBV_PORT_ACTIVE:
		return "PORT_ACTIVE";
	default:
		return "other";
	}
}

static const char *link_layer_str(uint8_t link_layer)
{
	switch (link_layer) {
	case IBV_LINK_LAYER_INFINIBAND:
		return "InfiniBand";
	case IBV_LINK_LAYER_ETHERNET:
		return "Ethernet";
	default:
		return "unspecified";
	}
}

static const char *qp_state_str(enum ibv_qp_state state)
{
	switch (state) {
	case IBV_QPS_RESET:
		return "RESET";
	case IBV_QPS_INIT:
		return "INIT";
	case IBV_QPS_RTR:
		return "RTR";
	case IBV_QPS_RTS:
		return "RTS";
	case IBV_QPS_SQD:
		return "SQD";
	case IBV_QPS_SQE:
		return "SQE";
	case IBV_QPS_ERR:
		return "ERR";
	default:
		return "UNKNOWN";
	}
}

static const char *wc_opcode_str(enum ibv_wc_opcode opcode)
{
	switch (opcode) {
	case IBV_WC_SEND:
		return "IBV_WC_SEND";
	case IBV_WC_RDMA_WRITE:
		return "IBV_WC_RDMA_WRITE";
	case IBV_WC_RDMA_READ:
		return "IBV_WC_RDMA_READ";
	case IBV_WC_RECV:
		return "IBV_WC_RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM:
		return "IBV_WC_RECV_RDMA_WITH_IMM";
	default:
		return "other";
	}
}

static void gid_str(const union ibv_gid *gid, char *out, size_t len)
{
	if (!inet_ntop(AF_INET6, gid->raw, out, (socklen_t)len))
		snprintf(out, len, "?");
}

/* ::ffff:a.b.c.d - an IPv4 address in IPv6 clothing. */
static bool gid_is_ipv4_mapped(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return memcmp(gid->raw, prefix, sizeof(prefix)) == 0;
}

static bool gid_is_zero(const union ibv_gid *gid)
{
	for (size_t i = 0; i < sizeof(gid->raw); i++)
		if (gid->raw[i])
			return false;
	return true;
}

static uint8_t *region(const struct tour *t, enum region r)
{
	return t->buf + (size_t)r * t->size;
}

/* Byte i of the pattern with the given seed; not periodic in 256 bytes. */
static uint8_t pattern_byte(size_t i, uint8_t seed)
{
	return (uint8_t)(seed + i * 7 + (i >> 8) * 13 + (i >> 16) * 101);
}

static void fill_pattern(uint8_t *p, size_t len, uint8_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern_byte(i, seed);
}

/* Compare byte for byte; report the first difference and the count. */
static bool verify_pattern(const struct tour *t, const char *what, const uint8_t *p, size_t len,
			   uint8_t seed)
{
	size_t bad = 0, first = 0;

	for (size_t i = 0; i < len; i++) {
		if (p[i] != pattern_byte(i, seed)) {
			if (!bad)
				first = i;
			bad++;
		}
	}
	if (!bad) {
		show(t, "verified %s: all %zu bytes are as expected", what, len);
		return true;
	}
	problem(t, "%s: %zu of %zu bytes differ; first at offset %zu: got 0x%02x, expected 0x%02x",
		what, bad, len, first, p[first], pattern_byte(first, seed));
	return false;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------
 * The TCP side channel. Verbs have no connection setup of their own, so the
 * two programs use an ordinary socket to swap addresses and to agree on
 * when to start and whether everything worked.
 */

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			errno = ECONNRESET; /* peer closed the connection */
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* All messages are fixed-size text lines, so byte order never matters. */
#define MSG_LEN 192

static int send_msg(struct tour *t, const char *msg)
{
	char buf[MSG_LEN] = {0};

	snprintf(buf, sizeof(buf), "%s", msg);
	if (write_all(t->sock, buf, sizeof(buf)))
		return fail(t, "write to the TCP socket", errno);
	return 0;
}

static int recv_msg(struct tour *t, char *buf)
{
	if (read_all(t->sock, buf, MSG_LEN))
		return fail(t, "read from the TCP socket", errno);
	buf[MSG_LEN - 1] = '\0';
	return 0;
}

static void set_socket_timeout(int fd)
{
	struct timeval tv = {.tv_sec = SOCKET_TIMEOUT_S};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int tcp_listen_accept(struct tour *t)
{
	struct addrinfo hints = {.ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res, *ai;
	char port[16];
	int fd = -1, one = 1, rc;

	snprintf(port, sizeof(port), "%d", t->tcp_port);
	rc = getaddrinfo(NULL, port, &hints, &res);
	if (rc)
		return problem(t, "getaddrinfo(port %s): %s", port, gai_strerror(rc));
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) && !listen(fd, 1))
			break;
		rc = errno;
		close(fd);
		fd = -1;
		errno = rc;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return fail(t, "bind/listen on the TCP port", errno);

	show(t, "listening on TCP port %d, waiting for the client...", t->tcp_port);
	t->sock = accept(fd, NULL, NULL);
	rc = errno;
	close(fd);
	if (t->sock < 0)
		return fail(t, "accept", rc);
	set_socket_timeout(t->sock);
	return 0;
}

static int tcp_connect(struct tour *t)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
	int64_t deadline = now_ms() + CONNECT_TIMEOUT_MS;
	char port[16];
	bool said_waiting = false;
	int err = 0;

	snprintf(port, sizeof(port), "%d", t->tcp_port);
	/* The server may not be listening yet: retry for a while. */
	while (now_ms() < deadline) {
		struct addrinfo *res, *ai;
		int rc = getaddrinfo(t->server_host, port, &hints, &res);

		if (rc)
			return problem(t, "getaddrinfo(%s:%s): %s", t->server_host, port,
				       gai_strerror(rc));
		for (ai = res; ai; ai = ai->ai_next) {
			int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);

			if (fd < 0) {
				err = errno;
				continue;
			}
			if (!connect(fd, ai->ai_addr, ai->ai_addrlen)) {
				freeaddrinfo(res);
				t->sock = fd;
				set_socket_timeout(fd);
				return 0;
			}
			err = errno;
			close(fd);
		}
		freeaddrinfo(res);
		if (!said_waiting) {
			show(t, "server %s:%s not reachable yet (%s), retrying...", t->server_host,
			     port, strerror(err));
			said_waiting = true;
		}
		usleep(100 * 1000);
	}
	return fail(t, "connect to the server", err);
}

/* ------------------------------------------------------------------------
 * Completions. A work request runs asynchronously; its outcome appears as
 * a work completion (struct ibv_wc) in the CQ. We either spin on
 * ibv_poll_cq() or, with -e, sleep on the completion channel.
 */

static int wait_for_cq_event(struct tour *t, int timeout_ms)
{
	struct pollfd pfd = {.fd = t->channel->fd, .events = POLLIN};
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int rc;

	/* The channel's fd is readable when an event is pending. */
	rc = poll(&pfd, 1, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : fail(t, "poll on the completion channel fd", errno);
	if (rc == 0)
		return 0; /* the caller checks its deadline */

	if (ibv_get_cq_event(t->channel, &ev_cq, &ev_ctx))
		return fail(t, "ibv_get_cq_event", errno);
	if (ev_cq != t->cq)
		return problem(t, "event for unknown CQ %p", (void *)ev_cq);
	/*
	 * Every event must eventually be acknowledged, and ibv_destroy_cq()
	 * waits for that. Acking in batches is cheaper; we ack at once.
	 */
	ibv_ack_cq_events(t->cq, 1);
	t->cq_events++;
	/* An event fires once per arming: re-arm before polling again. */
	rc = ibv_req_notify_cq(t->cq, 0);
	if (rc)
		return fail(t, "ibv_req_notify_cq", rc);
	return 0;
}

/* Wait for one completion and check it is the one we expect. */
static int wait_completion(struct tour *t, struct ibv_wc *wc, enum wr_id id,
			   enum ibv_wc_opcode opcode)
{
	int64_t deadline = now_ms() + COMPLETION_TIMEOUT_MS;

	for (;;) {
		int n = ibv_poll_cq(t->cq, 1, wc);

		if (n < 0)
			return fail(t, "ibv_poll_cq", n == -1 ? errno : -n);
		if (n == 1)
			break;
		if (now_ms() > deadline)
			return problem(t, "no completion for wr_id %d within %d ms%s", id,
				       COMPLETION_TIMEOUT_MS,
				       t->channel ? " (and no completion event)" : "");
		if (t->channel) {
			/* Nothing yet: sleep until the device raises an event. */
			if (wait_for_cq_event(t, (int)(deadline - now_ms()) + 1))
				return -1;
		} else {
			sched_yield(); /* busy polling; be nice to other threads */
		}
	}

	show(t, "completion: wr_id %" PRIu64 ", status %s, opcode %s, byte_len %u, qp_num 0x%06x",
	     wc->wr_id, ibv_wc_status_str(wc->status), wc_opcode_str(wc->opcode), wc->byte_len,
	     wc->qp_num);
	if (wc->status != IBV_WC_SUCCESS)
		return problem(
		    t, "work request %" PRIu64 " failed: %s (status %d, vendor_err 0x%x)",
		    wc->wr_id, ibv_wc_status_str(wc->status), wc->status, wc->vendor_err);
	if (wc->wr_id != (uint64_t)id)
		return problem(t, "expected wr_id %d, got %" PRIu64, id, wc->wr_id);
	if (wc->opcode != opcode)
		return problem(t, "expected opcode %s, got %s (%d)", wc_opcode_str(opcode),
			       wc_opcode_str(wc->opcode), wc->opcode);
	if (wc->qp_num != t->qp->qp_num)
		return problem(t, "completion names QP 0x%06x, ours is 0x%06x", wc->qp_num,
			       t->qp->qp_num);
	return 0;
}

/* ------------------------------------------------------------------------
 * The tour: opening the device and creating the objects.
 */

static int step_device_list(struct tour *t)
{
	int num = 0;

	step(t, "ibv_get_device_list() - which RDMA devices are there?");
	why(t, "an RDMA device (HCA, RNIC) executes the work you post; uroce is one in software "
	       "that speaks RoCEv2 (InfiniBand transport over UDP/IP, port 4791)");
	t->dev_list = ibv_get_device_list(&num);
	if (!t->dev_list)
		return fail(t, "ibv_get_device_list", errno);
	if (num == 0)
		return problem(t, "no RDMA device found (for uroce: is LD_LIBRARY_PATH set to its "
				  "build/lib, e.g. via 'uroce run'?)");
	for (int i = 0; i < num; i++) {
		uint64_t guid = be64toh(ibv_get_device_guid(t->dev_list[i]));

		show(t, "device %d: %s, node GUID %016" PRIx64, i,
		     ibv_get_device_name(t->dev_list[i]), guid);
	}

	if (!t->devname) {
		t->dev = t->dev_list[0];
	} else {
		for (int i = 0; i < num; i++)
			if (!strcmp(ibv_get_device_name(t->dev_list[i]), t->devname))
				t->dev = t->dev_list[i];
		if (!t->dev)
			return problem(t, "device '%s' not found", t->devname);
	}
	show(t, "using %s", ibv_get_device_name(t->dev));
	return 0;
}

static int step_open_device(struct tour *t)
{
	step(t, "ibv_open_device(%s) - get a context", ibv_get_device_name(t->dev));
	why(t, "the context is the program's handle on the device: every other verbs object is "
	       "created from it");
	t->ctx = ibv_open_device(t->dev);
	if (!t->ctx)
		return fail(t, "ibv_open_device", errno);
	show(t, "context %p opened", (void *)t->ctx);
	return 0;
}

static int step_query_device(struct tour *t)
{
	struct ibv_device_attr *a = &t->dev_attr;
	int rc;

	step(t, "ibv_query_device() - device attributes and limits");
	why(t, "devices differ in how many objects they have and how big queues may be; a "
	       "program sizes its resources within these limits");
	rc = ibv_query_device(t->ctx, a);
	if (rc)
		return fail(t, "ibv_query_device", rc);
	show(t, "firmware '%s', vendor 0x%x part %u, %u port(s)", a->fw_ver, a->vendor_id,
	     a->vendor_part_id, a->phys_port_cnt);
	show(t, "max_qp %d, max_qp_wr %d, max_sge %d, max_cq %d, max_cqe %d", a->max_qp,
	     a->max_qp_wr, a->max_sge, a->max_cq, a->max_cqe);
	show(t,
	     "max_pd %d, max_mr %d, max_mr_size %" PRIu64 ", max_qp_rd_atom %d, "
	     "max_qp_init_rd_atom %d",
	     a->max_pd, a->max_mr, a->max_mr_size, a->max_qp_rd_atom, a->max_qp_init_rd_atom);

	/* Check what the tour is about to ask for. */
	if (a->phys_port_cnt < IB_PORT)
		return problem(t, "the device has no port %d", IB_PORT);
	if (a->max_cqe < CQ_DEPTH || a->max_qp_wr < QP_DEPTH || a->max_sge < 1)
		return problem(t, "device queues are too small for the tour");
	if (a->max_mr_size < t->buf_len)
		return problem(t, "a %zu-byte MR is larger than max_mr_size", t->buf_len);
	if (a->max_qp_rd_atom < 1 || a->max_qp_init_rd_atom < 1)
		return problem(t, "the device cannot do RDMA READ (max_qp_rd_atom is 0)");
	return 0;
}

static int step_query_port(struct tour *t)
{
	struct ibv_port_attr *p = &t->port_attr;
	int rc;

	step(t, "ibv_query_port(port %d) - the port's state and addressing", IB_PORT);
	why(t, "a port is where the device meets the network; ports are numbered from 1");
	rc = ibv_query_port(t->ctx, IB_PORT, p);
	if (rc)
		return fail(t, "ibv_query_port", rc);
	show(t, "state %s, link layer %s, active MTU %d (max %d), LID 0x%x",
	     port_state_str(p->state), link_layer_str(p->link_layer), mtu_bytes(p->active_mtu),
	     mtu_bytes(p->max_mtu), p->lid);
	show(t, "GID table length %d, max message size %u", p->gid_tbl_len, p->max_msg_sz);
	why(t, "on RoCE the link layer is Ethernet and the LID is unused: peers are addressed "
	       "by GID, an IP address");
	if (p->state != IBV_PORT_ACTIVE)
		return problem(t, "port %d is not ACTIVE: no traffic can flow", IB_PORT);
	if (p->link_layer != IBV_LINK_LAYER_ETHERNET)
		show(t, "note: not an Ethernet port; the tour addresses peers by GID anyway");
	if (t->gid_index < 0 || t->gid_index >= p->gid_tbl_len)
		return problem(t, "GID index %d is outside the table (0..%d)", t->gid_index,
			       p->gid_tbl_len - 1);
	if (t->size > p->max_msg_sz)
		return problem(t, "-s %zu exceeds the port's max message size %u", t->size,
			       p->max_msg_sz);
	return 0;
}

static int step_query_gid(struct tour *t)
{
	char s[INET6_ADDRSTRLEN];
	int rc;

	step(t, "ibv_query_gid(port %d, index %d) - our network address", IB_PORT, t->gid_index);
	why(t, "a GID is a 128-bit address, like an IPv6 address; a RoCEv2 GID is the IP "
	       "address of the network interface, IPv4 written as ::ffff:a.b.c.d");
	rc = ibv_query_gid(t->ctx, IB_PORT, t->gid_index, &t->gid);
	if (rc)
		return fail(t, "ibv_query_gid", rc);
	gid_str(&t->gid, s, sizeof(s));
	show(t, "GID[%d] = %s", t->gid_index, s);
	if (gid_is_zero(&t->gid))
		return problem(t, "GID index %d is empty; 'ibv_devinfo -v' lists the valid ones",
			       t->gid_index);
	if (gid_is_ipv4_mapped(&t->gid))
		show(t, "that is the IPv4 address %u.%u.%u.%u", t->gid.raw[12], t->gid.raw[13],
		     t->gid.raw[14], t->gid.raw[15]);
	return 0;
}

static int step_alloc_pd(struct tour *t)
{
	step(t, "ibv_alloc_pd() - a protection domain");
	why(t, "a PD groups QPs and memory regions: a QP can only use memory registered in its "
	       "own PD, so unrelated users of a device cannot touch each other's memory");
	t->pd = ibv_alloc_pd(t->ctx);
	if (!t->pd)
		return fail(t, "ibv_alloc_pd", errno);
	show(t, "PD %p allocated", (void *)t->pd);
	return 0;
}

static int step_comp_channel(struct tour *t)
{
	step(t, "ibv_create_comp_channel() - optional: sleep instead of spinning");
	why(t, "a completion channel is a file descriptor that becomes readable when an armed "
	       "CQ gets a completion, so a program can block in poll()/epoll() for it");
	if (!t->use_events) {
		show(t, "skipped: this run busy-polls the CQ (run with -e to use a channel)");
		return 0;
	}
	t->channel = ibv_create_comp_channel(t->ctx);
	if (!t->channel)
		return fail(t, "ibv_create_comp_channel", errno);
	show(t, "channel created, fd %d", t->channel->fd);
	return 0;
}

static int step_create_cq(struct tour *t)
{
	int rc;

	step(t, "ibv_create_cq(%d entries) - a completion queue", CQ_DEPTH);
	why(t, "work is asynchronous: when the device finishes a work request it writes a work "
	       "completion into a CQ, which the program reads with ibv_poll_cq()");
	t->cq = ibv_create_cq(t->ctx, CQ_DEPTH, NULL, t->channel, 0);
	if (!t->cq)
		return fail(t, "ibv_create_cq", errno);
	show(t, "CQ %p created with room for %d completions (at least what we asked for)",
	     (void *)t->cq, t->cq->cqe);
	if (t->channel) {
		/* Arm the CQ: the next completion will raise one event. */
		rc = ibv_req_notify_cq(t->cq, 0);
		if (rc)
			return fail(t, "ibv_req_notify_cq", rc);
		show(t, "ibv_req_notify_cq(): CQ armed, the next completion raises an event");
	}
	return 0;
}

static int step_create_qp(struct tour *t)
{
	struct ibv_qp_init_attr init = {
	    .send_cq = t->cq, /* send and receive may share one CQ */
	    .recv_cq = t->cq,
	    .cap =
		{
		    .max_send_wr = QP_DEPTH,
		    .max_recv_wr = QP_DEPTH,
		    .max_send_sge = 1,
		    .max_recv_sge = 1,
		},
	    .qp_type = IBV_QPT_RC,
	    .sq_sig_all = 0, /* completions only for WRs flagged IBV_SEND_SIGNALED */
	};

	step(t, "ibv_create_qp(RC) - a queue pair, the communication endpoint");
	why(t, "a QP is a send queue plus a receive queue, the RDMA counterpart of a socket; "
	       "RC (reliable connected) ties it to exactly one remote QP, with acks and "
	       "retransmission, and allows RDMA READ and WRITE");
	t->qp = ibv_create_qp(t->pd, &init);
	if (!t->qp)
		return fail(t, "ibv_create_qp", errno);
	show(t, "QPN 0x%06x, state RESET; capacity: %u send WRs, %u recv WRs, %u inline bytes",
	     t->qp->qp_num, init.cap.max_send_wr, init.cap.max_recv_wr, init.cap.max_inline_data);
	why(t, "the QPN (24 bits) names the QP on its device, like a port number names a socket; "
	       "the peer will address its packets to it");
	return 0;
}

static int step_reg_mr(struct tour *t)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;
	int rc;

	step(t,
	     "ibv_reg_mr(%zu bytes, LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ) - memory the "
	     "device may use",
	     t->buf_len);
	rc = posix_memalign(&p, page > 0 ? (size_t)page : 4096, t->buf_len);
	if (rc)
		return fail(t, "posix_memalign", rc);
	t->buf = p;

	/* Fill before the peer can see it: our data, or poison to be overwritten. */
	if (t->is_client) {
		fill_pattern(region(t, REGION_SEND), t->size, region_seed[REGION_SEND]);
		fill_pattern(region(t, REGION_WRITE), t->size, region_seed[REGION_WRITE]);
		memset(region(t, REGION_READ), POISON, t->size);
	} else {
		memset(region(t, REGION_SEND), POISON, t->size);
		memset(region(t, REGION_WRITE), POISON, t->size);
		fill_pattern(region(t, REGION_READ), t->size, region_seed[REGION_READ]);
	}

	why(t, "the device reads and writes memory directly, so memory must be registered "
	       "first: it is pinned and the device gets its address translation");
	t->mr = ibv_reg_mr(t->pd, t->buf, t->buf_len, MR_ACCESS);
	if (!t->mr)
		return fail(t, "ibv_reg_mr", errno);
	show(t, "MR at %p, length %zu, lkey 0x%08x, rkey 0x%08x", t->mr->addr, t->mr->length,
	     t->mr->lkey, t->mr->rkey);
	why(t, "the lkey goes into our own work requests; the rkey is handed to the peer and "
	       "lets it read/write this memory remotely, as the access flags allow");
	show(t,
	     "layout: 3 regions of %zu bytes: [0] SEND/RECV, [1] RDMA WRITE target, "
	     "[2] RDMA READ source",
	     t->size);
	return 0;
}

/* Ask the QP what state it is in; shows that the transition happened. */
static int confirm_qp_state(struct tour *t, enum ibv_qp_state expected)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	int rc;

	rc = ibv_query_qp(t->qp, &attr, IBV_QP_STATE, &init);
	if (rc)
		return fail(t, "ibv_query_qp", rc);
	show(t, "ibv_query_qp() confirms: QP state is %s", qp_state_str(attr.qp_state));
	if (attr.qp_state != expected)
		return problem(t, "expected state %s", qp_state_str(expected));
	return 0;
}

static int step_qp_init(struct tour *t)
{
	struct ibv_qp_attr attr = {
	    .qp_state = IBV_QPS_INIT,
	    .pkey_index = 0,
	    .port_num = IB_PORT,
	    /* What the *peer* may do to our memory through this QP. */
	    .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	int rc;

	step(t, "ibv_modify_qp(RESET -> INIT)");
	why(t, "a QP is driven through states; INIT binds it to a port (and P_Key) and says "
	       "which remote operations it accepts: here REMOTE_WRITE and REMOTE_READ");
	rc = ibv_modify_qp(t->qp, &attr,
			   IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return fail(t, "ibv_modify_qp(INIT)", rc);
	return confirm_qp_state(t, IBV_QPS_INIT);
}

static int step_post_recvs(struct tour *t)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)region(t, REGION_SEND),
	    .length = (uint32_t)t->size,
	    .lkey = t->mr->lkey,
	};
	/* Two receive WRs, chained through .next and posted in one call. */
	struct ibv_recv_wr imm_wr = {
	    .wr_id = WRID_RECV_IMM,
	    .sg_list = NULL, /* the data of a WRITE goes where the writer says, */
	    .num_sge = 0,    /* so this WR needs no buffer: only the immediate */
	};
	struct ibv_recv_wr send_wr = {
	    .wr_id = WRID_RECV_SEND,
	    .next = &imm_wr,
	    .sg_list = &sge,
	    .num_sge = 1,
	};
	struct ibv_recv_wr *bad_wr = NULL;
	int rc;

	step(t, "ibv_post_recv() - hand buffers to the receive queue");
	why(t, "a work request (WR) is an instruction queued to the device; a receive WR names "
	       "where the next incoming SEND is placed, as a list of (addr, length, lkey) SGEs");
	if (t->is_client) {
		show(t, "the client receives nothing: no receive WRs needed");
		return 0;
	}
	why(t, "receives must be posted before the peer sends (allowed from INIT on); a SEND "
	       "that finds none gets an RNR NAK (receiver not ready) and is retried");
	rc = ibv_post_recv(t->qp, &send_wr, &bad_wr);
	if (rc) {
		fail(t, "ibv_post_recv", rc);
		return problem(t, "first rejected WR: wr_id %" PRIu64, bad_wr ? bad_wr->wr_id : 0);
	}
	show(t, "posted wr_id %d: %zu-byte buffer (region 0) for the client's SEND", WRID_RECV_SEND,
	     t->size);
	show(t,
	     "posted wr_id %d: no buffer; an RDMA WRITE WITH IMMEDIATE consumes a receive WR "
	     "to deliver its 32-bit immediate",
	     WRID_RECV_IMM);
	return 0;
}

/* ------------------------------------------------------------------------
 * Connecting the two QPs.
 */

static int step_choose_psn(struct tour *t)
{
	uint32_t r;

	step(t, "choose a starting PSN");
	why(t, "every packet of an RC connection carries a 24-bit packet sequence number; "
	       "acks and retransmissions refer to it, and each side picks where its own starts");
	/* Random, so that stray packets of an earlier connection don't fit in. */
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (uint32_t)getpid() * 2654435761u ^ (uint32_t)now_ms();
	t->local.psn = r & 0xffffff;
	show(t, "our send PSN starts at 0x%06x", t->local.psn);
	return 0;
}

static void format_info(const struct conn_info *c, char *msg)
{
	char g[INET6_ADDRSTRLEN];

	gid_str(&c->gid, g, sizeof(g));
	snprintf(msg, MSG_LEN,
		 "TOUR1 qpn=%06x psn=%06x gid=%s rkey=%08x addr=%016" PRIx64 " size=%" PRIu64
		 " mtu=%d",
		 c->qpn, c->psn, g, c->rkey, c->addr, c->size, c->mtu);
}

static int parse_info(struct tour *t, const char *msg, struct conn_info *c)
{
	char g[INET6_ADDRSTRLEN + 1];

	if (sscanf(msg,
		   "TOUR1 qpn=%x psn=%x gid=%46s rkey=%x addr=%" SCNx64 " size=%" SCNu64 " mtu=%d",
		   &c->qpn, &c->psn, g, &c->rkey, &c->addr, &c->size, &c->mtu) != 7 ||
	    inet_pton(AF_INET6, g, c->gid.raw) != 1)
		return problem(t, "malformed message from peer: '%s'", msg);
	return 0;
}

static int step_exchange(struct tour *t)
{
	char msg[MSG_LEN];

	step(t, "exchange connection info with the peer over TCP (port %d)", t->tcp_port);
	why(t, "verbs have no connection setup of their own: QPN, PSN and GID (and, for RDMA, "
	       "buffer address + rkey) travel out of band; librdmacm could do this for us");
	t->local.qpn = t->qp->qp_num;
	t->local.gid = t->gid;
	t->local.rkey = t->mr->rkey;
	t->local.addr = (uintptr_t)t->buf;
	t->local.size = t->size;
	t->local.mtu = t->port_attr.active_mtu;
	format_info(&t->local, msg);

	if (t->is_client ? tcp_connect(t) : tcp_listen_accept(t))
		return -1;
	show(t, "sending:  %s", msg);
	/* The client speaks first; the server answers. */
	if (t->is_client) {
		if (send_msg(t, msg) || recv_msg(t, msg))
			return -1;
	} else {
		char mine[MSG_LEN];

		memcpy(mine, msg, sizeof(mine));
		if (recv_msg(t, msg) || send_msg(t, mine))
			return -1;
	}
	show(t, "received: %s", msg);
	if (parse_info(t, msg, &t->remote))
		return -1;
	if (t->remote.size != t->size)
		return problem(t,
			       "the peer uses -s %" PRIu64 ", we use %zu: both sides need the "
			       "same size",
			       t->remote.size, t->size);
	if (t->remote.mtu < IBV_MTU_256 || t->remote.mtu > IBV_MTU_4096)
		return problem(t, "the peer sent an invalid MTU code %d", t->remote.mtu);
	return 0;
}

static int step_qp_rtr(struct tour *t)
{
	enum ibv_mtu mtu = t->port_attr.active_mtu < (enum ibv_mtu)t->remote.mtu
			       ? t->port_attr.active_mtu
			       : (enum ibv_mtu)t->remote.mtu;
	char g[INET6_ADDRSTRLEN];
	struct ibv_qp_attr attr = {
	    .qp_state = IBV_QPS_RTR,
	    .path_mtu = mtu,
	    .dest_qp_num = t->remote.qpn,
	    .rq_psn = t->remote.psn,
	    /* How many RDMA READs the peer may have in flight to us. */
	    .max_dest_rd_atomic = 1,
	    /* RNR NAK delay we ask a sender to wait (12: 0.64 ms). */
	    .min_rnr_timer = 12,
	    .ah_attr =
		{
		    /* RoCE packets always carry a GRH: the IP header. */
		    .is_global = 1,
		    .grh =
			{
			    .dgid = t->remote.gid,
			    .sgid_index = (uint8_t)t->gid_index,
			    .hop_limit = 64, /* becomes the IP TTL */
			    .traffic_class = 0,
			    .flow_label = 0,
			},
		    .dlid = 0, /* no LIDs on Ethernet */
		    .sl = 0,
		    .src_path_bits = 0,
		    .port_num = IB_PORT,
		},
	};
	int rc;

	gid_str(&t->remote.gid, g, sizeof(g));
	step(t, "ibv_modify_qp(INIT -> RTR, ready to receive)");
	why(t, "RTR tells the QP who its peer is: an address vector (on RoCE a GRH with the "
	       "peer's GID and our source GID index), the peer's QPN, the PSN to expect, the MTU");
	show(t, "dest GID %s, dest QPN 0x%06x, expected PSN 0x%06x, path MTU %d", g, t->remote.qpn,
	     t->remote.psn, mtu_bytes(mtu));
	rc = ibv_modify_qp(t->qp, &attr,
			   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return fail(t, "ibv_modify_qp(RTR)", rc);
	return confirm_qp_state(t, IBV_QPS_RTR);
}

static int step_qp_rts(struct tour *t)
{
	struct ibv_qp_attr attr = {
	    .qp_state = IBV_QPS_RTS,
	    .sq_psn = t->local.psn,
	    /* Ack timeout 4.096 us * 2^14 = 67 ms, then up to 7 retries. */
	    .timeout = 14,
	    .retry_cnt = 7,
	    .rnr_retry = 7, /* 7 means: retry RNR NAKs forever */
	    /* How many RDMA READs we may have in flight to the peer. */
	    .max_rd_atomic = 1,
	};
	int rc;

	step(t, "ibv_modify_qp(RTR -> RTS, ready to send)");
	why(t, "RTS lets the QP transmit: it needs its first send PSN and the retransmission "
	       "rules (ack timeout, retry counts) and how many READs it may have outstanding");
	show(t, "send PSN 0x%06x, timeout 14 (67 ms), retry_cnt 7, rnr_retry 7, max_rd_atomic 1",
	     t->local.psn);
	rc = ibv_modify_qp(t->qp, &attr,
			   IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc)
		return fail(t, "ibv_modify_qp(RTS)", rc);
	return confirm_qp_state(t, IBV_QPS_RTS);
}

static int step_sync(struct tour *t)
{
	char msg[MSG_LEN];

	step(t, "synchronize over TCP: both QPs are connected");
	why(t, "the client must not send before the server's QP is in RTR: packets that reach a "
	       "QP in RESET or INIT are dropped");
	if (send_msg(t, "READY") || recv_msg(t, msg))
		return -1;
	if (strcmp(msg, "READY"))
		return problem(t, "unexpected message from peer: '%s'", msg);
	show(t, "peer is ready");
	return 0;
}

/* ------------------------------------------------------------------------
 * The three operations. Client side first, then the server side of each.
 */

static int post_send(struct tour *t, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad_wr = NULL;
	int rc = ibv_post_send(t->qp, wr, &bad_wr);

	if (rc)
		return fail(t, "ibv_post_send", rc);
	return 0;
}

static int client_send(struct tour *t)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)region(t, REGION_SEND),
	    .length = (uint32_t)t->size,
	    .lkey = t->mr->lkey,
	};
	struct ibv_send_wr wr = {
	    .wr_id = WRID_SEND,
	    .sg_list = &sge,
	    .num_sge = 1,
	    .opcode = IBV_WR_SEND,
	    .send_flags = IBV_SEND_SIGNALED, /* we want a completion for it */
	};
	struct ibv_wc wc;

	step(t, "(a) SEND: ibv_post_send(IBV_WR_SEND, %zu bytes from region 0)", t->size);
	why(t, "a SEND is two-sided: the data lands wherever the server's next receive WR "
	       "points; we never learn the server's addresses for this");
	if (post_send(t, &wr))
		return -1;
	show(t, "posted; now ibv_poll_cq() until the completion arrives");
	why(t, "a send completion means the server acknowledged the data: the buffer may be "
	       "reused");
	return wait_completion(t, &wc, WRID_SEND, IBV_WC_SEND);
}

static int server_recv_send(struct tour *t, bool *data_ok)
{
	struct ibv_wc wc;

	step(t, "(a) SEND/RECV: ibv_poll_cq() for the receive completion");
	why(t, "a receive completion says which receive WR (wr_id) was filled and how many "
	       "bytes arrived (byte_len)");
	if (wait_completion(t, &wc, WRID_RECV_SEND, IBV_WC_RECV))
		return -1;
	if (wc.byte_len != t->size) {
		problem(t, "byte_len %u, expected %zu", wc.byte_len, t->size);
		*data_ok = false;
	}
	if (!verify_pattern(t, "SEND data in region 0", region(t, REGION_SEND), t->size,
			    region_seed[REGION_SEND]))
		*data_ok = false;
	return 0;
}

static int client_write_imm(struct tour *t)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)region(t, REGION_WRITE),
	    .length = (uint32_t)t->size,
	    .lkey = t->mr->lkey,
	};
	struct ibv_send_wr wr = {
	    .wr_id = WRID_WRITE_IMM,
	    .sg_list = &sge,
	    .num_sge = 1,
	    .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
	    .send_flags = IBV_SEND_SIGNALED,
	    .imm_data = htonl(IMM_VALUE), /* immediate data is big endian */
	    .wr.rdma =
		{
		    .remote_addr = t->remote.addr + REGION_WRITE * t->size,
		    .rkey = t->remote.rkey,
		},
	};
	struct ibv_wc wc;

	step(t, "(b) RDMA WRITE WITH IMMEDIATE: %zu bytes into the server's region 1, imm 0x%08x",
	     t->size, IMM_VALUE);
	why(t, "an RDMA WRITE is one-sided: we name the remote address and present the rkey, "
	       "the server's device writes its memory without the server's CPU");
	why(t, "'with immediate' also delivers a 32-bit value that consumes one of the "
	       "server's receive WRs, so the server learns, from a completion, that the data is "
	       "there");
	show(t, "remote_addr 0x%016" PRIx64 ", rkey 0x%08x", wr.wr.rdma.remote_addr,
	     wr.wr.rdma.rkey);
	if (post_send(t, &wr))
		return -1;
	return wait_completion(t, &wc, WRID_WRITE_IMM, IBV_WC_RDMA_WRITE);
}

static int server_recv_imm(struct tour *t, bool *data_ok)
{
	struct ibv_wc wc;
	uint32_t imm;

	step(t, "(b) RDMA WRITE WITH IMMEDIATE: ibv_poll_cq() for the immediate");
	why(t, "the opcode IBV_WC_RECV_RDMA_WITH_IMM and the IBV_WC_WITH_IMM flag say the "
	       "completion carries imm_data; RC ordering guarantees the written data is in place");
	if (wait_completion(t, &wc, WRID_RECV_IMM, IBV_WC_RECV_RDMA_WITH_IMM))
		return -1;
	imm = ntohl(wc.imm_data);
	show(t, "imm_data 0x%08x, wc_flags 0x%x", imm, wc.wc_flags);
	if (!(wc.wc_flags & IBV_WC_WITH_IMM)) {
		problem(t, "IBV_WC_WITH_IMM is not set in wc_flags");
		*data_ok = false;
	}
	if (imm != IMM_VALUE) {
		problem(t, "imm_data 0x%08x, expected 0x%08x", imm, IMM_VALUE);
		*data_ok = false;
	}
	if (wc.byte_len != t->size) {
		problem(t, "byte_len %u, expected the write's length %zu", wc.byte_len, t->size);
		*data_ok = false;
	}
	if (!verify_pattern(t, "RDMA WRITE data in region 1", region(t, REGION_WRITE), t->size,
			    region_seed[REGION_WRITE]))
		*data_ok = false;
	return 0;
}

static int client_read(struct tour *t, bool *data_ok)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)region(t, REGION_READ),
	    .length = (uint32_t)t->size,
	    .lkey = t->mr->lkey,
	};
	struct ibv_send_wr wr = {
	    .wr_id = WRID_READ,
	    .sg_list = &sge,
	    .num_sge = 1,
	    .opcode = IBV_WR_RDMA_READ,
	    .send_flags = IBV_SEND_SIGNALED,
	    .wr.rdma =
		{
		    .remote_addr = t->remote.addr + REGION_READ * t->size,
		    .rkey = t->remote.rkey,
		},
	};
	struct ibv_wc wc;

	step(t, "(c) RDMA READ: %zu bytes from the server's region 2 into our region 2", t->size);
	why(t, "an RDMA READ fetches remote memory; the server gets no completion and its CPU "
	       "takes no part (its device answers from the registered memory)");
	show(t, "remote_addr 0x%016" PRIx64 ", rkey 0x%08x", wr.wr.rdma.remote_addr,
	     wr.wr.rdma.rkey);
	if (post_send(t, &wr))
		return -1;
	if (wait_completion(t, &wc, WRID_READ, IBV_WC_RDMA_READ))
		return -1;
	if (!verify_pattern(t, "RDMA READ data in region 2", region(t, REGION_READ), t->size,
			    region_seed[REGION_READ]))
		*data_ok = false;
	return 0;
}

/* Both sides tell each other whether their checks passed. */
static int step_verdict(struct tour *t, bool data_ok, bool *peer_ok)
{
	char msg[MSG_LEN];
	const char *mine = data_ok ? "RESULT ok" : "RESULT fail";

	step(t, "compare results with the peer over TCP");
	if (t->is_client) {
		why(t, "the client tells the server when it is done: the server must keep its QP "
		       "and MR alive until the client's RDMA READ has completed");
		if (send_msg(t, mine) || recv_msg(t, msg))
			return -1;
	} else {
		show(t, "(meanwhile the client reads region 2; waiting for its result)");
		if (recv_msg(t, msg) || send_msg(t, mine))
			return -1;
	}
	*peer_ok = !strcmp(msg, "RESULT ok");
	show(t, "our checks: %s; peer's checks: %s", data_ok ? "passed" : "FAILED",
	     *peer_ok ? "passed" : "FAILED");
	return 0;
}

/* ------------------------------------------------------------------------
 * Teardown: the reverse of creation. Objects that others depend on go last:
 * a PD cannot be freed while a QP or MR still uses it, nor a CQ while a QP
 * sends its completions there (both fail with EBUSY).
 */

static int teardown(struct tour *t)
{
	int rc, errors = 0;

	printf("\n[%s] teardown: destroy everything in reverse order of dependency\n", t->role);
	if (t->qp) {
		rc = ibv_destroy_qp(t->qp);
		if (rc)
			errors += fail(t, "ibv_destroy_qp", rc) < 0;
		else
			show(t, "ibv_destroy_qp(): first the QP, which refers to the CQ, the PD "
				"and, through its WRs, the MR");
	}
	if (t->mr) {
		rc = ibv_dereg_mr(t->mr);
		if (rc)
			errors += fail(t, "ibv_dereg_mr", rc) < 0;
		else
			show(t, "ibv_dereg_mr(): the rkey is dead now; the buffer is ordinary "
				"memory again and can be freed");
	}
	free(t->buf);
	if (t->cq) {
		/* All events must be acked, or ibv_destroy_cq() would wait forever. */
		rc = ibv_destroy_cq(t->cq);
		if (rc)
			errors += fail(t, "ibv_destroy_cq", rc) < 0;
		else
			show(t,
			     "ibv_destroy_cq(): no QP reports to it anymore (%u event(s) were "
			     "acknowledged)",
			     t->cq_events);
	}
	if (t->channel) {
		rc = ibv_destroy_comp_channel(t->channel);
		if (rc)
			errors += fail(t, "ibv_destroy_comp_channel", rc) < 0;
		else
			show(t, "ibv_destroy_comp_channel(): after the CQ that used it");
	}
	if (t->pd) {
		rc = ibv_dealloc_pd(t->pd);
		if (rc)
			errors += fail(t, "ibv_dealloc_pd", rc) < 0;
		else
			show(t, "ibv_dealloc_pd(): empty now that its QP and MR are gone");
	}
	if (t->ctx) {
		rc = ibv_close_device(t->ctx);
		if (rc)
			errors += fail(t, "ibv_close_device", rc) < 0;
		else
			show(t, "ibv_close_device(): the context goes after all its objects");
	}
	if (t->dev_list) {
		ibv_free_device_list(t->dev_list);
		show(t, "ibv_free_device_list(): (allowed as soon as the device is opened)");
	}
	if (t->sock >= 0)
		close(t->sock);
	return errors ? -1 : 0;
}

static void usage(const char *argv0)
{
	printf("Usage:\n"
	       "  %s [options]               start the server and wait for a client\n"
	       "  %s [options] <server-host>  connect to a server\n"
	       "\n"
	       "Options (use the same -p and -s on both sides):\n"
	       "  -d <dev>   RDMA device (default: the first one)\n"
	       "  -g <idx>   GID index on port 1 (default 0)\n"
	       "  -p <port>  TCP port for the connection setup (default %d)\n"
	       "  -s <size>  bytes moved by each operation (default %d)\n"
	       "  -e         sleep on a completion channel instead of busy polling\n"
	       "  -h         this help\n",
	       argv0, argv0, DEFAULT_TCP_PORT, DEFAULT_SIZE);
}

static bool parse_num(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 0);
	return !errno && end != s && !*end && *s != '-' && *out >= min && *out <= max;
}

int main(int argc, char **argv)
{
	struct tour t = {
	    .gid_index = 0,
	    .tcp_port = DEFAULT_TCP_PORT,
	    .size = DEFAULT_SIZE,
	    .sock = -1,
	};
	bool data_ok = true, peer_ok = false;
	unsigned long v;
	int opt, rc;

	/* Line-buffer stdout so the tour reads in order even when redirected. */
	setvbuf(stdout, NULL, _IOLBF, 0);

	while ((opt = getopt(argc, argv, "d:g:p:s:eh")) != -1) {
		switch (opt) {
		case 'd':
			t.devname = optarg;
			break;
		case 'g':
			if (!parse_num(optarg, 0, 255, &v))
				goto bad_usage;
			t.gid_index = (int)v;
			break;
		case 'p':
			if (!parse_num(optarg, 1, 65535, &v))
				goto bad_usage;
			t.tcp_port = (int)v;
			break;
		case 's':
			if (!parse_num(optarg, 1, MAX_SIZE, &v))
				goto bad_usage;
			t.size = v;
			break;
		case 'e':
			t.use_events = true;
			break;
		case 'h':
			usage(argv[0]);
			return 0;
		default:
			goto bad_usage;
		}
	}
	if (optind + 1 == argc)
		t.server_host = argv[optind];
	else if (optind != argc)
		goto bad_usage;
	t.is_client = t.server_host != NULL;
	t.role = t.is_client ? "client" : "server";
	t.buf_len = NUM_REGIONS * t.size;

	printf("[%s] verbs tour: %s, %zu bytes per operation, %s\n", t.role,
	       t.is_client ? "client" : "server", t.size,
	       t.use_events ? "completion events" : "busy polling");

	/*
	 * The tour proper. Each step returns 0 or -1; "||" stops at the first
	 * failure, and teardown below cleans up whatever was created so far.
	 */
	rc = step_device_list(&t) || step_open_device(&t) || step_query_device(&t) ||
	     step_query_port(&t) || step_query_gid(&t) || step_alloc_pd(&t) ||
	     step_comp_channel(&t) || step_create_cq(&t) || step_create_qp(&t) || step_reg_mr(&t) ||
	     step_qp_init(&t) || step_post_recvs(&t) || step_choose_psn(&t) || step_exchange(&t) ||
	     step_qp_rtr(&t) || step_qp_rts(&t) || step_sync(&t);
	if (!rc && t.is_client)
		rc = client_send(&t) || client_write_imm(&t) || client_read(&t, &data_ok);
	else if (!rc)
		rc = server_recv_send(&t, &data_ok) || server_recv_imm(&t, &data_ok);
	if (!rc)
		rc = step_verdict(&t, data_ok, &peer_ok);

	if (teardown(&t))
		rc = -1;

	printf("\n");
	if (rc || !data_ok || !peer_ok) {
		printf("[%s] FAILED: %s\n", t.role,
		       rc	  ? "a step failed (see the ERROR lines above)"
		       : !data_ok ? "data did not check out"
				  : "the peer's checks failed");
		return 1;
	}
	printf("[%s] all data verified: SEND/RECV, RDMA WRITE WITH IMMEDIATE, RDMA READ\n", t.role);
	printf("OK\n");
	return 0;

bad_usage:
	usage(argv[0]);
	return 2;
}

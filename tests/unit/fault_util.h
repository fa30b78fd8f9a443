/* Helpers shared by test_peer_death.c, test_load.c and test_soak.c: opening
 * the loopback device, connecting an RC QP to a peer described by a small
 * struct (which may come from another process), CPU time and RSS.
 *
 * Only the public verbs API is used; the tests count results with CHECK
 * from rc_harness.h.
 */
#ifndef FAULT_UTIL_H
#define FAULT_UTIL_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* What one side tells the other to connect an RC QP. */
struct fu_peer {
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint64_t addr;
	uint64_t len;
	union ibv_gid gid;
	int32_t pid;
};

struct fu_qp_opts {
	enum ibv_mtu mtu;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint8_t rd_atomic;
};

static inline struct fu_qp_opts fu_default_opts(void)
{
	struct fu_qp_opts o = {
		.mtu = IBV_MTU_4096,
		.timeout = 14, /* 67 ms */
		.retry_cnt = 7,
		.rnr_retry = 7,
		.min_rnr_timer = 1,
		.rd_atomic = 16,
	};
	return o;
}

/* Open the device called name (NULL: uroce_lo, else the first one). */
static inline struct ibv_context *fu_open(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n, pick = -1;

	list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name ? name : "uroce_lo"))
			pick = i;
	if (pick < 0 && !name && n > 0)
		pick = 0;
	if (pick >= 0)
		ctx = ibv_open_device(list[pick]);
	ibv_free_device_list(list);
	return ctx;
}

static inline int fu_qp_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};

	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

/* INIT -> RTR -> RTS toward peer; my_psn is what this side sends with. */
static inline int fu_qp_rts(struct ibv_qp *qp, const struct fu_peer *peer, uint32_t my_psn,
			    const struct fu_qp_opts *o)
{
	struct ibv_qp_attr a;
	int err;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = o->mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = o->rd_atomic;
	a.min_rnr_timer = o->min_rnr_timer;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	err = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				    IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = o->timeout;
	a.retry_cnt = o->retry_cnt;
	a.rnr_retry = o->rnr_retry;
	a.sq_psn = my_psn;
	a.max_rd_atomic = o->rd_atomic;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static inline int fu_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return -1;
	return a.qp_state;
}

/* IBTA local ACK timeout with uroce's 2 ms floor (src/transport/rc.h). */
static inline double fu_timeout_s(uint8_t timeout)
{
	double t = 4.096e-6 * (double)(1ull << timeout);

	return t < 0.002 ? 0.002 : t;
}

static inline double fu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of the whole process (every thread), in seconds. */
static inline double fu_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* utime + stime from /proc/self/stat, in clock ticks. */
static inline long fu_proc_ticks(void)
{
	char buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			 &st) != 2)
		return -1;
	return (long)(ut + st);
}

/* VmRSS or VmHWM from /proc/self/status, in KiB. */
static inline long fu_status_kb(const char *field)
{
	char line[256];
	size_t fl = strlen(field);
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, fl) && line[fl] == ':') {
			v = strtol(line + fl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* Read or write exactly n bytes of a pipe; 0 on success. */
static inline int fu_xfer(int fd, void *buf, size_t n, bool wr)
{
	char *p = buf;

	while (n) {
		ssize_t r = wr ? write(fd, p, n) : read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

#endif

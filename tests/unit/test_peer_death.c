/* Peer failure: the process that owns the target QP dies.
 *
 * A forked child owns the responder QP (and its memory); the parent posts a
 * long chain of 1 MiB RDMA WRITEs, SENDs and/or READs, and the child is
 * killed with SIGKILL once the first of them has completed.  Then:
 *   - the WR in progress completes with IBV_WC_RETRY_EXC_ERR within
 *     (retry_cnt + 1) x the QP's ACK timeout (4.096 us x 2^timeout, floored
 *     at 2 ms by uroce), plus a margin, and not much sooner than retry_cnt
 *     timeouts (so the retries did happen);
 *   - every later WR, the parent's posted receives and a WR posted after
 *     the error complete with IBV_WC_WR_FLUSH_ERR, in order;
 *   - ibv_query_qp says ERR; ibv_destroy_qp and ibv_close_device return;
 *   - while the parent waits (blocked on a completion channel, not
 *     polling) the process uses little CPU: no library thread spins;
 *   - the dead child leaves nothing: its UDP ports are free again (kernel),
 *     no socket of its pid in `ss -uanp`, and its counter file is removed
 *     by the next `uroce stat` (a SIGKILLed process cannot remove it).
 * A child that exits without destroying anything (exit(0) with a context,
 * QPs and MRs open) leaves no counter file and no socket behind.
 *
 * The measured times are printed; docs/faults-results.md records them.
 */
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "rc_harness.h"
#include "fault_util.h"

#define MSG	  (1u << 20) /* bytes per WR */
#define NWR	  64	     /* WRs in the chain that is cut */
#define NRECV	  8	     /* parent's own receives, flushed at the end */
#define PBUF	  (4u * MSG) /* parent's buffer */
#define CBUF	  (2u * MSG) /* child's buffer */
#define CHILD_RQ  (NWR + 8)
#define WAIT_CAP  30.0 /* s: nothing may take longer than this */
#define MARGIN_S  1.0  /* s added to (retry_cnt + 1) x timeout (load) */
#define CPU_LIMIT 0.30 /* CPU seconds per wall second while blocked */

enum opmix { MIX_WRITE, MIX_SEND, MIX_READ, MIX_ALL };
static const char *const mix_name[] = {"WRITE", "SEND", "READ", "WRITE+SEND+READ"};

struct scen {
	enum opmix mix;
	uint8_t timeout, retry_cnt;
};

/* Written to stdout and summarised at the end. */
struct result {
	struct scen sc;
	int done_before; /* WRs completed successfully before the error */
	double limit_s, err_s, cpu_frac, destroy_s, close_s;
};

static struct result results[16];
static int nresults;

/* ---- the child: owns the target QP, answers until it is killed ---- */

/* Its objects stay reachable from here, so a sanitizer's leak check at an
 * exit(0) without clean-up does not count them (the point of that case is
 * that the process did not clean up). */
static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp[300];
	void *buf;
} child_objs;

static int child_fail(const char *what)
{
	fprintf(stderr, "child %d: %s: %s\n", (int)getpid(), what, strerror(errno));
	return 2;
}

/* nqp QPs; the first is connected to the parent's QP described on rd and
 * gets receives for SENDs.  With exit_clean the child reports its QPNs and
 * exits without destroying anything; otherwise it waits for SIGKILL. */
static int child_main(int rd, int wr, int nqp, bool exit_clean)
{
	struct fu_qp_opts o = fu_default_opts();
	struct fu_peer me = {0}, peer;
	struct ibv_qp_init_attr ia = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 16,
		    .max_recv_wr = CHILD_RQ,
		    .max_send_sge = 1,
		    .max_recv_sge = 1},
	};
	char ready = 'R';

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
	alarm((unsigned int)WAIT_CAP * 2);
	child_objs.ctx = fu_open(NULL);
	if (!child_objs.ctx)
		return child_fail("open device");
	child_objs.pd = ibv_alloc_pd(child_objs.ctx);
	child_objs.buf = aligned_alloc(4096, CBUF);
	if (!child_objs.pd || !child_objs.buf)
		return child_fail("pd/buffer");
	memset(child_objs.buf, 0x5c, CBUF);
	child_objs.mr =
	    ibv_reg_mr(child_objs.pd, child_objs.buf, CBUF,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	child_objs.cq = ibv_create_cq(child_objs.ctx, 4 * CHILD_RQ, NULL, NULL, 0);
	if (!child_objs.mr || !child_objs.cq)
		return child_fail("mr/cq");
	ia.send_cq = ia.recv_cq = child_objs.cq;
	for (int i = 0; i < nqp; i++) {
		child_objs.qp[i] = ibv_create_qp(child_objs.pd, &ia);
		if (!child_objs.qp[i] || fu_qp_init(child_objs.qp[i]))
			return child_fail("create qp");
	}
	for (int i = 0; i < CHILD_RQ; i++) {
		struct ibv_sge sge = {
		    .addr = (uintptr_t)child_objs.buf, .length = MSG, .lkey = child_objs.mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1},
				   *bad;

		if (ibv_post_recv(child_objs.qp[0], &rwr, &bad))
			return child_fail("post_recv");
	}
	if (ibv_query_gid(child_objs.ctx, 1, 0, &me.gid))
		return child_fail("query_gid");
	me.qpn = child_objs.qp[0]->qp_num;
	me.psn = 0x123456;
	me.rkey = child_objs.mr->rkey;
	me.addr = (uintptr_t)child_objs.buf;
	me.len = CBUF;
	me.pid = (int32_t)getpid();
	if (fu_xfer(wr, &me, sizeof(me), true))
		return child_fail("send info");
	if (exit_clean) {
		/* every QPN, so the parent knows every UDP port */
		for (int i = 0; i < nqp; i++)
			if (fu_xfer(wr, &child_objs.qp[i]->qp_num, sizeof(uint32_t), true))
				return child_fail("send qpn");
		if (fu_xfer(rd, &ready, 1, false))
			return child_fail("wait for the parent");
		exit(0); /* atexit handlers run; nothing is destroyed */
	}
	if (fu_xfer(rd, &peer, sizeof(peer), false))
		return child_fail("receive info");
	if (fu_qp_rts(child_objs.qp[0], &peer, me.psn, &o))
		return child_fail("connect");
	if (fu_xfer(wr, &ready, 1, true))
		return child_fail("send ready");
	for (;;)
		pause(); /* the progress thread answers WRITE/READ and takes SENDs */
}

static pid_t spawn(int *rd, int *wr, int nqp, bool exit_clean)
{
	int p2c[2], c2p[2];
	pid_t pid;

	if (pipe2(p2c, O_CLOEXEC) || pipe2(c2p, O_CLOEXEC))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(p2c[1]);
		close(c2p[0]);
		_exit(child_main(p2c[0], c2p[1], nqp, exit_clean));
	}
	close(p2c[0]);
	close(c2p[1]);
	*rd = c2p[0];
	*wr = p2c[1];
	return pid;
}

/* ---- what a dead process leaves ---- */

static const char *stats_dir(void)
{
	const char *d = getenv("UROCE_STATS_DIR");

	return d ? d : "/dev/shm";
}

/* The counter memfds pid holds (/proc/<pid>/fd -> /memfd:uroce-stats.*),
 * plus its files uroce.<pid>.* in the stats directory. */
static int stats_files(pid_t pid)
{
	char pre[64], path[128], link[256];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		char fdp[400];
		ssize_t len;

		snprintf(fdp, sizeof(fdp), "%s/%s", path, de->d_name);
		len = readlink(fdp, link, sizeof(link) - 1);
		if (len > 0 && (link[len] = 0, !strncmp(link, "/memfd:uroce-stats.", 19)))
			n++;
	}
	if (d)
		closedir(d);
	if (!*stats_dir())
		return n;
	d = opendir(stats_dir());
	if (!d)
		return n;
	snprintf(pre, sizeof(pre), "uroce.%d.", (int)pid);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, pre, strlen(pre)))
			n++;
	closedir(d);
	return n;
}

/* Is UDP port p bound by anyone?  (Try to bind it ourselves.) */
static bool udp_port_busy(uint16_t p)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(p)};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool busy;

	if (fd < 0)
		return false;
	busy = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0;
	close(fd);
	return busy;
}

/* Lines of `ss -uanp` naming pid; -1 when ss cannot run. */
static int ss_sockets_of(pid_t pid)
{
	char line[1024], key[32];
	FILE *f = popen("ss -Huanp 2>/dev/null", "r");
	int n = 0;

	if (!f)
		return -1;
	snprintf(key, sizeof(key), "pid=%d,", (int)pid);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, key))
			n++;
	return pclose(f) == 0 ? n : -1;
}

static void run_uroce_stat(void)
{
	const char *bd = getenv("UROCE_BUILD_DIR");
	char cmd[1024], exe[512];
	ssize_t n;
	int rc;

	if (bd) {
		snprintf(cmd, sizeof(cmd), "'%s/bin/uroce' stat >/dev/null 2>&1", bd);
	} else {
		/* a manual run: the binary is in <build>/tests */
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = 0;
		if (strrchr(exe, '/'))
			*strrchr(exe, '/') = 0;
		snprintf(cmd, sizeof(cmd), "'%s/../bin/uroce' stat >/dev/null 2>&1", exe);
	}
	rc = system(cmd);
	CHECK(rc == 0, "'%s' exited %d", cmd, rc);
}

/* ---- the parent ---- */

struct parent {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t *buf;
	struct ibv_mr *mr;
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
};

static int parent_open(struct parent *p, const struct fu_qp_opts *o, struct fu_peer *me)
{
	struct ibv_qp_init_attr ia = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = NWR + 16,
		    .max_recv_wr = NRECV,
		    .max_send_sge = 1,
		    .max_recv_sge = 1},
	    .sq_sig_all = 1,
	};

	(void)o;
	memset(p, 0, sizeof(*p));
	p->ctx = fu_open(NULL);
	if (!p->ctx)
		return -1;
	p->pd = ibv_alloc_pd(p->ctx);
	p->buf = aligned_alloc(4096, PBUF);
	if (!p->pd || !p->buf)
		return -1;
	p->mr =
	    ibv_reg_mr(p->pd, p->buf, PBUF,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	p->ch = ibv_create_comp_channel(p->ctx);
	if (!p->mr || !p->ch)
		return -1;
	p->scq = ibv_create_cq(p->ctx, 2 * NWR + 64, NULL, p->ch, 0);
	p->rcq = ibv_create_cq(p->ctx, NRECV + 4, NULL, NULL, 0);
	if (!p->scq || !p->rcq)
		return -1;
	ia.send_cq = p->scq;
	ia.recv_cq = p->rcq;
	p->qp = ibv_create_qp(p->pd, &ia);
	if (!p->qp || fu_qp_init(p->qp) || ibv_query_gid(p->ctx, 1, 0, &me->gid))
		return -1;
	me->qpn = p->qp->qp_num;
	me->psn = 0xfffff0; /* the cut chain crosses the PSN wrap */
	me->rkey = p->mr->rkey;
	me->addr = (uintptr_t)p->buf;
	me->len = PBUF;
	me->pid = (int32_t)getpid();
	return 0;
}

/* Block on the completion channel until n send completions are in wc or
 * the deadline passes; *t_first_err gets the time the first error
 * completion was seen.  Returns the count. */
static int wait_send_wcs(struct parent *p, struct ibv_wc *wc, int n, double deadline,
			 double *t_first_err)
{
	int got = 0;

	*t_first_err = 0;
	while (got < n) {
		struct pollfd pfd = {.fd = p->ch->fd, .events = POLLIN};
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		int r, ms;

		/* arm first, then drain: nothing can slip between the two */
		if (ibv_req_notify_cq(p->scq, 0))
			break;
		while (got < n && (r = ibv_poll_cq(p->scq, n - got, wc + got)) > 0) {
			for (int i = got; i < got + r; i++)
				if (wc[i].status != IBV_WC_SUCCESS && !*t_first_err)
					*t_first_err = fu_now();
			got += r;
		}
		if (got >= n)
			break;
		ms = (int)((deadline - fu_now()) * 1000);
		if (ms <= 0)
			break;
		if (poll(&pfd, 1, ms) <= 0)
			continue;
		if (!ibv_get_cq_event(p->ch, &ev_cq, &ev_ctx))
			ibv_ack_cq_events(ev_cq, 1);
	}
	return got;
}

static void post_chain(struct parent *p, const struct fu_peer *child, enum opmix mix, int n,
		       uint64_t id0)
{
	static const enum ibv_wr_opcode all[] = {IBV_WR_RDMA_WRITE, IBV_WR_SEND, IBV_WR_RDMA_READ};
	struct ibv_send_wr *wr = calloc((size_t)n, sizeof(*wr)), *bad;
	struct ibv_sge *sge = calloc((size_t)n, sizeof(*sge));
	int err;

	for (int i = 0; i < n; i++) {
		enum ibv_wr_opcode op = mix == MIX_ALL ? all[i % 3] : all[mix];

		/* READs land in the upper half, sources are in the lower */
		sge[i].addr = (uintptr_t)p->buf + (op == IBV_WR_RDMA_READ ? 2 * MSG : 0);
		sge[i].length = MSG;
		sge[i].lkey = p->mr->lkey;
		wr[i].wr_id = id0 + (uint64_t)i;
		wr[i].opcode = op;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].wr.rdma.remote_addr = child->addr;
		wr[i].wr.rdma.rkey = child->rkey;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	err = ibv_post_send(p->qp, wr, &bad);
	CHECK(!err, "post_send chain: %s", strerror(err));
	free(wr);
	free(sge);
}

/* A WRITE and a READ back of 64 KiB: the connection works. */
static bool warm_up(struct parent *p, const struct fu_peer *child)
{
	struct ibv_sge s1 = {.addr = (uintptr_t)p->buf, .length = 65536, .lkey = p->mr->lkey};
	struct ibv_sge s2 = {.addr = (uintptr_t)p->buf + MSG, .length = 65536, .lkey = p->mr->lkey};
	struct ibv_send_wr w2 = {.wr_id = 2,
				 .sg_list = &s2,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_READ,
				 .wr.rdma = {.remote_addr = child->addr, .rkey = child->rkey}};
	struct ibv_send_wr w1 = {.wr_id = 1,
				 .sg_list = &s1,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .next = &w2,
				 .wr.rdma = {.remote_addr = child->addr, .rkey = child->rkey}};
	struct ibv_send_wr *bad;
	struct ibv_wc wc[2];
	double t_err;

	fill_pattern(p->buf, 65536, 99);
	memset(p->buf + MSG, 0, 65536);
	if (ibv_post_send(p->qp, &w1, &bad))
		return false;
	if (wait_send_wcs(p, wc, 2, fu_now() + 10, &t_err) != 2)
		return false;
	return wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS &&
	       !memcmp(p->buf, p->buf + MSG, 65536);
}

static void parent_close(struct parent *p, struct result *res)
{
	double t;
	int err;

	t = fu_now();
	err = p->qp ? ibv_destroy_qp(p->qp) : 0;
	res->destroy_s = fu_now() - t;
	CHECK(!err, "destroy_qp: %s", strerror(err));
	if (p->scq)
		ibv_destroy_cq(p->scq);
	if (p->rcq)
		ibv_destroy_cq(p->rcq);
	if (p->ch)
		ibv_destroy_comp_channel(p->ch);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	t = fu_now();
	err = p->ctx ? ibv_close_device(p->ctx) : 0;
	res->close_s = fu_now() - t;
	CHECK(!err, "close_device: %s", strerror(err));
	CHECK(res->destroy_s < 1.0 && res->close_s < 1.0, "destroy %.3f s, close %.3f s",
	      res->destroy_s, res->close_s);
	free(p->buf);
}

/* The library's log (stderr) while the dead peer's WR fails, in a file. */
static FILE *log_capture_start(int *saved)
{
	FILE *f = tmpfile();

	fflush(stderr);
	*saved = f ? dup(2) : -1;
	if (*saved < 0 || dup2(fileno(f), 2) < 0) {
		CHECK(0, "log capture: %s", strerror(errno));
		if (f)
			fclose(f);
		return NULL;
	}
	return f;
}

/* The warning a RETRY_EXC_ERR leaves (req.c uroce_req_retry_exceeded): the
 * retries spent, and how long the peer had said nothing - at least the
 * last timeout (any response would have started it over; the time to the
 * error as this thread sees it may be longer on a loaded machine)
 * (docs/selective-repeat.md, "Session 20, helper rex20"). */
static void log_capture_check(FILE *f, int saved, const struct scen *sc)
{
	double T_ms = fu_timeout_s(sc->timeout) * 1e3;
	char line[1024], want[96];
	unsigned long ms = 0;
	bool seen = false;

	if (!f)
		return;
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	snprintf(want, sizeof(want), "transport retry counter exceeded (%u tries without progress)",
		 sc->retry_cnt + 1u);
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		const char *m = strstr(line, want),
			   *r = m ? strstr(m, "last response from QP") : NULL;

		fputs(line, stderr); /* (as it would have appeared) */
		if (r && sscanf(r, "last response from QP %*x %lu ms ago", &ms) == 1)
			seen = true;
	}
	fclose(f);
	CHECK(seen, "%s: no warning \"%s ... last response from QP ... ms ago\"", mix_name[sc->mix],
	      want);
	CHECK(!seen || (double)ms + 1 >= T_ms * 0.9,
	      "%s: last response %lu ms before the error, less than a timeout (%.1f ms)",
	      mix_name[sc->mix], ms, T_ms);
}

/* One try of a scenario.  Returns false, having checked nothing, when the
 * connection already failed before the kill (a scheduling stall longer than
 * the short timeouts some scenarios use, on a loaded machine): the caller
 * tries again. */
static bool peer_death_try(const struct scen *sc, struct result *res, int attempt, bool last)
{
	struct fu_qp_opts o = fu_default_opts();
	struct fu_peer me, child;
	struct parent p;
	struct ibv_wc wc[NWR + 1], rwc[NRECV];
	double t_kill, t_err, cpu0, cpu, t_end, T = fu_timeout_s(sc->timeout);
	int rd = -1, wr = -1, status = 0, got, k, nerr = 0, nflush = 0, nrecv = 0;
	char ready;
	pid_t pid;
	unsigned int f0 = failed;
	FILE *cap;
	int saved;
	bool ok;

	memset(res, 0, sizeof(*res));
	res->sc = *sc;
	res->limit_s = (sc->retry_cnt + 1) * T;
	o.timeout = sc->timeout;
	o.retry_cnt = sc->retry_cnt;
	o.rnr_retry = 7;
	pid = spawn(&rd, &wr, 1, false);
	CHECK(pid > 0, "fork: %s", strerror(errno));
	if (pid <= 0)
		return true;
	if (parent_open(&p, &o, &me) || fu_xfer(rd, &child, sizeof(child), false) ||
	    fu_xfer(wr, &me, sizeof(me), true) || fu_xfer(rd, &ready, 1, false) ||
	    fu_qp_rts(p.qp, &child, me.psn, &o)) {
		CHECK(0, "%s: setup failed: %s", mix_name[sc->mix], strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		parent_close(&p, res);
		return true;
	}
	ok = warm_up(&p, &child);
	for (int i = 0; i < NRECV; i++) {
		struct ibv_sge sge = {
		    .addr = (uintptr_t)p.buf + 3 * MSG, .length = 4096, .lkey = p.mr->lkey};
		struct ibv_recv_wr rwr = {.wr_id = 1000 + (uint64_t)i,
					  .sg_list = &sge,
					  .num_sge = 1},
				   *bad;

		CHECK(!ibv_post_recv(p.qp, &rwr, &bad), "post_recv");
	}

	/* the chain; the child dies once the first WR has completed */
	if (ok) {
		post_chain(&p, &child, sc->mix, NWR, 100);
		got = wait_send_wcs(&p, wc, 1, fu_now() + WAIT_CAP, &t_err);
		ok = got == 1 && wc[0].status == IBV_WC_SUCCESS;
	}
	kill(pid, SIGKILL);
	t_kill = fu_now();
	cpu0 = fu_cpu();
	CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	      "child status 0x%x", status);
	if (!ok && !last) {
		printf("%-16s timeout %2u retry_cnt %u: the connection failed before the kill "
		       "(try %d; a stall longer than %u x %.1f ms): again\n",
		       mix_name[sc->mix], sc->timeout, sc->retry_cnt, attempt, sc->retry_cnt + 1,
		       T * 1e3);
		parent_close(&p, res);
		close(rd);
		close(wr);
		return false;
	}
	CHECK(ok, "%s: the warm-up or the first WR failed before the kill", mix_name[sc->mix]);
	if (!ok) {
		parent_close(&p, res);
		close(rd);
		close(wr);
		return true;
	}

	cap = log_capture_start(&saved);
	got = 1 + wait_send_wcs(&p, wc + 1, NWR - 1, t_kill + WAIT_CAP, &t_err);
	t_end = fu_now();
	log_capture_check(cap, saved, sc);
	cpu = fu_cpu() - cpu0;
	res->cpu_frac = cpu / (t_end - t_kill);
	CHECK(got == NWR, "%s: %d of %d completions after %.1f s", mix_name[sc->mix], got, NWR,
	      t_end - t_kill);

	/* in order: successes, one RETRY_EXC_ERR, flushes */
	for (k = 0; k < got && wc[k].status == IBV_WC_SUCCESS; k++)
		;
	res->done_before = k;
	for (int i = 0; i < got; i++) {
		CHECK(wc[i].wr_id == 100 + (uint64_t)i, "wc %d: wr_id %llu", i,
		      (unsigned long long)wc[i].wr_id);
		CHECK(wc[i].qp_num == p.qp->qp_num, "wc %d: qp_num", i);
		if (i < k)
			continue;
		if (i == k) {
			nerr += wc[i].status == IBV_WC_RETRY_EXC_ERR;
			CHECK(wc[i].status == IBV_WC_RETRY_EXC_ERR, "%s: wc %d: %s, want %s",
			      mix_name[sc->mix], i, ibv_wc_status_str(wc[i].status),
			      ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR));
		} else {
			nflush += wc[i].status == IBV_WC_WR_FLUSH_ERR;
		}
	}
	CHECK(k < NWR, "%s: every WR succeeded: the kill came too late", mix_name[sc->mix]);
	CHECK(nerr == 1 && nflush == got - k - 1, "%s: %d retry-exceeded, %d of %d flushed",
	      mix_name[sc->mix], nerr, nflush, got - k - 1);
	res->err_s = t_err ? t_err - t_kill : -1;
	CHECK(t_err && res->err_s <= res->limit_s + MARGIN_S,
	      "%s: error after %.3f s, timeout x (retry_cnt + 1) = %.3f s", mix_name[sc->mix],
	      res->err_s, res->limit_s);
	/* the retries did happen: not sooner than retry_cnt timeouts (minus the
	 * time between the last ACK and the kill, at most one timeout) */
	CHECK(!t_err || res->err_s >= (sc->retry_cnt - 1) * T * 0.9,
	      "%s: error already after %.3f s (retry_cnt %u x %.3f s)", mix_name[sc->mix],
	      res->err_s, sc->retry_cnt, T);
	/* blocked in poll(2) on the channel: what CPU is used is the library's
	 * retransmissions (a window of packets per timeout) */
	CHECK(cpu < CPU_LIMIT * (t_end - t_kill) + 0.01, "%s: %.3f CPU s in %.3f s blocked",
	      mix_name[sc->mix], cpu, t_end - t_kill);
	CHECK(fu_qp_state(p.qp) == IBV_QPS_ERR, "%s: QP state %d, want ERR", mix_name[sc->mix],
	      fu_qp_state(p.qp));

	/* the receives flush; so does a WR posted now */
	for (double end = fu_now() + 5; nrecv < NRECV && fu_now() < end;) {
		int r = ibv_poll_cq(p.rcq, NRECV - nrecv, rwc + nrecv);

		nrecv += r > 0 ? r : 0;
	}
	CHECK(nrecv == NRECV, "%d of %d receives flushed", nrecv, NRECV);
	for (int i = 0; i < nrecv; i++)
		CHECK(rwc[i].status == IBV_WC_WR_FLUSH_ERR && rwc[i].wr_id == 1000 + (uint64_t)i,
		      "recv wc %d: %s", i, ibv_wc_status_str(rwc[i].status));
	post_chain(&p, &child, MIX_WRITE, 1, 500);
	CHECK(wait_send_wcs(&p, wc, 1, fu_now() + 5, &t_err) == 1 &&
		  wc[0].status == IBV_WC_WR_FLUSH_ERR && wc[0].wr_id == 500,
	      "a WR posted in ERR is not flushed");

	/* idle now: the process must sleep */
	{
		long t0 = fu_proc_ticks();
		double c0 = fu_cpu();

		usleep(300000);
		CHECK(fu_cpu() - c0 < 0.03, "%.3f CPU s in 0.3 s idle in ERR", fu_cpu() - c0);
		CHECK(fu_proc_ticks() - t0 <= 3, "%ld ticks in /proc/self/stat in 0.3 s idle",
		      fu_proc_ticks() - t0);
	}
	parent_close(&p, res);
	close(rd);
	close(wr);

	/* what the dead child left: no sockets; its counter file until
	 * `uroce stat` removes it */
	CHECK(!udp_port_busy((uint16_t)(child.qpn >> 8)), "child's UDP port %u still bound",
	      child.qpn >> 8);
	CHECK(ss_sockets_of(pid) <= 0, "ss -uanp still shows sockets of pid %d", (int)pid);
	run_uroce_stat();
	CHECK(stats_files(pid) == 0, "%d counter files of the killed pid %d after uroce stat",
	      stats_files(pid), (int)pid);
	printf("%-16s timeout %2u (%7.3f ms) retry_cnt %u: %2d WRs done, RETRY_EXC_ERR after "
	       "%7.3f s (limit %.3f s), %2.0f%% CPU, destroy %.1f ms, close %.1f ms: %s\n",
	       mix_name[sc->mix], sc->timeout, T * 1e3, sc->retry_cnt, res->done_before, res->err_s,
	       res->limit_s, res->cpu_frac * 100, res->destroy_s * 1e3, res->close_s * 1e3,
	       failed == f0 ? "ok" : "FAILED");
	fflush(stdout);
	return true;
}

static void peer_death(const struct scen *sc)
{
	struct result *res = &results[nresults++];

	for (int i = 1; !peer_death_try(sc, res, i, i == 3); i++)
		;
}

/* A process that exits (or is killed) with everything open. */
static void dies_dirty(bool killed)
{
	const int nqp = 300; /* two UDP endpoints */
	uint32_t qpn[300];
	struct fu_peer child;
	int rd, wr, status = 0, files_alive = -1;
	char go = 'G';
	pid_t pid = spawn(&rd, &wr, nqp, true);
	bool ok;

	CHECK(pid > 0, "fork");
	if (pid <= 0)
		return;
	ok = !fu_xfer(rd, &child, sizeof(child), false);
	for (int i = 0; ok && i < nqp; i++)
		ok = !fu_xfer(rd, &qpn[i], sizeof(qpn[i]), false);
	CHECK(ok, "child setup failed");
	if (ok) {
		files_alive = stats_files(pid);
		CHECK(udp_port_busy((uint16_t)(qpn[0] >> 8)) &&
			  udp_port_busy((uint16_t)(qpn[nqp - 1] >> 8)),
		      "the live child's ports are not bound");
		CHECK(ss_sockets_of(pid) != 0, "ss -uanp shows no socket of the live child");
	}
	if (killed)
		kill(pid, SIGKILL);
	else
		fu_xfer(wr, &go, 1, true);
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	if (killed)
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);
	else
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit status 0x%x",
		      status);
	close(rd);
	close(wr);
	for (int i = 0; ok && i < nqp; i += nqp - 1)
		CHECK(!udp_port_busy((uint16_t)(qpn[i] >> 8)), "port %u of the dead child bound",
		      qpn[i] >> 8);
	CHECK(ss_sockets_of(pid) <= 0, "ss -uanp still shows sockets of pid %d", (int)pid);
	if (killed) {
		/* a memfd goes with the process; a file in UROCE_STATS_DIR
		 * outlives a SIGKILL (unless a `uroce stat` running elsewhere
		 * on this host removed it already): `uroce stat` sees the pid
		 * is gone and removes it */
		CHECK(getenv("UROCE_STATS_DIR") || stats_files(pid) == 0,
		      "SIGKILL: %d counter memfd/file(s) of pid %d left", stats_files(pid),
		      (int)pid);
		if (*stats_dir() && files_alive > 0)
			printf("SIGKILLed child: %d of its %d counter file(s) left before uroce "
			       "stat\n",
			       stats_files(pid), files_alive);
		run_uroce_stat();
	}
	CHECK(stats_files(pid) == 0, "%s: %d counter files of pid %d left",
	      killed ? "SIGKILL + uroce stat" : "exit(0)", stats_files(pid), (int)pid);
	printf("child with %d QPs %s without clean-up: %d counter file(s) while alive, none "
	       "after; ports %u and %u free again; no socket in ss -uanp\n",
	       nqp, killed ? "SIGKILLed" : "exited", files_alive, qpn[0] >> 8, qpn[nqp - 1] >> 8);
}

int main(void)
{
	static const struct scen scens[] = {
	    {MIX_WRITE, 10, 3}, {MIX_SEND, 10, 3}, {MIX_READ, 10, 3}, {MIX_ALL, 1, 6},
	    {MIX_ALL, 14, 0},	{MIX_ALL, 14, 2},  {MIX_ALL, 16, 1},  {MIX_ALL, 10, 7},
	};

	const char *only = getenv("PEER_DEATH_ONLY"); /* a scenario index, for debugging */

	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(110); /* ctest's limit is 120 s */
	for (unsigned int i = 0; i < sizeof(scens) / sizeof(scens[0]); i++)
		if (!only || atoi(only) == (int)i)
			peer_death(&scens[i]);
	if (!only) {
		dies_dirty(false);
		dies_dirty(true);
	}
	return finish("test_peer_death");
}

/* Unit tests of packet capture (src/net/pcap.c) and of the shared-memory
 * counters (src/core/stats.c), on a context that has no sockets: file
 * naming, the pcap records byte by byte (headers and checksums computed
 * here independently), the counter file's header, names, QP slots and
 * removal. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "uroce.h"
#include "net/pcap.h"

#include "check.h"

static char tmpdir[] = "/tmp/uroce-unit-XXXXXX";

static void test_paths(void)
{
	static const struct {
		const char *spec;
		unsigned int seq;
		const char *want;
	} c[] = {
	    {"/tmp/x.%p.pcap", 0, "/tmp/x.42.pcap"},
	    {"/tmp/x.%p.pcap", 2, "/tmp/x.42-2.pcap"},
	    {"/tmp/x.pcap", 0, "/tmp/x.42.pcap"},
	    {"/tmp/x.pcap", 1, "/tmp/x.42-1.pcap"},
	    {"/tmp/x", 0, "/tmp/x.42"},
	    {"/tmp/x", 3, "/tmp/x.42-3"},
	    {"%p-%%.pcap", 0, "42-%.pcap"},
	    {"a%pb%p", 0, "a42b42"},
	};
	char out[64];

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int r = uroce_pcap_path(c[i].spec, 42, c[i].seq, out, sizeof(out));

		CHECK(!r && !strcmp(out, c[i].want), "%s seq %u: got '%s' (%d), want '%s'",
		      c[i].spec, c[i].seq, r ? "" : out, r, c[i].want);
	}
	CHECK(uroce_pcap_path("/tmp/a-very-long-name.pcap", 123456, 0, out, 16) == -ENAMETOOLONG,
	      "a name that does not fit is refused");
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t sum16(uint32_t s, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += get16(p + i);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

static struct uroce_dev dev = {.ifname = "lo"};
static struct ibv_device ibdev = {.name = "uroce_test"};

static struct uroce_ctx *new_ctx(void)
{
	struct uroce_ctx *ctx = calloc(1, sizeof(*ctx));

	ctx->dev = &dev;
	ctx->vctx.context.device = &ibdev;
	return ctx;
}

static void test_pcap_file(void)
{
	struct uroce_ctx *ctx = new_ctx();
	struct uroce_ipinfo ip = {.family = AF_INET, .sport = 0x1234, .dport = 0xc0de};
	uint8_t pkt[21], buf[512];
	char spec[128], path[128];
	const uint8_t *r, *iph, *udp;
	uint32_t v;
	ssize_t n;
	int fd;

	for (size_t i = 0; i < sizeof(pkt); i++)
		pkt[i] = (uint8_t)(i * 7 + 1);
	inet_pton(AF_INET, "10.1.2.3", &ip.src.v4);
	inet_pton(AF_INET, "10.4.5.6", &ip.dst.v4);
	snprintf(spec, sizeof(spec), "%s/cap.%%p.pcap", tmpdir);
	setenv("UROCE_PCAP", spec, 1);
	uroce_pcap_open(ctx);
	CHECK(ctx->pcap != NULL, "capture on with UROCE_PCAP set");
	if (!ctx->pcap) {
		free(ctx);
		return;
	}
	uroce_pcap(ctx, UROCE_PCAP_TX, &ip, pkt, sizeof(pkt));
	ip.ipid = 3; /* segment 3 of a GSO batch */
	uroce_pcap(ctx, UROCE_PCAP_RX, &ip, pkt, 4);
	uroce_pcap_close(ctx);
	CHECK(ctx->pcap == NULL, "capture off after close");
	unsetenv("UROCE_PCAP");

	uroce_pcap_path(spec, (int)getpid(), 0, path, sizeof(path));
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0, "%s exists", path);
	if (fd < 0) {
		free(ctx);
		return;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	/* 24 global + 2 x (16 record + 16 SLL + 20 IPv4 + 8 UDP) + 21 + 4 */
	CHECK(n == 24 + 2 * 60 + 21 + 4, "file size %zd", n);
	memcpy(&v, buf, 4);
	CHECK(v == 0xa1b23c4d, "nanosecond pcap magic 0x%x", v);
	memcpy(&v, buf + 20, 4);
	CHECK(v == 113, "link type LINUX_SLL, got %u", v);
	r = buf + 24;
	memcpy(&v, r + 8, 4);
	CHECK(v == 16 + 20 + 8 + 21, "captured length %u", v);
	CHECK(get16(r + 16) == 4 && get16(r + 16 + 14) == 0x0800, "SLL: sent by us, IPv4");
	iph = r + 32;
	udp = iph + 20;
	CHECK(iph[0] == 0x45 && get16(iph + 2) == 20 + 8 + 21 && get16(iph + 4) == 0 &&
		  get16(iph + 6) == 0x4000 && iph[8] == 64 && iph[9] == 17,
	      "IPv4: IHL 5, length, ID 0, DF, TTL 64, UDP");
	CHECK(fold(sum16(0, iph, 20)) == 0xffff, "IPv4 header checksum verifies");
	CHECK(!memcmp(iph + 12, &ip.src.v4, 4) && !memcmp(iph + 16, &ip.dst.v4, 4), "addresses");
	CHECK(get16(udp) == 0x1234 && get16(udp + 2) == 0xc0de && get16(udp + 4) == 8 + 21,
	      "UDP ports and length");
	{
		uint32_t s = sum16(0, iph + 12, 8) + 17 + 8 + 21;

		s = sum16(s, udp, 8 + 21);
		CHECK(get16(udp + 6) != 0 && fold(s) == 0xffff, "UDP checksum verifies");
	}
	CHECK(!memcmp(udp + 8, pkt, sizeof(pkt)), "packet bytes follow the UDP header");
	r = buf + 24 + 60 + 21;
	CHECK(get16(r + 16) == 0, "second record: to us");
	CHECK(get16(r + 32 + 4) == 3 && fold(sum16(0, r + 32, 20)) == 0xffff,
	      "second record: IPv4 ID 3, checksum verifies");
	unlink(path);
	free(ctx);
}

/* ---- counters ---- */

static int count_files(const char *prefix)
{
	struct dirent *de;
	DIR *d = opendir(tmpdir);
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, prefix, strlen(prefix)))
			n++;
	closedir(d);
	return n;
}

static void test_stats(void)
{
	struct uroce_ctx *ctx = new_ctx(), *ctx2 = new_ctx();
	struct uroce_qp *qp = calloc(1, sizeof(*qp));
	struct uroce_stats_qp *extra[UROCE_STATS_MAX_QP];
	const struct uroce_stats_hdr *h;
	const struct uroce_stats_name *names;
	char path[256], prefix[64];
	struct stat sb;
	void *m;
	int fd, r;

	setenv("UROCE_STATS_DIR", tmpdir, 1);
	r = uroce_stats_open(ctx);
	CHECK(!r && ctx->cnt && ctx->stats, "stats open: %d", r);
	r = uroce_stats_open(ctx2);
	CHECK(!r, "second context: %d", r);
	snprintf(prefix, sizeof(prefix), "uroce.%d.", (int)getpid());
	CHECK(count_files(prefix) == 2, "one file per context: %d", count_files(prefix));

	uroce_count(ctx, tx_pkts, 3);
	uroce_count(ctx, fault_drop, 1);
	qp->ctx = ctx;
	qp->stats = uroce_stats_qp_add(ctx);
	qp->ibqp.qp_base.qp_num = 0xabcd01;
	qp->init.qp_type = IBV_QPT_RC;
	qp->attr.qp_state = IBV_QPS_RTS;
	qp->attr.dest_qp_num = 0x1234ff;
	uroce_stats_qp_update(qp);
	uroce_qp_count(qp, retransmits, 5);
	uroce_qp_stat(qp, rx_bytes, 100);
	uroce_stats_wc_err(qp, IBV_WC_RETRY_EXC_ERR);
	uroce_stats_wc_err(qp, IBV_WC_WR_FLUSH_ERR);

	snprintf(path, sizeof(path), "%s/uroce.%d.%u", tmpdir, (int)getpid(), 0u);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0 && !fstat(fd, &sb), "%s readable", path);
	if (fd < 0)
		return;
	CHECK((sb.st_mode & 0777) == 0644, "mode 0%o", sb.st_mode & 0777);
	m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	CHECK(m != MAP_FAILED, "mmap");
	if (m == MAP_FAILED)
		return;
	h = m;
	names = (const void *)((const char *)m + h->names_off);
	CHECK(h->magic == UROCE_STATS_MAGIC && h->version == UROCE_STATS_VERSION,
	      "magic and version");
	CHECK(h->pid == getpid() && h->ctx_seq == 0 && !strcmp(h->dev_name, "uroce_test") &&
		  !strcmp(h->ifname, "lo"),
	      "pid %d seq %u dev %s if %s", h->pid, h->ctx_seq, h->dev_name, h->ifname);
	CHECK(h->n_dev == UROCE_STATS_N_DEV && h->n_qp == UROCE_STATS_N_QP &&
		  h->max_qp == UROCE_STATS_MAX_QP && h->file_size <= (uint64_t)sb.st_size,
	      "sizes");
	CHECK(!strcmp(names[0].name, "sent_pkts") && !strcmp(names[2].name, "rcvd_pkts") &&
		  !strcmp(names[UROCE_STATS_N_DEV].name, "sent_pkts"),
	      "names: %s %s %s", names[0].name, names[2].name, names[UROCE_STATS_N_DEV].name);
	{
		const uint64_t *dc = (const void *)((const char *)m + h->dev_off);
		const uint8_t *slot = (const uint8_t *)m + h->qp_off;
		const uint64_t *qc = (const void *)(slot + h->qp_cnt_off);
		int i_retx = -1, i_fault = -1, i_retry_exc = -1, i_wc_err = -1, i_rxb = -1;

		for (unsigned i = 0; i < h->n_dev; i++) {
			if (!strcmp(names[i].name, "retransmitted_pkts"))
				i_retx = (int)i;
			if (!strcmp(names[i].name, "fault_drop"))
				i_fault = (int)i;
			if (!strcmp(names[i].name, "retry_exceeded_err"))
				i_retry_exc = (int)i;
			if (!strcmp(names[i].name, "completion_err"))
				i_wc_err = (int)i;
			if (!strcmp(names[i].name, "rcvd_bytes"))
				i_rxb = (int)i;
		}
		CHECK(i_retx >= 0 && i_fault >= 0 && i_retry_exc >= 0 && i_wc_err >= 0,
		      "rxe-style names present");
		CHECK(dc[0] == 3 && dc[i_retx] == 5 && dc[i_fault] == 1 && dc[i_retry_exc] == 1 &&
			  dc[i_wc_err] == 1 && dc[i_rxb] == 0,
		      "device counters: %lu %lu %lu %lu %lu %lu", (unsigned long)dc[0],
		      (unsigned long)dc[i_retx], (unsigned long)dc[i_fault],
		      (unsigned long)dc[i_retry_exc], (unsigned long)dc[i_wc_err],
		      (unsigned long)dc[i_rxb]);
		CHECK(h->qp_hwm == 1 && h->nqp == 1, "one QP: hwm %u nqp %u", h->qp_hwm, h->nqp);
		CHECK(*(const uint32_t *)slot == 0xabcd01 && ((const uint32_t *)slot)[1] == 3 &&
			  ((const uint32_t *)slot)[2] == IBV_QPT_RC &&
			  ((const uint32_t *)slot)[3] == 0x1234ff,
		      "slot: QPN, state, type, dest");
		CHECK(qc[i_retx] == 5 && qc[i_rxb] == 100 && qc[i_retry_exc] == 1,
		      "QP counters: retx %lu rx bytes %lu", (unsigned long)qc[i_retx],
		      (unsigned long)qc[i_rxb]);

		/* fill the table: QP number max_qp + 1 has no slot */
		for (int i = 0; i < UROCE_STATS_MAX_QP; i++)
			extra[i] = uroce_stats_qp_add(ctx);
		CHECK(h->qp_hwm == UROCE_STATS_MAX_QP && h->qp_untracked == 1 &&
			  h->nqp == UROCE_STATS_MAX_QP + 1,
		      "full table: hwm %u untracked %u", h->qp_hwm, h->qp_untracked);
		for (int i = 0; i < UROCE_STATS_MAX_QP; i++)
			uroce_stats_qp_del(ctx, extra[i]);
		CHECK(h->qp_untracked == 0 && h->nqp == 1, "all freed: untracked %u nqp %u",
		      h->qp_untracked, h->nqp);
		uroce_stats_qp_del(ctx, qp->stats);
		CHECK(*(const uint32_t *)slot == 0 && qc[i_retx] == 0 && h->nqp == 0,
		      "a freed slot is zeroed");
	}
	munmap(m, (size_t)sb.st_size);
	uroce_stats_close(ctx);
	CHECK(ctx->cnt == NULL && count_files(prefix) == 1, "close removes the file");
	uroce_stats_close(ctx2);
	CHECK(count_files(prefix) == 0, "no file left");

	/* no usable directory: private counters, same interface */
	setenv("UROCE_STATS_DIR", "/nonexistent-uroce-dir", 1);
	r = uroce_stats_open(ctx);
	CHECK(!r && ctx->cnt, "private fallback: %d", r);
	uroce_count(ctx, tx_pkts, 1);
	uroce_stats_close(ctx);
	unsetenv("UROCE_STATS_DIR");
	free(qp);
	free(ctx);
	free(ctx2);
}

/* The fd of this process's memfd whose name starts uroce-stats., or -1. */
static int find_memfd(int skip)
{
	struct dirent *de;
	DIR *d = opendir("/proc/self/fd");
	int found = -1;

	while (d && found < 0 && (de = readdir(d))) {
		char p[300], t[256];
		ssize_t n;

		snprintf(p, sizeof(p), "/proc/self/fd/%s", de->d_name);
		n = readlink(p, t, sizeof(t) - 1);
		if (n > 0 && (t[n] = 0, !strncmp(t, "/memfd:" UROCE_STATS_MEMFD, 19)) &&
		    atoi(de->d_name) != skip)
			found = atoi(de->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

static int shm_files(pid_t pid)
{
	char pre[64];
	struct dirent *de;
	DIR *d = opendir("/dev/shm");
	int n = 0;

	snprintf(pre, sizeof(pre), "uroce.%d.", (int)pid);
	while (d && (de = readdir(d)))
		n += !strncmp(de->d_name, pre, strlen(pre));
	if (d)
		closedir(d);
	return n;
}

/* The default: a memfd that a reader opens through /proc/<pid>/fd, and that
 * the kernel frees with the process - even after SIGKILL nothing is left. */
static void test_stats_memfd(void)
{
	struct uroce_ctx *ctx = new_ctx();
	const struct uroce_stats_hdr *h;
	char path[64];
	struct stat sb;
	int fd, rfd, sync[2];
	pid_t pid;
	void *m;

	unsetenv("UROCE_STATS_DIR");
	CHECK(find_memfd(-1) < 0, "no memfd before open");
	CHECK(!uroce_stats_open(ctx) && ctx->cnt, "stats open");
	fd = find_memfd(-1);
	CHECK(fd >= 0, "a uroce-stats memfd in /proc/self/fd");
	CHECK(shm_files(getpid()) == 0, "nothing in /dev/shm");
	if (fd >= 0) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		rfd = open(path, O_RDONLY | O_CLOEXEC); /* what `uroce stat` does */
		CHECK(rfd >= 0 && !fstat(rfd, &sb), "reopen %s", path);
		m = rfd >= 0 ? mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, rfd, 0)
			     : MAP_FAILED;
		CHECK(m != MAP_FAILED, "map it read-only");
		if (m != MAP_FAILED) {
			h = m;
			uroce_count(ctx, rx_pkts, 7);
			CHECK(h->magic == UROCE_STATS_MAGIC && h->pid == getpid() &&
				  ((const uint64_t *)((const char *)m + h->dev_off))[2] == 7,
			      "the reader sees the header and rcvd_pkts 7");
			munmap(m, (size_t)sb.st_size);
		}
		if (rfd >= 0)
			close(rfd);
	}
	uroce_stats_close(ctx);
	CHECK(find_memfd(-1) < 0, "close closes the memfd");

	/* a child with an open context, killed with SIGKILL */
	CHECK(!pipe(sync), "pipe");
	pid = fork();
	if (pid == 0) {
		char c = 'x';

		close(sync[0]);
		if (uroce_stats_open(ctx) || write(sync[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(sync[1]);
	if (pid > 0) {
		char c = 0, fdpath[64], t[128];
		int status, n = 0;
		ssize_t len;

		CHECK(read(sync[0], &c, 1) == 1, "the child opened its counters");
		for (int i = 0; i < 64; i++) {
			snprintf(fdpath, sizeof(fdpath), "/proc/%d/fd/%d", (int)pid, i);
			len = readlink(fdpath, t, sizeof(t) - 1);
			if (len > 0 && (t[len] = 0, strstr(t, "memfd:" UROCE_STATS_MEMFD)))
				n++;
		}
		CHECK(n == 1, "the child holds one memfd (%d)", n);
		kill(pid, SIGKILL);
		CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status), "child killed");
		snprintf(fdpath, sizeof(fdpath), "/proc/%d", (int)pid);
		CHECK(access(fdpath, F_OK) && shm_files(pid) == 0,
		      "after kill -9: no process, no file in /dev/shm");
	}
	close(sync[0]);
	free(ctx);
}

int main(void)
{
	uroce_log_init();
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_paths();
	test_pcap_file();
	test_stats();
	test_stats_memfd();
	rmdir(tmpdir);
	printf("test_pcap_stats: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

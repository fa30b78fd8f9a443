/* uroce-stat: show the counters of running uroce programs (`uroce stat`).
 *
 * Every uroce context keeps its counters in a memfd "uroce-stats.<n>",
 * found through /proc/<pid>/fd, or in a file <dir>/uroce.<pid>.<n> when
 * UROCE_STATS_DIR names a directory (layout in src/core/stats.h).  This
 * program maps them read-only and prints them: one block per context
 * (process and device) with the device counters and a table of the
 * context's QPs; with -w it samples again every interval and adds rates.
 * Files left by processes that no longer exist are removed (memfds go with
 * their process).
 *
 * The counter names come from the files themselves, so this tool shows the
 * counters of a library from another build as long as the layout version
 * matches.  Usage: see usage() or `uroce help stat`.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/stats.h"

#define MAX_NAMES 256

struct snap_qp {
	uint32_t qpn, state, type, dest_qpn;
	uint64_t *c; /* n_qp counters */
};

/* One context, as read at time t. */
struct snap {
	char path[512];
	int pid;
	unsigned int seq;
	uint64_t start_ns;
	char dev[64], ifname[16], comm[16];
	uint32_t n_dev, n_qp;
	char (*names)[UROCE_STATS_NAME_LEN]; /* n_dev + n_qp */
	uint64_t *cnt;			     /* n_dev device counters */
	struct snap_qp *qps;
	uint32_t nqps;
	uint32_t nqp_alive, untracked;
};

struct snapset {
	struct snap *s;
	int n;
	double t; /* CLOCK_MONOTONIC seconds */
};

struct opts {
	const char *dir;
	bool json, all, watch;
	double interval;
	long count; /* reports to print with -w; 0 = until interrupted */
	int pid;    /* 0 = all */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t real_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Field 22 of /proc/<pid>/stat, 0 when unknown. */
static uint64_t proc_start_time(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			 "%*d %*d %*d %llu",
			 &v) != 1)
		return 0;
	return v;
}

/* "uroce.<pid>.<n>" exactly */
static bool parse_name(const char *name, int *pid, unsigned int *seq)
{
	const size_t pl = sizeof(UROCE_STATS_PREFIX) - 1;
	char *end;
	long p;
	unsigned long s;

	if (strncmp(name, UROCE_STATS_PREFIX, pl))
		return false;
	errno = 0;
	p = strtol(name + pl, &end, 10);
	if (errno || end == name + pl || *end != '.' || p <= 0 || p > 0x7fffffff)
		return false;
	name = end + 1;
	s = strtoul(name, &end, 10);
	if (errno || end == name || *end || s > 0xffffffffu)
		return false;
	*pid = (int)p;
	*seq = (unsigned int)s;
	return true;
}

static void remove_stale(const char *path, int pid, const char *why)
{
	if (!unlink(path))
		fprintf(stderr, "uroce stat: removed %s: process %d %s\n", path, pid, why);
	else if (errno != ENOENT)
		fprintf(stderr,
			"uroce stat: %s is stale (process %d %s) but cannot be removed: %s\n", path,
			pid, why, strerror(errno));
}

static void snap_free(struct snap *s)
{
	for (uint32_t i = 0; i < s->nqps; i++)
		free(s->qps[i].c);
	free(s->qps);
	free(s->names);
	free(s->cnt);
}

static void snapset_free(struct snapset *ss)
{
	for (int i = 0; i < ss->n; i++)
		snap_free(&ss->s[i]);
	free(ss->s);
	ss->s = NULL;
	ss->n = 0;
}

static uint64_t ld64(const void *p)
{
	return __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
}

static uint32_t ld32(const void *p)
{
	return __atomic_load_n((const uint32_t *)p, __ATOMIC_RELAXED);
}

static bool in_file(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* Read one mapped file into s.  Returns 0, 1 to skip it quietly, -1 on
 * a malformed file (reported). */
static int read_file(const char *path, const uint8_t *m, uint64_t size, struct snap *s)
{
	const struct uroce_stats_hdr *h = (const void *)m;
	uint32_t hwm;

	if (size < sizeof(*h) ||
	    __atomic_load_n((const uint64_t *)&h->magic, __ATOMIC_ACQUIRE) != UROCE_STATS_MAGIC)
		return 1; /* not written completely yet */
	if (h->version != UROCE_STATS_VERSION) {
		fprintf(stderr, "uroce stat: %s: layout version %u, this tool reads %u: skipped\n",
			path, h->version, UROCE_STATS_VERSION);
		return 1;
	}
	if (h->n_dev > MAX_NAMES || h->n_qp > MAX_NAMES || h->file_size > size ||
	    !in_file(h->names_off, (uint64_t)(h->n_dev + h->n_qp) * UROCE_STATS_NAME_LEN, size) ||
	    !in_file(h->dev_off, (uint64_t)h->n_dev * 8, size) ||
	    h->qp_slot_size < h->qp_cnt_off + (uint64_t)h->n_qp * 8 || h->qp_cnt_off < 16 ||
	    !in_file(h->qp_off, (uint64_t)h->max_qp * h->qp_slot_size, size)) {
		fprintf(stderr, "uroce stat: %s: malformed header: skipped\n", path);
		return -1;
	}
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->pid = h->pid;
	s->seq = h->ctx_seq;
	s->start_ns = h->start_ns;
	memcpy(s->dev, h->dev_name, sizeof(s->dev));
	s->dev[sizeof(s->dev) - 1] = 0;
	memcpy(s->ifname, h->ifname, sizeof(s->ifname));
	s->ifname[sizeof(s->ifname) - 1] = 0;
	memcpy(s->comm, h->comm, sizeof(s->comm));
	s->comm[sizeof(s->comm) - 1] = 0;
	s->n_dev = h->n_dev;
	s->n_qp = h->n_qp;
	s->names = calloc(s->n_dev + s->n_qp + 1, UROCE_STATS_NAME_LEN);
	s->cnt = calloc(s->n_dev + 1, sizeof(uint64_t));
	if (!s->names || !s->cnt)
		return -1;
	memcpy(s->names, m + h->names_off, (size_t)(s->n_dev + s->n_qp) * UROCE_STATS_NAME_LEN);
	for (uint32_t i = 0; i < s->n_dev + s->n_qp; i++)
		s->names[i][UROCE_STATS_NAME_LEN - 1] = 0;
	for (uint32_t i = 0; i < s->n_dev; i++)
		s->cnt[i] = ld64(m + h->dev_off + 8ull * i);
	s->nqp_alive = ld32(&h->nqp);
	s->untracked = ld32(&h->qp_untracked);
	hwm = __atomic_load_n((const uint32_t *)&h->qp_hwm, __ATOMIC_ACQUIRE);
	if (hwm > h->max_qp)
		hwm = h->max_qp;
	s->qps = calloc(hwm + 1, sizeof(*s->qps));
	if (!s->qps)
		return -1;
	for (uint32_t i = 0; i < hwm; i++) {
		const uint8_t *slot = m + h->qp_off + (uint64_t)i * h->qp_slot_size;
		struct snap_qp *q = &s->qps[s->nqps];

		q->qpn = __atomic_load_n((const uint32_t *)slot, __ATOMIC_ACQUIRE);
		if (!q->qpn)
			continue;
		q->state = ld32(slot + 4);
		q->type = ld32(slot + 8);
		q->dest_qpn = ld32(slot + 12);
		q->c = calloc(s->n_qp + 1, sizeof(uint64_t));
		if (!q->c)
			return -1;
		for (uint32_t k = 0; k < s->n_qp; k++)
			q->c[k] = ld64(slot + h->qp_cnt_off + 8ull * k);
		s->nqps++;
	}
	return 0;
}

static int cmp_snap(const void *a, const void *b)
{
	const struct snap *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_qp(const void *a, const void *b)
{
	const struct snap_qp *x = a, *y = b;

	return x->qpn < y->qpn ? -1 : x->qpn > y->qpn;
}

/* Map the counters behind fd (a file of pid, or its memfd) and add them
 * to ss.  file: in the stats directory, removed when it outlived pid. */
static void add_one(struct snapset *ss, int *cap, int fd, const char *path, int pid, bool file)
{
	const struct uroce_stats_hdr *h;
	struct snap s;
	struct stat sb;
	uint64_t start;
	void *m;
	int r;

	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size <= 0)
		return;
	m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return;
	h = m;
	memset(&s, 0, sizeof(s));
	r = read_file(path, m, (uint64_t)sb.st_size, &s);
	/* a memfd a forked child inherited belongs to its parent */
	if (!r && s.pid != pid)
		r = 1;
	/* same pid, other process: the file outlived its creator */
	start = proc_start_time(pid);
	if (!r && file && start && h->proc_start && start != h->proc_start) {
		remove_stale(path, pid, "was restarted (pid reused)");
		r = 1;
	}
	munmap(m, (size_t)sb.st_size);
	if (r) {
		snap_free(&s);
		return;
	}
	if (s.nqps) /* (qsort wants a valid pointer even for none) */
		qsort(s.qps, s.nqps, sizeof(*s.qps), cmp_qp);
	if (ss->n == *cap) {
		struct snap *n;

		*cap = *cap ? *cap * 2 : 8;
		n = realloc(ss->s, (size_t)*cap * sizeof(*n));
		if (!n) {
			snap_free(&s);
			return;
		}
		ss->s = n;
	}
	ss->s[ss->n++] = s;
}

/* The files in dir (UROCE_STATS_DIR): live ones are read, those of dead
 * processes removed. */
static int scan_dir(const struct opts *o, struct snapset *ss, int *cap)
{
	struct dirent *de;
	DIR *d;

	d = opendir(o->dir);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		fprintf(stderr, "uroce stat: cannot read %s: %s\n", o->dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		char path[512];
		unsigned int seq;
		int pid, fd;

		if (!parse_name(de->d_name, &pid, &seq))
			continue;
		snprintf(path, sizeof(path), "%s/%s", o->dir, de->d_name);
		if (kill(pid, 0) && errno == ESRCH) {
			remove_stale(path, pid, "is gone");
			continue;
		}
		if (o->pid && pid != o->pid)
			continue;
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue; /* closed meanwhile */
		add_one(ss, cap, fd, path, pid, true);
		close(fd);
	}
	closedir(d);
	return 0;
}

/* The memfds of one process: /proc/<pid>/fd/N -> "/memfd:uroce-stats.<n>
 * (deleted)".  Opening them needs the right to inspect the process (the
 * same user, or root); others are skipped quietly. */
static void scan_pid_fds(int pid, struct snapset *ss, int *cap)
{
	static const char want[] = "/memfd:" UROCE_STATS_MEMFD;
	char dir[64], link[PATH_MAX], target[256];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	d = opendir(dir);
	if (!d)
		return; /* gone, or not ours */
	while ((de = readdir(d))) {
		ssize_t n;
		int fd;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(link, sizeof(link), "%s/%s", dir, de->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (strncmp(target, want, sizeof(want) - 1))
			continue;
		fd = open(link, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* closed meanwhile */
		if (strstr(target, " (deleted)"))
			*strstr(target, " (deleted)") = 0;
		snprintf(link, sizeof(link), "pid %d fd %s (%s)", pid, de->d_name, target + 1);
		add_one(ss, cap, fd, link, pid, false);
		close(fd);
	}
	closedir(d);
}

static void scan_memfds(const struct opts *o, struct snapset *ss, int *cap)
{
	struct dirent *de;
	DIR *d;

	if (o->pid) {
		scan_pid_fds(o->pid, ss, cap);
		return;
	}
	d = opendir("/proc");
	if (!d)
		return;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid > 0x7fffffff)
			continue;
		scan_pid_fds((int)pid, ss, cap);
	}
	closedir(d);
}

/* Read every live context: the memfds of running processes and the files
 * in the stats directory (removing the files of dead ones). */
static int scan(const struct opts *o, struct snapset *ss)
{
	int cap = 0;

	ss->n = 0;
	ss->s = NULL;
	ss->t = mono_now();
	scan_memfds(o, ss, &cap);
	if (o->dir && scan_dir(o, ss, &cap))
		return -1;
	if (ss->n)
		qsort(ss->s, (size_t)ss->n, sizeof(*ss->s), cmp_snap);
	return 0;
}

/* ---- presentation ---- */

static const char *qp_state_name(uint32_t s)
{
	static const char *const n[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};

	return s < sizeof(n) / sizeof(n[0]) ? n[s] : "?";
}

static const char *qp_type_name(uint32_t t)
{
	switch (t) {
	case 2:
		return "RC";
	case 3:
		return "UC";
	case 4:
		return "UD";
	case 8:
		return "RAW";
	case 9:
		return "XRC_SEND";
	case 10:
		return "XRC_RECV";
	default:
		return "?";
	}
}

static const struct snap *find_prev(const struct snapset *prev, const struct snap *s)
{
	if (!prev)
		return NULL;
	for (int i = 0; i < prev->n; i++)
		if (prev->s[i].pid == s->pid && prev->s[i].seq == s->seq &&
		    prev->s[i].start_ns == s->start_ns && prev->s[i].n_dev == s->n_dev &&
		    prev->s[i].n_qp == s->n_qp)
			return &prev->s[i];
	return NULL;
}

static const struct snap_qp *find_prev_qp(const struct snap *p, uint32_t qpn)
{
	if (!p)
		return NULL;
	for (uint32_t i = 0; i < p->nqps; i++)
		if (p->qps[i].qpn == qpn)
			return &p->qps[i];
	return NULL;
}

static double rate(uint64_t now, uint64_t before, double dt)
{
	return now >= before && dt > 0 ? (double)(now - before) / dt : 0;
}

/* Index of a QP counter by name, -1 when the file has no such counter. */
static int qp_idx(const struct snap *s, const char *name)
{
	for (uint32_t i = 0; i < s->n_qp; i++)
		if (!strcmp(s->names[s->n_dev + i], name))
			return (int)i;
	return -1;
}

static uint64_t qp_val(const struct snap *s, const struct snap_qp *q, const char *name)
{
	int i = qp_idx(s, name);

	return i < 0 ? 0 : q->c[i];
}

static void human_size(char *buf, size_t len, double v)
{
	static const char *const unit[] = {"", "K", "M", "G", "T", "P"};
	int u = 0;

	while (v >= 10000 && u < 5) {
		v /= 1000;
		u++;
	}
	snprintf(buf, len, "%.0f%s", v, unit[u]);
}

static void print_human(const struct opts *o, const struct snapset *ss, const struct snapset *prev)
{
	double dt = prev ? ss->t - prev->t : 0;
	uint64_t now = real_now_ns();

	if (o->watch) {
		time_t t = time(NULL);
		char tb[64];

		strftime(tb, sizeof(tb), "%H:%M:%S", localtime(&t));
		printf("---- %s  (rates over %.1f s) ----\n", tb, dt);
	}
	if (!ss->n) {
		printf("no uroce program is running%s (no counter files in %s)\n",
		       o->pid ? " with that pid" : "", o->dir);
		return;
	}
	for (int i = 0; i < ss->n; i++) {
		const struct snap *s = &ss->s[i], *p = find_prev(prev, s);
		double up = now > s->start_ns ? (double)(now - s->start_ns) / 1e9 : 0;
		/* the QP table's columns: counter names, summed when two */
		static const struct {
			const char *head, *a, *b;
		} col[] = {
		    {"retx", "retransmitted_pkts", NULL},
		    {"naks", "sent_naks", "rcvd_naks"},
		    {"rnr", "send_rnr_err", "rcvd_rnr_err"},
		    {"tmo", "local_ack_timeout_err", NULL},
		    {"dup", "duplicate_request", "duplicate_response"},
		    {"oos", "out_of_seq_request", "out_of_seq_response"},
		};

		printf("%s%s (%s)  pid %d %s  context %u  up %.1f s  QPs %u%s\n", i ? "\n" : "",
		       s->dev, s->ifname, s->pid, s->comm, s->seq, up, s->nqp_alive,
		       s->untracked ? " (some beyond the per-QP table)" : "");
		for (uint32_t k = 0; k < s->n_dev; k++) {
			if (!o->all && !s->cnt[k] && k >= 4)
				continue;
			printf("    %-24s %16" PRIu64, s->names[k], s->cnt[k]);
			if (p)
				printf("  %12.0f/s", rate(s->cnt[k], p->cnt[k], dt));
			printf("\n");
		}
		if (!s->nqps)
			continue;
		if (p)
			printf("    %-10s %-4s %-5s %-10s %10s %10s %10s %10s", "QPN", "type",
			       "state", "dest", "tx_pkts/s", "tx_B/s", "rx_pkts/s", "rx_B/s");
		else
			printf("    %-10s %-4s %-5s %-10s %10s %10s %10s %10s", "QPN", "type",
			       "state", "dest", "tx_pkts", "tx_bytes", "rx_pkts", "rx_bytes");
		for (size_t c = 0; c < sizeof(col) / sizeof(col[0]); c++)
			printf(" %6s", col[c].head);
		printf("\n");
		for (uint32_t j = 0; j < s->nqps; j++) {
			const struct snap_qp *q = &s->qps[j], *pq = find_prev_qp(p, q->qpn);
			static const char *const traffic[] = {"sent_pkts", "sent_bytes",
							      "rcvd_pkts", "rcvd_bytes"};
			char b[32];

			printf("    0x%06x   %-4s %-5s 0x%06x  ", q->qpn, qp_type_name(q->type),
			       qp_state_name(q->state), q->dest_qpn);
			for (int t = 0; t < 4; t++) {
				uint64_t v = qp_val(s, q, traffic[t]);

				if (p)
					human_size(b, sizeof(b),
						   pq ? rate(v, qp_val(p, pq, traffic[t]), dt) : 0);
				else
					human_size(b, sizeof(b), (double)v);
				printf(" %10s", b);
			}
			for (size_t c = 0; c < sizeof(col) / sizeof(col[0]); c++) {
				uint64_t v = qp_val(s, q, col[c].a) +
					     (col[c].b ? qp_val(s, q, col[c].b) : 0);

				human_size(b, sizeof(b), (double)v);
				printf(" %6s", b);
			}
			printf("\n");
			if (o->all) {
				for (uint32_t k = 0; k < s->n_qp; k++)
					if (q->c[k])
						printf("        %-24s %16" PRIu64 "\n",
						       s->names[s->n_dev + k], q->c[k]);
			}
		}
	}
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_counters(const char *key, char (*names)[UROCE_STATS_NAME_LEN], uint32_t n,
			  const uint64_t *v, const uint64_t *before, double dt)
{
	printf(", \"%s\": {", key);
	for (uint32_t k = 0; k < n; k++) {
		printf("%s", k ? ", " : "");
		json_str(names[k]);
		if (before)
			printf(": %.3f", rate(v[k], before[k], dt));
		else
			printf(": %" PRIu64, v[k]);
	}
	printf("}");
}

static void print_json(const struct snapset *ss, const struct snapset *prev)
{
	double dt = prev ? ss->t - prev->t : 0;
	uint64_t now = real_now_ns();

	printf("{\"time\": %.6f", (double)now / 1e9);
	if (prev)
		printf(", \"interval\": %.6f", dt);
	printf(", \"contexts\": [");
	for (int i = 0; i < ss->n; i++) {
		const struct snap *s = &ss->s[i], *p = find_prev(prev, s);

		printf("%s\n  {\"pid\": %d, \"comm\": ", i ? "," : "", s->pid);
		json_str(s->comm);
		printf(", \"device\": ");
		json_str(s->dev);
		printf(", \"ifname\": ");
		json_str(s->ifname);
		printf(", \"context\": %u, \"file\": ", s->seq);
		json_str(s->path);
		printf(", \"start_time\": %.6f, \"uptime\": %.6f, \"qps_alive\": %u, "
		       "\"qps_untracked\": %u",
		       (double)s->start_ns / 1e9,
		       now > s->start_ns ? (double)(now - s->start_ns) / 1e9 : 0.0, s->nqp_alive,
		       s->untracked);
		json_counters("counters", s->names, s->n_dev, s->cnt, NULL, 0);
		if (prev)
			json_counters("rates", s->names, s->n_dev, s->cnt, p ? p->cnt : s->cnt, dt);
		printf(", \"qps\": [");
		for (uint32_t j = 0; j < s->nqps; j++) {
			const struct snap_qp *q = &s->qps[j], *pq = find_prev_qp(p, q->qpn);

			printf("%s\n    {\"qpn\": %u, \"type\": \"%s\", \"state\": \"%s\", "
			       "\"dest_qpn\": %u",
			       j ? "," : "", q->qpn, qp_type_name(q->type), qp_state_name(q->state),
			       q->dest_qpn);
			json_counters("counters", s->names + s->n_dev, s->n_qp, q->c, NULL, 0);
			if (prev)
				json_counters("rates", s->names + s->n_dev, s->n_qp, q->c,
					      pq ? pq->c : q->c, dt);
			printf("}");
		}
		printf("%s]}", s->nqps ? "\n  " : "");
	}
	printf("%s]}\n", ss->n ? "\n" : "");
}

static void print_list(void)
{
	printf("Device counters (per context):\n");
#define UROCE_LIST_(field, name, desc) printf("    %-24s %s\n", name, desc);
	UROCE_DEV_COUNTERS(UROCE_LIST_)
	printf("Per-QP counters (first %d QPs of a context):\n", UROCE_STATS_MAX_QP);
	UROCE_QP_COUNTERS(UROCE_LIST_)
#undef UROCE_LIST_
}

static void usage(FILE *f)
{
	fprintf(f, "usage: uroce-stat [-w [SECONDS]] [-n COUNT] [--json] [-a] [--list] [PID]\n"
		   "  -w [SECONDS]  sample every SECONDS (default 1) and show rates\n"
		   "  -n COUNT      with -w: stop after COUNT reports\n"
		   "  --json        JSON (one document per report)\n"
		   "  -a, --all     every counter, also those that are 0, and per-QP details\n"
		   "  --list        list the counters and what they count\n"
		   "  PID           only the contexts of this process\n"
		   "Counters: the memfds uroce-stats.<n> of running processes (/proc/PID/fd),\n"
		   "and the files $UROCE_STATS_DIR/uroce.<pid>.<n> (default dir /dev/shm).\n"
		   "Full manual: uroce help stat\n");
}

static bool is_number(const char *s, double *v)
{
	char *end;

	if (!s || !*s)
		return false;
	errno = 0;
	*v = strtod(s, &end);
	return !errno && !*end;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		double v;

		if (!strcmp(a, "-w") || !strcmp(a, "--watch")) {
			o->watch = true;
			if (i + 1 < argc && is_number(argv[i + 1], &v)) {
				if (v < 0.01) {
					fprintf(stderr, "uroce stat: -w %s: too short\n",
						argv[i + 1]);
					return -1;
				}
				o->interval = v;
				i++;
			}
		} else if (!strncmp(a, "-w", 2) && is_number(a + 2, &v) && v >= 0.01) {
			o->watch = true;
			o->interval = v;
		} else if (!strcmp(a, "-n") && i + 1 < argc && is_number(argv[i + 1], &v) &&
			   v >= 1) {
			o->count = (long)v;
			i++;
		} else if (!strcmp(a, "--json") || !strcmp(a, "-j")) {
			o->json = true;
		} else if (!strcmp(a, "-a") || !strcmp(a, "--all")) {
			o->all = true;
		} else if (!strcmp(a, "--list")) {
			print_list();
			exit(0);
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else if (is_number(a, &v) && v >= 1 && v <= 0x7fffffff && !o->pid) {
			o->pid = (int)v;
		} else {
			fprintf(stderr, "uroce stat: unknown argument '%s'\n", a);
			usage(stderr);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.interval = 1.0};
	struct snapset cur = {0}, prev = {0};
	long reports = 0;

	/* Programs keep their counters in memfds unless UROCE_STATS_DIR names
	 * a directory; /dev/shm is still looked at by default, for files of
	 * older builds (removed once their process is gone). */
	o.dir = getenv("UROCE_STATS_DIR");
	if (!o.dir)
		o.dir = "/dev/shm";
	else if (!*o.dir)
		o.dir = NULL;
	if (parse_args(argc, argv, &o))
		return 2;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_DFL);

	if (scan(&o, &cur))
		return 1;
	if (!o.watch) {
		if (o.json)
			print_json(&cur, NULL);
		else
			print_human(&o, &cur, NULL);
		snapset_free(&cur);
		return 0;
	}
	/* -w: every report compares with the sample before it */
	for (;;) {
		struct timespec ts = {.tv_sec = (time_t)o.interval,
				      .tv_nsec =
					  (long)((o.interval - (double)(time_t)o.interval) * 1e9)};

		prev = cur;
		cur = (struct snapset){0};
		while (nanosleep(&ts, &ts) && errno == EINTR && !stop)
			;
		if (stop || scan(&o, &cur))
			break;
		if (o.json)
			print_json(&cur, &prev);
		else
			print_human(&o, &cur, &prev);
		fflush(stdout);
		snapset_free(&prev);
		if (o.count && ++reports >= o.count)
			break;
	}
	snapset_free(&prev);
	snapset_free(&cur);
	return 0;
}

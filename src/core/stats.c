/* Counters in shared memory: the file behind ctx->cnt and qp->stats.
 *
 * The layout is in stats.h.  Creating the file is the only work done here
 * at run time besides QP slot bookkeeping: the packet path just adds to the
 * counters with relaxed atomics (uroce_count, uroce_qp_count in uroce.h).
 *
 * Where the counters live (UROCE_STATS_DIR):
 *   unset      an anonymous memfd, "uroce-stats.<n>", kept open: the kernel
 *              frees it with the process, however it ends (kill -9
 *              included); `uroce stat` finds it through /proc/<pid>/fd,
 *              which the same user (and root) may open
 *   DIR        a file DIR/uroce.<pid>.<n>, mode 0644, for readers of other
 *              users: removed at close and at exit, and by the next
 *              `uroce stat` when its process died without either
 *   empty      private memory: counting works the same, nobody can read it
 * When the memfd or the file cannot be made (a seccomp filter, a read-only
 * directory), the counters fall back to private memory; that is reported
 * once per process at warn level.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uroce.h"

#define STATS_ALIGN 64

struct uroce_stats {
	struct uroce_stats_hdr *hdr; /* start of the mapping (or private copy) */
	size_t size;
	bool shared; /* a file in the stats directory, not private memory */
	int memfd;   /* the memfd (kept open so /proc/<pid>/fd shows it), or -1 */
	pid_t owner; /* the process that created the file (not a forked child) */
	char path[PATH_MAX];
	struct uroce_stats_qp *slots;
	pthread_mutex_t lock; /* slot allocation */
	uint32_t hint;	      /* where to look for a free slot first */
	uint8_t used[UROCE_STATS_MAX_QP];
	struct uroce_stats *next; /* open files, for the exit handler */
	/* QPs beyond max_qp share this slot; it is not in the file */
	struct uroce_stats_qp untracked;
};

static const char *const dev_names[] = {
#define UROCE_STATS_NAME_(field, name, desc) name,
    UROCE_DEV_COUNTERS(UROCE_STATS_NAME_)};
static const char *const qp_names[] = {UROCE_QP_COUNTERS(UROCE_STATS_NAME_)
#undef UROCE_STATS_NAME_
};

_Static_assert(sizeof(dev_names) / sizeof(dev_names[0]) == UROCE_STATS_N_DEV,
	       "every device counter has a name");
_Static_assert(sizeof(qp_names) / sizeof(qp_names[0]) == UROCE_STATS_N_QP,
	       "every QP counter has a name");
_Static_assert(sizeof(_Atomic uint64_t) == sizeof(uint64_t), "plain 64-bit counters");

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uroce_stats *open_list;
static atomic_uint ctx_seq;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static atomic_bool warned;

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* At exit: remove the files, but leave them mapped - a progress thread may
 * still be counting. */
static void stats_exit(void)
{
	pid_t self = getpid();

	pthread_mutex_lock(&open_lock);
	for (struct uroce_stats *st = open_list; st; st = st->next)
		if (st->shared && st->owner == self)
			unlink(st->path);
	pthread_mutex_unlock(&open_lock);
}

static void stats_register_exit(void)
{
	if (atexit(stats_exit))
		ur_warn("atexit failed: counter files of this process stay until 'uroce stat' "
			"removes them");
}

/* Field 22 of /proc/self/stat: start time in clock ticks after boot. */
static uint64_t proc_start_time(void)
{
	char buf[1024], *p;
	unsigned long long v = 0;
	ssize_t n;
	int fd;

	fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the command name may contain spaces */
	if (!p || sscanf(p + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			 "%*d %*d %*d %llu",
			 &v) != 1)
		return 0;
	return v;
}

/* Create and map dir/uroce.<pid>.<seq>; returns the mapping or NULL with
 * errno set. */
static void *map_file(struct uroce_stats *st, const char *dir, unsigned int seq, size_t size)
{
	void *map;
	int fd, n;

	n = snprintf(st->path, sizeof(st->path), "%s/" UROCE_STATS_PREFIX "%d.%u", dir,
		     (int)getpid(), seq);
	if (n < 0 || (size_t)n >= sizeof(st->path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	fd = open(st->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 && errno == EEXIST) {
		/* left by a dead process that had our pid */
		unlink(st->path);
		fd = open(st->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	}
	if (fd < 0)
		return NULL;
	/* readable by everyone whatever the umask: `uroce stat` may run as
	 * another user (the file holds counters and a program name only) */
	if (fchmod(fd, 0644) || ftruncate(fd, (off_t)size))
		goto err;
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto err;
	close(fd);
	return map;
err:
	n = errno;
	close(fd);
	unlink(st->path);
	errno = n;
	return NULL;
}

/* Create and map the memfd uroce-stats.<seq>; NULL with errno set. */
static void *map_memfd(struct uroce_stats *st, unsigned int seq, size_t size)
{
	char name[64];
	void *map;
	int fd, e;

	snprintf(name, sizeof(name), UROCE_STATS_MEMFD "%u", seq);
	snprintf(st->path, sizeof(st->path), "memfd:%s", name);
	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, (off_t)size))
		goto err;
	/* the size never changes: a reader may map it whole */
	(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto err;
	st->memfd = fd;
	return map;
err:
	e = errno;
	close(fd);
	errno = e;
	return NULL;
}

static void fill_header(struct uroce_stats *st, struct uroce_ctx *ctx, unsigned int seq,
			size_t names_off, size_t dev_off, size_t qp_off)
{
	struct uroce_stats_hdr *h = st->hdr;
	struct uroce_stats_name *names = (void *)((char *)h + names_off);
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	h->version = UROCE_STATS_VERSION;
	h->hdr_size = sizeof(*h);
	h->pid = (int32_t)getpid();
	h->ctx_seq = seq;
	h->proc_start = proc_start_time();
	h->start_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	snprintf(h->dev_name, sizeof(h->dev_name), "%s", ctx->vctx.context.device->name);
	snprintf(h->ifname, sizeof(h->ifname), "%s", ctx->dev->ifname);
	snprintf(h->comm, sizeof(h->comm), "%s", program_invocation_short_name);
	h->n_dev = UROCE_STATS_N_DEV;
	h->n_qp = UROCE_STATS_N_QP;
	h->names_off = names_off;
	h->dev_off = dev_off;
	h->qp_off = qp_off;
	h->qp_slot_size = sizeof(struct uroce_stats_qp);
	h->qp_cnt_off = offsetof(struct uroce_stats_qp, c);
	h->max_qp = UROCE_STATS_MAX_QP;
	h->file_size = st->size;
	for (unsigned int i = 0; i < UROCE_STATS_N_DEV; i++)
		snprintf(names[i].name, sizeof(names[i].name), "%s", dev_names[i]);
	for (unsigned int i = 0; i < UROCE_STATS_N_QP; i++)
		snprintf(names[UROCE_STATS_N_DEV + i].name, sizeof(names[0].name), "%s",
			 qp_names[i]);
	atomic_store_explicit(&h->magic, UROCE_STATS_MAGIC, memory_order_release);
}

int uroce_stats_open(struct uroce_ctx *ctx)
{
	size_t names_off = align_up(sizeof(struct uroce_stats_hdr), STATS_ALIGN);
	size_t dev_off = align_up(names_off + (UROCE_STATS_N_DEV + UROCE_STATS_N_QP) *
						  sizeof(struct uroce_stats_name),
				  STATS_ALIGN);
	size_t qp_off = align_up(dev_off + sizeof(struct uroce_counters), STATS_ALIGN);
	size_t size = qp_off + (size_t)UROCE_STATS_MAX_QP * sizeof(struct uroce_stats_qp);
	unsigned int seq = atomic_fetch_add(&ctx_seq, 1);
	const char *dir = getenv("UROCE_STATS_DIR");
	struct uroce_stats *st;
	void *map = NULL;

	size = align_up(size, (size_t)sysconf(_SC_PAGESIZE));
	st = aligned_alloc(STATS_ALIGN, align_up(sizeof(*st), STATS_ALIGN));
	if (!st)
		return -ENOMEM;
	memset(st, 0, sizeof(*st));
	st->size = size;
	st->owner = getpid();
	st->memfd = -1;
	pthread_mutex_init(&st->lock, NULL);
	if (!dir || *dir) {
		map = dir ? map_file(st, dir, seq, size) : map_memfd(st, seq, size);
		if (!map && !atomic_exchange(&warned, true))
			ur_warn("counters are private to this process: cannot create %s: %s "
				"('uroce stat' will not show it; set UROCE_STATS_DIR to a "
				"writable directory, or to an empty value to silence this)",
				st->path, strerror(errno));
	}
	st->shared = map != NULL;
	if (!map) {
		map = aligned_alloc((size_t)sysconf(_SC_PAGESIZE), size);
		if (!map) {
			pthread_mutex_destroy(&st->lock);
			free(st);
			return -ENOMEM;
		}
		memset(map, 0, size);
	}
	st->hdr = map;
	st->slots = (void *)((char *)map + qp_off);
	ctx->cnt = (void *)((char *)map + dev_off);
	ctx->stats = st;
	fill_header(st, ctx, seq, names_off, dev_off, qp_off);
	if (st->shared && st->memfd >= 0) {
		ur_dbg("counters in %s (fd %d)", st->path, st->memfd);
	} else if (st->shared) {
		ur_dbg("counters in %s", st->path);
		pthread_once(&exit_once, stats_register_exit);
		pthread_mutex_lock(&open_lock);
		st->next = open_list;
		open_list = st;
		pthread_mutex_unlock(&open_lock);
	}
	return 0;
}

static void log_counters(struct uroce_ctx *ctx)
{
	const _Atomic uint64_t *c = (const _Atomic uint64_t *)ctx->cnt;
	char buf[2048];
	size_t len = 0;

	if (UROCE_LOG_INFO > uroce_log_level)
		return;
	buf[0] = 0;
	for (unsigned int i = 0; i < UROCE_STATS_N_DEV && len < sizeof(buf); i++) {
		uint64_t v = atomic_load_explicit(&c[i], memory_order_relaxed);
		int n;

		if (!v && i >= 4) /* packets and bytes always, the rest when not 0 */
			continue;
		n = snprintf(buf + len, sizeof(buf) - len, "%s%s %llu", len ? ", " : "",
			     dev_names[i], (unsigned long long)v);
		if (n < 0)
			break;
		len += (size_t)n;
	}
	ur_info("%s counters: %s", ctx->vctx.context.device->name, buf);
}

void uroce_stats_close(struct uroce_ctx *ctx)
{
	struct uroce_stats *st = ctx->stats;

	if (!st)
		return;
	log_counters(ctx);
	if (st->memfd >= 0) {
		munmap(st->hdr, st->size);
		close(st->memfd);
	} else if (st->shared) {
		pthread_mutex_lock(&open_lock);
		for (struct uroce_stats **pp = &open_list; *pp; pp = &(*pp)->next)
			if (*pp == st) {
				*pp = st->next;
				break;
			}
		pthread_mutex_unlock(&open_lock);
		if (st->owner == getpid())
			unlink(st->path);
		munmap(st->hdr, st->size);
	} else {
		free(st->hdr);
	}
	ctx->cnt = NULL;
	ctx->stats = NULL;
	pthread_mutex_destroy(&st->lock);
	free(st);
}

struct uroce_stats_qp *uroce_stats_qp_add(struct uroce_ctx *ctx)
{
	struct uroce_stats *st = ctx->stats;
	struct uroce_stats_hdr *h = st->hdr;
	struct uroce_stats_qp *slot = NULL;

	pthread_mutex_lock(&st->lock);
	for (uint32_t k = 0; k < UROCE_STATS_MAX_QP; k++) {
		uint32_t i = (st->hint + k) % UROCE_STATS_MAX_QP;

		if (!st->used[i]) {
			st->used[i] = 1;
			st->hint = i + 1;
			slot = &st->slots[i];
			if (i >= atomic_load_explicit(&h->qp_hwm, memory_order_relaxed))
				atomic_store_explicit(&h->qp_hwm, i + 1, memory_order_release);
			break;
		}
	}
	if (!slot) {
		slot = &st->untracked;
		atomic_fetch_add_explicit(&h->qp_untracked, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&st->lock);
	atomic_fetch_add_explicit(&h->nqp, 1, memory_order_relaxed);
	return slot;
}

void uroce_stats_qp_update(struct uroce_qp *qp)
{
	struct uroce_stats_qp *s = qp->stats;

	atomic_store_explicit(&s->type, (uint32_t)qp->init.qp_type, memory_order_relaxed);
	atomic_store_explicit(&s->state, (uint32_t)qp->attr.qp_state, memory_order_relaxed);
	atomic_store_explicit(&s->dest_qpn, qp->attr.dest_qp_num, memory_order_relaxed);
	atomic_store_explicit(&s->qpn, qp->ibqp.qp_base.qp_num, memory_order_release);
}

void uroce_stats_qp_del(struct uroce_ctx *ctx, struct uroce_stats_qp *s)
{
	struct uroce_stats *st = ctx->stats;
	struct uroce_stats_hdr *h;

	if (!s || !st)
		return;
	h = st->hdr;
	atomic_fetch_sub_explicit(&h->nqp, 1, memory_order_relaxed);
	if (s == &st->untracked) {
		atomic_fetch_sub_explicit(&h->qp_untracked, 1, memory_order_relaxed);
		return;
	}
	/* free first, then zero: a reader never shows the old counters under
	 * a new QPN */
	atomic_store_explicit(&s->qpn, 0, memory_order_release);
	for (unsigned int i = 0; i < UROCE_STATS_N_QP; i++)
		atomic_store_explicit((_Atomic uint64_t *)&s->c + i, 0, memory_order_relaxed);
	pthread_mutex_lock(&st->lock);
	st->used[s - st->slots] = 0;
	pthread_mutex_unlock(&st->lock);
}

void uroce_stats_wc_err(struct uroce_qp *qp, int status)
{
	switch (status) {
	case IBV_WC_SUCCESS:
	case IBV_WC_WR_FLUSH_ERR:
		return;
	case IBV_WC_RETRY_EXC_ERR:
		uroce_qp_count(qp, retry_exc, 1);
		break;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		uroce_qp_count(qp, rnr_retry_exc, 1);
		break;
	default:
		break;
	}
	uroce_qp_count(qp, wc_err, 1);
}

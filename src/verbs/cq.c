/* Completion queues and completion channels.
 *
 * A CQ is a ring of struct ibv_wc under cq->lock.  A completion channel is a
 * pipe: when an armed CQ gets a completion, its 64-bit handle is written to
 * the pipe, so the channel fd is readable exactly when ibv_get_cq_event has
 * an event to return (and works with poll/epoll/O_NONBLOCK like the kernel's).
 * Handles, not pointers, travel through the pipe: an event still queued for
 * a CQ that was destroyed since is recognised and skipped.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uroce.h"
#include "core/objreg.h"
#include "net/shm.h"
#include "verbs/verbs_ex.h"
#include "verbs/verbs_ops.h"

static atomic_ullong next_cq_handle = 1;

UROCE_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct uroce_channel *ch;
	int p[2];

	if (!context) {
		ur_dbg("create_comp_channel: context is NULL");
		errno = EINVAL;
		return NULL;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		ur_dbg("create_comp_channel: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	if (pipe2(p, O_CLOEXEC)) {
		free(ch);
		return NULL;
	}
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	ch->ibch.context = context;
	ch->ibch.fd = p[0];
	ch->wr_fd = p[1];
	pthread_mutex_init(&ch->lock, NULL);
	return &ch->ibch;
}

UROCE_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct uroce_channel *ch;

	if (!channel)
		return ur_dbg("destroy_comp_channel: channel is NULL"), EINVAL;
	ch = container_of(channel, struct uroce_channel, ibch);
	pthread_mutex_lock(&ch->lock);
	if (ch->ncq) {
		pthread_mutex_unlock(&ch->lock);
		ur_dbg("destroy_comp_channel: %d CQ(s) still use it", ch->ncq);
		return uroce_obj_err(EBUSY);
	}
	pthread_mutex_unlock(&ch->lock);
	close(ch->ibch.fd);
	close(ch->wr_fd);
	pthread_mutex_destroy(&ch->lock);
	free(ch->cqs);
	free(ch);
	return 0;
}

static struct uroce_channel *to_uch(struct ibv_comp_channel *c)
{
	return c ? container_of(c, struct uroce_channel, ibch) : NULL;
}

static int channel_attach(struct uroce_channel *ch, struct uroce_cq *cq)
{
	int ret = 0;

	pthread_mutex_lock(&ch->lock);
	if (ch->ncq == ch->cap) {
		int cap = ch->cap ? ch->cap * 2 : 8;
		void *n = realloc(ch->cqs, (size_t)cap * sizeof(*ch->cqs));

		if (!n) {
			ur_dbg("create_cq: out of memory attaching to the channel");
			ret = ENOMEM;
			goto out;
		}
		ch->cqs = n;
		ch->cap = cap;
	}
	ch->cqs[ch->ncq++] = cq;
	ch->ibch.refcnt++;
out:
	pthread_mutex_unlock(&ch->lock);
	return ret;
}

static void channel_detach(struct uroce_channel *ch, struct uroce_cq *cq)
{
	pthread_mutex_lock(&ch->lock);
	for (int i = 0; i < ch->ncq; i++)
		if (ch->cqs[i] == cq) {
			ch->cqs[i] = ch->cqs[--ch->ncq];
			ch->ibch.refcnt--;
			break;
		}
	pthread_mutex_unlock(&ch->lock);
}

static struct uroce_cq *create_cq(struct ibv_context *context, int cqe, void *cq_context,
				  struct ibv_comp_channel *channel, int comp_vector,
				  uint64_t wc_flags, uint32_t create_flags, struct ibv_pd *pdom)
{
	struct uroce_cq *cq;

	if (!context) {
		ur_dbg("create_cq: context is NULL");
		errno = EINVAL;
		return NULL;
	}
	if (cqe < 1 || cqe > UROCE_MAX_CQE) {
		ur_dbg("create_cq: cqe %d outside 1..max_cqe (%d)", cqe, UROCE_MAX_CQE);
		errno = EINVAL;
		return NULL;
	}
	if (comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
		ur_dbg("create_cq: comp_vector %d >= num_comp_vectors (%d)", comp_vector,
		       context->num_comp_vectors);
		errno = EINVAL;
		return NULL;
	}
	if (channel && channel->context != context) {
		ur_dbg("create_cq: the completion channel is of another context");
		errno = EINVAL;
		return NULL;
	}
	if (atomic_load(&to_uctx(context)->ncq) >= UROCE_MAX_CQ) {
		ur_dbg("create_cq: max_cq (%d) reached", UROCE_MAX_CQ);
		errno = ENOMEM;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		ur_dbg("create_cq: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	cq->size = (uint32_t)cqe + 1;
	cq->pdom = pdom; /* a parent domain's allocator gives the ring (td.c) */
	cq->ring = uroce_pd_buf_alloc(pdom, cq->size * sizeof(*cq->ring), UROCE_RES_TYPE_CQ,
				      &cq->ring_custom);
	if (!cq->ring) {
		ur_dbg("create_cq: out of memory for %u entries", cq->size);
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	if (uroce_cq_ex_init(cq, wc_flags, create_flags)) {
		uroce_pd_buf_free(pdom, cq->ring, UROCE_RES_TYPE_CQ, cq->ring_custom);
		free(cq);
		ur_dbg("create_cq: out of memory for completion timestamps");
		errno = ENOMEM;
		return NULL;
	}
	cq->ctx = to_uctx(context);
	cq->handle = atomic_fetch_add(&next_cq_handle, 1);
	cq->ibcq.context = context;
	cq->ibcq.channel = channel;
	cq->ibcq.cq_context = cq_context;
	cq->ibcq.cqe = cqe;
	cq->ibcq.handle = (uint32_t)cq->handle;
	pthread_mutex_init(&cq->ibcq.mutex, NULL);
	pthread_cond_init(&cq->ibcq.cond, NULL);
	pthread_mutex_init(&cq->lock, NULL);
	if (channel && channel_attach(to_uch(channel), cq)) {
		uroce_cq_ex_fini(cq);
		uroce_pd_buf_free(pdom, cq->ring, UROCE_RES_TYPE_CQ, cq->ring_custom);
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	if (uroce_obj_add(&cq->ibcq, UROCE_OBJ_CQ)) {
		free(cq->ring);
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	atomic_fetch_add(&cq->ctx->ncq, 1);
	if (pdom)
		atomic_fetch_add(&to_upd(pdom)->refs, 1);
	return cq;
}

UROCE_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
					  struct ibv_comp_channel *channel, int comp_vector)
{
	struct uroce_cq *cq = create_cq(context, cqe, cq_context, channel, comp_vector,
					IBV_WC_STANDARD_FLAGS, 0, NULL);

	return cq ? ibv_cq_ex_to_cq(&cq->ibcq) : NULL;
}

struct ibv_cq_ex *uroce_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr)
{
	struct uroce_cq *cq;
	int err = uroce_cq_ex_check(context, attr);

	if (err) {
		errno = err;
		return NULL;
	}
	cq = create_cq(context, (int)attr->cqe, attr->cq_context, attr->channel,
		       (int)attr->comp_vector, attr->wc_flags,
		       (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) ? attr->flags : 0,
		       (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) ? attr->parent_domain : NULL);
	return cq ? &cq->ibcq : NULL;
}

UROCE_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct uroce_cq *cq;
	int err = uroce_obj_check(ibcq, UROCE_OBJ_CQ, "destroy_cq");

	if (err)
		return uroce_obj_err(err);
	cq = to_ucq(ibcq);
	if (atomic_load(&cq->refs)) {
		ur_dbg("destroy_cq: CQ still used by %u QP(s)", atomic_load(&cq->refs));
		return uroce_obj_err(EBUSY);
	}
	if (ibcq->channel)
		channel_detach(to_uch(ibcq->channel), cq);
	/* ibv_destroy_cq(3): wait until every event returned by
	 * ibv_get_cq_event has been acknowledged (more acks than events, an
	 * application bug, must not make it wait forever). */
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed < cq->events_delivered)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	atomic_fetch_sub(&cq->ctx->ncq, 1);
	uroce_cq_ex_fini(cq);
	pthread_mutex_destroy(&cq->lock);
	uroce_pd_buf_free(cq->pdom, cq->ring, UROCE_RES_TYPE_CQ, cq->ring_custom);
	if (cq->pdom)
		atomic_fetch_sub(&to_upd(cq->pdom)->refs, 1);
	uroce_obj_release(ibcq, cq);
	return 0;
}

int uroce_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr)
{
	(void)cq;
	(void)attr;
	ur_dbg("modify_cq: completion moderation is not supported");
	return EOPNOTSUPP;
}

static void notify(struct uroce_cq *cq)
{
	struct uroce_channel *ch = to_uch(cq->ibcq.channel);
	uint64_t h = cq->handle;

	if (ch && write(ch->wr_fd, &h, sizeof(h)) != sizeof(h))
		ur_warn("completion channel full: event for CQ %llu lost", (unsigned long long)h);
}

/* Completions this thread has pushed (read prediction, endpoint.c: did the
 * datagram just read complete anything the poller may be waiting for?) */
static __thread unsigned long cq_pushes;

unsigned long uroce_cq_pushes(void)
{
	return cq_pushes;
}

void uroce_cq_push(struct uroce_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	bool fire = false;

	cq_pushes++;

	pthread_mutex_lock(&cq->lock);
	if (cq->count == cq->size - 1) {
		/* IBTA 11.4.2.1 (C11-27): overrun is a CQ error */
		if (!cq->overflow) {
			cq->overflow = true;
			ur_err("CQ %p overflow: completion for wr_id %llu lost", (void *)cq,
			       (unsigned long long)wc->wr_id);
			uroce_async_event(cq->ctx, IBV_EVENT_CQ_ERR, cq);
		}
		pthread_mutex_unlock(&cq->lock);
		return;
	}
	cq->ring[cq->tail] = *wc;
	if (cq->ts)
		uroce_cq_stamp(&cq->ts[cq->tail]);
	cq->tail = (cq->tail + 1) % cq->size;
	cq->count++;
	if (cq->armed == 1 || (cq->armed == 2 && (solicited || wc->status != IBV_WC_SUCCESS))) {
		__atomic_store_n(&cq->armed, 0, __ATOMIC_RELAXED);
		fire = true;
	}
	if (fire)
		notify(cq);
	pthread_mutex_unlock(&cq->lock);
}

void uroce_cq_clean(struct uroce_cq *cq, uint32_t qpn)
{
	uint32_t kept = 0, n;

	pthread_mutex_lock(&cq->lock);
	n = cq->count;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t from = (cq->head + i) % cq->size, to = (cq->head + kept) % cq->size;

		if (cq->ring[from].qp_num == qpn)
			continue;
		if (to != from) {
			cq->ring[to] = cq->ring[from];
			if (cq->ts)
				cq->ts[to] = cq->ts[from];
		}
		kept++;
	}
	cq->count = kept;
	cq->tail = (cq->head + kept) % cq->size;
	pthread_mutex_unlock(&cq->lock);
	if (kept != n)
		ur_dbg("CQ %p: %u completions of QP 0x%06x removed (QP reset)", (void *)cq,
		       n - kept, qpn);
}

/* An application thread that has found its CQs empty for this long sends
 * the ACKs it deferred and yields the CPU on each further empty poll (see
 * uroce_cq_drive). */
#define UROCE_POLL_YIELD_NS 20000ull

/* Co-located peers.  When both ends of a ping-pong run on one CPU (two
 * processes the scheduler put together, which on a loaded 2-core machine
 * happens for whole runs), the peer cannot answer while we spin: every
 * one-way trip cost the 20 us spin before the yield (ib_send_lat 8 B pinned
 * to one CPU: 31 us typical; on two CPUs: 8 us).  A yield that takes longer
 * than UROCE_YIELD_RAN_NS let another thread run on this CPU.  A thread
 * whose last UROCE_COLOC_WAITS waits all ended only after such a yield
 * takes its peer to share its CPU and yields after UROCE_POLL_YIELD_COLOC_NS
 * instead.  The guess ends with a wait that ends while spinning (the peer
 * answered from another CPU) or a yield that returns at once (nobody here
 * wanted the CPU, so the peer, busy with its answer, is elsewhere); one wait
 * in UROCE_COLOC_PROBE keeps the long spin. */
#define UROCE_POLL_YIELD_COLOC_NS 1000ull
#define UROCE_YIELD_RAN_NS	  5000ull
/* A yield this long ran another process for its time slice: load on this
 * CPU, not a co-located peer, which hands the CPU back once it has
 * answered and spun its own short spin.  It ends the guess: on a loaded
 * machine (other jobs on both CPUs, the peer on the other one) a yield
 * after 1 us gave a time slice away in every wait.  And from then on the
 * thread sleeps on its sockets instead of yielding (udp_idle). */
#define UROCE_YIELD_SLICE_NS 250000ull
/* udp_idle: it starts after UROCE_HOG_YIELDS such yields in a row; a
 * sleep lasts at most UROCE_HOG_SLEEP_NS; a yield every UROCE_HOG_PROBE_NS
 * (a probe) sees whether the load has gone. */
#define UROCE_HOG_YIELDS   4u
#define UROCE_HOG_SLEEP_NS 100000ull
#define UROCE_HOG_PROBE_NS 20000000ull
#define UROCE_COLOC_WAITS  4u
#define UROCE_COLOC_PROBE  64u

struct cq_wait {
	uint64_t since;	      /* the thread's CQs have been empty since (0: not waiting) */
	uint64_t yield_ns;    /* this wait yields after that long */
	bool yielded;	      /* this wait has yielded */
	unsigned after_yield; /* consecutive waits that ended only after a yield */
	unsigned waits;
	unsigned long_yields; /* consecutive yields that ran another process for a slice */
	uint64_t hog_ns;      /* when the last of UROCE_HOG_YIELDS such yields ended (0: none) */
	uint64_t probe_ns;    /* the last probe (udp_idle) */
};

static void cq_wait_end(struct cq_wait *w)
{
	if (w->since) {
		if (!w->yielded)
			w->after_yield = 0;
		else if (w->after_yield < UROCE_COLOC_WAITS)
			w->after_yield++;
	}
	w->since = 0;
	w->yielded = false;
}

static void cq_wait_begin(struct uroce_ctx *ctx, struct cq_wait *w, uint64_t now)
{
	bool coloc = w->after_yield >= UROCE_COLOC_WAITS && ++w->waits % UROCE_COLOC_PROBE;

	w->since = now;
	w->yield_ns = coloc ? UROCE_POLL_YIELD_COLOC_NS : UROCE_POLL_YIELD_NS;
	if (coloc)
		uroce_count(ctx, app_coloc_waits, 1);
}

/* A yield of a wait took d ns (see UROCE_YIELD_RAN_NS, _SLICE_NS). */
static void cq_wait_yielded(struct uroce_ctx *ctx, struct cq_wait *w, uint64_t d)
{
	uroce_count(ctx, app_yields, 1);
	if (d > UROCE_YIELD_SLICE_NS) {
		uroce_count(ctx, app_long_yields, 1);
		if (++w->long_yields >= UROCE_HOG_YIELDS)
			w->hog_ns = uroce_now_ns();
		w->after_yield = 0;
		w->yield_ns = UROCE_POLL_YIELD_NS;
		return;
	}
	w->long_yields = 0;
	w->hog_ns = 0; /* (a probe) came back soon: the load has gone */
	if (d > UROCE_YIELD_RAN_NS) {
		w->yielded = true;
	} else if (w->yield_ns < UROCE_POLL_YIELD_NS) {
		w->after_yield = 0;
		w->yield_ns = UROCE_POLL_YIELD_NS;
	}
}

/* The UDP path on a loaded CPU.  A poller that yields competes with the
 * other processes there at equal weight: each yield that runs one costs
 * a whole time slice (UROCE_YIELD_SLICE_NS), where a thread asleep in the
 * kernel is woken by the peer's packet and preempts such a process.  So
 * once UROCE_HOG_YIELDS yields in a row have run one (a neighbour that
 * keeps the CPU: the other jobs of a busy machine come and go, and a
 * thread that slept after the first such yield was slower than one that
 * yielded - ib_send_lat at load 4-5, docs/latency.md, "Session 13"), the
 * thread sleeps on its UDP sockets instead,
 * for at most UROCE_HOG_SLEEP_NS (the poll stays short, and the progress
 * thread takes it for a poller still), and yields once every
 * UROCE_HOG_PROBE_NS to see whether the load has gone - a quiet machine's
 * yields, which return at once or run a co-located peer for a few
 * microseconds, never start it.  The rule of uroce_shm_idle, which does
 * the same for a context with same-host links (and sleeps on their rings
 * too): here for the others.  UROCE_HOG_SLEEP=0: yield as before.
 * Returns 0 (the caller yields), 1 (slept) or 2 (woken by a packet). */
static int hog_mode = -1;

static int udp_idle(struct uroce_ctx *ctx, struct cq_wait *w, uint64_t now)
{
	struct pollfd pfd[sizeof(ctx->ep) / sizeof(ctx->ep[0])];
	struct timespec ts = {.tv_nsec = (long)UROCE_HOG_SLEEP_NS};
	int nep = atomic_load(&ctx->nep);

	if (!w->hog_ns || !uroce_env_on("UROCE_HOG_SLEEP", &hog_mode))
		return 0;
	if (now - w->probe_ns > UROCE_HOG_PROBE_NS) {
		w->probe_ns = now;
		return 0;
	}
	if (!uroce_ctx_polled_alone(ctx, now))
		return 0; /* another context's packets would not wake it */
	for (int i = 0; i < nep; i++)
		pfd[i] = (struct pollfd){.fd = ctx->ep[i]->fd, .events = POLLIN};
	uroce_ctx_send_owed_acks(ctx, false); /* nothing owed waits for the sleep */
	uroce_count(ctx, app_hog_sleeps, 1);
	return ppoll(pfd, (nfds_t)nep, &ts, NULL) > 0 ? 2 : 1;
}

/* An application that polls an empty CQ drives the receive path itself:
 * no thread wake-up between a packet and its completion, and on a
 * machine with few cores the spinning thread does useful work.
 * (ibv_poll_cq and ibv_start_poll; no CQ lock held.) */
void uroce_cq_drive(struct uroce_cq *cq)
{
	static __thread struct cq_wait wait;
	struct uroce_ctx *ctx = cq->ctx;
	int nep, got = 0, armed;
	uint64_t now;

	if (__atomic_load_n(&cq->count, __ATOMIC_RELAXED)) {
		cq_wait_end(&wait);
		uroce_app_done(ctx);
		return;
	}
	now = uroce_now_ns();
	/* A poll of an armed CQ is the last look before a sleep on its
	 * channel (arm, drain, wait), not a busy poller (progress.c). */
	armed = __atomic_load_n(&cq->armed, __ATOMIC_RELAXED);
	if (!armed)
		uroce_app_active(ctx, now);
	nep = atomic_load(&ctx->nep);
	for (int i = 0; i < nep; i++)
		got += uroce_ep_poll_app(ctx->ep[i], 64, now);
	if (got || __atomic_load_n(&cq->count, __ATOMIC_RELAXED)) {
		cq_wait_end(&wait);
		if (__atomic_load_n(&cq->count, __ATOMIC_RELAXED))
			uroce_app_done(ctx);
		return;
	}
	/* Nothing to do.  Once the wait is no longer short: the time to send
	 * the ACKs the receive path deferred (src/net/endpoint.c), and to let
	 * the peer run - unlike a NIC, uroce shares the CPUs with the other
	 * side of the connection, and spinning without yielding starves it.
	 * A short wait does neither: on this path every system call counts (a
	 * ping-pong's round trip is a few of them), and an ACK sent while the
	 * application is about to post would let the peer complete and turn
	 * to spinning on memory before the next request arrives, which then
	 * waits for the progress thread (ib_write_lat at 8 KiB: 1 ms).  A peer
	 * on our CPU gets it sooner (see UROCE_POLL_YIELD_COLOC_NS). */
	if (!wait.since) {
		cq_wait_begin(ctx, &wait, now);
		return;
	}
	/* A stream's sender with a window in flight sleeps on its sockets for
	 * the next ACK at once rather than after the spin: its CQ cannot fill
	 * before that ACK, a window away (uroce_ctx_wait_acks).  Measured
	 * against the wait after 20 us (docs/design.md, "Where uroce's extra
	 * CPU per GB goes"): 11-33% less CPU per GB on loopback and veth. */
	if (now - wait.since <= wait.yield_ns && uroce_ctx_wait_acks(ctx, now)) {
		if (!armed)
			atomic_store_explicit(&ctx->app_poll_ns, uroce_now_ns(),
					      memory_order_relaxed);
		return;
	}
	if (now - wait.since > UROCE_POLL_YIELD_NS)
		uroce_ctx_send_owed_acks(ctx, false);
	if (now - wait.since > wait.yield_ns) {
		int slept = 0;

		if (!uroce_ctx_wait_acks(ctx, now) && !(slept = uroce_shm_idle(ctx))) {
			uint64_t t = uroce_now_ns();

			/* polling still, in the sleep as in the yield */
			if (!armed)
				uroce_app_yields(ctx, t);
			if (!(slept = udp_idle(ctx, &wait, t))) {
				sched_yield();
				t = uroce_now_ns() - t;
				uroce_shm_yielded(t);
				cq_wait_yielded(ctx, &wait, t);
			}
		}
		/* Woken from that sleep: spin again, briefly, before the next
		 * one.  The peer's ACK of our last message rings the doorbell
		 * just before the message we wait for, which then rang it a
		 * second time: two wake-ups through the hog for one message.
		 * Only the short spin: a peer on our CPU needs it to answer
		 * (a whole 20 us measured 21.7 us one-way co-located). */
		if (slept == 2)
			wait.since = uroce_now_ns() - wait.yield_ns + UROCE_POLL_YIELD_COLOC_NS;
		/* A wait that needed a sleep counts as one that needed a yield:
		 * the peer did not answer while we spun, so after a few such
		 * waits the spin before the sleep is the short one.  Co-located
		 * under a hog, the 20 us spin before every sleep kept the peer
		 * (and its answer) off our CPU: ib_send_lat 45-49 us one-way
		 * against kernel TCP's 12. */
		if (slept)
			wait.yielded = true;
		/* Time given away inside the poll (the yield, the wait on the
		 * sockets) is not a pause of the application's polling: the
		 * progress thread keeps out of its way (progress.c). */
		if (!armed)
			atomic_store_explicit(&ctx->app_poll_ns, uroce_now_ns(),
					      memory_order_relaxed);
	}
}

int uroce_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct uroce_cq *cq = to_ucq(ibcq);
	int n = 0;

	if (num_entries < 0)
		return -1;
	uroce_cq_drive(cq);
	/* empty (what another thread pushes meanwhile, the next poll sees) */
	if (!__atomic_load_n(&cq->count, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&cq->lock);
	while (n < num_entries && cq->count) {
		wc[n++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->size;
		cq->count--;
	}
	pthread_mutex_unlock(&cq->lock);
	return n;
}

int uroce_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct uroce_cq *cq = to_ucq(ibcq);

	if (!ibcq->channel)
		return ur_dbg("req_notify_cq: CQ has no completion channel"), EINVAL;
	/* the application is about to sleep: nothing it owes may wait */
	uroce_ctx_send_owed_acks(cq->ctx, true);
	pthread_mutex_lock(&cq->lock);
	/* A request for all completions wins over solicited-only. */
	if (!solicited_only || cq->armed != 1)
		__atomic_store_n(&cq->armed, solicited_only ? 2 : 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cq->lock);
	uroce_app_sleeps(cq->ctx);
	return 0;
}

UROCE_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq_out,
				  void **cq_context)
{
	struct uroce_channel *ch = to_uch(channel);

	if (!ch || !cq_out || !cq_context) {
		ur_dbg("get_cq_event: channel, cq and cq_context must not be NULL");
		errno = EINVAL;
		return -1;
	}
	/* the application sleeps in the read: the progress thread's turn */
	uroce_app_sleeps(to_uctx(ch->ibch.context));
	for (;;) {
		struct uroce_cq *cq = NULL;
		uint64_t h;
		ssize_t r = read(ch->ibch.fd, &h, sizeof(h));

		if (r != sizeof(h))
			return -1; /* errno from read (EAGAIN with O_NONBLOCK) */
		pthread_mutex_lock(&ch->lock);
		for (int i = 0; i < ch->ncq; i++)
			if (ch->cqs[i]->handle == h)
				cq = ch->cqs[i];
		if (cq) {
			pthread_mutex_lock(&cq->ibcq.mutex);
			cq->events_delivered++;
			pthread_mutex_unlock(&cq->ibcq.mutex);
		}
		pthread_mutex_unlock(&ch->lock);
		if (!cq)
			continue; /* the CQ was destroyed meanwhile */
		*cq_out = ibv_cq_ex_to_cq(&cq->ibcq);
		*cq_context = cq->ibcq.cq_context;
		return 0;
	}
}

UROCE_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (!cq)
		return;
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

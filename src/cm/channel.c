/* Event channels, events and the lifetime of ids.
 *
 * A channel's fd is an eventfd that is readable exactly while the channel
 * holds an event (poll/epoll on channel->fd work as with the kernel's
 * rdma_cm).  rdma_get_cm_event pops the oldest event; an id counts the
 * events handed to the user and those acknowledged, and rdma_destroy_id
 * waits until they are equal, as librdmacm documents.  Events still queued
 * for an id that is destroyed are discarded (the kernel's ucma does the
 * same); a queued CONNECT_REQUEST takes its new id with it.
 *
 * A synchronous id (NULL channel) gets a private channel, and each call
 * that would produce an event waits for it (cm_sync_wait), keeping it in
 * id->event until the next call, as rdma-core's ucma_complete().
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "cm.h"

struct cm_global cm = {.lock = PTHREAD_MUTEX_INITIALIZER, .epfd = -1, .wakefd = -1};

int cm_init(void)
{
	int ret = 0;

	if (cm.started)
		return 0;
	uroce_log_init();
	{
		const char *v = getenv("UROCE_PORT_MODE");

		cm.std = v && (!strcasecmp(v, "standard") || !strcmp(v, "4791"));
	}
	cm.lhash = calloc(1u << CM_HASH_BITS, sizeof(*cm.lhash));
	cm.rhash = calloc(1u << CM_HASH_BITS, sizeof(*cm.rhash));
	if (!cm.lhash || !cm.rhash)
		return -ENOMEM;
	if (getrandom(&cm.next_comm_id, sizeof(cm.next_comm_id), 0) != sizeof(cm.next_comm_id))
		cm.next_comm_id = (uint32_t)getpid() * 2654435761u;
	cm.tid_hi = cm.next_comm_id ^ 0x5a5a5a5au;
	ret = cm_wire_start();
	if (ret) {
		ur_err("rdma_cm: cannot start the connection manager: %s", strerror(-ret));
		return ret;
	}
	cm.started = true;
	return 0;
}

struct cm_chan *cm_chan_new(bool sync)
{
	struct cm_chan *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (c->ch.fd < 0) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->tail = &c->head;
	c->sync = sync;
	return c;
}

void cm_chan_free(struct cm_chan *c)
{
	if (!c)
		return;
	close(c->ch.fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Under c->lock: make the fd's readability match the queue. */
static void chan_signal(struct cm_chan *c)
{
	uint64_t v = 1;

	if (c->head && !c->signalled) {
		if (write(c->ch.fd, &v, sizeof(v)) == sizeof(v))
			c->signalled = true;
	} else if (!c->head && c->signalled) {
		if (read(c->ch.fd, &v, sizeof(v)) == sizeof(v) || errno == EAGAIN)
			c->signalled = false;
	}
}

struct cm_event *cm_event_new(struct cm_id *id, enum rdma_cm_event_type type, int status)
{
	struct cm_event *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->ev.id = &id->id;
	e->ev.event = type;
	e->ev.status = status;
	e->owner = id;
	return e;
}

void cm_event_post(struct cm_chan *c, struct cm_event *e)
{
	pthread_mutex_lock(&c->lock);
	e->next = NULL;
	*c->tail = e;
	c->tail = &e->next;
	chan_signal(c);
	pthread_mutex_unlock(&c->lock);
}

/* Remove and return the queued events for which drop(e, arg) holds. */
static struct cm_event *chan_extract(struct cm_chan *c, bool (*drop)(struct cm_event *, void *),
				     void *arg)
{
	struct cm_event *out = NULL, **pp;

	pthread_mutex_lock(&c->lock);
	for (pp = &c->head; *pp;) {
		struct cm_event *e = *pp;

		if (drop(e, arg)) {
			*pp = e->next;
			e->next = out;
			out = e;
		} else {
			pp = &e->next;
		}
	}
	c->tail = &c->head;
	while (*c->tail)
		c->tail = &(*c->tail)->next;
	chan_signal(c);
	pthread_mutex_unlock(&c->lock);
	return out;
}

UROCE_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cm_chan *c;
	int ret;

	pthread_mutex_lock(&cm.lock);
	ret = cm_init();
	pthread_mutex_unlock(&cm.lock);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	c = cm_chan_new(false);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	return &c->ch;
}

UROCE_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (channel)
		cm_chan_free((struct cm_chan *)channel);
}

struct cm_id *cm_id_new(struct cm_chan *chan, void *context, enum rdma_port_space ps,
			enum ibv_qp_type qpt)
{
	struct cm_id *cid = calloc(1, sizeof(*cid));

	if (!cid)
		return NULL;
	if (!chan) {
		chan = cm_chan_new(true);
		if (!chan) {
			free(cid);
			return NULL;
		}
		cid->sync = true;
	}
	cid->chan = chan;
	cid->id.channel = &chan->ch;
	cid->id.context = context;
	cid->id.ps = ps;
	cid->id.qp_type = qpt;
	cid->id.route.addr.src_addr.sa_family = AF_INET;
	cid->state = CM_IDLE;
	cid->resp_res = cid->init_depth = 0;
	cid->retry = 7;
	cid->rnr_retry = 7;
	cid->ack_timeout = 14;
	pthread_cond_init(&cid->cond, NULL);
	return cid;
}

UROCE_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
				void *context, enum rdma_port_space ps)
{
	enum ibv_qp_type qpt;
	struct cm_id *cid;
	int ret;

	if (!id)
		return cm_fail(EINVAL, "rdma_create_id: id is NULL");
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_IB:
		qpt = IBV_QPT_RC;
		break;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		qpt = IBV_QPT_UD;
		break;
	default:
		return cm_fail(EINVAL, "rdma_create_id: unknown port space 0x%x", ps);
	}
	pthread_mutex_lock(&cm.lock);
	ret = cm_init();
	pthread_mutex_unlock(&cm.lock);
	if (ret)
		return errno = -ret, -1;
	cid = cm_id_new((struct cm_chan *)channel, context, ps, qpt);
	if (!cid)
		return errno = ENOMEM, -1;
	*id = &cid->id;
	return 0;
}

static bool event_of(struct cm_event *e, void *arg)
{
	return e->owner == arg || e->ev.listen_id == arg;
}

/* Under cm.lock: free an id nobody can reach any more. */
void cm_id_free_locked(struct cm_id *cid)
{
	struct cm_mc *mc;

	cm_conn_teardown_locked(cid);
	while ((mc = cid->mcs)) {
		cid->mcs = mc->next;
		if (mc->attached && cid->id.qp)
			ibv_detach_mcast(cid->id.qp, &mc->mgid, 0);
		free(mc);
	}
	for (struct cm_id **pp = &cm.listeners; *pp; pp = &(*pp)->lnext)
		if (*pp == cid) {
			*pp = cid->lnext;
			break;
		}
	if (cid->lsock) {
		cm_sock_close(cid->lsock);
		cid->lsock = NULL;
	}
	if (cid->sync)
		cm_chan_free(cid->chan);
	pthread_cond_destroy(&cid->cond);
	free(cid);
}

UROCE_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cm_id *cid = to_cid(id);
	struct cm_event *gone, *e;

	if (!id)
		return cm_fail(EINVAL, "rdma_destroy_id: id is NULL");
	if (cid->stored_event) {
		rdma_ack_cm_event(&cid->stored_event->ev);
		cid->stored_event = NULL;
	}
	pthread_mutex_lock(&cm.lock);
	cid->destroying = true;
	/* Nothing new is queued for it (the CM looks ids up under cm.lock and
	 * skips destroying ones); drop what is queued, wait for the rest. */
	gone = chan_extract(cid->chan, event_of, cid);
	while (cid->acked < cid->reported)
		pthread_cond_wait(&cid->cond, &cm.lock);
	while ((e = gone)) {
		gone = e->next;
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->owner != cid) {
			struct cm_id *child = e->owner;

			child->destroying = true;
			cm_id_free_locked(child);
		}
		free(e);
	}
	cm_id_free_locked(cid);
	pthread_mutex_unlock(&cm.lock);
	return 0;
}

UROCE_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cm_chan *c = (struct cm_chan *)channel;
	struct cm_event *e;

	if (!channel || !event)
		return cm_fail(EINVAL, "rdma_get_cm_event: NULL argument");
	for (;;) {
		pthread_mutex_lock(&cm.lock);
		pthread_mutex_lock(&c->lock);
		e = c->head;
		if (e) {
			c->head = e->next;
			if (!c->head)
				c->tail = &c->head;
			chan_signal(c);
			e->owner->reported++;
		}
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(&cm.lock);
		if (e) {
			e->next = NULL;
			*event = &e->ev;
			return 0;
		}
		int fl = fcntl(channel->fd, F_GETFL);
		struct pollfd p = {.fd = channel->fd, .events = POLLIN};

		if (fl >= 0 && (fl & O_NONBLOCK))
			return errno = EAGAIN, -1;
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -1;
	}
}

UROCE_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cm_event *e = (struct cm_event *)event;

	if (!event)
		return cm_fail(EINVAL, "rdma_ack_cm_event: event is NULL");
	pthread_mutex_lock(&cm.lock);
	e->owner->acked++;
	pthread_cond_broadcast(&e->owner->cond);
	pthread_mutex_unlock(&cm.lock);
	free(e);
	return 0;
}

int cm_sync_ack_stored(struct cm_id *cid)
{
	if (cid->stored_event) {
		rdma_ack_cm_event(&cid->stored_event->ev);
		cid->stored_event = NULL;
	}
	return 0;
}

/* Wait on a synchronous id's channel for the event its last call produces;
 * 0 when it is `want` with status 0, else -1 with errno (librdmacm's
 * mapping: REJECTED -> ECONNREFUSED, a negative status -> -status). */
int cm_sync_wait(struct cm_id *cid, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	cm_sync_ack_stored(cid);
	if (rdma_get_cm_event(cid->id.channel, &ev))
		return -1;
	cid->stored_event = (struct cm_event *)ev;
	cid->id.event = ev;
	if (ev->status) {
		if (ev->event == RDMA_CM_EVENT_REJECTED)
			errno = ECONNREFUSED;
		else
			errno = ev->status < 0 ? -ev->status : ev->status;
		return -1;
	}
	if (ev->event != want) {
		errno = ev->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED : EINVAL;
		return -1;
	}
	return 0;
}

static bool event_owned(struct cm_event *e, void *arg)
{
	return e->owner == arg;
}

UROCE_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct cm_id *cid = to_cid(id);
	struct cm_chan *nc = (struct cm_chan *)channel, *old = cid->chan;
	struct cm_event *moved, *e;
	bool sync = false;

	if (!id)
		return cm_fail(EINVAL, "rdma_migrate_id: id is NULL");
	if (!nc) {
		nc = cm_chan_new(true);
		if (!nc)
			return errno = ENOMEM, -1;
		sync = true;
	}
	cm_sync_ack_stored(cid); /* a synchronous id's last event, as rdma-core */
	pthread_mutex_lock(&cm.lock);
	moved = chan_extract(old, event_owned, cid);
	while (cid->acked < cid->reported)
		pthread_cond_wait(&cid->cond, &cm.lock);
	cid->chan = nc;
	cid->id.channel = &nc->ch;
	/* chan_extract returned them newest first */
	struct cm_event *rev = NULL;

	while ((e = moved)) {
		moved = e->next;
		e->next = rev;
		rev = e;
	}
	while ((e = rev)) {
		rev = e->next;
		cm_event_post(nc, e);
	}
	if (cid->sync)
		cm_chan_free(old);
	cid->sync = sync;
	pthread_mutex_unlock(&cm.lock);
	return 0;
}

/* At UROCE_LOG=info, what the CM saw (docs/cm.md: dropped MADs are counted). */
__attribute__((destructor)) static void cm_fini(void)
{
	const struct cm_stats *s = &cm_stats;

	if (!cm.started)
		return;
	ur_info("rdma_cm: MADs received %llu, sent %llu, resent %llu, duplicate REQs %llu, "
		"ICMP unreachable %llu, TIME_WAIT exits %llu; dropped: short %llu, ICRC %llu, "
		"BTH/DETH %llu, MAD header %llu, attribute %llu, LAP/APR %llu, IP header %llu, "
		"unknown id %llu",
		(unsigned long long)s->rx, (unsigned long long)s->tx,
		(unsigned long long)s->retrans, (unsigned long long)s->dup_req,
		(unsigned long long)s->icmp, (unsigned long long)s->timewait_exit,
		(unsigned long long)s->drop_short, (unsigned long long)s->drop_icrc,
		(unsigned long long)s->drop_bth, (unsigned long long)s->drop_hdr,
		(unsigned long long)s->drop_attr, (unsigned long long)s->drop_lap,
		(unsigned long long)s->drop_ip_hdr, (unsigned long long)s->drop_unknown);
}

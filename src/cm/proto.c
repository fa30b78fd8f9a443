/* The protocol side of the state machine: what a received MAD, an expired
 * timer or an ICMP error does to an id.  Called by the CM thread with
 * cm.lock held.
 *
 * Ids are found by the communication ID a message names them by (lhash);
 * a REQ is matched to an earlier one from the same peer by the peer's
 * communication ID and address (rhash) so that a retransmitted REQ is
 * answered again rather than creating a second connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "cm.h"

#define HMASK ((1u << CM_HASH_BITS) - 1)

static unsigned rkey(uint32_t remote_id, const struct sockaddr_in *peer)
{
	return (remote_id ^ peer->sin_addr.s_addr ^ peer->sin_port) * 2654435761u >> 16 & HMASK;
}

void cm_hash_add(struct cm_id *cid)
{
	unsigned h = cid->local_comm_id & HMASK;

	if (cid->in_lhash)
		return;
	cid->hnext = cm.lhash[h];
	cm.lhash[h] = cid;
	cid->in_lhash = true;
}

void cm_rhash_add(struct cm_id *cid)
{
	unsigned h = rkey(cid->remote_comm_id, &cid->peer_cm);

	if (cid->in_rhash)
		return;
	cid->rnext = cm.rhash[h];
	cm.rhash[h] = cid;
	cid->in_rhash = true;
}

void cm_hash_del(struct cm_id *cid)
{
	struct cm_id **pp;

	if (cid->in_lhash) {
		for (pp = &cm.lhash[cid->local_comm_id & HMASK]; *pp; pp = &(*pp)->hnext)
			if (*pp == cid) {
				*pp = cid->hnext;
				break;
			}
		cid->in_lhash = false;
	}
	if (cid->in_rhash) {
		for (pp = &cm.rhash[rkey(cid->remote_comm_id, &cid->peer_cm)]; *pp;
		     pp = &(*pp)->rnext)
			if (*pp == cid) {
				*pp = cid->rnext;
				break;
			}
		cid->in_rhash = false;
	}
}

static struct cm_id *by_local(uint32_t id)
{
	for (struct cm_id *c = cm.lhash[id & HMASK]; c; c = c->hnext)
		if (c->local_comm_id == id)
			return c->destroying ? NULL : c;
	return NULL;
}

static struct cm_id *by_remote(uint32_t remote_id, const struct sockaddr_in *peer)
{
	for (struct cm_id *c = cm.rhash[rkey(remote_id, peer)]; c; c = c->rnext)
		if (c->remote_comm_id == remote_id &&
		    c->peer_cm.sin_addr.s_addr == peer->sin_addr.s_addr &&
		    c->peer_cm.sin_port == peer->sin_port)
			return c->destroying ? NULL : c;
	return NULL;
}

static void resend(struct cm_id *cid)
{
	__atomic_add_fetch(&cm_stats.retrans, 1, __ATOMIC_RELAXED);
	cm_xmit(cid->ctx, cm_src_v4(cid), &cid->peer_cm, cid->mad);
}

static void unknown(void)
{
	__atomic_add_fetch(&cm_stats.drop_unknown, 1, __ATOMIC_RELAXED);
}

/* The application has not answered a REQ yet: ask the peer to wait. */
static void send_mra(struct cm_id *cid)
{
	struct cm_msg m;

	cm_msg_init(cid, &m, CM_ATTR_MRA);
	m.msg_target = 0; /* the REQ */
	m.service_timeout = CM_MRA_TIMEOUT;
	cm_send(cid, &m, false);
}

/* A REQ or SIDR_REQ on a listener: a new id in REQ_RCVD, CONNECT_REQUEST. */
/* Standard-port mode: the listener for a port and local address. */
static struct cm_id *std_listener(uint16_t port, struct in_addr to)
{
	for (struct cm_id *l = cm.listeners; l; l = l->lnext) {
		in_addr_t a = l->id.route.addr.src_sin.sin_addr.s_addr;

		if (ntohs(l->id.route.addr.src_sin.sin_port) == port &&
		    (a == INADDR_ANY || a == to.s_addr))
			return l;
	}
	return NULL;
}

static void rx_req(struct cm_sock *s, struct ibv_context *ctx, const struct cm_msg *m,
		   const struct sockaddr_in *from, struct in_addr to)
{
	struct cm_id *l, *dup, *c;
	bool sidr = m->attr == CM_ATTR_SIDR_REQ;
	uint16_t port = (uint16_t)(m->service_id & 0xffff);
	enum rdma_port_space ps = (enum rdma_port_space)((m->service_id >> 16) & 0xffff);
	bool ud = sidr;

	l = s ? s->listener : std_listener((uint16_t)(m->service_id & 0xffff), to);
	dup = by_remote(m->local_id, from);
	if (dup) {
		__atomic_add_fetch(&cm_stats.dup_req, 1, __ATOMIC_RELAXED);
		if (dup->state == CM_REP_SENT || (sidr && dup->state == CM_ESTABLISHED))
			resend(dup);
		else if (dup->state == CM_REQ_RCVD)
			send_mra(dup);
		return;
	}
	if (!l || l->destroying || l->state != CM_LISTEN ||
	    port != ntohs(l->id.route.addr.src_sin.sin_port) || (m->service_id >> 32) != 0 ||
	    (ps != l->id.ps && l->id.ps != RDMA_PS_IB)) {
		ur_dbg("rdma_cm: REQ for service %#llx on UDP port %u: no such listener",
		       (unsigned long long)m->service_id, port);
		unknown();
		goto no_service;
	}
	c = cm_id_new(l->sync ? NULL : l->chan, l->id.context, ps, ud ? IBV_QPT_UD : IBV_QPT_RC);
	if (!c)
		goto no_service;
	if (cm_dev_for_addr(to, &c->ctx, &c->sgid_index)) {
		cm_id_free_locked(c);
		goto no_service;
	}
	c->id.verbs = c->ctx;
	c->id.pd = cm_dev_pd(c->ctx);
	c->id.port_num = 1;
	c->dev_max_rd = cm_dev_max_rd(c->ctx);
	c->mtu = IBV_MTU_1024;
	{
		struct ibv_port_attr pa;

		if (!ibv_query_port(c->ctx, 1, &pa))
			c->mtu = pa.active_mtu;
	}
	if (!ud && m->mtu < c->mtu)
		c->mtu = (enum ibv_mtu)m->mtu;
	c->id.route.addr.src_sin =
	    (struct sockaddr_in){.sin_family = AF_INET, .sin_addr = to, .sin_port = htons(port)};
	c->id.route.addr.dst_sin = (struct sockaddr_in){
	    .sin_family = AF_INET, .sin_addr = m->ip_src, .sin_port = htons(m->ip_sport)};
	cm_gid_from_v4(&c->id.route.addr.addr.ibaddr.sgid, to);
	if (ud)
		cm_gid_from_v4(&c->remote_gid, m->ip_src);
	else
		memcpy(&c->remote_gid, m->lgid, 16);
	c->id.route.addr.addr.ibaddr.dgid = c->remote_gid;
	c->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
	c->id.route.num_paths = 1;
	c->peer_cm = *from;
	c->service_id = m->service_id;
	c->remote_comm_id = m->local_id;
	c->local_comm_id = cm_new_comm_id();
	c->remote_qpn = m->qpn;
	c->remote_psn = m->psn;
	/* what we may grant: the peer's initiator depth / responder resources */
	c->resp_res = m->init_depth;
	c->init_depth = m->resp_res;
	c->retry = m->retry;
	c->remote_rnr_retry = m->rnr_retry;
	c->remote_ack_timeout = m->local_ack_timeout;
	c->flow_ctl = m->flow_ctl;
	c->remote_ece.vendor_id = m->vendor_id;
	c->remote_ece.options = m->attr_mod;
	c->state = sidr ? CM_SIDR_REQ_RCVD : CM_REQ_RCVD;
	cm_hash_add(c);
	cm_rhash_add(c);
	cm_post_to(l->chan, c, l, RDMA_CM_EVENT_CONNECT_REQUEST, 0, m);
	return;
no_service:
	if (sidr) {
		struct cm_msg r = {.attr = CM_ATTR_SIDR_REP,
				   .tid = m->tid,
				   .remote_id = m->local_id,
				   .status = CM_SIDR_NO_SERVICE,
				   .service_id = m->service_id};
		uint8_t mad[CM_MAD_BYTES];

		cm_mad_build(&r, mad);
		cm_xmit(ctx, to, from, mad);
	} else {
		cm_send_rej(ctx, to, from, 0, m->local_id, 0, CM_REJ_INVALID_SERVICE_ID, NULL, 0);
	}
}

static void rx_rep(struct cm_id *c, const struct cm_msg *m, const struct sockaddr_in *from)
{
	struct cm_msg r;

	if (c->state == CM_ESTABLISHED && c->remote_comm_id == m->local_id) {
		resend(c); /* our RTU was lost */
		return;
	}
	if (c->state != CM_REQ_SENT) {
		unknown();
		return;
	}
	cm_timer_stop(c);
	c->remote_comm_id = m->local_id;
	c->remote_qpn = m->qpn;
	c->remote_psn = m->psn;
	c->peer_cm = *from; /* the peer's active socket from now on */
	if (m->resp_res < c->init_depth)
		c->init_depth = m->resp_res;
	if (m->init_depth < c->resp_res)
		c->resp_res = m->init_depth;
	c->remote_rnr_retry = m->rnr_retry;
	c->remote_ece.vendor_id = m->vendor_id;
	if (!c->id.qp) {
		c->state = CM_REP_RCVD;
		cm_post(c, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, m);
		return;
	}
	if (cm_qp_to_rtr(c) || cm_qp_to_rts(c)) {
		cm_send_rej(c->ctx, cm_src_v4(c), &c->peer_cm, c->local_comm_id, c->remote_comm_id,
			    1, CM_REJ_CONSUMER_DEFINED, NULL, 0);
		c->state = CM_DISCONNECTED;
		cm_post(c, RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL, NULL);
		return;
	}
	cm_msg_init(c, &r, CM_ATTR_RTU);
	cm_mad_build(&r, c->mad); /* answers a duplicate REP */
	cm_send(c, &r, false);
	cm_set_established(c, m);
}

static void rx_sidr_rep(struct cm_id *c, const struct cm_msg *m)
{
	if (c->state != CM_SIDR_REQ_SENT) {
		unknown();
		return;
	}
	cm_timer_stop(c);
	if (m->status != CM_SIDR_OK) {
		c->state = CM_DISCONNECTED;
		cm_post(c, RDMA_CM_EVENT_UNREACHABLE, m->status, m);
		return;
	}
	c->remote_qpn = m->qpn;
	c->remote_qkey = m->qkey;
	cm_set_established(c, m);
}

static void rx_rej(struct cm_id *c, const struct cm_msg *m)
{
	/* no listener (yet): ask again, as after an ICMP (cm_rx_icmp) */
	if (c->state == CM_REQ_SENT && m->reason == CM_REJ_INVALID_SERVICE_ID && c->icmp_left > 0) {
		c->icmp_left--;
		c->deadline_ms = cm_now_ms() + CM_ICMP_RETRY_MS;
		c->retries_left++;
		return;
	}
	switch (c->state) {
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_REP_RCVD:
		cm_timer_stop(c);
		cm_qp_to_err(c);
		c->state = CM_DISCONNECTED;
		cm_post(c, RDMA_CM_EVENT_REJECTED, m->reason, m);
		break;
	case CM_ESTABLISHED:
		cm_qp_to_err(c);
		c->state = CM_DISCONNECTED;
		cm_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL);
		break;
	default:
		unknown();
	}
}

static void rx_dreq(struct cm_id *c, const struct cm_msg *m, struct ibv_context *ctx,
		    const struct sockaddr_in *from, struct in_addr to)
{
	struct cm_msg r;

	if (!c) {
		/* stateless DREP: a peer whose REP or TIME_WAIT we lost still ends */
		memset(&r, 0, sizeof(r));
		r.attr = CM_ATTR_DREP;
		r.tid = m->tid;
		r.local_id = m->remote_id;
		r.remote_id = m->local_id;
		uint8_t mad[CM_MAD_BYTES];

		cm_mad_build(&r, mad);
		cm_xmit(ctx, to, from, mad);
		return;
	}
	cm_msg_init(c, &r, CM_ATTR_DREP);
	switch (c->state) {
	case CM_ESTABLISHED:
	case CM_REP_SENT:
	case CM_DREQ_SENT:
		/* The QP stays as it is (rdma-core and the kernel leave it to the
		 * application's rdma_disconnect or destroy): a DREQ travels on
		 * the CM socket, and flushing here could overtake the ACK of the
		 * peer's last message, still in the data path (a DREQ_SENT QP is
		 * in ERROR already). */
		cm_timer_stop(c);
		cm_send(c, &r, false);
		cm_enter_timewait(c);
		cm_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL);
		break;
	case CM_TIMEWAIT:
	case CM_DISCONNECTED:
		cm_send(c, &r, false);
		break;
	default:
		unknown();
	}
}

void cm_rx(struct cm_sock *s, struct ibv_context *ctx, const uint8_t *mad, size_t len,
	   const struct sockaddr_in *from, struct in_addr to)
{
	struct cm_msg m;
	struct cm_id *c;

	if (cm_mad_parse(mad, len, &m))
		return;
	if (m.attr == CM_ATTR_REQ || m.attr == CM_ATTR_SIDR_REQ) {
		rx_req(s, ctx, &m, from, to);
		return;
	}
	c = by_local(m.remote_id);
	if (m.attr == CM_ATTR_DREQ) {
		if (c && c->remote_comm_id != m.local_id)
			c = NULL;
		rx_dreq(c, &m, ctx, from, to);
		return;
	}
	if (!c) {
		unknown();
		return;
	}
	/* after the REP, messages must come from the peer's communication ID */
	if (m.attr != CM_ATTR_REP && m.attr != CM_ATTR_SIDR_REP && c->remote_comm_id &&
	    m.attr != CM_ATTR_REJ && c->remote_comm_id != m.local_id) {
		unknown();
		return;
	}
	switch (m.attr) {
	case CM_ATTR_REP:
		rx_rep(c, &m, from);
		break;
	case CM_ATTR_RTU:
		if (c->state == CM_REP_SENT)
			cm_set_established(c, NULL);
		break;
	case CM_ATTR_REJ:
		rx_rej(c, &m);
		break;
	case CM_ATTR_MRA:
		if (c->timer_on && (c->state == CM_REQ_SENT || c->state == CM_REP_SENT))
			cm_timer_arm(
			    c, cm_timeout_ms(CM_RESP_TIMEOUT) + cm_timeout_ms(m.service_timeout),
			    CM_MAX_RETRIES);
		break;
	case CM_ATTR_DREP:
		if (c->state == CM_DREQ_SENT) {
			cm_timer_stop(c);
			cm_enter_timewait(c);
			cm_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL);
		}
		break;
	case CM_ATTR_SIDR_REP:
		rx_sidr_rep(c, &m);
		break;
	default:
		unknown();
	}
}

/* Nobody listens at dst any more: end what waits for an answer from it. */
void cm_rx_icmp(const struct sockaddr_in *dst)
{
	struct cm_id *c, *n;

	for (c = cm.timers; c; c = n) {
		n = c->tnext;
		if (c->destroying || c->peer_cm.sin_addr.s_addr != dst->sin_addr.s_addr ||
		    c->peer_cm.sin_port != dst->sin_port)
			continue;
		switch (c->state) {
		case CM_REQ_SENT:
			/* A listener may be between two rdma_listen calls (perftest
			 * -R closes and reopens its port between connections): ask
			 * again a few times, 50 ms apart, before giving up. */
			if (c->icmp_left > 0) {
				c->icmp_left--;
				c->deadline_ms = cm_now_ms() + CM_ICMP_RETRY_MS;
				c->retries_left++;
				break;
			}
			cm_timer_stop(c);
			c->state = CM_DISCONNECTED;
			cm_post(c, RDMA_CM_EVENT_REJECTED, CM_REJ_INVALID_SERVICE_ID, NULL);
			break;
		case CM_SIDR_REQ_SENT:
		case CM_REP_SENT:
			cm_timer_stop(c);
			cm_qp_to_err(c);
			c->state = CM_DISCONNECTED;
			cm_post(c, RDMA_CM_EVENT_UNREACHABLE, -ECONNREFUSED, NULL);
			break;
		case CM_DREQ_SENT:
			cm_timer_stop(c);
			cm_enter_timewait(c);
			cm_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL);
			break;
		default:
			break;
		}
	}
}

void cm_timer_fire(struct cm_id *c)
{
	if (c->retries_left > 0) {
		c->retries_left--;
		c->deadline_ms = cm_now_ms() + c->timeout_ms;
		resend(c);
		return;
	}
	cm_timer_stop(c);
	switch (c->state) {
	case CM_REQ_SENT:
	case CM_SIDR_REQ_SENT:
	case CM_REP_SENT:
		cm_qp_to_err(c);
		c->state = CM_DISCONNECTED;
		cm_post(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
		break;
	case CM_DREQ_SENT:
		cm_enter_timewait(c);
		cm_post(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL);
		break;
	case CM_TIMEWAIT:
		/* as rdma_cm: the QP may be reused now (after DISCONNECTED) */
		c->state = CM_DISCONNECTED;
		cm_hash_del(c);
		__atomic_add_fetch(&cm_stats.timewait_exit, 1, __ATOMIC_RELAXED);
		cm_post(c, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, NULL);
		break;
	default:
		break;
	}
}

/* The connection API: listen, connect, accept, reject, disconnect,
 * establish, get_request; and the helpers the protocol side (proto.c)
 * shares: building, sending and remembering messages, posting events.
 *
 * States and transitions follow rdma-core's cma.c over the kernel's cm.c
 * (docs/cm.md, "The state machine").  Everything runs under cm.lock; a
 * synchronous id waits for its event after dropping it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "cm.h"

uint32_t cm_timeout_ms(uint8_t t)
{
	uint64_t us = 4096ull << (t > 31 ? 31 : t);

	us /= 1000;
	return (uint32_t)(us / 1000 ? us / 1000 : 1);
}

uint32_t cm_new_comm_id(void)
{
	uint32_t id;

	do {
		id = ++cm.next_comm_id;
		for (struct cm_id *c = cm.lhash[id & ((1u << CM_HASH_BITS) - 1)]; c; c = c->hnext)
			if (c->local_comm_id == id)
				id = 0;
	} while (!id);
	return id;
}

static uint32_t rand24(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = cm.next_comm_id * 2654435761u;
	return v & 0xffffff;
}

void cm_msg_init(struct cm_id *cid, struct cm_msg *m, uint16_t attr)
{
	memset(m, 0, sizeof(*m));
	m->attr = attr;
	m->tid = (uint64_t)cm.tid_hi << 32 | cid->local_comm_id;
	m->local_id = cid->local_comm_id;
	m->remote_id = cid->remote_comm_id;
}

/* Send m to the peer's CM; keep it for the timer when it waits for an answer. */
int cm_send(struct cm_id *cid, const struct cm_msg *m, bool keep)
{
	uint8_t mad[CM_MAD_BYTES];
	int ret = cm_mad_build(m, mad);

	if (ret < 0)
		return ret;
	if (keep) {
		memcpy(cid->mad, mad, sizeof(mad));
		cm_timer_arm(cid, cm_timeout_ms(CM_RESP_TIMEOUT), CM_MAX_RETRIES);
	}
	return cm_xmit(cid->ctx, cm_src_v4(cid), &cid->peer_cm, mad);
}

int cm_send_rej(struct ibv_context *ctx, struct in_addr src, const struct sockaddr_in *dst,
		uint32_t local_id, uint32_t remote_id, uint8_t target, uint16_t reason,
		const void *pdata, uint8_t len)
{
	struct cm_msg m = {.attr = CM_ATTR_REJ,
			   .tid = (uint64_t)cm.tid_hi << 32 | local_id,
			   .local_id = local_id,
			   .remote_id = remote_id,
			   .msg_target = target,
			   .reason = reason};
	uint8_t mad[CM_MAD_BYTES];

	if (len > CM_REJ_PDATA)
		len = CM_REJ_PDATA;
	if (pdata && len)
		memcpy(m.pdata, pdata, len);
	m.pdata_len = pdata ? len : 0;
	cm_mad_build(&m, mad);
	return cm_xmit(ctx, src, dst, mad);
}

void cm_ah_attr(const struct cm_id *cid, const union ibv_gid *dgid, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = 1;
	ah->grh.dgid = *dgid;
	ah->grh.sgid_index = cid->sgid_index;
	ah->grh.hop_limit = 64;
	ah->grh.traffic_class = cid->tos;
}

void cm_post(struct cm_id *cid, enum rdma_cm_event_type t, int status, const struct cm_msg *m)
{
	cm_post_to(cid->chan, cid, NULL, t, status, m);
}

void cm_post_to(struct cm_chan *ch, struct cm_id *cid, struct cm_id *listener,
		enum rdma_cm_event_type t, int status, const struct cm_msg *m)
{
	struct cm_event *e;

	if (cid->destroying) /* rdma_destroy_id waits for acks: nothing new */
		return;
	e = cm_event_new(cid, t, status);
	if (!e) {
		ur_err("rdma_cm: out of memory for an event (%s)", rdma_event_str(t));
		return;
	}
	if (m) {
		memcpy(e->pdata, m->pdata, m->pdata_len);
		if (cid->id.qp_type == IBV_QPT_UD) {
			struct rdma_ud_param *u = &e->ev.param.ud;

			u->private_data = e->pdata;
			u->private_data_len = m->pdata_len;
			cm_ah_attr(cid, &cid->remote_gid, &u->ah_attr);
			u->qp_num = m->qpn;
			u->qkey = m->qkey;
		} else {
			struct rdma_conn_param *c = &e->ev.param.conn;

			c->private_data = e->pdata;
			c->private_data_len = m->pdata_len;
			c->responder_resources = m->resp_res;
			c->initiator_depth = m->init_depth;
			c->flow_control = m->flow_ctl;
			c->retry_count = m->retry;
			c->rnr_retry_count = m->rnr_retry;
			c->srq = m->srq;
			c->qp_num = m->qpn;
		}
	}
	if (listener)
		e->ev.listen_id = &listener->id;
	cm_event_post(ch, e);
}

void cm_set_established(struct cm_id *cid, const struct cm_msg *m)
{
	cm_timer_stop(cid);
	cid->state = CM_ESTABLISHED;
	cm_post(cid, RDMA_CM_EVENT_ESTABLISHED, 0, m);
}

/* Keep the pair of communication IDs for a while to answer a late DREQ. */
void cm_enter_timewait(struct cm_id *cid)
{
	cid->state = CM_TIMEWAIT;
	memset(cid->mad, 0, sizeof(cid->mad));
	cm_timer_arm(cid, CM_TIMEWAIT_MS, 0);
}

/* At destroy: leave the peer in a defined state, forget the id. */
void cm_conn_teardown_locked(struct cm_id *cid)
{
	struct cm_msg m;

	cm_timer_stop(cid);
	switch (cid->state) {
	case CM_REQ_RCVD:
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_REP_RCVD:
		cm_send_rej(cid->ctx, cm_src_v4(cid), &cid->peer_cm, cid->local_comm_id,
			    cid->remote_comm_id, cid->state == CM_REQ_SENT ? 2 : 1,
			    cid->state == CM_REQ_SENT ? CM_REJ_TIMEOUT : CM_REJ_CONSUMER_DEFINED,
			    NULL, 0);
		break;
	case CM_ESTABLISHED:
		cm_msg_init(cid, &m, CM_ATTR_DREQ);
		m.qpn = cid->remote_qpn;
		cm_send(cid, &m, false);
		break;
	case CM_SIDR_REQ_RCVD:
		cm_msg_init(cid, &m, CM_ATTR_SIDR_REP);
		m.remote_id = cid->remote_comm_id;
		m.status = CM_SIDR_REJECT;
		m.service_id = cid->service_id;
		cm_send(cid, &m, false);
		break;
	default:
		break;
	}
	cm_hash_del(cid);
	cid->state = CM_DISCONNECTED;
}

/* Standard-port mode: a listener is an entry in cm.listeners, REQs come
 * through QP1 of the device (every device for the wildcard address). */
static int std_listen(struct cm_id *cid)
{
	struct sockaddr_in *src = &cid->id.route.addr.src_sin;
	int ret = 0;

	if (!src->sin_port)
		src->sin_port = htons((uint16_t)(32768 + (rand24() % 28000)));
	for (struct cm_id *l = cm.listeners; l; l = l->lnext)
		if (l->id.route.addr.src_sin.sin_port == src->sin_port &&
		    (l->id.route.addr.src_sin.sin_addr.s_addr == src->sin_addr.s_addr ||
		     !l->id.route.addr.src_sin.sin_addr.s_addr || !src->sin_addr.s_addr))
			return EADDRINUSE;
	if (cid->ctx) {
		ret = cm_std_attach(cid->ctx);
	} else {
		struct ibv_context **l = rdma_get_devices_locked(NULL);

		for (int i = 0; l && l[i]; i++)
			if (cm_std_attach(l[i]) && !ret)
				ret = -EADDRINUSE;
		free(l);
	}
	if (ret)
		return -ret;
	cid->lnext = cm.listeners;
	cm.listeners = cid;
	cid->state = CM_LISTEN;
	return 0;
}

UROCE_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *cid = to_cid(id);
	struct sockaddr_in *src = &id->route.addr.src_sin;
	int err = 0;

	if (!id)
		return cm_fail(EINVAL, "rdma_listen: id is NULL");
	pthread_mutex_lock(&cm.lock);
	if (cid->state == CM_LISTEN) {
		cid->backlog = backlog;
		pthread_mutex_unlock(&cm.lock);
		return 0;
	}
	if (cid->state != CM_ADDR_BOUND) {
		pthread_mutex_unlock(&cm.lock);
		return cm_fail(EINVAL, "rdma_listen: bind the id first (rdma_bind_addr)");
	}
	if (cm.std) {
		err = std_listen(cid);
		pthread_mutex_unlock(&cm.lock);
		return err ? (errno = err, -1) : 0;
	}
	cid->lsock = cm_sock_open(src->sin_addr, ntohs(src->sin_port), cid->reuseaddr, &err);
	if (!cid->lsock) {
		pthread_mutex_unlock(&cm.lock);
		ur_dbg("rdma_listen: UDP %s:%u: %s", inet_ntoa(src->sin_addr), ntohs(src->sin_port),
		       strerror(err));
		return errno = err, -1;
	}
	cid->lsock->listener = cid;
	src->sin_port = htons(cid->lsock->port);
	cid->backlog = backlog;
	cid->state = CM_LISTEN;
	pthread_mutex_unlock(&cm.lock);
	return 0;
}

static uint8_t clamp7(uint8_t v)
{
	return v > 7 ? 7 : v;
}

static int connect_ud(struct cm_id *cid, struct rdma_conn_param *p)
{
	struct cm_msg m;

	cm_msg_init(cid, &m, CM_ATTR_SIDR_REQ);
	m.pkey = 0xffff;
	m.service_id = cid->service_id;
	m.has_ip = true;
	m.ip_src = cm_src_v4(cid);
	m.ip_dst = cm_dst_v4(cid);
	m.ip_sport = cm.asock->port;
	if (p && p->private_data_len) {
		if (p->private_data_len > CM_SIDR_REQ_PDATA || !p->private_data)
			return -EINVAL;
		memcpy(m.pdata, p->private_data, p->private_data_len);
		m.pdata_len = p->private_data_len;
	}
	cid->state = CM_SIDR_REQ_SENT;
	return cm_send(cid, &m, true);
}

UROCE_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct cm_id *cid = to_cid(id);
	struct rdma_conn_param dflt;
	uint8_t p_resp, p_init;
	struct cm_msg m;
	int ret;

	if (!id)
		return cm_fail(EINVAL, "rdma_connect: id is NULL");
	pthread_mutex_lock(&cm.lock);
	if (cid->state != CM_ROUTE_RESOLVED) {
		pthread_mutex_unlock(&cm.lock);
		return cm_fail(EINVAL, "rdma_connect: resolve the route first");
	}
	if (cm.std && cm_std_attach(cid->ctx)) {
		pthread_mutex_unlock(&cm.lock);
		return errno = EADDRINUSE, -1;
	}
	cid->local_comm_id = cm_new_comm_id();
	cm_hash_add(cid);
	cid->service_id = (uint64_t)id->ps << 16 | ntohs(id->route.addr.dst_sin.sin_port);
	cid->peer_cm = id->route.addr.dst_sin;
	if (cm.std)
		cid->peer_cm.sin_port = htons(4791); /* the peer's QP1 */
	id->route.addr.src_sin.sin_port = htons(cm.asock->port);
	if (id->qp_type == IBV_QPT_UD) {
		ret = connect_ud(cid, p);
		goto out;
	}
	if (!p) {
		/* librdmacm's defaults: the most the device allows, 7 retries */
		dflt = (struct rdma_conn_param){.responder_resources = RDMA_MAX_RESP_RES,
						.initiator_depth = RDMA_MAX_INIT_DEPTH,
						.retry_count = 7,
						.rnr_retry_count = 7};
		p = &dflt;
	}
	if (p->responder_resources > cid->dev_max_rd)
		p_resp = cid->dev_max_rd;
	else
		p_resp = p->responder_resources;
	p_init = p->initiator_depth > cid->dev_max_rd ? cid->dev_max_rd : p->initiator_depth;
	cid->local_psn = rand24();
	cid->resp_res = p_resp;
	cid->init_depth = p_init;
	cid->retry = clamp7(p->retry_count);
	cid->rnr_retry = clamp7(p->rnr_retry_count);
	cid->flow_ctl = p->flow_control;
	cm_msg_init(cid, &m, CM_ATTR_REQ);
	m.service_id = cid->service_id;
	m.ca_guid = be64toh(ibv_get_device_guid(cid->ctx->device));
	m.qpn = id->qp ? id->qp->qp_num : p->qp_num;
	m.resp_res = p_resp;
	m.init_depth = p_init;
	m.remote_cm_timeout = CM_RESP_TIMEOUT;
	m.qp_type = id->qp ? id->qp->qp_type : id->qp_type;
	m.flow_ctl = p->flow_control;
	m.psn = cid->local_psn;
	m.local_cm_timeout = CM_RESP_TIMEOUT;
	m.retry = cid->retry;
	m.pkey = 0xffff;
	m.mtu = (uint8_t)cid->mtu;
	m.rnr_retry = cid->rnr_retry;
	m.max_cm_retries = CM_MAX_RETRIES;
	m.srq = id->srq || p->srq;
	memcpy(m.lgid, &id->route.addr.addr.ibaddr.sgid, 16);
	memcpy(m.rgid, &id->route.addr.addr.ibaddr.dgid, 16);
	m.hop_limit = 64;
	m.traffic_class = cid->tos;
	m.local_ack_timeout = cid->ack_timeout;
	m.vendor_id = cid->local_ece.vendor_id & 0xffffff;
	m.attr_mod = cid->local_ece.options;
	m.has_ip = true;
	m.ip_src = cm_src_v4(cid);
	m.ip_dst = cm_dst_v4(cid);
	m.ip_sport = cm.asock->port;
	if (p->private_data_len) {
		if (p->private_data_len > CM_REQ_PDATA || !p->private_data) {
			ret = -EINVAL;
			goto out;
		}
		memcpy(m.pdata, p->private_data, p->private_data_len);
		m.pdata_len = p->private_data_len;
	}
	cid->state = CM_REQ_SENT;
	cid->icmp_left = CM_ICMP_RETRIES;
	ur_dbg("rdma_cm: REQ %#x for service %#llx to %s:%u", cid->local_comm_id,
	       (unsigned long long)cid->service_id, inet_ntoa(cid->peer_cm.sin_addr),
	       ntohs(cid->peer_cm.sin_port));
	ret = cm_send(cid, &m, true);
out:
	if (ret && cid->state != CM_ROUTE_RESOLVED) {
		cm_timer_stop(cid);
		cid->state = CM_ROUTE_RESOLVED;
	}
	if (ret)
		cm_hash_del(cid);
	pthread_mutex_unlock(&cm.lock);
	if (ret)
		return errno = -ret, -1;
	return cid->sync ? cm_sync_wait(cid, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

static int accept_ud(struct cm_id *cid, struct rdma_conn_param *p)
{
	struct cm_msg m;

	cm_msg_init(cid, &m, CM_ATTR_SIDR_REP);
	m.remote_id = cid->remote_comm_id;
	m.status = CM_SIDR_OK;
	m.qpn = cid->id.qp ? cid->id.qp->qp_num : (p ? p->qp_num : 0);
	m.service_id = cid->service_id;
	m.qkey = RDMA_UDP_QKEY;
	if (p && p->private_data_len) {
		if (p->private_data_len > CM_SIDR_REP_PDATA || !p->private_data)
			return -EINVAL;
		memcpy(m.pdata, p->private_data, p->private_data_len);
		m.pdata_len = p->private_data_len;
	}
	/* kept (not timed) to answer a duplicate SIDR_REQ */
	cm_mad_build(&m, cid->mad);
	cid->state = CM_ESTABLISHED;
	return cm_send(cid, &m, false);
}

UROCE_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct cm_id *cid = to_cid(id);
	struct cm_msg m;
	int ret;

	if (!id)
		return cm_fail(EINVAL, "rdma_accept: id is NULL");
	cm_sync_ack_stored(cid);
	pthread_mutex_lock(&cm.lock);
	if (cid->state == CM_SIDR_REQ_RCVD) {
		ret = accept_ud(cid, p);
		pthread_mutex_unlock(&cm.lock);
		return ret ? (errno = -ret, -1) : 0;
	}
	if (cid->state != CM_REQ_RCVD) {
		pthread_mutex_unlock(&cm.lock);
		return cm_fail(EINVAL, "rdma_accept: no connection request on this id");
	}
	if (p) {
		/* what the peer asked for bounds what we grant */
		if (p->responder_resources < cid->resp_res)
			cid->resp_res = p->responder_resources;
		if (p->initiator_depth < cid->init_depth)
			cid->init_depth = p->initiator_depth;
		cid->rnr_retry = clamp7(p->rnr_retry_count);
		cid->flow_ctl = p->flow_control;
		if (p->private_data_len > CM_REP_PDATA ||
		    (p->private_data_len && !p->private_data)) {
			pthread_mutex_unlock(&cm.lock);
			return cm_fail(EINVAL, "rdma_accept: private data too long");
		}
	}
	if (cid->resp_res > cid->dev_max_rd)
		cid->resp_res = cid->dev_max_rd;
	if (cid->init_depth > cid->dev_max_rd)
		cid->init_depth = cid->dev_max_rd;
	cid->local_psn = rand24();
	if (id->qp) {
		ret = cm_qp_to_rtr(cid);
		if (!ret)
			ret = cm_qp_to_rts(cid);
		if (ret) {
			pthread_mutex_unlock(&cm.lock);
			return errno = -ret, -1;
		}
	}
	cm_msg_init(cid, &m, CM_ATTR_REP);
	m.qpn = id->qp ? id->qp->qp_num : (p ? p->qp_num : 0);
	m.psn = cid->local_psn;
	m.resp_res = cid->resp_res;
	m.init_depth = cid->init_depth;
	m.target_ack_delay = 15;
	m.flow_ctl = cid->flow_ctl;
	m.rnr_retry = cid->rnr_retry;
	m.srq = id->srq || (p && p->srq);
	m.ca_guid = be64toh(ibv_get_device_guid(cid->ctx->device));
	m.vendor_id = cid->local_ece.vendor_id & 0xffffff;
	if (p && p->private_data_len) {
		memcpy(m.pdata, p->private_data, p->private_data_len);
		m.pdata_len = p->private_data_len;
	}
	cid->state = CM_REP_SENT;
	ret = cm_send(cid, &m, true);
	pthread_mutex_unlock(&cm.lock);
	if (ret)
		return errno = -ret, -1;
	return cid->sync ? cm_sync_wait(cid, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

static int reject(struct rdma_cm_id *id, const void *pdata, uint8_t len)
{
	struct cm_id *cid = to_cid(id);
	struct cm_msg m;
	int ret = 0;

	if (!id)
		return cm_fail(EINVAL, "rdma_reject: id is NULL");
	cm_sync_ack_stored(cid);
	pthread_mutex_lock(&cm.lock);
	if (cid->state == CM_SIDR_REQ_RCVD) {
		cm_msg_init(cid, &m, CM_ATTR_SIDR_REP);
		m.remote_id = cid->remote_comm_id;
		m.status = CM_SIDR_REJECT;
		m.service_id = cid->service_id;
		m.pdata_len = len > CM_SIDR_REP_PDATA ? CM_SIDR_REP_PDATA : len;
		if (pdata)
			memcpy(m.pdata, pdata, m.pdata_len);
		ret = cm_send(cid, &m, false);
	} else if (cid->state == CM_REQ_RCVD) {
		ret = cm_send_rej(cid->ctx, cm_src_v4(cid), &cid->peer_cm, cid->local_comm_id,
				  cid->remote_comm_id, 0, CM_REJ_CONSUMER_DEFINED, pdata,
				  pdata ? len : 0);
	} else {
		pthread_mutex_unlock(&cm.lock);
		return cm_fail(EINVAL, "rdma_reject: no connection request on this id");
	}
	cm_hash_del(cid);
	cid->state = CM_DISCONNECTED;
	pthread_mutex_unlock(&cm.lock);
	return ret ? (errno = -ret, -1) : 0;
}

UROCE_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			     uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len);
}

UROCE_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
				 uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len);
}

UROCE_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct cm_id *cid = to_cid(id);
	struct cm_msg m;
	int ret = 0;

	if (!id)
		return cm_fail(EINVAL, "rdma_establish: id is NULL");
	pthread_mutex_lock(&cm.lock);
	if (cid->state != CM_REP_RCVD) {
		pthread_mutex_unlock(&cm.lock);
		return cm_fail(EINVAL, "rdma_establish: no CONNECT_RESPONSE on this id");
	}
	if (id->qp) {
		ret = cm_qp_to_rtr(cid);
		if (!ret)
			ret = cm_qp_to_rts(cid);
	}
	if (!ret) {
		cm_msg_init(cid, &m, CM_ATTR_RTU);
		cm_mad_build(&m, cid->mad); /* answers a duplicate REP */
		ret = cm_send(cid, &m, false);
		cid->state = CM_ESTABLISHED;
	}
	pthread_mutex_unlock(&cm.lock);
	return ret ? (errno = -ret, -1) : 0;
}

UROCE_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cm_id *cid = to_cid(id);
	struct cm_msg m;
	int ret = 0;

	if (!id)
		return cm_fail(EINVAL, "rdma_disconnect: id is NULL");
	pthread_mutex_lock(&cm.lock);
	switch (cid->state) {
	case CM_ESTABLISHED:
	case CM_REP_SENT:
	case CM_REP_RCVD:
		if (id->qp_type == IBV_QPT_UD) {
			cid->state = CM_DISCONNECTED;
			break;
		}
		cm_qp_to_err(cid);
		cm_msg_init(cid, &m, CM_ATTR_DREQ);
		m.qpn = cid->remote_qpn;
		cid->state = CM_DREQ_SENT;
		ret = cm_send(cid, &m, true);
		break;
	case CM_DREQ_SENT:
	case CM_TIMEWAIT:
	case CM_DISCONNECTED:
		cm_qp_to_err(cid);
		break;
	default:
		ret = -EINVAL;
		ur_dbg("rdma_disconnect: the id is not connected");
	}
	pthread_mutex_unlock(&cm.lock);
	return ret ? (errno = -ret, -1) : 0;
}

UROCE_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cm_id *lid = to_cid(listen);
	struct rdma_cm_event *ev;
	struct cm_id *child;

	if (!listen || !id)
		return cm_fail(EINVAL, "rdma_get_request: NULL argument");
	if (!lid->sync)
		return cm_fail(EINVAL, "rdma_get_request: the listening id is not synchronous");
	for (;;) {
		if (rdma_get_cm_event(listen->channel, &ev))
			return -1;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && !ev->status)
			break;
		rdma_ack_cm_event(ev);
	}
	child = to_cid(ev->id);
	child->stored_event = (struct cm_event *)ev;
	child->id.event = ev;
	if (lid->ep_has_qp_attr) {
		struct ibv_qp_init_attr a = lid->ep_qp_attr;

		if (rdma_create_qp(&child->id, lid->ep_pd, &a)) {
			int err = errno;

			rdma_reject(&child->id, NULL, 0);
			rdma_destroy_id(&child->id);
			return errno = err, -1;
		}
	}
	*id = &child->id;
	return 0;
}

UROCE_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct cm_id *cid = to_cid(id);

	if (!id)
		return cm_fail(EINVAL, "rdma_notify: id is NULL");
	pthread_mutex_lock(&cm.lock);
	/* A QP that saw traffic before the RTU: the connection is established. */
	if (event == IBV_EVENT_COMM_EST && cid->state == CM_REP_SENT)
		cm_set_established(cid, NULL);
	pthread_mutex_unlock(&cm.lock);
	return 0;
}

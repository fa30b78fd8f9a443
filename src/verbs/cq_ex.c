/* Extended CQs: ibv_create_cq_ex()'s poll iterator and readers, completion
 * timestamps, ibv_resize_cq() and ibv_query_rt_values_ex().
 *
 * Every CQ is an ibv_cq_ex, so the iterator works on any CQ.  start_poll()
 * and next_poll() take the oldest completion out of the ring into cq->cur
 * (under cq->lock, briefly); the readers return fields of cq->cur.  The
 * ring lock is not held between start_poll() and end_poll(): applications
 * post work from inside the batch (ibv_rc_pingpong -t does), and posting
 * takes qp->lock, which is ordered before cq->lock.  What start_poll() to
 * end_poll() does hold is cq->poll_lock, which only pollers take: it keeps
 * two threads from iterating one CQ at once and is skipped for
 * IBV_CREATE_CQ_ATTR_SINGLE_THREADED CQs.
 *
 * Timestamps: the device clock is CLOCK_MONOTONIC in nanoseconds (1 GHz);
 * uroce_cq_push() stamps each completion with it and with CLOCK_REALTIME
 * when the CQ was created with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP or
 * IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uroce.h"
#include "verbs/verbs_ex.h"
#include "verbs/verbs_ops.h"

#define UROCE_WC_TS_FLAGS                                                                          \
	((uint64_t)IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |                                           \
	 (uint64_t)IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

/* CVLAN and FLOW_TAG read as 0: no VLAN tag, no flow steering. */
#define UROCE_WC_FLAGS                                                                             \
	((uint64_t)IBV_WC_STANDARD_FLAGS | UROCE_WC_TS_FLAGS | (uint64_t)IBV_WC_EX_WITH_CVLAN |    \
	 (uint64_t)IBV_WC_EX_WITH_FLOW_TAG)

static struct uroce_cq *to_ucq_ex(struct ibv_cq_ex *c)
{
	return container_of(c, struct uroce_cq, ibcq);
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void uroce_cq_stamp(struct uroce_cq_ts *ts)
{
	ts->ns = clock_ns(CLOCK_MONOTONIC);
	ts->wall_ns = clock_ns(CLOCK_REALTIME);
}

/* ---- the iterator ---- */

/* Move the oldest completion into cq->cur.  ENOENT when there is none. */
static int take(struct uroce_cq *cq)
{
	pthread_mutex_lock(&cq->lock);
	if (!cq->count) {
		pthread_mutex_unlock(&cq->lock);
		return ENOENT;
	}
	cq->cur = cq->ring[cq->head];
	if (cq->ts)
		cq->cur_ts = cq->ts[cq->head];
	cq->head = (cq->head + 1) % cq->size;
	cq->count--;
	pthread_mutex_unlock(&cq->lock);
	cq->ibcq.wr_id = cq->cur.wr_id;
	cq->ibcq.status = cq->cur.status;
	return 0;
}

static int cq_start_poll(struct ibv_cq_ex *ibcq, struct ibv_poll_cq_attr *attr)
{
	struct uroce_cq *cq = to_ucq_ex(ibcq);
	int ret;

	if (attr && attr->comp_mask) {
		ur_dbg("start_poll: ibv_poll_cq_attr.comp_mask 0x%x must be 0", attr->comp_mask);
		return EINVAL;
	}
	/* Like ibv_poll_cq(): an empty CQ makes the poller receive. */
	uroce_cq_drive(cq);
	if (!cq->single_threaded)
		pthread_mutex_lock(&cq->poll_lock);
	ret = take(cq);
	/* ibv_create_cq_ex(3): after an error start_poll, no end_poll */
	if (ret && !cq->single_threaded)
		pthread_mutex_unlock(&cq->poll_lock);
	return ret;
}

static int cq_next_poll(struct ibv_cq_ex *ibcq)
{
	return take(to_ucq_ex(ibcq));
}

static void cq_end_poll(struct ibv_cq_ex *ibcq)
{
	struct uroce_cq *cq = to_ucq_ex(ibcq);

	if (!cq->single_threaded)
		pthread_mutex_unlock(&cq->poll_lock);
}

/* ---- readers: fields of the current completion ---- */

static enum ibv_wc_opcode cq_read_opcode(struct ibv_cq_ex *c)
{
	return to_ucq_ex(c)->cur.opcode;
}

static uint32_t cq_read_vendor_err(struct ibv_cq_ex *c)
{
	return to_ucq_ex(c)->cur.vendor_err;
}

static uint32_t cq_read_byte_len(struct ibv_cq_ex *c)
{
	return to_ucq_ex(c)->cur.byte_len;
}

/* also ibv_wc_read_invalidated_rkey(): the same union member */
static __be32 cq_read_imm_data(struct ibv_cq_ex *c)
{
	return to_ucq_ex(c)->cur.imm_data;
}

static uint32_t cq_read_qp_num(struct ibv_cq_ex *c)
{
	return to_ucq_ex(c)->cur.qp_num;
}

static uint32_t cq_read_src_qp(struct ibv_cq_ex *c)
{
	return to_ucq_ex(c)->cur.src_qp;
}

static unsigned int cq_read_wc_flags(struct ibv_cq_ex *c)
{
	return to_ucq_ex(c)->cur.wc_flags;
}

static uint32_t cq_read_slid(struct ibv_cq_ex *c)
{
	return to_ucq_ex(c)->cur.slid;
}

static uint8_t cq_read_sl(struct ibv_cq_ex *c)
{
	return to_ucq_ex(c)->cur.sl;
}

static uint8_t cq_read_dlid_path_bits(struct ibv_cq_ex *c)
{
	return to_ucq_ex(c)->cur.dlid_path_bits;
}

static uint64_t cq_read_completion_ts(struct ibv_cq_ex *c)
{
	return to_ucq_ex(c)->cur_ts.ns;
}

static uint64_t cq_read_completion_wallclock_ns(struct ibv_cq_ex *c)
{
	return to_ucq_ex(c)->cur_ts.wall_ns;
}

static uint16_t cq_read_cvlan(struct ibv_cq_ex *c)
{
	(void)c;
	return 0; /* no VLAN tags on a UDP socket */
}

static uint32_t cq_read_flow_tag(struct ibv_cq_ex *c)
{
	(void)c;
	return 0; /* no flow steering, so no tag */
}

static void cq_read_tm_info(struct ibv_cq_ex *c, struct ibv_wc_tm_info *tm_info)
{
	(void)c;
	memset(tm_info, 0, sizeof(*tm_info)); /* no tag matching (creation refuses TM_INFO) */
}

/* ---- creation ---- */

int uroce_cq_ex_check(struct ibv_context *context, const struct ibv_cq_init_attr_ex *attr)
{
	const uint32_t masks = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;

	if (!context || !attr)
		return ur_dbg("create_cq_ex: context and attributes are required"), EINVAL;
	if (attr->comp_mask & ~masks)
		return ur_dbg("create_cq_ex: unknown comp_mask bits 0x%x",
			      attr->comp_mask & ~masks),
		       EINVAL;
	if (attr->wc_flags & ~UROCE_WC_FLAGS)
		return ur_dbg("create_cq_ex: wc_flags 0x%llx not supported (TM_INFO: no tag "
			      "matching)",
			      (unsigned long long)(attr->wc_flags & ~UROCE_WC_FLAGS)),
		       EOPNOTSUPP;
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
		return ur_dbg("create_cq_ex: flags 0x%x not supported (IGNORE_OVERRUN: an overrun "
			      "is a CQ error here)",
			      attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED),
		       EOPNOTSUPP;
	/* A parent domain's allocator gives the ring (src/verbs/td.c). */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && attr->parent_domain &&
	    (attr->parent_domain->context != context || !to_upd(attr->parent_domain)->prot))
		return ur_dbg("create_cq_ex: parent_domain is not a parent domain of this context"),
		       EINVAL;
	/* The remaining rules (1 <= cqe <= max_cqe, comp_vector) are
	 * ibv_create_cq()'s; make sure the values survive the trip to int. */
	if (attr->cqe > INT_MAX)
		return ur_dbg("create_cq_ex: cqe %u > max_cqe (%d)", attr->cqe, UROCE_MAX_CQE),
		       EINVAL;
	if (attr->comp_vector > INT_MAX)
		return ur_dbg("create_cq_ex: comp_vector %u >= num_comp_vectors (%d)",
			      attr->comp_vector, context->num_comp_vectors),
		       EINVAL;
	return 0;
}

int uroce_cq_ex_init(struct uroce_cq *cq, uint64_t wc_flags, uint32_t create_flags)
{
	struct ibv_cq_ex *c = &cq->ibcq;

	cq->wc_flags = wc_flags;
	cq->single_threaded = create_flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	if (wc_flags & UROCE_WC_TS_FLAGS) {
		cq->ts = calloc(cq->size, sizeof(*cq->ts));
		if (!cq->ts)
			return ur_dbg("create_cq: out of memory for completion timestamps"), ENOMEM;
	}
	pthread_mutex_init(&cq->poll_lock, NULL);
	c->comp_mask = 0;
	c->start_poll = cq_start_poll;
	c->next_poll = cq_next_poll;
	c->end_poll = cq_end_poll;
	c->read_opcode = cq_read_opcode;
	c->read_vendor_err = cq_read_vendor_err;
	c->read_byte_len = cq_read_byte_len;
	c->read_imm_data = cq_read_imm_data;
	c->read_qp_num = cq_read_qp_num;
	c->read_src_qp = cq_read_src_qp;
	c->read_wc_flags = cq_read_wc_flags;
	c->read_slid = cq_read_slid;
	c->read_sl = cq_read_sl;
	c->read_dlid_path_bits = cq_read_dlid_path_bits;
	c->read_completion_ts = cq_read_completion_ts;
	c->read_completion_wallclock_ns = cq_read_completion_wallclock_ns;
	c->read_cvlan = cq_read_cvlan;
	c->read_flow_tag = cq_read_flow_tag;
	c->read_tm_info = cq_read_tm_info;
	return 0;
}

void uroce_cq_ex_fini(struct uroce_cq *cq)
{
	pthread_mutex_destroy(&cq->poll_lock);
	free(cq->ts);
	cq->ts = NULL;
}

/* ---- resize ---- */

UROCE_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct uroce_cq_ts *ts = NULL, *old_ts;
	struct ibv_wc *ring, *old_ring;
	struct uroce_cq *cq;
	uint32_t size;
	bool custom, old_custom;

	if (!ibcq)
		return ur_dbg("resize_cq: cq is NULL"), EINVAL;
	cq = to_ucq(ibcq);
	if (cqe < 1 || cqe > UROCE_MAX_CQE)
		return ur_dbg("resize_cq: cqe %d outside 1..max_cqe (%d)", cqe, UROCE_MAX_CQE),
		       EINVAL;
	size = (uint32_t)cqe + 1;
	ring = uroce_pd_buf_alloc(cq->pdom, size * sizeof(*ring), UROCE_RES_TYPE_CQ, &custom);
	if (cq->ts)
		ts = calloc(size, sizeof(*ts));
	if (!ring || (cq->ts && !ts)) {
		uroce_pd_buf_free(cq->pdom, ring, UROCE_RES_TYPE_CQ, custom);
		free(ts);
		return ur_dbg("resize_cq: out of memory for %u entries", size), ENOMEM;
	}

	pthread_mutex_lock(&cq->lock);
	if (cq->count > (uint32_t)cqe) {
		uint32_t n = cq->count;

		pthread_mutex_unlock(&cq->lock);
		uroce_pd_buf_free(cq->pdom, ring, UROCE_RES_TYPE_CQ, custom);
		free(ts);
		return ur_dbg("resize_cq: cqe %d < the %u completions queued", cqe, n), EINVAL;
	}
	/* Queued completions keep their order: oldest at slot 0. */
	for (uint32_t i = 0; i < cq->count; i++) {
		uint32_t from = (cq->head + i) % cq->size;

		ring[i] = cq->ring[from];
		if (ts)
			ts[i] = cq->ts[from];
	}
	old_ring = cq->ring;
	old_ts = cq->ts;
	old_custom = cq->ring_custom;
	cq->ring_custom = custom;
	cq->ring = ring;
	cq->ts = ts;
	cq->head = 0;
	cq->tail = cq->count;
	cq->size = size;
	cq->ibcq.cqe = cqe;
	pthread_mutex_unlock(&cq->lock);
	uroce_pd_buf_free(cq->pdom, old_ring, UROCE_RES_TYPE_CQ, old_custom);
	free(old_ts);
	return 0;
}

/* ---- the device clock ---- */

int uroce_query_rt_values(struct ibv_context *context, struct ibv_values_ex *values)
{
	uint32_t done = 0;

	if (!context || !values)
		return ur_dbg("query_rt_values: context and values are required"), EINVAL;
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		uint64_t ns = clock_ns(CLOCK_MONOTONIC);

		/* The raw clock is the completion timestamp clock.  Like
		 * libmlx5, the whole raw value is in tv_nsec (tv_sec 0), so
		 * both tv_nsec and tv_sec * 1e9 + tv_nsec read it back. */
#if LONG_MAX > 0x7fffffffL
		values->raw_clock.tv_sec = 0;
		values->raw_clock.tv_nsec = (long)ns;
#else
		values->raw_clock.tv_sec = (time_t)(ns / 1000000000u);
		values->raw_clock.tv_nsec = (long)(ns % 1000000000u);
#endif
		done |= IBV_VALUES_MASK_RAW_CLOCK;
	}
	/* in/out: what was asked for and is known, and nothing else */
	values->comp_mask = done;
	return 0;
}

/* Fault injection: drop, duplicate, reorder, corrupt and delay packets on
 * their way out of (dir=tx) or into (dir=rx) a context's UDP endpoints, so
 * the RC transport's recovery (IBTA 9.7.5.2 go-back-N, 9.7.6.1.3 timeouts,
 * 9.7.5.1.1 duplicates, A17.3.3 ICRC) can be exercised on loopback.  The
 * syntax and semantics are in docs/faults.md.
 *
 * Every decision comes from a per-context splitmix64 generator seeded from
 * seed=, so a single-threaded run is reproducible.  All state is under
 * f->lock.  Lock order: qp->lock -> f->lock (transmit path), ep->rx_lock ->
 * f->lock (receive path); f->lock is never held while a packet is delivered
 * to a QP, because delivering takes qp->lock and may transmit.
 *
 * A packet whose payload leaves from registered memory (gso.c's gathered
 * packets) is decided on by its headers: one the faults pass untouched is
 * sent as it is, not copied; a corrupted, duplicated or held one is made
 * one buffer first (uroce_fault_tx_gather).
 *
 * Held packets (reorder, delay) sit in one FIFO per context and record the
 * endpoint they belong to.  They leave on a later transmit, on a later
 * uroce_ep_poll() of their endpoint, or from the progress engine's timer
 * when their time is up, whichever comes first.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/fault.h"

#define FAULT_MAX_HELD	 1024 /* beyond this, packets pass unharmed */
#define FAULT_MAX_PKT	 (4096 + 256)
#define FAULT_RETRY_NS	 200000ull /* look again when an endpoint was busy */
#define FAULT_REORDER_MS 2	   /* default longest hold of a reordered packet */
#define FAULT_MAX_DELAY	 1000000u  /* delay_us limit: 1 s */

struct held {
	struct held *next;
	struct uroce_ep *ep;
	struct uroce_ipinfo ip;
	uint64_t not_before_ns; /* delay_us: never earlier than this */
	uint64_t due_ns;	/* at the latest then */
	uint64_t due_out;	/* reorder: once out[dir] reaches this (0 = unused) */
	uint32_t len;
	unsigned int dir;
	uint8_t data[];
};

struct uroce_fault {
	struct uroce_fault_cfg cfg;
	pthread_mutex_t lock;
	uint64_t rng;
	uint64_t out[UROCE_FAULT_RX + 1]; /* packets that left, per direction */
	unsigned long drop_left[UROCE_FAULT_MAX_DROP_QP];
	unsigned long skip_left[UROCE_FAULT_MAX_DROP_QP]; /* drop_qp=Q:N+SKIP */
	struct held *head, **tailp;
	unsigned int nheld;
};

struct uroce_fault uroce_fault_none;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- random numbers: splitmix64 (Steele, Lea, Flood 2014) ---- */

static uint64_t rnd(struct uroce_fault *f)
{
	uint64_t z = (f->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static bool chance(struct uroce_fault *f, uint64_t thr)
{
	return thr && rnd(f) < thr;
}

/* ---- configuration ---- */

static uint64_t rate_threshold(double p)
{
	if (p <= 0.0)
		return 0;
	if (p >= 1.0)
		return UINT64_MAX;
	return (uint64_t)(p * 18446744073709551616.0);
}

static int parse_rate(const char *v, double *out)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (errno || end == v || *end || !(d >= 0.0 && d <= 1.0))
		return -1;
	*out = d;
	return 0;
}

static int parse_u64(const char *v, uint64_t max, uint64_t *out)
{
	unsigned long long x;
	char *end;

	if (*v == '-' || *v == '+')
		return -1;
	errno = 0;
	x = strtoull(v, &end, 0);
	if (errno || end == v || *end || x > max)
		return -1;
	*out = x;
	return 0;
}

#define parse_err(...)                                                                             \
	do {                                                                                       \
		snprintf(err, errlen, __VA_ARGS__);                                                \
		free(copy);                                                                        \
		return -1;                                                                         \
	} while (0)

int uroce_fault_parse(const char *spec, struct uroce_fault_cfg *cfg, char *err, size_t errlen)
{
	char *copy, *save = NULL, *tok;

	memset(cfg, 0, sizeof(*cfg));
	cfg->dir = UROCE_FAULT_TX;
	cfg->reorder_ms = FAULT_REORDER_MS;
	if (!spec)
		return 0;
	copy = strdup(spec);
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (tok = strtok_r(copy, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
		char *v = strchr(tok, '=');
		uint64_t x;

		if (!v)
			parse_err("'%s': expected key=value", tok);
		*v++ = '\0';
		if (!strcmp(tok, "drop") || !strcmp(tok, "dup") || !strcmp(tok, "reorder") ||
		    !strcmp(tok, "corrupt")) {
			double *r = tok[0] == 'r'   ? &cfg->reorder
				    : tok[0] == 'c' ? &cfg->corrupt
				    : tok[1] == 'r' ? &cfg->drop
						    : &cfg->dup;

			if (parse_rate(v, r))
				parse_err("%s=%s: expected a probability between 0 and 1", tok, v);
		} else if (!strcmp(tok, "delay_us")) {
			if (parse_u64(v, FAULT_MAX_DELAY, &x))
				parse_err("delay_us=%s: expected 0..%u", v, FAULT_MAX_DELAY);
			cfg->delay_us = (uint32_t)x;
		} else if (!strcmp(tok, "reorder_ms")) {
			if (parse_u64(v, 1000, &x) || !x)
				parse_err("reorder_ms=%s: expected 1..1000", v);
			cfg->reorder_ms = (uint32_t)x;
		} else if (!strcmp(tok, "seed")) {
			if (parse_u64(v, UINT64_MAX, &cfg->seed))
				parse_err("seed=%s: expected an unsigned integer", v);
			cfg->have_seed = true;
		} else if (!strcmp(tok, "dir")) {
			if (!strcmp(v, "tx"))
				cfg->dir = UROCE_FAULT_TX;
			else if (!strcmp(v, "rx"))
				cfg->dir = UROCE_FAULT_RX;
			else if (!strcmp(v, "both"))
				cfg->dir = UROCE_FAULT_TX | UROCE_FAULT_RX;
			else
				parse_err("dir=%s: expected tx, rx or both", v);
		} else if (!strcmp(tok, "drop_qp") || !strcmp(tok, "drop_to")) {
			char *plus = strchr(v, '+'), *colon;
			uint64_t n = 1, skip = 0;

			if (cfg->ndrop_qp == UROCE_FAULT_MAX_DROP_QP)
				parse_err("more than %d drop_qp entries", UROCE_FAULT_MAX_DROP_QP);
			if (plus)
				*plus++ = '\0';
			colon = strchr(v, ':');
			if (colon)
				*colon++ = '\0';
			if (parse_u64(v, UR_QPN_MASK, &x) ||
			    (colon && parse_u64(colon, ULONG_MAX, &n)) ||
			    (plus && parse_u64(plus, ULONG_MAX, &skip)))
				parse_err("drop_qp=%s%s%s: expected QPN[:COUNT][+SKIP], e.g. "
					  "0x1a2b01:3+2",
					  v, colon ? ":" : "", colon ? colon : "");
			cfg->drop_qp[cfg->ndrop_qp].qpn = (uint32_t)x;
			cfg->drop_qp[cfg->ndrop_qp].n = (unsigned long)n;
			cfg->drop_qp[cfg->ndrop_qp].skip = (unsigned long)skip;
			cfg->drop_qp[cfg->ndrop_qp].to_only = tok[5] == 't';
			cfg->ndrop_qp++;
		} else {
			parse_err("unknown key '%s' (drop, dup, reorder, corrupt, delay_us, "
				  "reorder_ms, seed, dir, drop_qp, drop_to)",
				  tok);
		}
	}
	free(copy);
	cfg->thr_drop = rate_threshold(cfg->drop);
	cfg->thr_dup = rate_threshold(cfg->dup);
	cfg->thr_reorder = rate_threshold(cfg->reorder);
	cfg->thr_corrupt = rate_threshold(cfg->corrupt);
	return 0;
}

static bool cfg_active(const struct uroce_fault_cfg *c)
{
	return c->thr_drop || c->thr_dup || c->thr_reorder || c->thr_corrupt || c->delay_us ||
	       c->ndrop_qp;
}

static void log_cfg(struct uroce_ctx *ctx, const struct uroce_fault_cfg *c)
{
	static const char *const dir[] = {"", "tx", "rx", "both"};
	char qps[UROCE_FAULT_MAX_DROP_QP * 56] = "";
	size_t n = 0;

	for (int i = 0; i < c->ndrop_qp && n < sizeof(qps); i++)
		n += (size_t)snprintf(qps + n, sizeof(qps) - n, " drop_%s=0x%06x:%lu+%lu",
				      c->drop_qp[i].to_only ? "to" : "qp", c->drop_qp[i].qpn,
				      c->drop_qp[i].n, c->drop_qp[i].skip);
	ur_info("%s: fault injection on %s: drop=%g dup=%g reorder=%g (<= %u ms) corrupt=%g "
		"delay_us=%u seed=%" PRIu64 "%s",
		ctx->dev->ibdev.name, dir[c->dir], c->drop, c->dup, c->reorder, c->reorder_ms,
		c->corrupt, c->delay_us, c->seed, qps);
}

/* Read UROCE_FAULT for ctx; returns the state or &uroce_fault_none. */
static struct uroce_fault *fault_create(struct uroce_ctx *ctx)
{
	const char *spec = getenv("UROCE_FAULT");
	struct uroce_fault_cfg cfg;
	struct uroce_fault *f;
	char err[160];

	if (!spec || !*spec)
		return &uroce_fault_none;
	if (uroce_fault_parse(spec, &cfg, err, sizeof(err))) {
		ur_err("UROCE_FAULT=\"%s\": %s; fault injection disabled", spec, err);
		return &uroce_fault_none;
	}
	if (!cfg_active(&cfg)) {
		ur_info("UROCE_FAULT=\"%s\" configures no fault", spec);
		return &uroce_fault_none;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		ur_err("UROCE_FAULT: out of memory; fault injection disabled");
		return &uroce_fault_none;
	}
	if (!cfg.have_seed)
		cfg.seed = uroce_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)ctx;
	f->cfg = cfg;
	f->rng = cfg.seed;
	for (int i = 0; i < cfg.ndrop_qp; i++)
		f->drop_left[i] = cfg.drop_qp[i].n;
	for (int i = 0; i < cfg.ndrop_qp; i++)
		f->skip_left[i] = cfg.drop_qp[i].skip;
	f->tailp = &f->head;
	pthread_mutex_init(&f->lock, NULL);
	log_cfg(ctx, &cfg);
	return f;
}

/* The context's fault state, or NULL when no fault is configured. */
static struct uroce_fault *fault_get(struct uroce_ctx *ctx)
{
	struct uroce_fault *f = __atomic_load_n(&ctx->fault, __ATOMIC_ACQUIRE);

	if (!f) {
		pthread_mutex_lock(&init_lock);
		f = ctx->fault;
		if (!f) {
			f = fault_create(ctx);
			__atomic_store_n(&ctx->fault, f, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&init_lock);
	}
	return f == &uroce_fault_none ? NULL : f;
}

void uroce_fault_fini(struct uroce_ctx *ctx)
{
	struct uroce_fault *f = ctx->fault;

	ctx->fault = NULL;
	if (!f || f == &uroce_fault_none)
		return;
	while (f->head) {
		struct held *h = f->head;

		f->head = h->next;
		free(h);
	}
	pthread_mutex_destroy(&f->lock);
	free(f);
}

/* ---- per-packet decisions (f->lock held) ---- */

struct decision {
	bool drop, corrupt, dup, hold;
	uint32_t bit; /* the bit corrupt flips */
	uint64_t not_before_ns, due_ns, due_out;
};

/* drop_qp=Q:N matches packets whose BTH names Q as the destination and, on
 * transmit, packets sent by Q (every packet of a QP leaves through
 * uroce_qp_xmit with ip == &qp->path). */
static bool match_drop_qp(struct uroce_fault *f, unsigned int dir, struct uroce_ep *ep,
			  const struct uroce_ipinfo *ip, const uint8_t *pkt, size_t len)
{
	uint32_t dqpn = len >= UR_BTH_BYTES ? ur_get32(pkt + 4) & UR_QPN_MASK : 0;

	for (int i = 0; i < f->cfg.ndrop_qp; i++) {
		uint32_t q = f->cfg.drop_qp[i].qpn;
		bool hit = dqpn == q;

		if (!f->drop_left[i])
			continue;
		if (!hit && dir == UROCE_FAULT_TX && !f->cfg.drop_qp[i].to_only) {
			struct uroce_qp *sender = uroce_ep_qp(ep, q);

			hit = sender && ip == &sender->path;
		}
		if (hit && f->skip_left[i]) {
			f->skip_left[i]--;
			continue;
		}
		if (hit) {
			f->drop_left[i]--;
			return true;
		}
	}
	return false;
}

static void decide(struct uroce_fault *f, struct uroce_ctx *ctx, unsigned int dir,
		   struct uroce_ep *ep, const struct uroce_ipinfo *ip, const uint8_t *pkt,
		   size_t len, uint64_t now, struct decision *d)
{
	const struct uroce_fault_cfg *c = &f->cfg;

	memset(d, 0, sizeof(*d));
	if (match_drop_qp(f, dir, ep, ip, pkt, len) || chance(f, c->thr_drop)) {
		d->drop = true;
		uroce_count(ctx, fault_drop, 1);
		return;
	}
	/* Flip one bit of BTH..ICRC, except BTH byte 4 (FECN, BECN, resv6a):
	 * the ICRC leaves that byte out (A17.3.3), so a flip there would go
	 * unnoticed - rightly, but it would not test anything. */
	if (chance(f, c->thr_corrupt) && len > UR_BTH_BYTES && len <= FAULT_MAX_PKT) {
		uint32_t b = (uint32_t)(rnd(f) % (len * 8 - 8));

		d->corrupt = true;
		d->bit = b >= 32 ? b + 8 : b;
		uroce_count(ctx, fault_corrupt, 1);
	}
	if (chance(f, c->thr_dup)) {
		d->dup = true;
		uroce_count(ctx, fault_dup, 1);
	}
	d->not_before_ns = now + (uint64_t)c->delay_us * 1000;
	d->due_ns = d->not_before_ns;
	if (chance(f, c->thr_reorder)) {
		d->hold = true;
		d->due_out = f->out[dir] + 1 + rnd(f) % 8;
		d->due_ns += (uint64_t)c->reorder_ms * 1000000;
	}
	if (c->delay_us)
		d->hold = true;
}

static void flip(uint8_t *p, uint32_t bit)
{
	p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
}

/* Queue a copy of the packet; false when the queue is full or no memory. */
static bool hold(struct uroce_fault *f, struct uroce_ctx *ctx, unsigned int dir,
		 struct uroce_ep *ep, const struct uroce_ipinfo *ip, const uint8_t *pkt, size_t len,
		 const struct decision *d)
{
	struct held *h;

	if (f->nheld >= FAULT_MAX_HELD || !(h = malloc(sizeof(*h) + len)))
		return false;
	h->next = NULL;
	h->ep = ep;
	h->ip = *ip;
	h->not_before_ns = d->not_before_ns;
	h->due_ns = d->due_ns;
	h->due_out = d->due_out;
	h->len = (uint32_t)len;
	h->dir = dir;
	memcpy(h->data, pkt, len);
	*f->tailp = h;
	f->tailp = &h->next;
	f->nheld++;
	if (d->due_out)
		uroce_count(ctx, fault_reorder, 1);
	if (f->cfg.delay_us)
		uroce_count(ctx, fault_delay, 1);
	return true;
}

static bool is_due(const struct uroce_fault *f, const struct held *h, uint64_t now)
{
	return now >= h->due_ns ||
	       (h->due_out && f->out[h->dir] >= h->due_out && now >= h->not_before_ns);
}

/* Release due packets in FIFO order: transmit ones are sent right away;
 * receive ones of rx_ep are moved to *deliver for the caller to deliver once
 * f->lock is dropped.  f->lock held. */
static void release_locked(struct uroce_fault *f, struct uroce_ep *rx_ep,
			   const struct uroce_fault_ops *ops, uint64_t now, struct held ***deliver)
{
	struct held **pp = &f->head;

	while (*pp) {
		struct held *h = *pp;

		if (!is_due(f, h, now) || (h->dir == UROCE_FAULT_RX && h->ep != rx_ep)) {
			pp = &h->next;
			continue;
		}
		*pp = h->next;
		if (f->tailp == &h->next)
			f->tailp = pp;
		f->nheld--;
		f->out[h->dir]++;
		if (h->dir == UROCE_FAULT_TX) {
			ops->xmit(h->ep, &h->ip, h->data, h->len);
			free(h);
		} else {
			h->next = NULL;
			**deliver = h;
			*deliver = &h->next;
		}
	}
}

static uint64_t earliest_locked(const struct uroce_fault *f)
{
	uint64_t next = 0;

	for (const struct held *h = f->head; h; h = h->next)
		if (!next || h->due_ns < next)
			next = h->due_ns;
	return next;
}

/* ---- hooks ---- */

/* What the transmit faults d do to the packet buf (f->lock held): corrupt
 * it (in tmp), send a duplicate, hold it or send it; what ops->xmit
 * returned for it, 0 when it was held; *arm: when a held one is due. */
static int tx_apply(struct uroce_fault *f, struct uroce_ep *ep, const struct uroce_ipinfo *ip,
		    const uint8_t *buf, size_t len, const struct decision *d, uint8_t *tmp,
		    const struct uroce_fault_ops *ops, uint64_t *arm)
{
	const uint8_t *p = buf;

	if (d->corrupt) {
		if (p != tmp)
			memcpy(tmp, buf, len);
		flip(tmp, d->bit);
		p = tmp;
	}
	if (d->dup) {
		ops->xmit(ep, ip, p, len);
		f->out[UROCE_FAULT_TX]++;
	}
	if (d->hold && hold(f, ep->ctx, UROCE_FAULT_TX, ep, ip, p, len, d)) {
		*arm = d->due_ns;
		return 0;
	}
	f->out[UROCE_FAULT_TX]++;
	return ops->xmit(ep, ip, p, len);
}

/* After a packet: held transmit packets now due leave (f->lock held). */
static void tx_release(struct uroce_fault *f, const struct uroce_fault_ops *ops, uint64_t now)
{
	struct held *none = NULL, **tail = &none;

	if (f->head)
		release_locked(f, NULL, ops, now, &tail);
}

int uroce_fault_tx(struct uroce_ep *ep, const struct uroce_ipinfo *ip, const void *buf, size_t len,
		   const struct uroce_fault_ops *ops)
{
	struct uroce_ctx *ctx = ep->ctx;
	struct uroce_fault *f = fault_get(ctx);
	uint8_t tmp[FAULT_MAX_PKT];
	struct decision d;
	uint64_t now, arm = 0;
	int r = 0;

	if (!f || !(f->cfg.dir & UROCE_FAULT_TX))
		return ops->xmit(ep, ip, buf, len);
	pthread_mutex_lock(&f->lock);
	now = uroce_now_ns();
	decide(f, ctx, UROCE_FAULT_TX, ep, ip, buf, len, now, &d);
	if (!d.drop)
		r = tx_apply(f, ep, ip, buf, len, &d, tmp, ops, &arm);
	tx_release(f, ops, now);
	pthread_mutex_unlock(&f->lock);
	if (arm)
		uroce_progress_arm(ctx, arm);
	return r;
}

void uroce_fault_tx_gather(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			   struct uroce_tx_pkt *t, const struct uroce_fault_ops *ops)
{
	struct uroce_ctx *ctx = ep->ctx;
	struct uroce_fault *f = fault_get(ctx);
	uint8_t tmp[FAULT_MAX_PKT];
	struct decision d;
	uint64_t now, arm = 0;

	if (!f || !(f->cfg.dir & UROCE_FAULT_TX)) {
		ops->xmit_gather(ep, ip, t);
		return;
	}
	pthread_mutex_lock(&f->lock);
	now = uroce_now_ns();
	/* the decision reads the BTH only (drop_qp): the header suffices */
	decide(f, ctx, UROCE_FAULT_TX, ep, ip, t->hdr, t->len, now, &d);
	if (!d.drop && ((!d.corrupt && !d.dup && !d.hold) || t->len > sizeof(tmp))) {
		/* passed untouched: its payload leaves from where it is */
		ops->xmit_gather(ep, ip, t);
		f->out[UROCE_FAULT_TX]++;
	} else if (!d.drop) {
		/* damaged, doubled or held: one buffer, as any packet */
		uroce_tx_pkt_linear(t, tmp);
		tx_apply(f, ep, ip, tmp, t->len, &d, tmp, ops, &arm);
	}
	tx_release(f, ops, now);
	pthread_mutex_unlock(&f->lock);
	if (arm)
		uroce_progress_arm(ctx, arm);
}

bool uroce_fault_rx(struct uroce_ep *ep, uint8_t *data, size_t len, const struct uroce_ipinfo *ip,
		    const struct uroce_fault_ops *ops)
{
	struct uroce_ctx *ctx = ep->ctx;
	struct uroce_fault *f = fault_get(ctx);
	struct decision d;
	bool held = false;

	if (!f || !(f->cfg.dir & UROCE_FAULT_RX))
		return false;
	pthread_mutex_lock(&f->lock);
	decide(f, ctx, UROCE_FAULT_RX, ep, ip, data, len, uroce_now_ns(), &d);
	if (!d.drop) {
		if (d.corrupt)
			flip(data, d.bit);
		if (d.hold)
			held = hold(f, ctx, UROCE_FAULT_RX, ep, ip, data, len, &d);
		f->out[UROCE_FAULT_RX] += (held ? 0u : 1u) + (d.dup ? 1u : 0u);
	}
	pthread_mutex_unlock(&f->lock);
	if (held)
		uroce_progress_arm(ctx, d.due_ns);
	if (d.dup)
		ops->deliver(ep, data, len, ip);
	return d.drop || held;
}

int uroce_fault_release(struct uroce_ep *ep, const struct uroce_fault_ops *ops)
{
	struct uroce_fault *f = fault_get(ep->ctx);
	struct held *list = NULL, **tail = &list;
	int n = 0;

	if (!f)
		return 0;
	pthread_mutex_lock(&f->lock);
	if (f->head)
		release_locked(f, ep, ops, uroce_now_ns(), &tail);
	pthread_mutex_unlock(&f->lock);
	while (list) {
		struct held *h = list;

		list = h->next;
		ops->deliver(ep, h->data, h->len, &h->ip);
		free(h);
		n++;
	}
	return n;
}

void uroce_fault_timer(struct uroce_ctx *ctx)
{
	struct uroce_fault *f = __atomic_load_n(&ctx->fault, __ATOMIC_ACQUIRE);
	uint64_t next, now;

	if (!f || f == &uroce_fault_none)
		return;
	pthread_mutex_lock(&f->lock);
	next = earliest_locked(f);
	pthread_mutex_unlock(&f->lock);
	if (!next)
		return;
	now = uroce_now_ns();
	if (next <= now) {
		int nep = atomic_load(&ctx->nep);

		/* uroce_ep_poll releases what is due, under the rx_lock a
		 * held receive packet needs, and flushes the ACKs it causes */
		for (int i = 0; i < nep; i++)
			uroce_ep_poll(ctx->ep[i], 64);
		pthread_mutex_lock(&f->lock);
		next = earliest_locked(f);
		pthread_mutex_unlock(&f->lock);
		if (!next)
			return;
		if (next <= now)
			next = now + FAULT_RETRY_NS; /* an application thread held rx_lock */
	}
	uroce_progress_arm(ctx, next);
}

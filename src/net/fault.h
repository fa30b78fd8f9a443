/* Fault injection on the packet path (src/net/fault.c, docs/faults.md).
 *
 * UROCE_FAULT="drop=0.05,dup=0.05,reorder=0.05,corrupt=0.01,delay_us=200,
 *              seed=42,dir=tx|rx|both,drop_qp=0xQPN:N"
 * is read once per context, when the context sends or receives its first
 * packet.  ctx->fault is NULL until then, &uroce_fault_none when no fault is
 * configured, and the context's fault state otherwise, so the packet path
 * pays one predictable branch (uroce_fault_on) when faults are off.
 *
 * endpoint.c owns the sockets and the receive demultiplexer; it lends them
 * to this module through struct uroce_fault_ops so that held packets
 * (reorder, delay) can be sent or delivered later.
 */
#ifndef UROCE_FAULT_H
#define UROCE_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uroce.h"

struct uroce_fault_ops {
	/* Send one packet now, bypassing fault injection. */
	int (*xmit)(struct uroce_ep *ep, const struct uroce_ipinfo *ip, const void *buf,
		    size_t len);
	/* The same for a packet whose payload stays in registered memory. */
	void (*xmit_gather)(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			    struct uroce_tx_pkt *t);
	/* Parse, check and hand one received packet to its QP (rx_lock held). */
	void (*deliver)(struct uroce_ep *ep, uint8_t *data, size_t len,
			const struct uroce_ipinfo *ip);
};

enum { UROCE_FAULT_TX = 1, UROCE_FAULT_RX = 2, UROCE_FAULT_MAX_DROP_QP = 8 };

/* A parsed UROCE_FAULT value.  Rates are kept as thresholds for a 64-bit
 * random number: a fault happens when next() < thr. */
struct uroce_fault_cfg {
	double drop, dup, reorder, corrupt;
	uint64_t thr_drop, thr_dup, thr_reorder, thr_corrupt;
	uint32_t delay_us;
	uint32_t reorder_ms; /* longest a reordered packet is held */
	uint64_t seed;
	bool have_seed;
	unsigned int dir; /* UROCE_FAULT_TX | UROCE_FAULT_RX */
	int ndrop_qp;
	struct {
		uint32_t qpn;
		unsigned long n;
		unsigned long skip; /* matching packets let through first */
		bool to_only;	    /* drop_to: only packets whose destination is qpn */
	} drop_qp[UROCE_FAULT_MAX_DROP_QP];
};

/* The "no faults" marker ctx->fault points to once UROCE_FAULT was read. */
extern struct uroce_fault uroce_fault_none;

/* True when the packet must go through fault.c: faults are configured, or
 * the context has not looked at UROCE_FAULT yet. */
static inline bool uroce_fault_on(struct uroce_ctx *ctx)
{
	return __builtin_expect(__atomic_load_n(&ctx->fault, __ATOMIC_ACQUIRE) != &uroce_fault_none,
				0);
}

/* Transmit path: apply tx faults to one packet and send what survives (and
 * held packets now due) through ops->xmit.  Returns what ops->xmit returned
 * for the packet, 0 when the packet was dropped or held on purpose. */
int uroce_fault_tx(struct uroce_ep *ep, const struct uroce_ipinfo *ip, const void *buf, size_t len,
		   const struct uroce_fault_ops *ops);

/* uroce_fault_tx for a packet whose payload stays in registered memory
 * (struct uroce_tx_pkt): one the faults pass untouched goes out through
 * ops->xmit_gather, not copied; a corrupted, duplicated or held one is
 * copied into one buffer first, as uroce_fault_tx's are. */
void uroce_fault_tx_gather(struct uroce_ep *ep, const struct uroce_ipinfo *ip,
			   struct uroce_tx_pkt *t, const struct uroce_fault_ops *ops);

/* Receive path (ep->rx_lock held), before parsing: apply rx faults.  May
 * flip a bit of data in place or deliver an extra copy through
 * ops->deliver.  Returns true when the packet was consumed (dropped or held),
 * false when the caller must deliver it. */
bool uroce_fault_rx(struct uroce_ep *ep, uint8_t *data, size_t len, const struct uroce_ipinfo *ip,
		    const struct uroce_fault_ops *ops);

/* Release held packets that are due: transmit packets of any endpoint, and
 * receive packets of ep (whose rx_lock the caller holds).  Returns the number
 * of packets delivered to ep. */
int uroce_fault_release(struct uroce_ep *ep, const struct uroce_fault_ops *ops);

/* Progress engine timer hook: release packets whose hold time is over and
 * re-arm the engine for the next one. */
void uroce_fault_timer(struct uroce_ctx *ctx);

/* Context teardown: free the state and drop whatever is still held. */
void uroce_fault_fini(struct uroce_ctx *ctx);

/* Parse a UROCE_FAULT value.  Returns 0, or -1 with a reason in err.
 * Exposed for the unit tests. */
int uroce_fault_parse(const char *spec, struct uroce_fault_cfg *cfg, char *err, size_t errlen);

#endif

/* Packet capture (src/net/pcap.c): UROCE_PCAP=FILE.
 *
 * Each context writes every packet it sends and every packet it receives
 * as a classic pcap file (nanosecond timestamps) that tcpdump, tshark and
 * Wireshark read: link type LINUX_SLL, whose packet type tells "sent by us"
 * from "to us", then the IPv4 and UDP headers as the kernel puts them on
 * the wire (DF, TTL 64, ID 0 - or k for segment k of a GSO batch - and the
 * checksums computed) and the RoCEv2 packet (BTH through ICRC).
 *
 * FILE: "%p" expands to the pid; without it ".<pid>" is added before a
 * ".pcap" suffix (or at the end).  The second and later contexts of one
 * process add "-<n>" the same way.
 *
 * endpoint.c calls uroce_pcap() where a packet is sent on its own and
 * where a received packet is handed to the parser, gso.c where a packet
 * joins a GSO batch; with capture off that is one predictable branch.
 */
#ifndef UROCE_PCAP_H
#define UROCE_PCAP_H

#include <stddef.h>

#include "uroce.h"

/* LINUX_SLL packet types */
enum uroce_pcap_dir {
	UROCE_PCAP_RX = 0, /* to us */
	UROCE_PCAP_TX = 4, /* sent by us */
};

/* Start capturing for ctx when UROCE_PCAP is set (problems are logged, once
 * per process, and leave capture off). */
void uroce_pcap_open(struct uroce_ctx *ctx);
/* Flush and close ctx's capture file. */
void uroce_pcap_close(struct uroce_ctx *ctx);
/* Record one packet (BTH through ICRC) with the addresses of ip. */
void uroce_pcap_write(struct uroce_ctx *ctx, enum uroce_pcap_dir dir, const struct uroce_ipinfo *ip,
		      const void *pkt, size_t len);

static inline void uroce_pcap(struct uroce_ctx *ctx, enum uroce_pcap_dir dir,
			      const struct uroce_ipinfo *ip, const void *pkt, size_t len)
{
	if (__builtin_expect(ctx->pcap != NULL, 0))
		uroce_pcap_write(ctx, dir, ip, pkt, len);
}

/* Expand a UROCE_PCAP value for process pid and its context number seq
 * into out.  Returns 0, or -ENAMETOOLONG.  Exposed for the unit tests. */
int uroce_pcap_path(const char *spec, int pid, unsigned int seq, char *out, size_t outlen);

#endif

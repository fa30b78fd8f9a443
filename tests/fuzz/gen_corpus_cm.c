/* Writes seeds for fuzz_cm (tests/fuzz/corpus_cm): one well-formed MAD of
 * every CM message type uroce handles (REQ with the rdma_cm IP header, REP,
 * RTU, REJ, MRA, DREQ, DREP, SIDR_REQ, SIDR_REP), and each again as a whole
 * QP1 packet (BTH+DETH+MAD+ICRC) for 127.0.0.1:9 -> 127.0.0.1:7174, the
 * addresses fuzz_cm.c checks packets against.  fuzz_cm_gen DIR
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "cm.h"

static int put(const char *dir, const char *name, const uint8_t *b, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n) {
		perror(path);
		if (f)
			fclose(f);
		return 1;
	}
	return fclose(f) != 0;
}

int main(int argc, char **argv)
{
	struct in_addr lo = {htonl(INADDR_LOOPBACK)};
	const struct {
		const char *name;
		struct cm_msg m;
	} seeds[] = {
	    {"req",
	     {.attr = CM_ATTR_REQ,
	      .local_id = 0x11,
	      .service_id = RDMA_IB_IP_PS_TCP | 7174,
	      .qpn = 0x1234,
	      .psn = 0x42,
	      .resp_res = 4,
	      .init_depth = 4,
	      .retry = 7,
	      .rnr_retry = 7,
	      .mtu = IBV_MTU_1024,
	      .max_cm_retries = 15,
	      .pkey = 0xffff,
	      .remote_cm_timeout = 18,
	      .local_cm_timeout = 18,
	      .local_ack_timeout = 14,
	      .qp_type = IBV_QPT_RC,
	      .has_ip = true,
	      .ip_src = {htonl(INADDR_LOOPBACK)},
	      .ip_dst = {htonl(INADDR_LOOPBACK)},
	      .ip_sport = 9,
	      .pdata_len = 4,
	      .pdata = "seed"}},
	    {"rep",
	     {.attr = CM_ATTR_REP,
	      .local_id = 0x22,
	      .remote_id = 0x11,
	      .qpn = 0x5678,
	      .psn = 0x99,
	      .resp_res = 4,
	      .init_depth = 4,
	      .rnr_retry = 7}},
	    {"rtu", {.attr = CM_ATTR_RTU, .local_id = 0x11, .remote_id = 0x22}},
	    {"rej",
	     {.attr = CM_ATTR_REJ,
	      .local_id = 0x22,
	      .remote_id = 0x11,
	      .msg_target = 0,
	      .reason = CM_REJ_CONSUMER_DEFINED}},
	    {"mra",
	     {.attr = CM_ATTR_MRA, .local_id = 0x22, .remote_id = 0x11, .service_timeout = 21}},
	    {"dreq", {.attr = CM_ATTR_DREQ, .local_id = 0x11, .remote_id = 0x22, .qpn = 0x5678}},
	    {"drep", {.attr = CM_ATTR_DREP, .local_id = 0x22, .remote_id = 0x11}},
	    {"sidr_req",
	     {.attr = CM_ATTR_SIDR_REQ,
	      .local_id = 0x33,
	      .service_id = RDMA_IB_IP_PS_UDP | 7174,
	      .pkey = 0xffff,
	      .has_ip = true,
	      .ip_src = {htonl(INADDR_LOOPBACK)},
	      .ip_dst = {htonl(INADDR_LOOPBACK)},
	      .ip_sport = 9}},
	    {"sidr_rep",
	     {.attr = CM_ATTR_SIDR_REP,
	      .remote_id = 0x33,
	      .qpn = 0x77,
	      .qkey = RDMA_UDP_QKEY,
	      .service_id = RDMA_IB_IP_PS_UDP | 7174}},
	};
	uint8_t mad[CM_MAD_BYTES], pkt[CM_PKT_BYTES];
	char name[64];
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_cm_gen DIR\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		cm_mad_build(&seeds[i].m, mad);
		bad |= put(argv[1], seeds[i].name, mad, sizeof(mad));
		cm_pkt_build(pkt, mad, lo, 9, lo, 7174, (uint32_t)i);
		snprintf(name, sizeof(name), "%s-pkt", seeds[i].name);
		bad |= put(argv[1], name, pkt, sizeof(pkt));
	}
	return bad;
}

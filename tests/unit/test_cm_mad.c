/* Unit tests of the CM MAD codec (src/cm/mad.c), the QP1 packet
 * encapsulation (src/cm/wire.c) and the CM's handling of hostile input.
 *
 * Expected offsets are written out by hand from IBTA Vol. 1 tables 106-120
 * (REQ, REP, REJ, ...), independently of mad.c's helpers.  Garbage,
 * truncated and mutated MADs must be dropped and counted, never crash; fed
 * through cm_rx() with no matching id they change nothing but counters.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "transport/pkt.h"

#include "check.h"

static uint32_t be32at(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void fill_req(struct cm_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->attr = CM_ATTR_REQ;
	m->tid = 0x1122334455667788ull;
	m->local_id = 0xdeadbeef;
	m->service_id = RDMA_IB_IP_PS_TCP | 7174;
	m->ca_guid = 0x0102030405060708ull;
	m->qpn = 0xabcdef;
	m->resp_res = 16;
	m->init_depth = 8;
	m->remote_cm_timeout = 18;
	m->qp_type = IBV_QPT_RC;
	m->flow_ctl = 1;
	m->psn = 0x123456;
	m->local_cm_timeout = 18;
	m->retry = 7;
	m->pkey = 0xffff;
	m->mtu = IBV_MTU_4096;
	m->rnr_retry = 6;
	m->max_cm_retries = 15;
	m->hop_limit = 64;
	m->local_ack_timeout = 14;
	m->lgid[10] = m->lgid[11] = 0xff;
	m->lgid[12] = 127, m->lgid[15] = 1;
	m->has_ip = true;
	m->ip_src.s_addr = htonl(0x7f000001);
	m->ip_dst.s_addr = htonl(0x7f000002);
	m->ip_sport = 40000;
	m->pdata_len = 5;
	memcpy(m->pdata, "hello", 5);
}

/* The REQ's bytes at the IBTA offsets (after the 24-byte MAD header). */
static void test_req_layout(void)
{
	uint8_t mad[CM_MAD_BYTES];
	const uint8_t *b = mad + CM_MAD_HDR_BYTES;
	struct cm_msg m, r;

	fill_req(&m);
	CHECK(cm_mad_build(&m, mad) == CM_MAD_BYTES, "build");
	CHECK(mad[0] == 1 && mad[1] == 0x07 && mad[2] == 2 && mad[3] == 0x03,
	      "MAD header %x %x %x %x", mad[0], mad[1], mad[2], mad[3]);
	CHECK(mad[16] == 0x00 && mad[17] == 0x10, "attribute ID REQ");
	CHECK(be32at(b + 0) == 0xdeadbeef, "local comm id");
	CHECK(be32at(b + 8) == 0 && be32at(b + 12) == 0x01061c06, "service id %08x",
	      be32at(b + 12));
	CHECK(be32at(b + 32) == (0xabcdefu << 8 | 16), "QPN|resp res %08x", be32at(b + 32));
	CHECK(b[39] == 8, "initiator depth");
	CHECK(b[43] == (18 << 3 | 0 << 1 | 1), "rcm timeout|TST|e2e %02x", b[43]);
	CHECK(be32at(b + 44) == (0x123456u << 8 | 18 << 3 | 7), "PSN|lcm timeout|retry %08x",
	      be32at(b + 44));
	CHECK(b[48] == 0xff && b[49] == 0xff, "pkey");
	CHECK(b[50] == (IBV_MTU_4096 << 4 | 6), "MTU|RNR %02x", b[50]);
	CHECK(b[51] == 15 << 4, "max CM retries %02x", b[51]);
	CHECK(b[56 + 12] == 127 && b[56 + 15] == 1, "primary local GID");
	CHECK(b[93] == 64 && b[95] >> 3 == 14, "hop limit, ack timeout");
	/* rdma_cm IP header at private data (offset 140) */
	CHECK(b[140] == 0 && b[141] == 0x40, "cma version, IP version");
	CHECK(b[142] == (40000 >> 8) && b[143] == (40000 & 0xff), "cma source port");
	CHECK(be32at(b + 140 + 16) == 0x7f000001 && be32at(b + 140 + 32) == 0x7f000002,
	      "cma addrs");
	CHECK(!memcmp(b + 140 + CM_IP_HDR_BYTES, "hello", 5), "user private data");

	CHECK(cm_mad_parse(mad, sizeof(mad), &r) == 0, "parse");
	CHECK(r.local_id == m.local_id && r.service_id == m.service_id && r.qpn == m.qpn &&
		  r.psn == m.psn && r.resp_res == 16 && r.init_depth == 8 && r.retry == 7 &&
		  r.rnr_retry == 6 && r.mtu == IBV_MTU_4096 && r.flow_ctl == 1 &&
		  r.local_ack_timeout == 14 && r.max_cm_retries == 15 && r.tid == m.tid,
	      "REQ round trip");
	CHECK(r.has_ip && r.ip_src.s_addr == m.ip_src.s_addr && r.ip_sport == 40000, "IP header");
	CHECK(r.pdata_len == CM_REQ_PDATA && !memcmp(r.pdata, "hello", 5), "pdata len %u",
	      r.pdata_len);
}

static void test_other_layouts(void)
{
	uint8_t mad[CM_MAD_BYTES];
	const uint8_t *b = mad + CM_MAD_HDR_BYTES;
	struct cm_msg m = {.attr = CM_ATTR_REP,
			   .local_id = 0x01020304,
			   .remote_id = 0x05060708,
			   .qpn = 0x345678,
			   .psn = 0x9abcde,
			   .resp_res = 4,
			   .init_depth = 3,
			   .rnr_retry = 7,
			   .srq = 1,
			   .ca_guid = 42},
		      r;

	cm_mad_build(&m, mad);
	CHECK(mad[17] == 0x13, "REP attribute");
	CHECK(be32at(b + 12) >> 8 == 0x345678 && be32at(b + 20) >> 8 == 0x9abcde, "REP QPN, PSN");
	CHECK(b[24] == 4 && b[25] == 3 && b[27] == (7 << 5 | 1 << 4), "REP rr, id, rnr|srq %02x",
	      b[27]);
	CHECK(cm_mad_parse(mad, sizeof(mad), &r) == 0 && r.qpn == m.qpn && r.psn == m.psn &&
		  r.rnr_retry == 7 && r.srq == 1 && r.ca_guid == 42 && r.pdata_len == CM_REP_PDATA,
	      "REP round trip");

	m = (struct cm_msg){.attr = CM_ATTR_REJ,
			    .local_id = 1,
			    .remote_id = 2,
			    .msg_target = 1,
			    .reason = CM_REJ_CONSUMER_DEFINED};
	cm_mad_build(&m, mad);
	CHECK(mad[17] == 0x12 && b[8] >> 6 == 1 && b[10] == 0 && b[11] == 28, "REJ layout");
	CHECK(cm_mad_parse(mad, sizeof(mad), &r) == 0 && r.reason == 28 && r.msg_target == 1 &&
		  r.pdata_len == CM_REJ_PDATA,
	      "REJ round trip");

	m = (struct cm_msg){.attr = CM_ATTR_DREQ, .local_id = 1, .remote_id = 2, .qpn = 0x10203};
	cm_mad_build(&m, mad);
	CHECK(mad[17] == 0x15 && be32at(b + 8) >> 8 == 0x10203, "DREQ layout");
	m = (struct cm_msg){
	    .attr = CM_ATTR_MRA, .local_id = 1, .remote_id = 2, .service_timeout = 21};
	cm_mad_build(&m, mad);
	CHECK(mad[17] == 0x11 && b[9] >> 3 == 21, "MRA layout");
	m = (struct cm_msg){.attr = CM_ATTR_SIDR_REP,
			    .remote_id = 9,
			    .qpn = 0x77,
			    .qkey = RDMA_UDP_QKEY,
			    .service_id = RDMA_IB_IP_PS_UDP | 1};
	cm_mad_build(&m, mad);
	CHECK(mad[17] == 0x18 && be32at(b) == 9 && be32at(b + 8) >> 8 == 0x77 &&
		  be32at(b + 20) == RDMA_UDP_QKEY && be32at(b + 16) == 0x01110001,
	      "SIDR_REP layout");
	CHECK(cm_mad_parse(mad, sizeof(mad), &r) == 0 && r.remote_id == 9 &&
		  r.qkey == RDMA_UDP_QKEY,
	      "SIDR_REP round trip");
}

/* Mutations of a valid REQ, each dropped with its own counter. */
static void test_hostile(void)
{
	uint8_t good[CM_MAD_BYTES], mad[CM_MAD_BYTES];
	struct cm_msg m, r;
	uint64_t before;
	static const struct {
		unsigned off;
		uint8_t val;
		uint64_t *counter;
		const char *what;
	} muts[] = {
	    {0, 2, &cm_stats.drop_hdr, "base version 2"},
	    {1, 0x04, &cm_stats.drop_hdr, "class SA"},
	    {2, 1, &cm_stats.drop_hdr, "class version 1"},
	    {3, 0x81, &cm_stats.drop_hdr, "method GET_RESP"},
	    {4, 0x80, &cm_stats.drop_hdr, "status set"},
	    {17, 0x1f, &cm_stats.drop_attr, "unknown attribute"},
	    {17, 0x19, &cm_stats.drop_lap, "LAP"},
	    {17, 0x1a, &cm_stats.drop_lap, "APR"},
	    {CM_MAD_HDR_BYTES + 140, 1, &cm_stats.drop_ip_hdr, "cma version 1"},
	    {CM_MAD_HDR_BYTES + 141, 0x60, &cm_stats.drop_ip_hdr, "IPv6 header"},
	    {CM_MAD_HDR_BYTES + 50, 0x06, &cm_stats.drop_attr, "MTU 0"},
	    {CM_MAD_HDR_BYTES + 50, 0x76, &cm_stats.drop_attr, "MTU 7"},
	};

	fill_req(&m);
	cm_mad_build(&m, good);
	for (size_t i = 0; i < sizeof(muts) / sizeof(muts[0]); i++) {
		memcpy(mad, good, sizeof(mad));
		mad[muts[i].off] = muts[i].val;
		before = *muts[i].counter;
		CHECK(cm_mad_parse(mad, sizeof(mad), &r) < 0, "%s accepted", muts[i].what);
		CHECK(*muts[i].counter == before + 1, "%s not counted", muts[i].what);
	}
	/* QPN 0 and 1 are not connectable */
	memcpy(mad, good, sizeof(mad));
	memset(mad + CM_MAD_HDR_BYTES + 32, 0, 3);
	CHECK(cm_mad_parse(mad, sizeof(mad), &r) < 0, "REQ for QPN 0 accepted");
	/* truncated at every length */
	before = cm_stats.drop_short;
	for (size_t n = 0; n < CM_MAD_BYTES; n++)
		CHECK(cm_mad_parse(good, n, &r) < 0, "truncated to %zu accepted", n);
	CHECK(cm_stats.drop_short == before + CM_MAD_BYTES, "truncations counted");
	/* an RTU naming communication ID 0 */
	m = (struct cm_msg){.attr = CM_ATTR_RTU, .local_id = 5, .remote_id = 0};
	cm_mad_build(&m, mad);
	CHECK(cm_mad_parse(mad, sizeof(mad), &r) < 0, "RTU to comm id 0 accepted");
}

static void test_packet(void)
{
	uint8_t mad[CM_MAD_BYTES], pkt[CM_PKT_BYTES];
	struct in_addr a = {htonl(0x7f000001)}, b = {htonl(0x7f000002)};
	struct cm_msg m;
	uint64_t before;

	fill_req(&m);
	cm_mad_build(&m, mad);
	cm_pkt_build(pkt, mad, a, 1000, b, 7174, 5);
	CHECK(pkt[0] == 0x64 && pkt[2] == 0xff && pkt[3] == 0xff && pkt[7] == 1, "BTH");
	CHECK(be32at(pkt + 12) == 0x80010000 && pkt[19] == 1, "DETH");
	CHECK(cm_pkt_parse(pkt, sizeof(pkt), a, 1000, b, 7174) == pkt + 20, "valid packet");
	before = cm_stats.drop_icrc;
	CHECK(!cm_pkt_parse(pkt, sizeof(pkt), a, 1001, b, 7174), "wrong source port accepted");
	pkt[100] ^= 1;
	CHECK(!cm_pkt_parse(pkt, sizeof(pkt), a, 1000, b, 7174), "flipped bit accepted");
	CHECK(cm_stats.drop_icrc == before + 2, "ICRC drops counted");
	pkt[100] ^= 1;
	for (size_t n = 0; n < sizeof(pkt); n += 7)
		CHECK(!cm_pkt_parse(pkt, n, a, 1000, b, 7174), "length %zu accepted", n);
	/* a packet to QP 2 with a valid ICRC */
	cm_pkt_build(pkt, mad, a, 1000, b, 7174, 5);
	pkt[7] = 2;
	{
		struct uroce_ipinfo ip = {.family = AF_INET, .src.v4 = a, .dst.v4 = b};
		uint32_t icrc;

		ip.sport = 1000, ip.dport = 7174;
		icrc = htole32(uroce_icrc_compute(&ip, pkt, CM_PKT_BYTES - 4));
		memcpy(pkt + CM_PKT_BYTES - 4, &icrc, 4);
	}
	before = cm_stats.drop_bth;
	CHECK(!cm_pkt_parse(pkt, sizeof(pkt), a, 1000, b, 7174), "QP 2 accepted");
	CHECK(cm_stats.drop_bth == before + 1, "BTH drop counted");
}

/* Random bytes through the parser and through cm_rx with no ids. */
static void test_garbage(void)
{
	uint8_t buf[CM_MAD_BYTES];
	struct sockaddr_in from = {.sin_family = AF_INET, .sin_port = htons(9)};
	struct in_addr to = {htonl(0x7f000001)};
	struct cm_msg m, r;
	uint64_t before;
	unsigned seed = 12345;

	from.sin_addr.s_addr = htonl(0x7f000001);
	for (int i = 0; i < 200000; i++) {
		size_t n = (size_t)rand_r(&seed) % (CM_MAD_BYTES + 1);

		for (size_t k = 0; k < sizeof(buf); k++)
			buf[k] = (uint8_t)rand_r(&seed);
		if (i & 1) { /* a valid header, garbage body */
			buf[0] = 1, buf[1] = 7, buf[2] = 2, buf[3] = 3, buf[4] = buf[5] = 0;
			buf[16] = 0;
			buf[17] = (uint8_t)(0x10 + rand_r(&seed) % 9);
			n = CM_MAD_BYTES;
		}
		cm_mad_parse(buf, n, &r);
	}
	CHECK(1, "200000 random MADs parsed without a crash");

	/* messages for communication IDs nobody has: dropped and counted */
	pthread_mutex_lock(&cm.lock);
	CHECK(cm_init() == 0, "cm_init");
	for (uint16_t attr = CM_ATTR_MRA; attr <= CM_ATTR_SIDR_REP; attr++) {
		if (attr == CM_ATTR_DREQ || attr == CM_ATTR_SIDR_REQ)
			continue;
		m = (struct cm_msg){.attr = attr, .local_id = 77, .remote_id = 0x12345, .qpn = 9};
		cm_mad_build(&m, buf);
		before = cm_stats.drop_unknown;
		cm_rx(cm.asock, NULL, buf, sizeof(buf), &from, to);
		CHECK(cm_stats.drop_unknown == before + 1, "attr %#x for an unknown id not counted",
		      attr);
	}
	/* a REQ that reaches a socket nobody listens on is rejected, not kept */
	fill_req(&m);
	cm_mad_build(&m, buf);
	before = cm_stats.drop_unknown;
	cm_rx(cm.asock, NULL, buf, sizeof(buf), &from, to);
	CHECK(cm_stats.drop_unknown == before + 1, "REQ to the active socket not counted");
	pthread_mutex_unlock(&cm.lock);
}

int main(void)
{
	test_req_layout();
	test_other_layouts();
	test_hostile();
	test_packet();
	test_garbage();
	printf("test_cm_mad: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

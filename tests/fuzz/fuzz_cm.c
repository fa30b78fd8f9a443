/* libFuzzer target for uroce's CM (src/cm): arbitrary bytes as a QP1 packet
 * (cm_pkt_parse: length, ICRC, BTH/DETH), as a MAD (cm_mad_parse), and
 * through the CM's receive path (cm_rx) with the CM running - every message
 * type for ids that do not exist, REQs for a socket nobody listens on.  The
 * first bytes also pick a valid CM header so that the fuzzer gets past it.
 * Run by tests/integration/fuzz_cm.sh; tests/unit/test_cm_fuzz_replay.c
 * replays its corpus (tests/fuzz/corpus_cm) in every build. */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool started;
	struct in_addr lo = {htonl(INADDR_LOOPBACK)};
	struct sockaddr_in from = {.sin_family = AF_INET, .sin_addr = lo, .sin_port = htons(9)};
	uint8_t mad[CM_MAD_BYTES] = {0};
	struct cm_msg m;

	if (!started) {
		pthread_mutex_lock(&cm.lock);
		started = cm_init() == 0;
		pthread_mutex_unlock(&cm.lock);
	}
	cm_pkt_parse(data, size, lo, 9, lo, 7174);
	cm_mad_parse(data, size, &m);
	/* the same bytes behind a valid MAD header */
	memcpy(mad, data, size < sizeof(mad) ? size : sizeof(mad));
	if (size > 0) {
		mad[0] = 1, mad[1] = 7, mad[2] = 2, mad[3] = 3, mad[4] = mad[5] = 0;
		mad[16] = 0;
		mad[17] = (uint8_t)(0x10 + data[0] % 9);
	}
	if (started) {
		pthread_mutex_lock(&cm.lock);
		cm_rx(cm.asock, NULL, mad, sizeof(mad), &from, lo);
		pthread_mutex_unlock(&cm.lock);
	}
	return 0;
}

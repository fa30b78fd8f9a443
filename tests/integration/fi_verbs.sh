#!/usr/bin/env bash
# libfabric 1.17's verbs provider (Debian's libfabric-bin) on uroce under
# `uroce run`: fi_info lists the uroce devices' datagram domains, and
# fi_pingpong -e dgram passes between two processes with its data checks
# (-c). The verbs provider opens an rdma_cm event channel even for its
# datagram endpoints (fi_eq_open), so the ping-pong needs uroce's librdmacm
# (issue 12) next to libibverbs.so.1 in the build; without it that part
# skips, saying so. MSG endpoints and ofi_rxm need rdma_cm connections: not
# tested here.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd fi_info libfabric-bin
require_cmd fi_pingpong libfabric-bin
require_uroce
UROCE=$UROCE_BIN_DIR/uroce
dom=uroce_lo-dgram

out=$(timeout 60 "$UROCE" run fi_info -p verbs 2>&1) || { log "$out"; die "uroce run fi_info -p verbs failed"; }
log "$out"
check "fi_info -p verbs: domain $dom, FI_EP_DGRAM" \
	bash -c 'grep -A2 "domain: $1\$" <<<"$0" | grep -q "type: FI_EP_DGRAM"' "$out" "$dom"

if [[ ! -e $UROCE_LIB_DIR/librdmacm.so.1 ]]; then
	log "SKIP: fi_pingpong -e dgram: the verbs provider needs an rdma_cm event channel and this build has no librdmacm.so.1 (uroce's connection manager, issue 12)"
	finish
	exit
fi
alloc_port
if run_pair dgram "$UROCE" run fi_pingpong -p verbs -e dgram -d $dom -B "$PORT" -I 200 -c -- \
	"$UROCE" run fi_pingpong -p verbs -e dgram -d $dom -P "$PORT" -I 200 -c 127.0.0.1; then
	check "fi_pingpong -e dgram: 64 B..4 KiB, 200 checked transfers each" \
		bash -c '[[ $(grep -cE "^[0-9]+[kmg]? +200 +=200 " "$0") -ge 4 ]]' "$LOG_DIR/dgram.client.log"
else
	fail "fi_pingpong -p verbs -e dgram"
fi
finish

#!/usr/bin/env bash
# rdma-core's rdma_cm examples, unmodified Debian binaries (rdmacm-utils) on
# uroce's librdmacm, loopback, native mode: rdma_server/rdma_client (sync
# ids, rdma_create_ep), rdma_xserver/rdma_xclient, ucmatose with 10
# connections and data, udaddy (RDMA_PS_UDP: SIDR, UD QPs), cmtime (100
# connections; its server never exits, so it is stopped after the client).
set -euo pipefail
source "$(dirname "$0")/lib_cm.sh"
cm_require
require_uroce
U=("${ON_UROCE[@]}")

cm_port
check "rdma_server/rdma_client" cm_pair rdma_client "${U[@]}" rdma_server -p "$PORT" -- \
	"${U[@]}" rdma_client -s 127.0.0.1 -p "$PORT"
cm_port
check "rdma_xserver/rdma_xclient" cm_pair rdma_xclient "${U[@]}" rdma_xserver -p "$PORT" -- \
	"${U[@]}" rdma_xclient -s 127.0.0.1 -p "$PORT"
cm_port
if cm_pair ucmatose "${U[@]}" ucmatose -p "$PORT" -c 10 -C 20 -S 4096 -- \
	"${U[@]}" ucmatose -s 127.0.0.1 -p "$PORT" -c 10 -C 20 -S 4096 &&
	log_has ucmatose client 'return status 0' && log_has ucmatose server 'return status 0'; then
	pass "ucmatose -c 10"
else
	fail "ucmatose -c 10"
fi
cm_port
if cm_stays cmtime "${U[@]}" cmtime -p "$PORT" -- "${U[@]}" cmtime -s 127.0.0.1 -p "$PORT" -c 100 &&
	log_has cmtime client '^connect +:'; then
	pass "cmtime -c 100"
else
	fail "cmtime -c 100"
fi

# udaddy has no port option (-p is the port space): a private namespace.
if cm_can_netns; then
	out=$LOG_DIR/udaddy.log
	if cm_netns bash -c '
		"$@" udaddy >"$0.server" 2>&1 & s=$!
		for i in $(seq 200); do ss -Hlun | grep -q ":7174 " && break; sleep 0.1; done
		timeout 60 "$@" udaddy -s 127.0.0.1 -C 10 >"$0.client" 2>&1; c=$?
		timeout 30 tail --pid=$s -f /dev/null; wait $s; s=$?
		echo "server rc=$s client rc=$c"; [ $s = 0 ] && [ $c = 0 ]' "$out" "${U[@]}" &&
		grep -q 'return status 0' "$out.client"; then
		pass "udaddy"
	else
		tail -20 "$out.server" "$out.client" || true
		fail "udaddy"
	fi
else
	log "SKIP: udaddy needs a private network namespace (root, unshare -n)"
fi
finish

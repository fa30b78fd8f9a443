#!/usr/bin/env bash
# Helpers for the rdma_cm tests (cm_*.sh), on top of lib.sh.
#
# uroce's librdmacm listens on a UDP socket bound to the rdma_cm port
# (docs/cm.md), so a server is ready once `ss -lun` shows that port.
#   cm_port              set PORT to a port of this test's block that is free
#                        for TCP and UDP;
#   cm_pair NAME SERVER... -- CLIENT...
#                        run_pair, waiting for the UDP port;
#   cm_stays NAME SERVER... -- CLIENT...
#                        the same for a server that never exits (cmtime): it
#                        is stopped after the client, whose exit counts;
#   cm_netns CMD...      run CMD in a private network namespace whose lo is
#                        up (for tools with a fixed port: udaddy, mckey).
# Executed directly, it checks that its own helpers work.

# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

udp_bound() {
	ss -Hlun 2>/dev/null | awk -v p=":$1" '$4 ~ p "$" { found = 1 } END { exit !found }'
}

cm_port() {
	while :; do
		alloc_port
		udp_bound "$PORT" || return 0
	done
}

cm_require() {
	require_cmd ss iproute2
	require_cmd rping rdmacm-utils
	[[ -e $UROCE_LIB_DIR/librdmacm.so.1 ]] ||
		die "$UROCE_LIB_DIR/librdmacm.so.1 not found: build uroce first"
}

cm_pair() {
	READY_CHECK=udp_bound run_pair "$@"
}

# cm_stays NAME SERVER... -- CLIENT...: for servers that never exit
# (cmtime): the client's exit code counts, the server is stopped after it.
cm_stays() {
	local name=$1 spid crc=0
	shift
	local -a server=()
	while [[ $1 != -- ]]; do
		server+=("$1")
		shift
	done
	shift
	log "=== $name (UDP port $PORT)"
	timeout -k 5 $((LISTEN_TIMEOUT + CLIENT_TIMEOUT)) "${server[@]}" </dev/null \
		>"$LOG_DIR/$name.server.log" 2>&1 &
	spid=$!
	for _ in $(seq $((LISTEN_TIMEOUT * 10))); do udp_bound "$PORT" && break; sleep 0.1; done
	timeout -k 5 "$CLIENT_TIMEOUT" "$@" </dev/null >"$LOG_DIR/$name.client.log" 2>&1 || crc=$?
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	((crc == 0)) || { log "client $(explain_rc "$crc")"; show_logs "$name"; }
	return "$crc"
}

cm_netns() {
	unshare -n -- bash -c 'ip link set lo up && exec "$@"' cm_netns "$@"
}

cm_can_netns() {
	[[ $(id -u) == 0 ]] && unshare -n -- true 2>/dev/null
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	cm_require
	cm_port
	a=$PORT
	cm_port
	check "cm_port gives distinct ports" test "$a" != "$PORT"
	check "udp_bound is false for a free port" fails udp_bound "$PORT"
	if cm_can_netns; then
		check "cm_netns has its own loopback" cm_netns ip -o addr show lo
	fi
	finish
fi

#!/usr/bin/env bash
# Helpers for the rdma_cm tests (cm_*.sh), on top of lib.sh.
#
# uroce's librdmacm listens on a UDP socket bound to the rdma_cm port
# (docs/cm.md), so a server is ready once `ss -lun` shows that port.
#   cm_port              set PORT to a port of this test's block that is free
#                        for TCP and UDP;
#   cm_pair NAME SERVER... -- CLIENT...
#                        like run_pair, waiting for the UDP port; with
#                        CM_SERVER_STAYS=1 the server (cmtime) is stopped
#                        after the client and only the client's exit counts;
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
	local name=$1
	shift
	local -a server=() client=()
	while [[ $# -gt 0 && $1 != -- ]]; do
		server+=("$1")
		shift
	done
	[[ ${1-} == -- ]] || die "cm_pair $name: no '--'"
	shift
	client=("$@")
	local slog=$LOG_DIR/$name.server.log clog=$LOG_DIR/$name.client.log
	local budget=$((LISTEN_TIMEOUT + CLIENT_TIMEOUT + SERVER_GRACE))
	local spid src=0 crc=0 waited=0

	log "=== $name (UDP port $PORT)"
	log "  server: ${server[*]}"
	log "  client: ${client[*]}"
	timeout -k 5 "$budget" "${server[@]}" </dev/null >"$slog" 2>&1 &
	spid=$!
	while ! udp_bound "$PORT"; do
		if ! kill -0 "$spid" 2>/dev/null || ((waited >= LISTEN_TIMEOUT * 10)); then
			reap "$spid" 0 || src=$?
			log "FAIL: $name: server never bound UDP port $PORT ($(explain_rc "$src"))"
			show_logs "$name"
			return 1
		fi
		sleep 0.1
		waited=$((waited + 1))
	done
	timeout -k 5 "$CLIENT_TIMEOUT" "${client[@]}" </dev/null >"$clog" 2>&1 || crc=$?
	if [[ ${CM_SERVER_STAYS:-0} == 1 ]]; then
		reap "$spid" 0 || true
	else
		reap "$spid" "$SERVER_GRACE" || src=$?
	fi
	if ((src != 0 || crc != 0)); then
		log "FAIL: $name: server $(explain_rc "$src"), client $(explain_rc "$crc")"
		show_logs "$name"
		return 1
	fi
	log "  both sides exit 0"
	return 0
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

#!/usr/bin/env bash
# rdma_cm between two hosts: two network namespaces joined by a veth pair
# (10.202.0.1 and .2, MTU 1500: uroce's active MTU 1024), native mode.
# Unmodified rdmacm-utils and perftest, server in one namespace, client in
# the other: rping -V (100 pings, 4 KiB), ucmatose -c 10, udaddy,
# rdma_server/rdma_client, cmtime -c 1000, ib_write_lat -R, ib_read_bw -R;
# then in standard-port mode (UROCE_PORT_MODE=standard: CM MADs and data on
# <address>:4791, QP1 through the data path's socket): rping -V, ucmatose
# -c 10, udaddy, ib_write_lat -R.
# Needs root; skips otherwise or when namespaces do not work here.
set -euo pipefail
source "$(dirname "$0")/lib_cm.sh"
if ((EUID != 0)); then
	log "SKIP: needs root (network namespaces)"
	exit 0
fi
cm_require
require_cmd ib_write_lat perftest
require_uroce

P=urcm$$
A=${P}a
B=${P}b
cleanup() {
	for ns in "$A" "$B"; do timeout 10 ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT
build_net() {
	ip netns add "$A" && ip netns add "$B" &&
		ip -n "$A" link set lo up && ip -n "$B" link set lo up &&
		ip -n "$A" link add va type veth peer name vb netns "$B" &&
		ip -n "$A" addr add 10.202.0.1/24 dev va && ip -n "$B" addr add 10.202.0.2/24 dev vb &&
		ip -n "$A" link set va up && ip -n "$B" link set vb up
}
if ! build_net 2>"$LOG_DIR/netns.err"; then
	log "SKIP: cannot set up the namespaces: $(cat "$LOG_DIR/netns.err")"
	exit 0
fi
SA=(ip netns exec "$A" "${ON_UROCE[@]}")
SB=(ip netns exec "$B" "${ON_UROCE[@]}")

# like cm_pair, with the server's UDP port looked up in its namespace
ns_pair() {
	local name=$1 port=$2 stays=$3
	shift 3
	local -a server=() client=()
	while [[ $1 != -- ]]; do
		server+=("$1")
		shift
	done
	shift
	client=("$@")
	local slog=$LOG_DIR/$name.server.log clog=$LOG_DIR/$name.client.log spid src=0 crc=0 i
	log "=== $name"
	timeout -k 5 120 "${server[@]}" </dev/null >"$slog" 2>&1 &
	spid=$!
	for i in $(seq 200); do
		ip netns exec "$A" ss -Hlun | grep -q ":$port " && break
		sleep 0.1
	done
	timeout -k 5 90 "${client[@]}" </dev/null >"$clog" 2>&1 || crc=$?
	if ((stays)); then
		kill "$spid" 2>/dev/null || true
		wait "$spid" 2>/dev/null || true
	else
		wait "$spid" || src=$?
	fi
	if ((src || crc)); then
		log "server $(explain_rc "$src"), client $(explain_rc "$crc")"
		show_logs "$name"
		return 1
	fi
}

check "rping -V 100 x 4 KiB across namespaces" ns_pair rping 7174 0 \
	"${SA[@]}" rping -s -a 10.202.0.1 -C 100 -S 4096 -V -- \
	"${SB[@]}" rping -c -a 10.202.0.1 -C 100 -S 4096 -V
check "ucmatose -c 10 across namespaces" ns_pair ucmatose 7471 0 \
	"${SA[@]}" ucmatose -p 7471 -c 10 -- "${SB[@]}" ucmatose -s 10.202.0.1 -p 7471 -c 10
check "udaddy across namespaces" ns_pair udaddy 7174 0 \
	"${SA[@]}" udaddy -- "${SB[@]}" udaddy -s 10.202.0.1
check "rdma_server/rdma_client across namespaces" ns_pair rdma_client 7472 0 \
	"${SA[@]}" rdma_server -p 7472 -- "${SB[@]}" rdma_client -s 10.202.0.1 -p 7472
check "cmtime -c 1000 across namespaces" ns_pair cmtime 7473 1 \
	"${SA[@]}" cmtime -p 7473 -- "${SB[@]}" cmtime -s 10.202.0.1 -p 7473 -c 1000
check "ib_write_lat -R across namespaces" ns_pair write_lat 7474 0 \
	"${SA[@]}" ib_write_lat -R -p 7474 -n 500 -- "${SB[@]}" ib_write_lat -R -p 7474 -n 500 10.202.0.1
check "ib_read_bw -R across namespaces" ns_pair read_bw 7475 0 \
	"${SA[@]}" ib_read_bw -R -p 7475 -n 500 -- "${SB[@]}" ib_read_bw -R -p 7475 -n 500 10.202.0.1

# standard-port mode: the server's "port" is 4791 (QP1 shares it)
SA=(ip netns exec "$A" env UROCE_PORT_MODE=standard "${ON_UROCE[@]}")
SB=(ip netns exec "$B" env UROCE_PORT_MODE=standard "${ON_UROCE[@]}")
check "standard mode: rping -V 100 x 4 KiB" ns_pair std_rping 4791 0 \
	"${SA[@]}" rping -s -a 10.202.0.1 -C 100 -S 4096 -V -- \
	"${SB[@]}" rping -c -a 10.202.0.1 -C 100 -S 4096 -V
check "standard mode: ucmatose -c 10" ns_pair std_ucmatose 4791 0 \
	"${SA[@]}" ucmatose -p 7471 -c 10 -- "${SB[@]}" ucmatose -s 10.202.0.1 -p 7471 -c 10
check "standard mode: udaddy" ns_pair std_udaddy 4791 0 \
	"${SA[@]}" udaddy -- "${SB[@]}" udaddy -s 10.202.0.1
check "standard mode: ib_write_lat -R" ns_pair std_write_lat 4791 0 \
	"${SA[@]}" ib_write_lat -R -p 7474 -n 500 -- "${SB[@]}" ib_write_lat -R -p 7474 -n 500 10.202.0.1
finish

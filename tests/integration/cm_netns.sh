#!/usr/bin/env bash
# rdma_cm between two hosts: two network namespaces joined by a veth pair
# (10.202.0.1 and .2, MTU 1500: uroce's active MTU 1024), server in one,
# client in the other, unmodified Debian binaries.  The whole matrix of
# lib_cm.sh's cm_suite (rping -S 64 and 65535 -C 100 -V -v, rdma_server/
# rdma_client, rdma_xserver/rdma_xclient, ucmatose -c 10, udaddy, mckey,
# cmtime -c 1000, ib_send_bw/ib_write_lat/ib_read_bw/ib_atomic_lat -R,
# pyverbs CMID, librpma) in native mode, then again in standard-port mode
# (UROCE_PORT_MODE=standard: CM MADs and data on <address>:4791, QP1
# through the data path's socket), on the one topology.
# Needs root; skips otherwise or when namespaces do not work here.
set -euo pipefail
source "$(dirname "$0")/lib_cm.sh"
if ((EUID != 0)); then
	log "SKIP: needs root (network namespaces)"
	exit 0
fi
cm_suite_require
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
		ip -n "$A" link set va up && ip -n "$B" link set vb up &&
		ip -n "$A" route add 224.0.0.0/4 dev va && ip -n "$B" route add 224.0.0.0/4 dev vb
}
if ! build_net 2>"$LOG_DIR/netns.err"; then
	log "SKIP: cannot set up the namespaces: $(cat "$LOG_DIR/netns.err")"
	exit 0
fi
CM_SS=(ip netns exec "$A")

CM_SRV=(ip netns exec "$A" "${ON_UROCE[@]}")
CM_CLI=(ip netns exec "$B" "${ON_UROCE[@]}")
CM_STD=0
cm_suite native 10.202.0.1 10.202.0.2

CM_SRV=(ip netns exec "$A" "${ON_UROCE[@]}" UROCE_PORT_MODE=standard)
CM_CLI=(ip netns exec "$B" "${ON_UROCE[@]}" UROCE_PORT_MODE=standard)
CM_STD=1
cm_suite standard 10.202.0.1 10.202.0.2
finish

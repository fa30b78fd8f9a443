#!/usr/bin/env bash
# rdma_cm in standard-port mode on one host: the nearest equivalent of
# loopback (docs/cm.md, "Test matrix").  Standard mode binds
# <address>:4791, one process per address, so a server and a client on
# 127.0.0.1 cannot both exist (nor can two kernel rxe devices on one
# netdev).  Instead, one private network namespace holds two addresses,
# 10.203.0.1 (the server's device) and 10.203.0.2 (the client's), on the
# two ends of a veth pair; every packet between them is local (the kernel
# delivers it through lo), and the namespace's local route to the server's
# address names the client's address as the source, as a host whose
# loopback connections leave from its second port.  UROCE_IFACES gives each
# process its one device.  Then the whole matrix of lib_cm.sh's cm_suite.
# Needs root; skips otherwise or when namespaces do not work here.
set -euo pipefail
source "$(dirname "$0")/lib_cm.sh"
if ((EUID != 0)); then
	log "SKIP: needs root (a network namespace)"
	exit 0
fi
cm_suite_require
require_uroce

N=urcml$$
cleanup() { timeout 10 ip netns del "$N" 2>/dev/null || true; }
trap cleanup EXIT
build_net() {
	ip netns add "$N" && ip -n "$N" link set lo up &&
		ip -n "$N" link add la type veth peer name lb &&
		ip -n "$N" addr add 10.203.0.1/32 dev la && ip -n "$N" addr add 10.203.0.2/32 dev lb &&
		ip -n "$N" link set la up && ip -n "$N" link set lb up &&
		ip -n "$N" route replace local 10.203.0.1 dev la table local proto kernel scope host \
			src 10.203.0.2 &&
		ip -n "$N" route add 224.0.0.0/4 dev la
}
if ! build_net 2>"$LOG_DIR/netns.err"; then
	log "SKIP: cannot set up the namespace: $(cat "$LOG_DIR/netns.err")"
	exit 0
fi
src=$(ip netns exec "$N" ip -o route get 10.203.0.1 | grep -o 'src [0-9.]*')
check "the route to the server's address leaves from the client's ($src)" \
	test "$src" = "src 10.203.0.2"

CM_SS=(ip netns exec "$N")
CM_SRV=(ip netns exec "$N" "${ON_UROCE[@]}" UROCE_PORT_MODE=standard UROCE_IFACES=la=uroce_a)
CM_CLI=(ip netns exec "$N" "${ON_UROCE[@]}" UROCE_PORT_MODE=standard UROCE_IFACES=lb=uroce_b)
# mckey: a group member opens a wildcard *:4791 socket (src/net/mcast.c), so
# a second process cannot then bind another address's 4791 exclusively on
# the same host: the sender runs in native mode (its datagrams still go to
# the group's 4791), the receiver in standard mode (docs/cm.md).
CM_MCKEY_CLI=(ip netns exec "$N" "${ON_UROCE[@]}" UROCE_IFACES=lb=uroce_b)
CM_STD=1
cm_suite std_local 10.203.0.1 10.203.0.2
finish

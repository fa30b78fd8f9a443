#!/usr/bin/env bash
# UCX and MPICH between two "hosts": two network namespaces joined by a veth pair
# (10.202.0.1/24 and .2, MTU 1500, so uroce's active MTU is 1024), each
# interface named mwv so both ends open the device uroce_mwv. ucx_perftest's
# server runs under `uroce run` in one namespace and the client in the other
# (its out-of-band TCP exchange crosses the veth too): UCT am_lat and put_bw
# over rc_verbs, am_lat over ud_verbs, UCP tag_lat and tag_bw over rc, and
# tests/tools/ucp_sockaddr.c's tag ping-pong wired up by rdma_cm. Then
# MPICH (ch4:ucx) runs tests/tools/mpi_check.c with one rank in each
# namespace: hydra starts both ranks through `ip netns exec` (MPMD) and
# talks PMI over inherited file descriptors, so only UCX's traffic crosses
# the veth, and UCX's lane report must name rc_verbs on uroce_mwv in both.
# (Open MPI cannot do this: its PMIx server is reached over TCP loopback,
# which a rank in another namespace does not share.)
# Needs root (network namespaces); skips otherwise.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/lib_ucx.sh
source "$(dirname "$0")/lib_ucx.sh"

if ((EUID != 0)); then
	log "SKIP: needs root (network namespaces, a veth pair)"
	exit 0
fi
require_cmd ip iproute2
require_cmd ucx_perftest ucx-utils
require_cmd mpicc.mpich libmpich-dev
require_cmd mpirun.mpich mpich
require_uroce
[[ -x $UROCE_BIN_DIR/ucp_sockaddr ]] ||
	die "$UROCE_BIN_DIR/ucp_sockaddr was not built: install libucx-dev (scripts/deps.sh) and rebuild"
UROCE=$UROCE_BIN_DIR/uroce

P=um$$ # namespace prefix: concurrent runs do not collide
NSA=${P}a NSB=${P}b
cleanup() {
	timeout 10 ip netns del "$NSA" 2>/dev/null || true
	timeout 10 ip netns del "$NSB" 2>/dev/null || true
}
trap cleanup EXIT
build_net() {
	timeout 10 ip netns add "$NSA" && timeout 10 ip netns add "$NSB" &&
		timeout 10 ip -n "$NSA" link add mwv type veth peer name mwvb netns "$NSB" &&
		timeout 10 ip -n "$NSB" link set mwvb name mwv &&
		timeout 10 ip -n "$NSA" addr add 10.202.0.1/24 dev mwv &&
		timeout 10 ip -n "$NSB" addr add 10.202.0.2/24 dev mwv &&
		timeout 10 ip -n "$NSA" link set lo up && timeout 10 ip -n "$NSB" link set lo up &&
		timeout 10 ip -n "$NSA" link set mwv up && timeout 10 ip -n "$NSB" link set mwv up
}
if ! build_net 2>"$LOG_DIR/netns.err"; then
	log "SKIP: cannot set up the namespaces (ip netns, veth): $(cat "$LOG_DIR/netns.err")"
	exit 0
fi

# run_pair's listen check looks at this namespace: the server's port is in A.
listening() {
	ip netns exec "$NSA" ss -Hltn 2>/dev/null | awk -v p=":$1" '$4 ~ p "$" { found = 1 } END { exit !found }'
}

dev=uroce_mwv
common=(UROCE_IFACES=mwv UCX_NET_DEVICES=$dev:1 UCX_WARN_UNUSED_ENV_VARS=n)
UCX_SRV_PRE=(ip netns exec "$NSA" env "${common[@]}")
UCX_CLI_PRE=(ip netns exec "$NSB" env "${common[@]}")
UCX_HOST=10.202.0.1

ucx_perf netns_uct_rc_am_lat all -t am_lat -x rc_verbs -d $dev:1 -n 2000 -w 100
ucx_perf netns_uct_rc_put_bw all -t put_bw -x rc_verbs -d $dev:1 -D zcopy -s 65536 -n 300 -w 10
ucx_perf netns_uct_ud_am_lat all -t am_lat -x ud_verbs -d $dev:1 -n 2000 -w 100
ucx_perf netns_ucp_rc_tag_lat rc -t tag_lat -n 2000 -w 100
ucx_perf netns_ucp_rc_tag_bw rc -t tag_bw -s 1048576 -n 100 -w 5

# UCP endpoints connected by socket address: UCX's rdmacm wire-up across the veth.
netns_udp_bound() {
	ip netns exec "$NSA" ss -Hlun 2>/dev/null | awk -v p=":$1" '$4 ~ p "$" { found = 1 } END { exit !found }'
}
cm=(env "${common[@]}" UCX_TLS=rc UCX_SOCKADDR_TLS_PRIORITY=rdmacm UCX_LOG_LEVEL=info UROCE_LOG=info
	"$UROCE" run "$UROCE_BIN_DIR/ucp_sockaddr")
alloc_port
if READY_CHECK=netns_udp_bound run_pair netns_ucp_rdmacm ip netns exec "$NSA" "${cm[@]}" server 10.202.0.1 "$PORT" 1000 8 -- \
	ip netns exec "$NSB" "${cm[@]}" client 10.202.0.1 "$PORT" 1000 8 &&
	log_has netns_ucp_rdmacm client "ep_cfg\[[0-9]+\]: tag\(rc_verbs/$dev:1\)" &&
	log_has netns_ucp_rdmacm client 'rdma_cm: MADs received [1-9]'; then
	pass "netns_ucp_rdmacm: $(grep '^ucp_sockaddr: OK' "$LOG_DIR/netns_ucp_rdmacm.client.log"), rdma_cm wire-up, tag lane rc_verbs/$dev:1"
else
	fail "netns_ucp_rdmacm"
fi

mpicc.mpich -O2 -Wall -o "$LOG_DIR/mpi_check.mpich" "$UROCE_SRC_DIR/tests/tools/mpi_check.c"
rank=(env "${common[@]}" UCX_TLS=rc UCX_LOG_LEVEL=info MPIR_CVAR_NOLOCAL=1
	"$UROCE" run "$LOG_DIR/mpi_check.mpich")
log "=== mpich_netns: one rank in $NSA, one in $NSB"
rc=0
timeout -k 5 120 mpirun.mpich -n 1 ip netns exec "$NSA" "${rank[@]}" : \
	-n 1 ip netns exec "$NSB" "${rank[@]}" </dev/null >"$LOG_DIR/mpich_netns.log" 2>&1 || rc=$?
lanes=$(grep -Ec "ep_cfg\[[0-9]+\]: tag\(rc_verbs/$dev:1\)" "$LOG_DIR/mpich_netns.log" || true)
if ((rc == 0 && lanes >= 2)) && grep -q '^mpi_check: OK: 2 ranks' "$LOG_DIR/mpich_netns.log"; then
	pass "mpich_netns: $(grep '^mpi_check:' "$LOG_DIR/mpich_netns.log"); tag lanes on rc_verbs/$dev:1 in both ranks"
else
	fail "mpich_netns: $(explain_rc "$rc"), $lanes tag lanes on rc_verbs/$dev:1"
	tail -n 40 "$LOG_DIR/mpich_netns.log"
fi
finish

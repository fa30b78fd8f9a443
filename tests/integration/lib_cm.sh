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
#                        up (for tools with a fixed port: udaddy, mckey);
#   cm_suite TAG SADDR CADDR
#                        the whole matrix of issue 12 between CM_SRV and
#                        CM_CLI (cm_netns.sh, cm_std_local.sh), each program
#                        through cm_run.
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
# (cmtime): the client's exit code counts, the server is stopped after it
# (cm_run below, the server's port PORT on this host).
cm_stays() {
	local name=$1
	shift
	cm_run "$name" ":$PORT " 1 "$@"
}

cm_netns() {
	unshare -n -- bash -c 'ip link set lo up && exec "$@"' cm_netns "$@"
}

cm_can_netns() {
	[[ $(id -u) == 0 ]] && unshare -n -- true 2>/dev/null
}

# ---- the whole matrix (docs/cm.md, "Test matrix") ----
# cm_suite TAG SADDR CADDR: every program of issue 12's "Done when", server
# at SADDR under "${CM_SRV[@]}", client (address CADDR) under
# "${CM_CLI[@]}"; "${CM_SS[@]}" runs ss where the server is; CM_STD=1 when
# both are in standard-port mode (a server is ready once SADDR:4791 is
# bound).  Each program is one pass/fail: both sides exit 0 and, where the
# program prints it, its data check holds.  The ports are fixed: call it
# only inside private network namespaces.
CM_STD=0
CM_SS=()
CM_MCKEY_CLI=()

cm_ready() { # PATTERN: the server's UDP socket (ss -Hlun, grep -E)
	"${CM_SS[@]}" ss -Hlun 2>/dev/null | grep -Eq -- "$1"
}

# cm_run NAME PATTERN STAYS SERVER... -- CLIENT...: the server, once
# cm_ready PATTERN; then the client; STAYS=1 for a server that never exits
# (stopped after the client, whose exit counts).
cm_run() {
	local name=$1 pat=$2 stays=$3 spid src=0 crc=0
	shift 3
	local -a server=()
	while [[ $1 != -- ]]; do
		server+=("$1")
		shift
	done
	shift
	log "=== $name"
	timeout -k 5 120 "${server[@]}" </dev/null >"$LOG_DIR/$name.server.log" 2>&1 &
	spid=$!
	for _ in $(seq 300); do
		cm_ready "$pat" && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	timeout -k 5 90 "$@" </dev/null >"$LOG_DIR/$name.client.log" 2>&1 || crc=$?
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

# cm_cell NAME PORT STAYS SERVER... -- CLIENT...: cm_run for a server whose
# CM socket is PORT (native) or SADDR:4791 (standard)
cm_cell() {
	local name=$1 pat=":$2 "
	((CM_STD)) && pat="${CM_SADDR//./\\.}:4791 "
	shift 2
	cm_run "$name" "$pat" "$@"
}

cm_suite() {
	local tag=$1 sa=$2 ca=$3 n t
	local -a S=("${CM_SRV[@]}") C=("${CM_CLI[@]}")
	CM_SADDR=$sa
	for n in 64 65535; do
		if cm_cell "$tag.rping_$n" 7174 0 "${S[@]}" rping -s -a "$sa" -C 100 -S "$n" -V -- \
			"${C[@]}" rping -c -a "$sa" -C 100 -S "$n" -V -v &&
			[[ $(grep -c '^ping data: rdma-ping-' "$LOG_DIR/$tag.rping_$n.client.log") == 100 ]]; then
			pass "$tag: rping -V -v -C 100 -S $n (100 pings verified)"
		else
			fail "$tag: rping -V -v -C 100 -S $n"
		fi
	done
	check "$tag: rdma_server/rdma_client" cm_cell "$tag.rdma_client" 7471 0 \
		"${S[@]}" rdma_server -p 7471 -- "${C[@]}" rdma_client -s "$sa" -p 7471
	check "$tag: rdma_xserver/rdma_xclient" cm_cell "$tag.rdma_xclient" 7471 0 \
		"${S[@]}" rdma_xserver -p 7471 -- "${C[@]}" rdma_xclient -s "$sa" -p 7471
	if cm_cell "$tag.ucmatose" 7471 0 "${S[@]}" ucmatose -p 7471 -c 10 -C 20 -S 4096 -- \
		"${C[@]}" ucmatose -s "$sa" -p 7471 -c 10 -C 20 -S 4096 &&
		log_has "$tag.ucmatose" client 'return status 0' &&
		log_has "$tag.ucmatose" server 'return status 0'; then
		pass "$tag: ucmatose -c 10"
	else
		fail "$tag: ucmatose -c 10"
	fi
	if cm_cell "$tag.udaddy" 7174 0 "${S[@]}" udaddy -- "${C[@]}" udaddy -s "$sa" -C 10 &&
		log_has "$tag.udaddy" client 'return status 0'; then
		pass "$tag: udaddy"
	else
		fail "$tag: udaddy"
	fi
	# mckey: the receiver joins first ("server"), the sender's 10 messages
	# must all arrive
	# (the receiver is ready once its group socket, *:4791, is bound); the
	# sender runs under CM_MCKEY_CLI when set (see cm_std_local.sh)
	local -a M=("${C[@]}")
	((${#CM_MCKEY_CLI[@]})) && M=("${CM_MCKEY_CLI[@]}")
	if cm_run "$tag.mckey" '0\.0\.0\.0:4791 ' 0 "${S[@]}" mckey -m 239.1.2.3 -b "$sa" -C 10 -- \
		bash -c 'sleep 0.5; exec "$@"' mckey "${M[@]}" mckey -m 239.1.2.3 -b "$ca" -s -C 10 &&
		log_has "$tag.mckey" server 'data transfers complete'; then
		pass "$tag: mckey (UD multicast, 10 messages received)"
	else
		fail "$tag: mckey"
	fi
	if cm_cell "$tag.cmtime" 7471 1 "${S[@]}" cmtime -p 7471 -- \
		"${C[@]}" cmtime -s "$sa" -p 7471 -c 1000 && log_has "$tag.cmtime" client '^connect +:'; then
		pass "$tag: cmtime -c 1000"
	else
		fail "$tag: cmtime -c 1000"
	fi
	# -F: perftest's CPU-frequency fit (r^2) must not fail a run whose
	# transfers all passed (as in perftest.sh)
	for t in ib_send_bw ib_write_lat ib_read_bw ib_atomic_lat; do
		check "$tag: $t -R" cm_cell "$tag.$t" 7471 0 "${S[@]}" "$t" -R -F -p 7471 -n 200 -- \
			"${C[@]}" "$t" -R -F -p 7471 -n 200 "$sa"
	done
	check "$tag: pyverbs CMID" cm_cell "$tag.pyverbs" 7471 0 \
		"${S[@]}" /usr/bin/python3 "$UROCE_SRC_DIR/tests/tools/cm_pyverbs.py" server 7471 "$sa" -- \
		"${C[@]}" /usr/bin/python3 "$UROCE_SRC_DIR/tests/tools/cm_pyverbs.py" client 7471 "$sa"
	if cm_cell "$tag.rpma" 7471 0 "${S[@]}" "$UROCE_BIN_DIR/cm_rpma" server "$sa" 7471 -- \
		"${C[@]}" "$UROCE_BIN_DIR/cm_rpma" client "$sa" 7471 &&
		log_has "$tag.rpma" client '^rpma_flush completed' &&
		log_has "$tag.rpma" server '^server memory: librpma'; then
		pass "$tag: librpma connect, rpma_write, rpma_flush, rpma_read"
	else
		fail "$tag: librpma"
	fi
}

# cm_suite_require: the tools cm_suite runs
cm_suite_require() {
	cm_require
	require_cmd ib_send_bw perftest
	require_cmd /usr/bin/python3 python3
	[[ -x $UROCE_BIN_DIR/cm_rpma ]] || die "$UROCE_BIN_DIR/cm_rpma not built (librpma-dev missing? scripts/deps.sh)"
	"${ON_UROCE[@]}" /usr/bin/python3 -c 'import pyverbs.cmid' 2>/dev/null ||
		die "python3-pyverbs is not installed (scripts/deps.sh)"
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

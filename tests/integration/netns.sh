#!/usr/bin/env bash
# Several hosts: three network namespaces (h1, h2, h3: 10.201.0.1-3/24) on a
# Linux bridge in a fourth one, joined by veth pairs with the default MTU of
# 1500 bytes, so every uroce device (uroce_v1..3, native mode: the UDP port
# is part of the QPN) has an active MTU of 1024. Unmodified programs run
# with the server in one namespace and the client in another:
#   - ibv_devinfo: active_mtu 1024, GID 0 = the veth's IPv4 address;
#   - ibv_rc_pingpong (default -m 1024; 64 KiB messages of 64 packets),
#     ibv_uc_pingpong, ibv_ud_pingpong (its default size follows the port
#     MTU; -s 2048 is refused by the program), and -m 2048 on the 1024-byte
#     port is refused at RTR (ibv_modify_qp), both sides exit, no hang;
#   - ib_write_bw, ib_read_bw, ib_send_bw (-x 0; perftest picks the port's
#     MTU: 1024);
#   - a host cut off mid-transfer (ip link set dev v3 down inside h3 during
#     a long ib_write_bw): the client reports IBV_WC_RETRY_EXC_ERR (status
#     12) and exits within CUT_LIMIT seconds; the same cut during a long
#     ibv_rc_pingpong: the side with a send outstanding reports "transport
#     retry counter exceeded" and exits (the other one waits for a receive,
#     as on any RC hardware, and is stopped by the test); once the link is
#     back up, new QPs between the same hosts work;
#   - a restarted peer: the ib_write_bw / ibv_rc_pingpong server is killed
#     with SIGKILL mid-transfer, a new server starts, and a second client
#     run (new QPs) succeeds.
# Needs root (network namespaces); skips otherwise, or when `ip netns`
# does not work here. The namespaces go away on exit (trap).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

if ((EUID != 0)); then
	log "SKIP: needs root (network namespaces, veth pairs, a bridge)"
	exit 0
fi
require_cmd ip iproute2
require_cmd ss iproute2
require_cmd pgrep procps
require_cmd ibv_rc_pingpong ibverbs-utils
require_cmd ib_write_bw perftest
require_uroce

P=ur$$ # namespace prefix: concurrent runs do not collide
SW=${P}sw
HOSTS=("${P}h1" "${P}h2" "${P}h3")
BG_PIDS=()
CUT_LIMIT=10 # s from the cut (or kill) to the client's exit

cleanup() {
	local pid
	for pid in "${BG_PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	for ns in "${HOSTS[@]}" "$SW"; do
		timeout 10 ip netns del "$ns" 2>/dev/null || true
	done
}
trap cleanup EXIT

# The switch (a bridge in its own namespace) and three hosts on it. Any
# failure here is the environment's (no netns, no veth or bridge support):
# skip with the reason.
build_net() {
	local i ns
	timeout 10 ip netns add "$SW" || return 1
	timeout 10 ip -n "$SW" link set lo up || return 1
	timeout 10 ip -n "$SW" link add br0 type bridge || return 1
	timeout 10 ip -n "$SW" link set br0 up || return 1
	for i in 1 2 3; do
		ns=${HOSTS[i - 1]}
		timeout 10 ip netns add "$ns" || return 1
		timeout 10 ip -n "$ns" link set lo up || return 1
		timeout 10 ip -n "$ns" link add "v$i" type veth peer name "p$i" netns "$SW" || return 1
		timeout 10 ip -n "$SW" link set "p$i" master br0 || return 1
		timeout 10 ip -n "$SW" link set "p$i" up || return 1
		timeout 10 ip -n "$ns" addr add "10.201.0.$i/24" dev "v$i" || return 1
		timeout 10 ip -n "$ns" link set "v$i" up || return 1
	done
}
if ! build_net 2>"$LOG_DIR/netns.err"; then
	log "SKIP: cannot set up the namespaces (ip netns, veth, bridge): $(cat "$LOG_DIR/netns.err")"
	exit 0
fi
log "hosts: ${HOSTS[*]} (10.201.0.1-3 on v1-v3, $(timeout 10 ip -n "${HOSTS[0]}" -o link show v1 | grep -o 'mtu [0-9]*'))"

# "${IN1[@]}" CMD...: run a verbs program in h1 (IN2, IN3 alike) on uroce
IN1=(ip netns exec "${HOSTS[0]}" "${ON_UROCE[@]}")
IN2=(ip netns exec "${HOSTS[1]}" "${ON_UROCE[@]}")
IN3=(ip netns exec "${HOSTS[2]}" "${ON_UROCE[@]}")
addr() { echo "10.201.0.$1"; }

# run_pair looks for the server's TCP port in the server's namespace
SERVER_HOST=1
listening() {
	timeout 10 ip netns exec "${HOSTS[SERVER_HOST - 1]}" ss -Hltn 2>/dev/null |
		awk -v p=":$1" '$4 ~ p "$" { found = 1 } END { exit !found }'
}

CLIENT_TIMEOUT=60
SERVER_GRACE=10

# xpair NAME SERVER_HOST CLIENT_HOST PROGRAM ARGS...: PROGRAM -d uroce_v<h>
# on both hosts, the client toward the server's address.
xpair() {
	local name=$1 s=$2 c=$3
	shift 3
	alloc_port
	SERVER_HOST=$s
	local -n spre=IN$s cpre=IN$c
	run_pair "$name" "${spre[@]}" "$@" -d "uroce_v$s" -p "$PORT" -- \
		"${cpre[@]}" "$@" -d "uroce_v$c" -p "$PORT" "$(addr "$s")"
}

# wait_listen HOST PORT PID: until the server in HOST listens (or dies)
wait_listen() {
	local t=0
	SERVER_HOST=$1
	while ! listening "$2"; do
		kill -0 "$3" 2>/dev/null || return 1
		((t++ < LISTEN_TIMEOUT * 10)) || return 1
		sleep 0.1
	done
}

# wait_exit PID LIMIT [T0]: wait until LIMIT s after T0 ($EPOCHREALTIME,
# default now) for PID to exit; sets RC and WAITED (s since T0); RC=999 when
# it did not exit.
wait_exit() {
	local pid=$1 limit=$2 t0=${3:-$EPOCHREALTIME}
	while kill -0 "$pid" 2>/dev/null; do
		if (($(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { print (b - a > '"$limit"') }'))); then
			WAITED=$limit
			RC=999
			return
		fi
		sleep 0.05
	done
	RC=0
	wait "$pid" || RC=$?
	WAITED=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
}

# stop PID: SIGKILL the program a `timeout` runs (by pid), then reap both
stop() {
	local tpid=$1 child
	for child in $(timeout 5 pgrep -P "$tpid" 2>/dev/null); do
		kill -KILL "$child" 2>/dev/null || true
	done
	kill -KILL "$tpid" 2>/dev/null || true
	wait "$tpid" 2>/dev/null || true
}

child_of() { { timeout 5 pgrep -P "$1" || true; } | head -1; }

# ---- the devices ----------------------------------------------------------------

out=$(timeout 30 "${IN1[@]}" ibv_devinfo -v -d uroce_v1 2>&1) || true
if grep -Eq 'active_mtu:[[:space:]]+1024 \(3\)' <<<"$out" &&
	grep -Eq 'GID\[ *0\]:[[:space:]]+::ffff:10\.201\.0\.1' <<<"$out" &&
	grep -q PORT_ACTIVE <<<"$out"; then
	pass "ibv_devinfo in h1: uroce_v1 active, active_mtu 1024 on the 1500-byte veth, GID 0 ::ffff:10.201.0.1"
else
	fail "ibv_devinfo in h1: $out"
fi

# ---- unmodified programs between the hosts ------------------------------------------

check "ibv_rc_pingpong h1 -> h2 (4 KiB, default -m 1024)" \
	xpair rc_pingpong 2 1 ibv_rc_pingpong -g 0 -n 500
check "ibv_rc_pingpong h3 -> h2 (64 KiB: 64 packets per message)" \
	xpair rc_pingpong_64k 2 3 ibv_rc_pingpong -g 0 -s 65536 -n 50
check "ibv_uc_pingpong h2 -> h3" xpair uc_pingpong 3 2 ibv_uc_pingpong -g 0 -n 500
check "ibv_ud_pingpong h3 -> h1 (default size: the port MTU)" \
	xpair ud_pingpong 1 3 ibv_ud_pingpong -g 0 -n 500
check "ibv_ud_pingpong h3 -> h1 -s 1024" xpair ud_pingpong_1024 1 3 ibv_ud_pingpong -g 0 -s 1024 -n 500
for f in rc_pingpong ud_pingpong; do
	grep -h 'iters in' "$LOG_DIR/$f.client.log" | sed "s/^/  $f: /" || true
done

# larger than the port MTU: refused, not hung
rc=0
out=$(timeout 20 "${IN1[@]}" ibv_ud_pingpong -d uroce_v1 -g 0 -s 2048 -p 1 2>&1) || rc=$?
if ((rc != 0 && rc != 124)) && grep -q 'larger than port MTU (1024)' <<<"$out"; then
	pass "ibv_ud_pingpong -s 2048 on a 1024-byte port: refused ($out)"
else
	fail "ibv_ud_pingpong -s 2048: exit $rc: $out"
fi
alloc_port
SERVER_HOST=2
timeout -k 5 30 "${IN2[@]}" ibv_rc_pingpong -d uroce_v2 -g 0 -m 2048 -p "$PORT" \
	>"$LOG_DIR/mtu2048.server.log" 2>&1 &
spid=$!
BG_PIDS+=("$spid")
src=0 crc=0
if wait_listen 2 "$PORT" "$spid"; then
	timeout -k 5 30 "${IN1[@]}" ibv_rc_pingpong -d uroce_v1 -g 0 -m 2048 -p "$PORT" "$(addr 2)" \
		>"$LOG_DIR/mtu2048.client.log" 2>&1 || crc=$?
fi
wait_exit "$spid" 15
src=$RC
# whichever side gets to RTR first refuses it and drops the TCP connection
if ((crc != 0 && crc != 124 && src != 0 && src != 999 && src != 124)) &&
	grep -q 'Failed to modify QP to RTR' "$LOG_DIR"/mtu2048.*.log; then
	pass "ibv_rc_pingpong -m 2048 on the 1024-byte port: RTR refused, both sides exit"
else
	fail "ibv_rc_pingpong -m 2048: server $(explain_rc "$src"), client $(explain_rc "$crc")"
	show_logs mtu2048
fi

for t in write read send; do
	if xpair "ib_${t}_bw" 2 1 "ib_${t}_bw" -x 0 -F -s 65536 -n 500; then
		if log_has "ib_${t}_bw" client 'Mtu[[:space:]]*:[[:space:]]*1024\[B\]'; then
			pass "ib_${t}_bw h1 -> h2: $(awk '/^ *65536 / { print $4 " MB/s average" }' \
				"$LOG_DIR/ib_${t}_bw.client.log"), Mtu 1024[B]"
		else
			fail "ib_${t}_bw: perftest did not pick the port MTU 1024"
		fi
	else
		fail "ib_${t}_bw h1 -> h2"
	fi
done

# ---- a host cut off mid-transfer ---------------------------------------------------

# cut_bw: a 30 s ib_write_bw from h1 to h3; after 2 s h3's link goes down
cut_bw() {
	local spid cpid t0
	alloc_port
	timeout -k 5 60 "${IN3[@]}" ib_write_bw -d uroce_v3 -x 0 -F -p "$PORT" -D 30 \
		>"$LOG_DIR/cut_bw.server.log" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	if ! wait_listen 3 "$PORT" "$spid"; then
		fail "cut ib_write_bw: the server never listened"
		stop "$spid"
		return
	fi
	timeout -k 5 60 "${IN1[@]}" ib_write_bw -d uroce_v1 -x 0 -F -p "$PORT" -D 30 "$(addr 3)" \
		>"$LOG_DIR/cut_bw.client.log" 2>&1 &
	cpid=$!
	BG_PIDS+=("$cpid")
	sleep 2
	t0=$EPOCHREALTIME # taking a veth down can itself take a while
	timeout 10 ip -n "${HOSTS[2]}" link set dev v3 down
	wait_exit "$cpid" "$CUT_LIMIT" "$t0"
	if ((RC != 0 && RC != 999 && RC != 124)) &&
		log_has cut_bw client 'Failed status 12|retry'; then
		pass "h3 cut off during ib_write_bw: the client reports status 12 (IBV_WC_RETRY_EXC_ERR) and exits $WAITED s after the cut"
	else
		fail "h3 cut off during ib_write_bw: client $( ((RC == 999)) && echo "still running after $CUT_LIMIT s" || explain_rc "$RC")"
		show_logs cut_bw
		stop "$cpid"
	fi
	stop "$spid" # waits on TCP for a peer it cannot reach
	timeout 10 ip -n "${HOSTS[2]}" link set dev v3 up
}

# cut_pp: a long ibv_rc_pingpong between h1 and h3, then h3's link goes down
cut_pp() {
	local spid cpid t0 elapsed reported=()
	alloc_port
	timeout -k 5 60 "${IN3[@]}" ibv_rc_pingpong -d uroce_v3 -g 0 -p "$PORT" -n 100000000 \
		>"$LOG_DIR/cut_pp.server.log" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	if ! wait_listen 3 "$PORT" "$spid"; then
		fail "cut ibv_rc_pingpong: the server never listened"
		stop "$spid"
		return
	fi
	timeout -k 5 60 "${IN1[@]}" ibv_rc_pingpong -d uroce_v1 -g 0 -p "$PORT" -n 100000000 "$(addr 3)" \
		>"$LOG_DIR/cut_pp.client.log" 2>&1 &
	cpid=$!
	BG_PIDS+=("$cpid")
	sleep 2
	t0=$EPOCHREALTIME
	timeout 10 ip -n "${HOSTS[2]}" link set dev v3 down
	# the first to exit must be the one with a send outstanding
	while kill -0 "$spid" 2>/dev/null && kill -0 "$cpid" 2>/dev/null &&
		(($(awk -v a="$t0" -v b="$EPOCHREALTIME" -v l="$CUT_LIMIT" 'BEGIN { print (b - a < l) }'))); do
		sleep 0.05
	done
	elapsed=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
	for side in server client; do
		if log_has cut_pp "$side" 'transport retry counter exceeded'; then
			reported+=("$side")
		fi
	done
	if ((${#reported[@]} > 0)); then
		local who="${reported[*]}"
		pass "h3 cut off during ibv_rc_pingpong: 'transport retry counter exceeded (12)' from the ${who// / and the }, exit $elapsed s after the cut"
	else
		fail "h3 cut off during ibv_rc_pingpong: no side reported retry exceeded within $CUT_LIMIT s"
		show_logs cut_pp
	fi
	stop "$spid"
	stop "$cpid"
	timeout 10 ip -n "${HOSTS[2]}" link set dev v3 up
}

cut_bw
cut_pp
check "h1 -> h3 again after the link came back (new QPs)" \
	xpair rc_pingpong_after_cut 3 1 ibv_rc_pingpong -g 0 -n 200

# ---- a restarted peer ------------------------------------------------------------

# restart NAME PROG FIRST SECOND COMMON...: a server in h2 runs PROG COMMON
# FIRST (a long run) and is killed (SIGKILL) 2 s into it; the client must see
# it fail (bw: status 12; pingpong: whichever way the RC connection breaks);
# then a new server and a second client run with PROG COMMON SECOND.
restart() {
	local name=$1 prog=$2 spid cpid pid t0
	local -a first second
	read -r -a first <<<"$3"
	read -r -a second <<<"$4"
	shift 4
	alloc_port
	timeout -k 5 60 "${IN2[@]}" "$prog" -d uroce_v2 -p "$PORT" "$@" "${first[@]}" \
		>"$LOG_DIR/$name.first.server.log" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	if ! wait_listen 2 "$PORT" "$spid"; then
		fail "$name: the server never listened"
		stop "$spid"
		return
	fi
	timeout -k 5 60 "${IN1[@]}" "$prog" -d uroce_v1 -p "$PORT" "$@" "${first[@]}" "$(addr 2)" \
		>"$LOG_DIR/$name.first.client.log" 2>&1 &
	cpid=$!
	BG_PIDS+=("$cpid")
	sleep 2
	pid=$(child_of "$spid")
	t0=$EPOCHREALTIME
	[[ -n $pid ]] && kill -KILL "$pid"
	wait "$spid" 2>/dev/null || true
	wait_exit "$cpid" "$CUT_LIMIT" "$t0"
	if [[ $prog == ib_write_bw ]]; then
		if ((RC != 0 && RC != 999 && RC != 124)) &&
			grep -Eq 'Failed status 12' "$LOG_DIR/$name.first.client.log"; then
			pass "$name: server SIGKILLed mid-transfer: the client reports status 12 and exits $WAITED s later"
		else
			fail "$name: client after the server's death: $( ((RC == 999)) && echo "still running" || explain_rc "$RC")"
			tail -20 "$LOG_DIR/$name.first.client.log"
		fi
	elif ((RC == 999)); then
		log "  $name: the client waits for a receive from the dead server (no send outstanding): stopped"
	else
		log "  $name: the client exited ($(explain_rc "$RC")) $WAITED s after the kill: $(grep -m1 -E 'Failed|error' "$LOG_DIR/$name.first.client.log" || true)"
	fi
	stop "$cpid"
	# a new server process, new QPs; the client connects again
	check "$name: a new server after the kill, a second client run succeeds" \
		xpair "$name.second" 2 1 "$prog" "$@" "${second[@]}"
}

restart restart_bw ib_write_bw "-D 20" "-s 65536 -n 500" -x 0 -F
restart restart_pp ibv_rc_pingpong "-n 100000000" "-n 500" -g 0

finish

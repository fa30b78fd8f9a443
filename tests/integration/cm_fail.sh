#!/usr/bin/env bash
# rdma_cm failure behaviour (docs/cm.md), loopback, native mode, with
# tests/tools/cm_fail.c (build/bin/cm_fail) and Debian's rping:
#   - connect to a port nobody listens on: REJECTED or UNREACHABLE;
#   - the listener dies by SIGKILL on the CONNECT_REQUEST: the client gets
#     REJECTED or UNREACHABLE (never a hang);
#   - the peer is killed after ESTABLISHED: error completions, then
#     rdma_disconnect gives DISCONNECTED;
#   - rdma_destroy_id blocks while an event of the id is unacknowledged;
#   - 1000 connect/disconnect cycles: TIMEWAIT_EXIT reaches both sides, and
#     neither process's RSS nor its open fds grow (TIME_WAIT does not leak);
#   - IPv6 is refused (EAFNOSUPPORT), rsocket() fails with ENOSYS;
#   - garbage datagrams at a live listener's port are dropped: rping still
#     connects and the server survives.
# Times are printed (the bounds are the CM timeouts, not asserted).
set -euo pipefail
source "$(dirname "$0")/lib_cm.sh"
cm_require
require_uroce
require_cmd /usr/bin/python3 python3
CMF=$UROCE_BIN_DIR/cm_fail
[[ -x $CMF ]] || die "$CMF not built"
U=("${ON_UROCE[@]}")
T=120

has() { grep -Eq -- "$2" "$1"; }
# bg_server LOG CMD...: start a server (pid in $spid), wait for its UDP port
bg_server() {
	local log=$1
	shift
	timeout $T "$@" >"$log" 2>&1 &
	spid=$!
	for _ in $(seq 200); do udp_bound "$PORT" && break; sleep 0.1; done
}

# 1. nobody listens
cm_port
out=$LOG_DIR/noserver.log
if timeout $T "${U[@]}" "$CMF" noserver "$PORT" >"$out" 2>&1 && has "$out" 'EVENT RDMA_CM_EVENT_(REJECTED|UNREACHABLE)'; then
	pass "no listener: $(grep -E '^EVENT RDMA_CM_EVENT_(REJ|UNR)' "$out")"
else
	cat "$out"
	fail "no listener"
fi

# 2. the listener dies (SIGKILL) in the middle of the handshake
cm_port
out=$LOG_DIR/diehalf
bg_server "$out.server" "${U[@]}" "$CMF" diehalf "$PORT"
crc=0
timeout $T "${U[@]}" "$CMF" connect "$PORT" >"$out.client" 2>&1 || crc=$?
src=0
wait "$spid" || src=$?
if ((crc == 0 && src == 137)) && has "$out.client" 'EVENT RDMA_CM_EVENT_(REJECTED|UNREACHABLE)'; then
	pass "listener killed mid-handshake: $(grep -E '^EVENT RDMA_CM_EVENT_(REJ|UNR)' "$out.client")"
else
	tail "$out.server" "$out.client"
	fail "listener killed mid-handshake (client rc $crc, server rc $src)"
fi

# 3. the peer is killed after ESTABLISHED
cm_port
out=$LOG_DIR/peerdeath
bg_server "$out.server" "${U[@]}" "$CMF" serve "$PORT"
# the survivor SIGKILLs the timeout wrapper's child: find the server itself
sleep 0.2
srv=$(pgrep -P "$spid" -f "cm_fail serve" || echo "$spid")
crc=0
timeout $T "${U[@]}" "$CMF" survive "$PORT" "$srv" >"$out.client" 2>&1 || crc=$?
wait "$spid" 2>/dev/null || true
if ((crc == 0)) && has "$out.client" '^ERROR_COMPLETION' && has "$out.client" 'EVENT RDMA_CM_EVENT_DISCONNECTED'; then
	pass "peer killed after ESTABLISHED: $(grep ^ERROR_COMPLETION "$out.client"); $(grep DISCONNECTED "$out.client")"
else
	tail "$out.server" "$out.client"
	fail "peer killed after ESTABLISHED (rc $crc)"
fi

# 4. rdma_destroy_id waits for the acknowledgement
cm_port
out=$LOG_DIR/destroyblock.log
if timeout $T "${U[@]}" "$CMF" destroyblock "$PORT" >"$out" 2>&1 && has "$out" '^DESTROYED'; then
	pass "rdma_destroy_id blocks until the event is acknowledged"
else
	cat "$out"
	fail "rdma_destroy_id with an unacknowledged event"
fi

# 5. connect/disconnect cycles: TIMEWAIT_EXIT on both sides, and TIME_WAIT
# does not leak (RSS and open fds of both processes bounded over the cycles)
# (in the ASan build a small quarantine: freed memory is otherwise kept and
# counted in RSS)
UQ=("${U[@]}" "ASAN_OPTIONS=detect_leaks=0:quarantine_size_mb=1")
cm_port
out=$LOG_DIR/cycles
bg_server "$out.server" "${UQ[@]}" "$CMF" acceptor "$PORT" 1000
crc=0
timeout $T "${UQ[@]}" "$CMF" cycles "$PORT" 1000 >"$out.client" 2>&1 || crc=$?
src=0
wait "$spid" || src=$?
if ((crc == 0 && src == 0)) && has "$out.client" 'EVENT RDMA_CM_EVENT_TIMEWAIT_EXIT' &&
	has "$out.server" 'EVENT RDMA_CM_EVENT_TIMEWAIT_EXIT'; then
	pass "1000 connect/disconnect cycles, TIMEWAIT_EXIT on both sides, nothing grows: $(grep -h '^cycles:\|^acceptor:' "$out.client" "$out.server" | tr '\n' ' ')"
else
	tail "$out.server" "$out.client"
	fail "connect/disconnect cycles (client rc $crc, server rc $src)"
fi

# 6. IPv6 and rsockets
check "IPv6 refused with EAFNOSUPPORT" timeout $T "${U[@]}" "$CMF" ipv6
check "rsocket() fails with ENOSYS" timeout $T "${U[@]}" "$CMF" rsocket

# 7. hostile datagrams at a live listener, then a real connection
cm_port
name=hostile
slog=$LOG_DIR/$name.server.log
bg_server "$slog" "${U[@]}" rping -s -a 127.0.0.1 -p "$PORT" -C 10 -V
/usr/bin/python3 - "$PORT" <<'PY'
import os, random, socket, struct, sys
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rnd = random.Random(7)
def send(b): s.sendto(b, ("127.0.0.1", port))
for n in list(range(0, 300)) + [280] * 200 + [1500, 9000]:
    send(bytes(rnd.getrandbits(8) for _ in range(n)))
# BTH+DETH to QP1, CM MAD header, REQ attribute, garbage body, no valid ICRC
hdr = bytes([0x64, 0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 1]) + struct.pack(">II", 0x80010000, 1)
for _ in range(200):
    mad = bytes([1, 7, 2, 3, 0, 0, 0, 0]) + os.urandom(8) + bytes([0, 0x10]) + os.urandom(238)
    send(hdr + mad + os.urandom(4))
PY
crc=0
timeout $T "${U[@]}" rping -c -a 127.0.0.1 -p "$PORT" -C 10 -V >"$LOG_DIR/$name.client.log" 2>&1 || crc=$?
src=0
wait "$spid" || src=$?
if ((crc == 0 && src == 0)); then
	pass "garbage at a listener dropped; rping connects afterwards"
else
	show_logs "$name"
	fail "garbage at a listener (client rc $crc, server rc $src)"
fi
finish

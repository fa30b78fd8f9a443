#!/usr/bin/env bash
# rdma_cm at scale, loopback, native mode: cmtime opens 10,000 connections
# (10,000 RC QPs on each side) to one listener and tears them down; then a
# second cmtime run of 100 connections to the same listener succeeds (the
# listener keeps accepting after them).  No timing is asserted; cmtime's
# step table is printed (bench/cm_rate.sh turns it into a rate).
set -euo pipefail
source "$(dirname "$0")/lib_cm.sh"
cm_require
require_uroce
U=("${ON_UROCE[@]}")
N=${CM_SCALE_N:-10000}

cm_port
slog=$LOG_DIR/server.log
timeout -k 5 600 "${U[@]}" cmtime -p "$PORT" >"$slog" 2>&1 &
spid=$!
for _ in $(seq 300); do udp_bound "$PORT" && break; sleep 0.1; done
for run in "$N" 100; do
	out=$LOG_DIR/client.$run.log
	if timeout -k 5 300 "${U[@]}" cmtime -s 127.0.0.1 -p "$PORT" -c "$run" >"$out" 2>&1 &&
		grep -Eq '^connect +:' "$out"; then
		sed -n '/^step/,$p' "$out"
		pass "cmtime -c $run to one listener"
	else
		tail -20 "$out"
		fail "cmtime -c $run to one listener"
	fi
done
if kill -0 "$spid" 2>/dev/null; then
	pass "the listener is still running"
else
	fail "the listener died"
fi
kill "$spid" 2>/dev/null || true
wait "$spid" 2>/dev/null || true
finish

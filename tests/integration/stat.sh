#!/usr/bin/env bash
# Counters readable while programs run (`uroce stat`): perftest's ib_write_bw
# server and client run for 6 seconds on uroce; `uroce stat --json` twice
# during the run must show their device and QP counters moving, `-w` must
# show rates.  The counters live in a memfd per context (found through
# /proc/PID/fd): a program killed with SIGKILL leaves nothing behind, not in
# /dev/shm, not in `uroce stat`.  With UROCE_STATS_DIR=DIR they are files in
# DIR: a SIGKILLed program leaves its file, which the next `uroce stat`
# removes.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd ib_write_bw perftest
require_cmd ibv_rc_pingpong ibverbs-utils
require_cmd ss iproute2
require_cmd python3 python3
require_uroce
UROCE=$UROCE_BIN_DIR/uroce
[[ -x $UROCE ]] || die "$UROCE not built"

unset UROCE_STATS_DIR # the default: memfds
STATS_DIR=$LOG_DIR/stats-dir # for the UROCE_STATS_DIR run
mkdir -p "$STATS_DIR"
dev=$(first_device) || die "cannot list devices"

PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT

# sample FILE PID...: `uroce stat --json` for these processes into FILE.
# While ib_write_bw spins on both CPUs of a small machine, starting python
# takes seconds (uroce stat a few ms): take the samples during the run,
# evaluate them afterwards.
sample() {
	local f=$1
	shift
	"$UROCE" stat --json "$@" >"$f" 2>>"$LOG_DIR/stat.stderr"
}

# jq_py FILE EXPR: evaluate a Python expression over the JSON document in
# FILE (d = the document, ctx(PID) = that process's first context)
jq_py() {
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
def ctx(pid):
    return [c for c in d["contexts"] if c["pid"] == int(pid)][0]
try:
    print(eval(sys.argv[2]))
except (IndexError, KeyError):
    print("")
' "$1" "$2"
}

# wait_for DESCRIPTION SECONDS CMD...: poll until CMD succeeds
wait_for() {
	local what=$1 t=$(($2 * 10))
	shift 2
	while ! "$@"; do
		if ((t-- <= 0)); then
			log "timed out waiting for $what"
			return 1
		fi
		sleep 0.1
	done
}

# has_memfd PID: the process holds a uroce-stats memfd
has_memfd() { ls -l "/proc/$1/fd" 2>/dev/null | grep -q 'memfd:uroce-stats\.'; }
# shm_file PID: a counter file of PID in /dev/shm (the old default)
shm_file() { compgen -G "/dev/shm/uroce.$1.*" >/dev/null; }
no_shm_file() { ! shm_file "$1"; }
has_file() { compgen -G "$STATS_DIR/uroce.$1.*" >/dev/null; }
no_file() { ! has_file "$1"; }
# listed PID: `uroce stat --json` shows a context of PID
listed() {
	"$UROCE" stat --json >"$LOG_DIR/listed.json" 2>>"$LOG_DIR/stat.stderr" &&
		grep -q "\"pid\": $1," "$LOG_DIR/listed.json"
}
not_listed() { ! listed "$1"; }
# (no python here: starting it takes seconds while ib_write_bw spins)
sending() {
	sample "$LOG_DIR/s1.json" "$1" &&
		grep -qE '"sent_pkts": [1-9]' "$LOG_DIR/s1.json"
}

# ---- ib_write_bw for 6 seconds --------------------------------------------------
alloc_port
slog=$LOG_DIR/write_bw.server.log
clog=$LOG_DIR/write_bw.client.log
log "=== ib_write_bw -D 6 on $dev (TCP port $PORT)"
"${ON_UROCE[@]}" ib_write_bw -x 0 -d "$dev" -D 6 -F -p "$PORT" >"$slog" 2>&1 &
spid=$!
PIDS+=("$spid")
wait_for "the server to listen" 20 listening "$PORT" || die "ib_write_bw server did not start"
"${ON_UROCE[@]}" ib_write_bw -x 0 -d "$dev" -D 6 -F -p "$PORT" 127.0.0.1 >"$clog" 2>&1 &
cpid=$!
PIDS+=("$cpid")
log "  server pid $spid, client pid $cpid"

if wait_for "the client to send" 20 sending "$cpid"; then
	# s1.json (the client sends) is taken; -w 0.5 doubles as the pause
	"$UROCE" stat -w 0.5 -n 1 --json "$cpid" >"$LOG_DIR/rates.json" 2>>"$LOG_DIR/stat.stderr"
	"$UROCE" stat "$cpid" >"$LOG_DIR/stat.human.log" 2>&1 || true
	sample "$LOG_DIR/s2.json"
	sample "$LOG_DIR/s3.json" "$spid" # PID filter, and the server's file
	j1=$LOG_DIR/s1.json
	j2=$LOG_DIR/s2.json
	c1=$(jq_py "$j1" "ctx($cpid)['counters']['sent_pkts']")
	c2=$(jq_py "$j2" "ctx($cpid)['counters']['sent_pkts']")
	q1=$(jq_py "$j1" "ctx($cpid)['qps'][0]['counters']['sent_bytes']")
	q2=$(jq_py "$j2" "ctx($cpid)['qps'][0]['counters']['sent_bytes']")
	s2=$(jq_py "$j2" "ctx($spid)['counters']['rcvd_pkts']")
	s3=$(jq_py "$LOG_DIR/s3.json" "ctx($spid)['counters']['rcvd_pkts']")
	check "client sent_pkts moved between two 'uroce stat --json' ($c1 -> $c2)" \
		test "${c2:-0}" -gt "${c1:-0}"
	check "client QP sent_bytes moved ($q1 -> $q2)" test "${q2:-0}" -gt "${q1:-0}"
	check "server rcvd_pkts moved ($s2 -> $s3)" test "${s3:-0}" -gt "${s2:-0}"
	check "uroce stat PID shows only that process" \
		test "$(jq_py "$LOG_DIR/s3.json" "len(d['contexts'])")" = 1
	sqpn=$(jq_py "$j2" "ctx($spid)['qps'][0]['qpn']")
	cdest=$(jq_py "$j2" "ctx($cpid)['qps'][0]['dest_qpn']")
	check "client QP is an RC QP in RTS" \
		test "$(jq_py "$j2" "ctx($cpid)['qps'][0]['type'] + ' ' + ctx($cpid)['qps'][0]['state']")" = "RC RTS"
	check "client QP's dest_qpn ($cdest) is the server's QPN ($sqpn)" \
		test -n "$sqpn" -a "$cdest" = "$sqpn"
	check "device and program named" \
		test "$(jq_py "$j2" "ctx($cpid)['device'] + ' ' + ctx($cpid)['comm']")" = "$dev ib_write_bw"
	rate=$(jq_py "$LOG_DIR/rates.json" \
		"'%d %d' % (ctx($cpid)['rates']['sent_pkts'], ctx($cpid)['qps'][0]['rates']['sent_pkts'])")
	check "uroce stat -w reports a packet rate for the device and the QP ($rate /s)" \
		bash -c "[[ '$rate' =~ ^[1-9][0-9]*\ [1-9][0-9]*$ ]]"
	log "  uroce stat $cpid:"
	sed 's/^/    /' "$LOG_DIR/stat.human.log"
	check "human output has the counters and the QP table" \
		bash -c "grep -q 'sent_pkts' '$LOG_DIR/stat.human.log' &&
			 grep -qE '^ +0x[0-9a-f]{6} +RC +RTS' '$LOG_DIR/stat.human.log'"
else
	fail "ib_write_bw client never showed packets in uroce stat"
	log "----- client log"
	tail -20 "$clog"
fi

src=0
crc=0
wait "$cpid" || crc=$?
wait "$spid" || src=$?
check "ib_write_bw server and client exit 0 (server $src, client $crc)" \
	test "$src$crc" = 00
if [[ $src$crc != 00 ]]; then
	# what perftest said on the way out (a rerun overwrites the logs;
	# stderr, unbuffered, lands before stdout's buffered lines)
	log "----- server log (end)"
	tail -8 "$slog"
	log "----- client log (end)"
	tail -8 "$clog"
	cp "$slog" "$slog.failed"
	cp "$clog" "$clog.failed"
fi
check "after exit, no counter file of the server in /dev/shm" no_shm_file "$spid"
check "after exit, no counter file of the client in /dev/shm" no_shm_file "$cpid"
check "after exit, uroce stat lists neither" bash -c "! grep -qE '\"pid\": ($spid|$cpid),' <(\"$UROCE\" stat --json)"

# ---- kill -9 ------------------------------------------------------------------------
# ibv_rc_pingpong's server opens the device, then waits for a client.
alloc_port
log "=== kill -9 of a program with an open device (TCP port $PORT): memfd"
"${ON_UROCE[@]}" ibv_rc_pingpong -g 0 -d "$dev" -p "$PORT" >"$LOG_DIR/killed.log" 2>&1 &
kpid=$!
PIDS+=("$kpid")
if wait_for "its counter memfd" 20 has_memfd "$kpid"; then
	check "uroce stat lists the live process (found in /proc/$kpid/fd)" listed "$kpid"
	check "no counter file in /dev/shm while it runs" no_shm_file "$kpid"
	kill -KILL "$kpid"
	wait "$kpid" 2>/dev/null || true
	check "after kill -9: no counter file in /dev/shm" no_shm_file "$kpid"
	check "after kill -9: uroce stat does not list it" not_listed "$kpid"
	check "after kill -9: the process and its descriptors are gone" test ! -e "/proc/$kpid"
else
	fail "ibv_rc_pingpong -g 0 (pid $kpid) never showed its counter memfd in /proc/$kpid/fd"
fi

alloc_port
log "=== kill -9 with UROCE_STATS_DIR=$STATS_DIR (TCP port $PORT): files"
UROCE_STATS_DIR=$STATS_DIR "${ON_UROCE[@]}" ibv_rc_pingpong -g 0 -d "$dev" -p "$PORT" \
	>"$LOG_DIR/killed2.log" 2>&1 &
kpid=$!
PIDS+=("$kpid")
if wait_for "its counter file" 20 has_file "$kpid"; then
	check "UROCE_STATS_DIR: no memfd, a file" bash -c "! ls -l /proc/$kpid/fd | grep -q memfd:uroce"
	check "uroce stat with the same UROCE_STATS_DIR lists it" \
		env UROCE_STATS_DIR="$STATS_DIR" bash -c "$(declare -f listed); UROCE='$UROCE' LOG_DIR='$LOG_DIR' listed $kpid"
	kill -KILL "$kpid"
	wait "$kpid" 2>/dev/null || true
	check "after kill -9 the file is still there (nobody could remove it)" has_file "$kpid"
	UROCE_STATS_DIR=$STATS_DIR "$UROCE" stat >"$LOG_DIR/stat.after_kill.log" 2>&1 || true
	check "uroce stat removed the dead process's file" no_file "$kpid"
	check "uroce stat said so" grep -q "removed .*uroce\.$kpid\..*process $kpid is gone" \
		"$LOG_DIR/stat.after_kill.log"
else
	fail "ibv_rc_pingpong -g 0 (pid $kpid) never created its counter file in $STATS_DIR"
fi

finish

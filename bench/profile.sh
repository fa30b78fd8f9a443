#!/usr/bin/env bash
# bench/profile.sh - where uroce's time goes, for bench/ANALYSIS.md.
#
#   bench/profile.sh [--uroce PATH | --build DIR] [--out DIR] [--secs N]
#
# Scenarios (loopback, unmodified perftest through `uroce run`):
#   write_bw  ib_write_bw -s 65536 -D SECS
#   send_lat  ib_send_lat -s 2 -n 20000
#   write_lat ib_write_lat -s 2 -n 300    (counters and syscalls only)
# For each: a `perf stat` run (system calls by kind, context switches, CPU
# time, both processes) with UROCE_LOG=info so each process logs its packet
# counters at close; then (write_bw, send_lat) a `perf record --call-graph
# dwarf` run of each side, summarised as the top symbols (self time, user +
# kernel) and the split between threads. Writes OUT/<scenario>.{stat,counters,
# srv.top,cli.top,...}.txt and OUT/summary.txt. Needs root (perf tracepoints).
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
UROCE="" BUILD=$REPO/build-bench OUT=$BENCH_DIR/out/profile SECS=5
while [[ $# -gt 0 ]]; do
	case $1 in
	--uroce) UROCE=$2; shift ;;
	--build) BUILD=$2; shift ;;
	--out) OUT=$2; shift ;;
	--secs) SECS=$2; shift ;;
	-h | --help) sed -n '2,16p' "$0"; exit 0 ;;
	*) echo "profile.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
command -v perf >/dev/null || { echo "profile.sh: perf is missing (apt-get install linux-perf)" >&2; exit 1; }
if [[ -z $UROCE ]]; then
	cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
		make -C "$BUILD" -j"$(nproc)" ibverbs >/dev/null || [[ -e $BUILD/lib/libibverbs.so.1 ]] ||
		{ echo "profile.sh: build failed" >&2; exit 1; }
	UROCE=$BUILD/bin/uroce
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PORT=$((33000 - RANDOM % 2000))
SPID=""
trap '[[ -n $SPID ]] && kill -TERM -- "-$SPID" 2>/dev/null' EXIT

# the system calls worth counting on the data path
EVENTS=task-clock,context-switches,cpu-migrations,raw_syscalls:sys_enter
for s in sendmsg sendmmsg sendto recvmmsg recvmsg recvfrom epoll_wait epoll_pwait sched_yield futex write read poll; do
	EVENTS+=,syscalls:sys_enter_$s
done

wait_listen() {
	local i
	for ((i = 0; i < 200; i++)); do
		ss -Hltn "sport = :$1" | grep -q . && return 0
		sleep 0.05
	done
	return 1
}

# pair NAME WRAP_SRV WRAP_CLI -- PERFTEST ARGS: runs the server and the client
pair() {
	local name=$1 ws=$2 wc=$3
	shift 4
	PORT=$((PORT + 1))
	# shellcheck disable=SC2086
	UROCE_LOG=info timeout -k 3 120 $ws "$UROCE" run -- "$@" -d uroce_lo -x 0 -p "$PORT" -F \
		</dev/null >"$OUT/$name.srv.out" 2>&1 &
	SPID=$!
	wait_listen "$PORT" || { echo "profile.sh: $name: server did not listen" >&2; }
	# shellcheck disable=SC2086
	UROCE_LOG=info timeout -k 3 120 $wc "$UROCE" run -- "$@" -d uroce_lo -x 0 -p "$PORT" -F 127.0.0.1 \
		</dev/null >"$OUT/$name.cli.out" 2>&1
	wait "$SPID"
	SPID=""
}

stat_run() { # NAME -- PERFTEST ARGS
	local name=$1
	shift 2
	pair "$name.stat" "perf stat -x, -e $EVENTS -o $OUT/$name.srv.stat --" \
		"perf stat -x, -e $EVENTS -o $OUT/$name.cli.stat --" -- "$@"
	{
		echo "== $name: $*"
		echo "-- result (client)"
		awk 'f && $1 ~ /^[0-9]+$/ { print; exit } /#bytes/ { print; f = 1 }' "$OUT/$name.stat.cli.out"
		for side in srv cli; do
			echo "-- $side: uroce counters"
			grep -o 'counters: .*' "$OUT/$name.stat.$side.out" | tr ' ' '\n' | grep -v '=0$' | tail -n +2 | paste -sd' '
			echo "-- $side: perf stat (count, event)"
			awk -F, 'NF > 3 && $1 !~ /^#/ && $1 != "" { printf "%14s  %s\n", $1, $3 }' "$OUT/$name.$side.stat"
		done
	} >"$OUT/$name.stat.txt"
}

record_run() { # NAME -- PERFTEST ARGS
	local name=$1 side
	shift 2
	pair "$name.rec" "perf record -F 1999 -e cpu-clock --call-graph dwarf,16384 -o $OUT/$name.srv.data --" \
		"perf record -F 1999 -e cpu-clock --call-graph dwarf,16384 -o $OUT/$name.cli.data --" -- "$@"
	for side in srv cli; do
		{
			echo "== $name $side: self time by symbol (user + kernel), cpu-clock samples"
			perf report -i "$OUT/$name.$side.data" --no-children --sort dso,sym --stdio --percent-limit 0.7 \
				2>/dev/null | grep -v '^$' | grep -v '^#' | grep -E '^ +[0-9]' | head -40
			echo
			echo "== $name $side: by thread"
			perf report -i "$OUT/$name.$side.data" --no-children --sort tid --stdio 2>/dev/null |
				grep -E '^ +[0-9]' | head -8
			echo
			echo "== $name $side: inclusive time (children) of the top entries"
			perf report -i "$OUT/$name.$side.data" --children --sort sym --stdio --percent-limit 4 -g none \
				2>/dev/null | grep -E '^ +[0-9]' | head -40
		} >"$OUT/$name.$side.top.txt"
	done
}

echo "profile.sh: uroce $UROCE; out $OUT; load $(cut -d' ' -f1-3 /proc/loadavg)"
stat_run write_bw -- ib_write_bw -s 65536 -D "$SECS"
record_run write_bw -- ib_write_bw -s 65536 -D "$SECS"
stat_run send_lat -- ib_send_lat -s 2 -n 20000
record_run send_lat -- ib_send_lat -s 2 -n 20000
stat_run write_lat -- ib_write_lat -s 2 -n 300
stat_run send_bw -- ib_send_bw -s 65536 -D "$SECS"
cat "$OUT"/*.stat.txt >"$OUT/summary.txt"
for f in "$OUT"/*.top.txt; do
	{ echo; cat "$f"; } >>"$OUT/summary.txt"
done
echo "profile.sh: done: $OUT/summary.txt"

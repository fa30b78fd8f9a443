#!/usr/bin/env bash
# bench/run.sh - measure uroce side by side with its peers, in one run.
#
#   bench/run.sh [--quick] [--out DIR] [--reps N] [options]
#
# uroce (unmodified perftest through `uroce run`, loopback and a veth pair
# between two network namespaces) against qperf TCP/UDP, a busy-poll UDP
# ping-pong (bench/udp_pingpong.c), memcpy (bench/memcpy_bw.c) and, when
# installed, ucx_perftest over UCX's tcp transport. The uroce rows on loopback
# run with UROCE_SHM=0: they measure the UDP path (the one between hosts);
# bench/shm.sh measures the same-host wire. Every table carries the machine's
# system-call cost and memcpy bandwidth (section "machine", always run). Writes OUT/results.md,
# OUT/results.json, OUT/bench.png, OUT/points.tsv (every measurement) and
# OUT/raw/ (every program's output). See bench/README.md.
#
# Every process runs under `timeout`; a run that fails or hangs is recorded
# as "fail" (or "n/a" for what uroce reports as unsupported) and the suite
# goes on.
set -uo pipefail
# The whole script is one brace group, which bash parses before running any of
# it: editing this file while a run is in progress cannot derail that run.
{

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)

usage() {
	cat <<EOF
usage: bench/run.sh [--quick] [--out DIR] [--reps N] [options]

  --quick          reduced matrix (a few sizes, 1 rep), about 3 minutes
  --out DIR        output directory (default: bench/out)
  --reps N         repetitions of the key points; medians are reported (default 3)
  --build DIR      where to build uroce (Release) (default: build-bench/ in the repo)
  --uroce PATH     use this 'uroce' launcher and do not build
  --no-install     do not apt-get install missing tools (matplotlib, ucx-utils)
  --no-veth        skip the network-namespace/veth part (needs root)
  --no-ucx         skip ucx_perftest
  --only LIST      run only these sections (comma-separated, in the usual order):
                   floors,qperf,ucx,mw,sweep,key,idle,cpu,samehost,veth
                   (the machine's syscall cost and memcpy bandwidth are
                   always measured, at the start and at the end)
  -h, --help       this text
EOF
}

QUICK=0
OUT=$BENCH_DIR/out
REPS=""
BUILD=$REPO/build-bench
UROCE=""
INSTALL=1
VETH=1
UCX=1
ONLY=""
ALL_SECTIONS="floors qperf ucx mw sweep key idle cpu samehost veth"
while [[ $# -gt 0 ]]; do
	case $1 in
	--quick) QUICK=1 ;;
	--out) OUT=$2; shift ;;
	--out=*) OUT=${1#*=} ;;
	--reps) REPS=$2; shift ;;
	--reps=*) REPS=${1#*=} ;;
	--build) BUILD=$2; shift ;;
	--uroce) UROCE=$2; shift ;;
	--no-install) INSTALL=0 ;;
	--no-veth) VETH=0 ;;
	--no-ucx) UCX=0 ;;
	--only) ONLY=$2; shift ;;
	--only=*) ONLY=${1#*=} ;;
	-h | --help) usage; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
[[ -n $REPS ]] || REPS=$((QUICK ? 1 : 3))
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --reps wants a positive integer" >&2; exit 2; }

SECTIONS=$ALL_SECTIONS
if [[ -n $ONLY ]]; then
	SECTIONS=""
	for sec in $ALL_SECTIONS; do
		[[ ,$ONLY, == *,$sec,* ]] && SECTIONS+="$sec "
	done
	for sec in ${ONLY//,/ }; do
		[[ " $ALL_SECTIONS " == *" $sec "* ]] || { echo "run.sh: unknown section $sec" >&2; exit 2; }
	done
fi

mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
RAW=$OUT/raw
rm -rf "$RAW"
mkdir -p "$RAW"
PTS=$OUT/points.tsv
: >"$OUT/run.log"
printf 'tool\ttest\tvariant\tsize\trep\tmetric\tvalue\tstatus\tnote\n' >"$PTS"
T0=$SECONDS

# ---- the matrix ----------------------------------------------------------------

KEY_BW=65536 # the size of every bandwidth target
KEY_LAT=2    # the size of every latency target
if ((QUICK)); then
	# the key sizes (64 KiB, 2 B) come from the repetitions, not the sweep
	BW_SIZES=(2 1048576)
	LAT_SIZES=()
	UD_SIZES=()
	LAT_ITERS=1000
	LAT_STEADY=5000 # the key latency points: t_typical is the steady state
	IDLE_S=3
	PP_ITERS=5000
	PP_SECS=1
	PERF_DUR=1
	CPU_ITERS=8192 # 512 MiB at 64 KiB (the fixed part is subtracted: cpu_uroce)
	CPU_TIME=1
	Q8_SWEEP=0
else
	BW_SIZES=()
	for ((s = 2; s <= 1048576; s *= 2)); do BW_SIZES+=("$s"); done
	LAT_SIZES=()
	for ((s = 2; s <= 65536; s *= 2)); do LAT_SIZES+=("$s"); done
	UD_SIZES=(2 64 1024 4096)
	LAT_ITERS=3000
	LAT_STEADY=10000
	IDLE_S=10
	PP_ITERS=10000
	PP_SECS=3
	PERF_DUR=1
	CPU_ITERS=8192 # 512 MiB at 64 KiB
	CPU_TIME=3
	Q8_SWEEP=1
fi
LAT_BUDGET_US=1500000 # a latency run aims at ~1.5 s: see uroce_lat
LAT_SHORT=100         # the short-run rows (-n 100): the target idle before it
join() { local IFS=,; echo "$*"; }

# ---- logging, bookkeeping ------------------------------------------------------

log() { printf '[%4ds] %s\n' $((SECONDS - T0)) "$*" | tee -a "$OUT/run.log"; }

# record TOOL TEST VARIANT SIZE REP METRIC VALUE STATUS [NOTE]
record() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "${9-}" >>"$PTS"
}

# Background processes we started (each is a `timeout` leading its own
# process group); the trap ends what is left of them.
BG_PIDS=()
# A PID is ours while its parent is this shell: PIDs wrap quickly on a busy
# machine (pid_max 32768 here), and a PID bash has reaped may name a stranger.
is_ours() { [[ $(awk '{ sub(/^.*\) /, ""); print $2 }' "/proc/$1/stat" 2>/dev/null) == "$BASHPID" ]]; }
kill_tree() { # PID: TERM then KILL the process group PID leads (`timeout` leads one); echo nothing
	local pid=$1 i
	[[ -n $pid ]] || return 0
	if is_ours "$pid"; then
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
		for i in 1 2 3 4 5 6 7 8 9 10; do
			is_ours "$pid" || break
			[[ $(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
			sleep 0.1
		done
		if is_ours "$pid" && [[ $(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null) != Z ]]; then
			kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
		fi
	fi
	wait "$pid" 2>/dev/null
	return 0
}
NSA="" NSB=""
cleanup() {
	local pid
	for pid in "${BG_PIDS[@]}"; do kill_tree "$pid"; done
	BG_PIDS=()
	if [[ -n $NSA ]]; then ip netns del "$NSA" 2>/dev/null; fi
	if [[ -n $NSB ]]; then ip netns del "$NSB" 2>/dev/null; fi
	NSA="" NSB=""
}
TOOLS=""
trap 'cleanup; [[ -n $TOOLS ]] && rm -rf "$TOOLS"' EXIT
trap 'log "interrupted"; exit 130' INT TERM

# wait until TCP port PORT listens (in netns NS if given); TIMEOUT_S; give up
# early when the server PID (if given) has exited
wait_listen() {
	local port=$1 ns=$2 tmo=${3:-10} pid=${4-} i pre=()
	[[ -n $ns ]] && pre=(ip netns exec "$ns")
	for ((i = 0; i < tmo * 20; i++)); do
		if "${pre[@]}" ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
			return 0
		fi
		if [[ -n $pid ]] && { ! is_ours "$pid" ||
			[[ $(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null) == Z ]]; }; then
			return 1
		fi
		sleep 0.05
	done
	return 1
}
# the other side may need a moment to exit; then end it
reap() { # PID GRACE_S
	local pid=$1 grace=${2:-5} i
	for ((i = 0; i < grace * 10; i++)); do
		is_ours "$pid" || break
		[[ $(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
		sleep 0.1
	done
	kill_tree "$pid"
	local keep=() p
	for p in "${BG_PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
	BG_PIDS=("${keep[@]}")
}

PORT=$((20000 + RANDOM % 10000))
next_port() { # a TCP port below the ephemeral range that nothing listens on
	local tries
	for ((tries = 0; tries < 100; tries++)); do
		PORT=$((PORT + 1))
		((PORT > 32000)) && PORT=20000
		ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q . || return 0
	done
}

# ---- setup: tools, build -------------------------------------------------------

PY=/usr/bin/python3 # Debian's python, for python3-matplotlib
[[ -x $PY ]] || PY=$(command -v python3)

apt_install() { # best effort: PACKAGE...
	((INSTALL)) || return 1
	[[ $(id -u) -eq 0 ]] || return 1
	command -v apt-get >/dev/null || return 1
	log "installing $*"
	DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q --no-install-recommends "$@" \
		>>"$RAW/apt.log" 2>&1 && return 0
	DEBIAN_FRONTEND=noninteractive timeout 300 apt-get update -q >>"$RAW/apt.log" 2>&1
	DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q --no-install-recommends "$@" \
		>>"$RAW/apt.log" 2>&1
}

need=()
command -v ib_write_bw >/dev/null || need+=(perftest)
command -v qperf >/dev/null || need+=(qperf)
command -v cc >/dev/null || need+=(build-essential)
command -v cmake >/dev/null || need+=(cmake)
[[ -e /usr/include/infiniband/verbs.h ]] || need+=(libibverbs-dev)
command -v ibv_devinfo >/dev/null || need+=(ibverbs-utils)
command -v ss >/dev/null || need+=(iproute2)
[[ -x /usr/bin/time ]] || need+=(time)
"$PY" -c 'import matplotlib' 2>/dev/null || need+=(python3-matplotlib)
if ((UCX)) && ! command -v ucx_perftest >/dev/null; then need+=(ucx-utils); fi
if [[ ${#need[@]} -gt 0 ]]; then
	apt_install "${need[@]}" || log "could not install ${need[*]}: continuing without what is missing"
fi
for tool in ib_write_bw qperf cc ss; do
	command -v "$tool" >/dev/null || { log "FATAL: $tool is missing"; exit 1; }
done

if [[ -z $UROCE ]]; then
	log "building uroce (Release) in $BUILD"
	if cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$RAW/build.log" 2>&1 &&
		make -C "$BUILD" -j"$(nproc)" ibverbs rdmacm uroce-sysfs uroce-sysfs-tree uroce-stat >>"$RAW/build.log" 2>&1; then
		:
	elif [[ -e $BUILD/lib/libibverbs.so.1 ]]; then
		log "WARNING: the build failed (see raw/build.log); using the library built before in $BUILD"
	else
		log "FATAL: the build failed and there is no earlier library: see $RAW/build.log"
		tail -20 "$RAW/build.log"
		exit 1
	fi
	UROCE=$BUILD/bin/uroce
fi
[[ -x $UROCE ]] || { log "FATAL: $UROCE is not executable"; exit 1; }

TOOLS=$(mktemp -d /tmp/uroce-bench-tools.XXXXXX)
cc -O2 -Wall -o "$TOOLS/udp_pingpong" "$BENCH_DIR/udp_pingpong.c" 2>"$RAW/cc.log" &&
	cc -O2 -Wall -o "$TOOLS/memcpy_bw" "$BENCH_DIR/memcpy_bw.c" 2>>"$RAW/cc.log" &&
	cc -O2 -Wall -o "$TOOLS/syscall_cost" "$BENCH_DIR/syscall_cost.c" 2>>"$RAW/cc.log" ||
	{ log "FATAL: cannot build the C helpers: $(cat "$RAW/cc.log")"; exit 1; }

HAVE_UCX=0
if ((UCX)) && command -v ucx_perftest >/dev/null; then HAVE_UCX=1; fi

# The run's context: the machine is shared, so say how busy it was.
{
	echo "date: $(date -Is)"
	echo "kernel: $(uname -r)"
	echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo) x $(nproc)"
	echo "loadavg_start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "uroce_commit: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)$(
		[[ -n $(git -C "$REPO" status --porcelain -- src 2>/dev/null) ]] && echo ' (+ uncommitted changes in src/)')"
	lib=$(sed -n "s/^UROCE_LIB_DIR='\(.*\)'$/\1/p" "$UROCE" 2>/dev/null)/libibverbs.so.1
	echo "uroce_library: $lib, built $(date -Is -r "$lib" 2>/dev/null || echo '?')"
	echo "perftest: $(dpkg-query -W -f='${Version}' perftest 2>/dev/null)"
	echo "qperf: $(dpkg-query -W -f='${Version}' qperf 2>/dev/null)"
	echo "ucx: $( ((HAVE_UCX)) && dpkg-query -W -f='${Version}' ucx-utils 2>/dev/null || echo none)"
	echo "mode: $( ((QUICK)) && echo quick || echo full)"
	echo "reps: $REPS"
	echo "sections: $SECTIONS"
} >"$OUT/meta.txt"
top -bn1 | head -20 >"$RAW/top_start.txt" 2>/dev/null
"$UROCE" run ibv_devinfo -v -d uroce_lo >"$RAW/devinfo.txt" 2>&1
ATOMIC_NONE=0
grep -q 'atomic_cap:.*ATOMIC_NONE' "$RAW/devinfo.txt" && ATOMIC_NONE=1
log "uroce: $UROCE; $(grep -E 'uroce_commit|loadavg' "$OUT/meta.txt" | tr '\n' ' ')"

# ---- uroce through perftest --------------------------------------------------------

# Context of the next pt_pair: loopback by default, over UDP (LO_ENV: the
# same-host wire off); the veth part changes it, and a same-host section may
# set PT_ENV=() to take the shared-memory wire.
LO_ENV=(UROCE_SHM=0)
PT_NS_SRV="" PT_NS_CLI="" PT_ENV=("${LO_ENV[@]}") PT_DEV=uroce_lo PT_ADDR=127.0.0.1 PT_CPU=0

# pt_pair LABEL TMO PERFTEST_ARGS...: server and client; 0 if the client succeeded.
# Leaves RAW/LABEL.srv and RAW/LABEL.cli (and .time files when PT_CPU=1).
pt_pair() {
	local label=$1 tmo=$2
	shift 2
	next_port
	local port=$PORT base=$RAW/$label pre_s=() pre_c=() tw_s=() tw_c=() spid crc
	[[ -n $PT_NS_SRV ]] && pre_s=(ip netns exec "$PT_NS_SRV")
	[[ -n $PT_NS_CLI ]] && pre_c=(ip netns exec "$PT_NS_CLI")
	pre_s+=(env "${PT_ENV[@]}")
	pre_c+=(env "${PT_ENV[@]}")
	if ((PT_CPU)); then
		tw_s=(/usr/bin/time -f '%U %S %e' -o "$base.srv.time")
		tw_c=(/usr/bin/time -f '%U %S %e' -o "$base.cli.time")
	fi
	echo "${pre_s[*]} timeout $tmo ${tw_s[*]} $UROCE run -- $* -d $PT_DEV -x 0 -p $port -F" >"$base.cmd"
	"${pre_s[@]}" timeout -k 3 "$tmo" "${tw_s[@]}" "$UROCE" run -- "$@" -d "$PT_DEV" -x 0 -p "$port" -F \
		</dev/null >"$base.srv" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	if ! wait_listen "$port" "$PT_NS_SRV" 10 "$spid"; then
		echo "uroce-bench: the server did not listen on $port (exited, or not within 10 s)" >"$base.cli"
		reap "$spid" 0
		return 1
	fi
	"${pre_c[@]}" timeout -k 3 "$tmo" "${tw_c[@]}" "$UROCE" run -- "$@" -d "$PT_DEV" -x 0 -p "$port" -F "$PT_ADDR" \
		</dev/null >"$base.cli" 2>&1
	crc=$?
	if ((crc == 124 || crc == 137)); then
		echo "uroce-bench: client timed out after $tmo s" >>"$base.cli"
	elif ((crc != 0)); then
		echo "uroce-bench: client exit status $crc" >>"$base.cli"
	fi
	reap "$spid" 5
	return $crc
}

# The first result row after perftest's "#bytes" header.
pt_row() { awk 'f && $1 ~ /^[0-9]+$/ && NF >= 5 { print; exit } /#bytes/ { f = 1 }' "$1" 2>/dev/null; }

# Why a run produced no number: "n/a" when uroce said it does not support it.
pt_status() { # LABEL OPTIONAL(0/1)
	local f=$RAW/$1
	if (($2)) && grep -qiE 'Unable to create QP|Failed to create QP|not supported|Couldn.t create IB resources|EOPNOTSUPP|Operation not supported' "$f.cli" "$f.srv" 2>/dev/null; then
		echo n/a
	elif (($2)) && [[ $3 == atomic && $ATOMIC_NONE == 1 ]]; then
		echo n/a
	else
		echo fail
	fi
}

# uroce_bw TEST SIZE REP VARIANT [EXTRA perftest args]
uroce_bw() {
	local test=$1 size=$2 rep=$3 variant=$4
	shift 4
	local label="uroce_${test}_${variant}_${size}_r${rep}" row opt=0
	[[ $variant == *ud* ]] && opt=1
	pt_pair "$label" $((PERF_DUR + 30)) "$test" -s "$size" -D "$PERF_DUR" "$@"
	row=$(pt_row "$RAW/$label.cli")
	if [[ -n $row ]]; then
		# perftest's MB/sec is MiB/s (format_factor 0x100000): report 10^6 B/s
		record uroce "$test" "$variant" "$size" "$rep" bw_MBps \
			"$(awk '{ printf "%.6g", $4 * 1.048576 }' <<<"$row")" ok
	else
		record uroce "$test" "$variant" "$size" "$rep" bw_MBps "" "$(pt_status "$label" $opt bw)" "raw/$label.cli"
	fi
}

# uroce_lat TEST SIZE REP VARIANT [EXTRA perftest args]
# perftest's latency tests take an iteration count (-D reports only an average),
# and one iteration can cost 10 us or 20 ms: each test's count adapts so that a
# run takes about LAT_BUDGET_US, from the average of its previous run (starting
# at 1000, at most LAT_ITERS, at least 1000: fewer iterations measure the
# target's wake-up more than its steady state; the short-run rows do that
# on purpose, with -n LAT_SHORT).
declare -A LATN=()
uroce_lat() {
	local test=$1 size=$2 rep=$3 variant=$4
	shift 4
	local label="uroce_${test}_${variant}_${size}_r${rep}" row opt=0 kind=lat sz=(-s "$size")
	local key="$test/$variant" n avg
	[[ $variant == *ud* ]] && opt=1
	if [[ $test == ib_atomic_lat ]]; then opt=1 kind=atomic sz=(); fi
	n=${LATN[$key]:-1000}
	# -n N as the first extra argument fixes the count (key and short-run rows)
	if [[ ${1-} == -n ]]; then n=$2; shift 2; fi
	pt_pair "$label" 60 "$test" "${sz[@]}" -n "$n" "$@"
	row=$(pt_row "$RAW/$label.cli")
	if [[ -n $row ]]; then
		avg=$(awk '{ print $6 }' <<<"$row")
		LATN[$key]=$(awk -v a="$avg" -v b="$LAT_BUDGET_US" -v max="$LAT_ITERS" \
			'BEGIN { n = (a > 0) ? int(b / (2 * a)) : max; if (n > max) n = max; if (n < 1000) n = 1000; print n }')
		# columns: bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9
		record uroce "$test" "$variant" "$size" "$rep" lat_us "$(awk '{ print $5 }' <<<"$row")" ok
		record uroce "$test" "$variant" "$size" "$rep" p99_us "$(awk '{ print $8 }' <<<"$row")" ok
		record uroce "$test" "$variant" "$size" "$rep" avg_us "$(awk '{ print $6 }' <<<"$row")" ok
	else
		record uroce "$test" "$variant" "$size" "$rep" lat_us "" "$(pt_status "$label" $opt $kind)" "raw/$label.cli"
	fi
}

# ---- peers -------------------------------------------------------------------------

# qperf: one server in the background per section.
QPERF_PID="" QPERF_PORT="" QPERF_NS=""
qperf_start() { # [NETNS]
	local pre=()
	QPERF_NS=${1-}
	[[ -n ${1-} ]] && pre=(ip netns exec "$1")
	next_port
	QPERF_PORT=$PORT
	"${pre[@]}" timeout -k 3 3600 qperf -lp "$QPERF_PORT" </dev/null >"$RAW/qperf_server_$QPERF_PORT.log" 2>&1 &
	QPERF_PID=$!
	BG_PIDS+=("$QPERF_PID")
	wait_listen "$QPERF_PORT" "${1-}" 10 "$QPERF_PID"
}
qperf_stop() {
	[[ -n $QPERF_PID ]] || return 0
	if ! is_ours "$QPERF_PID"; then
		wait "$QPERF_PID" 2>/dev/null
		log "note: the qperf server had exited by itself (status $?)"
	fi
	reap "$QPERF_PID" 0
	QPERF_PID=""
}
# (re)start the server if it is gone (seen once on a loaded machine)
qperf_ensure() {
	if [[ -z $QPERF_PID ]] || ! is_ours "$QPERF_PID"; then
		qperf_stop
		qperf_start "$QPERF_NS"
	fi
}

# qperf_run LABEL TIME SIZE TEST [HOST [NETNS]]: sets QV to the value (MB/s or us) or ""
# (not run in $(...): it may restart the server, which must stay this shell's child)
QV=""
qperf_run() {
	local label=$1 t=$2 size=$3 test=$4 host=${5:-127.0.0.1} pre=()
	[[ -n ${6-} ]] && pre=(ip netns exec "$6")
	qperf_ensure
	"${pre[@]}" timeout -k 3 $((t + 20)) qperf "$host" -lp "$QPERF_PORT" -t "$t" -m "$size" -v "$test" \
		</dev/null >"$RAW/$label" 2>&1
	QV=$(awk '
		$1 == "bw" && $2 == "=" {
			u = $4; v = $3
			f = (u ~ /^GB/) ? 1e3 : (u ~ /^MB/) ? 1 : (u ~ /^KB/) ? 1e-3 : (u ~ /^B/) ? 1e-6 : 0
			if (f && v > 0) printf "%.6g\n", v * f
		}
		$1 == "latency" && $2 == "=" {
			u = $4; v = $3
			f = (u == "ns") ? 1e-3 : (u == "us") ? 1 : (u == "ms") ? 1e3 : (u == "sec") ? 1e6 : 0
			if (f && v > 0) printf "%.3f\n", v * f
		}' "$RAW/$label")
}
qperf_point() { # TEST SIZE REP METRIC TIME
	local v
	qperf_run "qperf_$1_$2_r$3" "$5" "$2" "$1"
	v=$QV
	if [[ -n $v ]]; then
		record qperf "$1" lo "$2" "$3" "$4" "$v" ok
	elif [[ $1 == udp_lat && $2 -gt 65507 ]]; then
		record qperf "$1" lo "$2" "$3" "$4" "" n/a "larger than a UDP datagram"
	else
		{
			echo "uroce-bench: qperf server $QPERF_PID (port $QPERF_PORT):"
			ps -o pid,ppid,stat,etime,args -p "$QPERF_PID" --ppid "$QPERF_PID" 2>&1
			local c
			c=$(child_of "$QPERF_PID")
			[[ -n $c ]] && ps -o pid,ppid,stat,etime,args --ppid "$c" 2>&1
			ss -tanp 2>/dev/null | grep -E ":$QPERF_PORT\b"
		} >>"$RAW/qperf_$1_$2_r$3"
		record qperf "$1" lo "$2" "$3" "$4" "" fail "raw/qperf_$1_$2_r$3"
	fi
}

# busy-poll UDP ping-pong: SIZES(csv) REP ITERS
pingpong() {
	local sizes=$1 rep=$2 iters=$3 label="udp_pingpong_r$2_$(tr , _ <<<"$1" | cut -c1-40)" spid
	next_port
	timeout -k 3 120 "$TOOLS/udp_pingpong" server -b 127.0.0.1 -p "$PORT" -i 30 </dev/null >"$RAW/$label.srv" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	sleep 0.1
	timeout -k 3 100 "$TOOLS/udp_pingpong" client -H 127.0.0.1 -p "$PORT" -s "$sizes" -n "$iters" -w 1000 -T "$PP_SECS" \
		</dev/null >"$RAW/$label.cli" 2>&1
	reap "$spid" 2
	local s line
	for s in ${sizes//,/ }; do
		line=$(grep "^size=$s " "$RAW/$label.cli")
		if [[ $line == *median_us=* ]]; then
			record udp_pingpong busy_poll lo "$s" "$rep" lat_us "$(sed 's/.*median_us=\([^ ]*\).*/\1/' <<<"$line")" ok
			record udp_pingpong busy_poll lo "$s" "$rep" p99_us "$(sed 's/.*p99_us=\([^ ]*\).*/\1/' <<<"$line")" ok
			record udp_pingpong busy_poll lo "$s" "$rep" avg_us "$(sed 's/.*avg_us=\([^ ]*\).*/\1/' <<<"$line")" ok
		elif [[ $line == *n/a* ]]; then
			record udp_pingpong busy_poll lo "$s" "$rep" lat_us "" n/a "larger than a UDP datagram"
		else
			record udp_pingpong busy_poll lo "$s" "$rep" lat_us "" fail "raw/$label.cli"
		fi
	done
}

# ucx_perftest over UCX's tcp transport, or (VARIANT rc_verbs) over uroce's
# rc_verbs through `uroce run`: TEST SIZE REP METRIC ITERS [VARIANT]
ucx_point() {
	local test=$1 size=$2 rep=$3 metric=$4 iters=$5 variant=${6:-tcp}
	local label="ucx_$1_$2_r$3" spid row v run=()
	next_port
	local envs=(UCX_TLS=tcp UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n)
	if [[ $variant == rc_verbs ]]; then
		label="ucx_rc_$1_$2_r$3"
		envs=(UCX_TLS=rc UCX_NET_DEVICES=uroce_lo:1 UCX_WARN_UNUSED_ENV_VARS=n) # the default path: same-host wire
		run=("$UROCE" run)
	elif [[ $variant == rc_verbs_udp ]]; then # uroce's UDP path, not the same-host wire
		label="ucx_rc_udp_$1_$2_r$3"
		envs=(UCX_TLS=rc UCX_NET_DEVICES=uroce_lo:1 UCX_WARN_UNUSED_ENV_VARS=n UROCE_SHM=0)
		run=("$UROCE" run)
	fi
	env "${envs[@]}" timeout -k 3 90 "${run[@]}" ucx_perftest -p "$PORT" </dev/null >"$RAW/$label.srv" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	if wait_listen "$PORT" "" 10 "$spid"; then
		env "${envs[@]}" timeout -k 3 90 "${run[@]}" ucx_perftest 127.0.0.1 -p "$PORT" -t "$test" -s "$size" \
			-n "$iters" -w $((iters / 10 + 10)) -f </dev/null >"$RAW/$label.cli" 2>&1
	fi
	reap "$spid" 3
	# final row: iters, overhead 50%/avg/overall (us), bw avg/overall (MB/s), msg rate avg/overall
	row=$(awk 'NF == 8 && $1 ~ /^[0-9]+$/ { r = $0 } END { print r }' "$RAW/$label.cli" 2>/dev/null)
	if [[ -n $row ]]; then
		if [[ $metric == bw_MBps ]]; then
			# ucx_perftest's MB/s is MiB/s: report 10^6 B/s
			v=$(awk '{ printf "%.6g", $6 * 1.048576 }' <<<"$row")
		else
			v=$(awk '{ print $2 }' <<<"$row") # the median one-way latency
		fi
		record ucx "$test" "$variant" "$size" "$rep" "$metric" "$v" ok
	else
		record ucx "$test" "$variant" "$size" "$rep" "$metric" "" fail "raw/$label.cli"
	fi
}

# Open MPI (pml ucx) ping-pong, bench/mpi_pingpong.c: VARIANT (uroce: UCX
# rc_verbs on uroce_lo; tcp: UCX tcp on lo) SIZE REP ITERS. Records lat_us
# and bw_MBps.
MPI_PP=""
mpi_point() {
	local variant=$1 size=$2 rep=$3 iters=$4 label="mpi_pingpong_$1_$2_r$3" line
	local ucx=(-x UCX_TLS=rc -x UCX_NET_DEVICES=uroce_lo:1)
	[[ $variant == tcp ]] && ucx=(-x UCX_TLS=tcp -x UCX_NET_DEVICES=lo
		--mca opal_common_ucx_tls any --mca opal_common_ucx_devices any)
	local shm=()
	[[ $variant == uroce_udp ]] && shm=(env UROCE_SHM=0) # uroce's UDP path
	local root=()
	[[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)
	timeout -k 3 120 "${shm[@]}" "$UROCE" run mpirun.openmpi "${root[@]}" -np 2 --mca pml ucx --mca btl self \
		"${ucx[@]}" -x UCX_WARN_UNUSED_ENV_VARS=n "$MPI_PP" "$size" "$iters" </dev/null >"$RAW/$label.out" 2>&1
	line=$(grep -m1 '^size=' "$RAW/$label.out")
	if [[ -n $line ]]; then
		record mpi pingpong "$variant" "$size" "$rep" lat_us "$(sed 's/.*lat_us=\([^ ]*\).*/\1/' <<<"$line")" ok
		record mpi pingpong "$variant" "$size" "$rep" bw_MBps "$(sed 's/.*bw_MBps=\([^ ]*\).*/\1/' <<<"$line")" ok
	else
		record mpi pingpong "$variant" "$size" "$rep" lat_us "" fail "raw/$label.out"
		record mpi pingpong "$variant" "$size" "$rep" bw_MBps "" fail "raw/$label.out"
	fi
}

# ---- CPU per GB ----------------------------------------------------------------------

clk_tck=$(getconf CLK_TCK)
proc_cpu_s() { # PID -> utime+stime+cutime+cstime in seconds
	awk -v t="$clk_tck" '{ sub(/^.*\) /, ""); printf "%.3f\n", ($12 + $13 + $14 + $15) / t }' "/proc/$1/stat" 2>/dev/null
}
child_of() { cat "/proc/$1/task/$1/children" 2>/dev/null | awk '{ print $1 }'; }

# uroce's CPU per GB is that of the transfer: perftest spends about 0.25 s of
# CPU before it (its CPU-frequency estimate, the QP exchange) and, at the end,
# a peak-bandwidth search over all iteration time stamps that grows with -n
# (0.5 s at -n 20000); --noPeak drops the search, and a run of CPU_FIX_ITERS
# iterations just before measures the fixed part, which is subtracted.
# (At the quick run's 128 MiB the fixed part alone was 1.9 s/GB: most of
# the 2.91 s/GB of the 16:27 table.)  qperf's setup costs milliseconds.
CPU_FIX_ITERS=64
cpu_run() { # LABEL ITERS -> "server+client CPU seconds", or nothing
	local label=$1 s c
	PT_CPU=1
	pt_pair "$label" 120 ib_write_bw -s "$KEY_BW" -n "$2" --noPeak
	PT_CPU=0
	s=$(awk 'NF == 3 { print $1 + $2 }' "$RAW/$label.srv.time" 2>/dev/null)
	c=$(awk 'NF == 3 { print $1 + $2 }' "$RAW/$label.cli.time" 2>/dev/null)
	[[ -n $s && -n $c && -n $(pt_row "$RAW/$label.cli") ]] && awk -v s="$s" -v c="$c" 'BEGIN { print s + c }'
}

cpu_uroce() { # REP
	local rep=$1 label="uroce_cpu_write_bw_${KEY_BW}_r$1" fix all bytes
	fix=$(cpu_run "${label}_fixed" "$CPU_FIX_ITERS")
	all=$(cpu_run "$label" "$CPU_ITERS")
	if [[ -n $fix && -n $all ]]; then
		bytes=$(((CPU_ITERS - CPU_FIX_ITERS) * KEY_BW))
		record uroce cpu_per_GB write_bw "$KEY_BW" "$rep" cpu_s_per_GB \
			"$(awk -v a="$all" -v f="$fix" -v b="$bytes" 'BEGIN { v = (a - f) / (b / 1e9); printf "%.3f", v < 0 ? 0 : v }')" ok \
			"server+client ${all}s for $CPU_ITERS x $KEY_BW B, ${fix}s for $CPU_FIX_ITERS (subtracted)"
	else
		record uroce cpu_per_GB write_bw "$KEY_BW" "$rep" cpu_s_per_GB "" fail "raw/$label.cli"
	fi
}

cpu_tcp() { # REP (needs the qperf server running on loopback)
	local rep=$1 label="qperf_cpu_tcp_bw_${KEY_BW}_r$1" qp before after c bw
	qperf_ensure
	qp=$(child_of "$QPERF_PID")
	before=$(proc_cpu_s "$qp")
	/usr/bin/time -f '%U %S %e' -o "$RAW/$label.time" \
		timeout -k 3 $((CPU_TIME + 20)) qperf 127.0.0.1 -lp "$QPERF_PORT" -t "$CPU_TIME" -m "$KEY_BW" -v tcp_bw \
		</dev/null >"$RAW/$label" 2>&1
	sleep 0.3 # the server reaps its per-test child
	after=$(proc_cpu_s "$qp")
	c=$(awk 'NF == 3 { print $1 + $2 }' "$RAW/$label.time" 2>/dev/null)
	bw=$(awk '$1 == "bw" { u = $4; v = $3; f = (u ~ /^GB/) ? 1e3 : (u ~ /^MB/) ? 1 : (u ~ /^KB/) ? 1e-3 : 0; if (f) printf "%.2f", v * f }' "$RAW/$label")
	if [[ -n $before && -n $after && -n $c && -n $bw ]]; then
		record qperf cpu_per_GB tcp_bw "$KEY_BW" "$rep" cpu_s_per_GB \
			"$(awk -v s="$(awk -v a="$after" -v b="$before" 'BEGIN { print a - b }')" -v c="$c" -v bw="$bw" -v t="$CPU_TIME" \
				'BEGIN { printf "%.3f", (s + c) / (bw * 1e6 * t / 1e9) }')" ok \
			"server $(awk -v a="$after" -v b="$before" 'BEGIN { print a - b }')s + client ${c}s for ${bw} MB/s x ${CPU_TIME}s"
	else
		record qperf cpu_per_GB tcp_bw "$KEY_BW" "$rep" cpu_s_per_GB "" fail "raw/$label"
	fi
}

# ---- network namespaces joined by a veth pair ------------------------------------------

# VETH_MTU (environment, default 1500 as a container's veth has): the
# pair's MTU; uroce's RoCE MTU follows it (1500: 1024, 9000: 4096).
veth_setup() {
	[[ $(id -u) -eq 0 ]] || { log "veth: not root, skipped"; return 1; }
	VETH_MTU=${VETH_MTU:-1500}
	local x=$(($$ % 200 + 20))
	NSA=urbenchA$$ NSB=urbenchB$$
	local va=ubv$$a vb=ubv$$b
	VIF=urbv0
	VETH_A_IP=10.199.$x.1 VETH_B_IP=10.199.$x.2
	{
		ip netns add "$NSA" && ip netns add "$NSB" &&
			ip link add "$va" type veth peer name "$vb" &&
			ip link set "$va" netns "$NSA" && ip link set "$vb" netns "$NSB" &&
			ip -n "$NSA" link set "$va" name "$VIF" && ip -n "$NSB" link set "$vb" name "$VIF" &&
			ip -n "$NSA" addr add "$VETH_A_IP/24" dev "$VIF" &&
			ip -n "$NSB" addr add "$VETH_B_IP/24" dev "$VIF" &&
			ip -n "$NSA" link set lo up && ip -n "$NSB" link set lo up &&
			ip -n "$NSA" link set "$VIF" mtu "$VETH_MTU" up && ip -n "$NSB" link set "$VIF" mtu "$VETH_MTU" up
	} >"$RAW/veth_setup.log" 2>&1 || { log "veth: setup failed (raw/veth_setup.log)"; return 1; }
	# the link works if a busy-poll UDP ping-pong crosses it (its latency is worth having too)
	local spid line
	next_port
	ip netns exec "$NSA" timeout -k 3 30 "$TOOLS/udp_pingpong" server -b "$VETH_A_IP" -p "$PORT" -i 20 \
		</dev/null >"$RAW/veth_udp_pingpong.srv" 2>&1 &
	spid=$!
	BG_PIDS+=("$spid")
	sleep 0.2
	ip netns exec "$NSB" timeout -k 3 20 "$TOOLS/udp_pingpong" client -H "$VETH_A_IP" -p "$PORT" -s "$KEY_LAT" \
		-n "$PP_ITERS" -w 1000 -T "$PP_SECS" </dev/null >"$RAW/veth_udp_pingpong.cli" 2>&1
	reap "$spid" 2
	line=$(grep "^size=$KEY_LAT .*median_us=" "$RAW/veth_udp_pingpong.cli")
	if [[ -z $line ]]; then
		log "veth: no UDP traffic across the link (raw/veth_udp_pingpong.cli)"
		return 1
	fi
	record udp_pingpong busy_poll veth "$KEY_LAT" 1 lat_us "$(sed 's/.*median_us=\([^ ]*\).*/\1/' <<<"$line")" ok
	ip -n "$NSA" link show "$VIF" >>"$RAW/veth_setup.log" 2>&1
	return 0
}

# ===================================================================================
# The sections, in the order they run (--only picks some).
# ===================================================================================

# The kind of machine a table comes from (always measured, at the start and at
# the end): a system call's cost (getppid, an empty recv, sched_yield) and
# memcpy of 64 KiB in cache and from DRAM, with the load average. Rep 1 is
# the start, rep 2 the end.
sec_machine() { # REP
	local rep=$1 line k v
	timeout -k 3 60 "$TOOLS/syscall_cost" >"$RAW/syscall_cost_r$rep.out" 2>&1
	line=$(head -1 "$RAW/syscall_cost_r$rep.out")
	for k in getppid_ns recv_eagain_ns sched_yield_ns; do
		v=$(sed -n "s/.*$k=\([^ ]*\).*/\1/p" <<<"$line")
		if [[ -n $v ]]; then
			record machine syscall "${k%_ns}" 0 "$rep" ns "$v" ok
		else
			record machine syscall "${k%_ns}" 0 "$rep" ns "" fail "raw/syscall_cost_r$rep.out"
		fi
	done
	timeout -k 3 60 "$TOOLS/memcpy_bw" -t 0.2 "$KEY_BW" >"$RAW/memcpy_machine_r$rep.out" 2>&1
	line=$(grep "^size=$KEY_BW " "$RAW/memcpy_machine_r$rep.out")
	for k in hot stream; do
		v=$(sed -n "s/.*${k}_MBps=\([^ ]*\).*/\1/p" <<<"$line")
		if [[ -n $v ]]; then
			record machine memcpy "$k" "$KEY_BW" "$rep" bw_MBps "$v" ok
		else
			record machine memcpy "$k" "$KEY_BW" "$rep" bw_MBps "" fail "raw/memcpy_machine_r$rep.out"
		fi
	done
	record machine loadavg 1min 0 "$rep" load "$(cut -d' ' -f1 /proc/loadavg)" ok
	log "machine: $line; $(cat "$RAW/syscall_cost_r$rep.out"); load $(cut -d' ' -f1-3 /proc/loadavg)"
}

sec_floors() {
	log "floors: memcpy, busy-poll UDP ping-pong"
	local s line
	MC_SIZES=($(printf '%s\n' "${BW_SIZES[@]}" "$KEY_BW" | sort -nu))
	PP_SIZES=($(printf '%s\n' "${LAT_SIZES[@]}" "$KEY_LAT" | sort -nu))
	timeout -k 3 120 "$TOOLS/memcpy_bw" -t 0.2 "$(join "${MC_SIZES[@]}")" >"$RAW/memcpy_bw.out" 2>&1
	for s in "${MC_SIZES[@]}"; do
		line=$(grep "^size=$s " "$RAW/memcpy_bw.out")
		if [[ -n $line ]]; then
			record memcpy memcpy hot "$s" 1 bw_MBps "$(sed 's/.*hot_MBps=\([^ ]*\).*/\1/' <<<"$line")" ok
			record memcpy memcpy stream "$s" 1 bw_MBps "$(sed 's/.*stream_MBps=\([^ ]*\).*/\1/' <<<"$line")" ok
		else
			record memcpy memcpy hot "$s" 1 bw_MBps "" fail raw/memcpy_bw.out
		fi
	done
	pingpong "$(join "${PP_SIZES[@]}")" 0 "$PP_ITERS"
}

sec_qperf() {
	log "qperf on loopback: tcp_bw, tcp_lat, udp_lat"
	local s
	if qperf_start; then
		for s in "${BW_SIZES[@]}"; do qperf_point tcp_bw "$s" 0 bw_MBps "$PERF_DUR"; done
		for s in "${LAT_SIZES[@]}"; do qperf_point tcp_lat "$s" 0 lat_us 1; done
		for s in "${LAT_SIZES[@]}"; do qperf_point udp_lat "$s" 0 lat_us 1; done
	else
		log "qperf server did not start"
		for s in "${BW_SIZES[@]}"; do record qperf tcp_bw lo "$s" 0 bw_MBps "" fail "qperf server"; done
	fi
	qperf_stop
}

sec_ucx() {
	local s n
	if ((!HAVE_UCX)); then
		log "ucx_perftest not installed: UCX skipped"
		record ucx tag_bw tcp "$KEY_BW" 0 bw_MBps "" n/a "ucx_perftest not installed"
		return
	fi
	log "ucx_perftest over UCX tcp: tag_bw, tag_lat"
	if ((QUICK)); then
		ucx_point tag_bw "$KEY_BW" 0 bw_MBps 2048
		ucx_point tag_lat "$KEY_LAT" 0 lat_us 1000
		return
	fi
	for s in "${BW_SIZES[@]}"; do
		n=$((67108864 / s)) # 64 MiB a point
		((n > 50000)) && n=50000
		((n < 100)) && n=100
		ucx_point tag_bw "$s" 0 bw_MBps "$n"
	done
	# every other size, 1000 round trips: ucx_perftest has no time limit, and
	# on a loaded machine a round trip can average a millisecond
	for ((s = 2; s <= 65536; s *= 4)); do ucx_point tag_lat "$s" 0 lat_us 1000; done
}

# Middleware (issue 13): UCX over uroce's rc_verbs against UCX over TCP, and
# Open MPI's ping-pong over each, interleaved rep by rep; ib_send_lat 8 B as
# the raw verbs latency UCX is measured against. Loopback, so uroce takes its
# same-host wire; the *_udp variants repeat the latency points and MPI over
# uroce's UDP path (UROCE_SHM=0).
sec_mw() {
	local r
	if ((!HAVE_UCX)) || ! command -v mpicc.openmpi >/dev/null || ! command -v mpirun.openmpi >/dev/null; then
		log "middleware: ucx_perftest or Open MPI (mpicc.openmpi, libopenmpi-dev) missing: skipped"
		record ucx tag_lat rc_verbs 8 1 lat_us "" n/a "ucx-utils or Open MPI not installed"
		return
	fi
	MPI_PP=$OUT/mpi_pingpong
	mpicc.openmpi -O2 -o "$MPI_PP" "$BENCH_DIR/mpi_pingpong.c" >"$RAW/mpicc.log" 2>&1 ||
		log "middleware: mpicc failed (raw/mpicc.log)"
	log "middleware: UCX rc_verbs (uroce) vs UCX tcp, Open MPI ping-pong uroce vs tcp, $REPS reps"
	for ((r = 1; r <= REPS; r++)); do
		log "  rep $r/$REPS"
		ucx_point tag_lat 8 "$r" lat_us 10000 rc_verbs
		ucx_point tag_lat 8 "$r" lat_us 10000 tcp
		PT_ENV=() # on the same path as UCX rc_verbs above: the same-host wire
		uroce_lat ib_send_lat 8 "$r" rc
		PT_ENV=("${LO_ENV[@]}")
		ucx_point tag_bw 1048576 "$r" bw_MBps 1000 rc_verbs
		ucx_point tag_bw 1048576 "$r" bw_MBps 1000 tcp
		mpi_point uroce 8 "$r" 5000
		mpi_point tcp 8 "$r" 5000
		mpi_point uroce 1048576 "$r" 300
		mpi_point tcp 1048576 "$r" 300
		# the same over uroce's UDP path (UROCE_SHM=0): what two hosts get
		ucx_point tag_lat 8 "$r" lat_us 10000 rc_verbs_udp
		# a one-sided READ whose target polls in bursts (its barrier loop)
		ucx_point ucp_get 8 "$r" lat_us 2000 rc_verbs
		ucx_point ucp_get 8 "$r" lat_us 2000 rc_verbs_udp
		ucx_point ucp_get 8 "$r" lat_us 2000 tcp
		mpi_point uroce_udp 8 "$r" 5000
		mpi_point uroce_udp 1048576 "$r" 300
	done
}

sec_sweep() {
	local s
	log "uroce sweep: ib_write_bw, ib_send_bw, ib_read_bw$( ((Q8_SWEEP)) && echo ', ib_write_bw -q 8') (${#BW_SIZES[@]} sizes, -D $PERF_DUR)"
	for s in "${BW_SIZES[@]}"; do
		uroce_bw ib_write_bw "$s" 0 rc
		uroce_bw ib_send_bw "$s" 0 rc
		uroce_bw ib_read_bw "$s" 0 rc
		# 8 QPs at 2 B and every other size from 4 B to 1 MiB
		((Q8_SWEEP)) && [[ " 2 4 16 64 256 1024 4096 16384 65536 262144 1048576 " == *" $s "* ]] &&
			uroce_bw ib_write_bw "$s" 0 rc_q8 -q 8
	done
	for s in "${UD_SIZES[@]}"; do uroce_bw ib_send_bw "$s" 0 ud -c UD; done

	((${#LAT_SIZES[@]})) &&
		log "uroce sweep: latency (${#LAT_SIZES[@]} sizes, iterations adapted to ~$((LAT_BUDGET_US / 1000)) ms a run)"
	for s in "${LAT_SIZES[@]}"; do
		uroce_lat ib_send_lat "$s" 0 rc
		uroce_lat ib_write_lat "$s" 0 rc
		uroce_lat ib_read_lat "$s" 0 rc
	done
	for s in "${UD_SIZES[@]}"; do uroce_lat ib_send_lat "$s" 0 ud -c UD; done
	((QUICK)) || uroce_lat ib_atomic_lat 8 0 rc

	# the same-host wire (shared memory, the default between two processes
	# of one host) beside the UDP path above: variant "shm", both in the plot
	local env0=("${PT_ENV[@]}")
	PT_ENV=()
	log "uroce sweep over the same-host wire: ib_write_bw, ib_send_lat"
	for s in "${BW_SIZES[@]}"; do uroce_bw ib_write_bw "$s" 0 shm; done
	for s in "${LAT_SIZES[@]}"; do uroce_lat ib_send_lat "$s" 0 shm; done
	PT_ENV=("${env0[@]}")
}

# The latency targets of one path: REP VARIANT SHORT_VARIANT. The four tests
# at a steady-state count, then READ and atomic as short runs, each of which
# starts against a fresh target that was idle before it.
lat_set() {
	local r=$1 v=$2 short=$3
	uroce_lat ib_send_lat "$KEY_LAT" "$r" "$v" -n "$LAT_STEADY"
	uroce_lat ib_write_lat "$KEY_LAT" "$r" "$v" -n "$LAT_STEADY"
	uroce_lat ib_read_lat "$KEY_LAT" "$r" "$v" -n "$LAT_STEADY"
	uroce_lat ib_atomic_lat 8 "$r" "$v" -n "$LAT_STEADY"
	uroce_lat ib_read_lat "$KEY_LAT" "$r" "$short" -n "$LAT_SHORT"
	uroce_lat ib_atomic_lat 8 "$r" "$short" -n "$LAT_SHORT"
}

sec_key() {
	local r
	log "key points, $REPS reps (interleaved so every rep sees the same machine)"
	qperf_start || log "qperf server did not start"
	for ((r = 1; r <= REPS; r++)); do
		log "  rep $r/$REPS"
		uroce_bw ib_write_bw "$KEY_BW" "$r" rc
		qperf_point tcp_bw "$KEY_BW" "$r" bw_MBps "$PERF_DUR"
		uroce_bw ib_send_bw "$KEY_BW" "$r" rc
		uroce_bw ib_write_bw "$KEY_BW" "$r" rc_q8 -q 8
		uroce_bw ib_write_bw "$KEY_BW" "$r" rc_q1024 -q 1024 -D 3 # setting up 1,024 QPs takes a while
		pingpong "$KEY_LAT" "$r" "$PP_ITERS"
		lat_set "$r" rc rc_n100
		uroce_lat ib_send_lat "$KEY_LAT" "$r" rc_n100 -n "$LAT_SHORT"
		uroce_lat ib_send_lat "$KEY_LAT" "$r" ud -c UD
		uroce_bw ib_send_bw "$KEY_LAT" "$r" ud -c UD
		qperf_point tcp_lat "$KEY_LAT" "$r" lat_us 1
		qperf_point udp_lat "$KEY_LAT" "$r" lat_us 1
	done
	qperf_stop
}

# Idle: a process with an open RC QP and no traffic (ibv_rc_pingpong's server,
# which creates its QP and then waits for a client that never comes): CPU
# time over IDLE_S seconds from /proc/PID/stat, as a share of one core. The
# target: under 1%.
sec_idle() {
	local r label pid c0 c1
	log "idle: ibv_rc_pingpong server with its QP, no client, ${IDLE_S} s, $REPS reps"
	if ! command -v ibv_rc_pingpong >/dev/null; then
		record uroce idle rc_pingpong 0 1 cpu_pct "" n/a "ibv_rc_pingpong (ibverbs-utils) missing"
		return
	fi
	for ((r = 1; r <= REPS; r++)); do
		label=uroce_idle_r$r
		next_port
		env "${LO_ENV[@]}" timeout -k 3 $((IDLE_S + 30)) "$UROCE" run ibv_rc_pingpong -d uroce_lo -g 0 \
			-p "$PORT" </dev/null >"$RAW/$label.out" 2>&1 &
		pid=$!
		BG_PIDS+=("$pid")
		if ! wait_listen "$PORT" "" 10 "$pid"; then
			record uroce idle rc_pingpong 0 "$r" cpu_pct "" fail "raw/$label.out"
			reap "$pid" 0
			continue
		fi
		sleep 0.5 # past the start-up
		c0=$(proc_cpu_s "$pid")
		sleep "$IDLE_S"
		c1=$(proc_cpu_s "$pid")
		if [[ -n $c0 && -n $c1 ]]; then
			record uroce idle rc_pingpong 0 "$r" cpu_pct \
				"$(awk -v a="$c0" -v b="$c1" -v t="$IDLE_S" 'BEGIN { printf "%.3f", 100 * (b - a) / t }')" ok \
				"$c0 s -> $c1 s of CPU in $IDLE_S s"
		else
			record uroce idle rc_pingpong 0 "$r" cpu_pct "" fail "raw/$label.out"
		fi
		reap "$pid" 0
	done
}

sec_cpu() {
	local r
	log "CPU time per GB: uroce ib_write_bw vs qperf tcp_bw at $KEY_BW B"
	qperf_start || log "qperf server did not start"
	for ((r = 1; r <= REPS; r++)); do
		cpu_uroce "$r"
		cpu_tcp "$r"
	done
	qperf_stop
}

# The same-host wire (issue 14): bench/shm.sh, shared memory and UROCE_SHM=0
# side by side with kernel TCP, the floors and CPU s/GB, then again under a
# CPU hog on every core; its rows join points.tsv (tool "samehost").
sec_samehost() {
	local v
	for v in quiet hog; do
		log "same-host wire: shm vs UDP vs TCP$([[ $v == hog ]] && echo ', CPU hog on every core')"
		bash "$BENCH_DIR/shm.sh" --uroce "$UROCE" --reps "$REPS" --out "$OUT/samehost_$v.md" \
			$( ((QUICK)) && echo --quick) $([[ $v == hog ]] && echo --hog) >"$RAW/samehost_$v.log" 2>&1 ||
			log "  bench/shm.sh failed (raw/samehost_$v.log)"
		[[ -s $OUT/samehost_$v.md.tsv ]] && cat "$OUT/samehost_$v.md.tsv" >>"$PTS"
	done
}

sec_veth() {
	local r v
	log "veth pair between two network namespaces"
	if ! veth_setup; then
		record uroce ib_write_bw veth "$KEY_BW" 1 bw_MBps "" fail "veth setup failed"
		cleanup
		return
	fi
	# both ends' interfaces are named $VIF (each in its own namespace), so
	# both processes open the device uroce_$VIF
	PT_NS_SRV=$NSA PT_NS_CLI=$NSB PT_ENV=("UROCE_IFACES=$VIF" "${LO_ENV[@]}") PT_DEV=uroce_$VIF PT_ADDR=$VETH_A_IP
	qperf_start "$NSA" || log "veth: qperf server did not start"
	for ((r = 1; r <= REPS; r++)); do
		log "  rep $r/$REPS"
		uroce_bw ib_write_bw "$KEY_BW" "$r" veth
		lat_set "$r" veth veth_n100
		qperf_run "qperf_veth_tcp_bw_${KEY_BW}_r$r" "$PERF_DUR" "$KEY_BW" tcp_bw "$VETH_A_IP" "$NSB"
		v=$QV
		if [[ -n $v ]]; then
			record qperf tcp_bw veth "$KEY_BW" "$r" bw_MBps "$v" ok
		else
			record qperf tcp_bw veth "$KEY_BW" "$r" bw_MBps "" fail "raw/qperf_veth_tcp_bw_${KEY_BW}_r$r"
		fi
	done
	qperf_stop
	PT_NS_SRV="" PT_NS_CLI="" PT_ENV=("${LO_ENV[@]}") PT_DEV=uroce_lo PT_ADDR=127.0.0.1
	cleanup
}

sec_machine 1
for sec in $SECTIONS; do
	case $sec in
	floors | qperf | ucx | mw | sweep | key | idle | cpu | samehost) "sec_$sec" ;;
	veth) ((VETH)) && sec_veth ;;
	esac
done
sec_machine 2

log "loadavg at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "loadavg_end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
top -bn1 | head -20 >"$RAW/top_end.txt" 2>/dev/null
echo "duration_s: $((SECONDS - T0))" >>"$OUT/meta.txt"

log "report: results.md, results.json, bench.png"
"$PY" "$BENCH_DIR/report.py" "$OUT" || log "report.py failed"
log "done in $((SECONDS - T0)) s: $OUT/results.md"
[[ -e $OUT/results.md ]] && cat "$OUT/results.md" | sed -n '1,60p'
exit 0
}

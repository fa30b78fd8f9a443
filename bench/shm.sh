#!/usr/bin/env bash
# bench/shm.sh - the same-host wire (src/net/shm.c) against UDP, side by side.
#
#   bench/shm.sh [--reps N] [--uroce PATH] [--out FILE] [--hog] [--quick]
#
# Unmodified perftest through `uroce run` on loopback, every point measured
# REPS times with the shared-memory wire (the default) and with UROCE_SHM=0
# (UDP), the two interleaved so that both see the same machine; next to
# them the floors of the same run: a cache-line ping-pong between two
# processes (bench/shm_pingpong.c), the busy-poll UDP ping-pong
# (bench/udp_pingpong.c), memcpy (bench/memcpy_bw.c) and, if installed,
# UCX's posix shared-memory transport (ucx_perftest tag_lat / tag_bw), and
# a cross-core copy through shared memory (bench/xcopy_bw.c).
# Kernel TCP on loopback (qperf tcp_bw / tcp_lat) is the third column, and
# CPU seconds per GB (both processes, user + system) are measured for the
# three at 64 KiB.  --hog runs everything with a CPU hog pinned to every
# core (a spinning process each, started here and ended at exit); --quick
# measures the key points only (no 1 MiB, 2 B, read/atomic, 1,024-QP rows).
# The output ends with issue 14's targets as ratios (bandwidth against DRAM
# memcpy, cross-core copy and hot memcpy, each a row).
# Writes a markdown table (medians) to FILE (default bench/results/shm.md),
# every value to FILE.tsv (bench/run.sh's points.tsv columns, tool
# "samehost") and every raw output to FILE.raw/.
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
REPS=3
UROCE=$REPO/build/bin/uroce
OUT=$BENCH_DIR/results/shm.md
HOG=0
QUICK=0
CPU_ITERS=16384 # 1 GiB at 64 KiB
while [[ $# -gt 0 ]]; do
	case $1 in
	--reps) REPS=$2; shift ;;
	--uroce) UROCE=$2; shift ;;
	--out) OUT=$2; shift ;;
	--hog) HOG=1 ;;
	--quick) QUICK=1 ;;
	-h | --help) sed -n 2,24p "$0"; exit 0 ;;
	*) echo "shm.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[[ -x $UROCE ]] || { echo "shm.sh: $UROCE is missing: build first (cmake --build build)" >&2; exit 1; }
command -v ib_send_lat >/dev/null || { echo "shm.sh: perftest is not installed" >&2; exit 1; }
RAW=$OUT.raw
TSV=$OUT.tsv
TOOLS=$(mktemp -d)
HOGS=()
QPERF_PID=""
cleanup() {
	local p
	for p in "${HOGS[@]}" $QPERF_PID; do kill "$p" 2>/dev/null; done
	rm -rf "$TOOLS"
}
trap cleanup EXIT
trap 'exit 143' TERM INT # (so that cleanup runs)
rm -rf "$RAW"
mkdir -p "$RAW"
: >"$TSV"
for t in shm_pingpong udp_pingpong memcpy_bw xcopy_bw; do
	cc -O2 -Wall -o "$TOOLS/$t" "$BENCH_DIR/$t.c" || exit 1
done
cc -O2 -Wall -o "$TOOLS/msg_cpu" "$BENCH_DIR/msg_cpu.c" -libverbs || exit 1
VARIANT=""
if ((HOG)); then
	VARIANT=_hog
	printf 'int main(void) { for (volatile unsigned long i = 0;; i++) ; }\n' >"$TOOLS/spin.c"
	cc -O1 -o "$TOOLS/spin" "$TOOLS/spin.c" || exit 1
	for ((c = 0; c < $(nproc); c++)); do
		taskset -c "$c" "$TOOLS/spin" &
		HOGS+=($!)
	done
fi
declare -A V=()  # "name/path" -> space-separated values
declare -A VR=() # the same as "rep:value" (ratios pair the reps)
REP=0
# add NAME/PATH VALUE: one value (also a points.tsv row; the metric from the name)
add() {
	local metric=bw_MBps
	[[ -n $2 ]] || return
	V[$1]+="$2 "
	VR[$1]+="$REP:$2 "
	case $1 in
	*lat* | floor/* | msgcpu/*) metric=lat_us ;;
	cpu/*) metric=cpu_s_per_GB ;;
	write_bw_2B/*) metric=Mmsg_s ;;
	esac
	printf 'samehost\t%s\t%s%s\t0\t%s\t%s\t%s\tok\t\n' "${1%/*}" "${1#*/}" "$VARIANT" "$REP" "$metric" "$2" >>"$TSV"
}
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "-" }'; }

PORT=$((21000 + RANDOM % 9000))
# pt PATH(shm|udp) LABEL TOOL ARGS...: one perftest pair; the client's first result row.
# Each side's CPU time (user system) goes to RAW/LABEL.PATH.{srv,cli}.time.
pt() {
	local path=$1 label=$2 tool=$3 shm=1
	shift 3
	[[ $path == udp ]] && shm=0
	PORT=$((PORT + 1))
	env -u LD_LIBRARY_PATH UROCE_SHM=$shm /usr/bin/time -f '%U %S' -o "$RAW/$label.$path.srv.time" \
		timeout -k 3 60 "$UROCE" run -- "$tool" -d uroce_lo -x 0 \
		-p "$PORT" -F "$@" </dev/null >"$RAW/$label.$path.srv" 2>&1 &
	local spid=$!
	sleep 0.5
	env -u LD_LIBRARY_PATH UROCE_SHM=$shm /usr/bin/time -f '%U %S' -o "$RAW/$label.$path.cli.time" \
		timeout -k 3 60 "$UROCE" run -- "$tool" -d uroce_lo -x 0 \
		-p "$PORT" -F "$@" 127.0.0.1 </dev/null >"$RAW/$label.$path.cli" 2>&1
	wait "$spid" 2>/dev/null
	awk 'f && $1 ~ /^[0-9]+$/ && NF >= 5 { print; exit } /#bytes/ { f = 1 }' "$RAW/$label.$path.cli"
}
# lat LABEL TOOL ARGS: typical latency (us); bw LABEL TOOL ARGS: MB/s (10^6 B/s)
lat() {
	local label=$1 p row
	shift
	for p in shm udp; do
		row=$(pt "$p" "$label" "$@")
		[[ -n $row ]] && add "$label/$p" "$(awk '{ print $5 }' <<<"$row")"
	done
}
bw() {
	local label=$1 p row
	shift
	for p in shm udp; do
		row=$(pt "$p" "$label" "$@")
		[[ -n $row ]] && add "$label/$p" "$(awk '{ printf "%.0f", $4 * 1.048576 }' <<<"$row")"
	done
}

# cpu: CPU seconds per GB of both processes, ib_write_bw 64 KiB x CPU_ITERS, each path.
# perftest's own fixed cost (its CPU-frequency estimate, the QP exchange,
# about 0.25 s) is measured by a CPU_FIX_ITERS run just before and
# subtracted, and --noPeak drops its peak search over every time stamp (as
# bench/run.sh does): without that the fixed part was most of the figure.
CPU_FIX_ITERS=64
cpu_s() { cat "$RAW/$1.srv.time" "$RAW/$1.cli.time" | awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { t += $1 + $2 } END { if (t > 0) print t }'; }
cpu() {
	local p row fix all
	for p in shm udp; do
		pt "$p" cpu_fixed ib_write_bw -s 65536 -n "$CPU_FIX_ITERS" --noPeak >/dev/null
		fix=$(cpu_s "cpu_fixed.$p")
		row=$(pt "$p" cpu ib_write_bw -s 65536 -n "$CPU_ITERS" --noPeak)
		all=$(cpu_s "cpu.$p")
		[[ -n $row && -n $fix && -n $all ]] && add "cpu/$p" "$(awk -v a="$all" -v f="$fix" \
			-v b=$(((CPU_ITERS - CPU_FIX_ITERS) * 65536)) 'BEGIN { v = (a - f) / (b / 1e9); printf "%.3f", v < 0 ? 0 : v }')"
	done
}
# Kernel TCP: qperf against a server started once; its CPU (and its
# per-test children's, once reaped) from /proc/PID/stat
qperf_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15 + $16 + $17) / hz }' "/proc/$1/stat" 2>/dev/null; }
tcp() {
	local out before after c bw
	[[ -n $QPERF_PID ]] || return
	out=$(timeout -k 3 30 qperf 127.0.0.1 -lp "$QPORT" -t 1 -m 65536 tcp_bw 2>&1)
	bw=$(awk '$1 == "bw" { f = ($4 ~ /^GB/) ? 1e3 : ($4 ~ /^MB/) ? 1 : ($4 ~ /^KB/) ? 1e-3 : 0; if (f) printf "%.0f", $3 * f }' <<<"$out")
	add write_bw/tcp "$bw"
	out=$(timeout -k 3 30 qperf 127.0.0.1 -lp "$QPORT" -t 1 -m 2 tcp_lat 2>&1)
	add send_lat/tcp "$(awk '$1 == "latency" { f = ($4 ~ /^ms/) ? 1e3 : ($4 ~ /^us/) ? 1 : ($4 ~ /^ns/) ? 1e-3 : 0; if (f) printf "%.2f", $3 * f }' <<<"$out")"
	before=$(qperf_cpu "$QPERF_PID")
	/usr/bin/time -f '%U %S' -o "$RAW/tcp_cpu.time" timeout -k 3 30 qperf 127.0.0.1 -lp "$QPORT" -t 2 -m 65536 \
		tcp_bw >"$RAW/tcp_cpu.out" 2>&1
	sleep 0.3 # the server reaps its per-test child
	after=$(qperf_cpu "$QPERF_PID")
	c=$(awk 'NF == 2 { print $1 + $2 }' "$RAW/tcp_cpu.time")
	bw=$(awk '$1 == "bw" { f = ($4 ~ /^GB/) ? 1e3 : ($4 ~ /^MB/) ? 1 : ($4 ~ /^KB/) ? 1e-3 : 0; if (f) printf "%.2f", $3 * f }' "$RAW/tcp_cpu.out")
	[[ -n $before && -n $after && -n $c && -n $bw ]] &&
		add cpu/tcp "$(awk -v a="$after" -v b="$before" -v c="$c" -v bw="$bw" 'BEGIN { printf "%.3f", (a - b + c) / (bw * 1e6 * 2 / 1e9) }')"
}
QPORT=$((PORT + 900))
if command -v qperf >/dev/null; then
	qperf -lp "$QPORT" </dev/null >"$RAW/qperf_server.log" 2>&1 &
	QPERF_PID=$!
fi

START=$(date -u '+%Y-%m-%d %H:%M UTC')
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= REPS; r++)); do
	REP=$r
	echo "[rep $r/$REPS] floors" >&2
	add floor/shm "$("$TOOLS/shm_pingpong" -n 100000 | sed -n 's/.*oneway_us=\([0-9.]*\).*/\1/p')"
	UPORT=$((PORT + 500 + r))
	timeout -k 3 60 "$TOOLS/udp_pingpong" server -b 127.0.0.1 -p "$UPORT" -i 30 >/dev/null 2>&1 &
	upid=$!
	sleep 0.3
	add floor/udp "$(timeout -k 3 60 "$TOOLS/udp_pingpong" client -H 127.0.0.1 -p "$UPORT" -s 2 -n 20000 \
		-T 2 2>/dev/null | sed -n 's/.*median_us=\([0-9.]*\).*/\1/p' | head -1)"
	wait "$upid" # (only our own: the qperf server and the hogs run on)
	# the CPU of one message, nothing waited for (bench/msg_cpu.c): the
	# 10th percentile of its chunks, in us
	for p in shm udp; do
		add "msgcpu/$p" "$(env UROCE_SHM=$([[ $p == shm ]] && echo 1 || echo 0) timeout -k 3 60 \
			"$UROCE" run -- "$TOOLS/msg_cpu" $([[ $p == shm ]] && echo 200000 || echo 20000) |
			sed -n 's/.*p10_ns=\([0-9.]*\).*/\1/p' | awk '{ printf "%.3f", $1 / 1000 }')"
	done
	out=$("$TOOLS/memcpy_bw" 65536)
	add memcpy/64K "$(sed -n 's/.*hot_MBps=\([0-9.]*\).*/\1/p' <<<"$out")"
	add memcpy/64K_dram "$(sed -n 's/.*stream_MBps=\([0-9.]*\).*/\1/p' <<<"$out")"
	# one process copies 64 KiB blocks into shared memory, the other out:
	# through 1 MiB (16 blocks) and through 16 MiB, the ring's size
	add xcopy/64K_1M "$("$TOOLS/xcopy_bw" -n 16 65536 | sed -n 's/.*xcopy_MBps=\([0-9.]*\).*/\1/p')"
	add xcopy/64K_16M "$("$TOOLS/xcopy_bw" -n 256 65536 | sed -n 's/.*xcopy_MBps=\([0-9.]*\).*/\1/p')"
	if command -v ucx_perftest >/dev/null; then
		for t in tag_lat:8:lat:20000 tag_bw:1048576:bw:2000; do
			IFS=: read -r test size kind iters <<<"$t"
			UPORT=$((UPORT + 50))
			env UCX_TLS=posix,self UCX_WARN_UNUSED_ENV_VARS=n timeout -k 3 60 ucx_perftest -p "$UPORT" \
				>/dev/null 2>&1 &
			upid=$!
			sleep 0.5
			out=$(env UCX_TLS=posix,self UCX_WARN_UNUSED_ENV_VARS=n timeout -k 3 60 ucx_perftest \
				127.0.0.1 -p "$UPORT" -t "$test" -s "$size" -n "$iters" 2>&1 | grep -E '^ *Final:')
			wait "$upid"
			# Final: iters typical_lat avg_lat overall_lat avg_bw(MiB/s) overall_bw ...
			if [[ $kind == lat ]]; then
				add ucx/tag_lat "$(awk '{ print $3 }' <<<"$out")"
			else
				add ucx/tag_bw "$(awk '{ printf "%.0f", $6 * 1.048576 }' <<<"$out")"
			fi
		done
		# UCX tag_bw 1 MiB (rendezvous: RDMA READ) over uroce's rc_verbs -
		# the single copy (pull), the ring (UROCE_SHM_PULL=0) - and UCX tcp
		for name in rc_pull rc_ring tcp; do
			case $name in
			rc_pull) envs=(UCX_TLS=rc UCX_NET_DEVICES=uroce_lo:1) ;;
			rc_ring) envs=(UCX_TLS=rc UCX_NET_DEVICES=uroce_lo:1 UROCE_SHM_PULL=0) ;;
			tcp) envs=(UCX_TLS=tcp UCX_NET_DEVICES=lo) ;;
			esac
			run=()
			[[ $name == rc* ]] && run=("$UROCE" run)
			UPORT=$((UPORT + 50))
			env "${envs[@]}" UCX_WARN_UNUSED_ENV_VARS=n timeout -k 3 60 "${run[@]}" ucx_perftest \
				-p "$UPORT" >/dev/null 2>&1 &
			upid=$!
			sleep 0.7
			out=$(env "${envs[@]}" UCX_WARN_UNUSED_ENV_VARS=n timeout -k 3 60 "${run[@]}" ucx_perftest \
				127.0.0.1 -p "$UPORT" -t tag_bw -s 1048576 -n 1000 -w 100 2>&1 | grep -E '^ *Final:')
			wait "$upid"
			add "ucx_bw/$name" "$(awk '{ printf "%.0f", $6 * 1.048576 }' <<<"$out")"
		done
	fi
	echo "[rep $r/$REPS] perftest, TCP, CPU per GB" >&2
	lat send_lat ib_send_lat -s 2 -n 20000
	lat write_lat ib_write_lat -s 2 -n 20000
	((QUICK)) || lat read_lat ib_read_lat -s 2 -n 5000
	((QUICK)) || lat atomic_lat ib_atomic_lat -n 5000
	bw write_bw ib_write_bw -s 65536 -D 2
	bw send_bw ib_send_bw -s 65536 -D 2
	bw read_bw ib_read_bw -s 65536 -D 2
	((QUICK)) || bw write_bw_1M ib_write_bw -s 1048576 -D 2
	bw write_bw_q8 ib_write_bw -s 65536 -D 2 -q 8
	# "1,024 QPs do not collapse" (setting them up takes a few seconds)
	((QUICK)) || bw write_bw_q1024 ib_write_bw -s 65536 -D 3 -q 1024
	for p in shm udp; do # messages per second, not MB/s
		((QUICK)) && break
		row=$(pt "$p" write_bw_2B ib_write_bw -s 2 -D 2)
		[[ -n $row ]] && add "write_bw_2B/$p" "$(awk '{ printf "%.3f", $5 }' <<<"$row")"
	done
	tcp
	cpu
done

m() { median "${V[$1]:-}"; }
# rng NAME: [min-max] of its values; rng_ratio A B: of the per-rep ratios A/B
rng() { tr ' ' '\n' <<<"${V[$1]:-}" | grep . | sort -g | awk 'NR == 1 { a = $1 } { b = $1 } END { if (NR) printf "[%s-%s]", a, b }'; }
rng_ratio() {
	awk -v a="${VR[$1]:-}" -v b="${VR[$2]:-}" 'BEGIN {
		n = split(b, y, " "); for (i = 1; i <= n; i++) { split(y[i], kv, ":"); d[kv[1]] = kv[2] }
		n = split(a, x, " "); k = 0
		for (i = 1; i <= n; i++) {
			split(x[i], kv, ":"); if (!(kv[1] in d) || d[kv[1]] <= 0) continue
			r = kv[2] / d[kv[1]]; if (!k++ || r < lo) lo = r; if (k == 1 || r > hi) hi = r
		}
		if (k) printf "[%.2f-%.2f]", lo, hi }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
{
	echo "# The same-host wire against UDP$( ((HOG)) && echo ", under a CPU hog on every core") ($START, load $LOAD0 -> $(cut -d' ' -f1-3 /proc/loadavg))"
	echo
	echo "bench/shm.sh$( ((HOG)) && echo " --hog"), tree $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null), medians of $REPS interleaved reps;"
	echo "perftest through \`uroce run\` on loopback. 'shm' is the default, 'UDP' is UROCE_SHM=0,"
	echo "'TCP' kernel TCP on loopback (qperf tcp_lat 2 B in the send_lat row, tcp_bw 64 KiB in the write_bw row)."
	echo
	echo "| point | shm | UDP | TCP | UDP / shm | TCP / shm |"
	echo "|---|---:|---:|---:|---:|---:|"
	for k in send_lat write_lat read_lat atomic_lat; do
		echo "| ib_${k} (us, typical) | $(m $k/shm) | $(m $k/udp) | $(m $k/tcp) | $(ratio "$(m $k/udp)" "$(m $k/shm)") | $(ratio "$(m $k/tcp)" "$(m $k/shm)") |"
	done
	for k in write_bw send_bw read_bw write_bw_1M write_bw_q8 write_bw_q1024; do
		echo "| ib_${k} 64 KiB (MB/s) | $(m $k/shm) | $(m $k/udp) | $(m $k/tcp) | $(ratio "$(m $k/shm)" "$(m $k/udp)") | $(ratio "$(m $k/shm)" "$(m $k/tcp)") |" |
			sed 's/_1M 64 KiB/ 1 MiB/; s/_q8 64 KiB/ 64 KiB -q 8/; s/_q1024 64 KiB/ 64 KiB -q 1024/'
	done
	echo "| ib_write_bw 2 B (million messages/s) | $(m write_bw_2B/shm) | $(m write_bw_2B/udp) | - | $(ratio "$(m write_bw_2B/shm)" "$(m write_bw_2B/udp)") | - |"
	echo "| CPU s per GB, 64 KiB WRITEs / tcp_bw (both processes) | $(m cpu/shm) | $(m cpu/udp) | $(m cpu/tcp) | $(ratio "$(m cpu/udp)" "$(m cpu/shm)") | $(ratio "$(m cpu/tcp)" "$(m cpu/shm)") |"
	echo
	echo "Ratios are 'how much better shm is' (above 1: shm ahead)."
	echo
	echo "| floor of the same run | value |"
	echo "|---|---:|"
	echo "| cache-line ping-pong one-way (bench/shm_pingpong.c) | $(m floor/shm) us |"
	echo "| busy-poll UDP ping-pong one-way (bench/udp_pingpong.c) | $(m floor/udp) us |"
	echo "| CPU of one one-way message, one thread, shm / UDP (bench/msg_cpu.c, p10) | $(m msgcpu/shm) / $(m msgcpu/udp) us |"
	echo "| UCX posix tag_lat 8 B | $(m ucx/tag_lat) us |"
	echo "| UCX posix tag_bw 1 MiB | $(m ucx/tag_bw) MB/s |"
	echo "| UCX tag_bw 1 MiB over uroce rc_verbs, single copy (pull) | $(m ucx_bw/rc_pull) MB/s |"
	echo "| UCX tag_bw 1 MiB over uroce rc_verbs, ring (UROCE_SHM_PULL=0) | $(m ucx_bw/rc_ring) MB/s |"
	echo "| UCX tag_bw 1 MiB over UCX tcp | $(m ucx_bw/tcp) MB/s |"
	echo "| rc_verbs pull / posix, / tcp | $(ratio "$(m ucx_bw/rc_pull)" "$(m ucx/tag_bw)"), $(ratio "$(m ucx_bw/rc_pull)" "$(m ucx_bw/tcp)") |"
	echo "| memcpy 64 KiB, hot | $(m memcpy/64K) MB/s |"
	echo "| memcpy 64 KiB, from and to DRAM (64 MiB arrays) | $(m memcpy/64K_dram) MB/s |"
	echo "| cross-core copy 64 KiB through 1 MiB / 16 MiB of shared memory (bench/xcopy_bw.c) | $(m xcopy/64K_1M) / $(m xcopy/64K_16M) MB/s |"
	echo
	echo "Issue 14's targets, shared-memory path (medians; [min-max] over the reps):"
	echo
	echo "| target | value | goal |"
	echo "|---|---:|---|"
	echo "| ib_send_lat / ib_write_lat 2 B one-way | $(m send_lat/shm) $(rng send_lat/shm) / $(m write_lat/shm) $(rng write_lat/shm) us | <= 1.0 us |"
	echo "| ... / busy-poll UDP floor | $(ratio "$(m send_lat/shm)" "$(m floor/udp)") / $(ratio "$(m write_lat/shm)" "$(m floor/udp)") | <= 0.25 |"
	echo "| ib_read_lat / ib_atomic_lat round trip | $(m read_lat/shm) $(rng read_lat/shm) / $(m atomic_lat/shm) $(rng atomic_lat/shm) us | <= 2.0 us |"
	echo "| ib_write_bw / send_bw / read_bw 64 KiB | $(m write_bw/shm) / $(m send_bw/shm) / $(m read_bw/shm) MB/s | >= 8,000 |"
	echo "| ib_write_bw 64 KiB / memcpy 64 KiB from DRAM | $(ratio "$(m write_bw/shm)" "$(m memcpy/64K_dram)") | >= 0.5 |"
	echo "| ib_write_bw 64 KiB / cross-core copy through 16 MiB (xcopy_bw) | $(ratio "$(m write_bw/shm)" "$(m xcopy/64K_16M)") | >= 0.5 |"
	echo "| ib_write_bw 64 KiB / hot memcpy 64 KiB (one core, in cache) | $(ratio "$(m write_bw/shm)" "$(m memcpy/64K)") | (argued unreachable: docs/design.md) |"
	echo "| ib_write_bw 1 MiB / UCX posix tag_bw 1 MiB | $(ratio "$(m write_bw_1M/shm)" "$(m ucx/tag_bw)") | >= 1 |"
	echo "| UCX tag_bw 1 MiB over rc_verbs (pull) / UCX posix | $(ratio "$(m ucx_bw/rc_pull)" "$(m ucx/tag_bw)") $(rng_ratio ucx_bw/rc_pull ucx/tag_bw) | >= 1 |"
	echo "| -q 8 / 1 QP | $(ratio "$(m write_bw_q8/shm)" "$(m write_bw/shm)") | >= 0.9 |"
	echo "| -q 1024 / 1 QP | $(ratio "$(m write_bw_q1024/shm)" "$(m write_bw/shm)") $(rng_ratio write_bw_q1024/shm write_bw/shm) | no collapse |"
	echo "| CPU s per GB / kernel TCP's | $(ratio "$(m cpu/shm)" "$(m cpu/tcp)") | < 1 |"
	echo
	echo "([a-b] of two series: the lowest and highest ratio of the two in one rep; a rep that failed is left out.)"
	echo
	echo "Every value: $(for k in "${!V[@]}"; do printf '%s=[%s] ' "$k" "${V[$k]% }"; done)"
} >"$OUT"
cat "$OUT"

#!/usr/bin/env bash
# A shared drop-tail bottleneck: two network namespaces joined by a veth
# pair whose sending side is shaped with
#     tc qdisc add dev X root tbf rate 1gbit burst 32kb latency 2ms
# and flows through it at the same time (issue 16, docs/design.md
# "Congestion control"):
#   - N uroce RC ib_write_bw flows (separate processes, 64 KiB, -D DUR)
#     into one receiver namespace: selective repeat (the default) with
#     congestion control (UROCE_CC=1), without it (UROCE_CC=0), and IBTA
#     go-back-N (UROCE_SACK=0);
#   - N TCP flows (qperf tcp_bw) over the same link, the peer column;
#   - one uroce flow and one TCP flow together; one uroce flow alone.
# Prints each flow's goodput, the aggregate against the link, Jain's
# fairness index (sum x)^2 / (n sum x^2), what tbf dropped, and the
# packets uroce sent again (on the mixed lines also TCP's segments sent
# again, of those sent).
# Usage: bench/tbf.sh [BUILD_DIR] (root; N=4 DUR=10 RATE=1gbit by default;
# TCP_CC=cubic|reno|bbr: TCP's congestion control, else the kernel's)
set -uo pipefail
B=${1:-$(dirname "$0")/../build}
B=$(cd "$B" && pwd)
N=${N:-4}
DUR=${DUR:-10}
RATE=${RATE:-1gbit}
LINK_MBPS=${LINK_MBPS:-125} # 1 Gbit/s in 10^6 B/s
P=tb$$
S=${P}s R=${P}r
OUT=${OUT:-/tmp/uroce-tbf.$$}
mkdir -p "$OUT"
PIDS=()
QSRV=() # qperf servers: they serve until stopped

die() {
	echo "tbf.sh: $*" >&2
	exit 1
}
cleanup() {
	local p
	# TERM first: timeout(1) passes it on to the flow it runs; a KILL
	# would leave that flow (a qperf server serves until stopped) behind,
	# holding whatever it inherited - a bench lock's descriptor (seventh
	# session: one held /tmp/uroce-bench.lock for 18 minutes)
	for p in "${PIDS[@]}" "${QSRV[@]}"; do kill -TERM "$p" 2>/dev/null; done
	((${#PIDS[@]} + ${#QSRV[@]})) && sleep 0.5
	for p in "${PIDS[@]}" "${QSRV[@]}"; do kill -KILL "$p" 2>/dev/null; done
	ip netns del "$S" 2>/dev/null
	ip netns del "$R" 2>/dev/null
}
trap cleanup EXIT
((EUID == 0)) || die "needs root (network namespaces)"
for t in ip tc ib_write_bw qperf; do command -v $t >/dev/null || die "$t missing (scripts/deps.sh)"; done
[[ -x $B/bin/uroce ]] || die "no $B/bin/uroce: build first"

ip netns add "$S" && ip netns add "$R" || die "ip netns add failed"
ip -n "$S" link set lo up
ip -n "$R" link set lo up
ip -n "$S" link add vs type veth peer name vr netns "$R" || die "veth"
ip -n "$S" addr add 10.203.0.1/24 dev vs
ip -n "$R" addr add 10.203.0.2/24 dev vr
ip -n "$S" link set vs up
ip -n "$R" link set vr up
tc -n "$S" qdisc add dev vs root tbf rate "$RATE" burst 32kb latency 2ms || die "tc tbf"
# TCP's congestion control in the sending namespace: the kernel's default
# unless TCP_CC names one (this machine's kernel defaults to bbr; the law's
# loss mode was built against a loss-based TCP - session 20)
[[ -n ${TCP_CC:-} ]] && { ip netns exec "$S" sysctl -qw net.ipv4.tcp_congestion_control="$TCP_CC" || die "TCP_CC=$TCP_CC"; }
TCP_CC=$(ip netns exec "$S" sysctl -n net.ipv4.tcp_congestion_control)

tbf_drops() { tc -n "$S" -s qdisc show dev vs | awk '/dropped/ { sub(",", "", $7); print $7; exit }'; }
# UDP datagrams the receivers' sockets dropped (full buffers), in R
rcv_drops() { ip netns exec "$R" awk '/^Udp:/ && ++n == 2 { print $6 }' /proc/net/snmp; }
# TCP segments sent and sent again from S (all its flows so far)
tcp_segs() { ip netns exec "$S" awk '/^Tcp:/ && ++n == 2 { print $13, $12 }' /proc/net/snmp; }

# run_uroce LABEL COUNT ENV...: COUNT ib_write_bw flows at once (the
# servers, then after a second the clients; SRV=1 / CLI=1: only those)
run_uroce() {
	local label=$1 n=$2 i port
	shift 2
	for ((i = 0; i < n; i++)); do
		[[ ${CLI:-} ]] && break
		port=$((19000 + RANDOM % 5000))
		echo "$port" >"$OUT/$label.$i.port"
		ip netns exec "$R" env UROCE_LOG=info "$@" timeout $((DUR + 30)) "$B/bin/uroce" run -- \
			ib_write_bw -d uroce_vr -x 0 -s 65536 -D "$DUR" -p "$port" -F \
			>"$OUT/$label.$i.srv" 2>&1 &
		PIDS+=($!)
	done
	[[ ${SRV:-} ]] && return
	[[ ${CLI:-} ]] || sleep 1
	for ((i = 0; i < n; i++)); do
		port=$(cat "$OUT/$label.$i.port")
		ip netns exec "$S" env UROCE_LOG=info "$@" timeout $((DUR + 30)) "$B/bin/uroce" run -- \
			ib_write_bw -d uroce_vs -x 0 -s 65536 -D "$DUR" -p "$port" -F 10.203.0.2 \
			>"$OUT/$label.$i.cli" 2>&1 &
		PIDS+=($!)
	done
}

# run_tcp LABEL COUNT: COUNT qperf tcp_bw flows at once
run_tcp() {
	local label=$1 n=$2 i port
	for ((i = 0; i < n; i++)); do
		[[ ${CLI:-} ]] && break
		port=$((24000 + RANDOM % 5000))
		echo "$port" >"$OUT/$label.t$i.port"
		ip netns exec "$R" timeout $((DUR + 30)) qperf -lp "$port" >/dev/null 2>&1 &
		QSRV+=($!)
	done
	[[ ${SRV:-} ]] && return
	[[ ${CLI:-} ]] || sleep 1
	for ((i = 0; i < n; i++)); do
		port=$(cat "$OUT/$label.t$i.port")
		ip netns exec "$S" timeout $((DUR + 30)) qperf -lp "$port" -t "$DUR" 10.203.0.2 tcp_bw \
			>"$OUT/$label.t$i.cli" 2>&1 &
		PIDS+=($!)
	done
}

# goodputs in 10^6 B/s, one a line.  perftest prints a BW of 0.00 when
# its CPU clock calibration fails on a loaded machine ("Correlation
# coefficient r^2: ... < 0.9"), though the flow ran: then its messages times
# their size over DUR (a warning on stderr), not a flow of 0 (session 21: one
# four-flow run read 67% of the link and Jain 0.749 for that).
uroce_bw() {
	for f in "$OUT/$1".[0-9]*.cli; do
		awk -v dur="$DUR" -v f="$f" '/^ *65536/ {
			v = $4 * 1.048576
			if (v == 0 && $2 > 0) {
				v = $1 * $2 / dur / 1e6
				printf "tbf.sh: %s: perftest reported 0 MB/s for %d messages: %.1f MB/s from messages / DUR\n", f, $2, v >"/dev/stderr"
			}
			printf "%.1f\n", v }' "$f" | tail -1
	done
}
tcp_bw() {
	for f in "$OUT/$1".t*.cli; do
		awk '/bw *=/ { v = $3; if ($4 ~ /^GB/) v *= 1000; if ($4 ~ /^KB/) v /= 1000; printf "%.1f\n", v }' "$f"
	done
}
resent() { cat "$OUT/$1".[0-9]*.cli 2>/dev/null | grep -ho "retransmitted_pkts [0-9]*" | awk '{ s += $2 } END { print s + 0 }'; }
sent() { cat "$OUT/$1".[0-9]*.cli 2>/dev/null | grep -o "uroce_vs counters: sent_pkts [0-9]*" | awk '{ s += $4 } END { print s + 0 }'; }

report() {
	local label=$1 what=$2 vals
	vals=$(cat)
	awk -v l="$what" -v link="$LINK_MBPS" -v extra="$3" '
		{ x[NR] = $1; s += $1; q += $1 * $1 }
		END {
			n = NR; line = "";
			for (i = 1; i <= n; i++) line = line sprintf(" %.1f", x[i]);
			if (n == 0 || s == 0) { printf "%-34s FAILED (no result)%s\n", l, extra; exit }
			printf "%-34s flows%s MB/s; sum %.1f = %.0f%% of the link; Jain %.3f%s\n",
				l, line, s, 100 * s / link, s * s / (n * q), extra }' <<<"$vals"
}

# the flows, then the qperf servers (stopped: they would serve on until
# their timeout, 30 s after the flows)
wait_all() {
	local p
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	PIDS=()
	for p in "${QSRV[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${QSRV[@]}"; do wait "$p" 2>/dev/null; done
	QSRV=()
}

one() { # LABEL DESCRIPTION KIND(uroce|tcp|mixed) COUNT ENV...
	local label=$1 what=$2 kind=$3 n=$4 d0 d1 r s q0 q1 t0 t1
	shift 4
	d0=$(tbf_drops)
	q0=$(rcv_drops)
	t0=$(tcp_segs)
	case $kind in
	uroce) run_uroce "$label" "$n" "$@" ;;
	tcp) run_tcp "$label" "$n" ;;
	mixed) # both servers, then both clients: the flows start together
		SRV=1 run_uroce "$label" 1 "$@"
		SRV=1 run_tcp "$label" 1
		sleep 1
		CLI=1 run_uroce "$label" 1 "$@"
		CLI=1 run_tcp "$label" 1
		;;
	esac
	wait_all
	d1=$(tbf_drops)
	q1=$(rcv_drops)
	t1=$(tcp_segs)
	r=$(resent "$label")
	s=$(sent "$label")
	if [[ $kind == mixed ]]; then
		printf '%-34s uroce %s MB/s, TCP %s MB/s (link %s); tbf dropped %s, receiver sockets %s, uroce resent %s of %s, TCP %s of %s\n' \
			"$what" "$(uroce_bw "$label" | head -1)" "$(tcp_bw "$label" | head -1)" "$LINK_MBPS" \
			$((d1 - d0)) $((q1 - q0)) "$r" "$s" $((${t1% *} - ${t0% *})) $((${t1#* } - ${t0#* }))
	elif [[ $kind == tcp ]]; then
		tcp_bw "$label" | report "$label" "$what" "; tbf dropped $((d1 - d0))"
	else
		uroce_bw "$label" | report "$label" "$what" \
			"; tbf dropped $((d1 - d0)), receiver sockets $((q1 - q0)), resent $r of $s ($(awk -v r="$r" -v s="$s" 'BEGIN { printf "%.2f", s ? 100 * r / s : 0 }')%)"
	fi
}

echo "== tbf $RATE burst 32kb latency 2ms, $N flows, $DUR s each, TCP $TCP_CC, $(date -u +%FT%TZ), $(git -C "$B/.." rev-parse --short HEAD 2>/dev/null)"
if [[ -n ${ONLY:-} ]]; then
	eval "$ONLY"
	exit 0
fi
one u1 "1 uroce flow alone, UROCE_CC=1" uroce 1 UROCE_SACK=1 UROCE_CC=1
one u1n "1 uroce flow alone, SACK only" uroce 1 UROCE_SACK=1 UROCE_CC=0
one tcp "$N TCP flows (qperf)" tcp "$N"
one cc "$N uroce flows, UROCE_CC=1" uroce "$N" UROCE_SACK=1 UROCE_CC=1
one nocc "$N uroce flows, SACK only" uroce "$N" UROCE_SACK=1 UROCE_CC=0
one gbn "$N uroce, go-back-N" uroce "$N" UROCE_SACK=0
one mix "1 uroce (UROCE_CC=1) + 1 TCP" mixed 1 UROCE_SACK=1 UROCE_CC=1
one mixnocc "1 uroce (SACK only) + 1 TCP" mixed 1 UROCE_SACK=1 UROCE_CC=0
echo "raw output: $OUT"

#!/usr/bin/env bash
# Connection setup rate: rdma_cm on uroce (Debian's cmtime through
# build/bin/uroce run, loopback, native mode) side by side with a TCP
# connect/accept/close loop of the same count (bench/tcp_connect.c) in the
# same run. cmtime starts all N connects at once (asynchronous ids) while
# the TCP loop connects one after another: the row compares what each API
# gets done, not the same concurrency.  Usage: bench/cm_rate.sh [N=10000] [REPS=3]
# Prints cmtime's step table per rep and a summary row; appends the row to
# bench/results/cm_rate.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
N=${1:-10000}
REPS=${2:-3}
U=$root/build/bin/uroce
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -Wall -pthread -o "$tmp/tcp_connect" "$here/tcp_connect.c"
port=$((19000 + RANDOM % 1000))

cm_ms=()
tcp_ms=()
for r in $(seq "$REPS"); do
	timeout 300 "$U" run cmtime -p "$port" >/dev/null 2>&1 &
	spid=$!
	for _ in $(seq 100); do ss -Hlun | grep -q ":$port " && break; sleep 0.1; done
	timeout 300 "$U" run cmtime -s 127.0.0.1 -p "$port" -c "$N" >"$tmp/cm.$r" 2>&1
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	sed -n '/^step/,$p' "$tmp/cm.$r"
	# connect = REQ..ESTABLISHED for all N (cmtime: total ms of the step)
	cm_ms+=("$(awk '/^connect +:/ {print $3}' "$tmp/cm.$r")")
	"$tmp/tcp_connect" "$N" >"$tmp/tcp.$r"
	cat "$tmp/tcp.$r"
	tcp_ms+=("$(awk '{print $4}' "$tmp/tcp.$r")")
	port=$((port + 1))
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
cm=$(median "${cm_ms[@]}")
tcp=$(median "${tcp_ms[@]}")
row=$(awk -v n="$N" -v cm="$cm" -v tcp="$tcp" -v d="$(date -u '+%F %H:%M')" -v rev="$(git -C "$root" rev-parse --short HEAD)" -v load="$(cut -d' ' -f1 /proc/loadavg)" \
	'BEGIN { printf "| %s | %s | %s | %d | %.0f | %.0f | %.2f |", d, rev, load, n, n / cm * 1000, n / tcp * 1000, (n / cm) / (n / tcp) }')
echo "$row"
f=$root/bench/results/cm_rate.md
if [[ ! -e $f ]]; then
	{
		echo "# Connection setup rate: rdma_cm (cmtime connect step) vs TCP connect/accept"
		echo
		echo "| date (UTC) | tree | load | conns | rdma_cm conns/s | TCP conns/s | ratio |"
		echo "|---|---|---:|---:|---:|---:|---:|"
	} >"$f"
fi
echo "$row" >>"$f"

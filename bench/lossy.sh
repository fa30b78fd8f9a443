#!/usr/bin/env bash
# RC ib_write_bw / ib_send_bw / ib_read_bw, 64 KiB, on uroce_lo with random
# loss from UROCE_FAULT (drop on transmit in both processes: requests, ACKs,
# selective ACKs and READ responses alike) against the loss-free run, in one
# run, reps interleaved: selective repeat with congestion control (the
# default), without it (UROCE_CC=0) and IBTA go-back-N (UROCE_SACK=0).  Retransmitted
# packets (the requester's retransmitted_pkts) against the packets
# UROCE_FAULT dropped, from the counters each process logs at exit
# (UROCE_LOG=info).
# The loss-free run takes UDP too (UROCE_SHM=0; WIRE=shm: the same-host
# wire, which faulted runs never take), without the fault injector: the
# issue's "loss-free throughput", the comparison the targets are stated
# against.  BASE_DROP=0.000001 runs it through the injector instead (a
# lock and a random number per packet since the seventh session of
# docs/selective-repeat.md, no copy; before, every packet was copied
# there, 20-30% of the loss-free rate).
# Usage: bench/lossy.sh [BUILD_DIR]   (REPS=3 DUR=4 TESTS="ib_write_bw
# ib_send_bw ib_read_bw" VARIANTS="1 2 0": 1 selective repeat without CC, 2 with,
# 0 go-back-N)
set -uo pipefail
B=${1:-$(dirname "$0")/../build}
B=$(cd "$B" && pwd)
REPS=${REPS:-3}
DUR=${DUR:-4}
OUT=${OUT:-/tmp/uroce-lossy.$$}
WIRE=${WIRE:-udp}
mkdir -p "$OUT"
[[ -x $B/bin/uroce ]] || { echo "lossy.sh: no $B/bin/uroce: build first" >&2; exit 1; }
command -v ib_write_bw >/dev/null || { echo "lossy.sh: perftest missing (scripts/deps.sh)" >&2; exit 1; }

one() { # TEST DROP VARIANT REP -> "MiB/s resent dropped"
	local t=$1 d=$2 s=$3 r=$4 port=$((30000 + RANDOM % 20000)) f=$OUT/$1.$2.$3.$4 env=()
	env=(UROCE_LOG=info UROCE_SACK="$((s != 0))" UROCE_CC="$((s == 2))")
	# the loss-free run on the wire the lossy ones take: UROCE_FAULT
	# keeps packets off the same-host wire (WIRE=shm: the loss-free run
	# on it, as before)
	[[ $WIRE == udp ]] && env+=(UROCE_SHM=0)
	# BASE_DROP=0.000001: the loss-free reference through the fault
	# injector's own transmit path
	[[ $d == 0 && ${BASE_DROP:-0} != 0 ]] && d=$BASE_DROP
	[[ $d != 0 ]] && env+=(UROCE_FAULT="drop=$d")
	env "${env[@]}" timeout $((DUR + 30)) "$B/bin/uroce" run -- "$t" -s 65536 -D "$DUR" -d uroce_lo -x 0 \
		-p "$port" -F >"$f.srv" 2>&1 &
	local spid=$!
	sleep 0.5
	env "${env[@]}" timeout $((DUR + 30)) "$B/bin/uroce" run -- "$t" -s 65536 -D "$DUR" -d uroce_lo -x 0 \
		-p "$port" -F 127.0.0.1 >"$f.cli" 2>&1
	wait "$spid"
	awk '/^ *65536/ { bw = $4 } END { printf "%s ", bw ? bw : 0 }' "$f.cli"
	cat "$f.cli" "$f.srv" | grep -ho "retransmitted_pkts [0-9]*" | awk '{ s += $2 } END { printf "%d ", s }'
	cat "$f.cli" "$f.srv" | grep -ho "fault_drop [0-9]*" | awk '{ s += $2 } END { printf "%d\n", s }'
}

VARIANT=("go-back-N (UROCE_SACK=0)" "selective, UROCE_CC=0" "selective + CC (default)")
TESTS=${TESTS:-ib_write_bw ib_send_bw ib_read_bw}
VARIANTS=${VARIANTS:-1 2 0}
median() { sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }'; }

echo "== uroce_lo ($WIRE wire loss-free), 64 KiB, -D $DUR, $REPS reps, $(date -u +%FT%TZ), $(git -C "$B/.." rev-parse --short HEAD 2>/dev/null), load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in $TESTS; do
	declare -A bw=() rs=() dr=()
	for ((r = 1; r <= REPS; r++)); do
		for s in $VARIANTS; do for cfg in "0 $s" "0.01 $s" "0.05 $s"; do
			read -r b x y <<<"$(one "$t" ${cfg% *} ${cfg#* } "$r")"
			bw[$cfg]+="$b "
			rs[$cfg]=$((${rs[$cfg]:-0} + x))
			dr[$cfg]=$((${dr[$cfg]:-0} + y))
		done; done
	done
	for s in $VARIANTS; do
		base=$(tr ' ' '\n' <<<"${bw["0 $s"]}" | grep . | median)
		for d in 0 0.01 0.05; do
			cfg="$d $s"
			m=$(tr ' ' '\n' <<<"${bw[$cfg]}" | grep . | median)
			printf '%-12s %-22s drop %-5s %9.1f MiB/s (reps: %s) = %5.1f%% of loss-free; resent %d for %d dropped (%s)\n' \
				"$t" "${VARIANT[$s]}" "$d" "$m" \
				"${bw[$cfg]% }" "$(awk -v a="$m" -v b="$base" 'BEGIN { print (b > 0 ? 100 * a / b : 0) }')" \
				"${rs[$cfg]}" "${dr[$cfg]}" \
				"$(awk -v a="${rs[$cfg]}" -v b="${dr[$cfg]}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')"
		done
	done
	unset bw rs dr
done
echo "raw output: $OUT"

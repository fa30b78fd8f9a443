#!/usr/bin/env bash
# Manual interop check of uroce's verbs in standard-port mode against the
# kernel's Soft-RoCE in the shared VM (/work/shared/interop/rxe-vm.sh, which
# must be running: it is never booted or stopped here), both directions:
# ibv_rc_pingpong, ib_send_bw, ib_write_bw, ib_read_bw.  Standard mode never
# offers selective repeat (docs/selective-repeat.md): each uroce run must end
# with no selective ACK sent or received (its counters, UROCE_LOG=info).
# Not part of ctest: it needs the one VM everybody shares, taken with
# flock /tmp/rxevm.use.lock for the whole run.  Results go in docs/interop.md.
#   tests/tools/rxe_verbs_interop.sh [BUILD_DIR]
set -uo pipefail
VM=${RXEVM_SH:-/work/shared/interop/rxe-vm.sh}
LIB=$(readlink -f "${1:-$(dirname "$0")/../../build}")/lib
exec 9>/tmp/rxevm.use.lock
flock 9
"$VM" status | grep -q running || {
	echo "SKIP: the rxe VM is not running"
	exit 0
}
H=(ip netns exec rxevm env UROCE_PORT_MODE=standard UROCE_IFACES=rxetap0=uroce_std UROCE_LOG=info
	LD_LIBRARY_PATH="$LIB")
U=(-d uroce_std -g 0) # perftest: -x, not -g
K="-d rxe0 -g 1"
PU=(-d uroce_std -x 0)
PK="-d rxe0 -x 1"
fails=0
row() { # NAME RC DETAIL
	if [[ $2 == 0 ]]; then echo "PASS: $1"; else
		echo "FAIL: $1 ($3)"
		fails=$((fails + 1))
	fi
}
# no selective ACK in the uroce process's counters (log file)
nosack() { ! grep -Eq "(sent_sacks|rcvd_sacks|held_request) [1-9]" "$1"; }
# kernel server, uroce client
kserver() { # NAME SERVER_ARGS CLIENT_CMD...
	local name=$1 srv=$2 crc out
	shift 2
	"$VM" exec "pkill -x ibv_rc_pingpong; pkill -f ib_; sleep 0.3; (setsid $srv; echo rc=\$?) >/tmp/k.log 2>&1 </dev/null &" >/dev/null
	sleep 2
	timeout 120 "${H[@]}" "$@" 10.77.0.2 >"/tmp/vrxe.$name" 2>&1
	crc=$?
	sleep 1
	out=$("$VM" exec -t 30 'sleep 1; cat /tmp/k.log')
	grep -q '^rc=0' <<<"$out" && ((crc == 0)) && nosack "/tmp/vrxe.$name"
	row "$name: rxe server, uroce client" $? "client rc $crc; server: $(tail -1 <<<"$out")"
}
# uroce server, kernel client
userver() { # NAME CLIENT_ARGS SERVER_CMD...
	local name=$1 cli=$2 spid src=0 out
	shift 2
	timeout 150 "${H[@]}" "$@" >"/tmp/vrxe.$name.srv" 2>&1 &
	spid=$!
	sleep 1.5
	out=$("$VM" exec -t 120 "$cli 10.77.0.1 >/tmp/kc.log 2>&1; echo rc=\$?")
	wait "$spid" || src=$?
	grep -q '^rc=0' <<<"$out" && ((src == 0)) && nosack "/tmp/vrxe.$name.srv"
	row "$name: uroce server, rxe client" $? "server rc $src; client: $(tail -1 <<<"$out")"
}
kserver rc_pingpong "ibv_rc_pingpong $K -n 20" ibv_rc_pingpong "${U[@]}" -n 20
userver rc_pingpong "ibv_rc_pingpong $K -n 20" ibv_rc_pingpong "${U[@]}" -n 20
for t in ib_send_bw ib_write_bw ib_read_bw; do
	kserver "$t" "$t $PK -s 16384 -n 50 -F" "$t" "${PU[@]}" -s 16384 -n 50 -F
	userver "$t" "$t $PK -s 16384 -n 50 -F" "$t" "${PU[@]}" -s 16384 -n 50 -F
done
echo "$fails failed"
exit $((fails > 0))

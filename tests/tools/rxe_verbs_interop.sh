#!/usr/bin/env bash
# Manual interop check of uroce's verbs in standard-port mode against the
# kernel's Soft-RoCE in the shared VM (/work/shared/interop/rxe-vm.sh, which
# must be running: it is never booted or stopped here), both directions:
# ibv_rc_pingpong, ib_send_bw, ib_write_bw, ib_read_bw.  Standard mode never
# offers selective repeat (docs/selective-repeat.md): each uroce run must end
# with no selective ACK sent or received (its counters, UROCE_LOG=info),
# and a capture on the tap (tshark) of every run must show no packet from
# uroce with the selective-ACK opcode (0xD1) or the SACK bit (BTH byte 4,
# bit 0). The lossy rows drop 2% of uroce's transmissions (UROCE_FAULT):
# requests (uroce client) or ACKs and READ responses (uroce server) - the
# transfer completes by IBTA go-back-N against rxe, with resends counted.
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
CAP=/tmp/vrxe.pcap
command -v tshark >/dev/null || {
	echo "FAIL: tshark missing (scripts/deps.sh installs it)"
	exit 1
}
rm -f "$CAP"
ip netns exec rxevm tshark -q -i rxetap0 -f "udp port 4791" -w "$CAP" >/tmp/vrxe.tshark 2>&1 &
TSHARK=$!
sleep 2
row() { # NAME RC DETAIL
	if [[ $2 == 0 ]]; then echo "PASS: $1"; else
		echo "FAIL: $1 ($3)"
		fails=$((fails + 1))
	fi
}
# no selective ACK in the uroce process's counters (log file)
nosack() { ! grep -Eq "(sent_sacks|rcvd_sacks|held_request) [1-9]" "$1"; }
# the lossy rows: UROCE_FAULT dropped something and go-back-N resent
resends() { nosack "$1" && grep -Eq "fault_drop [1-9]" "$1" && grep -Eq "retransmitted_pkts [1-9]" "$1"; }
# kernel server, uroce client
kserver() { # NAME SERVER_ARGS CLIENT_CMD...
	local name=$1 srv=$2 crc out
	shift 2
	"$VM" exec "pkill -x ibv_rc_pingpong; pkill -f '[i]b_[a-z]*_bw'; sleep 0.3; (setsid $srv; echo rc=\$?) >/tmp/k.log 2>&1 </dev/null &" >/dev/null
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
# 2% of uroce's transmissions dropped: requests to rxe (uroce client), or
# ACKs and READ responses (uroce server); rxe resends, or uroce goes back
L=(env UROCE_FAULT=drop=0.02,seed=7)
for t in ib_write_bw ib_read_bw; do
	kserver "$t.lossy" "$t $PK -s 16384 -n 200 -F" "${L[@]}" "$t" "${PU[@]}" -s 16384 -n 200 -F
	resends "/tmp/vrxe.$t.lossy"
	row "$t.lossy: uroce resent by go-back-N, no selective ACK" $? "$(grep -o 'fault_drop [0-9]*\|retransmitted_pkts [0-9]*' "/tmp/vrxe.$t.lossy" | tr '\n' ' ')"
	userver "$t.lossy" "$t $PK -s 16384 -n 200 -F" "${L[@]}" "$t" "${PU[@]}" -s 16384 -n 200 -F
done
# the capture: no selective ACK opcode, no SACK bit from uroce (10.77.0.1)
sleep 1
kill -INT "$TSHARK" 2>/dev/null
wait "$TSHARK" 2>/dev/null
pk=$(tshark -r "$CAP" -Y "ip.src == 10.77.0.1 && udp.dstport == 4791" -T fields -e udp.payload 2>/dev/null |
	awk '{ n++; o = tolower(substr($1, 1, 2)); if (o == "d1" || index("13579bdf", tolower(substr($1, 10, 1)))) bad++ }
		END { print n + 0, bad + 0 }')
read -r npk nbad <<<"$pk"
((npk > 0 && nbad == 0))
row "capture: $npk RoCE packets from uroce, $nbad with the SACK opcode or bit" $? "see $CAP"
echo "$fails failed"
exit $((fails > 0))

#!/usr/bin/env bash
# Manual interop check of uroce's librdmacm (standard-port mode) against the
# kernel's rdma_cm on Soft-RoCE in the shared VM (/work/shared/interop/rxe-vm.sh,
# which must be running: it is never booted or stopped here).  Not part of
# ctest: it needs the one VM everybody shares, taken with
# flock /tmp/rxevm.use.lock for the whole run.  Results go in docs/cm.md.
#   tests/tools/cm_rxe_interop.sh [BUILD_DIR]
set -uo pipefail
VM=${RXEVM_SH:-/work/shared/interop/rxe-vm.sh}
LIB=$(readlink -f "${1:-$(dirname "$0")/../../build}")/lib
exec 9>/tmp/rxevm.use.lock
flock 9
"$VM" status | grep -q running || { echo "SKIP: the rxe VM is not running"; exit 0; }
H=(ip netns exec rxevm env UROCE_PORT_MODE=standard LD_LIBRARY_PATH="$LIB")
fails=0
row() { # NAME: one line per result
	if [[ $2 == 0 ]]; then echo "PASS: $1"; else echo "FAIL: $1 ($3)"; fails=$((fails + 1)); fi
}
# kernel server, uroce client
kserver() { # NAME SERVER_CMD CLIENT_CMD...
	local name=$1 srv=$2
	shift 2
	"$VM" exec "pkill -x rping; pkill -x ucmatose; pkill -x udaddy; sleep 0.3; (setsid $srv; echo rc=\$?) >/tmp/k.log 2>&1 </dev/null &" >/dev/null
	sleep 2
	timeout 90 "${H[@]}" "$@" >"/tmp/cmrxe.$name" 2>&1
	local crc=$?
	sleep 1
	local out
	out=$("$VM" exec -t 30 'sleep 1; cat /tmp/k.log')
	grep -q '^rc=0' <<<"$out" && ((crc == 0))
	row "$name: kernel server, uroce client" $? "client rc $crc; server: $(tail -1 <<<"$out")"
}
# uroce server, kernel client
userver() { # NAME CLIENT_CMD SERVER_CMD...
	local name=$1 cli=$2
	shift 2
	timeout 120 "${H[@]}" "$@" >"/tmp/cmrxe.$name.srv" 2>&1 &
	local spid=$! src=0
	sleep 1.5
	local out
	out=$("$VM" exec -t 90 "$cli >/tmp/kc.log 2>&1; echo rc=\$?")
	wait "$spid" || src=$?
	grep -q '^rc=0' <<<"$out" && ((src == 0))
	row "$name: uroce server, kernel client" $? "server rc $src; client: $(tail -1 <<<"$out")"
}
kserver rping "rping -s -a 10.77.0.2 -C 100 -V" rping -c -a 10.77.0.2 -C 100 -V
userver rping "rping -c -a 10.77.0.1 -C 100 -V" rping -s -a 10.77.0.1 -C 100 -V
kserver ucmatose "ucmatose -c 4 -C 10" ucmatose -s 10.77.0.2 -c 4 -C 10
userver ucmatose "ucmatose -s 10.77.0.1 -c 4 -C 10" ucmatose -c 4 -C 10
kserver udaddy "udaddy -C 10" udaddy -s 10.77.0.2 -C 10
userver udaddy "udaddy -s 10.77.0.1 -C 10" udaddy -C 10
echo "$fails failed"
exit $((fails > 0))

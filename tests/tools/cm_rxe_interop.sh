#!/usr/bin/env bash
# By-hand interop check of uroce's librdmacm (standard-port mode) against the
# kernel's rdma_cm on Soft-RoCE in the shared VM (/work/shared/interop/rxe-vm.sh).
# Not in ctest: CI has no VM.  The VM must be running (this script never
# boots or stops it: `rxe-vm.sh status`, and boot it under the lock if not);
# the whole run holds flock /tmp/rxevm.use.lock.  Unmodified rdmacm-utils on
# both sides, each program once in each direction:
#   rping -V -C 100 (64 B), rping -V -C 10 -S 65535, ucmatose -c 4 -C 10,
#   udaddy -C 10 (RDMA_PS_UDP: SIDR), rdma_server/rdma_client.
# A row passes when both sides exit 0 (rping -V and ucmatose/udaddy check
# their data).  Prints one PASS/FAIL line per row; exits 0 when all pass, 1
# otherwise, 2 when it cannot run (SKIP).  Results: docs/cm.md.
#   tests/tools/cm_rxe_interop.sh [BUILD_DIR]
set -uo pipefail
VM=${RXEVM_SH:-/work/shared/interop/rxe-vm.sh}
LIB=$(readlink -f "${1:-$(dirname "$0")/../../build}")/lib
[[ -e $LIB/librdmacm.so.1 ]] || { echo "SKIP: $LIB/librdmacm.so.1 not built"; exit 2; }
[[ -x $VM ]] || { echo "SKIP: $VM not found"; exit 2; }
exec 9>/tmp/rxevm.use.lock
flock 9
"$VM" status | grep -q running || { echo "SKIP: the rxe VM is not running (boot it: flock -o /tmp/rxevm.use.lock $VM boot)"; exit 2; }
K=10.77.0.2 # the guest's rxe0
U=10.77.0.1 # uroce, on the host side of the tap (netns rxevm)
H=(ip netns exec rxevm env UROCE_PORT_MODE=standard UROCE_IFACES=rxetap0=uroce_std
	LD_LIBRARY_PATH="$LIB")
OUT=$(mktemp -d /tmp/cmrxe.XXXXXX)
fails=0
row() { # NAME RC DETAIL
	if [[ $2 == 0 ]]; then echo "PASS: $1"; else echo "FAIL: $1 ($3)"; fails=$((fails + 1)); fi
}
# the guest's server: started in its own session, its pid kept, stopped if
# it outlives the row
kstart() {
	"$VM" exec -t 30 "rm -f /tmp/k.log; (setsid $1; echo rc=\$?) >/tmp/k.log 2>&1 </dev/null & echo \$! >/tmp/k.pid" >/dev/null
}
kresult() {
	"$VM" exec -t 60 'for i in $(seq 100); do grep -q "^rc=" /tmp/k.log && break; sleep 0.2; done
		grep -q "^rc=" /tmp/k.log || pkill -P "$(cat /tmp/k.pid)"; cat /tmp/k.log'
}
kserver() { # NAME SERVER_CMD CLIENT_CMD...: kernel server, uroce client
	local name=$1 srv=$2 crc=0 out
	shift 2
	kstart "$srv"
	sleep 2
	timeout 120 "${H[@]}" "$@" >"$OUT/$name.client" 2>&1 || crc=$?
	out=$(kresult)
	grep -q '^rc=0' <<<"$out" && ((crc == 0))
	row "$name: kernel server, uroce client" $? "client rc $crc; server: $(tail -1 <<<"$out")"
}
userver() { # NAME CLIENT_CMD SERVER_CMD...: uroce server, kernel client
	local name=$1 cli=$2 spid src=0 out
	shift 2
	timeout 150 "${H[@]}" "$@" >"$OUT/$name.server" 2>&1 &
	spid=$!
	sleep 1.5
	out=$("$VM" exec -t 120 "$cli >/tmp/kc.log 2>&1; echo rc=\$?; tail -3 /tmp/kc.log")
	wait "$spid" || src=$?
	grep -q '^rc=0' <<<"$out" && ((src == 0))
	row "$name: uroce server, kernel client" $? "server rc $src; client: $(tr '\n' ' ' <<<"$out")"
}
echo "uroce: $LIB (standard-port mode, $U); kernel: $("$VM" exec -t 30 'uname -r') rxe0 $K"
kserver rping "rping -s -a $K -C 100 -V" rping -c -a $K -C 100 -V
userver rping "rping -c -a $U -C 100 -V" rping -s -a $U -C 100 -V
kserver rping_64k "rping -s -a $K -C 10 -S 65535 -V" rping -c -a $K -C 10 -S 65535 -V
userver rping_64k "rping -c -a $U -C 10 -S 65535 -V" rping -s -a $U -C 10 -S 65535 -V
kserver ucmatose "ucmatose -c 4 -C 10" ucmatose -s $K -c 4 -C 10
userver ucmatose "ucmatose -s $U -c 4 -C 10" ucmatose -c 4 -C 10
kserver udaddy "udaddy -C 10" udaddy -s $K -C 10
userver udaddy "udaddy -s $U -C 10" udaddy -C 10
kserver rdma_client "rdma_server" rdma_client -s $K
userver rdma_client "rdma_client -s $U" rdma_server
echo "$fails failed (logs: $OUT)"
exit $((fails > 0))

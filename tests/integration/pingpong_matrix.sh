#!/usr/bin/env bash
# rdma-core's unmodified ibverbs-utils pingpongs other than RC, server and
# client on loopback over a uroce device, busy polling and with completion
# events (-e):
#   ibv_uc_pingpong    UC SENDs
#   ibv_ud_pingpong    UD datagrams, address handles, the 40-byte GRH
#   ibv_srq_pingpong   16 RC QPs sharing one shared receive queue
#   ibv_xsrq_pingpong  XRC: XRC domain, XRC SRQs, XRC_SEND/XRC_RECV QPs
#   ibv_rc_pingpong -N the new send API (ibv_wr_*)
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd ibv_devices ibverbs-utils
for t in ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong ibv_xsrq_pingpong ibv_rc_pingpong; do
	require_cmd "$t" ibverbs-utils
done
require_cmd ss iproute2
require_uroce

dev=$(first_device) || die "cannot list devices"
[[ -n $dev ]] || die "ibv_devices lists no uroce device"

CLIENT_TIMEOUT=60

# pingpong NAME TOOL "OPTIONS" SUMMARY_REGEX
pingpong() {
	local name=$1 tool=$2 opts=$3 summary=$4
	local -a args=()
	read -r -a args <<<"-d $dev -g 0 $opts"
	alloc_port
	if ! run_pair "$name" "${ON_UROCE[@]}" "$tool" "${args[@]}" -p "$PORT" -- \
		"${ON_UROCE[@]}" "$tool" "${args[@]}" -p "$PORT" 127.0.0.1; then
		fail "$name"
		return 0
	fi
	local side ok=1
	for side in server client; do
		if ! log_has "$name" "$side" "$summary"; then
			log "  $side: no '$summary' line"
			ok=0
		fi
	done
	if ((ok)); then
		pass "$name"
	else
		show_logs "$name"
		fail "$name"
	fi
}

iters='^[0-9]+ iters in '
pingpong uc_4096_poll ibv_uc_pingpong "-s 4096 -n 500" "$iters"
pingpong uc_65536_events ibv_uc_pingpong "-s 65536 -n 200 -e" "$iters"
pingpong ud_2048_poll ibv_ud_pingpong "-s 2048 -n 500" "$iters"
pingpong ud_2048_events ibv_ud_pingpong "-s 2048 -n 500 -e" "$iters"
pingpong ud_1_poll ibv_ud_pingpong "-s 1 -n 500" "$iters"
pingpong srq_4096_poll ibv_srq_pingpong "-s 4096 -n 500" "$iters"
pingpong srq_4096_events ibv_srq_pingpong "-s 4096 -n 500 -e" "$iters"
pingpong srq_65536_8qps ibv_srq_pingpong "-s 65536 -n 100 -q 8" "$iters"
pingpong xsrq_poll ibv_xsrq_pingpong "-n 500" '^success'
pingpong xsrq_events ibv_xsrq_pingpong "-n 500 -e" '^success'
pingpong rc_new_send_api ibv_rc_pingpong "-s 4096 -n 500 -N" "$iters"

finish

#!/usr/bin/env bash
# rdma-core's unmodified ibv_srq_pingpong on loopback over a uroce device:
# 16 RC QPs sharing one shared receive queue (ibv_create_srq,
# ibv_post_srq_recv), busy polling and completion events (-e).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd ibv_srq_pingpong ibverbs-utils
require_cmd ibv_devices ibverbs-utils
require_cmd ss iproute2
require_uroce

dev=$(first_device) || die "cannot list devices"
[[ -n $dev ]] || die "ibv_devices lists no uroce device"

CLIENT_TIMEOUT=60

pingpong() {
	local name=$1 opts=$2
	local -a args=()
	read -r -a args <<<"-d $dev -g 0 $opts"
	alloc_port
	if ! run_pair "$name" "${ON_UROCE[@]}" ibv_srq_pingpong "${args[@]}" -p "$PORT" -- \
		"${ON_UROCE[@]}" ibv_srq_pingpong "${args[@]}" -p "$PORT" 127.0.0.1; then
		fail "$name"
		return 0
	fi
	local side ok=1
	for side in server client; do
		if ! log_has "$name" "$side" '^[0-9]+ iters in '; then
			log "  $side: no 'iters in' summary line"
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

pingpong srq_4096_poll "-s 4096 -n 500"
pingpong srq_4096_events "-s 4096 -n 500 -e"
pingpong srq_65536_poll "-s 65536 -n 100"
pingpong srq_1_events_8qps "-s 1 -n 500 -q 8 -e"

finish

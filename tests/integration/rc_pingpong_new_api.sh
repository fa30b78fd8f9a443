#!/usr/bin/env bash
# rdma-core's unmodified ibv_rc_pingpong on loopback over a uroce device,
# using the extended verbs: -N posts with the ibv_wr_* API
# (ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, ibv_qp_to_qp_ex,
# ibv_wr_start/ibv_wr_send/ibv_wr_set_sge/ibv_wr_complete), -t polls an
# ibv_create_cq_ex CQ with completion timestamps through
# ibv_start_poll/ibv_next_poll/ibv_end_poll.  Busy polling and completion
# events (-e), data validation (-c).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd ibv_rc_pingpong ibverbs-utils
require_cmd ibv_devices ibverbs-utils
require_cmd ss iproute2
require_uroce

# -N exists since rdma-core 26, -c since 29 (the tool exits non-zero after
# printing its usage: capture, then match; on uroce, as a sanitized build
# needs the ASan runtime preloaded)
usage=$("${ON_UROCE[@]}" ibv_rc_pingpong --help 2>&1 || true)
for opt in --new_send --chk --ts; do
	if ! grep -q -- "$opt" <<<"$usage"; then
		log "SKIP: this ibv_rc_pingpong has no $opt option"
		exit 0
	fi
done

dev=$(first_device) || die "cannot list devices"
[[ -n $dev ]] || die "ibv_devices lists no uroce device"
log "device: $dev"

CLIENT_TIMEOUT=90

# pingpong NAME "OPTIONS" [REGEX]: one server/client pair; both sides must
# finish all iterations, validate their data and, if given, print REGEX.
pingpong() {
	local name=$1 opts=$2 want=${3-}
	local -a args=()
	read -r -a args <<<"-d $dev -g 0 -c $opts"
	alloc_port
	if ! run_pair "$name" "${ON_UROCE[@]}" ibv_rc_pingpong "${args[@]}" -p "$PORT" -- \
		"${ON_UROCE[@]}" ibv_rc_pingpong "${args[@]}" -p "$PORT" 127.0.0.1; then
		fail "$name"
		return 0
	fi
	local side ok=1
	for side in server client; do
		if ! log_has "$name" "$side" '^[0-9]+ iters in '; then
			log "  $side: no 'iters in' summary line"
			ok=0
		fi
		if log_has "$name" "$side" 'invalid data'; then
			log "  $side: reported invalid data"
			ok=0
		fi
		if [[ -n $want ]] && ! log_has "$name" "$side" "$want"; then
			log "  $side: no line matching '$want'"
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

# With -t both sides print the spread of receive completion timestamps.
TS='^Average receive completion clock cycles = [0-9.]+'

pingpong new_send_poll "-N -s 4096 -n 300"
pingpong new_send_events "-N -s 4096 -n 300 -e"
pingpong new_send_1byte "-N -s 1 -n 300"
pingpong new_send_1mib "-N -s 1048576 -n 30"
pingpong ts_poll "-t -s 4096 -n 300" "$TS"
pingpong new_send_ts "-N -t -s 65536 -n 100" "$TS"
# Not "-t -e": after a completion event ibv_rc_pingpong -t treats an empty
# ibv_start_poll (ENOENT) as fatal, but an event can be for a completion the
# previous batch already took (one arrives between ibv_req_notify_cq and
# ibv_start_poll): a race in the tool on any device, and frequent here because
# the send and receive completions of a ping-pong arrive microseconds apart.

finish

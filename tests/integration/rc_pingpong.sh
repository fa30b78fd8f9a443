#!/usr/bin/env bash
# rdma-core's unmodified ibv_rc_pingpong, server and client on loopback, over
# a uroce device: message sizes from 1 byte to 1 MiB, busy polling and
# completion events (-e), data validation on (-c), once through `uroce run`.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd ibv_rc_pingpong ibverbs-utils
require_cmd ibv_devices ibverbs-utils
require_cmd ss iproute2
require_uroce

# -c (validate the received buffer) exists since rdma-core 29; check anyway.
# (the tool exits non-zero after printing its usage: capture, then match.
# It loads the library first, so run it as the tests do: ASan preload too.)
usage=$(timeout 30 "${ON_UROCE[@]}" ibv_rc_pingpong --help 2>&1 || true)
if ! grep -q -- '--chk' <<<"$usage"; then
	log "$usage"
	die "ibv_rc_pingpong printed no usage with -c/--chk (rdma-core 44 has it)"
fi

dev=$(first_device) || die "cannot list devices"
[[ -n $dev ]] || die "ibv_devices lists no uroce device"
log "device: $dev"

CLIENT_TIMEOUT=120 # the 1 MiB cases take up to a minute under ASan

# pingpong NAME "OPTIONS" LAUNCHER...: one server/client pair with the given
# extra ibv_rc_pingpong options; LAUNCHER is the command that starts both
# sides on uroce.
pingpong() {
	local name=$1 opts=$2
	shift 2
	local -a launch=("$@") args=()
	read -r -a args <<<"-d $dev -g 0 -c $opts"
	alloc_port
	if ! run_pair "$name" "${launch[@]}" ibv_rc_pingpong "${args[@]}" -p "$PORT" -- \
		"${launch[@]}" ibv_rc_pingpong "${args[@]}" -p "$PORT" 127.0.0.1; then
		fail "$name"
		return 0
	fi
	# Both sides report their throughput only after all iterations, and
	# with -c complain per page about data that is not what was sent.
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
	done
	if ((ok)); then
		pass "$name"
	else
		show_logs "$name"
		fail "$name"
	fi
}

for case in "1 200" "4096 200" "65536 200" "1048576 100"; do
	read -r size iters <<<"$case"
	pingpong "size${size}_poll" "-s $size -n $iters" "${ON_UROCE[@]}"
	pingpong "size${size}_events" "-s $size -n $iters -e" "${ON_UROCE[@]}"
done

# The uroce command sets up the environment itself: start from a clean one.
# (A launcher script, because run_pair splits its arguments at "--".)
if [[ -x $UROCE_BIN_DIR/uroce ]]; then
	launcher=$LOG_DIR/uroce-run
	printf '#!/bin/sh\nexec env -u LD_LIBRARY_PATH -u LD_PRELOAD "%s" run -- "$@"\n' \
		"$UROCE_BIN_DIR/uroce" >"$launcher"
	chmod +x "$launcher"
	pingpong "uroce_run_size4096" "-s 4096 -n 200" "$launcher"
else
	fail "$UROCE_BIN_DIR/uroce is missing"
fi

finish

#!/usr/bin/env bash
# Debian's unmodified perftest and ibv_asyncwatch through `uroce run`,
# server and client on loopback (-x 0: GID index 0, ::ffff:127.0.0.1):
# RC send/write/read/atomic bandwidth and latency, all sizes (-a) for the
# bandwidth tests, UC and UD sends, UC writes, completion events (-e) and
# several QPs (-q 8).  Each run is short (-n) and both sides must exit 0
# and print their result table.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd ib_write_bw perftest
require_cmd ss iproute2
require_cmd ibv_asyncwatch ibverbs-utils
require_uroce
[[ -x $UROCE_BIN_DIR/uroce ]] || die "$UROCE_BIN_DIR/uroce is missing"

dev=$(first_device) || die "cannot list devices"
[[ -n $dev ]] || die "ibv_devices lists no uroce device"

CLIENT_TIMEOUT=90
# `uroce run` sets up the environment itself: start from a clean one
launcher=$LOG_DIR/uroce-run
printf '#!/bin/sh\nexec env -u LD_LIBRARY_PATH -u LD_PRELOAD "%s" run -- "$@"\n' \
	"$UROCE_BIN_DIR/uroce" >"$launcher"
chmod +x "$launcher"

# perf NAME TOOL OPTIONS...
perf() {
	local name=$1 tool=$2
	shift 2
	# -F: perftest's CPU-frequency estimate (r^2 of a cycles/time fit) must
	# not fail the run on a loaded machine ("Can't produce a report" after
	# every iteration passed)
	local -a args=(-d "$dev" -x 0 -F "$@")
	alloc_port
	if ! run_pair "$name" "$launcher" "$tool" "${args[@]}" -p "$PORT" -- \
		"$launcher" "$tool" "${args[@]}" -p "$PORT" 127.0.0.1; then
		fail "$name"
		return 0
	fi
	# the result table: a header line starting with "#bytes" and a data row
	if log_has "$name" client '#bytes' && log_has "$name" client '^ *[0-9]+ +[0-9]+'; then
		pass "$name"
	else
		show_logs "$name"
		fail "$name"
	fi
}

perf send_bw ib_send_bw -n 500
perf write_bw ib_write_bw -n 500
perf read_bw ib_read_bw -n 500
perf atomic_bw ib_atomic_bw -n 500
perf send_lat ib_send_lat -n 500
perf write_lat ib_write_lat -n 500
perf read_lat ib_read_lat -n 500
perf atomic_lat ib_atomic_lat -n 500
perf send_bw_all ib_send_bw -a -n 20
perf write_bw_all ib_write_bw -a -n 20
perf read_bw_all ib_read_bw -a -n 20
# UC is unreliable and has no flow control: a burst larger than the
# receiver's socket buffer loses packets and perftest then waits forever
# for the lost messages; 500 x 4 KiB stays well inside it.
perf send_bw_uc ib_send_bw -c UC -s 4096 -n 500
perf send_lat_uc ib_send_lat -c UC -n 500
perf write_bw_uc ib_write_bw -c UC -s 4096 -n 500
perf send_bw_ud ib_send_bw -c UD -n 500
perf send_lat_ud ib_send_lat -c UD -n 500
perf send_bw_events ib_send_bw -e -n 500
perf send_lat_events ib_send_lat -e -n 500
perf write_bw_8qps ib_write_bw -q 8 -n 200
perf send_bw_8qps ib_send_bw -q 8 -n 200

# ibv_asyncwatch opens the device and waits: opening a context changes no
# port's state, so no event (a PORT_ACTIVE at open, as uroce used to queue,
# would be read before the event a program provoked); it is killed after 3 s
rc=0
out=$(timeout 3 "$launcher" ibv_asyncwatch -d "$dev" 2>&1) || rc=$?
check "ibv_asyncwatch ran until killed (exit $rc): $out" test "$rc" -eq 124
check "ibv_asyncwatch saw no event at open: $out" fails grep -q 'event_type' <<<"$out"

finish

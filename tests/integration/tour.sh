#!/usr/bin/env bash
# The verbs tour (examples/verbs_tour.c), server and client on loopback:
# SEND/RECV, RDMA WRITE WITH IMMEDIATE and RDMA READ, every byte verified by
# the program itself; both sides must exit 0 and print OK.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd ss iproute2
require_uroce
TOUR=$UROCE_BIN_DIR/verbs_tour
[[ -x $TOUR ]] || die "$TOUR not built"

# tour NAME OPTIONS...: one run with the same options on both sides. The
# tour is built with the library's flags (sanitizers included), so it runs
# without the preload that foreign programs need.
tour() {
	local name=$1
	shift
	alloc_port
	if ! run_pair "$name" "$TOUR" -p "$PORT" "$@" -- "$TOUR" -p "$PORT" "$@" 127.0.0.1; then
		fail "$name"
		return 0
	fi
	local side ok=1
	for side in server client; do
		if ! log_has "$name" "$side" '^OK$'; then
			log "  $side: no OK line"
			ok=0
		fi
		if log_has "$name" "$side" 'ERROR|FAILED'; then
			log "  $side: reported an error"
			ok=0
		fi
	done
	if ((ok)); then
		pass "$name: both sides verified all data and printed OK"
	else
		show_logs "$name"
		fail "$name"
	fi
}

tour default_4096
tour events_1byte -e -s 1
tour poll_1MiB -s 1048576
tour events_300KiB_odd -e -s 307201

finish

#!/usr/bin/env bash
# Debian's unmodified rping (rdmacm-utils) on uroce's librdmacm, loopback,
# native mode: 100 pings with data validation (-V) at 64 B, 4 KiB and 64 KiB
# - 1 (rping's largest), server and client through LD_LIBRARY_PATH, and once
# through `uroce run`.
set -euo pipefail
source "$(dirname "$0")/lib_cm.sh"
cm_require
require_uroce

rping_pair() {
	local name=$1 size=$2
	shift 2
	local -a launch=("$@")
	cm_port
	if ! cm_pair "$name" "${launch[@]}" rping -s -a 127.0.0.1 -p "$PORT" -C 100 -S "$size" -V -- \
		"${launch[@]}" rping -c -a 127.0.0.1 -p "$PORT" -C 100 -S "$size" -V -v; then
		fail "$name"
		return 0
	fi
	# -v prints every ping; rping -V exits non-zero on a data mismatch
	local n
	n=$(grep -c '^ping data: rdma-ping-' "$LOG_DIR/$name.client.log" || true)
	if [[ $n == 100 ]]; then
		pass "$name: 100 pings verified"
	else
		show_logs "$name"
		fail "$name: $n pings printed, expected 100"
	fi
}

rping_pair rping_64 64 "${ON_UROCE[@]}"
rping_pair rping_4k 4096 "${ON_UROCE[@]}"
rping_pair rping_64k 65535 "${ON_UROCE[@]}"
rping_pair rping_uroce_run 1000 "$UROCE_BIN_DIR/uroce" run
finish

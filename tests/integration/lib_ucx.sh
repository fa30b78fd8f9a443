#!/usr/bin/env bash
# Sourced by ucx.sh and middleware_netns.sh after lib.sh (lib*.sh files are
# helpers, not tests).
#
# ucx_perf NAME UCX_TLS ARGS...: one ucx_perftest server/client pair, both
# under `uroce run`; the client gets -f and ARGS and must print a result row.
# UCX_SRV_PRE and UCX_CLI_PRE (arrays, default `env`) prefix the server's and
# the client's command (ip netns exec NS env ...); UCX_HOST is the server's
# address (default 127.0.0.1).
UCX_SRV_PRE=(env)
UCX_CLI_PRE=(env)
UCX_HOST=127.0.0.1

ucx_perf() {
	local name=$1 tls=$2
	shift 2
	alloc_port
	if run_pair "$name" "${UCX_SRV_PRE[@]}" UCX_TLS="$tls" "$UROCE" run ucx_perftest -p "$PORT" -- \
		"${UCX_CLI_PRE[@]}" UCX_TLS="$tls" "$UROCE" run ucx_perftest "$UCX_HOST" -p "$PORT" -f "$@" &&
		log_has "$name" client '^ +[0-9]+ +[0-9.]+ '; then
		pass "$name: $(grep -E '^ +[0-9]+ +[0-9.]+ ' "$LOG_DIR/$name.client.log" | tail -1 | xargs)"
	else
		fail "$name"
	fi
}

#!/usr/bin/env bash
# UCX 1.13 (Debian's ucx-utils, libucx0) runs unmodified on uroce under
# `uroce run`: ucx_info lists rc_verbs and ud_verbs on the uroce device, and
# ucx_perftest passes between two processes over each of them - UCT tests
# on the transport itself (-x TL -d DEV) and UCP tag tests with UCX_TLS set
# (UCP over rc_verbs needs ud_verbs for its wire-up: UCX_TLS=rc). Last, UCP
# endpoints that connect by socket address through UCX's rdmacm connection
# manager (uroce's librdmacm): tests/tools/ucp_sockaddr.c, a checked tag
# ping-pong, with UCX_SOCKADDR_TLS_PRIORITY=rdmacm so no other CM can stand in.
# Speed is bench/'s business: the runs are short.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/lib_ucx.sh
source "$(dirname "$0")/lib_ucx.sh"
# shellcheck source=tests/integration/lib_cm.sh
source "$(dirname "$0")/lib_cm.sh"

require_cmd ucx_info ucx-utils
require_cmd ucx_perftest ucx-utils
require_uroce
[[ -x $UROCE_BIN_DIR/ucp_sockaddr ]] ||
	die "$UROCE_BIN_DIR/ucp_sockaddr was not built: install libucx-dev (scripts/deps.sh) and rebuild"
UROCE=$UROCE_BIN_DIR/uroce
dev=uroce_lo
export UCX_NET_DEVICES=$dev:1 UCX_WARN_UNUSED_ENV_VARS=n

out=$(timeout 60 "$UROCE" run ucx_info -d 2>&1) || { log "$out"; die "uroce run ucx_info -d failed"; }
for tl in rc_verbs ud_verbs; do
	check "ucx_info -d: $tl on $dev:1" \
		bash -c 'awk "/Transport: $1\$/ { t = 1; next } t && /Device:/ { if (\$3 == \"$2\") f = 1; t = 0 } END { exit !f }" <<<"$0"' \
		"$out" "$tl" "$dev:1"
done

# UCT level: the transport alone.
ucx_perf uct_rc_am_lat all -t am_lat -x rc_verbs -d $dev:1 -n 2000 -w 100
ucx_perf uct_rc_put_bw all -t put_bw -x rc_verbs -d $dev:1 -D zcopy -s 65536 -n 300 -w 10
ucx_perf uct_rc_get_bw all -t get -x rc_verbs -d $dev:1 -D zcopy -s 65536 -n 300 -w 10
ucx_perf uct_rc_add_lat all -t add_lat -x rc_verbs -d $dev:1 -n 2000 -w 100
ucx_perf uct_ud_am_lat all -t am_lat -x ud_verbs -d $dev:1 -n 2000 -w 100
ucx_perf uct_ud_am_bw all -t am_bw -x ud_verbs -d $dev:1 -n 2000 -w 100

# UCP level, with UCX's own proof of the transport it chose.
ucx_perf ucp_rc_tag_lat rc -t tag_lat -n 2000 -w 100
ucx_perf ucp_rc_tag_bw rc -t tag_bw -s 1048576 -n 100 -w 5
ucx_perf ucp_ud_tag_lat ud_verbs -t tag_lat -n 2000 -w 100
ucx_perf ucp_ud_tag_bw ud_verbs -t tag_bw -s 65536 -n 100 -w 5
alloc_port
if run_pair ucp_lanes env UCX_TLS=rc "$UROCE" run ucx_perftest -p "$PORT" -- \
	env UCX_TLS=rc UCX_LOG_LEVEL=info "$UROCE" run ucx_perftest 127.0.0.1 -p "$PORT" -t tag_lat -n 100 -w 10 -f; then
	check "UCP's tag lane is rc_verbs on $dev:1 (UCX_LOG_LEVEL=info)" \
		log_has ucp_lanes client "ep_cfg\[[0-9]+\]: tag\(rc_verbs/$dev:1\)"
else
	fail "ucp_lanes"
fi

cm=(env UCX_TLS=rc UCX_SOCKADDR_TLS_PRIORITY=rdmacm UCX_LOG_LEVEL=info UROCE_LOG=info "$UROCE" run
	"$UROCE_BIN_DIR/ucp_sockaddr")
cm_port
if cm_pair ucp_rdmacm "${cm[@]}" server 127.0.0.1 "$PORT" 2000 8 -- "${cm[@]}" client 127.0.0.1 "$PORT" 2000 8; then
	check "rdmacm wire-up: $(grep '^ucp_sockaddr: OK' "$LOG_DIR/ucp_rdmacm.client.log")" \
		log_has ucp_rdmacm client '^ucp_sockaddr: OK: 2000 x 8 B'
	check "rdmacm wire-up: the tag lane is rc_verbs on $dev:1" \
		log_has ucp_rdmacm client "ep_cfg\[[0-9]+\]: tag\(rc_verbs/$dev:1\)"
	check "rdmacm wire-up: the connection went through uroce's rdma_cm (MADs both ways)" \
		bash -c 'grep -qE "rdma_cm: MADs received [1-9][0-9]*, sent [1-9]" "$0" && grep -qE "rdma_cm: MADs received [1-9][0-9]*, sent [1-9]" "$1"' \
		"$LOG_DIR/ucp_rdmacm.server.log" "$LOG_DIR/ucp_rdmacm.client.log"
else
	fail "ucp_rdmacm"
fi
finish

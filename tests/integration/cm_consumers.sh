#!/usr/bin/env bash
# rdma_cm consumers beyond rdmacm-utils, loopback, native mode, unmodified:
# perftest with -R (ib_send_bw, ib_write_lat, ib_read_bw, ib_atomic_lat), pyverbs' CMID
# (python3-pyverbs: connect, send/recv both ways), a librpma program
# (tests/tools/cm_rpma.c: rpma_write, rpma_flush, rpma_read, data compared)
# and mckey (UD multicast join, 10 messages) in a private namespace.
set -euo pipefail
source "$(dirname "$0")/lib_cm.sh"
cm_require
require_uroce
require_cmd ib_send_bw perftest
require_cmd /usr/bin/python3 python3
U=("${ON_UROCE[@]}")

for t in ib_send_bw ib_write_lat ib_read_bw ib_atomic_lat; do
	cm_port
	# -F: perftest's CPU-frequency fit (r^2) must not fail a run whose
	# transfers all passed (as in perftest.sh)
	check "$t -R" cm_pair "$t" "${U[@]}" "$t" -R -F -p "$PORT" -n 200 -- \
		"${U[@]}" "$t" -R -F -p "$PORT" -n 200 127.0.0.1
done

if "${U[@]}" /usr/bin/python3 -c 'import pyverbs.cmid' 2>/dev/null; then
	cm_port
	check "pyverbs CMID" cm_pair pyverbs "${U[@]}" /usr/bin/python3 "$UROCE_SRC_DIR/tests/tools/cm_pyverbs.py" server "$PORT" -- \
		"${U[@]}" /usr/bin/python3 "$UROCE_SRC_DIR/tests/tools/cm_pyverbs.py" client "$PORT"
else
	fail "pyverbs CMID: python3-pyverbs not installed (scripts/deps.sh)"
fi

if [[ -x $UROCE_BIN_DIR/cm_rpma ]]; then
	cm_port
	if cm_pair rpma "${U[@]}" "$UROCE_BIN_DIR/cm_rpma" server 127.0.0.1 "$PORT" -- \
		"${U[@]}" "$UROCE_BIN_DIR/cm_rpma" client 127.0.0.1 "$PORT" &&
		log_has rpma client '^rpma_flush completed' && log_has rpma server '^server memory: librpma'; then
		pass "librpma connect, rpma_write, rpma_flush, rpma_read"
	else
		fail "librpma"
	fi
else
	fail "librpma: cm_rpma not built (librpma-dev missing? scripts/deps.sh)"
fi

if cm_can_netns; then
	out=$LOG_DIR/mckey
	if cm_netns bash -c '
		ip link set lo multicast on && ip route add 224.0.0.0/4 dev lo || exit 9
		timeout 60 "$@" mckey -m 239.1.2.3 -b 127.0.0.1 -C 10 >"$0.recv" 2>&1 & r=$!
		for i in $(seq 200); do ss -Hlun | grep -q "239.1.2.3:7174\|:7174 " && break; sleep 0.1; done
		sleep 0.5
		timeout 60 "$@" mckey -m 239.1.2.3 -b 127.0.0.1 -s -C 10 >"$0.send" 2>&1; s=$?
		wait $r; r=$?; echo "sender rc=$s receiver rc=$r"; [ $s = 0 ] && [ $r = 0 ]' "$out" "${U[@]}" &&
		grep -q 'data transfers complete' "$out.recv"; then
		pass "mckey: UD multicast join, 10 messages received"
	else
		tail -20 "$out.recv" "$out.send" || true
		fail "mckey"
	fi
else
	log "SKIP: mckey needs a private network namespace (root, unshare -n)"
fi
finish

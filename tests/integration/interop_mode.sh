#!/usr/bin/env bash
# Standard-port interop mode (UROCE_PORT_MODE=standard, docs/interop.md)
# between two network namespaces joined by a veth pair, as two hosts with
# kernel Soft-RoCE or RoCE NICs would talk:
#   - each process owns UDP 4791 on its own address; a second owner of
#     10.x:4791 (another uroce process, or any socket: what rdma_rxe holds)
#     makes create_qp fail with one clear error;
#   - unmodified ibv_rc_pingpong (with UDP GSO passing through the veth, then
#     without), ibv_ud_pingpong, ibv_uc_pingpong, ibv_xsrq_pingpong,
#     ib_write_bw, ib_read_bw and ib_atomic_bw between the namespaces;
#   - with UDP segmentation offload off, packets cross one by one with the
#     IPv4 IDs a real wire has (1, 2, 3... within a GSO batch), so the
#     receiver must find the ID (uroce_icrc_ok_any_ipid); tshark captures
#     them and tests/tools/roce_conform.py checks every packet: UDP 4791 to
#     and from, recognised by Wireshark on its RoCEv2 port alone, ICRC over
#     the real headers (scapy), header rules.
# Needs root (network namespaces); skips otherwise, and skips saying so when
# a tool scripts/deps.sh installs is missing.  Turning UDP segmentation
# offload off on the veth is a precondition of the capture check: when it
# fails, the test fails (never a half-run that checks GSO super-packets).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

if ((EUID != 0)); then
	log "SKIP: needs root (network namespaces and a veth pair)"
	exit 0
fi
require_cmd ip iproute2
require_cmd ss iproute2
require_cmd ibv_rc_pingpong ibverbs-utils
require_cmd ib_write_bw perftest
require_cmd ethtool ethtool
require_cmd tshark tshark
require_py_module scapy.contrib.roce python3-scapy
require_uroce

NS_A=uroce-iop-a-$$
NS_B=uroce-iop-b-$$
VA=uiop$$a
VB=uiop$$b
ADDR_A=10.231.0.1
ADDR_B=10.231.0.2
DEV=uroce_std

cleanup() {
	timeout 10 ip netns del "$NS_A" 2>/dev/null || true
	timeout 10 ip netns del "$NS_B" 2>/dev/null || true
}
trap cleanup EXIT

timeout 10 ip netns add "$NS_A"
timeout 10 ip netns add "$NS_B"
timeout 10 ip link add "$VA" netns "$NS_A" type veth peer name "$VB" netns "$NS_B"
timeout 10 ip -n "$NS_A" addr add "$ADDR_A/24" dev "$VA"
timeout 10 ip -n "$NS_B" addr add "$ADDR_B/24" dev "$VB"
for ns in "$NS_A" "$NS_B"; do
	timeout 10 ip -n "$ns" link set lo up
done
timeout 10 ip -n "$NS_A" link set "$VA" up
timeout 10 ip -n "$NS_B" link set "$VB" up

# Run in a namespace, on uroce in standard mode, with the veth as the only
# device (named uroce_std on both sides).
IN_A=(ip netns exec "$NS_A" "${ON_UROCE[@]}" UROCE_PORT_MODE=standard "UROCE_IFACES=$VA=$DEV")
IN_B=(ip netns exec "$NS_B" "${ON_UROCE[@]}" UROCE_PORT_MODE=standard "UROCE_IFACES=$VB=$DEV")

# The servers listen inside namespace A: look there (overrides lib.sh).
listening() {
	ip netns exec "$NS_A" ss -Hltn 2>/dev/null | awk -v p=":$1" '$4 ~ p "$" { found = 1 } END { exit !found }'
}

CLIENT_TIMEOUT=45
SERVER_GRACE=10

# pair NAME PROGRAM ARGS...: server in A, client in B against A's address
pair() {
	local name=$1
	shift
	alloc_port
	check "$name" run_pair "$name" "${IN_A[@]}" UROCE_LOG=info "$@" -p "$PORT" -- \
		"${IN_B[@]}" "$@" -p "$PORT" "$ADDR_A"
	if [[ -e $LOG_DIR/$name.server.log ]] && log_has "$name" server rcvd_icrc_err; then
		fail "$name: the server dropped packets for a bad ICRC: $(grep -o 'rcvd_icrc_err [0-9]*' "$LOG_DIR/$name.server.log")"
	fi
}

# ---- the device in standard mode ----
if out=$(timeout 30 "${IN_A[@]}" ibv_devinfo -v -d "$DEV" 2>&1) &&
	grep -q "::ffff:$ADDR_A" <<<"$out"; then
	pass "ibv_devinfo in standard mode: $DEV has GID ::ffff:$ADDR_A"
else
	fail "ibv_devinfo in standard mode: $out"
fi

# ---- one owner of 4791 per address ----
INUSE="UDP 4791 on $ADDR_A is in use (another uroce process or the kernel's rdma_rxe)"
# a plain socket on 10.x:4791, as the kernel's rdma_rxe would hold it
timeout 30 ip netns exec "$NS_A" /usr/bin/python3 -c "
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('$ADDR_A', 4791))
print('bound', flush=True)
time.sleep(25)" >"$LOG_DIR/holder.log" 2>&1 &
HOLDER=$!
for _ in $(seq 100); do
	grep -q bound "$LOG_DIR/holder.log" && break
	sleep 0.1
done
alloc_port
rc=0
timeout 20 "${IN_A[@]}" ibv_rc_pingpong -d "$DEV" -g 0 -p "$PORT" >"$LOG_DIR/inuse.log" 2>&1 || rc=$?
kill "$HOLDER" 2>/dev/null || true
wait "$HOLDER" 2>/dev/null || true
if ((rc != 0 && rc != 124)) && [[ $(grep -cF "$INUSE" "$LOG_DIR/inuse.log") == 1 ]]; then
	pass "4791 held by another socket: create_qp fails, reported once: $(grep -F "$INUSE" "$LOG_DIR/inuse.log" | sed 's/^.*error [a-z_]*: //')"
else
	fail "4791 held by another socket: exit $rc, log: $(cat "$LOG_DIR/inuse.log")"
fi

# a uroce server owns 4791 on A; a second one there must fail; then the
# first serves a client from B (RC, 4 KiB messages, GSO through the veth)
alloc_port
SPORT=$PORT
timeout -k 5 60 "${IN_A[@]}" UROCE_LOG=info ibv_rc_pingpong -d "$DEV" -g 0 -p "$SPORT" -n 200 \
	>"$LOG_DIR/owner.server.log" 2>&1 &
OWNER=$!
for _ in $(seq 200); do
	listening "$SPORT" && break
	sleep 0.1
done
if timeout 10 ip netns exec "$NS_A" ss -Huan | grep -q "$ADDR_A:4791"; then
	pass "the server owns UDP $ADDR_A:4791"
else
	fail "no socket on $ADDR_A:4791: $(timeout 10 ip netns exec "$NS_A" ss -Huan)"
fi
alloc_port
rc=0
timeout 20 "${IN_A[@]}" ibv_rc_pingpong -d "$DEV" -g 0 -p "$PORT" >"$LOG_DIR/second.log" 2>&1 || rc=$?
if ((rc != 0 && rc != 124)) && grep -qF "$INUSE" "$LOG_DIR/second.log"; then
	pass "a second uroce process on $ADDR_A fails with the in-use error"
else
	fail "a second uroce process on $ADDR_A: exit $rc, log: $(cat "$LOG_DIR/second.log")"
fi
crc=0
timeout 45 "${IN_B[@]}" ibv_rc_pingpong -d "$DEV" -g 0 -p "$SPORT" -n 200 "$ADDR_A" \
	>"$LOG_DIR/owner.client.log" 2>&1 || crc=$?
src=0
reap "$OWNER" "$SERVER_GRACE" || src=$?
if ((crc == 0 && src == 0)); then
	pass "ibv_rc_pingpong A <-> B in standard mode (GSO across the veth): $(grep -m1 'iters in' "$LOG_DIR/owner.client.log")"
else
	fail "ibv_rc_pingpong A <-> B: server $(explain_rc "$src"), client $(explain_rc "$crc")"
	tail -20 "$LOG_DIR/owner.server.log" "$LOG_DIR/owner.client.log"
fi

# ---- packets one by one, captured and checked ----
for side in "$NS_A $VA" "$NS_B $VB"; do
	read -r ns dev <<<"$side"
	if ! out=$(timeout 10 ip netns exec "$ns" ethtool -K "$dev" tx-udp-segmentation off 2>&1); then
		fail "ethtool -K $dev tx-udp-segmentation off: ${out:-timeout} (the capture would see GSO super-packets)"
		finish
	fi
done
CAP=$LOG_DIR/interop.pcap
timeout -k 5 200 ip netns exec "$NS_B" tshark -i "$VB" -f udp -B 32 -w "$CAP" \
	>"$LOG_DIR/tshark.log" 2>&1 &
TSHARK=$!
for _ in $(seq 150); do
	grep -q "Capture started" "$LOG_DIR/tshark.log" 2>/dev/null && break
	sleep 0.1
done

pair rc_pingpong ibv_rc_pingpong -d "$DEV" -g 0 -s 5000 -n 20
pair ud_pingpong ibv_ud_pingpong -d "$DEV" -g 0 -s 1024 -n 20
pair uc_pingpong ibv_uc_pingpong -d "$DEV" -g 0 -s 3000 -n 20
pair xsrq_pingpong ibv_xsrq_pingpong -d "$DEV" -g 0 -m 1024 -s 3000 -n 3
pair ib_write_bw ib_write_bw -d "$DEV" -x 0 -F -s 16384 -n 50
pair ib_read_bw ib_read_bw -d "$DEV" -x 0 -F -s 16384 -n 20
pair ib_atomic_bw ib_atomic_bw -d "$DEV" -x 0 -F -n 20

sleep 0.5
kill -INT "$TSHARK" 2>/dev/null || true
wait "$TSHARK" 2>/dev/null || true
CLOG=$LOG_DIR/roce_conform.log
if timeout -k 5 120 /usr/bin/python3 "$UROCE_SRC_DIR/tests/tools/roce_conform.py" "$CAP" \
	--mode standard --sport 4791 --no-decode-as --min-packets 200 \
	--expect RC_SEND_FIRST,RC_SEND_MIDDLE,RC_SEND_LAST,RC_ACK,UD_SEND_ONLY,UC_SEND_FIRST,XRC_SEND_FIRST,RC_WRITE_FIRST,RC_READ_REQ,RC_READ_RESP_MIDDLE,RC_FETCH_ADD,RC_ATOMIC_ACK \
	>"$CLOG" 2>&1; then
	pass "every packet between the namespaces is RoCEv2 on UDP 4791 -> 4791 and conforms ($(head -1 "$CLOG"))"
else
	fail "capture check (kept: $CAP)"
fi
grep -v '^    ' "$CLOG"
if awk '/^IPv4 IDs/ && /0x0001/ { found = 1 } END { exit !found }' "$CLOG"; then
	pass "packets with IPv4 ID != 0 were accepted (ID solved for the ICRC)"
else
	fail "no packet with a non-zero IPv4 ID crossed: the ID search was not exercised"
fi
finish

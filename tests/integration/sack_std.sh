#!/usr/bin/env bash
# Selective repeat stays between uroce peers in native mode (issue 16,
# docs/selective-repeat.md "Negotiation"): standard-port mode - what kernel
# rxe and RoCE NICs talk to - is IBTA go-back-N on the wire, also when
# packets are lost. Two network namespaces joined by a veth pair (UDP
# segmentation offload off, so the capture sees every packet), RC
# ib_write_bw and ib_read_bw with 2% of every process's transmissions
# dropped (UROCE_FAULT):
#   - standard mode: the runs complete, packets were dropped and resent,
#     the counters show no selective ACK sent, received or packet held, and
#     the capture (tshark) shows no packet with the selective-ACK opcode
#     (0xD1) or the SACK bit (BTH byte 4, bit 0);
#   - native mode, the same runs: the capture does show both (so the check
#     above can see them).
# Against kernel rxe itself: tests/tools/rxe_verbs_interop.sh (the shared VM).
# Needs root (network namespaces); skips otherwise.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

if ((EUID != 0)); then
	log "SKIP: needs root (network namespaces and a veth pair)"
	exit 0
fi
require_cmd ip iproute2
require_cmd ss iproute2
require_cmd ethtool ethtool
require_cmd tshark tshark
require_cmd ib_write_bw perftest
require_uroce

P=sq$$
NS_A=${P}a NS_B=${P}b VA=${P}va VB=${P}vb
ADDR_A=10.205.0.1 ADDR_B=10.205.0.2
TSHARK=
cleanup() {
	[[ -n $TSHARK ]] && kill -KILL "$TSHARK" 2>/dev/null
	timeout 10 ip netns del "$NS_A" 2>/dev/null || true
	timeout 10 ip netns del "$NS_B" 2>/dev/null || true
}
trap cleanup EXIT
if ! timeout 10 ip netns add "$NS_A" || ! timeout 10 ip netns add "$NS_B" ||
	! timeout 10 ip link add "$VA" netns "$NS_A" type veth peer name "$VB" netns "$NS_B"; then
	log "SKIP: network namespaces or veth pairs do not work here"
	exit 0
fi
ip -n "$NS_A" addr add "$ADDR_A/24" dev "$VA"
ip -n "$NS_B" addr add "$ADDR_B/24" dev "$VB"
for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
ip -n "$NS_A" link set "$VA" up
ip -n "$NS_B" link set "$VB" up
for x in "$NS_A:$VA" "$NS_B:$VB"; do
	if ! out=$(timeout 10 ip netns exec "${x%%:*}" ethtool -K "${x#*:}" tx-udp-segmentation off 2>&1); then
		fail "ethtool -K ${x#*:} tx-udp-segmentation off: ${out:-timeout} (the capture would see GSO super-packets)"
		finish
	fi
done

listening() {
	ip netns exec "$NS_A" ss -Hltn 2>/dev/null | awk -v p=":$1" '$4 ~ p "$" { found = 1 } END { exit !found }'
}
CLIENT_TIMEOUT=60
FAULT=UROCE_FAULT=drop=0.02,seed=5

# capture MODE: the runs of one mode with a capture on B's side
capture() {
	local mode=$1 cap=$LOG_DIR/$1.pcap dev env_a env_b t
	if [[ $mode == standard ]]; then
		dev=uroce_std
		env_a=(UROCE_PORT_MODE=standard "UROCE_IFACES=$VA=$dev")
		env_b=(UROCE_PORT_MODE=standard "UROCE_IFACES=$VB=$dev")
	else
		dev=uroce_$VA
		env_a=("UROCE_IFACES=$VA=$dev")
		env_b=("UROCE_IFACES=$VB=$dev")
	fi
	timeout -k 5 200 ip netns exec "$NS_B" tshark -i "$VB" -f udp -B 32 -w "$cap" \
		>"$LOG_DIR/$mode.tshark.log" 2>&1 &
	TSHARK=$!
	for _ in $(seq 150); do
		grep -q "Capture started" "$LOG_DIR/$mode.tshark.log" 2>/dev/null && break
		sleep 0.1
	done
	for t in ib_write_bw ib_read_bw; do
		alloc_port
		check "$mode: $t with 2% drop" run_pair "$mode.$t" \
			ip netns exec "$NS_A" "${ON_UROCE[@]}" "${env_a[@]}" "$FAULT" UROCE_LOG=info \
			"$t" -d "$dev" -x 0 -F -s 16384 -n 100 -p "$PORT" -- \
			ip netns exec "$NS_B" "${ON_UROCE[@]}" "${env_b[@]}" "$FAULT" UROCE_LOG=info \
			"$t" -d "$dev" -x 0 -F -s 16384 -n 100 -p "$PORT" "$ADDR_A"
	done
	sleep 0.5
	kill -INT "$TSHARK" 2>/dev/null || true
	wait "$TSHARK" 2>/dev/null || true
	TSHARK=
}

# sackpkts PCAP: "packets with-SACK-opcode with-SACK-bit" among UDP packets
# that carry a BTH (RoCEv2 on 4791, or uroce's native ports)
sackpkts() {
	tshark -r "$1" -T fields -e udp.payload 2>/dev/null |
		awk 'length($1) >= 24 { n++; o = tolower(substr($1, 1, 2)); if (o == "d1") op++;
			if (index("13579bdf", tolower(substr($1, 10, 1)))) bit++ }
			END { print n + 0, op + 0, bit + 0 }'
}
count() { grep -ho "$2 [0-9]*" "$1" 2>/dev/null | awk '{ s += $2 } END { print s + 0 }'; }

capture standard
read -r n op bit <<<"$(sackpkts "$LOG_DIR/standard.pcap")"
check "standard mode: $n packets captured, $op with opcode 0xD1, $bit with the SACK bit" \
	test "$n" -gt 0 -a "$op" = 0 -a "$bit" = 0
logs=("$LOG_DIR"/standard.*.log)
check "standard mode: UROCE_FAULT dropped packets ($(cat "${logs[@]}" | count /dev/stdin fault_drop))" \
	test "$(cat "${logs[@]}" | count /dev/stdin fault_drop)" -gt 0
check "standard mode: go-back-N resent ($(cat "${logs[@]}" | count /dev/stdin retransmitted_pkts) packets)" \
	test "$(cat "${logs[@]}" | count /dev/stdin retransmitted_pkts)" -gt 0
check "standard mode: no selective ACK sent or received, nothing held" \
	test "$(cat "${logs[@]}" | grep -Ec '(sent_sacks|rcvd_sacks|held_request) [1-9]')" = 0

capture native
read -r n op bit <<<"$(sackpkts "$LOG_DIR/native.pcap")"
check "native mode (the contrast): $n packets, $op with opcode 0xD1, $bit with the SACK bit" \
	test "$op" -gt 0 -a "$bit" -gt 0
finish

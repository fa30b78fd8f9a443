#!/usr/bin/env bash
# Packet capture (UROCE_PCAP) read back with tshark: the verbs tour and
# ibv_rc_pingpong write captures; tshark must decode every packet as
# InfiniBand (RoCEv2) with no malformed packet and good IPv4/UDP checksums,
# show the opcodes the programs use, and count as many packets and bytes
# per direction as the device counters the library logs at close.  Then
# `uroce trace` runs ibv_rc_pingpong and decodes its capture.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd tshark tshark
require_cmd ss iproute2
require_cmd ibv_rc_pingpong ibverbs-utils
require_uroce
[[ -x $UROCE_BIN_DIR/uroce ]] || die "$UROCE_BIN_DIR/uroce not built"
TOUR=$UROCE_BIN_DIR/verbs_tour
[[ -x $TOUR ]] || die "$TOUR not built"

DECODE=(-d "udp.port==1-65535,infiniband")
# Wireshark's RPC-over-RDMA heuristic claims the tour's 1-byte SEND and calls
# it malformed: not uroce's packet, so off (as `uroce trace` does)
NO_HEUR=(--disable-heuristic rpcrdma_infiniband)

# decode FILE: one line per packet, tab-separated: protocols, IPv4 and UDP
# checksum status (1 = good), BTH opcode, malformed marker, SLL packet type
# (4 = sent by us, 0 = to us), UDP length.  One tshark run per file (each
# costs a second or two).
decode() {
	local -a heur=()
	tshark -r "$1" -c 1 "${NO_HEUR[@]}" >/dev/null 2>&1 && heur=("${NO_HEUR[@]}")
	tshark -r "$1" "${DECODE[@]}" "${heur[@]}" -o ip.check_checksum:TRUE \
		-o udp.check_checksum:TRUE -T fields -e frame.protocols -e ip.checksum.status \
		-e udp.checksum.status -e infiniband.bth.opcode -e _ws.malformed -e sll.pkttype \
		-e udp.length 2>/dev/null
}

# check_capture NAME FILE DECODED: every packet decodes cleanly
check_capture() {
	local name=$1 f=$2 out=$3 n bad
	n=$(grep -c . <<<"$out" || true)
	if ((n == 0)); then
		fail "$name: $f holds no packet (or tshark cannot read it)"
		return
	fi
	bad=$(awk -F'\t' '$1 !~ /:ip:udp:infiniband/ || $2 != 1 || $3 != 1 || $4 == "" || $5 != ""' \
		<<<"$out" | head -3)
	if [[ -n $bad ]]; then
		fail "$name: $f: packets that are not clean RoCEv2: $bad"
		return
	fi
	pass "$name: $f: $n packets, all InfiniBand over good IPv4/UDP, none malformed"
}

# has_opcodes NAME DECODED NAME=OPC...: each expected BTH opcode is there
has_opcodes() {
	local name=$1 seen missing=() e
	seen=" $(awk -F'\t' '{ print $4 }' <<<"$2" | sort -n -u | tr '\n' ' ')"
	shift 2
	for e in "$@"; do
		[[ $seen == *" ${e#*=} "* ]] || missing+=("$e")
	done
	if ((${#missing[@]})); then
		fail "$name: opcodes missing from the capture: ${missing[*]} (seen: $seen)"
	else
		pass "$name: capture has ${*%%=*}"
	fi
}

# counters_match NAME LOGFILE DECODED: the packets and bytes a process
# captured in each direction are those its counters (logged at close) report
counters_match() {
	local name=$1 log=$2 line sent_p sent_b rcvd_p rcvd_b cap
	line=$(grep -E 'counters: sent_pkts' "$log" | tail -1)
	if [[ -z $line ]]; then
		fail "$name: no counter line in $log"
		return
	fi
	sent_p=$(grep -oE 'sent_pkts [0-9]+' <<<"$line" | awk '{print $2}')
	sent_b=$(grep -oE 'sent_bytes [0-9]+' <<<"$line" | awk '{print $2}')
	rcvd_p=$(grep -oE 'rcvd_pkts [0-9]+' <<<"$line" | awk '{print $2}')
	rcvd_b=$(grep -oE 'rcvd_bytes [0-9]+' <<<"$line" | awk '{print $2}')
	# udp.length - 8: the RoCE packet, BTH through ICRC
	cap=$(awk -F'\t' '$6 == 4 { tp++; tb += $7 - 8 } $6 == 0 { rp++; rb += $7 - 8 }
		END { printf "%d %d %d %d", tp, tb, rp, rb }' <<<"$3")
	if [[ $cap == "$sent_p $sent_b $rcvd_p $rcvd_b" ]]; then
		pass "$name: capture and counters agree: sent $sent_p pkts $sent_b B, received $rcvd_p pkts $rcvd_b B"
	else
		fail "$name: capture (sent pkts/B, rcvd pkts/B: $cap) != counters ($sent_p $sent_b $rcvd_p $rcvd_b)"
	fi
}

# pid_of_log LOGFILE: the pid in the library's log lines
pid_of_log() {
	grep -oE '^uroce\[[0-9]+\]' "$1" | head -1 | tr -dc 0-9
}

# tour NAME OPTIONS...: the tour with a capture on both sides; sets
# DECODED to both sides' decoded packets
tour() {
	local name=$1
	shift
	local pcap=$LOG_DIR/$name.%p.pcap side pid f out
	DECODED=
	TOUR_FILES=()
	alloc_port
	if ! run_pair "$name" env UROCE_PCAP="$pcap" UROCE_LOG=info "$TOUR" -p "$PORT" "$@" -- \
		env UROCE_PCAP="$pcap" UROCE_LOG=info "$TOUR" -p "$PORT" "$@" 127.0.0.1; then
		fail "$name: the tour failed"
		return 1
	fi
	for side in server client; do
		pid=$(pid_of_log "$LOG_DIR/$name.$side.log")
		f=$LOG_DIR/$name.$pid.pcap
		if [[ -z $pid || ! -s $f ]]; then
			fail "$name: $side (pid ${pid:-?}) wrote no capture $f"
			continue
		fi
		TOUR_FILES+=("$f")
		out=$(decode "$f")
		check_capture "$name $side" "$f" "$out"
		counters_match "$name $side" "$LOG_DIR/$name.$side.log" "$out"
		DECODED+=$out$'\n'
	done
}

# RC opcodes (IBTA table 38): SEND First 0 Middle 1 Last 2 Only 4, RDMA
# WRITE First 6 Middle 7 Last with Immediate 9 Only with Immediate 11, RDMA
# READ Request 12, Response First 13 Middle 14 Last 15 Only 16, Acknowledge 17
if tour tour_multi -s 20000; then
	has_opcodes tour_multi "$DECODED" \
		send_first=0 send_middle=1 send_last=2 write_first=6 write_middle=7 \
		write_last_imm=9 read_request=12 read_resp_first=13 read_resp_middle=14 \
		read_resp_last=15 ack=17
	# the checker of tests/integration/conformance.sh reads these captures
	# too: scapy recomputes every ICRC over the IPv4 and UDP headers as
	# written here (the IPv4 IDs of GSO segments included).  One side is
	# enough: each holds every packet, sent or received.
	if /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null; then
		f=${TOUR_FILES[-1]}
		check "roce_conform.py: $f conforms (ICRC over the captured headers)" \
			bash -c "/usr/bin/python3 '$UROCE_SRC_DIR/tests/tools/roce_conform.py' \
				'$f' --mode native >'$f.conform.log' 2>&1"
	else
		log "SKIP: ICRC cross-check (no python3-scapy)"
	fi
fi
if tour tour_small -s 1; then
	has_opcodes tour_small "$DECODED" \
		send_only=4 write_only_imm=11 read_request=12 read_resp_only=16 ack=17
fi

# `uroce trace` around ibv_rc_pingpong: the client decodes its capture (-r)
# a clean environment: `uroce` sets up the library path (and ASan) itself
launcher=$LOG_DIR/uroce-trace
printf '#!/bin/sh\nexec env -u LD_LIBRARY_PATH -u LD_PRELOAD "%s" trace "$@"\n' \
	"$UROCE_BIN_DIR/uroce" >"$launcher"
chmod +x "$launcher"
alloc_port
if run_pair trace "$launcher" -w "$LOG_DIR/pp_server.pcap" ibv_rc_pingpong -g 0 -n 5 \
	-s 3000 -p "$PORT" -- \
	"$launcher" -w "$LOG_DIR/pp_client.pcap" -r ibv_rc_pingpong -g 0 -n 5 -s 3000 \
	-p "$PORT" 127.0.0.1; then
	check "uroce trace -r decoded the client's capture (RC Send First..Last, Acknowledge)" \
		bash -c "grep -q 'RC Send First' '$LOG_DIR/trace.client.log' &&
			 grep -q 'RC Send Last' '$LOG_DIR/trace.client.log' &&
			 grep -q 'RC Acknowledge' '$LOG_DIR/trace.client.log'"
	check "uroce trace told where the server's capture is" \
		log_has trace server 'pp_server\.[0-9]+\.pcap'
	srv=$(grep -oE '[^ ]*pp_server\.[0-9]+\.pcap' "$LOG_DIR/trace.server.log" | head -1)
	if [[ -n $srv ]]; then
		check_capture "trace server" "$srv" "$(decode "$srv")"
	else
		fail "uroce trace: no server capture named in its output"
	fi
else
	fail "uroce trace around ibv_rc_pingpong"
fi

finish

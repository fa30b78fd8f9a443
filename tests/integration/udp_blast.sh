#!/usr/bin/env bash
# bench/udp_blast.c, the UDP-path ceiling tool of docs/design.md ("The
# ceiling of a UDP path"): it builds warning-free and moves every byte on
# loopback in each mode - TCP, UDP GSO/GRO, with the receiver's extra copy,
# MSG_ZEROCOPY, and with the ICRC pass each side (--crc, built with uroce's
# crc_clmul.c: the sums of the segments' CRCs agree on both sides), the
# payload landed by the kernel's copy through scatter iovecs (--land), the
# sender's gather and fused copy (--tx) - and
# ends (no hang on a lost datagram).  Its speed lives in bench/, nothing here
# is timed.
source "$(dirname "$0")/lib.sh"

require_cmd cc build-essential
BIN=$LOG_DIR/udp_blast
check "udp_blast builds with -Wall -Wextra -Werror" \
	cc -O2 -Wall -Wextra -Werror -o "$BIN" "$UROCE_SRC_DIR/bench/udp_blast.c"
CBIN=$LOG_DIR/udp_blast_crc
check "udp_blast builds with -DBLAST_CRC and crc_clmul.c" \
	cc -O2 -Wall -Wextra -Werror -DBLAST_CRC -I"$UROCE_SRC_DIR/src" -I"$UROCE_SRC_DIR/src/include" \
	-o "$CBIN" "$UROCE_SRC_DIR/bench/udp_blast.c" "$UROCE_SRC_DIR/src/transport/crc_clmul.c"

# one run: MODE ARGS...; the output line must say every byte arrived (TCP)
# or arrived or was counted lost (UDP: a loaded host may drop a datagram)
blast() {
	local out
	alloc_port
	out=$(timeout -k 3 60 "$BIN" "$@" --mb 20 --port "$PORT" 2>&1) || {
		log "$out"
		return 1
	}
	log "$out"
	if [[ $1 == tcp ]]; then
		grep -q 'rcvd=20000000 sent=20000000$' <<<"$out"
	else
		grep -Eq 'lost_windows=0 rcvd=20000000 sent=20000000$|lost_windows=[1-9][0-9]* rcvd=[0-9]+ sent=20000000$' \
			<<<"$out"
	fi
}

# --crc: every byte arrived and the CRC sums agree, or a loss was counted
blast_crc() {
	local out
	alloc_port
	out=$(timeout -k 3 60 "$CBIN" udp "$@" --mb 20 --port "$PORT" 2>&1) || {
		log "$out"
		return 1
	}
	log "$out"
	grep -Eq 'lost_windows=[1-9][0-9]* rcvd=[0-9]+ sent=20000000 ' <<<"$out" && return 0
	[[ $out =~ lost_windows=0\ rcvd=20000000\ sent=20000000\ crc_tx=([0-9a-f]{8})\ crc_rx=([0-9a-f]{8})$ ]] &&
		[[ ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]]
}

if [[ -x $CBIN ]]; then
	check "udp --crc: the CRC sums agree" blast_crc --crc
	check "udp --copy --crc (fused copy + CRC)" blast_crc --copy --crc
	check "udp --crc --seg 1080" blast_crc --crc --seg 1080
	# --land: the kernel's copy puts each segment's payload in the
	# destination and its header and trailer in buffers of their own; the
	# CRCs over the three pieces agree with the sender's over the segment
	check "udp --land --crc (payloads landed by the kernel's copy)" blast_crc --land --crc
	check "udp --land --vlen 1 --crc (recvmsg)" blast_crc --land --vlen 1 --crc
	check "udp --land --crc --seg 1056" blast_crc --land --crc --seg 1056
	check "udp --land --crc --dst-kb 1024 --vlen 1" blast_crc --land --crc --dst-kb 1024 --vlen 1
	# --tx gather sends the same bytes through uroce's iovecs, --tx copy
	# through the copy fused with the CRC: the sums agree
	check "udp --tx gather --crc --seg 1056" blast_crc --tx gather --crc --seg 1056
	check "udp --tx gather --crc --seg 1081 (a short last segment)" blast_crc --tx gather --crc --seg 1081
	check "udp --tx copy --crc" blast_crc --tx copy --crc
	check "--tx copy without --crc is refused" fails "$CBIN" udp --tx copy
	check "tcp --crc is refused" fails "$CBIN" tcp --crc
	check "tcp --land is refused" fails "$CBIN" tcp --land
fi
if [[ -x $BIN ]]; then
	check "--crc without -DBLAST_CRC is refused" fails "$BIN" udp --crc
	check "tcp: every byte" blast tcp
	check "tcp --copy: every byte" blast tcp --copy
	check "udp GSO/GRO: every byte or counted lost" blast udp
	check "udp --copy" blast udp --copy
	check "udp --seg 1080 (RoCE MTU 1024)" blast udp --seg 1080
	check "udp --zerocopy" blast udp --zerocopy
	check "a bad mode is refused" fails "$BIN" sctp
fi
finish

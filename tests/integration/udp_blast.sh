#!/usr/bin/env bash
# bench/udp_blast.c, the UDP-path ceiling tool of docs/design.md ("The
# ceiling of a UDP path"): it builds warning-free and moves every byte on
# loopback in each mode - TCP, UDP GSO/GRO, with the receiver's extra copy,
# and MSG_ZEROCOPY - and ends (no hang on a lost datagram).  Its speed
# lives in bench/, nothing here is timed.
source "$(dirname "$0")/lib.sh"

require_cmd cc build-essential
BIN=$LOG_DIR/udp_blast
check "udp_blast builds with -Wall -Wextra -Werror" \
	cc -O2 -Wall -Wextra -Werror -o "$BIN" "$UROCE_SRC_DIR/bench/udp_blast.c"

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

if [[ -x $BIN ]]; then
	check "tcp: every byte" blast tcp
	check "tcp --copy: every byte" blast tcp --copy
	check "udp GSO/GRO: every byte or counted lost" blast udp
	check "udp --copy" blast udp --copy
	check "udp --seg 1080 (RoCE MTU 1024)" blast udp --seg 1080
	check "udp --zerocopy" blast udp --zerocopy
	check "a bad mode is refused" fails "$BIN" sctp
fi
finish

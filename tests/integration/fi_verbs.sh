#!/usr/bin/env bash
# libfabric 1.17's verbs provider (Debian's libfabric-bin) on uroce under
# `uroce run`, between two processes on one host:
# - fi_info -p verbs lists uroce_lo as an FI_EP_MSG domain and a datagram
#   domain, and verbs;ofi_rxm offers FI_EP_RDM on uroce_lo (libfabric skips
#   loopback interfaces for MSG domains; `uroce run`'s interposer shows lo to
#   libfabric as an ordinary interface because it backs uroce_lo:
#   src/sysfs_shim/ifaddrs.c);
# - fi_pingpong -e msg (rdma_cm connections over uroce's librdmacm),
#   -e rdm over verbs;ofi_rxm (rxm's own connections over MSG endpoints) and
#   -e dgram pass, 64 B..1 MiB (dgram: ..4 KiB), every transfer checked (-c),
#   each on the uroce_lo domain (-d).
# fi_pingpong passes the server's endpoint name, taken from fi_getinfo()
# without a node (localhost), so it runs on loopback only: no netns variant.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd fi_info libfabric-bin
require_cmd fi_pingpong libfabric-bin
require_uroce
[[ -e $UROCE_LIB_DIR/librdmacm.so.1 ]] ||
	die "$UROCE_LIB_DIR/librdmacm.so.1 is missing: the verbs provider needs uroce's librdmacm (src/cm)"
UROCE=$UROCE_BIN_DIR/uroce

info() {
	local out
	out=$(timeout 60 "$UROCE" run fi_info "$@" 2>&1) || {
		log "$out"
		die "uroce run fi_info $* failed"
	}
	log "$out"
	printf '%s\n' "$out" >"$LOG_DIR/fi_info.$(printf '%s' "$*" | tr -c 'A-Za-z0-9' _).log"
	FI_OUT=$out
}
# has PROVIDER DOMAIN TYPE: the last fi_info output lists that triple.
has() {
	awk -v p="$1" -v d="$2" -v t="$3" '
		$1 == "provider:" { prov = $2 }
		$1 == "domain:" { dom = $2 }
		$1 == "type:" && prov == p && dom == d && $2 == t { found = 1 }
		END { exit !found }' <<<"$FI_OUT"
}

info -p verbs
check "fi_info -p verbs: uroce_lo, FI_EP_MSG" has verbs uroce_lo FI_EP_MSG
check "fi_info -p verbs: uroce_lo-dgram, FI_EP_DGRAM" has verbs uroce_lo-dgram FI_EP_DGRAM
info -p 'verbs;ofi_rxm' -t FI_EP_RDM
check "fi_info -p 'verbs;ofi_rxm': uroce_lo, FI_EP_RDM" has 'verbs;ofi_rxm' uroce_lo FI_EP_RDM

# pingpong NAME ENDPOINT PROVIDER DOMAIN MIN_SIZES
pingpong() {
	local name=$1 ep=$2 prov=$3 dom=$4 sizes=$5
	alloc_port
	if run_pair "$name" "$UROCE" run fi_pingpong -p "$prov" -e "$ep" -d "$dom" -B "$PORT" -I 100 -c -- \
		"$UROCE" run fi_pingpong -p "$prov" -e "$ep" -d "$dom" -P "$PORT" -I 100 -c 127.0.0.1; then
		check "fi_pingpong -e $ep ($prov, $dom): $sizes sizes, 100 checked transfers each" \
			bash -c '[[ $(grep -cE "^[0-9]+[kmg]? +100 +=100 " "$0") -ge $1 ]]' \
			"$LOG_DIR/$name.client.log" "$sizes"
	else
		fail "fi_pingpong -p $prov -e $ep"
	fi
}
pingpong msg msg verbs uroce_lo 6
pingpong rdm rdm 'verbs;ofi_rxm' uroce_lo 6
pingpong dgram dgram verbs uroce_lo-dgram 4
finish

#!/bin/bash
# Fresh random RoCEv2 ICRC vectors from scapy, checked by test_icrc.
#
# tests/data/icrc_vectors.txt is a fixed sample; this draws new packets
# (new addresses, ports, QPNs, PSNs, opcodes, payloads) on every run.
# Needs /usr/bin/python3 with scapy (Debian: python3-scapy); skips without.
# ICRC_SCAPY_PYTHON overrides the interpreter, ICRC_SCAPY_COUNT the count.
set -u

src=${UROCE_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${UROCE_BUILD_DIR:-$src/build}
python=${ICRC_SCAPY_PYTHON:-/usr/bin/python3}
test_bin=$build/tests/test_icrc
count=${ICRC_SCAPY_COUNT:-200}

if ! [ -x "$python" ] || ! "$python" -c 'import scapy.contrib.roce' 2>/dev/null; then
	echo "SKIP: $python has no scapy (apt-get install python3-scapy)"
	exit 0
fi
if ! [ -x "$test_bin" ]; then
	echo "FAIL: $test_bin not built"
	exit 1
fi

tmp=$(mktemp "${TMPDIR:-/tmp}/icrc_vectors.XXXXXX")
trap 'rm -f "$tmp"' EXIT

if ! "$python" "$src/tests/tools/gen_icrc_vectors.py" --count "$count" --out "$tmp"; then
	echo "FAIL: vector generation failed"
	exit 1
fi
head -1 "$tmp"
"$test_bin" "$tmp"

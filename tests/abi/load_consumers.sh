#!/bin/bash
# Load test: the Debian 12 consumers of libibverbs.so.1 start against the
# built library.  Everything runs with LD_LIBRARY_PATH=$UROCE_LIB_DIR and
# LD_BIND_NOW=1, so every symbol of every loaded object (the tool itself,
# librdmacm, libmlx5, libefa, pyverbs modules) must resolve at startup.
#
# What is asserted: the dynamic loader finds our library first and reports
# no "symbol lookup error", "undefined symbol" or missing symbol version.
# The tools' own exit status is only reported (ib_send_bw -h exits 1,
# ibv_devices exits 1 when there is no device, ...), except that 127 (loader
# failure) and death by signal fail the test.  A tool that is not installed
# fails the test: scripts/deps.sh installs every one (perftest, qperf,
# ibverbs-utils, python3-pyverbs).
#
# Environment (set by ctest): UROCE_LIB_DIR (required); UROCE_SANITIZE=1
# when the library is built with ASan/UBSan: the (uninstrumented) tools then
# get the ASan runtime preloaded, as in tests/integration/lib.sh.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u

libdir=$(readlink -f "${UROCE_LIB_DIR:?UROCE_LIB_DIR must point at the built library directory}")
lib=$libdir/libibverbs.so.1
python=/usr/bin/python3

pass=0
fail=0
skip=0
ok() {
	pass=$((pass + 1))
	echo "ok:   $*"
}
bad() {
	fail=$((fail + 1))
	echo "FAIL: $*"
}
finish() {
	echo "$pass passed, $fail failed ($skip skipped)"
	[ "$fail" -eq 0 ]
	exit
}

if [ ! -r "$lib" ]; then
	bad "$lib does not exist"
	finish
fi

# An ASan-instrumented library can only be loaded by a program that loads
# the ASan runtime first.
preload=()
if [ "${UROCE_SANITIZE:-0}" = 1 ]; then
	asan=$(ldd "$lib" 2>/dev/null | awk '/libasan/ {print $3; exit}')
	[ -n "$asan" ] || asan=$(gcc -print-file-name=libasan.so 2>/dev/null)
	if [ ! -e "$asan" ]; then
		bad "UROCE_SANITIZE=1 but no libasan found"
		finish
	fi
	preload=("LD_PRELOAD=$asan${LD_PRELOAD:+:$LD_PRELOAD}" "ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}")
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck disable=SC2016 # literal backquote in the ld.so message
loader_errors='symbol lookup error|undefined symbol|version `[^`]*'"'"' not found|error while loading shared libraries|cannot open shared object'

# run NAME CMD... : run with our library, check stderr+stdout for loader
# errors and the exit status for 127 / signals.
run() {
	local name=$1 rc
	shift
	env LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LD_BIND_NOW=1 \
		"${preload[@]}" timeout 30 "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if grep -Eq "$loader_errors" "$tmp/err" "$tmp/out"; then
		bad "$name: loader error (rc=$rc):"
		grep -Eh "$loader_errors" "$tmp/err" "$tmp/out" | head -5 | sed 's/^/      /'
		return 1
	fi
	if [ $rc -eq 124 ]; then
		bad "$name: timed out"
		return 1
	fi
	if [ $rc -eq 127 ] || [ $rc -gt 128 ]; then
		bad "$name: exit status $rc"
		sed 's/^/      /' "$tmp/err" | head -5
		return 1
	fi
	ok "$name (exit $rc)"
	return 0
}

have() {
	if command -v "$1" >/dev/null 2>&1; then
		return 0
	fi
	bad "$1 not installed (scripts/deps.sh installs it)"
	return 1
}

# ---- the library the tools resolve to ----
if have ib_send_bw; then
	resolved=$(env LD_LIBRARY_PATH="$libdir" ldd "$(command -v ib_send_bw)" |
		awk '$1 == "libibverbs.so.1" {print $3}')
	if [ -n "$resolved" ] && [ "$(readlink -f "$resolved")" = "$(readlink -f "$lib")" ]; then
		ok "ldd ib_send_bw: libibverbs.so.1 => $resolved"
	else
		bad "ldd ib_send_bw: libibverbs.so.1 => '${resolved}', expected $lib"
	fi
fi

# ---- command-line tools ----
have ib_send_bw && run "ib_send_bw -h" ib_send_bw -h
have ib_write_lat && run "ib_write_lat -h" ib_write_lat -h
have qperf && run "qperf --help" qperf --help
have ibv_devices && run "ibv_devices" ibv_devices

# ---- pyverbs ----
if [ -x "$python" ] && "$python" -c 'import importlib.util as u; exit(u.find_spec("pyverbs") is None)' 2>/dev/null; then
	run "pyverbs import" "$python" -c 'import pyverbs.device'
	# The device list may be empty (or the call may fail) until the core
	# lands; only a clean load is required.  PyverbsRDMAError is accepted.
	run "pyverbs get_device_list" "$python" -c '
import sys
import pyverbs.device as d
from pyverbs.pyverbs_error import PyverbsRDMAError
try:
    print(d.get_device_list())
except PyverbsRDMAError as e:
    print("get_device_list:", e)
'
	# Pulls libmlx5.so.1 (-z now), whose constructor registers its driver.
	run "pyverbs mlx5dv import" "$python" -c 'import pyverbs.providers.mlx5.mlx5dv'
	# Same for libefa.so.1 when pyverbs has it.
	if "$python" -c 'import importlib.util as u; exit(u.find_spec("pyverbs.providers.efa") is None)' 2>/dev/null; then
		run "pyverbs efadv import" "$python" -c 'import pyverbs.providers.efa.efadv'
	fi
else
	bad "pyverbs ($python) not installed (scripts/deps.sh installs python3-pyverbs)"
fi

finish

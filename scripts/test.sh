#!/usr/bin/env bash
# Build uroce twice and run the test suite on both builds:
#   build/       RelWithDebInfo: every test
#   build-asan/  RelWithDebInfo with AddressSanitizer + UBSan: every test but
#                those that check the wire or the tools rather than memory
#                (captures, interop, stat, valgrind - which cannot run under
#                ASan -, the libFuzzer run, which builds its own sanitized
#                binary, and the scapy vectors), to keep CI well under 15 min
# Exits non-zero if a build or any test fails.
#
# Environment: JOBS (parallel build jobs, default: number of CPUs),
# CTEST_JOBS (parallel tests, default 2), SKIP_DEPS=1 (do not run deps.sh).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
CTEST_JOBS=${CTEST_JOBS:-2}

if [[ ${SKIP_DEPS:-0} != 1 ]]; then
	bash scripts/deps.sh
fi

status=0
summary=()

ASAN_SKIP='conformance|interop_mode|pcap|\.stat$|soak_valgrind|netns|fuzz_rx|icrc_scapy'

# build_and_test DIR CTEST_EXCLUDE_REGEX CMAKE_ARGS...
build_and_test() {
	local dir=$1 exclude=$2
	local -a skip=()
	shift 2
	[[ -n $exclude ]] && skip=(-E "$exclude")
	echo
	echo "===== $dir: configure ($*)"
	if ! cmake -S "$ROOT" -B "$ROOT/$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"; then
		summary+=("$dir: configure FAILED")
		return 1
	fi
	echo "===== $dir: build"
	if ! cmake --build "$ROOT/$dir" -j "$JOBS"; then
		summary+=("$dir: build FAILED")
		return 1
	fi
	echo "===== $dir: test"
	if ! (cd "$ROOT/$dir" && ctest --output-on-failure -j "$CTEST_JOBS" "${skip[@]}"); then
		summary+=("$dir: tests FAILED")
		return 1
	fi
	summary+=("$dir: all tests passed")
}

build_and_test build "" || status=1
build_and_test build-asan "$ASAN_SKIP" -DUROCE_SANITIZE=ON || status=1

echo
echo "===== summary"
printf '  %s\n' "${summary[@]}"
exit "$status"

#!/usr/bin/env bash
# Build uroce twice and run the whole test suite on both builds:
#   build/       RelWithDebInfo
#   build-asan/  RelWithDebInfo with AddressSanitizer + UBSan
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

# build_and_test DIR CMAKE_ARGS...
build_and_test() {
	local dir=$1
	shift
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
	if ! (cd "$ROOT/$dir" && ctest --output-on-failure -j "$CTEST_JOBS"); then
		summary+=("$dir: tests FAILED")
		return 1
	fi
	summary+=("$dir: all tests passed")
}

build_and_test build || status=1
build_and_test build-asan -DUROCE_SANITIZE=ON || status=1

echo
echo "===== summary"
printf '  %s\n' "${summary[@]}"
exit "$status"

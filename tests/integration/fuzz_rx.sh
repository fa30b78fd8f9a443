#!/usr/bin/env bash
# Fuzz uroce's receive path for a bounded time (tests/fuzz/fuzz_rx.c,
# docs/robustness.md): libFuzzer with ASan+UBSan, starting from the committed
# corpus (tests/fuzz/corpus); any crash, sanitizer report, leak or failed
# check of the target (guard bytes, frozen MRs) fails the test and leaves the
# input in the log directory.
#
# The target needs clang and libFuzzer (Debian: clang, libclang-rt-14-dev);
# without them the test is skipped.  A gcc build gets a clang build of its
# own in $UROCE_BUILD_DIR/fuzz-clang (kept, so later runs only rebuild what
# changed); a clang build uses its own tests/fuzz/fuzz_rx.
#
# Environment: UROCE_FUZZ_SECONDS (default 60) how long to fuzz.
# fuzz_cm.sh sources this script with FUZZ_TARGET=fuzz_cm and
# FUZZ_CORPUS=corpus_cm (the CM's target, tests/fuzz/fuzz_cm.c).  The
# sanitizer build (UROCE_SANITIZE=1) skips unless UROCE_FUZZ_SECONDS is
# set: the target is sanitized in every build, fuzzing twice adds nothing
# (tests/unit/test_fuzz_replay.c replays the corpus there).
source "$(dirname "$0")/lib.sh"
TARGET=${FUZZ_TARGET:-fuzz_rx}
SEEDS=$UROCE_SRC_DIR/tests/fuzz/${FUZZ_CORPUS:-corpus}

if [[ $UROCE_SANITIZE == 1 && -z ${UROCE_FUZZ_SECONDS-} ]]; then
	log "SKIP: $TARGET runs in the plain build (set UROCE_FUZZ_SECONDS to fuzz here too)"
	exit 0
fi
SECONDS_TO_FUZZ=${UROCE_FUZZ_SECONDS:-${FUZZ_DEFAULT_SECONDS:-60}}
require_cmd clang clang
require_cmd cmake cmake

# libFuzzer's runtime is a separate package
probe=$LOG_DIR/probe
if ! printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' |
	clang -x c -fsanitize=fuzzer - -o "$probe" >"$LOG_DIR/probe.log" 2>&1; then
	log "SKIP: clang cannot link libFuzzer (install libclang-rt-14-dev)"
	exit 0
fi

# fuzz_rx and fuzz_cm run side by side under ctest -j and share one clang
# build: two cmake builds at once in one tree race (one deletes the static
# library the other is linking), so configuring and building hold a lock.
exec {build_lock}>"$UROCE_BUILD_DIR/.fuzz-build.lock"
flock "$build_lock"
fuzzer=$UROCE_BUILD_DIR/tests/fuzz/$TARGET
if ! grep -qs 'CMAKE_C_COMPILER_ID:.*Clang\|CMAKE_C_COMPILER:FILEPATH=.*clang' \
	"$UROCE_BUILD_DIR/CMakeCache.txt"; then
	fbuild=$UROCE_BUILD_DIR/fuzz-clang
	fuzzer=$fbuild/tests/fuzz/$TARGET
	if [[ ! -e $fbuild/CMakeCache.txt ]]; then
		log "configuring a clang build in $fbuild"
		cmake -S "$UROCE_SRC_DIR" -B "$fbuild" -DCMAKE_C_COMPILER=clang \
			-DCMAKE_BUILD_TYPE=RelWithDebInfo >"$LOG_DIR/configure.log" 2>&1 ||
			die "cmake configure failed: $(tail -20 "$LOG_DIR/configure.log")"
	fi
	log "building $TARGET"
	cmake --build "$fbuild" --target "$TARGET" -j "$(nproc)" >"$LOG_DIR/build.log" 2>&1 ||
		die "building $TARGET failed: $(tail -30 "$LOG_DIR/build.log")"
else
	cmake --build "$UROCE_BUILD_DIR" --target "$TARGET" >"$LOG_DIR/build.log" 2>&1 ||
		die "building $TARGET failed: $(tail -30 "$LOG_DIR/build.log")"
fi
[[ -x $fuzzer ]] || die "$fuzzer was not built"
flock -u "$build_lock"
exec {build_lock}>&-

# New inputs go to a scratch corpus; the committed one is only read.
mkdir -p "$LOG_DIR/corpus"
log "fuzzing for $SECONDS_TO_FUZZ s from $(ls "$SEEDS" | wc -l) seeds"
rc=0
ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=64:detect_leaks=1} \
	timeout -k 10 $((SECONDS_TO_FUZZ + 120)) "$fuzzer" \
	-max_total_time="$SECONDS_TO_FUZZ" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
	-artifact_prefix="$LOG_DIR/" "$LOG_DIR/corpus" "$SEEDS" \
	>"$LOG_DIR/fuzz.log" 2>&1 || rc=$?

grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::' "$LOG_DIR/fuzz.log" || true
if ((rc == 0)); then
	pass "no crash in $SECONDS_TO_FUZZ s of fuzzing"
else
	fail "$TARGET exited $rc"
	grep -vE '^uroce\[' "$LOG_DIR/fuzz.log" | tail -n 60
	for a in "$LOG_DIR"/crash-* "$LOG_DIR"/leak-* "$LOG_DIR"/timeout-* "$LOG_DIR"/oom-*; do
		[[ -e $a ]] && log "input: $a (replay: $fuzzer $a)"
	done
fi
execs=$(awk '/^stat::number_of_executed_units/ { print $2 }' "$LOG_DIR/fuzz.log")
check "the target ran (${execs:-0} inputs)" test "${execs:-0}" -gt 100
finish

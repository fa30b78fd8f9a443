#!/usr/bin/env bash
# A short soak (tests/unit/test_soak.c: 10 s of mixed RC traffic with small
# random sizes, QP and MR churn) under valgrind's memcheck: no invalid
# access, no use of uninitialised memory (syscall arguments included), no
# leak. Skipped when valgrind is missing and in the sanitizer build
# (valgrind cannot run AddressSanitizer binaries).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd valgrind valgrind
if [[ $UROCE_SANITIZE == 1 ]]; then
	log "SKIP: the sanitizer build: valgrind cannot run AddressSanitizer binaries"
	exit 0
fi
SOAK=$UROCE_BUILD_DIR/tests/test_soak
[[ -x $SOAK ]] || die "$SOAK not found: build uroce first"

out=$LOG_DIR/soak.valgrind.log
rc=0
log "=== test_soak under valgrind (SOAK_SECONDS=10, SOAK_MAX_SIZE=4096)"
# QP timeout 18 (1.07 s): valgrind runs one thread at a time, and a
# progress thread waited longer than retry_cnt x 67 ms for its turn
SOAK_SECONDS=10 SOAK_MAX_SIZE=4096 SOAK_PAIRS=8 SOAK_RSS_KB=0 SOAK_QP_TIMEOUT=18 \
	timeout -k 10 240 valgrind --leak-check=full --show-leak-kinds=definite,indirect,possible \
	--errors-for-leak-kinds=definite,indirect,possible --error-exitcode=1 \
	--num-callers=30 "$SOAK" >"$out" 2>&1 || rc=$?

show() {
	log "----- valgrind log (last 80 lines) -----"
	tail -n 80 "$out"
}

if ((rc == 0)); then
	pass "valgrind exited 0 (no error, no leak)"
else
	fail "valgrind exited $rc ($( ((rc == 124)) && echo "timed out" || echo "errors or leaks"))"
	show
fi
check "the soak itself passed" grep -Eq '^test_soak: [1-9][0-9]* passed, 0 failed$' "$out"
check "ERROR SUMMARY: 0 errors" grep -Eq 'ERROR SUMMARY: 0 errors' "$out"
check "nothing definitely lost" grep -Eq 'definitely lost: 0 bytes|All heap blocks were freed' "$out"
check "nothing possibly lost" grep -Eq 'possibly lost: 0 bytes|All heap blocks were freed' "$out"
grep -E '^soak:|in use at exit|total heap usage' "$out" | sed 's/^==[0-9]*== */  /' || true
finish

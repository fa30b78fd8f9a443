#!/usr/bin/env bash
# Fuzz uroce's connection manager for a bounded time (tests/fuzz/fuzz_cm.c:
# the QP1 packet parser, the CM MAD parser and the CM's receive path with the
# CM thread running), libFuzzer with ASan+UBSan, from the committed corpus
# tests/fuzz/corpus_cm.  Everything else as fuzz_rx.sh, which it runs:
# skipped without clang/libFuzzer, and in the sanitizer build unless
# UROCE_FUZZ_SECONDS is set (tests/unit/test_cm_fuzz_replay.c replays the
# corpus there).  Default 30 s (UROCE_FUZZ_SECONDS).
FUZZ_TARGET=fuzz_cm
FUZZ_CORPUS=corpus_cm
FUZZ_DEFAULT_SECONDS=30
# shellcheck source=tests/integration/fuzz_rx.sh
source "$(dirname "$0")/fuzz_rx.sh"

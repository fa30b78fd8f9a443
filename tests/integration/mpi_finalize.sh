#!/usr/bin/env bash
# The library can be unloaded (issue 11, section 4): Open MPI with
# `--mca pml cm --mca mtl ofi` over libfabric's verbs provider on uroce
# dlclose()s the chain that loaded libibverbs in MPI_Finalize while uroce's
# progress threads still run. Two ranks exchange a message, finalize and
# must go on running (the library is linked -z nodelete; without it rank 0
# dies with SIGSEGV in MPI_Finalize).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd mpirun openmpi-bin
require_cmd mpicc libopenmpi-dev
require_cmd fi_info libfabric-bin
require_uroce

exe=$LOG_DIR/mpi_finalize
mpicc -O1 -o "$exe" "$UROCE_SRC_DIR/tests/tools/mpi_finalize.c" >"$LOG_DIR/mpicc.log" 2>&1 ||
	die "mpicc failed: $(cat "$LOG_DIR/mpicc.log")"

# libfabric must see a uroce device through its verbs provider
if ! timeout 60 "${ON_UROCE[@]}" fi_info -p verbs >"$LOG_DIR/fi_info.log" 2>&1 ||
	! grep -q 'domain: uroce_' "$LOG_DIR/fi_info.log"; then
	die "libfabric's verbs provider lists no uroce domain (fi_info -p verbs): $(head -5 "$LOG_DIR/fi_info.log")"
fi

mpi_env=(-x "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" -x "FI_PROVIDER=verbs;ofi_rxd")
if [[ -n $UROCE_PRELOAD ]]; then
	mpi_env+=(-x "LD_PRELOAD=$UROCE_PRELOAD" -x "ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}")
fi
root=()
[[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)

log "=== mpirun -np 2 --mca pml cm --mca mtl ofi (verbs;ofi_rxd on uroce)"
rc=0
timeout 120 mpirun "${root[@]}" --oversubscribe -np 2 --mca pml cm --mca mtl ofi \
	--mca btl self "${mpi_env[@]}" "$exe" >"$LOG_DIR/mpirun.log" 2>&1 || rc=$?
sed 's/^/    /' "$LOG_DIR/mpirun.log" | tail -20
check "mpirun exits 0 (got $rc)" test "$rc" = 0
check "the message went both ways" grep -q "rank 0 got 4243" "$LOG_DIR/mpirun.log"
check "both ranks run on after MPI_Finalize" \
	test "$(grep -c 'still running after MPI_Finalize' "$LOG_DIR/mpirun.log")" = 2
check "no segmentation fault" bash -c "! grep -qi 'segmentation fault\|signal 11' '$LOG_DIR/mpirun.log'"
finish

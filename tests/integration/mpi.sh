#!/usr/bin/env bash
# Open MPI 4.1 (pml ucx, osc ucx) and MPICH 4.0 (ch4:ucx) run an MPI program
# on uroce under `uroce run`, 2 and 4 ranks launched locally: ping-pong
# 1 B..4 MiB, an allreduce and MPI_Put/Get/Accumulate, every result checked
# (tests/tools/mpi_check.c, built here with each MPI's mpicc). UCX_TLS=rc and
# UCX_NET_DEVICES=uroce_lo:1 leave UCX nothing but uroce (no shared memory,
# no TCP), MPICH_NOLOCAL keeps MPICH's own shared memory out, and UCX's
# lane report (UCX_LOG_LEVEL=info) must name rc_verbs on uroce_lo in every
# rank and nothing else.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd mpicc.openmpi libopenmpi-dev
require_cmd mpirun.openmpi openmpi-bin
require_cmd mpicc.mpich libmpich-dev
require_cmd mpirun.mpich mpich
require_uroce
UROCE=$UROCE_BIN_DIR/uroce
dev=uroce_lo
export UCX_TLS=rc UCX_NET_DEVICES=$dev:1 UCX_LOG_LEVEL=info UCX_WARN_UNUSED_ENV_VARS=n

mpicc.openmpi -O2 -Wall -o "$LOG_DIR/mpi_check.openmpi" "$UROCE_SRC_DIR/tests/tools/mpi_check.c"
mpicc.mpich -O2 -Wall -o "$LOG_DIR/mpi_check.mpich" "$UROCE_SRC_DIR/tests/tools/mpi_check.c"

ompi_root=()
[[ $(id -u) -eq 0 ]] && ompi_root=(--allow-run-as-root)

# job NAME RANKS CMD...: run, then check the result line and UCX's lanes.
job() {
	local name=$1 ranks=$2 logf=$LOG_DIR/$1.log rc=0
	shift 2
	log "=== $name: $*"
	timeout -k 5 240 "$@" >"$logf" 2>&1 </dev/null || rc=$?
	local lanes others
	lanes=$(grep -Ec "ep_cfg\[[0-9]+\]: tag\(rc_verbs/$dev:1\)" "$logf" || true)
	others=$(grep -E 'ep_cfg\[[0-9]+\]:' "$logf" | sed -E 's/.*ep_cfg\[[0-9]+\]://' |
		grep -oE '\([^)]*\)' | grep -vcx "(rc_verbs/$dev:1)" || true)
	if ((rc == 0)) && grep -q "^mpi_check: OK: $ranks ranks" "$logf" &&
		((lanes >= ranks && others == 0)); then
		pass "$name: $(grep '^mpi_check:' "$logf"); $lanes tag lanes on rc_verbs/$dev:1, no other transport"
	else
		fail "$name: $(explain_rc "$rc"), $lanes tag lanes on rc_verbs/$dev:1, $others lanes elsewhere"
		tail -n 40 "$logf"
	fi
}

for n in 2 4; do
	job openmpi_np$n $n "$UROCE" run mpirun.openmpi "${ompi_root[@]}" --oversubscribe -np $n \
		--mca pml ucx --mca osc ucx --mca btl self \
		-x UCX_TLS -x UCX_NET_DEVICES -x UCX_LOG_LEVEL -x UCX_WARN_UNUSED_ENV_VARS \
		"$LOG_DIR/mpi_check.openmpi"
	job mpich_np$n $n env MPIR_CVAR_NOLOCAL=1 "$UROCE" run mpirun.mpich -n $n \
		"$LOG_DIR/mpi_check.mpich"
done
finish

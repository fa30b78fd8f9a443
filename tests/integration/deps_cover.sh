#!/usr/bin/env bash
# Every tool a test or script calls is installed by scripts/deps.sh, and no
# test half-runs when one is missing (issue 11, section 1):
#   - each `require_cmd CMD PKG` / `require_py_module MOD PKG` in tests/
#     names a package of deps.sh (or an Essential one, always present);
#   - each external tool used in tests/, bench/ or scripts/ (a table below,
#     tool -> Debian package) comes from a package of deps.sh - except the
#     benchmark's own extras, which bench/run.sh installs itself;
#   - no integration test skips part of itself with `if command -v`, and no
#     precondition is silenced with `ethtool ... || true` (the half-run that
#     left segmentation offload on and broke interop_mode's capture check).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

DEPS=$UROCE_SRC_DIR/scripts/deps.sh
[[ -r $DEPS ]] || die "$DEPS not found"
# the PACKAGES=( ... ) array of deps.sh, one name a line
mapfile -t PKGS < <(sed -n '/^PACKAGES=(/,/^)/p' "$DEPS" | sed '1d;$d' | tr -s ' \t' '\n' | grep .)
((${#PKGS[@]} > 5)) || die "cannot read the package list of $DEPS"
in_deps() {
	local p
	for p in "${PKGS[@]}"; do [[ $p == "$1" ]] && return 0; done
	# Essential packages are on every Debian system
	case $1 in coreutils | util-linux | bash | grep | sed | findutils | gawk | mawk) return 0 ;; esac
	return 1
}

cd "$UROCE_SRC_DIR"
mapfile -t SCRIPTS < <(ls tests/integration/*.sh tests/abi/*.sh bench/*.sh scripts/*.sh)

# 1. the packages tests name when they skip
while read -r file pkg; do
	if in_deps "$pkg"; then
		pass "$file: package $pkg is in deps.sh"
	else
		fail "$file requires package $pkg, which scripts/deps.sh does not install"
	fi
done < <(grep -HE '^\s*require_(cmd|py_module) ' tests/integration/*.sh tests/abi/*.sh |
	grep -v 'local cmd' | awk -F: '{ split($2, a, " "); if (a[3] != "") print $1, a[3] }' |
	sort -u)

# 2. tools called anywhere, and the package that has them
declare -A TOOL=(
	[ethtool]=ethtool [tshark]=tshark [pgrep]=procps [valgrind]=valgrind [qperf]=qperf
	[ib_write_bw]=perftest [ib_read_bw]=perftest [ib_send_bw]=perftest
	[ib_atomic_bw]=perftest [ibv_rc_pingpong]=ibverbs-utils [ibv_devinfo]=ibverbs-utils
	[ibv_devices]=ibverbs-utils [ibv_asyncwatch]=ibverbs-utils [gcovr]=gcovr [clang]=clang
	[readelf]=build-essential [objdump]=build-essential [ss]=iproute2 [ip]=iproute2
	[cmake]=cmake
)
for t in "${!TOOL[@]}"; do
	users=$(grep -lwE -- "$t" "${SCRIPTS[@]}" | tr '\n' ' ')
	[[ -n $users ]] || continue
	if in_deps "${TOOL[$t]}"; then
		pass "$t (${TOOL[$t]}) is installed by deps.sh"
	else
		fail "$t is called by $users but its package ${TOOL[$t]} is not in scripts/deps.sh"
	fi
done

# 3. no half-runs
half=$(grep -nE '^\s*if command -v|command -v [^ ]+ >/dev/null (&&|\|\|) ' tests/integration/*.sh |
	grep -v '^tests/integration/lib.sh:' || true)
check "no integration test skips a part when a tool is missing${half:+: $half}" test -z "$half"
silenced=$(grep -nE 'ethtool .*\|\| *true' "${SCRIPTS[@]}" | grep -v "^tests/integration/deps_cover.sh:" || true)
check "no ethtool precondition silenced with || true${silenced:+: $silenced}" test -z "$silenced"
finish

#!/usr/bin/env bash
# Install the Debian packages uroce needs to build and test. Idempotent: when
# everything is installed already it does not touch apt at all.
set -euo pipefail

PACKAGES=(
	build-essential cmake pkg-config
	libibverbs-dev ibverbs-utils rdma-core perftest python3-pyverbs
	librdmacm1 rdmacm-utils qperf librdmacm-dev librpma-dev
	tshark python3-scapy
	gcovr clang libclang-rt-14-dev valgrind
	libisal-dev iproute2
	ethtool procps python3
	infiniband-diags ucx-utils libucx0 libucx-dev openmpi-bin libopenmpi-dev mpich libmpich-dev libfabric-bin
)

# One dpkg-query for all: "name status" for each package dpkg knows.
declare -A status=()
while read -r name state; do
	status[${name%%:*}]=$state
done < <(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)

missing=()
for pkg in "${PACKAGES[@]}"; do
	[[ ${status[$pkg]-} == installed ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
	echo "deps: all ${#PACKAGES[@]} packages are installed"
	exit 0
fi

echo "deps: installing ${missing[*]}"
SUDO=()
if [[ $(id -u) -ne 0 ]]; then
	command -v sudo >/dev/null || {
		echo "deps: not root and no sudo: install ${missing[*]} by hand" >&2
		exit 1
	}
	SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture: answer no, quietly.
echo "wireshark-common wireshark-common/install-setuid boolean false" |
	"${SUDO[@]}" debconf-set-selections 2>/dev/null || true
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "deps: done"

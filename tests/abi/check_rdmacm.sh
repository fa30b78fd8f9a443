#!/bin/bash
# ABI check of the built librdmacm.so.1 against rdma-core 44 (Debian 12),
# and a load test of its consumers.  Environment (set by ctest):
#   UROCE_LIB_DIR  directory holding the built librdmacm.so.1 (required)
#   UROCE_SRC_DIR  source tree; the required-symbol list is read from
#                  $UROCE_SRC_DIR/../shared/abi/rdmacm-required-symbols.txt when
#                  it exists, else from the copy next to this script.
# Checks:
#   1. every symbol@VERSION of rdmacm-required-symbols.txt is a default (@@)
#      FUNC version;
#   2. the version definitions are rdma-core's: BASE + RDMACM_1.0 .. 1.3, each
#      the parent of the next;
#   3. the default export list is exactly rdma-core 44's
#      (rdmacm-44-exports.txt, from Debian's librdmacm1);
#   4. every consumer the list names that is installed (tools and shared
#      objects) relocates against the build with `ldd -r`: librdmacm.so.1 and
#      libibverbs.so.1 come from the build and no symbol or version is missing.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
libdir=$(readlink -f "${UROCE_LIB_DIR:?UROCE_LIB_DIR must point at the built library directory}")
lib=$libdir/librdmacm.so.1
req=$here/rdmacm-required-symbols.txt
if [ -n "${UROCE_SRC_DIR:-}" ] && [ -r "$UROCE_SRC_DIR/../shared/abi/rdmacm-required-symbols.txt" ]; then
	req=$UROCE_SRC_DIR/../shared/abi/rdmacm-required-symbols.txt
fi

pass=0
fail=0
skip=0
ok() { pass=$((pass + 1)); }
bad() {
	fail=$((fail + 1))
	echo "FAIL: $*"
}
finish() {
	echo "$pass passed, $fail failed ($skip consumers not installed)"
	[ "$fail" -eq 0 ]
	exit
}
[ -r "$lib" ] || { bad "$lib does not exist"; finish; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

readelf --dyn-syms -W "$lib" | awk '$7 != "UND" && $7 != "ABS" && $8 ~ /@/ {print $8, $4}' >"$tmp/defined"
declare -A dtype
while read -r symver type; do dtype[$symver]=$type; done <"$tmp/defined"

# 1. required symbols
n=0
while IFS=$'\t' read -r symver _; do
	case $symver in '#'* | '') continue ;; esac
	n=$((n + 1))
	sym=${symver%@*} ver=${symver##*@}
	if [ "${dtype[$sym@@$ver]:-}" = FUNC ]; then ok; else bad "required $sym@@$ver missing"; fi
done <"$req"
echo "checked $n required symbols ($req)"

# 2. version definitions
readelf -V "$lib" | sed -n '/Version definition section/,/^$/p' >"$tmp/verdef"
ndef=$(sed -n "s/.*'.gnu.version_d' contains \([0-9]*\) entries.*/\1/p" "$tmp/verdef")
if [ "${ndef:-0}" = 5 ]; then ok; else bad "expected 5 version definitions, found ${ndef:-none}"; fi
prev=
for v in RDMACM_1.0 RDMACM_1.1 RDMACM_1.2 RDMACM_1.3; do
	parent=$(awk -v n="$v" '/Name: / { cur = $NF; next } /Parent 1:/ && cur == n { print $NF }' "$tmp/verdef")
	if [ "$parent" = "$prev" ]; then ok; else bad "$v: parent '${parent}', expected '${prev}'"; fi
	prev=$v
done

# 3. the export list
awk '$2 != "" {print $1}' "$tmp/defined" | grep '@@' | sort >"$tmp/exports"
if diff -u "$here/rdmacm-44-exports.txt" "$tmp/exports" >"$tmp/diff"; then
	ok
else
	bad "exports differ from rdma-core 44:"
	cat "$tmp/diff"
fi

# 4. consumers
consumers=$(awk -F'\t' '!/^#/ && NF > 1 {print $2}' "$req" | tr ',' '\n' | sort -u)
for c in $consumers; do
	path=$(command -v "$c" 2>/dev/null || true)
	if [ -z "$path" ]; then
		path=$(find /usr/lib /usr/lib64 -name "$c" -type f 2>/dev/null | head -1)
	fi
	if [ -z "$path" ]; then
		skip=$((skip + 1))
		continue
	fi
	LD_LIBRARY_PATH=$libdir ldd -r "$path" >"$tmp/ldd" 2>&1
	if grep -Eq 'undefined symbol|not found|version `' "$tmp/ldd"; then
		bad "$c ($path):"
		grep -E 'undefined symbol|not found|version `' "$tmp/ldd" | head -5 | sed 's/^/      /'
	elif grep -q 'librdmacm.so.1' "$tmp/ldd" && ! grep -q "librdmacm.so.1 => $libdir/" "$tmp/ldd"; then
		bad "$c: librdmacm.so.1 not from $libdir"
	else
		ok
	fi
done
finish

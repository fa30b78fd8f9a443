#!/bin/bash
# ABI check of the built libibverbs.so.1 against rdma-core 44 (Debian 12).
# Builds nothing.  Environment (set by ctest, see tests/CMakeLists.txt):
#   UROCE_LIB_DIR  directory holding the built libibverbs.so.1 (required)
#   UROCE_SRC_DIR  source tree; the required-symbol list is read from
#                  $UROCE_SRC_DIR/../shared/abi/required-symbols.txt when it
#                  exists, else from the copy next to this script.
# Checks:
#   1. every symbol@VERSION of required-symbols.txt is defined as a DEFAULT
#      (@@) version, with the right type (the DATA one: a 1-byte object);
#   2. the version definitions are exactly rdma-core's: BASE + 13 nodes,
#      same parent chain, none WEAK, none empty;
#   3. the whole default export list of rdma-core 44 (rdma-core-44-exports.txt)
#      is covered, and nothing else is exported (no leaked internals).
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lib=${UROCE_LIB_DIR:?UROCE_LIB_DIR must point at the built library directory}/libibverbs.so.1
req=$here/required-symbols.txt
if [ -n "${UROCE_SRC_DIR:-}" ] && [ -r "$UROCE_SRC_DIR/../shared/abi/required-symbols.txt" ]; then
	req=$UROCE_SRC_DIR/../shared/abi/required-symbols.txt
fi
exports=$here/rdma-core-44-exports.txt

pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
	fail=$((fail + 1))
	echo "FAIL: $*"
}
finish() {
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
	exit
}

for tool in readelf objdump; do
	command -v $tool >/dev/null || { bad "$tool not installed"; finish; }
done
if [ ! -r "$lib" ]; then
	bad "$lib does not exist"
	finish
fi
echo "library:  $(readlink -f "$lib")"
echo "required: $req"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Defined dynamic symbols: "name@@VER type size" (default versions) or
# "name@VER ..." (hidden, non-default versions).  Version-node ABS symbols
# are skipped.
readelf --dyn-syms -W "$lib" |
	awk '$7 != "UND" && $7 != "ABS" && $8 ~ /@/ {print $8, $4, $3}' >"$tmp/defined"
# Cross-check with objdump -T: a default version is printed bare, a hidden
# one in parentheses.
objdump -T "$lib" | awk '$0 !~ /\*UND\*/ && $0 !~ /\*ABS\*/ && NF >= 7 {
	v = $(NF - 1); if (v ~ /^\(/) next; print $NF "@@" v }' | sort >"$tmp/objdump"

if [ ! -s "$tmp/defined" ]; then
	bad "no versioned symbols in $lib (version script not applied?)"
	finish
fi
declare -A dtype dsize default_ver
while read -r symver type size; do
	dtype[$symver]=$type
	dsize[$symver]=$size
	[[ $symver == *@@* ]] && default_ver[${symver%@@*}]=$symver
done <"$tmp/defined"
declare -A in_objdump
while read -r symver; do in_objdump[$symver]=1; done <"$tmp/objdump"

# ---- 1. required symbols ----
nreq=0
while IFS=$'\t' read -r symver kind _; do
	case $symver in '#'* | '') continue ;; esac
	nreq=$((nreq + 1))
	sym=${symver%@*}
	ver=${symver##*@}
	if [ -z "${dtype[$sym@@$ver]:-}" ]; then
		other=${default_ver[$sym]:-}
		bad "required $sym@@$ver missing${other:+ (found: $other)}"
		continue
	fi
	type=${dtype[$sym@@$ver]}
	size=${dsize[$sym@@$ver]}
	case $kind in
	FUNC) want=FUNC ;;
	DATA) want=OBJECT ;;
	*) want=$kind ;;
	esac
	if [ "$type" != "$want" ]; then
		bad "required $sym@@$ver is $type, expected $want"
	elif [ "$want" = OBJECT ] && [ "$sym" = verbs_allow_disassociate_destroy ] && [ "$size" != 1 ]; then
		bad "$sym is $size bytes, expected 1 (bool)"
	elif [ -z "${in_objdump[$sym@@$ver]:-}" ]; then
		bad "required $sym@@$ver not a default version in objdump -T"
	else
		ok
	fi
done <"$req"
echo "checked $nreq required symbols"

# ---- 2. version definitions ----
readelf -V "$lib" | sed -n '/Version definition section/,/^$/p' >"$tmp/verdef"
ndef=$(sed -n "s/.*Version definition section '.gnu.version_d' contains \([0-9]*\) entries.*/\1/p" "$tmp/verdef")
# uroce's own private node for its librdmacm (UROCE_CM_PRIVATE_1, docs/cm.md)
# comes on top of rdma-core's 13; its symbols are the only exports allowed
# beyond rdma-core 44's list.
uroce_private="uroce_cm_qp1_attach@@UROCE_CM_PRIVATE_1 uroce_cm_qp1_send@@UROCE_CM_PRIVATE_1"
if [ "${ndef:-0}" -eq 15 ]; then ok; else bad "expected 15 version definitions (BASE + 13 nodes + UROCE_CM_PRIVATE_1), found ${ndef:-none}"; fi
if grep -q 'Flags: WEAK' "$tmp/verdef"; then
	bad "WEAK version definition(s): $(grep 'Flags: WEAK' "$tmp/verdef" | sed 's/.*Name: //' | tr '\n' ' ')"
else
	ok
fi
nodes="IBVERBS_1.0 IBVERBS_1.1 IBVERBS_1.5 IBVERBS_1.6 IBVERBS_1.7 IBVERBS_1.8 IBVERBS_1.9 IBVERBS_1.10 IBVERBS_1.11 IBVERBS_1.12 IBVERBS_1.13 IBVERBS_1.14 IBVERBS_PRIVATE_34"
prev=
for n in $nodes; do
	# "Name: X" line, then the "Parent 1: Y" line when X has a parent.
	parent=$(awk -v n="$n" '
		/Name: / { cur = $NF; next }
		/Parent 1: / { if (cur == n) print $NF }' "$tmp/verdef")
	if ! grep -q "Name: $n\$" "$tmp/verdef"; then
		bad "version node $n not defined"
		prev=$n
		continue
	fi
	want=$prev
	[ "$n" = IBVERBS_1.0 ] && want=
	[ "$n" = IBVERBS_PRIVATE_34 ] && want=
	if [ "$parent" != "$want" ]; then
		bad "version node $n has parent '${parent}', expected '${want}'"
	elif ! awk -v v="$n" '{split($1, a, "@@"); if (a[2] == v) f = 1} END {exit !f}' "$tmp/defined"; then
		bad "version node $n is empty"
	else
		ok
	fi
	prev=$n
done
extra=$(awk '/Name: / && !/Flags: BASE/ {print $NF}' "$tmp/verdef" | grep -vxF -f <(tr ' ' '\n' <<<"$nodes UROCE_CM_PRIVATE_1"))
if [ -n "$extra" ]; then bad "unexpected version nodes: $extra"; else ok; fi

# ---- 3. coverage of rdma-core 44's default exports, and nothing more ----
nexp=0
while IFS=$'\t' read -r symver type size; do
	case $symver in '#'* | '') continue ;; esac
	nexp=$((nexp + 1))
	if [ -z "${dtype[$symver]:-}" ]; then
		bad "rdma-core 44 export $symver missing"
	elif [ "${dtype[$symver]}" != "$type" ]; then
		bad "$symver is ${dtype[$symver]}, rdma-core has $type"
	elif [ "$type" = OBJECT ] && [ "${dsize[$symver]}" != "$size" ]; then
		bad "$symver is ${dsize[$symver]} bytes, rdma-core has $size"
	else
		ok
	fi
done <"$exports"
echo "checked $nexp rdma-core 44 exports"
{ grep -v '^#' "$exports" | cut -f1; tr ' ' '\n' <<<"$uroce_private"; } | sort >"$tmp/expected"
awk '$1 ~ /@@/ {print $1}' "$tmp/defined" | sort >"$tmp/actual"
leaked=$(comm -13 "$tmp/expected" "$tmp/actual")
if [ -n "$leaked" ]; then
	bad "exported beyond rdma-core 44's list: $(tr '\n' ' ' <<<"$leaked")"
else
	ok
fi
# Hidden compatibility aliases (name@VER, not default) are allowed: rdma-core
# has some for IBVERBS_1.0 binaries.  Just list them.
compat=$(awk '$1 !~ /@@/ {print $1}' "$tmp/defined")
[ -z "$compat" ] || echo "note: non-default (compat) versions: $(tr '\n' ' ' <<<"$compat")"
# Unversioned global definitions would also leak (no version script match).
unver=$(readelf --dyn-syms -W "$lib" |
	awk '$5 == "GLOBAL" || $5 == "WEAK" {if ($7 != "UND" && $8 !~ /@/ && $7 != "ABS") print $8}')
if [ -n "$unver" ]; then bad "unversioned exports: $(tr '\n' ' ' <<<"$unver")"; else ok; fi

finish

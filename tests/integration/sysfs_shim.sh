#!/usr/bin/env bash
# Device visibility (src/sysfs_shim, docs/design.md "Device visibility"):
# under `uroce run` the uroce devices appear in /sys/class/infiniband,
# /sys/class/infiniband_verbs and /dev/infiniband with the values the verbs
# API reports, tools that read sysfs (ibstat, ibstatus) list them, and every
# other path is untouched.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd ibstat infiniband-diags
require_cmd ibstatus infiniband-diags
require_cmd ibv_devinfo ibverbs-utils
require_uroce
UROCE=$UROCE_BIN_DIR/uroce
run() { timeout 60 "$UROCE" run "$@"; }

dev=$(first_device) || die "no uroce device"
log "=== device $dev"

out=$(run ibstat 2>&1) || { log "$out"; die "uroce run ibstat failed"; }
log "$out"
has() { grep -Eq -- "$1" <<<"$out"; }
check "ibstat lists CA '$dev'" has "^CA '$dev'"
check "ibstat: port 1 Active, LinkUp, Ethernet" \
	bash -c "grep -A14 \"^CA '$dev'\" <<<\"\$0\" | grep -q 'State: Active' &&
		grep -A14 \"^CA '$dev'\" <<<\"\$0\" | grep -q 'Physical state: LinkUp' &&
		grep -A16 \"^CA '$dev'\" <<<\"\$0\" | grep -q 'Link layer: Ethernet'" "$out"

out=$(run ibstatus "$dev" 2>&1) || { log "$out"; die "uroce run ibstatus $dev failed"; }
log "$out"
check "ibstatus: $dev port 1 is 4: ACTIVE" has "state:[[:space:]]+4: ACTIVE"
out=$(run ibstatus 2>&1) || { log "$out"; die "uroce run ibstatus failed"; }
check "ibstatus without arguments (cd into the directory) lists $dev" has "device '$dev' port 1"

# The values are the verbs API's: GID 0 and the node GUID as ibv_devinfo shows them.
info=$(timeout 30 "${ON_UROCE[@]}" ibv_devinfo -v -d "$dev")
gid0=$(awk '/GID\[[ \t]*0\]:/ { sub(/^[^:]*:[ \t]*/, ""); sub(/,.*/, ""); print; exit }' <<<"$info")
guid=$(awk '/node_guid:/ { print $2; exit }' <<<"$info")
sys_gid0=$(run cat "/sys/class/infiniband/$dev/ports/1/gids/0")
sys_guid=$(run cat "/sys/class/infiniband/$dev/node_guid")
expanded=$(/usr/bin/python3 -c 'import ipaddress,sys; print(ipaddress.ip_address(sys.argv[1]).exploded)' "$gid0")
log "GID 0: verbs $gid0 ($expanded), sysfs $sys_gid0; GUID: verbs $guid, sysfs $sys_guid"
check "gids/0 is ibv_query_gid's GID 0" test "$(tr -d : <<<"$sys_gid0")" == "$(tr -d : <<<"$expanded")"
check "node_guid is ibv_query_device's" test "$sys_guid" == "$guid"
check "gid_attrs/types/0 is RoCE v2" test "$(run cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/0")" == "RoCE v2"
check "ports/1/link_layer is Ethernet" test "$(run cat "/sys/class/infiniband/$dev/ports/1/link_layer")" == Ethernet

# /dev/infiniband/uverbsN: a character device anyone may open read-write (UCX's test).
uverbs=$(run cat /sys/class/infiniband_verbs/uverbs0/ibdev)
log "uverbs0 is $uverbs"
check "infiniband_verbs/uverbs0/ibdev names a uroce device" test -n "$uverbs"
check "stat: /dev/infiniband/uverbs0 is a character device 231:192" \
	test "$(run stat -c '%F %t:%T' /dev/infiniband/uverbs0)" == "character special file e7:c0"
check "test -c -r -w /dev/infiniband/uverbs0 (access)" run bash -c 'test -c /dev/infiniband/uverbs0 -a -r /dev/infiniband/uverbs0 -a -w /dev/infiniband/uverbs0'
check "opens read-write" run bash -c 'exec 3<>/dev/infiniband/uverbs0'
check "readlink device/driver ends in /uroce" \
	bash -c '[[ $(timeout 60 "$0" run readlink "/sys/class/infiniband/$1/device/driver") == */uroce ]]' "$UROCE" "$dev"
check "realpath of a served path is that path" \
	test "$(run realpath "/sys/class/infiniband/$dev/ports/1")" == "/sys/class/infiniband/$dev/ports/1"
check "ls /sys/class/infiniband lists $dev" bash -c 'timeout 60 "$0" run ls /sys/class/infiniband | grep -qx "$1"' "$UROCE" "$dev"

# Errors are the file system's; other paths pass through.
check "a missing served file: ENOENT" \
	bash -c 'timeout 60 "$0" run cat /sys/class/infiniband/nosuchdev/node_type 2>&1 | grep -q "No such file"' "$UROCE"
check "other paths pass through (/proc/self/status)" run grep -q '^Name:' /proc/self/status
check "/sys/class/net passes through" bash -c 'timeout 60 "$0" run ls /sys/class/net | grep -qx lo' "$UROCE"
check "UROCE_SYSFS=0: no interposer, no tree" \
	bash -c '! UROCE_SYSFS=0 timeout 60 "$0" run cat /sys/class/infiniband/$1/node_type 2>/dev/null' "$UROCE" "$dev"
finish

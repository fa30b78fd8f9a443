#!/usr/bin/env bash
# rdma-core's ibv_devices and ibv_devinfo see a uroce device whose port is an
# active Ethernet port with RoCEv2 GIDs; `uroce devices --json` agrees.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

require_cmd ibv_devices ibverbs-utils
require_cmd ibv_devinfo ibverbs-utils
require_uroce

log "=== ibv_devices"
devices_out=$(timeout 30 "${ON_UROCE[@]}" ibv_devices 2>&1) || {
	log "$devices_out"
	die "ibv_devices failed"
}
log "$devices_out"
dev=$(awk 'NR > 2 && NF >= 1 { print $1; exit }' <<<"$devices_out")
check "ibv_devices lists a device (got '${dev:-none}')" test -n "$dev"
[[ -n $dev ]] || { finish; exit 1; }

log "=== ibv_devinfo -v -d $dev"
info=$(timeout 30 "${ON_UROCE[@]}" ibv_devinfo -v -d "$dev" 2>&1) || {
	log "$info"
	die "ibv_devinfo -v -d $dev failed"
}
log "$info"

has() { grep -Eq -- "$1" <<<"$info"; }
check "hca_id is $dev" has "^hca_id:[[:space:]]+$dev\$"
check "port 1 exists" has "^[[:space:]]+port:[[:space:]]+1\$"
check "port state is PORT_ACTIVE" has "^[[:space:]]+state:[[:space:]]+PORT_ACTIVE"
check "link_layer is Ethernet" has "^[[:space:]]+link_layer:[[:space:]]+Ethernet"
check "a GID has type RoCE v2" has "GID\[[[:space:]]*[0-9]+\]:.*RoCE v2"

# GID[0]: a non-zero address of type RoCE v2 (uroce: ::ffff:a.b.c.d).
gid0=$(awk '/GID\[[ \t]*0\]:/ { sub(/^[^:]*:[ \t]*/, ""); print; exit }' <<<"$info")
log "GID[0] line: '${gid0:-missing}'"
gid0_addr=${gid0%%,*}
nonzero_gid() { [[ -n $1 && $1 =~ [1-9a-fA-F] ]]; }
check "GID[0] is non-zero ('$gid0_addr')" nonzero_gid "$gid0_addr"
check "GID[0] is RoCE v2" test "${gid0##*, }" = "RoCE v2"

log "=== uroce devices --json"
if [[ -x $UROCE_BIN_DIR/uroce ]]; then
	json=$(timeout 30 "$UROCE_BIN_DIR/uroce" devices --json 2>&1) || {
		log "$json"
		die "uroce devices --json failed"
	}
	log "$json"
	check "uroce devices --json describes $dev like ibv_devinfo" \
		/usr/bin/python3 -c '
import json, sys
devs = json.loads(sys.argv[1])
d = next(d for d in devs if d["name"] == sys.argv[2])
p = d["ports"][0]
assert d["phys_port_cnt"] >= 1, d
assert p["port"] == 1 and p["state"].startswith("PORT_ACTIVE"), p
assert p["link_layer"] == "Ethernet", p
assert p["active_mtu"] in (256, 512, 1024, 2048, 4096), p
assert any(g["type"] == "RoCE v2" for g in p["gids"]), p
assert p["gids"][0]["index"] == 0 and p["gids"][0]["gid"] == sys.argv[3], p
' "$json" "$dev" "$gid0_addr"
else
	fail "$UROCE_BIN_DIR/uroce is missing"
fi

finish

#!/usr/bin/env bash
# rdma-core's Python bindings (pyverbs, Debian's python3-pyverbs) load uroce
# as their libibverbs: list the devices, open one, query device, port, GID.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

# Debian's interpreter: pyverbs is installed for it, not for another python3
# that may come first on PATH.
PY=/usr/bin/python3
require_cmd "$PY" python3
require_uroce
# (Only whether the package is there: loading it is what the test checks.)
if ! env -u LD_LIBRARY_PATH "$PY" -c \
	'import importlib.util, sys; sys.exit(importlib.util.find_spec("pyverbs") is None)'; then
	log "SKIP: pyverbs is not installed (install the Debian package python3-pyverbs)"
	exit 0
fi

# pyverbs imports every ibv_* symbol its modules use (and librdmacm's) at
# load time, so this also checks that the library exports all of them.
log "=== import pyverbs.device and list devices"
check "pyverbs lists at least one device" \
	timeout 60 "${ON_UROCE[@]}" "$PY" -c 'import pyverbs.device as d; l=d.get_device_list(); print(l); assert len(l)>=1'

log "=== open the first device and query it"
check "pyverbs opens the device and queries device, port and GID" \
	timeout 60 "${ON_UROCE[@]}" "$PY" - <<'PYEOF'
import pyverbs.device as d
from pyverbs.device import Context

devs = d.get_device_list()
name = devs[0].name.decode() if isinstance(devs[0].name, bytes) else devs[0].name
print("device:", name)

ctx = Context(name=name)
attr = ctx.query_device()
print("fw_version:", attr.fw_version, "phys_port_cnt:", attr.phys_port_cnt,
      "max_qp:", attr.max_qp, "max_cqe:", attr.max_cqe, "max_mr_size:", attr.max_mr_size)
assert attr.phys_port_cnt >= 1, "no ports"
assert attr.max_qp > 0 and attr.max_cqe > 0 and attr.max_mr_size > 0, "zero limits"

port = ctx.query_port(1)
print("port 1: state", port.state, "link_layer", port.link_layer,
      "active_mtu", port.active_mtu, "gid_tbl_len", port.gid_tbl_len)
assert port.state == 4, "port 1 is not PORT_ACTIVE (4)"
assert port.link_layer == 2, "port 1 link layer is not Ethernet (2)"
assert port.gid_tbl_len >= 1, "empty GID table"

gid = ctx.query_gid(1, 0)
print("GID[0]:", gid.gid)
assert gid.gid.replace("0", "").replace(":", "") != "", "GID[0] is zero"
ctx.close()
print("pyverbs OK")
PYEOF

finish

#!/usr/bin/env bash
# rdma-core's Python bindings (pyverbs) on uroce's ODP, device memory and
# parent domains, as another program than uroce's own tests uses them:
# odp_caps and max_dm_size from query_device_ex, a DM with copy_to/from_dm
# and a zero-based DM MR, an ODP MR, a parent domain whose allocator
# pyverbs's callbacks serve for a CQ and a QP, and the matching frees.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3 # Debian's interpreter: pyverbs is installed for it
require_cmd "$PY" python3
require_uroce
if ! env -u LD_LIBRARY_PATH "$PY" -c \
	'import importlib.util, sys; sys.exit(importlib.util.find_spec("pyverbs") is None)'; then
	die "pyverbs is not installed (scripts/deps.sh installs python3-pyverbs)"
fi

log "=== pyverbs: ODP, DM, parent domain"
check "pyverbs drives ODP, device memory and a parent domain's allocators" \
	timeout 60 "${ON_UROCE[@]}" "$PY" - <<'PYEOF'
from pyverbs.device import Context, DM, AllocDmAttr
from pyverbs.pd import PD, ParentDomainInitAttr, ParentDomain, ParentDomainContext
from pyverbs.mr import MR, DMMR
from pyverbs.cq import CQEX, CqInitAttrEx
from pyverbs.qp import QPCap, QPInitAttrEx, QPEx
import pyverbs.enums as e
import pyverbs.mem_alloc as mem

ctx = Context(name="uroce_lo")
attr = ctx.query_device_ex()
odp = attr.odp_caps
print("general_odp_caps", odp.general_caps, "rc", odp.rc_odp_caps, "ud", odp.ud_odp_caps,
      "max_dm_size", attr.max_dm_size)
assert odp.general_caps & e.IBV_ODP_SUPPORT and odp.general_caps & e.IBV_ODP_SUPPORT_IMPLICIT
assert odp.rc_odp_caps & e.IBV_ODP_SUPPORT_WRITE and odp.ud_odp_caps & e.IBV_ODP_SUPPORT_SEND
assert attr.max_dm_size > 0

dm = DM(ctx, AllocDmAttr(length=4096))
dm.copy_to_dm(64, b"device memory on uroce", 22)
got = dm.copy_from_dm(64, 22)
print("copy_from_dm:", got)
assert got == b"device memory on uroce"
pd = PD(ctx)
dmmr = DMMR(pd, 2048, e.IBV_ACCESS_ZERO_BASED | e.IBV_ACCESS_LOCAL_WRITE, dm, 1024)
odp_mr = MR(pd, 1 << 20, e.IBV_ACCESS_ON_DEMAND | e.IBV_ACCESS_LOCAL_WRITE |
            e.IBV_ACCESS_REMOTE_WRITE)
print("DM MR lkey 0x%x, ODP MR lkey 0x%x" % (dmmr.lkey, odp_mr.lkey))

calls = []
def alloc(pd, pd_ctx, size, align, rtype):
    calls.append(("alloc", rtype))
    return mem.posix_memalign(size, align)
def free(pd, pd_ctx, ptr, rtype):
    calls.append(("free", rtype))
    mem.free(ptr)
pctx = ParentDomainContext(pd, alloc, free)  # pyverbs holds it weakly: keep it
pdom = ParentDomain(ctx, attr=ParentDomainInitAttr(pd=pd, pd_context=pctx))
cq = CQEX(ctx, CqInitAttrEx(cqe=16, parent_domain=pdom, comp_mask=e.IBV_CQ_INIT_ATTR_MASK_PD))
ncq = len(calls)
qia = QPInitAttrEx(qp_type=e.IBV_QPT_RC, pd=pdom, scq=cq, rcq=cq, cap=QPCap(8, 8, 1, 1),
                   comp_mask=e.IBV_QP_INIT_ATTR_PD)
qp = QPEx(ctx, qia)
print("allocator calls:", calls)
assert ncq >= 1 and len(calls) > ncq, "the allocator was not called for the CQ and the QP"
qp.close()
cq.close()
frees = [c for c in calls if c[0] == "free"]
allocs = [c for c in calls if c[0] == "alloc"]
print("frees:", len(frees), "allocs:", len(allocs))
assert len(frees) == len(allocs), "not every buffer went back to free()"
pdom.close(); dmmr.close(); odp_mr.close(); dm.close(); pd.close(); ctx.close()
print("pyverbs mem OK")
PYEOF
finish

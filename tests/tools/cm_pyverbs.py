# pyverbs CMID (python3-pyverbs) over uroce's librdmacm, for tests/integration/cm_consumers.sh:
# `cm_pyverbs.py server|client PORT [ADDR]` (ADDR: the server's, 127.0.0.1
# by default); the client sends a message, the server
# echoes it; both exit 0 when the bytes are what was sent.
import sys
from pyverbs.cmid import CMID, AddrInfo
from pyverbs.qp import QPInitAttr, QPCap
import pyverbs.cm_enums as ce
import pyverbs.enums as e
role, port = sys.argv[1], sys.argv[2]
addr = sys.argv[3] if len(sys.argv) > 3 else '127.0.0.1'
cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
attr = QPInitAttr(qp_type=e.IBV_QPT_RC, cap=cap)
msg = b'pyverbs CMID over uroce'
if role == 'server':
    ai = AddrInfo(src=addr, src_service=port, port_space=ce.RDMA_PS_TCP, flags=ce.RAI_PASSIVE)
    lid = CMID(creator=ai, qp_init_attr=attr)
    lid.listen()
    cid = lid.get_request()
    mr = cid.reg_msgs(64)
    cid.post_recv(mr, len(msg))
    cid.accept()
    wc = cid.get_recv_comp()
    got = mr.read(len(msg), 0)
    print('server received', got)
    cid.post_send(mr, 0, len(msg))
    cid.get_send_comp()
    ok = got == msg
else:
    ai = AddrInfo(dst=addr, dst_service=port, port_space=ce.RDMA_PS_TCP)
    cid = CMID(creator=ai, qp_init_attr=attr)
    cid.connect()
    mr = cid.reg_msgs(64)
    rmr = cid.reg_msgs(64)
    cid.post_recv(rmr, len(msg))
    mr.write(msg, len(msg))
    cid.post_send(mr, 0, len(msg))
    cid.get_send_comp()
    cid.get_recv_comp()
    got = rmr.read(len(msg), 0)
    print('client received', got)
    ok = got == msg
    cid.disconnect()
sys.exit(0 if ok else 1)

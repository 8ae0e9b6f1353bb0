"""IB transport through pyverbs: RDMA WRITE for data and atomic fetch-add for flags on an RC QP.

One ``IbEndpoint`` per proxy (device context, PD, CQ, memory regions) and one ``IbQueuePair`` per
peer, connected with QP info exchanged through the bootstrap (``ib_wire``). GPU buffers need
GPUDirect RDMA (nvidia-peermem) to be registered. ``problem()`` says why IB cannot be used here.
"""

from __future__ import annotations

import random
from pathlib import Path

from .. import config
from ..errors import ProxyError
from ..runtime.deadline import Deadline
from .ib_wire import QpInfo, Region, WorkRequest

IB_DEVICE_ENV, IB_PORT_ENV, IB_GID_ENV = "PYMSCCLPP_IB_DEVICE", "PYMSCCLPP_IB_PORT", "PYMSCCLPP_IB_GID_INDEX"
_FALLBACK = "the Ethernet transport (PYMSCCLPP_TRANSPORT=ethernet) works without it"
CQ_DEPTH = 1024
_SYSTEM_PYVERBS = Path("/usr/lib/python3/dist-packages/pyverbs")  # where Debian's python3-pyverbs puts it


def problem() -> str | None:
    """None when pyverbs finds an RDMA device, else the missing piece (and the Ethernet fallback)."""
    try:
        from pyverbs.device import get_device_list
    except ImportError:
        if _SYSTEM_PYVERBS.is_dir():
            return (f"rdma-core's pyverbs is installed for the system Python ({_SYSTEM_PYVERBS}) but this Python "
                    f"does not see it (a virtual environment: make it with --system-site-packages, or link that "
                    f"folder into its site-packages); {_FALLBACK}")
        return f"rdma-core's pyverbs is not installed (apt-get install python3-pyverbs); {_FALLBACK}"
    try:
        devices = get_device_list()
    except Exception as exc:  # pyverbs raises its own error types when the verbs library fails
        return f"pyverbs cannot list RDMA devices ({exc}); {_FALLBACK}"
    if not devices:
        return f"pyverbs finds no RDMA device on this host; {_FALLBACK}"
    return None


def _gid_bytes(gid) -> bytes:
    return bytes.fromhex(str(gid.gid).replace(":", ""))


def _gid_text(raw: bytes) -> str:
    return ":".join(raw[i:i + 2].hex() for i in range(0, 16, 2))


class IbEndpoint:
    """This proxy's RDMA device context, protection domain and memory regions."""

    def __init__(self):
        reason = problem()
        if reason is not None:
            raise ProxyError(f"IB transport unavailable: {reason}")
        import pyverbs.enums as e
        from pyverbs.device import Context, get_device_list
        from pyverbs.pd import PD
        self.e = e
        name = config.get(IB_DEVICE_ENV) or get_device_list()[0].name.decode()
        self.port = config.get(IB_PORT_ENV)
        self.gid_index = config.get(IB_GID_ENV)
        self.ctx = Context(name=name)
        self.pd = PD(self.ctx)
        self.port_attr = self.ctx.query_port(self.port)
        if self.port_attr.state != e.IBV_PORT_ACTIVE:
            raise ProxyError(f"IB device {name} port {self.port} is not active; {_FALLBACK}")
        self.name = name
        self._mrs = []

    def register(self, addr: int, nbytes: int) -> Region:
        """Register ``[addr, addr + nbytes)`` for local use, remote writes and remote atomics."""
        from pyverbs.mr import MR
        e = self.e
        access = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
                  | e.IBV_ACCESS_REMOTE_ATOMIC)
        try:
            mr = MR(self.pd, nbytes, access, address=addr)
        except Exception as exc:
            raise ProxyError(f"cannot register {nbytes} bytes at {addr:#x} with {self.name} ({exc}); GPU memory "
                             "needs GPUDirect RDMA (the nvidia-peermem module)") from None
        self._mrs.append(mr)
        return Region(addr, nbytes, mr.lkey, mr.rkey)

    def close(self) -> None:
        for mr in self._mrs:
            mr.close()
        self._mrs.clear()
        self.pd.close()
        self.ctx.close()


class IbQueuePair:
    """An RC QP to one peer with its own completion queue; posts work requests and waits for completions."""

    def __init__(self, endpoint: IbEndpoint, max_send_wr: int = CQ_DEPTH // 2):
        from pyverbs.cq import CQ
        from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
        e = endpoint.e
        self.ep, self.e = endpoint, e
        self.cq = CQ(endpoint.ctx, CQ_DEPTH, None, None, 0)
        cap = QPCap(max_send_wr=max_send_wr, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
        init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap)
        attr = QPAttr(port_num=endpoint.port)
        attr.qp_access_flags = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
                                | e.IBV_ACCESS_REMOTE_ATOMIC)
        self.qp = QP(endpoint.pd, init, attr)
        self.psn = random.getrandbits(24)
        self.outstanding = 0
        self.limit = max_send_wr

    def info(self) -> QpInfo:
        ep = self.ep
        is_global = ep.port_attr.link_layer == self.e.IBV_LINK_LAYER_ETHERNET or ep.port_attr.lid == 0
        gid = _gid_bytes(ep.ctx.query_gid(ep.port, ep.gid_index))
        return QpInfo(ep.port, ep.port_attr.lid, self.qp.qp_num, self.psn, gid, int(ep.port_attr.active_mtu),
                      ep.gid_index, bool(is_global))

    def connect(self, remote: QpInfo) -> None:
        """Move the QP through RTR to RTS towards the peer's QP."""
        from pyverbs.addr import GID, AHAttr, GlobalRoute
        from pyverbs.qp import QPAttr
        attr = QPAttr(port_num=self.ep.port)
        attr.path_mtu = min(remote.mtu, int(self.ep.port_attr.active_mtu))
        attr.dest_qp_num, attr.rq_psn, attr.sq_psn = remote.qpn, remote.psn, self.psn
        attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
        attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 12, 14, 7, 7
        if remote.is_global:
            gr = GlobalRoute(dgid=GID(_gid_text(remote.gid)), sgid_index=self.ep.gid_index)
            attr.ah_attr = AHAttr(port_num=self.ep.port, is_global=1, gr=gr, dlid=remote.lid)
        else:
            attr.ah_attr = AHAttr(port_num=self.ep.port, is_global=0, dlid=remote.lid)
        self.qp.to_rts(attr)

    def post(self, wrs: list[WorkRequest], timeout: float | None) -> None:
        """Post ``wrs`` in order (each signaled), reaping completions so the send queue never overflows."""
        from pyverbs.wr import SGE, SendWR
        e = self.e
        for i, wr in enumerate(wrs):
            if self.outstanding >= self.limit:
                self._reap(self.limit // 2, timeout)
            opcode = e.IBV_WR_RDMA_WRITE if wr.opcode == "write" else e.IBV_WR_ATOMIC_FETCH_AND_ADD
            send = SendWR(wr_id=i, opcode=opcode, num_sge=1, sg=[SGE(wr.local_addr, wr.length, wr.lkey)],
                          send_flags=e.IBV_SEND_SIGNALED)
            if wr.opcode == "write":
                send.set_wr_rdma(wr.rkey, wr.remote_addr)
            else:
                send.set_wr_atomic(wr.rkey, wr.remote_addr, wr.add, 0)
            self.qp.post_send(send)
            self.outstanding += 1

    def flush(self, timeout: float | None) -> None:
        """Wait until every posted work request completed (ProxyError on a failed one or past ``timeout``)."""
        self._reap(0, timeout)

    def _reap(self, down_to: int, timeout: float | None) -> None:
        deadline = Deadline(timeout)
        while self.outstanding > down_to:
            n, wcs = self.cq.poll(min(16, self.outstanding))
            for wc in wcs[:n]:
                if wc.status != self.e.IBV_WC_SUCCESS:
                    raise ProxyError(f"RDMA work request failed with completion status {wc.status}")
            self.outstanding -= n
            if n == 0 and deadline.expired():
                raise ProxyError(f"{self.outstanding} RDMA work requests did not complete within {timeout} s")

    def close(self) -> None:
        self.qp.close()
        self.cq.close()

"""The IB transport against the real pyverbs (Debian's python3-pyverbs, rdma-core 44), with no RDMA device: device
enumeration, the no-device error, and every pyverbs name and argument list ``transports/ib.py`` uses.

Debian installs pyverbs for the system Python; its extension modules load in any CPython of the same version and
ABI, so the tests put that one package (not the rest of Debian's site-packages) on ``sys.path``. CI installs the
packages (scripts/setup.sh); there a missing pyverbs fails instead of skipping.
"""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import sys
from pathlib import Path

import pytest

from pymscclpp.errors import InvalidUsageError, ProxyError
from pymscclpp.transports import Transport, ib, propose

DEBIAN = Path("/usr/lib/python3/dist-packages/pyverbs")
GID = "fe80:0000:0000:0000:0000:0000:0000:0001"


def _why_not() -> str | None:
    if not DEBIAN.is_dir():
        return f"python3-pyverbs is not installed ({DEBIAN} is missing)"
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    if not (DEBIAN / f"device{suffix}").is_file():
        built = sorted(p.name for p in DEBIAN.glob("device*.so"))
        return f"Debian's pyverbs is built for another Python ({built}), this one loads *{suffix}"
    return None


@pytest.fixture(scope="module")
def pyverbs(tmp_path_factory):
    """The real pyverbs package, importable for this module's tests only."""
    reason = _why_not()
    if reason is not None:
        if os.environ.get("CI") and shutil.which("apt-get"):
            pytest.fail(f"{reason}: scripts/setup.sh installs it under CI")
        pytest.skip(reason)
    where = tmp_path_factory.mktemp("pyverbs")
    (where / "pyverbs").symlink_to(DEBIAN)
    sys.path.insert(0, str(where))
    try:
        import pyverbs
        yield pyverbs
    finally:
        sys.path.remove(str(where))
        for name in [n for n in sys.modules if n == "pyverbs" or n.startswith("pyverbs.")]:
            del sys.modules[name]


def test_a_python_that_does_not_see_debians_pyverbs_is_told_how_to(monkeypatch):
    if _why_not() is not None:
        pytest.skip(_why_not())
    monkeypatch.setitem(sys.modules, "pyverbs", None)  # this interpreter cannot import it (as in a plain venv)
    reason = ib.problem()
    assert "installed for the system Python" in reason and "--system-site-packages" in reason, reason


def test_device_enumeration_finds_none_here_and_says_so(pyverbs):
    from pyverbs.device import get_device_list
    try:
        devices = get_device_list()
    except pyverbs.pyverbs_error.PyverbsError:
        devices = []  # rdma-core 44 raises when the kernel exposes no RDMA subsystem at all
    if devices:
        pytest.skip(f"this host has RDMA devices ({[d.name for d in devices]}): tests/test_transports.py runs IB")
    reason = ib.problem()
    assert reason is not None and "not installed" not in reason, reason
    assert ("cannot list RDMA devices" in reason or "finds no RDMA device" in reason) and "Ethernet" in reason


def test_an_ib_endpoint_without_a_device_raises_naming_why_and_the_fallback(pyverbs):
    with pytest.raises(ProxyError) as info:
        ib.IbEndpoint()
    text = str(info.value)
    assert text.startswith("IB transport unavailable: pyverbs") and "PYMSCCLPP_TRANSPORT=ethernet" in text, text


def test_forcing_ib_without_a_device_is_refused_before_any_connection(pyverbs):
    with pytest.raises(InvalidUsageError, match="transport ib was forced, but pyverbs.*ethernet"):
        propose(same_host=False, ib_problem=ib.problem(), choice=Transport.IB)


def test_device_bound_calls_take_the_arguments_ib_py_passes(pyverbs):
    """Without a device these fail past argument parsing: at the device lookup or the type of a stand-in."""
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QP
    errors = pyverbs.pyverbs_error
    with pytest.raises(errors.PyverbsRDMAError, match="devices list|device"):
        Context(name="pymscclpp-no-such-device")
    with pytest.raises(errors.PyverbsUserError, match="Cannot create PD from"):
        PD(object())  # one positional argument: the context
    with pytest.raises(TypeError, match="Argument 'context' has incorrect type"):
        CQ(object(), ib.CQ_DEPTH, None, None, 0)  # (context, cqe, cq_context, channel, comp_vector)
    with pytest.raises(TypeError, match="Argument 'qp_attr' has incorrect type"):
        QP(object(), object(), object())  # (pd, init_attr, qp_attr)
    assert ":param address:" in MR.__init__.__doc__  # MR(pd, length, access, address=...)
    for cls, names in [(Context, ["query_port", "query_gid", "close"]), (PD, ["close"]), (CQ, ["poll", "close"]),
                       (QP, ["to_rts", "post_send", "qp_num", "close"]), (MR, ["lkey", "rkey", "close"])]:
        assert [n for n in names if not hasattr(cls, n)] == [], cls


def test_device_free_objects_build_exactly_as_ib_py_builds_them(pyverbs):
    import pyverbs.enums as e
    from pyverbs.addr import GID as Gid, AHAttr, GlobalRoute
    from pyverbs.qp import QPAttr, QPCap, QPInitAttr
    from pyverbs.wr import SGE, SendWR
    cap = QPCap(max_send_wr=ib.CQ_DEPTH // 2, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
    QPInitAttr(qp_type=e.IBV_QPT_RC, scq=None, rcq=None, cap=cap)
    attr = QPAttr(port_num=1)
    for name in ("qp_access_flags", "path_mtu", "dest_qp_num", "rq_psn", "sq_psn", "max_dest_rd_atomic",
                 "max_rd_atomic", "min_rnr_timer", "timeout", "retry_cnt", "rnr_retry"):
        setattr(attr, name, 1)  # a cdef class: an unknown attribute would raise AttributeError
    gid = Gid(ib._gid_text(bytes.fromhex(GID.replace(":", ""))))
    assert ib._gid_bytes(gid) == bytes.fromhex(GID.replace(":", ""))  # what info() sends its peer
    attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=0), dlid=3)
    attr.ah_attr = AHAttr(port_num=1, is_global=0, dlid=3)
    send = SendWR(wr_id=0, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(0x1000, 64, 5)],
                  send_flags=e.IBV_SEND_SIGNALED)
    send.set_wr_rdma(7, 0x2000)
    send.set_wr_atomic(7, 0x2000, 1, 0)
    enums = ["IBV_PORT_ACTIVE", "IBV_ACCESS_LOCAL_WRITE", "IBV_ACCESS_REMOTE_WRITE", "IBV_ACCESS_REMOTE_READ",
             "IBV_ACCESS_REMOTE_ATOMIC", "IBV_QPT_RC", "IBV_LINK_LAYER_ETHERNET", "IBV_WR_RDMA_WRITE",
             "IBV_WR_ATOMIC_FETCH_AND_ADD", "IBV_SEND_SIGNALED", "IBV_WC_SUCCESS"]
    assert [n for n in enums if not hasattr(e, n)] == []


def test_port_attributes_and_completions_have_the_fields_ib_py_reads(pyverbs):
    from pyverbs.cq import WC
    from pyverbs.device import PortAttr
    assert [n for n in ("state", "link_layer", "lid", "active_mtu") if not hasattr(PortAttr, n)] == []
    assert hasattr(WC, "status")

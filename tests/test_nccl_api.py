"""pymscclpp.nccl, the cupy.cuda.nccl drop-in: constants and signatures as cupy's, unique ids, argument
mapping, group semantics, routing to pymscclpp or NCCL, clear errors; collectives across rank processes."""

from __future__ import annotations

import contextlib

import inspect
from types import SimpleNamespace

import numpy as np
import pytest

import pymscclpp  # noqa: F401
from numba import cuda

from pymscclpp import nccl
from pymscclpp.errors import InvalidUsageError
from pymscclpp.fallback import nccl as fb
from pymscclpp.nccl import buffers, group, ids
from pymscclpp.runtime.bootstrap import UniqueId
from pymscclpp.runtime.buffers import DeviceView, buffer_info
from rankpool import RankPool

# cupy_backends/cuda/libs/nccl.pxd
CUPY_CONSTANTS = {"NCCL_SUM": 0, "NCCL_PROD": 1, "NCCL_MAX": 2, "NCCL_MIN": 3, "NCCL_AVG": 4, "NCCL_INT8": 0,
                  "NCCL_CHAR": 0, "NCCL_UINT8": 1, "NCCL_INT32": 2, "NCCL_INT": 2, "NCCL_UINT32": 3, "NCCL_INT64": 4,
                  "NCCL_UINT64": 5, "NCCL_FLOAT16": 6, "NCCL_HALF": 6, "NCCL_FLOAT32": 7, "NCCL_FLOAT": 7,
                  "NCCL_FLOAT64": 8, "NCCL_DOUBLE": 8, "NCCL_BFLOAT16": 9}
# cupy_backends/cuda/libs/nccl.pyx: NcclCommunicator's methods (positional order)
CUPY_SIGNATURES = {
    "__init__": ["ndev", "commId", "rank"],
    "allReduce": ["sendbuf", "recvbuf", "count", "datatype", "op", "stream"],
    "allGather": ["sendbuf", "recvbuf", "count", "datatype", "stream"],
    "reduceScatter": ["sendbuf", "recvbuf", "recvcount", "datatype", "op", "stream"],
    "broadcast": ["sendbuff", "recvbuff", "count", "datatype", "root", "stream"],
    "bcast": ["buff", "count", "datatype", "root", "stream"],
    "send": ["sendbuf", "count", "datatype", "peer", "stream"],
    "recv": ["recvbuf", "count", "datatype", "peer", "stream"],
    "destroy": [], "abort": [], "rank_id": [], "device_id": [], "size": [], "check_async_error": [],
}


def test_constants_are_cupys():
    for name, value in CUPY_CONSTANTS.items():
        assert getattr(nccl, name) == value, name


def test_every_datatype_and_op_maps_to_nccls_own_code():
    for code, name in nccl.constants.DATATYPES.items():
        assert fb.DTYPES[name] == code
    for code, name in nccl.constants.REDUCE_OPS.items():
        assert fb.OPS[name] == code


def test_signatures_are_cupys():
    for method, params in CUPY_SIGNATURES.items():
        got = list(inspect.signature(getattr(nccl.NcclCommunicator, method)).parameters)[1:]
        assert got == params, method
    for fn in ("get_unique_id", "get_version", "groupStart", "groupEnd"):
        assert not inspect.signature(getattr(nccl, fn)).parameters


def test_unique_id_is_128_chars_that_decode_to_the_bootstrap_id():
    uid = UniqueId("127.0.0.1", 4242, bytes(range(200, 216)))
    chars = ids.encode(uid)
    assert len(chars) == 128 and all(-128 <= c <= 127 for c in chars) and min(chars) < 0
    assert ids.decode(chars) == uid
    assert ids.decode(tuple(c & 0xFF for c in chars)) == uid  # unsigned chars too
    assert ids.decode(uid.to_bytes()) == uid
    fresh = nccl.get_unique_id()
    assert isinstance(fresh, tuple) and len(fresh) == 128 and ids.decode(fresh).host


@pytest.mark.parametrize("bad, words", [((1, 2, 3), "128 char values"), (tuple([300] * 128), "128 char values"),
                                        (tuple([5] * 128), "not cupy.cuda.nccl.get_unique_id"),
                                        (None, "tuple from get_unique_id")])
def test_bad_unique_ids_say_where_ids_come_from(bad, words):
    with pytest.raises(InvalidUsageError, match=words.replace(".", r"\.")):
        ids.decode(bad)


def test_datatypes_and_ops_map_to_names_and_unknown_ones_are_named():
    assert nccl.constants.datatype_name(nccl.NCCL_HALF) == "float16"
    assert nccl.constants.datatype_name(np.int32(nccl.NCCL_DOUBLE)) == "float64"
    assert nccl.constants.op_name(nccl.NCCL_AVG) == "avg"
    with pytest.raises(InvalidUsageError, match=r"unknown datatype 42: expected one of 0 \(int8\)"):
        nccl.constants.datatype_name(42)
    with pytest.raises(InvalidUsageError, match="unknown datatype True"):
        nccl.constants.datatype_name(True)
    with pytest.raises(InvalidUsageError, match=r"unknown reduction op 9: .*4 \(avg\)"):
        nccl.constants.op_name(9)


def test_version_without_nccl_is_the_mirrored_api_level():
    assert nccl.get_version() == nccl.API_VERSION >= 21000 and nccl.available


def test_initall_explains_one_process_per_gpu():
    with pytest.raises(InvalidUsageError, match="one process per GPU"):
        nccl.NcclCommunicator.initAll(2)


# -- group semantics and routing, in process ------------------------------------------------------
class FakeFallback:
    """Records NCCL calls (and when its communicator was made) into a shared log."""

    def __init__(self, log):
        self.log = log

    def ready(self):
        self.log.append("ready")

    def __getattr__(self, name):
        return lambda *args: self.log.append((name, *args))


@pytest.fixture
def log(monkeypatch):
    calls = []
    monkeypatch.setattr(fb, "group_start", lambda: calls.append("ncclGroupStart"))
    monkeypatch.setattr(fb, "group_end", lambda: calls.append("ncclGroupEnd"))
    monkeypatch.setattr(fb, "fallback_for", lambda comm: FakeFallback(calls))
    return calls


def test_group_queues_calls_until_the_outermost_end(log):
    nccl_fb = FakeFallback(log)
    nccl.groupStart()
    group.submit(group.Call(lambda: log.append("a"), None))
    nccl.groupStart()
    group.submit(group.Call(lambda: log.append("nccl-1"), nccl_fb))
    group.submit(group.Call(lambda: log.append("b"), None))
    nccl.groupEnd()
    assert log == []
    group.submit(group.Call(lambda: log.append("nccl-2"), nccl_fb))
    nccl.groupEnd()
    assert log == ["a", "b", "ready", "ready", "ncclGroupStart", "nccl-1", "nccl-2", "ncclGroupEnd"]
    log.clear()
    group.submit(group.Call(lambda: log.append("now"), None))
    assert log == ["now"]
    with pytest.raises(InvalidUsageError, match="groupEnd\\(\\) without a matching groupStart\\(\\)"):
        nccl.groupEnd()


class FakeComm:
    """The collectives' calls, recorded (rank 1 of 2)."""

    rank, size, device = 1, 2, 0

    def __init__(self, log):
        self.log = log

    def all_reduce(self, send, recv, op, stream):
        self.log.append(("all_reduce", None if recv is None else recv.shape, op, stream))

    def all_gather(self, send, recv, stream):
        self.log.append(("all_gather", send.shape, recv.shape, stream))

    def reduce_scatter(self, send, recv, op, stream):
        self.log.append(("reduce_scatter", send.shape, recv.shape, op, stream))

    def broadcast(self, send, recv, root, stream):
        self.log.append(("broadcast", send.shape, recv, root, stream))

    def send(self, buf, peer, stream):
        self.log.append(("send", buf.shape, peer, stream))

    def recv(self, buf, peer, stream):
        self.log.append(("recv", buf.shape, peer, stream))

    @contextlib.contextmanager
    def group(self):
        self.log.append("group")
        yield
        self.log.append("group issued")


def fake_communicator(comm) -> nccl.NcclCommunicator:
    nc = nccl.NcclCommunicator.__new__(nccl.NcclCommunicator)
    nc._comm, nc._served = comm, {}
    return nc


def test_calls_pymscclpp_covers_go_to_the_communicator_and_the_rest_to_nccl(log):
    nc = fake_communicator(FakeComm(log))
    x, y = cuda.to_device(np.zeros(64, np.float32)), cuda.to_device(np.zeros(64, np.float32))
    px, py = buffer_info(x).ptr, buffer_info(y).ptr
    nc.allReduce(px, py, 10, nccl.NCCL_FLOAT32, nccl.NCCL_MAX, 5)
    nc.allReduce(px, px, 10, nccl.NCCL_INT32, nccl.NCCL_SUM, 0)
    nc.allGather(x, y, 8, nccl.NCCL_FLOAT16, SimpleNamespace(ptr=3))  # arrays and stream objects too
    nc.reduceScatter(px, py, 4, nccl.NCCL_UINT8, nccl.NCCL_PROD, 0)
    nc.bcast(px, 12, nccl.NCCL_INT32, 0, 0)
    nc.send(px, 3, nccl.NCCL_INT8, 0, 9)
    nc.recv(py, 3, nccl.NCCL_UINT64, 0, 9)
    assert log == [("all_reduce", (10,), "max", 5), ("all_reduce", None, "sum", 0),
                   ("all_gather", (8,), (16,), 3), ("reduce_scatter", (8,), (4,), "prod", 0),
                   ("broadcast", (12,), None, 0, 0), ("send", (3,), 0, 9), ("recv", (3,), 0, 9)]
    log.clear()
    nc.allReduce(px, py, 4, nccl.NCCL_FLOAT64, nccl.NCCL_SUM, 0)
    nc.allReduce(px, py, 4, nccl.NCCL_INT64, nccl.NCCL_MAX, 0)
    assert log == ["ready", "ncclGroupStart", ("all_reduce", px, py, 4, "float64", "sum", 0), "ncclGroupEnd",
                   "ready", "ncclGroupStart", ("all_reduce", px, py, 4, "int64", "max", 0), "ncclGroupEnd"]


def test_a_groups_sends_and_receives_go_to_the_communicator_in_one_of_its_groups(log):
    nc = fake_communicator(FakeComm(log))
    px = buffer_info(cuda.to_device(np.zeros(64, np.float32))).ptr
    nccl.groupStart()
    nc.recv(px, 4, nccl.NCCL_FLOAT32, 0, 0)
    nc.allReduce(px, px, 8, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, 0)
    nc.send(px, 5, nccl.NCCL_FLOAT32, 1, 0)
    assert log == []
    nccl.groupEnd()
    assert log == ["group", ("recv", (4,), 0, 0), ("all_reduce", None, "sum", 0), ("send", (5,), 1, 0),
                   "group issued"]


def test_a_repeated_raw_pointer_call_is_issued_again_and_a_changed_one_is_checked_anew(log):
    nc = fake_communicator(FakeComm(log))
    px = buffer_info(cuda.to_device(np.zeros(64, np.float32))).ptr
    for _ in range(3):
        nc.allReduce(px, px, 10, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, 0)
    assert log == [("all_reduce", None, "sum", 0)] * 3
    with pytest.raises(InvalidUsageError, match="count=-1"):
        nc.allReduce(px, px, -1, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, 0)
    nccl.groupStart()
    nc.allReduce(px, px, 10, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, 0)
    assert len(log) == 3  # a repeat inside a group is queued like any call
    nccl.groupEnd()
    assert len(log) == 4


@pytest.mark.parametrize("call, words", [
    (lambda nc, x: nc.allReduce(x, x, 17, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, 0), "count 17 of float32 needs 68 bytes"),
    (lambda nc, x: nc.allGather(x, x, 9, nccl.NCCL_FLOAT32, 0), "recvbuf: count 18 of float32"),
    (lambda nc, x: nc.allReduce(x, x, -1, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, 0), "count=-1"),
    (lambda nc, x: nc.allReduce(x, x, 4, 99, nccl.NCCL_SUM, 0), "unknown datatype 99"),
    (lambda nc, x: nc.allReduce(x, x, 4, nccl.NCCL_FLOAT32, 7, 0), "unknown reduction op 7"),
    (lambda nc, x: nc.bcast(x, 4, nccl.NCCL_FLOAT32, 2, 0), "root=2: expected a rank in 0..1"),
    (lambda nc, x: nc.send(x, 4, nccl.NCCL_FLOAT32, -1, 0), "peer=-1"),
    (lambda nc, x: nc.allReduce(0, 0, 4, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, 0), "sendbuf=0x0 is not a device pointer"),
    (lambda nc, x: nc.allReduce(np.zeros(4, np.float32), x, 4, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, 0), "host"),
])
def test_bad_arguments_are_named_before_anything_runs(log, call, words):
    nc = fake_communicator(FakeComm(log))
    with pytest.raises(InvalidUsageError, match=words.replace("(", r"\(").replace(")", r"\)")):
        call(nc, cuda.to_device(np.zeros(16, np.float32)))
    assert log == []


def test_pointers_become_immutable_cuda_array_interface_buffers_that_keep_their_dtype_name(monkeypatch):
    ptr = DeviceView(0x7000, 5, np.dtype(np.float16))
    assert ptr.__cuda_array_interface__ == {"shape": (5,), "typestr": "<f2", "data": (0x7000, False),
                                            "version": 3, "strides": None}
    with pytest.raises(AttributeError, match="immutable"):
        ptr.count = 6
    assert buffers.typed("float32") and buffers.numpy_dtype("bfloat16").itemsize == 2
    raw = DeviceView(0x7000, 5, np.dtype("V2"), name="bfloat16")  # a typestr of raw bytes keeps its dtype's name
    assert raw.__cuda_array_interface__["typestr"] == "|V2" and (raw.name, ptr.name) == ("bfloat16", "float16")
    monkeypatch.setattr(buffers, "IS_SIM", False)  # on GPUs every view carries its dtype's name
    assert buffers.typed("float64") and buffers.typed("bfloat16")


def test_a_raw_bfloat16_pointer_reaches_the_communicator_as_bfloat16_on_gpus(monkeypatch):
    from pymscclpp.runtime import buffers as runtime_buffers
    monkeypatch.setattr(runtime_buffers, "IS_SIM", False)
    monkeypatch.setitem(runtime_buffers._device_of, (0x9000, 64), 0)  # the driver was asked about it before
    info = buffer_info(DeviceView(0x9000, 32, buffers.numpy_dtype("bfloat16"), name="bfloat16"), 0)
    assert (info.ptr, info.nbytes, info.dtype, info.shape) == (0x9000, 64, "bfloat16", (32,))


def test_calls_on_a_destroyed_communicator_say_so():
    nc = fake_communicator(None)
    with pytest.raises(InvalidUsageError, match="destroyed"):
        nc.rank_id()


# -- across rank processes on the simulator -------------------------------------------------------
NP_OPS = {nccl.NCCL_SUM: np.add, nccl.NCCL_MAX: np.maximum, nccl.NCCL_MIN: np.minimum, nccl.NCCL_PROD: np.multiply}


@pytest.fixture(scope="module")
def pool():
    p = RankPool(2, env={"PYMSCCLPP_TIMEOUT_S": "30"})
    yield p
    p.run(destroy)
    p.close()


def communicator(comm, state) -> nccl.NcclCommunicator:
    """This rank's NcclCommunicator, over an id rank 0 made and sent to all (as an MPI bcast would)."""
    if "nc" not in state:
        mine = bytes(c & 0xFF for c in nccl.get_unique_id()) if comm.rank == 0 else b""
        uid = tuple(comm.bootstrap.all_gather(mine)[0])
        state["nc"] = nccl.NcclCommunicator(comm.size, uid, comm.rank)
    return state["nc"]


def destroy(comm, state):
    if "nc" in state:
        state.pop("nc").destroy()


def rank_data(rank: int, count: int, dtype) -> np.ndarray:
    return (np.arange(count) % 7 + rank + 1).astype(dtype)


def all_reduce(comm, state, count: int, datatype: int, op: int, inplace: bool, pointers: bool, grouped: bool):
    nc = communicator(comm, state)
    assert (nc.rank_id(), nc.size(), nc.device_id()) == (comm.rank, comm.size, comm.device)
    dtype = buffers.numpy_dtype(nccl.constants.DATATYPES[datatype])
    xs = [cuda.to_device(rank_data(comm.rank, count, dtype) + k) for k in range(2)]
    outs = xs if inplace else [cuda.to_device(np.zeros(count, dtype)) for _ in range(2)]
    if grouped:
        nccl.groupStart()
    for x, out in zip(xs, outs):
        send, recv = (buffer_info(x).ptr, buffer_info(out).ptr) if pointers else (x, out)
        nc.allReduce(send, recv, count, datatype, op, 0)
    if grouped:
        nccl.groupEnd()
    cuda.synchronize()
    for k, out in enumerate(outs):
        want = NP_OPS[op](rank_data(0, count, dtype) + k, rank_data(1, count, dtype) + k).astype(dtype)
        np.testing.assert_array_equal(out.copy_to_host(), want)


def other_collectives(comm, state):
    """allGather, reduceScatter, broadcast and bcast through raw pointers and arrays."""
    nc = communicator(comm, state)
    f32, ptr = nccl.NCCL_FLOAT32, (lambda a: buffer_info(a).ptr)
    x = cuda.to_device(rank_data(comm.rank, 6, np.float32))
    gathered = cuda.to_device(np.zeros(12, np.float32))
    nc.allGather(ptr(x), ptr(gathered), 6, f32, 0)
    want = np.concatenate([rank_data(r, 6, np.float32) for r in range(2)])
    np.testing.assert_array_equal(gathered.copy_to_host(), want)
    part = cuda.to_device(np.zeros(6, np.float32))
    nc.reduceScatter(gathered, part, 3, f32, nccl.NCCL_SUM, 0)
    np.testing.assert_array_equal(part.copy_to_host()[:3], 2 * want[3 * comm.rank:3 * comm.rank + 3])
    out = cuda.to_device(np.zeros(6, np.float32))
    nc.broadcast(ptr(x), ptr(out), 6, f32, 0, 0)
    np.testing.assert_array_equal(out.copy_to_host(), rank_data(0, 6, np.float32))
    nc.bcast(ptr(x), 6, f32, 1, 0)
    cuda.synchronize()
    np.testing.assert_array_equal(x.copy_to_host(), rank_data(1, 6, np.float32))


def nccl_only_calls_say_nccl_is_missing(comm, state):
    nc = communicator(comm, state)
    x = cuda.to_device(np.ones(4, np.float64))
    for call, words in [(lambda: nc.allReduce(x, x, 4, nccl.NCCL_FLOAT64, nccl.NCCL_SUM, 0),
                         r"pymscclpp does not serve allReduce of float64 with sum \(pymscclpp reduces float32, .* with sum, "),
                        (lambda: nc.allReduce(x, x, 4, nccl.NCCL_INT64, nccl.NCCL_MAX, 0),
                         r"pymscclpp does not serve allReduce of int64 with max \(.*\); NCCL, which could, cannot "
                         "be used: NCCL needs real GPUs")]:
        with pytest.raises(fb.NcclUnavailableError, match=words):
            call()
    np.testing.assert_array_equal(x.copy_to_host(), np.ones(4))


@pytest.mark.parametrize("datatype, op", [(nccl.NCCL_FLOAT32, nccl.NCCL_SUM), (nccl.NCCL_FLOAT16, nccl.NCCL_MAX),
                                          (nccl.NCCL_INT32, nccl.NCCL_MIN), (nccl.NCCL_UINT8, nccl.NCCL_SUM)])
@pytest.mark.parametrize("pointers", [True, False])
def test_all_reduce_across_ranks(pool, datatype, op, pointers):
    pool.run(all_reduce, count=37, datatype=datatype, op=op, inplace=False, pointers=pointers, grouped=False)


def test_bfloat16_all_reduce_through_pointers(pool):
    pytest.importorskip("ml_dtypes")
    pool.run(all_reduce, count=21, datatype=nccl.NCCL_BFLOAT16, op=nccl.NCCL_SUM, inplace=False, pointers=True,
             grouped=False)


def test_in_place_all_reduces_in_a_group(pool):
    pool.run(all_reduce, count=100, datatype=nccl.NCCL_FLOAT32, op=nccl.NCCL_PROD, inplace=True, pointers=True,
             grouped=True)


def test_other_collectives_across_ranks(pool):
    pool.run(other_collectives)


def point_to_point(comm, state, grouped: bool):
    """Each rank sends the other 100 float64 (raw pointers) and 7 int32 (arrays): in a group both send first,
    else rank 0 sends first and rank 1 receives first."""
    nc, peer = communicator(comm, state), 1 - comm.rank
    wide, small = cuda.to_device(rank_data(comm.rank, 100, np.float64)), cuda.to_device(rank_data(comm.rank, 7, np.int32))
    got_wide, got_small = cuda.to_device(np.zeros(100, np.float64)), cuda.to_device(np.zeros(7, np.int32))
    sends = [lambda: nc.send(buffer_info(wide).ptr, 100, nccl.NCCL_FLOAT64, peer, 0),
             lambda: nc.send(small, 7, nccl.NCCL_INT32, peer, 0)]
    recvs = [lambda: nc.recv(buffer_info(got_wide).ptr, 100, nccl.NCCL_FLOAT64, peer, 0),
             lambda: nc.recv(got_small, 7, nccl.NCCL_INT32, peer, 0)]
    if grouped:
        nccl.groupStart()
    for call in (sends + recvs) if grouped or comm.rank == 0 else (recvs + sends):
        call()
    if grouped:
        nccl.groupEnd()
    cuda.synchronize()
    np.testing.assert_array_equal(got_wide.copy_to_host(), rank_data(peer, 100, np.float64))
    np.testing.assert_array_equal(got_small.copy_to_host(), rank_data(peer, 7, np.int32))


@pytest.mark.parametrize("grouped", [True, False])
def test_send_recv_across_ranks_run_on_pymscclpp(pool, grouped):
    pool.run(point_to_point, grouped=grouped)


def test_calls_only_nccl_serves_fail_clearly_without_it(pool):
    pool.run(nccl_only_calls_say_nccl_is_missing)

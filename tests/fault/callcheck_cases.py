"""Rank-side cases of the cross-rank call check: each rank makes its own call on a fresh communicator, through a
one-shot algorithm, an execution plan or a user's kernel, and reports what it raised, how fast, and whether its
output buffer kept its sentinel."""

from __future__ import annotations

import os
import sys
import time

import numpy as np

import pymscclpp  # noqa: F401 (before numba.cuda)
from numba import cuda

import collective_cases
from executor.programs import rank0_only
from pymscclpp.algos import KernelAlgorithm
from pymscclpp.channels.primitives import copy_bytes
from pymscclpp.runtime.launch import Launch
from pymscclpp.runtime.memory import alloc, view_as

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))  # custom_algorithm
SENTINEL = 77


@cuda.jit
def _copy(inp, out, nbytes):
    """A user's kernel that does not gate on the call check: ``out`` = ``inp``."""
    copy_bytes(out, 0, inp, 0, nbytes, cuda.threadIdx.x, cuda.blockDim.x)


def _ungated_setup(comm) -> Launch:
    """The launch of ``_copy``, its buffers set per call."""
    view = alloc(16)
    return Launch(_copy, 1, 32, {"inp": view, "out": view, "nbytes": 0})


def _ungated_launch(state: Launch, call) -> None:
    """``_copy`` from the call's send buffer into its receive buffer."""
    state.set_buffer("inp", call.send.ptr, call.peer_bytes, call.send.array)
    state.set_buffer("out", call.recv.ptr, call.peer_bytes, call.recv.array)
    state.set_int("nbytes", call.peer_bytes)
    state.launch(call.stream)


def _register(comm, algorithm: str) -> None:
    """Register ``algorithm`` under its own name (calls pass ``algo=algorithm``): ``plan`` (the all-pairs
    all-reduce), ``plan_inplace`` (its in-place variant), ``gated`` (examples/custom_algorithm.py's all-gather,
    which tests the verdict first) or ``ungated`` (a local copy as an all-reduce, which does not)."""
    from custom_algorithm import my_all_gather
    from pymscclpp.language.programs import PROGRAMS
    if algorithm.startswith("plan"):
        plan = PROGRAMS["allreduce_allpairs"](comm.size, inplace=algorithm == "plan_inplace")
        comm.register_algorithm(plan, name=algorithm, prefer=False)
    elif algorithm == "gated":
        comm.register_algorithm(my_all_gather(comm.size), name=algorithm, prefer=False)
    else:
        comm.register_algorithm(KernelAlgorithm(algorithm, "all_reduce", _ungated_setup, _ungated_launch),
                                prefer=False)


def _device(data: np.ndarray, registered: bool):
    """``data`` on the device; ``registered``: in memory peers can map (``alloc``), which plans use as it is."""
    if not registered:
        return cuda.to_device(data)
    view = view_as(alloc(max(16, data.nbytes)), data.dtype, 0, data.size)
    view.copy_to_device(data)
    return view


def _buffers(collective: str, count: int, dtype: str, size: int, registered: bool = False):
    """(send, recv) device buffers of ``collective`` sending ``count`` elements of ones; recv holds the sentinel."""
    recv_count = {"all_gather": count * size, "reduce_scatter": count // size}.get(collective, count)
    return (_device(np.ones(count, np.dtype(dtype)), registered),
            _device(np.full(recv_count, SENTINEL, np.dtype(dtype)), registered))


def _call(comm, send, recv, collective: str, op: str = "sum", root: int = 0, algo: str | None = None, **_) -> None:
    """One out-of-place call of ``collective`` from ``send`` into ``recv`` (by algorithm ``algo`` if named),
    finished and checked."""
    if collective in ("all_reduce", "reduce_scatter"):
        getattr(comm, collective)(send, recv, op=op, algo=algo)
    elif collective == "broadcast":
        comm.broadcast(send, recv, root=root, algo=algo)
    else:
        getattr(comm, collective)(send, recv, algo=algo)
    cuda.synchronize()
    comm.check_device_errors()


def _fresh(comm):
    """A new communicator over the same ranks (a mismatch breaks one for good)."""
    from pymscclpp import Communicator
    from pymscclpp.runtime.bootstrap import UniqueId, get_unique_id
    mine = get_unique_id(addr="127.0.0.1").to_bytes() if comm.rank == 0 else b""
    uid = UniqueId.from_bytes(comm.bootstrap.all_gather(mine)[0])
    return Communicator.from_unique_id(uid, comm.rank, comm.size)


def _ar(count, dtype="float32", op="sum"):
    return {"collective": "all_reduce", "count": count, "dtype": dtype, "op": op}


def _ag(count):
    return {"collective": "all_gather", "count": count, "dtype": "float32"}


def _bc(root):
    return {"collective": "broadcast", "count": 64, "dtype": "float32", "root": root}


# (what the majority calls, its text, what the odd rank out calls, its text)
MISMATCHES = {
    "sizes": (_ar(1024), "all_reduce of 1024 float32", _ar(2048), "all_reduce of 2048 float32"),
    "dtypes": (_ar(256), "all_reduce of 256 float32", _ar(256, "int32"), "all_reduce of 256 int32"),
    "ops": (_ar(64), "all_reduce of 64 float32", _ar(64, op="max"), "all_reduce of 64 float32 with op max"),
    "roots": (_bc(0), "broadcast of 64 float32 from root 0", _bc(1), "broadcast of 64 float32 from root 1"),
    "all_gather send sizes": (_ag(64), "all_gather of 64 float32", _ag(128), "all_gather of 128 float32"),
    "collectives": (_ar(96), "all_reduce of 96 float32", _ag(96), "all_gather of 96 float32"),
}
ODD_SIZES = (_ar(1001), "all_reduce of 1001 float32", _ar(2002), "all_reduce of 2002 float32")  # plans: staged


def odd_one_out(mismatch: tuple, size: int) -> tuple[list[dict], list[str]]:
    """(calls, their texts) of ``size`` ranks for ``mismatch`` = (common call, its text, odd call, its text): the
    last rank makes the odd call."""
    common, common_text, odd, odd_text = mismatch
    return [common] * (size - 1) + [odd], [common_text] * (size - 1) + [odd_text]


FOUND = {"kernel": "found on the device before any output was written)",
         "ahead": "found by the check kernel ahead of the algorithm's own kernel",
         "host": "found on the host before anything was launched"}


def check_mismatch(rank: int, out: dict, texts: list[str], untouched: bool = True, where: str = "kernel") -> None:
    """Assert ``mismatched_calls``' result ``out`` of ``rank`` (ranks' calls ``texts``): CallMismatchError naming
    this call and a peer's that differs, within 5 s (of a 60 s budget), raised again by the next call; the output
    kept its sentinel (``untouched``) or was written; found where ``where`` says (``FOUND``): the call's own kernel,
    the check kernel ahead of a user's, or the host (ranks on several hosts)."""
    assert out["raised"] is not None, f"rank {rank} returned normally"
    kind, text = out["raised"]
    assert kind == "CallMismatchError", (rank, kind, text)
    assert text.startswith(f"rank {rank} called {texts[rank]}, rank "), (rank, text)
    peer = int(text.split(", rank ")[1].split(" ")[0])
    assert texts[peer] != texts[rank] and f", rank {peer} called {texts[peer]}: " in text, (rank, text)
    assert out["seconds"] < 5.0, (rank, out["seconds"])
    assert out["after"] == text, "the error is sticky"
    assert out["untouched"] == untouched, f"rank {rank}: output {'written' if untouched else 'untouched'}"
    assert FOUND[where] in text, (rank, text)


def mismatched_calls(comm, state, calls: list[dict], algorithm: str | None = None) -> dict:
    """Rank r calls ``calls[r]`` (collective, count, dtype, op, root) after matched calls of every collective
    named (their set-up is collective), every call by ``algorithm`` (``_register``) if named; what the call
    raised, in how many seconds, whether the output kept its sentinel, and what the next call raised. A plan
    gets buffers it can use as they are (odd sizes are staged all the same)."""
    fresh = _fresh(comm)
    registered = algorithm is not None and algorithm.startswith("plan")
    try:
        if algorithm is not None:
            _register(fresh, algorithm)
            calls = [{**c, "algo": algorithm} for c in calls]
        for collective in sorted({c["collective"] for c in calls}):
            _call(fresh, *_buffers(collective, 4 * comm.size, "float32", comm.size, registered), collective,
                  algo=algorithm)
        mine = calls[comm.rank]
        send, recv = _buffers(mine["collective"], mine["count"], mine["dtype"], comm.size, registered)
        start = time.perf_counter()
        try:
            _call(fresh, send, recv, **mine)
            raised = None
        except Exception as exc:
            raised = (type(exc).__name__, str(exc))
        seconds = time.perf_counter() - start
        untouched = bool(np.all(recv.copy_to_host() == SENTINEL))
        try:
            _call(fresh, send, recv, **mine)
            after = None
        except Exception as exc:
            after = str(exc)
        return {"raised": raised, "seconds": seconds, "untouched": untouched, "after": after}
    finally:
        fresh.close()


def sequence_words(comm, state, calls: int) -> list[int]:
    """After ``calls`` matched all-reduces: the distinct values of the call check's sequence words."""
    buf = cuda.to_device(np.ones(64, np.float32))
    for _ in range(calls):
        comm.all_reduce(buf)
    cuda.synchronize()
    comm.check_device_errors()
    assert np.all(buf.copy_to_host() == comm.size ** calls)
    return sorted({int(w) for w in comm.extension("callcheck").counts.copy_to_host()})


def mixed_calls(comm, state) -> list[int]:
    """Matched calls through every kind of checked algorithm on one fresh communicator, interleaved (one
    sequence of call numbers): plans on buffers used as they are, staged, and in place from another buffer, a
    one-shot kernel, a gated and an ungated user kernel, and a plan that gives rank 1 no thread blocks (it runs
    the check kernel); every result right. The distinct values of the sequence words after."""
    from pymscclpp.callcheck.area import callcheck
    fresh = _fresh(comm)
    try:
        for algorithm in ("plan", "plan_inplace", "gated", "ungated"):
            _register(fresh, algorithm)
        fresh.register_algorithm(rank0_only(fresh.size), name="rank0_only", collective="all_reduce", prefer=False)
        for algorithm, seed in (("plan", 1), ("plan", 2), ("plan_inplace", 3)):
            send = _device(collective_cases.rank_data(fresh.rank, 64, "float32", seed), registered=True)
            recv = _device(np.zeros(64, np.float32), registered=True)
            _call(fresh, send, recv, "all_reduce", algo=algorithm)
            np.testing.assert_array_equal(recv.copy_to_host(),
                                          collective_cases.expected_allreduce(fresh.size, 64, "float32", seed, "sum"))
        ar = collective_cases.all_reduce  # buffers the plan stages
        ar(fresh, state, count=37, dtype="float32", op="max", seed=4, inplace=False, algo="plan")
        ar(fresh, state, count=64, dtype="int32", op="sum", seed=5, inplace=True)  # one-shot
        collective_cases.all_gather(fresh, state, count=24, dtype="float32", seed=6, inplace=False, algo="gated")
        send, recv = _buffers("all_reduce", 32, "float32", fresh.size)
        _call(fresh, send, recv, "all_reduce", algo="ungated")
        assert np.all(recv.copy_to_host() == 1)
        send = cuda.to_device(np.arange(32, dtype=np.float32))
        _call(fresh, send, recv, "all_reduce", algo="rank0_only")  # no output chunks: recv stays as it is
        want = np.arange(32, dtype=np.float32)
        if fresh.rank == 0:  # its input's first chunk copied over its second
            want[16:] = want[:16]
        np.testing.assert_array_equal(send.copy_to_host(), want)
        return sorted({int(w) for w in callcheck(fresh).counts.copy_to_host()})
    finally:
        fresh.close()

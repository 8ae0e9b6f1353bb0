"""Rank-side cases of the cross-rank call check: each rank makes its own call on a fresh communicator, and
reports what it raised, how fast, and whether its output buffer kept its sentinel."""

from __future__ import annotations

import time

import numpy as np

import pymscclpp  # noqa: F401 (before numba.cuda)
from numba import cuda

SENTINEL = 77


def _buffers(collective: str, count: int, dtype: str, size: int):
    """(send, recv) device buffers of ``collective`` sending ``count`` elements; recv holds the sentinel."""
    recv_count = {"all_gather": count * size, "reduce_scatter": count // size}.get(collective, count)
    send = cuda.to_device(np.ones(count, np.dtype(dtype)))
    return send, cuda.to_device(np.full(recv_count, SENTINEL, np.dtype(dtype)))


def _call(comm, send, recv, collective: str, op: str = "sum", root: int = 0, **_) -> None:
    """One out-of-place call of ``collective`` from ``send`` into ``recv``, finished and checked."""
    if collective in ("all_reduce", "reduce_scatter"):
        getattr(comm, collective)(send, recv, op=op)
    elif collective == "broadcast":
        comm.broadcast(send, recv, root=root)
    else:
        getattr(comm, collective)(send, recv)
    cuda.synchronize()
    comm.check_device_errors()


def _fresh(comm):
    """A new communicator over the same ranks (a mismatch breaks one for good)."""
    from pymscclpp import Communicator
    from pymscclpp.runtime.bootstrap import UniqueId, get_unique_id
    mine = get_unique_id(addr="127.0.0.1").to_bytes() if comm.rank == 0 else b""
    uid = UniqueId.from_bytes(comm.bootstrap.all_gather(mine)[0])
    return Communicator.from_unique_id(uid, comm.rank, comm.size)


def mismatched_calls(comm, state, calls: list[dict]) -> dict:
    """Rank r calls ``calls[r]`` (collective, count, dtype, op, root) after matched calls of every collective
    named (their set-up is collective); what the call raised, in how many seconds, whether the output kept its
    sentinel, and what the next call raised."""
    fresh = _fresh(comm)
    try:
        for collective in sorted({c["collective"] for c in calls}):
            _call(fresh, *_buffers(collective, 4 * comm.size, "float32", comm.size), collective)
        mine = calls[comm.rank]
        send, recv = _buffers(mine["collective"], mine["count"], mine["dtype"], comm.size)
        start = time.perf_counter()
        try:
            _call(fresh, send, recv, **mine)
            raised = None
        except Exception as exc:
            raised = (type(exc).__name__, str(exc))
        seconds = time.perf_counter() - start
        untouched = bool(np.all(recv.copy_to_host() == SENTINEL)) if raised else False
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

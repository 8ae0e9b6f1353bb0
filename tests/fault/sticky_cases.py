"""Rank-side cases of sticky errors: a failed device wait makes every later call raise before launching."""

from __future__ import annotations

import time

import numpy as np

import pymscclpp  # noqa: F401 (before numba.cuda)
from numba import cuda


def absent_peer_then_calls(comm, state, absent: int):
    """Rank ``absent`` skips an all_reduce; the others' call raises naming it, and so does every later call (at
    once, launching nothing: the buffer stays as it was)."""
    from pymscclpp.errors import CommTimeoutError
    buf = cuda.to_device(np.ones(16, np.float32))
    comm.all_reduce(buf)  # both ranks: the algorithm's set-up is collective
    gathered = cuda.to_device(np.zeros(16 * comm.size, np.float32))
    comm.all_gather(buf, gathered)
    cuda.synchronize()
    if comm.rank == absent:
        return None
    raised = []
    for _ in range(3):
        start = time.perf_counter()
        try:
            comm.all_reduce(buf)
            cuda.synchronize()
            comm.check_device_errors()
        except CommTimeoutError as exc:
            raised.append((str(exc), time.perf_counter() - start))
    before = buf.copy_to_host()
    try:
        comm.all_gather(buf, gathered)
    except CommTimeoutError as exc:
        raised.append((str(exc), 0.0))
    assert np.array_equal(buf.copy_to_host(), before)
    return raised

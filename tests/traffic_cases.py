"""Rank functions for the traffic tests: run one collective call and return what moved through the channels."""

from __future__ import annotations

import numpy as np
from numba import cuda

from pymscclpp.runtime import traffic


def _elements(collective: str, count: int, n: int) -> tuple[int, int]:
    """(send, receive) element counts of a call of ``count`` elements (nccl-tests sizes) on ``n`` ranks."""
    part = count // n
    return {"all_gather": (part, part * n), "reduce_scatter": (part * n, part),
            "all_to_all": (part * n, part * n)}.get(collective, (count, count))


def measured_call(comm, state, collective: str, algo: str, count: int, root: int = 0) -> dict:
    """This rank's channel counts for one call of ``collective`` by ``algo`` on ``count`` float32 elements (after a
    first call that sets the algorithm up), and the traffic the algorithm states for it."""
    send_n, recv_n = _elements(collective, count, comm.size)
    send = cuda.to_device(np.ones(send_n, np.float32))
    recv = cuda.to_device(np.zeros(recv_n, np.float32))
    args = (send, recv, root) if collective == "broadcast" else (send, recv)
    for _ in range(2):
        traffic.reset()
        getattr(comm, collective)(*args, algo=algo)
        cuda.synchronize()
        comm.check_device_errors()
    size = 4 * max(send_n, recv_n)  # nccl-tests sizes: the gathered output, the scattered input
    stated = comm.algorithms.get(collective, algo).traffic(size, comm.size, comm.rank, root)
    return {"counts": traffic.counts(), "stated": stated}

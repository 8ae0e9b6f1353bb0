"""Rank functions for the library-plan tests (the rank pools' ``fn(comm, state, ...)`` form)."""

from __future__ import annotations

import numpy as np
from numba import cuda

from collective_cases import expected_allreduce, rank_data


def all_reduce_served_by(comm, state, count: int, algo: str | None) -> str:
    """A float32 sum all-reduce (``algo`` forced, or the selection's choice) equals NumPy's; the serving
    algorithm's name."""
    send = cuda.to_device(rank_data(comm.rank, count, "float32", 5))
    recv = cuda.to_device(np.zeros(count, np.float32))
    comm.all_reduce(send, recv, algo=algo)
    cuda.synchronize()
    comm.check_device_errors()
    np.testing.assert_array_equal(recv.copy_to_host(), expected_allreduce(comm.size, count, "float32", 5, "sum"))
    return comm.last_algorithm("all_reduce").name


def refused(comm, state, algo: str) -> str:
    """The error text of an all-reduce forced onto ``algo``, which must refuse it."""
    from pymscclpp.errors import InvalidUsageError
    try:
        comm.all_reduce(cuda.to_device(np.ones(64, np.float32)), algo=algo)
    except InvalidUsageError as exc:
        return str(exc)
    raise AssertionError(f"{algo!r} served an all-reduce")

"""Collective API cases run by every rank (simulator rank pools, or GPUs under mpirun)."""

from __future__ import annotations

import numpy as np

import pymscclpp  # noqa: F401
from numba import cuda

from pymscclpp.channels import reduce as red

NP_OPS = {"sum": np.add, "min": np.minimum, "max": np.maximum, "prod": np.multiply}


def rank_data(rank: int, count: int, dtype: str, seed: int) -> np.ndarray:
    """Rank ``rank``'s input: small integers (exact in every dtype and any summation order)."""
    rng = np.random.default_rng([seed, rank])
    if dtype == "uint8":
        return rng.integers(0, 4, count).astype(np.uint8)
    return rng.integers(-8, 9, count).astype(np.dtype(dtype))


def expected_allreduce(size: int, count: int, dtype: str, seed: int, op: str) -> np.ndarray:
    acc = rank_data(0, count, dtype, seed)
    for r in range(1, size):
        acc = NP_OPS[op](acc, rank_data(r, count, dtype, seed))
    return acc.astype(np.dtype(dtype))


def all_reduce(comm, state, count: int, dtype: str, op: str, seed: int, inplace: bool, algo=None, repeat: int = 1):
    """all_reduce of rank-specific data equals the NumPy reduction on every rank, call after call."""
    for it in range(repeat):
        x = rank_data(comm.rank, count, dtype, seed + it)
        send = cuda.to_device(x)
        recv = send if inplace else cuda.to_device(np.full(count, 99, np.dtype(dtype)))
        comm.all_reduce(send, None if inplace else recv, op=op, algo=algo)
        cuda.synchronize()
        comm.check_device_errors()
        np.testing.assert_array_equal(recv.copy_to_host(), expected_allreduce(comm.size, count, dtype, seed + it, op))
        if not inplace:
            np.testing.assert_array_equal(send.copy_to_host(), x)


def bad_input(comm, state, case: str):
    """A bad all_reduce argument raises InvalidUsageError naming the problem, and writes nothing."""
    from pymscclpp.errors import InvalidUsageError
    send = cuda.to_device(np.ones(16, np.float32))
    recv = cuda.to_device(np.full(16, 7, np.float32))
    args = {"size": (send, cuda.to_device(np.zeros(15, np.float32))),
            "dtype": (send, cuda.to_device(np.zeros(16, np.int32))),
            "host": (np.ones(16, np.float32), recv),
            "op": (send, recv)}[case]
    kwargs = {"op": "avg"} if case == "op" else {}
    try:
        comm.all_reduce(*args, **kwargs)
    except InvalidUsageError as exc:
        words = {"size": "elements", "dtype": "int32", "host": "host memory", "op": "avg"}[case]
        assert words in str(exc), str(exc)
    else:
        raise AssertionError(f"{case}: no error")
    np.testing.assert_array_equal(recv.copy_to_host(), np.full(16, 7, np.float32))

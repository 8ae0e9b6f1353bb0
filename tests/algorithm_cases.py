"""Rank-side cases of the Algorithm interface: user algorithms (a kernel, a DSL plan) registered and selected."""

from __future__ import annotations

import os
import sys

import numpy as np

import pymscclpp  # noqa: F401 (before numba.cuda)
from numba import cuda

import collective_cases as cc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))


def user_kernel_serves_all_gather(comm, state, count: int, calls: int):
    """A registered KernelAlgorithm serves every all_gather it can, call after call, and gives the right data."""
    from custom_algorithm import my_all_gather
    algo = comm.register_algorithm(my_all_gather(comm.size))
    for it in range(calls):
        x = cc.rank_data(comm.rank, count, "float32", it)
        out = cuda.to_device(np.zeros(count * comm.size, np.float32))
        comm.all_gather(cuda.to_device(x), out)
        cuda.synchronize()
        comm.check_device_errors()
        want = np.concatenate([cc.rank_data(p, count, "float32", it) for p in range(comm.size)])
        np.testing.assert_array_equal(out.copy_to_host(), want)
    return algo.state is not None  # set up, so it ran


def plan_serves_all_reduce(comm, state, count: int, prefer: bool):
    """A DSL plan registered on the communicator runs through its executor for all_reduce (preferred, or by name)."""
    from pymscclpp.algos.plan_algorithm import executor_of
    from pymscclpp.language.programs import PROGRAMS
    algo = comm.register_algorithm(PROGRAMS["allreduce_allpairs"](comm.size), name="allpairs_plan", prefer=prefer)
    x = cc.rank_data(comm.rank, count, "float32", 5)
    buf = cuda.to_device(x)
    comm.all_reduce(buf, algo=None if prefer else "allpairs_plan")
    cuda.synchronize()
    comm.check_device_errors()
    np.testing.assert_array_equal(buf.copy_to_host(), cc.expected_allreduce(comm.size, count, "float32", 5, "sum"))
    return algo.name, len(executor_of(comm).stats)


def unservable_algorithms_are_skipped_or_refused(comm, state):
    """A preferred algorithm that cannot serve a call is passed over; forced by name, it raises saying why; either
    way it is never set up."""
    from pymscclpp.algos import Constraint, KernelAlgorithm
    from pymscclpp.errors import InvalidUsageError

    def never(state, call):
        raise AssertionError("an algorithm for 7 ranks was launched")

    def no_setup(c):
        raise AssertionError("an algorithm for 7 ranks was set up")

    comm.register_algorithm(KernelAlgorithm("for7", "all_reduce", no_setup, never,
                                            constraint=Constraint(world_size=7)))
    buf = cuda.to_device(np.ones(8, np.float32))
    comm.all_reduce(buf)
    cuda.synchronize()
    np.testing.assert_array_equal(buf.copy_to_host(), np.full(8, comm.size, np.float32))
    try:
        comm.all_reduce(buf, algo="for7")
    except InvalidUsageError as exc:
        return str(exc)
    raise AssertionError("forcing an algorithm that cannot serve the call did not raise")

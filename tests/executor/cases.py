"""Executor cases run by every rank (in RankPool processes or under mpiexec), on the simulator or on GPUs.

``run_case`` executes a plan on this rank's inputs for several executions with the same buffers and compares
each output with the interpreter's; the buffers are plain device arrays (staged by the executor) or
library-allocated ones (used in place when sizes allow), and optionally the same buffer (in place).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from pymscclpp.executor import ExecutionPlan, Executor
from pymscclpp.runtime.memory import alloc, view_as


def executor(comm, state: dict) -> Executor:
    """One executor per rank process, kept across cases."""
    if "executor" not in state:
        state["executor"] = Executor(comm, sim_threads=state.get("sim_threads", 2))
    return state["executor"]


def plan_of(state: dict, plan_json: str) -> ExecutionPlan:
    """The same ExecutionPlan object for the same JSON, so repeated calls hit the executor's cache."""
    plans = state.setdefault("plans", {})
    if plan_json not in plans:
        plans[plan_json] = ExecutionPlan.from_json(plan_json)
    return plans[plan_json]


def device_buffer(data: np.ndarray, registered: bool):
    """A device copy of ``data``: in a library allocation (registrable) or a plain device array."""
    if not registered:
        return cuda.to_device(data)
    buf = view_as(alloc(max(16, data.nbytes)), data.dtype, 0, data.size)
    buf.copy_to_device(data)
    return buf


def check_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-6, atol=1e-6,
                                   err_msg=what)


def run_case(comm, state, plan_json: str, inputs: list, expected: list, op: str = "sum", registered: bool = False,
             same_buffer: bool = False, stream=None):
    """Execute the plan once per execution of ``inputs[k][rank]`` and compare with ``expected[k][rank]``."""
    ex = executor(comm, state)
    plan = plan_of(state, plan_json)
    inputs, expected = [run[comm.rank] for run in inputs], [run[comm.rank] for run in expected]
    send = device_buffer(inputs[0], registered)
    recv = send if same_buffer else device_buffer(np.zeros(expected[0].size, expected[0].dtype), registered)
    for k, (x, want) in enumerate(zip(inputs, expected)):
        if k:
            send.copy_to_device(x)
        ex.execute(plan, send, recv, op=op, stream=stream)
        cuda.synchronize()
        comm.check_device_errors()
        check_equal(recv.copy_to_host(), want, f"rank {comm.rank} execution {k + 1} of plan {plan.name!r}")
    return len(ex.stats)


def expect_error(comm, state, plan_json: str, count: int, dtype: str, **executor_args) -> str:
    """The message of the error executing the plan raises on this rank (every rank must raise)."""
    ex = Executor(comm, **executor_args)
    plan = ExecutionPlan.from_json(plan_json)
    send = cuda.to_device(np.zeros(count, dtype))
    recv = cuda.to_device(np.zeros(count, dtype))
    try:
        ex.execute(plan, send, recv)
    except Exception as exc:  # noqa: BLE001 - the test checks the type and message
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError("executing the plan raised nothing")

"""Executor cases run by every rank (in RankPool processes or under mpiexec), on the simulator or on GPUs.

``check_executions`` executes a plan on this rank's inputs for several executions with the same buffers and
compares each output with the interpreter's; buffers are plain device arrays (staged by the executor when
not registrable), library allocations (used in place when sizes allow), torch tensors on GPUs, or one buffer
for both (in place). On GPUs the executions can also be captured once into a CUDA graph and replayed.
"""

from __future__ import annotations

import pickle

import numpy as np
from numba import cuda

from pymscclpp.executor import ExecutionPlan, Executor
from pymscclpp.runtime.backend import IS_SIM
from pymscclpp.runtime.memory import alloc, view_as


def executor(comm, state: dict) -> Executor:
    """One executor per rank process, kept across cases."""
    if "executor" not in state:
        state["executor"] = Executor(comm, sim_threads=state.get("sim_threads", 2))
    return state["executor"]


def set_sim_threads(comm, state, threads: int) -> None:
    """Use a fresh executor with ``threads`` simulator threads per plan thread block from now on."""
    state["sim_threads"] = threads
    state.pop("executor", None)


def plan_of(state: dict, plan_json: str) -> ExecutionPlan:
    """The same ExecutionPlan object for the same JSON, so repeated calls hit the executor's cache."""
    plans = state.setdefault("plans", {})
    if plan_json not in plans:
        plans[plan_json] = ExecutionPlan.from_json(plan_json)
    return plans[plan_json]


class Buffer:
    """A device buffer of one of the kinds the executor accepts, with host-side fill and read."""

    def __init__(self, data: np.ndarray, kind: str):
        self.kind = kind
        if kind == "torch":
            import torch
            self.obj = torch.from_numpy(data.view(np.uint16) if data.dtype.name == "bfloat16" else data).cuda()
            if data.dtype.name == "bfloat16":
                self.obj = self.obj.view(torch.bfloat16)
            self.dtype = data.dtype
        elif kind == "registered":
            self.raw = alloc(max(16, data.nbytes))  # a simulator view does not keep its segment alive by itself
            self.obj = view_as(self.raw, data.dtype, 0, data.size)
            self.obj.copy_to_device(data)
        else:
            self.obj = cuda.to_device(data)

    def write(self, data: np.ndarray) -> None:
        if self.kind == "torch":
            import torch
            src = torch.from_numpy(data.view(np.uint16) if data.dtype.name == "bfloat16" else data)
            self.obj.view(src.dtype).copy_(src)
        else:
            self.obj.copy_to_device(data)

    def read(self) -> np.ndarray:
        if self.kind == "torch":
            import torch
            t = self.obj.view(torch.int16) if self.dtype.name == "bfloat16" else self.obj
            return t.cpu().numpy().view(self.dtype)
        return self.obj.copy_to_host()


def check_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-6, atol=1e-6,
                                   err_msg=what)


def check_executions(comm, state, plan: ExecutionPlan, inputs: list, expected: list, op: str = "sum",
                     kind: str = "plain", same_buffer: bool = False, graph: bool = False) -> bool:
    """Run ``inputs[k][rank]`` through the plan and compare with ``expected[k][rank]`` after every execution;
    with ``graph`` (GPUs) capture one execution into a CUDA graph and replay it for each input instead.
    Returns whether the executor used the buffers in place."""
    ex = executor(comm, state)
    inputs, expected = [run[comm.rank] for run in inputs], [run[comm.rank] for run in expected]
    send = Buffer(inputs[0], kind)
    recv = send if same_buffer else Buffer(np.zeros(expected[0].size, expected[0].dtype), kind)
    replay = _capture(ex, plan, send.obj, recv.obj, op) if graph else None
    for k, (x, want) in enumerate(zip(inputs, expected)):
        send.write(x)
        cuda.synchronize()  # the write may be on another stream than the call
        if replay is None:
            ex.execute(plan, send.obj, recv.obj, op=op)
        else:
            replay()
        cuda.synchronize()
        comm.check_device_errors()
        check_equal(recv.read(), want, f"rank {comm.rank} execution {k + 1} of plan {plan.name!r}")
    return ex.prepare(plan, send.obj, recv.obj, op).binding.direct


def _capture(ex: Executor, plan: ExecutionPlan, send, recv, op: str):
    """A function replaying one execution captured into a CUDA graph on a fresh stream (setup happens first,
    outside the capture: it allocates and talks to the peers)."""
    from cuda.bindings import driver as cu
    assert not IS_SIM, "CUDA graphs need GPUs"
    ex.prepare(plan, send, recv, op)
    err, stream = cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
    assert err == cu.CUresult.CUDA_SUCCESS, err
    cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
    ex.execute(plan, send, recv, op=op, stream=int(stream))
    err, g = cu.cuStreamEndCapture(stream)
    assert err == cu.CUresult.CUDA_SUCCESS, err
    err, gexec = cu.cuGraphInstantiate(g, 0)
    assert err == cu.CUresult.CUDA_SUCCESS, err

    def replay() -> None:
        assert cu.cuGraphLaunch(gexec, stream)[0] == cu.CUresult.CUDA_SUCCESS
        assert cu.cuStreamSynchronize(stream)[0] == cu.CUresult.CUDA_SUCCESS
    return replay


def run_case(comm, state, path: str, op: str = "sum", kind: str = "plain", same_buffer: bool = False,
             graph: bool = False) -> bool:
    """``check_executions`` on the case stored at ``path`` by ``write_case``."""
    with open(path, "rb") as f:
        plan_json, inputs, expected = pickle.load(f)
    return check_executions(comm, state, plan_of(state, plan_json), inputs, expected, op, kind, same_buffer, graph)


def write_case(path: str, plan_json: str, inputs: list, expected: list) -> str:
    """Store a case (plan, ``inputs[k][r]``, ``expected[k][r]``) for ``run_case`` to read on every rank."""
    with open(path, "wb") as f:
        pickle.dump((plan_json, inputs, expected), f)
    return path


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

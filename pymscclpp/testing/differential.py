"""Differential check of a plan: the verifier, the reference interpreter and the executor (on a rank pool) must
compute the same outputs, bit for bit, or all refuse it with the same error class."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .failure import RankFailure
from .pool import RankPool

if TYPE_CHECKING:
    from ..communicator import Communicator

_EXECUTORS: dict = {}  # in each rank process: its Executor, kept across calls (it caches compiled plans)


class Outcome(NamedTuple):
    """What one of the three made of the plan: outputs ``[execution][rank]``, or the class of its refusal."""

    outputs: list | None
    error: str | None


def plan_inputs(plan: dict, executions: int = 2, elems: int = 4, seed: int = 0) -> list[list[np.ndarray]]:
    """Small exact float32 inputs, ``[execution][rank]``, ``elems`` per input chunk (sums and copies exact)."""
    rng = np.random.default_rng(seed)
    return [[rng.integers(-64, 64, g["input_chunks"] * elems).astype(np.float32) for g in plan["gpus"]]
            for _ in range(executions)]


def _execute(comm: Communicator, plan_json: str, inputs: list, out_elems: int) -> list:
    """This rank's outputs, one per execution of the plan on the executor (same buffers each time)."""
    from numba import cuda
    from ..executor import ExecutionPlan, Executor
    executor = _EXECUTORS.get(id(comm)) or _EXECUTORS.setdefault(id(comm), Executor(comm))
    plan = ExecutionPlan.from_json(plan_json)
    send = cuda.to_device(inputs[0][comm.rank])
    recv = cuda.to_device(np.zeros(out_elems, np.float32))
    outs = []
    for run in inputs:
        send.copy_to_device(run[comm.rank])
        executor.execute(plan, send, recv)
        cuda.synchronize()
        comm.check_device_errors()
        outs.append(recv.copy_to_host())
    return outs


def outcomes(pool: RankPool, plan: dict, inputs: list, elems: int = 4, seed: int = 0) -> dict[str, Outcome]:
    """The verifier's, the interpreter's and the executor's outcome on ``inputs`` (``[execution][rank]``)."""
    import json
    from ..language.interpreter import check_plan, run_plan
    found = {}
    try:
        check_plan(plan, size=elems * 4 * max(1, plan["gpus"][0]["input_chunks"]), seed=seed)
        found["verifier"] = Outcome(None, None)
    except Exception as exc:
        found["verifier"] = Outcome(None, type(exc).__name__)
    try:
        found["interpreter"] = Outcome(run_plan(plan, inputs, seed=seed), None)
    except Exception as exc:
        found["interpreter"] = Outcome(None, type(exc).__name__)
    try:
        per_rank = pool.run(_execute, json.dumps(plan), inputs, plan["gpus"][0]["output_chunks"] * elems)
        found["executor"] = Outcome([[per_rank[r][k] for r in range(len(per_rank))] for k in range(len(inputs))],
                                    None)
    except RankFailure as exc:
        found["executor"] = Outcome(None, "/".join(sorted(set(exc.errors.values()))) or "hang")
    return found


def assert_agree(found: dict[str, Outcome]) -> None:
    """Raise AssertionError unless all three refused with one error class, or the verifier accepted and the
    interpreter's and the executor's outputs are equal bit for bit."""
    errors = {name: o.error for name, o in found.items()}
    if len(set(errors.values())) != 1:
        raise AssertionError(f"they disagree on refusing the plan: {errors}")
    if errors["verifier"] is not None:
        return
    want, got = found["interpreter"].outputs or [], found["executor"].outputs or []
    for k, (w, g) in enumerate(zip(want, got)):
        for r, (a, b) in enumerate(zip(w, g)):
            if not np.array_equal(a.view(np.uint32), b.view(np.uint32)):
                raise AssertionError(f"execution {k} rank {r}: interpreter {a.tolist()} != executor {b.tolist()}")

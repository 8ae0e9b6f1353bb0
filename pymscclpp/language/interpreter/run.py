"""Public entry points of the interpreter: run a plan on given inputs, or check it computes its collective."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...plan import Plan, load_plan
from .collectives import CHECKED, expected_outputs
from .errors import CollectiveMismatchError, InterpreterError
from .machine import Machine

DTYPES = ("float16", "float32", "int32", "bfloat16")


def resolve_dtype(name: str) -> np.dtype:
    """numpy dtype for ``name``; bfloat16 needs the optional ``ml_dtypes`` package."""
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise InterpreterError("bfloat16 needs the ml_dtypes package, which is not installed") from None
        return np.dtype(ml_dtypes.bfloat16)
    if name not in DTYPES:
        raise InterpreterError(f"unsupported dtype {name!r}; choose one of {DTYPES}")
    return np.dtype(name)


def _message_chunks(plan: Plan) -> int:
    """Chunks in a message: input chunks (output chunks for allgather, or when there is no input), as MSCCL++ sizes it."""
    gpu = plan.gpus[0]
    return gpu.output_chunks if plan.collective == "allgather" or not gpu.input_chunks else gpu.input_chunks


def run_plan(plan: "Plan | dict | str", inputs: Sequence, *, seed: int = 0, chunk_bytes: int | None = None,
             fill: Sequence[np.ndarray] | None = None) -> list[list[np.ndarray]]:
    """Execute ``plan`` for all ranks and return the outputs, ``outputs[k][r]`` for execution k and rank r.

    ``inputs`` is either one list of per-rank 1-D arrays (one execution) or a list of such lists (one per
    back-to-back execution). All arrays share a dtype; their length fixes the chunk size unless the plan
    has no input chunks, where ``chunk_bytes`` must be given. ``fill`` gives each rank's initial io contents
    (outputs that the plan never writes keep them). Raises ``RaceError`` or ``DeadlockError``.
    """
    plan = load_plan(plan)
    runs = [list(inputs)] if isinstance(inputs[0], np.ndarray) else [list(x) for x in inputs]
    dtype = runs[0][0].dtype
    if len(runs[0]) != plan.num_ranks:
        raise InterpreterError(f"the plan has {plan.num_ranks} ranks, got inputs for {len(runs[0])}")
    if chunk_bytes is None:
        if plan.gpus[0].input_chunks == 0:
            raise InterpreterError("the plan has no input chunks: give chunk_bytes")
        chunk_bytes = runs[0][0].nbytes // plan.gpus[0].input_chunks
    for g in plan.gpus:
        if g.input_chunks * chunk_bytes != runs[0][g.id].nbytes:
            raise InterpreterError(f"rank {g.id} input has {runs[0][g.id].nbytes} bytes, the plan expects "
                                   f"{g.input_chunks} chunks of {chunk_bytes} bytes")
    if chunk_bytes % plan.buffer_alignment:
        raise InterpreterError(f"chunk size {chunk_bytes} bytes is not a multiple of the plan's buffer_alignment "
                               f"{plan.buffer_alignment}")
    machine = Machine(plan, dtype, chunk_bytes, len(runs), seed)
    for r in range(plan.num_ranks):
        if fill is not None:
            machine.fill_io(r, fill[r])
        machine.write_input(r, runs[0][r])
    return machine.run(runs)


@dataclass
class CheckReport:
    """Outcome of a successful ``check_plan``."""

    name: str
    collective: str
    num_ranks: int
    protocol: str
    dtype: str
    message_bytes: int
    executions: int
    threadblocks: list[int]
    ops: int
    checked: bool

    def __str__(self) -> str:
        verdict = "computes" if self.checked else "runs without race or deadlock (no reference for)"
        return (f"OK: plan {self.name!r} {verdict} {self.collective} on {self.num_ranks} ranks "
                f"({self.protocol}, {self.dtype}, {self.message_bytes} bytes, {self.executions} executions, "
                f"{sum(self.threadblocks)} thread blocks, {self.ops} ops)")


def default_chunk_bytes(plan: Plan, size: int | None) -> int:
    """Chunk size for a message of ``size`` bytes (input size; output size for allgather), or a small default
    inside the plan's message-size range; for a plan without input or output chunks, ``size`` is the chunk size."""
    per = _message_chunks(plan)
    align = plan.buffer_alignment
    if per == 0:  # no input or output chunks: the plan moves scratch only, ``size`` is its chunk size
        chunk = 4 * align if size is None else size
        if chunk <= 0 or chunk % align:
            raise InterpreterError(f"the plan has no input or output chunks, so the size gives its chunk size, which "
                                   f"must be a positive multiple of its {align}-byte alignment; got {chunk}")
        return chunk
    if size is None:
        chunk = 4 * align
        if per * chunk < plan.min_message_size:
            chunk = -(-plan.min_message_size // (per * align)) * align
        size = per * chunk
    if size % (per * align):
        raise InterpreterError(f"message size {size} is not a multiple of {per} chunks x {align}-byte alignment")
    if not plan.min_message_size <= size <= plan.max_message_size:
        raise InterpreterError(f"message size {size} is outside the plan's range "
                               f"[{plan.min_message_size}, {plan.max_message_size}]")
    return size // per


def check_plan(plan: "Plan | dict | str", *, dtype: str = "float32", size: int | None = None, seed: int = 0,
               executions: int = 2) -> CheckReport:
    """Run ``plan`` on random inputs and check each execution's outputs against its declared collective.

    Raises ``RaceError``, ``DeadlockError`` or ``CollectiveMismatchError`` with the reason.
    """
    plan = load_plan(plan)
    np_dtype = resolve_dtype(dtype)
    chunk_bytes = default_chunk_bytes(plan, size)
    rng = np.random.default_rng(seed)

    def values(nbytes: int, low: int, high: int) -> np.ndarray:
        return rng.integers(low, high, nbytes // np_dtype.itemsize).astype(np_dtype)

    runs = [[values(g.input_chunks * chunk_bytes, -8, 9) for g in plan.gpus] for _ in range(executions)]
    machine = Machine(plan, np_dtype, chunk_bytes, executions, seed)
    for r in range(plan.num_ranks):
        machine.fill_io(r, values(machine.io[r].data.size, 100, 200))
        machine.write_input(r, runs[0][r])
    outputs = machine.run(runs)
    checked = plan.collective in CHECKED
    if checked:
        for k, run in enumerate(runs):
            for r, (got, want) in enumerate(zip(outputs[k], expected_outputs(plan.collective, run))):
                if got.shape != want.shape:
                    raise CollectiveMismatchError(f"rank {r} output has {got.size} elements, {plan.collective} "
                                                  f"of these inputs has {want.size}")
                bad = np.flatnonzero(got != want)
                if bad.size:
                    i = int(bad[0])
                    chunk = i * np_dtype.itemsize // chunk_bytes
                    raise CollectiveMismatchError(
                        f"execution {k + 1}: rank {r} output chunk {chunk} (element {i}) is {got[i]}, "
                        f"{plan.collective} expects {want[i]} ({bad.size} wrong elements on this rank)")
    return CheckReport(plan.name, plan.collective, plan.num_ranks, plan.protocol, dtype, chunk_bytes * _message_chunks(plan),
                       executions, [len(g.threadblocks) for g in plan.gpus], machine.ops_executed, checked)

"""Inputs and expected outputs of executor cases: the reference interpreter on the padded message.

The executor pads each part of an odd-sized message to whole chunks; the interpreter runs the plan on the
same padded parts, and the parts are cut back out, so both see the same data in the same chunks.
"""

from __future__ import annotations

import numpy as np

from pymscclpp.executor.layout import message_layout
from pymscclpp.executor.plan import ExecutionPlan
from pymscclpp.language.interpreter import resolve_dtype, run_plan

RANGES = {"int32": (-1000, 1000), "uint8": (0, 60)}


def call_sizes(xplan: ExecutionPlan, count: int) -> tuple[int, int]:
    """(send, recv) element counts of a call whose parts have ``count`` elements (without part structure, every
    chunk is a part)."""
    n, coll, gpu = xplan.num_ranks, xplan.plan.collective, xplan.plan.gpus[0]
    ins, outs = {"allreduce": (1, 1), "allgather": (1, n), "reducescatter": (n, 1), "alltoall": (n, n),
                 "broadcast": (1, 1), "sendrecv": (1, 1)}.get(coll, (gpu.input_chunks, gpu.output_chunks))
    return ins * count, outs * count


def make_inputs(xplan: ExecutionPlan, dtype: str, count: int, seed: int, executions: int) -> list[list[np.ndarray]]:
    """``inputs[k][r]``: rank r's send buffer in execution k (small integers for ints, normals for floats)."""
    np_dtype = resolve_dtype(dtype)
    rng = np.random.default_rng(seed)
    send, _ = call_sizes(xplan, count)
    lo, hi = RANGES.get(dtype, (None, None))

    def one() -> np.ndarray:
        if lo is not None:
            return rng.integers(lo, hi, send).astype(np_dtype)
        return rng.standard_normal(send).astype(np_dtype)

    return [[one() for _ in range(xplan.num_ranks)] for _ in range(executions)]


def expected_outputs(xplan: ExecutionPlan, inputs: list[list[np.ndarray]], count: int, op: str) -> list[list[np.ndarray]]:
    """``outputs[k][r]``: what the interpreter computes, cut to the caller's receive buffers."""
    np_dtype = inputs[0][0].dtype
    send, recv = call_sizes(xplan, count)
    plan = xplan.plan.to_dict()
    for gpu in plan["gpus"]:
        for tb in gpu["threadblocks"]:
            for o in tb["ops"] + [i for o in tb["ops"] for i in o.get("ops", [])]:
                if "reduce_op" in o:
                    o["reduce_op"] = op
    lay = message_layout(xplan, 0, send * np_dtype.itemsize, recv * np_dtype.itemsize, np_dtype.itemsize)
    in_bytes = xplan.plan.gpus[0].input_chunks * lay.chunk

    def pad(x: np.ndarray) -> np.ndarray:
        raw = np.zeros(in_bytes, np.uint8)
        src = x.view(np.uint8)
        for u, k in lay.in_slots():
            raw[k:k + lay.part] = src[u:u + lay.part]
        return raw.view(np_dtype)

    outs = run_plan(plan, [[pad(x) for x in run] for run in inputs], chunk_bytes=lay.chunk)
    cut = []
    for run in outs:
        row = []
        for y in run:
            raw, got = y.view(np.uint8), np.zeros(recv * np_dtype.itemsize, np.uint8)
            for u, k in lay.out_slots():
                got[u:u + lay.part] = raw[k:k + lay.part]
            row.append(got.view(np_dtype))
        cut.append(row)
    return cut

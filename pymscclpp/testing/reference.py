"""What every collective computes, in NumPy, from the ranks' inputs: the oracle of property tests.

Each function takes the per-rank inputs (rank r's at index r) and returns the per-rank expected outputs. The
reductions are bit-exact with the library's: rank order 0..n-1, float16 and bfloat16 combined lane by lane in
float32 and rounded back to nearest even after each combine (``channels/reduce.py``), integers wrapping.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from .calls import CollectiveCall

_OPS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum, "avg": np.add}
_WIDENED = {"float16", "bfloat16"}  # combined in float32, as the device does


def _reduce(arrays: Sequence[np.ndarray], op: str) -> np.ndarray:
    if op not in _OPS:
        raise ValueError(f"unknown reduction op {op!r}: supported are {', '.join(_OPS)}")
    combine, dtype = _OPS[op], arrays[0].dtype
    acc = np.array(arrays[0], copy=True)
    with np.errstate(over="ignore", invalid="ignore"):
        for x in arrays[1:]:
            if dtype.name in _WIDENED:
                acc = combine(acc.astype(np.float32), x.astype(np.float32)).astype(dtype)
            else:
                acc = combine(acc, x).astype(dtype, copy=False)
    return _average(acc, len(arrays)) if op == "avg" else acc


def _average(total: np.ndarray, n: int) -> np.ndarray:
    """A sum over ``n`` ranks divided by ``n`` as the device does: floats in float32 (or wider), rounded once;
    integers rounded toward zero."""
    dtype = total.dtype
    if dtype.kind in "iu":
        wide = total.astype(np.int64)
        return (np.sign(wide) * (np.abs(wide) // n)).astype(dtype)
    wide = total.astype(np.float32) if dtype.name in _WIDENED else total
    return (wide / wide.dtype.type(n)).astype(dtype)


def _flat(inputs: Sequence) -> list[np.ndarray]:
    arrays = [np.ascontiguousarray(x).reshape(-1) for x in inputs]
    if not arrays:
        raise ValueError("no inputs: pass one array per rank")
    if any(a.dtype != arrays[0].dtype or a.size != arrays[0].size for a in arrays):
        raise ValueError("every rank's input must have the same dtype and size")
    return arrays


def _slots(x: np.ndarray, n: int) -> list[np.ndarray]:
    if x.size % n:
        raise ValueError(f"an input of {x.size} elements does not split into {n} equal slots")
    return np.split(x, n)


def all_reduce(inputs: Sequence, op: str = "sum") -> list[np.ndarray]:
    """Every rank gets the reduction of all inputs."""
    arrays = _flat(inputs)
    out = _reduce(arrays, op)
    return [out.copy() for _ in arrays]


def all_gather(inputs: Sequence) -> list[np.ndarray]:
    """Every rank gets all inputs, rank r's at slot r."""
    arrays = _flat(inputs)
    out = np.concatenate(arrays)
    return [out.copy() for _ in arrays]


def reduce_scatter(inputs: Sequence, op: str = "sum") -> list[np.ndarray]:
    """Rank r gets the reduction of slot r of every rank's input (``n`` equal slots)."""
    arrays = _flat(inputs)
    slots = [_slots(a, len(arrays)) for a in arrays]
    return [_reduce([s[r] for s in slots], op) for r in range(len(arrays))]


def all_to_all(inputs: Sequence) -> list[np.ndarray]:
    """Rank r's slot j is rank j's slot r (``n`` equal slots)."""
    arrays = _flat(inputs)
    slots = [_slots(a, len(arrays)) for a in arrays]
    return [np.concatenate([slots[j][r] for j in range(len(arrays))]) for r in range(len(arrays))]


def broadcast(inputs: Sequence, root: int = 0) -> list[np.ndarray]:
    """Every rank gets rank ``root``'s input."""
    arrays = _flat(inputs)
    if not 0 <= root < len(arrays):
        raise ValueError(f"root {root} is not a rank of {len(arrays)}")
    return [arrays[root].copy() for _ in arrays]


def expected(call: CollectiveCall, inputs: Sequence) -> list[np.ndarray]:
    """The expected outputs of a drawn call (``strategies.collective_calls``) on ``inputs``."""
    if call.collective == "all_reduce":
        return all_reduce(inputs, call.op or "sum")
    if call.collective == "reduce_scatter":
        return reduce_scatter(inputs, call.op or "sum")
    if call.collective == "broadcast":
        return broadcast(inputs, call.root)
    return {"all_gather": all_gather, "all_to_all": all_to_all}[call.collective](inputs)

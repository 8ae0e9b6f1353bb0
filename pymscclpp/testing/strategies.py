"""Hypothesis strategies: collective calls, the ranks' inputs for a call, and random valid DSL programs.

Inputs are exact in their dtype and small enough that no reduction of ``nranks`` of them rounds or wraps, so
any reduction order gives the reference's bits (a kernel may add its own input first, as the tutorial's does).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from .calls import COLLECTIVES, DTYPES, REDUCE_OPS, REDUCING, CollectiveCall, np_dtype
from .programs import LOCAL_KINDS, REMOTE_KINDS, DrawnProgram, ProgramSpec, Step, build

_EXACT = {"float16": 2**11, "bfloat16": 2**8, "float32": 2**24, "int32": 2**20, "uint8": 255}  # sums stay exact
_FLOAT_FACTORS = (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0)  # products of a few stay exact


@st.composite
def collective_calls(draw: st.DrawFn, min_ranks: int = 2, max_ranks: int = 4, max_count: int = 64,
                     collectives: Sequence[str] = COLLECTIVES, dtypes: Sequence[str] = DTYPES,
                     ops: Sequence[str] = REDUCE_OPS, min_count: int = 1) -> CollectiveCall:
    """A ``CollectiveCall``: ``.collective .nranks .count .dtype .op .root`` drawn from the given choices."""
    collective = draw(st.sampled_from(list(collectives)))
    nranks = draw(st.integers(min_ranks, max_ranks))
    count = draw(st.integers(min_count, max_count))
    dtype = draw(st.sampled_from(list(dtypes)))
    op = draw(st.sampled_from(list(ops))) if collective in REDUCING else None
    root = draw(st.integers(0, nranks - 1)) if collective == "broadcast" else 0
    return CollectiveCall(collective, nranks, count, dtype, op, root)


def _values(dtype: str, op: str | None, nranks: int, shape: int) -> st.SearchStrategy:
    """Arrays of ``shape`` elements, exact in ``dtype``, whose reduction over ``nranks`` ranks with ``op`` is exact."""
    dt = np_dtype(dtype)
    floating = dt.kind in "fV"
    if op == "prod":
        elems = st.sampled_from(_FLOAT_FACTORS) if floating else \
            st.integers(0 if dt.kind == "u" else -3, 2 if dt.kind == "u" else 3)
    else:
        bound = max(1, _EXACT.get(dtype, 2**8) // nranks)
        elems = st.integers(0 if dt.kind == "u" else -bound, bound)
        if floating:
            elems = elems.map(lambda k: k / 4)
    base = np.float32 if floating else dt
    return arrays(base, shape, elements=elems).map(lambda a: a.astype(dt))


def rank_inputs(call: CollectiveCall) -> st.SearchStrategy:
    """Every rank's input for ``call`` (a list of ``call.nranks`` arrays of ``call.in_count`` elements)."""
    return st.lists(_values(call.dtype, call.op, call.nranks, call.in_count), min_size=call.nranks,
                    max_size=call.nranks)


@st.composite
def program_specs(draw: st.DrawFn, min_ranks: int = 2, max_ranks: int = 3, max_steps: int = 6, max_chunks: int = 3,
                  max_channels: int = 2, max_tbs: int = 2, packets: bool = True) -> ProgramSpec:
    """A ``ProgramSpec`` whose steps read only chunks written before (inputs, or earlier steps' results)."""
    n = draw(st.integers(min_ranks, max_ranks))
    sizes = {"i": draw(st.integers(1, max_chunks)), "o": draw(st.integers(1, max_chunks)),
             "s": draw(st.integers(1, max_chunks))}
    channels, tbs = draw(st.integers(1, max_channels)), draw(st.integers(1, max_tbs))
    ready = [{("i", c) for c in range(sizes["i"])} for _ in range(n)]
    kinds = LOCAL_KINDS + tuple(k for k in REMOTE_KINDS if packets or k != "packets")

    def readable(rank: int) -> tuple:
        return draw(st.sampled_from(sorted(ready[rank])))

    def writable(rank: int, not_: tuple = ()) -> tuple:
        buf = draw(st.sampled_from(["o", "s"]))
        ref = (buf, draw(st.integers(0, sizes[buf] - 1)))
        return ref if ref not in not_ else (buf, (ref[1] + 1) % sizes[buf]) if sizes[buf] > 1 else ref

    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(kinds))
        a = draw(st.integers(0, n - 1))
        b = draw(st.sampled_from([r for r in range(n) if r != a]))
        ch, tb = draw(st.integers(0, channels - 1)), draw(st.integers(0, tbs - 1))
        writer = b if kind in ("put", "packets") else a
        src = readable(b if kind == "get" else a)
        other = readable(b if kind == "remote_reduce" else a) if kind in ("reduce", "remote_reduce") else ("i", 0)
        dst = writable(writer, (src, other) if kind == "copy" else (other,))
        if (kind == "copy" and dst == src) or (kind in ("reduce", "remote_reduce") and dst == other):
            continue  # no such chunk to write: leave the step out
        steps.append(Step(kind, a, b, ch, tb, dst, src, other))
        ready[writer].add(dst)
    return ProgramSpec(n, sizes["i"], sizes["o"], sizes["s"], channels, tbs, tuple(steps))


def dsl_programs(min_ranks: int = 2, max_ranks: int = 3, max_steps: int = 6, max_chunks: int = 3,
                 max_channels: int = 2, max_tbs: int = 2, packets: bool = True) -> st.SearchStrategy:
    """Random valid DSL programs (``DrawnProgram``: ``.program``, ``.to_dict()``; its repr rebuilds it): puts,
    gets, remote and local reduces, copies and LL packets between random chunks, fenced by signals and waits;
    ``packets=False`` keeps to the Simple protocol."""
    return program_specs(min_ranks, max_ranks, max_steps, max_chunks, max_channels, max_tbs, packets).map(build)


__all__ = ["CollectiveCall", "DrawnProgram", "ProgramSpec", "collective_calls", "dsl_programs", "np_dtype",
           "program_specs", "rank_inputs"]

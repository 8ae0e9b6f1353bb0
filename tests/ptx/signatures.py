"""Numba argument types the compile-only scripts share (import after ``pymscclpp``, which picks the backend)."""

from __future__ import annotations

from numba import types

from pymscclpp.algos.callcheck import CallCheckHandle

U8, U32 = types.Array(types.uint8, 1, "C"), types.Array(types.uint32, 1, "C")
U64, I64 = types.Array(types.uint64, 1, "C"), types.Array(types.int64, 1, "C")


def callcheck(peers: int):
    """The call check's handle type with ``peers`` peer areas."""
    return types.NamedTuple([U8, types.UniTuple(U8, peers), U32, U32, I64, U64, types.int64, types.int64,
                             types.int64, types.uint64], CallCheckHandle)

"""reduce_bytes on the simulator against a NumPy oracle: every dtype kind and op, any size and offset."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pymscclpp  # noqa: F401
from numba import cuda
from pymscclpp.channels import reduce as red


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    return np.where(nan, (u >> 16) | 0x40, rounded).astype(np.uint16)


OPS = {"sum": np.add, "min": np.minimum, "max": np.maximum, "prod": np.multiply}


def oracle(kind: str, op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Expected bytes of a (op) b for element bytes a, b."""
    f = OPS[op]
    if kind == "bfloat16":
        return f32_to_bf16(f(bf16_to_f32(a.view(np.uint16)), bf16_to_f32(b.view(np.uint16)))).view(np.uint8)
    if kind == "float16":
        x, y = a.view(np.float16).astype(np.float32), b.view(np.float16).astype(np.float32)
        return f(x, y).astype(np.float16).view(np.uint8)
    dt = np.dtype(kind)
    with np.errstate(over="ignore"):
        return f(a.view(dt), b.view(dt)).astype(dt).view(np.uint8)


def values(kind: str, n: int, rng) -> np.ndarray:
    if kind in ("float32", "float16"):
        return rng.standard_normal(n).astype(kind).view(np.uint8)
    if kind == "bfloat16":
        return f32_to_bf16(rng.standard_normal(n).astype(np.float32)).view(np.uint8)
    if kind == "int32":
        return rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32).view(np.uint8)
    return rng.integers(0, 256, n, dtype=np.uint8)


@cuda.jit
def _kernel(dst, dst_off, a, a_off, b, b_off, nbytes, kind, op):
    red.reduce_bytes(dst, dst_off, a, a_off, b, b_off, nbytes, cuda.threadIdx.x, cuda.blockDim.x, kind, op)


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(list(red.DTYPE_KINDS)), op=st.sampled_from(sorted(red.PAIRWISE_OPS)),
       count=st.integers(1, 300), offs=st.tuples(*[st.integers(0, 8)] * 3), seed=st.integers(0, 999),
       nthreads=st.sampled_from([1, 4, 16]))
def test_reduce_bytes_matches_numpy_for_every_kind_op_size_and_offset(kind, op, count, offs, seed, nthreads):
    rng = np.random.default_rng(seed)
    size = {"float32": 4, "bfloat16": 2, "float16": 2, "int32": 4, "uint8": 1}[kind]
    offs = tuple(o * size for o in offs)
    nbytes = count * size
    a, b = values(kind, count, rng), values(kind, count, rng)
    abuf, bbuf = np.zeros(nbytes + 64, np.uint8), np.zeros(nbytes + 64, np.uint8)
    abuf[offs[1]:offs[1] + nbytes], bbuf[offs[2]:offs[2] + nbytes] = a, b
    dst = cuda.to_device(np.full(nbytes + 64, 0xAB, np.uint8))
    _kernel[1, nthreads](dst, offs[0], cuda.to_device(abuf), offs[1], cuda.to_device(bbuf), offs[2], nbytes,
                         red.dtype_kind(kind), red.op_code(op))
    got = dst.copy_to_host()
    np.testing.assert_array_equal(got[offs[0]:offs[0] + nbytes], oracle(kind, op, a, b))
    assert (got[:offs[0]] == 0xAB).all() and (got[offs[0] + nbytes:] == 0xAB).all()


def test_unknown_dtype_and_op_are_named_in_the_error():
    with pytest.raises(ValueError, match="float64"):
        red.dtype_kind(np.float64)
    with pytest.raises(ValueError, match="mean"):
        red.op_code("mean")


@cuda.jit
def _slots_kernel(dst, own, own_slot, slots, stride, nslots, nbytes, kind, op, chans):
    red.reduce_slots(dst, 0, own, 0, own_slot, slots, 0, stride, nslots, nbytes, cuda.threadIdx.x, cuda.blockDim.x,
                     kind, op, chans)


@pytest.mark.parametrize("nslots", range(1, 11))  # one to ten sources, more than eight ranks
@pytest.mark.parametrize("kind,op", [("float32", "sum"), ("bfloat16", "sum"), ("int32", "max"), ("uint8", "prod")])
def test_a_reduction_of_any_number_of_slots_folds_them_in_slot_order(nslots, kind, op):
    from collections import namedtuple
    rng = np.random.default_rng(nslots)
    size = {"float32": 4, "bfloat16": 2, "int32": 4, "uint8": 1}[kind]
    unused = (namedtuple("Handle", "dst")(cuda.to_device(np.zeros(16, np.uint8))),)  # no peer memory read here
    for count in (7, 64, 301):  # with 4 threads: the four-vector loop, the one-vector loop, the element tail
        nbytes = count * size
        stride = nbytes + 16
        srcs = [values(kind, count, rng) for _ in range(nslots)]
        laid = np.zeros(stride * nslots, np.uint8)
        for s in range(nslots):
            laid[s * stride:s * stride + nbytes] = srcs[s]
        own_slot = nslots // 2  # read from ``own``, the others from their slots
        dst = cuda.to_device(np.full(nbytes, 0xAB, np.uint8))
        _slots_kernel[1, 4](dst, cuda.to_device(srcs[own_slot]), own_slot, cuda.to_device(laid), stride, nslots,
                            nbytes, red.dtype_kind(kind), red.op_code(op), unused)
        want = srcs[0]
        for s in range(1, nslots):
            want = oracle(kind, op, want, srcs[s])
        np.testing.assert_array_equal(dst.copy_to_host(), want)

"""The packed 16-bit float sums (``channels.packed``) round each lane once to nearest even, as the GPU's
``add.rn.f16x2`` and ``fma.rn.bf16x2`` do: the simulator's twins against exact float64 sums rounded by ml_dtypes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pymscclpp  # noqa: F401
from pymscclpp.channels.packed import add_bf16x2, add_f16x2

_FORMATS = {"bfloat16": (add_bf16x2, ml_dtypes.bfloat16), "float16": (add_f16x2, np.float16)}


def _exact_sum(x: int, y: int, dtype) -> int:
    """The bits of the sum of two ``dtype`` values (bit patterns) rounded once (float64 holds it exactly)."""
    a, b = (np.array(v, np.uint16).view(dtype).astype(np.float64) for v in (x, y))
    with np.errstate(over="ignore"):
        return int(np.array(a + b).astype(dtype).view(np.uint16))


@settings(max_examples=400, deadline=None)
@given(fmt=st.sampled_from(sorted(_FORMATS)), lanes=st.tuples(*[st.integers(0, 0xFFFF)] * 4))
def test_each_lane_of_a_packed_sum_is_the_exact_sum_rounded_once(fmt, lanes):
    add, dtype = _FORMATS[fmt]
    al, ah, bl, bh = lanes
    got = int(add(np.uint32(al | ah << 16), np.uint32(bl | bh << 16)))
    for shift, (x, y) in ((0, (al, bl)), (16, (ah, bh))):
        want = _exact_sum(x, y, dtype)
        lane = got >> shift & 0xFFFF
        if np.isnan(np.array(want, np.uint16).view(dtype)):
            assert lane == 0x7FFF, (hex(x), hex(y), hex(lane))
        else:
            assert lane == want, (fmt, hex(x), hex(y), hex(lane), hex(want))


"""The two-step kernels' block slices (``shard_slice``): block b touches the same scratch bytes in every round
of a call, a short last round too, so the barriers between block b of every rank order every reuse of a scratch
half (a slice sized by the round let a short last round overwrite what another block still read)."""

import numpy as np
import pytest
from numba import cuda

from pymscclpp.algos.twoshot_kernels import shard_slice

BLOCKS = 5


@cuda.jit
def _slices(out, rem, full, nranks):
    if cuda.threadIdx.x == 0:
        for s in range(nranks):
            at, lo, n, held = shard_slice(rem, full, nranks, s)
            row = cuda.blockIdx.x * nranks + s
            out[row, 0], out[row, 1], out[row, 2], out[row, 3] = at, lo, n, held


def slices(rem: int, full: int, nranks: int) -> np.ndarray:
    out = cuda.to_device(np.zeros((BLOCKS * nranks, 4), np.int64))
    _slices[BLOCKS, 1](out, rem, full, nranks)
    return out.copy_to_host().reshape(BLOCKS, nranks, 4)


@pytest.mark.parametrize("nranks", [1, 2, 4])
@pytest.mark.parametrize("rem", [16, 1600, 4096, 6000, 8000])
def test_a_short_rounds_block_slices_stay_inside_that_blocks_full_round_slices(nranks, rem):
    full = 8000 // (16 * nranks) * (16 * nranks)
    rem = min(rem, full)
    whole, short = slices(full, full, nranks), slices(rem, full, nranks)
    covered = np.zeros(rem, np.int64)
    for b in range(BLOCKS):
        for s in range(nranks):
            at, lo, n, held = short[b, s]
            if n <= 0:
                continue
            f_at, f_lo, f_n, f_held = whole[b, s]
            assert f_held <= held and held + n <= f_held + f_n, (b, s, short[b, s], whole[b, s])
            covered[at:at + n] += 1
    assert (covered == 1).all()  # and the round's bytes are sliced exactly once

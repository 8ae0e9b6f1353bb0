"""The zero-copy exchanges' block shares (``shares.end_to_end_share`` and ``part_of``): ranges of any lengths laid
end to end are split so that every byte of every range is copied by exactly one block, a block spans at most a few
ranges, and ranges of whole 16-byte lengths keep their parts 16-byte aligned."""

import numpy as np
import pytest
from numba import cuda

from pymscclpp.algos.shares import end_to_end_share, part_of

BLOCKS = 7


@cuda.jit
def _parts(out, lengths):
    if cuda.threadIdx.x == 0:
        total = 0
        for i in range(lengths.size):
            total += lengths[i]
        lo, cnt = end_to_end_share(total)
        start = 0
        for i in range(lengths.size):
            at, n = part_of(lo, cnt, start, lengths[i])
            row = cuda.blockIdx.x * lengths.size + i
            out[row, 0], out[row, 1] = at, n
            start += lengths[i]


def parts(lengths: list[int]) -> np.ndarray:
    """(offset within range i, byte count) of block b's part of range i, as ``[b, i]``."""
    out = cuda.to_device(np.zeros((BLOCKS * len(lengths), 2), np.int64))
    _parts[BLOCKS, 1](out, cuda.to_device(np.array(lengths, np.int64)))
    return out.copy_to_host().reshape(BLOCKS, len(lengths), 2)


@pytest.mark.parametrize("lengths", [[0], [1], [16] * 8, [4096] * 8, [2054] * 3, [0, 5, 0, 3000, 17, 1],
                                     [100000, 16, 0, 48, 99984], [3] * 40])
def test_every_byte_of_every_range_has_exactly_one_block(lengths):
    got = parts(lengths)
    for i, length in enumerate(lengths):
        covered = np.zeros(length, np.int64)
        for b in range(BLOCKS):
            at, n = got[b, i]
            if n > 0:
                assert 0 <= at and at + n <= length, (b, i, at, n)
                covered[at:at + n] += 1
        assert (covered == 1).all(), (i, covered)


@pytest.mark.parametrize("lengths", [[4096] * 8, [131072] * 7, [48, 16000, 32]])
def test_a_block_spans_few_ranges_and_aligned_ranges_keep_aligned_parts(lengths):
    got = parts(lengths)
    per_block = (got[:, :, 1] > 0).sum(axis=1)
    assert per_block.max() <= -(-len(lengths) // BLOCKS) + 1
    used = got[:, :, 1] > 0
    assert (got[:, :, 0][used] % 16 == 0).all()

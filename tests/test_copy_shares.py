"""The zero-copy exchanges' parts (``shares.copy_share`` and ``part_of``): ranges of any lengths laid end to end are
split so that every byte of every range is copied by exactly one thread of the grid; a call of one range, or of
ranges that each span ``WIDE_PASSES`` passes of the grid, is copied by the whole grid range after range; otherwise
a block spans at most a few ranges, and ranges of whole 16-byte lengths keep their parts 16-byte aligned."""

import numpy as np
import pytest
from numba import cuda

from pymscclpp.algos.shares import WIDE_PASSES, copy_share, part_of
from pymscclpp.channels.primitives import VECTOR_PASS_BYTES

BLOCKS, THREADS = 7, 4
PASS = BLOCKS * THREADS * VECTOR_PASS_BYTES  # bytes the grid copies in one pass


@cuda.jit
def _cover(counts, parts, lengths, starts):
    """Every thread adds 1 to each byte it copies (16-byte vectors t, t + tn, ... of each of its parts, as
    ``copy_bytes`` deals them); thread 0 of each block records its (offset, count, thread, threads) per range."""
    total, ranges, smallest = 0, 0, 0
    for i in range(lengths.size):
        if lengths[i] > 0:
            smallest = lengths[i] if ranges == 0 else min(smallest, lengths[i])
            total, ranges = total + lengths[i], ranges + 1
    lo, cnt, t, tn = copy_share(total, ranges, smallest)
    for i in range(lengths.size):
        at, n = part_of(lo, cnt, starts[i], lengths[i])
        if cuda.threadIdx.x == 0:
            row = cuda.blockIdx.x * lengths.size + i
            parts[row, 0], parts[row, 1], parts[row, 2], parts[row, 3] = at, n, t, tn
        v = t
        while v * 16 < n:
            for k in range(at + v * 16, min(at + v * 16 + 16, at + n)):
                cuda.atomic.add(counts, starts[i] + k, 1)
            v += tn


def cover(lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(copies of every byte laid end to end, block b's (offset, count, thread, threads) of range i as ``[b, i]``)."""
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    counts = cuda.to_device(np.zeros(max(sum(lengths), 1), np.int64))
    parts = cuda.to_device(np.zeros((BLOCKS * len(lengths), 4), np.int64))
    _cover[BLOCKS, THREADS](counts, parts, cuda.to_device(np.array(lengths, np.int64)), cuda.to_device(starts))
    return counts.copy_to_host()[:sum(lengths)], parts.copy_to_host().reshape(BLOCKS, len(lengths), 4)


@pytest.mark.parametrize("lengths", [[0], [1], [16] * 8, [4096] * 8, [2054] * 3, [0, 5, 0, 3000, 17, 1],
                                     [20000, 16, 0, 48, 9984], [3] * 40, [40000], [0, 33333, 0],
                                     [WIDE_PASSES * PASS + 5] * 2, [WIDE_PASSES * PASS, WIDE_PASSES * PASS - 1]])
def test_every_byte_of_every_range_is_copied_by_exactly_one_thread(lengths):
    counts, _ = cover(lengths)
    assert (counts == 1).all(), np.flatnonzero(counts != 1)[:10]


@pytest.mark.parametrize("lengths", [[40000], [0, 33333, 0], [16], [WIDE_PASSES * PASS] * 3,
                                     [WIDE_PASSES * PASS + 7, 0, WIDE_PASSES * PASS + 1000]])
def test_one_range_or_ranges_of_many_grid_passes_are_copied_by_the_whole_grid(lengths):
    _, parts = cover(lengths)
    for b in range(BLOCKS):
        for i, length in enumerate(lengths):
            at, n, t, tn = parts[b, i]
            assert (at, n, tn) == (0, length, BLOCKS * THREADS) or length == 0 and n <= 0, (b, i, parts[b, i])
            assert t == b * THREADS, (b, t)  # thread 0 of block b is thread b * THREADS of the grid


@pytest.mark.parametrize("lengths", [[4096] * 8, [2048] * 7, [48, 16000, 32], [WIDE_PASSES * PASS - 16] * 2])
def test_smaller_ranges_give_a_block_few_of_them_with_aligned_parts(lengths):
    _, parts = cover(lengths)
    assert (parts[:, :, 3] == THREADS).all()  # on the block's own threads
    used = parts[:, :, 1] > 0
    assert used.sum(axis=1).max() <= -(-len(lengths) // BLOCKS) + 1
    assert (parts[:, :, 0][used] % 16 == 0).all()

"""Which bytes of a call each block owns, the same slice every round so block b only touches scratch block b of
the peers it reads (or, for a zero-copy read of large ranges, every block a part of each: ``copy_share``); and a
block's begin of a round: its flag, whose parity picks the scratch half."""

from __future__ import annotations

from numba import cuda

from ..channels import memory_channel as mc
from ..channels import primitives as prim
from .protocols import PACKET


@cuda.jit(device=True)
def packet_share(nbytes):
    """(first byte, byte count) of the calling block's share of ``nbytes`` in whole LL16 packets; count <= 0: none."""
    nb = cuda.gridDim.x
    npkt = (nbytes + prim.LL16_DATA - 1) // prim.LL16_DATA
    per = (npkt + nb - 1) // nb
    lo = min(cuda.blockIdx.x * per, npkt) * prim.LL16_DATA
    return lo, min(per * prim.LL16_DATA, nbytes - lo)


@cuda.jit(device=True)
def round_share(nbytes, round_bytes, rd):
    """(first byte within round ``rd``, byte count) of the calling block: the same 16-byte-aligned slice every
    round of a call (a short last round ends early), so block b only touches scratch block b of a peer reads."""
    nb = cuda.gridDim.x
    r_n = min(round_bytes, nbytes - rd * round_bytes)
    per = ((min(nbytes, round_bytes) + nb - 1) // nb + 15) // 16 * 16
    lo = min(cuda.blockIdx.x * per, r_n)
    return lo, min(per, r_n - lo)


@cuda.jit(device=True)
def end_to_end_share(total):
    """(first byte, byte count) of the calling block's share of ``total`` bytes of several ranges laid end to end
    (``round_share`` of one round): a block copies the one or two ranges its share spans, not a slice of every
    range one after another (each copy a memory round trip of its own at small sizes)."""
    return round_share(total, total, 0)


# a call whose every range spans this many passes of the grid (``prim.VECTOR_PASS_BYTES`` per thread) copies each
# range on the whole grid (``copy_share``): send/recv and all-to-all with counts 4-7% faster at 64 MB on 8 ranks
# (docs/performance.md; measured with passes of 64 bytes a thread and 4 of them: the same bytes as 2 of 128)
WIDE_PASSES = 2


@cuda.jit(device=True)
def copy_share(total, ranges, smallest):
    """(first byte, byte count, thread index, thread count) of the calling block's part of ``total`` bytes in
    ``ranges`` ranges laid end to end (the smallest ``smallest`` bytes): with one range, or every range of
    ``WIDE_PASSES`` passes of the grid, all of it on the grid's threads together (the grid streams through each range
    in order, as a local copy does); else ``end_to_end_share`` on the block's threads (each range a block copies
    ends in a memory round trip of its own)."""
    nt = cuda.blockDim.x
    grid_threads = cuda.gridDim.x * nt
    if ranges <= 1 or smallest >= WIDE_PASSES * grid_threads * prim.VECTOR_PASS_BYTES:
        return 0, total, cuda.blockIdx.x * nt + cuda.threadIdx.x, grid_threads
    lo, cnt = end_to_end_share(total)
    return lo, cnt, cuda.threadIdx.x, nt


@cuda.jit(device=True)
def part_of(lo, n, start, length):
    """(offset within the range, byte count) of the overlap of the share ``[lo, lo + n)`` with the range
    ``[start, start + length)`` laid end to end with others; count <= 0: none."""
    a = max(lo, start)
    return a - start, min(lo + n, start + length) - a


@cuda.jit(device=True)
def first_flag(flags):
    """The calling block's flag for its launch's first round (``memory_channel.packet_flag_begin``). A kernel loads
    it before it posts its call's fingerprint: the post's store would otherwise hold the load, and the first
    sends with it, one memory round trip."""
    return mc.packet_flag_begin(flags)


@cuda.jit(device=True)
def begin(proto, flag, nbytes, slot_bytes, rd, slots):
    """(scratch half, first byte within the round, byte count, first byte of the buffer) of the calling block in
    round ``rd`` (of flag ``flag``) over ``slots`` scratch slots of ``slot_bytes``: the half alternates with the
    flag's parity; packets take the block's share of the whole call, simple rounds a slice of each round."""
    half = (flag % 2) * slots * slot_bytes
    lo, n = range_share(proto, nbytes, slot_bytes, rd)
    return half, lo, n, rd * slot_bytes + lo


@cuda.jit(device=True)
def range_share(proto, nbytes, slot_bytes, rd):
    """(first byte within round ``rd``, byte count) of the calling block's share of a range of ``nbytes``: packets
    the block's packets of the whole range (one round), simple rounds its slice of round ``rd`` (count <= 0: none,
    as in a round past the range's end)."""
    if proto == PACKET:
        return packet_share(nbytes)
    return round_share(nbytes, slot_bytes, rd)

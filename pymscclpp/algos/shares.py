"""Which bytes of a call each block owns, the same slice every round so block b only touches scratch block b of
the peers it reads; and a block's begin of a round: its flag, whose parity picks the scratch half."""

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
def begin_packets(flags, nbytes, slot_bytes, slots):
    """(flag, scratch half, first byte, byte count) of the calling block's packet launch over ``slots`` scratch
    slots of ``slot_bytes``: the half alternates with the flag's parity."""
    flag = mc.packet_flag_begin(flags)
    lo, n = packet_share(nbytes)
    return flag, (flag % 2) * slots * slot_bytes, lo, n


@cuda.jit(device=True)
def begin_round(flags, nbytes, round_bytes, rd, slots):
    """(flag, scratch half, first byte within the round, byte count, first byte of the buffer) of the calling
    block in round ``rd`` over ``slots`` scratch slots of ``round_bytes``."""
    flag = mc.packet_flag_begin(flags)
    lo, n = round_share(nbytes, round_bytes, rd)
    return flag, (flag % 2) * slots * round_bytes, lo, n, rd * round_bytes + lo


@cuda.jit(device=True)
def begin(proto, flags, nbytes, slot_bytes, rd, slots):
    """(flag, scratch half, first byte within the round, byte count, first byte of the buffer) of the calling
    block in round ``rd`` over ``slots`` scratch slots."""
    if proto == PACKET:
        flag, half, lo, n = begin_packets(flags, nbytes, slot_bytes, slots)
        return flag, half, lo, n, lo
    return begin_round(flags, nbytes, slot_bytes, rd, slots)

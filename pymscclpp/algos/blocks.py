"""Block helpers every one-shot collective kernel shares: which slice a block owns, the per-round
signal/wait with every peer, and the end of a round. Scratch halves alternate by per-block flag parity.
"""

from __future__ import annotations

from numba import cuda

from ..channels import memory_channel as mc
from ..channels import primitives as prim
from ..channels.ptx import address_of


@cuda.jit(device=True)
def peer_rank(j, rank):
    """Rank of the j-th peer (``chans[j]``)."""
    return j if j < rank else j + 1


@cuda.jit(device=True)
def peer_index(r, rank):
    """Index into ``chans`` of rank ``r`` (which is not ``rank``)."""
    return r if r < rank else r - 1


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
def copy_unless_same(dst, dst_off, src, src_off, nbytes, tid, nthreads):
    """``copy_bytes``, skipped when source and destination are the same memory (in place)."""
    if address_of(dst, dst_off) != address_of(src, src_off):
        prim.copy_bytes(dst, dst_off, src, src_off, nbytes, tid, nthreads)


@cuda.jit(device=True)
def signal_and_wait_all(chans, nranks):
    """After the block's puts: signal every peer on the block's semaphore, then wait for every peer's signal."""
    cuda.syncthreads()
    tid = cuda.threadIdx.x
    if tid < nranks - 1:
        mc.signal(chans[tid], cuda.blockIdx.x)
        mc.wait(chans[tid], cuda.blockIdx.x)
    cuda.syncthreads()


@cuda.jit(device=True)
def end_round(flags, flag):
    """Store the block's flag once all its threads are done; the next round reads it."""
    cuda.syncthreads()
    mc.packet_flag_end(flags, flag)
    cuda.syncthreads()


@cuda.jit(device=True)
def packets_to_peers(chans, dst_off, src, src_off, send_stride, rank, nranks, n, tid, nthreads, flag):
    """LL16-pack ``n`` bytes into every peer's scratch at ``dst_off``: peer p's from ``src[p * send_stride + src_off:]``."""
    for j in range(nranks - 1):
        prim.put_packets_ll16(chans[j].dst, dst_off, src, peer_rank(j, rank) * send_stride + src_off, n, tid,
                              nthreads, flag)


@cuda.jit(device=True)
def copy_to_peers(chans, dst_off, src, src_off, send_stride, rank, nranks, n, tid, nthreads):
    """Put ``n`` bytes into every peer's scratch at ``dst_off``: peer p's from ``src[p * send_stride + src_off:]``."""
    for j in range(nranks - 1):
        prim.copy_bytes(chans[j].dst, dst_off, src, peer_rank(j, rank) * send_stride + src_off, n, tid, nthreads)

"""All-gather and all-to-all kernels (one exchange, a per-peer send stride apart), and the block helpers every
one-shot collective shares. ``chans[j]`` is the channel to the j-th peer in rank order: its ``dst`` is that
peer's scratch, ``scratch`` our own. Scratch halves alternate by per-block flag parity.
"""

from __future__ import annotations

from numba import cuda

from ..channels import memory_channel as mc
from ..channels import primitives as prim
from ..channels.device_errors import OP_PACKET
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


@cuda.jit
def exchange_packets(chans, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, send_stride):
    """LL16 one-shot exchange: ``inp[p * send_stride:][:nbytes]`` lands in rank p's ``out`` slot ``rank``
    (``send_stride`` 0: all-gather, ``nbytes``: all-to-all); one packet hop."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    flag = mc.packet_flag_begin(flags)
    half = (flag % 2) * nranks * slot_bytes
    lo, n = packet_share(nbytes)
    if n > 0:
        for j in range(nranks - 1):
            prim.put_packets_ll16(chans[j].dst, half + rank * slot_bytes + 2 * lo, inp,
                                  peer_rank(j, rank) * send_stride + lo, n, tid, nt, flag)
        copy_unless_same(out, rank * nbytes + lo, inp, rank * send_stride + lo, n, tid, nt)
        cuda.syncthreads()  # in place, the slots are read above before peers' data overwrites them below
        for j in range(nranks - 1):
            p = peer_rank(j, rank)
            ch = chans[j]
            prim.unpack_packets_ll16(out, p * nbytes + lo, scratch, half + p * slot_bytes + 2 * lo, n, tid, nt, flag,
                                     ch.timeout_ns, ch.err, ch.rank, ch.peer, ch.channel, OP_PACKET)
    end_round(flags, flag)


@cuda.jit
def exchange_simple(chans, inp, out, scratch, flags, nbytes, round_bytes, rank, nranks, send_stride):
    """The exchange of ``exchange_packets`` by puts and one signal per block and peer, in rounds of
    ``round_bytes`` per slot so scratch stays bounded."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    for rd in range((nbytes + round_bytes - 1) // round_bytes):
        flag = mc.packet_flag_begin(flags)
        half = (flag % 2) * nranks * round_bytes
        lo, n = round_share(nbytes, round_bytes, rd)
        at = rd * round_bytes + lo
        for j in range(nranks - 1):
            prim.copy_bytes(chans[j].dst, half + rank * round_bytes + lo, inp, peer_rank(j, rank) * send_stride + at,
                            n, tid, nt)
        copy_unless_same(out, rank * nbytes + at, inp, rank * send_stride + at, n, tid, nt)
        signal_and_wait_all(chans, nranks)
        for j in range(nranks - 1):
            p = peer_rank(j, rank)
            prim.copy_bytes(out, p * nbytes + at, scratch, half + p * round_bytes + lo, n, tid, nt)
        end_round(flags, flag)

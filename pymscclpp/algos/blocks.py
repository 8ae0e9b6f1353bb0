"""Block helpers every one-shot collective kernel shares, the protocol a parameter (as NCCL's primitives take
it): which slice a block owns, sending to peers' scratch, the round's synchronisation, receiving from scratch,
and the end of a round. ``PACKET``: one round of LL16 packets (scratch holds 2 bytes per data byte); ``SIMPLE``:
rounds of ``slot_bytes`` per slot, puts and one signal per block and peer. Scratch halves alternate by per-block
flag parity. Before a call writes any output byte or waits for a peer's data, its ranks compare call fingerprints
(``callcheck.device``).
"""

from __future__ import annotations

from numba import cuda

from ..channels import memory_channel as mc
from ..channels import primitives as prim
from ..channels.device_errors import OP_PACKET
from ..channels.peers import peer_rank
from ..channels.ptx import address_of
from ..runtime.backend import IS_SIM

PACKET, SIMPLE = 0, 1  # the protocols, a compile-time parameter of the kernels
# the simple entry kernels' compile options: at most 128 registers, so 512 threads a block always launch (65,536
# registers an SM; a two-shot kernel compiled on the GPU took more); the simulator's jit takes no such option
SIMPLE_LIMITS = {} if IS_SIM else {"max_registers": 128}


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
def rounds(proto, nbytes, slot_bytes):
    """Rounds a call of ``nbytes`` per slot takes: one for packets, else one per ``slot_bytes``."""
    if proto == PACKET:
        return 1
    return (nbytes + slot_bytes - 1) // slot_bytes


@cuda.jit(device=True)
def begin(proto, flags, nbytes, slot_bytes, rd, slots):
    """(flag, scratch half, first byte within the round, byte count, first byte of the buffer) of the calling
    block in round ``rd`` over ``slots`` scratch slots."""
    if proto == PACKET:
        flag, half, lo, n = begin_packets(flags, nbytes, slot_bytes, slots)
        return flag, half, lo, n, lo
    return begin_round(flags, nbytes, slot_bytes, rd, slots)


@cuda.jit(device=True)
def scale(proto):
    """Scratch bytes per data byte."""
    return 2 if proto == PACKET else 1


@cuda.jit(device=True)
def send(proto, dst, dst_off, src, src_off, n, tid, nthreads, flag):
    """Move ``n`` bytes of ``src`` into scratch ``dst`` (a peer's): as packets, or as they are."""
    if proto == PACKET:
        prim.put_packets_ll16(dst, dst_off, src, src_off, n, tid, nthreads, flag)
    else:
        prim.copy_bytes(dst, dst_off, src, src_off, n, tid, nthreads)


@cuda.jit(device=True)
def send_to_peers(proto, chans, dst_off, src, src_off, send_stride, rank, nranks, n, tid, nthreads, flag):
    """``send`` ``n`` bytes into every peer's scratch at ``dst_off``: peer p's from ``src[p * send_stride +
    src_off:]``."""
    for j in range(nranks - 1):
        send(proto, chans[j].dst, dst_off, src, peer_rank(j, rank) * send_stride + src_off, n, tid, nthreads, flag)


@cuda.jit(device=True)
def receive(proto, dst, dst_off, scratch, off, n, tid, nthreads, flag, ch):
    """Move ``n`` bytes a peer sent into our ``scratch`` at ``off`` to ``dst``: waiting for its packets (errors
    recorded in ``ch``), or copying after the round's signal."""
    if proto == PACKET:
        prim.unpack_packets_ll16(dst, dst_off, scratch, off, n, tid, nthreads, flag, ch, OP_PACKET)
    else:
        prim.copy_bytes(dst, dst_off, scratch, off, n, tid, nthreads)


@cuda.jit(device=True)
def sync_round(proto, chans, nranks):
    """Between sending and receiving: simple signals and waits every peer; packets carry their own flags."""
    if proto == PACKET:
        cuda.syncthreads()
    else:
        signal_and_wait_all(chans, nranks)


@cuda.jit(device=True)
def begin_and_send(proto, chans, flags, inp, nbytes, slot_bytes, rd, rank, nranks, send_stride, tid, nthreads):
    """``begin`` round ``rd`` and ``send_to_peers`` the block's slice into slot ``rank`` of every peer's scratch;
    (flag, scratch half, first byte within the round, byte count, first byte of the buffer)."""
    flag, half, lo, n, at = begin(proto, flags, nbytes, slot_bytes, rd, nranks)
    if n > 0:
        send_to_peers(proto, chans, half + rank * slot_bytes + scale(proto) * lo, inp, at, send_stride, rank, nranks,
                      n, tid, nthreads, flag)
    return flag, half, lo, n, at

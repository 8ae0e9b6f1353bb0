"""The per-peer steps every one-shot collective kernel is built from, the protocol a parameter
(``protocols``): sending to peers' scratch, the round's synchronisation, receiving from scratch, and the end of a
round (which slice a block owns: ``shares``). Scratch halves alternate by per-block flag parity. Before a call
writes any output byte or waits for a peer's data, its ranks compare call fingerprints (``callcheck.device``).
"""

from __future__ import annotations

from numba import cuda

from ..callcheck.device import begin_call, calls_agree
from ..channels import memory_channel as mc
from ..channels import primitives as prim
from ..channels.device_errors import OP_PACKET
from ..channels.peers import peer_rank
from ..channels.ptx import address_of
from .protocols import PACKET, scale
from .shares import begin


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
def agree_and_meet(chans, call_check, fingerprint, rank, nranks):
    """The start of a zero-copy kernel: post the call's fingerprint and, once every rank's call agrees, meet every
    peer (their buffers are ready to be read and written); False, with nothing touched, when the calls differ."""
    begin_call(call_check, fingerprint, rank, nranks)
    if not calls_agree(call_check, fingerprint, rank, nranks):
        return False
    signal_and_wait_all(chans, nranks)
    return True


@cuda.jit(device=True)
def end_round(flags, flag):
    """Store the block's flag once all its threads are done; the next round reads it."""
    cuda.syncthreads()
    mc.packet_flag_end(flags, flag)
    cuda.syncthreads()


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

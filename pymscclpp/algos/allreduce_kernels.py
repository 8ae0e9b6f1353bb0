"""All-reduce kernels over MemoryChannels whose ``dst`` is each peer's scratch and ``pkt`` our own.

Both are one-shot all-pairs: every rank sends its data to every peer's scratch (slot = its rank) and
reduces all ranks' data in rank order, so every rank computes bit-identical results. Scratch halves
alternate by a per-block flag parity, so a rank that runs one launch ahead never overwrites data a
slower peer is still reading. ``chans[j]`` is the channel to the j-th peer in rank order.
"""

from __future__ import annotations

from numba import cuda

from ..channels import memory_channel as mc
from ..channels import primitives as prim
from ..channels import reduce as red
from ..channels.device_errors import OP_PACKET
from .blocks import (copy_to_peers, end_round, packet_share, packets_to_peers, round_share,
                     signal_and_wait_all)


@cuda.jit
def allreduce_packets(chans, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, kind, op):
    """LL16 one-shot all-reduce: latency of one packet hop; 2 bytes moved per data byte."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    flag = mc.packet_flag_begin(flags)
    half = (flag % 2) * nranks * slot_bytes
    lo, n = packet_share(nbytes)
    if n > 0:
        packets_to_peers(chans, half + rank * slot_bytes + lo * 2, inp, lo, 0, rank, nranks, n, tid, nt, flag)
        ch = chans[0]
        red.reduce_packets_ll16(out, lo, inp, lo, rank, scratch, half + lo * 2, slot_bytes, nranks, n, tid, nt,
                                flag, kind, op, ch.timeout_ns, ch.err, ch.abort, ch.rank, ch.channel, OP_PACKET)
    end_round(flags, flag)


@cuda.jit
def allreduce_simple(chans, inp, out, scratch, flags, nbytes, round_bytes, rank, nranks, kind, op):
    """One-shot all-reduce with signals: put slices, one signal/wait per block and peer, reduce; in rounds
    of ``round_bytes`` so scratch stays bounded. Each block owns its semaphore index and its slice.
    Needs ``nranks >= 2`` (one rank is a copy)."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    for rd in range((nbytes + round_bytes - 1) // round_bytes):
        flag = mc.packet_flag_begin(flags)
        half = (flag % 2) * nranks * round_bytes
        lo, n = round_share(nbytes, round_bytes, rd)
        at = rd * round_bytes + lo
        copy_to_peers(chans, half + rank * round_bytes + lo, inp, at, 0, rank, nranks, n, tid, nt)
        if rank >= 2:  # our data is read after pass 1 has written ``out``, which may alias ``inp``
            prim.copy_bytes(scratch, half + rank * round_bytes + lo, inp, at, n, tid, nt)
        signal_and_wait_all(chans, nranks)
        first = scratch
        first_off = half + lo
        if rank == 0:
            first = inp
            first_off = at
        for r in range(1, nranks):
            src = scratch
            src_off = half + r * round_bytes + lo
            if r == rank and r == 1:
                src = inp
                src_off = at
            if r == 1:
                red.reduce_bytes(out, at, first, first_off, src, src_off, n, tid, nt, kind, op)
            else:
                red.reduce_bytes(out, at, out, at, src, src_off, n, tid, nt, kind, op)
            cuda.syncthreads()
        end_round(flags, flag)

"""All-gather and all-to-all kernels: one exchange, a per-peer send stride apart. ``chans[j]`` is the channel
to the j-th peer in rank order: its ``dst`` is that peer's scratch, ``scratch`` our own.
"""

from __future__ import annotations

from numba import cuda

from ..channels import primitives as prim
from ..channels.device_errors import OP_PACKET
from .blocks import (begin_packets, begin_round, copy_to_peers, copy_unless_same, end_round, packets_to_peers,
                     peer_rank, signal_and_wait_all)


@cuda.jit
def exchange_packets(chans, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, send_stride):
    """LL16 one-shot exchange: ``inp[p * send_stride:][:nbytes]`` lands in rank p's ``out`` slot ``rank``
    (``send_stride`` 0: all-gather, ``nbytes``: all-to-all); one packet hop."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    flag, half, lo, n = begin_packets(flags, nbytes, slot_bytes, nranks)
    if n > 0:
        packets_to_peers(chans, half + rank * slot_bytes + 2 * lo, inp, lo, send_stride, rank, nranks, n, tid, nt,
                         flag)
        copy_unless_same(out, rank * nbytes + lo, inp, rank * send_stride + lo, n, tid, nt)
        cuda.syncthreads()  # in place, the slots are read above before peers' data overwrites them below
        for j in range(nranks - 1):
            p = peer_rank(j, rank)
            ch = chans[j]
            prim.unpack_packets_ll16(out, p * nbytes + lo, scratch, half + p * slot_bytes + 2 * lo, n, tid, nt, flag,
                                     ch.timeout_ns, ch.err, ch.abort, ch.rank, ch.peer, ch.channel, OP_PACKET)
    end_round(flags, flag)


@cuda.jit
def exchange_simple(chans, inp, out, scratch, flags, nbytes, round_bytes, rank, nranks, send_stride):
    """The exchange of ``exchange_packets`` by puts and one signal per block and peer, in rounds of
    ``round_bytes`` per slot so scratch stays bounded."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    for rd in range((nbytes + round_bytes - 1) // round_bytes):
        flag, half, lo, n, at = begin_round(flags, nbytes, round_bytes, rd, nranks)
        copy_to_peers(chans, half + rank * round_bytes + lo, inp, at, send_stride, rank, nranks, n, tid, nt)
        copy_unless_same(out, rank * nbytes + at, inp, rank * send_stride + at, n, tid, nt)
        signal_and_wait_all(chans, nranks)
        for j in range(nranks - 1):
            p = peer_rank(j, rank)
            prim.copy_bytes(out, p * nbytes + at, scratch, half + p * round_bytes + lo, n, tid, nt)
        end_round(flags, flag)

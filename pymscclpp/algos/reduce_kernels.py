"""One-shot reducing kernels: ``inp[p * send_stride:][:nbytes]`` goes to rank p's scratch (at slot ``rank``),
and every rank reduces its own slot over all ranks in rank order, so results are bit-identical on every rank.
``send_stride`` 0 is an all-reduce (every peer gets the whole buffer), ``nbytes`` a reduce-scatter. Channels,
scratch halves and block shares as in ``allgather_kernels``.
"""

from __future__ import annotations

from numba import cuda

from ..channels import primitives as prim
from ..channels import reduce as red
from ..channels.device_errors import OP_PACKET
from .blocks import begin_packets, begin_round, copy_to_peers, end_round, packets_to_peers, signal_and_wait_all


@cuda.jit
def reduce_packets(chans, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, send_stride, kind, op):
    """LL16 one-shot reduction of ``nbytes`` per slot: one packet hop."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    flag, half, lo, n = begin_packets(flags, nbytes, slot_bytes, nranks)
    if n > 0:
        packets_to_peers(chans, half + rank * slot_bytes + 2 * lo, inp, lo, send_stride, rank, nranks, n, tid, nt,
                         flag)
        ch = chans[0]
        red.reduce_packets_ll16(out, lo, inp, rank * send_stride + lo, rank, scratch, half + 2 * lo, slot_bytes,
                                nranks, n, tid, nt, flag, kind, op, ch.timeout_ns, ch.err, ch.abort, ch.rank,
                                ch.channel, OP_PACKET)
    end_round(flags, flag)


@cuda.jit
def reduce_simple(chans, inp, out, scratch, flags, nbytes, round_bytes, rank, nranks, send_stride, kind, op):
    """Puts and one signal per block and peer, then the reduction, in rounds of ``round_bytes`` per slot so
    scratch stays bounded. Needs ``nranks >= 2`` (one rank is a copy)."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    for rd in range((nbytes + round_bytes - 1) // round_bytes):
        flag, half, lo, n, at = begin_round(flags, nbytes, round_bytes, rd, nranks)
        copy_to_peers(chans, half + rank * round_bytes + lo, inp, at, send_stride, rank, nranks, n, tid, nt)
        own = inp
        own_off = rank * send_stride + at
        if rank >= 2:  # ``out`` may alias our slot, and is written before our turn in rank order comes
            prim.copy_bytes(scratch, half + rank * round_bytes + lo, inp, own_off, n, tid, nt)
            own = scratch
            own_off = half + rank * round_bytes + lo
        signal_and_wait_all(chans, nranks)
        for r in range(1, nranks):
            acc = out
            acc_off = at
            if r == 1:
                acc = own if rank == 0 else scratch
                acc_off = own_off if rank == 0 else half + lo
            src = own if r == rank else scratch
            src_off = own_off if r == rank else half + r * round_bytes + lo
            red.reduce_bytes(out, at, acc, acc_off, src, src_off, n, tid, nt, kind, op)
            cuda.syncthreads()  # the next step reads ``out`` in its own thread layout
        end_round(flags, flag)

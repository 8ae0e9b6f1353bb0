"""The one-shot reducing kernel: ``inp[p * send_stride:][:nbytes]`` goes to rank p's scratch (at slot ``rank``),
and every rank reduces its own slot over all ranks in rank order, so results are bit-identical on every rank.
``send_stride`` 0 is an all-reduce (every peer gets the whole buffer), ``nbytes`` a reduce-scatter. Channels,
scratch halves and block shares as in ``allgather_kernels``; the protocol is a
compile-time parameter: one body, an entry kernel per protocol, so each compiles only its own path (as NCCL's
templates instantiate one per protocol).
"""

from __future__ import annotations

from numba import cuda

from .blocks import agree_and_receive_reduce, begin_and_send, end_round, open_call
from .protocols import PACKET, SIMPLE_LIMITS, SIMPLE, rounds, scale


@cuda.jit(device=True)
def reduce(proto, chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
           send_stride, kind, op):
    """One-shot reduction of ``nbytes`` per slot: one packet hop (packet), or rounds of ``slot_bytes`` per slot
    (simple; needs ``nranks >= 2``, one rank being a copy); nothing is reduced unless the ranks' calls agree."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    scratch_scale = scale(proto)
    flag, seq, may_send = open_call(proto, call_check, fingerprint, flags, rank, nranks)
    if not may_send:
        return
    for rd in range(rounds(proto, nbytes, slot_bytes)):
        half, lo, n, at = begin_and_send(proto, chans, flag, inp, nbytes, slot_bytes, rd, rank, nranks,
                                               send_stride, tid, nt)
        agree_and_receive_reduce(proto, call_check, fingerprint, seq, chans, out, at, inp, rank * send_stride + at,
                                 rank, scratch, half + scratch_scale * lo, slot_bytes, nranks, n, tid, nt, flag, kind,
                                 op)
        flag = end_round(flags, flag)


@cuda.jit(cache=True)
def reduce_ll(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, send_stride,
              kind, op):
    """``reduce`` with LL16 packets."""
    reduce(PACKET, chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
           send_stride, kind, op)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def reduce_simple(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
                  send_stride, kind, op):
    """``reduce`` with the simple protocol."""
    reduce(SIMPLE, chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
           send_stride, kind, op)

"""The one-shot reducing kernel: ``inp[p * send_stride:][:nbytes]`` goes to rank p's scratch (at slot ``rank``),
and every rank reduces its own slot over all ranks in rank order, so results are bit-identical on every rank.
``send_stride`` 0 is an all-reduce (every peer gets the whole buffer), ``nbytes`` a reduce-scatter. Channels,
scratch halves and block shares as in ``allgather_kernels``; the protocol is a
compile-time parameter: one body, an entry kernel per protocol, so each compiles only its own path (as NCCL's
templates instantiate one per protocol).
"""

from __future__ import annotations

from numba import cuda

from ..channels import reduce as red
from ..channels.device_errors import OP_PACKET
from ..callcheck.device import begin_call, calls_agree
from .blocks import begin_and_send, end_round, signal_and_wait_all
from .protocols import PACKET, SIMPLE_LIMITS, SIMPLE, rounds, scale


@cuda.jit(device=True)
def reduce_own_slot(proto, out, at, inp, own_off, rank, scratch, base, slot_bytes, nranks, n, tid, nt, flag, kind, op,
                    chans):
    """``out[at:]`` = every rank's slot reduced in rank order, in one pass: ours from ``inp[own_off:]``, slot r
    from our scratch at ``base + r * slot_bytes`` (packets waited for; simple after the round's signals)."""
    if proto == PACKET:
        red.reduce_packets_ll16(out, at, inp, own_off, rank, scratch, base, slot_bytes, nranks, n, tid, nt, flag,
                                kind, op, chans[0], OP_PACKET)
    else:
        red.reduce_slots(out, at, inp, own_off, rank, scratch, base, slot_bytes, nranks, n, tid, nt, kind, op, chans)


@cuda.jit(device=True)
def reduce(proto, chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
           send_stride, kind, op):
    """One-shot reduction of ``nbytes`` per slot: one packet hop (packet), or rounds of ``slot_bytes`` per slot
    (simple; needs ``nranks >= 2``, one rank being a copy); nothing is reduced unless the ranks' calls agree."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    scratch_scale = scale(proto)
    begin_call(call_check, fingerprint, rank, nranks)
    # large messages: the check before the first put
    if proto != PACKET and not calls_agree(call_check, fingerprint, rank, nranks):
        return
    for rd in range(rounds(proto, nbytes, slot_bytes)):
        flag, half, lo, n, at = begin_and_send(proto, chans, flags, inp, nbytes, slot_bytes, rd, rank, nranks,
                                               send_stride, tid, nt)
        # packets: sent only into scratch so far
        if proto != PACKET or calls_agree(call_check, fingerprint, rank, nranks):
            if proto != PACKET:
                signal_and_wait_all(chans, nranks)
            if n > 0:
                reduce_own_slot(proto, out, at, inp, rank * send_stride + at, rank, scratch, half + scratch_scale * lo,
                                slot_bytes, nranks, n, tid, nt, flag, kind, op, chans)
        end_round(flags, flag)


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

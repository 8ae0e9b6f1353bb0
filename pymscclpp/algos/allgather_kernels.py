"""The all-gather and all-to-all kernel: one exchange, a per-peer send stride apart, the protocol a
compile-time parameter (one body, an entry kernel per protocol); and its zero-copy form, reading peers' mapped
send buffers or writing peers' mapped receive buffers (the direction a compile-time parameter too).
``chans[j]`` is the channel to the j-th peer in rank order: its ``dst`` is that peer's scratch, ``scratch`` our
own.
"""

from __future__ import annotations

from numba import cuda

from ..channels import primitives as prim
from ..channels.peers import peer_index, peer_rank
from ..channels.ptx import address_of
from .blocks import (agree_and_meet, agreed_before_receiving, begin_and_send, copy_unless_same, end_round, open_call,
                     meet_all, peer_groups, receive, sync_round)
from .protocols import PACKET, SIMPLE_LIMITS, SIMPLE, rounds, scale
from .shares import end_to_end_share, part_of


@cuda.jit(device=True)
def exchange(proto, chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
             send_stride):
    """``inp[p * send_stride:][:nbytes]`` lands in rank p's ``out`` slot ``rank`` (``send_stride`` 0: all-gather,
    ``nbytes``: all-to-all): one packet hop (packet) or rounds of ``slot_bytes`` per slot (simple), once the ranks'
    calls agree."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    scratch_scale = scale(proto)
    flag, seq, may_send = open_call(proto, call_check, fingerprint, flags, rank, nranks)
    if not may_send:
        return
    for rd in range(rounds(proto, nbytes, slot_bytes)):
        half, lo, n, at = begin_and_send(proto, chans, flag, inp, nbytes, slot_bytes, rd, rank, nranks,
                                               send_stride, tid, nt)
        if agreed_before_receiving(proto, call_check, fingerprint, seq, rank, nranks):
            if n > 0:
                copy_unless_same(out, rank * nbytes + at, inp, rank * send_stride + at, n, tid, nt)
            sync_round(proto, chans, nranks)  # in place, our slots are read above before peers' data lands below
            if n > 0:
                first, step, t, gn = peer_groups(proto, nranks - 1, tid, nt)
                for j in range(first, nranks - 1, step):
                    p = peer_rank(j, rank)
                    receive(proto, out, p * nbytes + at, scratch, half + p * slot_bytes + scratch_scale * lo, n, t,
                            gn, flag, chans[j])
        flag = end_round(flags, flag)


@cuda.jit(cache=True)
def exchange_ll(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
                send_stride):
    """``exchange`` with LL16 packets."""
    exchange(PACKET, chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
             send_stride)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def exchange_simple(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
                    send_stride):
    """``exchange`` with the simple protocol."""
    exchange(SIMPLE, chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
             send_stride)


@cuda.jit(device=True)
def exchange_zero_copy(chans, call_check, fingerprint, windows, mapped, inp, out, nbytes, rank, nranks, send_stride,
                       push):
    """``exchange`` on buffers mapped on every rank (``algos.windows``), no scratch: once every rank's buffers are
    ready, each block moves its share of every slot laid end to end from our own on (``shares.end_to_end_share``),
    pulling ``mapped[j].dst[rank * send_stride:]`` (peers' send buffers; in place, when ``inp`` is our slot of
    ``out``, peer p's slot of its receive buffer) into that peer's slot of ``out``, or with ``push`` writing
    ``inp[p * send_stride:]`` into slot ``rank`` of ``mapped[j].dst`` (peers' receive buffers); a second barrier
    ends the call when every slot has landed and nobody reads our input any more."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    if not agree_and_meet(chans, call_check, fingerprint, windows, rank, nranks):
        return
    in_place = address_of(inp, 0) == address_of(out, rank * nbytes)
    lo, cnt = end_to_end_share(nranks * nbytes)
    for i in range(nranks):  # from our own slot on, so the ranks' blocks read different peers at once
        p = (rank + i) % nranks
        at, n = part_of(lo, cnt, i * nbytes, nbytes)
        if n > 0:
            if p == rank:
                copy_unless_same(out, rank * nbytes + at, inp, rank * send_stride + at, n, tid, nt)
            elif push:
                prim.copy_bytes(mapped[peer_index(p, rank)].dst, rank * nbytes + at, inp, p * send_stride + at, n,
                                tid, nt)
            else:
                src = p * nbytes if in_place else rank * send_stride
                prim.copy_bytes(out, p * nbytes + at, mapped[peer_index(p, rank)].dst, src + at, n, tid, nt)
    meet_all(chans, nranks, push, -1)  # pulls wrote no peer's memory


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def exchange_zero_copy_simple(chans, call_check, fingerprint, windows, ins, inp, out, nbytes, rank, nranks,
                              send_stride):
    """``exchange_zero_copy`` pulling from peers' send buffers ``ins`` (simple protocol)."""
    exchange_zero_copy(chans, call_check, fingerprint, windows, ins, inp, out, nbytes, rank, nranks, send_stride, False)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def exchange_push_zero_copy_simple(chans, call_check, fingerprint, windows, outs, inp, out, nbytes, rank, nranks,
                                   send_stride):
    """``exchange_zero_copy`` pushing into peers' receive buffers ``outs`` (simple protocol)."""
    exchange_zero_copy(chans, call_check, fingerprint, windows, outs, inp, out, nbytes, rank, nranks, send_stride, True)

"""The all-to-all with counts in one hop, as the even all-to-all's kernel (``allgather_kernels.exchange``) with
ranges and offsets per peer from the exchange's table (``exchange_kernels``: send offset and bytes, receive
offset and bytes), the protocol a compile-time parameter: every rank writes its range for each peer into that
peer's scratch (slot ``rank`` of the half its flag picks), as LL16 packets in one round or as they are in rounds of
``slot_bytes``, and copies each peer's from its own. Every rank judges every peer's fingerprint each call (the
counts are traded on the host first, so every rank's is the same, and so is the number of rounds), so ranks stay
in step and a half is never reused before its reader has left it, even for a pair that moves nothing: the call
check must be on.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..channels.peers import peer_after, peer_rank
from .blocks import (agreed_before_receiving, copy_unless_same, end_round, open_call, peer_groups, receive, send,
                     sync_round)
from .exchange_kernels import RECV_N, RECV_OFF, ROW, SEND_N, SEND_OFF, TABLE_WORDS, fill_table
from .protocols import PACKET, SIMPLE, SIMPLE_LIMITS, rounds, scale
from .shares import range_share


@cuda.jit(device=True)
def exchange_counts(proto, chans, call_check, fingerprint, inp, out, scratch, flags, table, nbytes, slot_bytes, rank,
                    nranks):
    """Every peer's range of ``inp`` (``table``) to that peer, then, once every rank's call agrees, our own range
    copied and every peer's from our scratch into ``out``; ``nbytes``, the most one rank sends one peer, sets the
    rounds.
    Each block its share of every range (of each round's part of it)."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    flag, seq, may_send = open_call(proto, call_check, fingerprint, flags, rank, nranks)
    if not may_send:
        return
    sh = cuda.shared.array(TABLE_WORDS, np.int64)
    fill_table(sh, table)  # after the call's fingerprint is posted: peers wait for that, not for the table
    for rd in range(rounds(proto, nbytes, slot_bytes)):
        half = (flag % 2) * nranks * slot_bytes
        start = rd * slot_bytes
        first, step, t, gn = peer_groups(proto, nranks - 1, tid, nt)
        for i in range(first, nranks - 1, step):  # peer_after order: the ranks write into different peers at once
            j = peer_after(i, rank, nranks)
            p = peer_rank(j, rank)
            lo, n = range_share(proto, sh[ROW * p + SEND_N], slot_bytes, rd)
            if n > 0:
                send(proto, chans[j].dst, half + rank * slot_bytes + scale(proto) * lo, inp,
                     sh[ROW * p + SEND_OFF] + start + lo, n, t, gn, flag)
        if agreed_before_receiving(proto, call_check, fingerprint, seq, rank, nranks):
            lo, n = range_share(proto, sh[ROW * rank + SEND_N], slot_bytes, rd)
            if n > 0:
                copy_unless_same(out, sh[ROW * rank + RECV_OFF] + start + lo, inp,
                                 sh[ROW * rank + SEND_OFF] + start + lo, n, tid, nt)
            sync_round(proto, chans, nranks)
            for j in range(first, nranks - 1, step):
                p = peer_rank(j, rank)
                lo, n = range_share(proto, sh[ROW * p + RECV_N], slot_bytes, rd)
                if n > 0:
                    receive(proto, out, sh[ROW * p + RECV_OFF] + start + lo, scratch,
                            half + p * slot_bytes + scale(proto) * lo, n, t, gn, flag, chans[j])
        flag = end_round(flags, flag)


@cuda.jit(cache=True)
def exchange_counts_ll(chans, call_check, fingerprint, inp, out, scratch, flags, table, nbytes, slot_bytes, rank,
                       nranks):
    """``exchange_counts`` with LL16 packets."""
    exchange_counts(PACKET, chans, call_check, fingerprint, inp, out, scratch, flags, table, nbytes, slot_bytes,
                    rank, nranks)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def exchange_counts_simple(chans, call_check, fingerprint, inp, out, scratch, flags, table, nbytes, slot_bytes, rank,
                           nranks):
    """``exchange_counts`` with the simple protocol."""
    exchange_counts(SIMPLE, chans, call_check, fingerprint, inp, out, scratch, flags, table, nbytes, slot_bytes,
                    rank, nranks)

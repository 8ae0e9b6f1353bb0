"""The all-to-all with counts in one packet hop: every rank writes its range for each peer as LL16 packets into
that peer's scratch (slot ``rank`` of the half its flag picks) and reads each peer's from its own, as the even
all-to-all's packet kernel does, ranges and offsets per peer from the exchange's table (``exchange_kernels``:
send offset and bytes, receive offset and bytes). One meeting a call, where the exchange kernel meets twice. Every
rank judges every peer's fingerprint each call (the counts are traded on the host first, so every rank's is the
same), so ranks stay in step and a half is never reused before its reader has left it, even for a pair that
moves nothing: the call check must be on.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..callcheck.device import begin_call, calls_agree
from ..channels import primitives as prim
from ..channels.device_errors import OP_PACKET
from ..channels.peers import peer_after, peer_rank
from .blocks import copy_unless_same, end_round
from .exchange_kernels import RECV_N, RECV_OFF, ROW, SEND_N, SEND_OFF, TABLE_WORDS, fill_table
from .protocols import PACKET, scale
from .shares import first_flag, packet_share


@cuda.jit(cache=True)
def exchange_counts_ll(chans, call_check, fingerprint, inp, out, scratch, flags, table, slot_bytes, rank, nranks):
    """Every peer's range of ``inp`` (``table``) to that peer as packets, then, once every rank's call agrees, our
    own range copied and every peer's unpacked into ``out`` as its packets arrive; each block its packet share of
    every range."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    sh = cuda.shared.array(TABLE_WORDS, np.int64)
    fill_table(sh, table)
    flag = first_flag(flags)
    seq = begin_call(call_check, fingerprint, rank, nranks)
    half = (flag % 2) * nranks * slot_bytes
    for i in range(nranks - 1):  # peer_after order: the ranks write into different peers at once
        j = peer_after(i, rank, nranks)
        p = peer_rank(j, rank)
        lo, n = packet_share(sh[ROW * p + SEND_N])
        if n > 0:
            prim.put_packets_ll16(chans[j].dst, half + rank * slot_bytes + scale(PACKET) * lo, inp,
                                  sh[ROW * p + SEND_OFF] + lo, n, tid, nt, flag)
    if calls_agree(call_check, fingerprint, seq, rank, nranks):
        lo, n = packet_share(sh[ROW * rank + SEND_N])
        if n > 0:
            copy_unless_same(out, sh[ROW * rank + RECV_OFF] + lo, inp, sh[ROW * rank + SEND_OFF] + lo, n, tid, nt)
        for j in range(nranks - 1):
            p = peer_rank(j, rank)
            lo, n = packet_share(sh[ROW * p + RECV_N])
            if n > 0:
                prim.unpack_packets_ll16(out, sh[ROW * p + RECV_OFF] + lo, scratch,
                                         half + p * slot_bytes + scale(PACKET) * lo, n, tid, nt, flag, chans[j],
                                         OP_PACKET)
    end_round(flags, flag)

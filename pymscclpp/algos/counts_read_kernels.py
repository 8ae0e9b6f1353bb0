"""The all-to-all with counts zero-copy, as the even all-to-all's zero-copy kernel runs: once every rank's call
agrees (the call check's meeting, which also says every peer's send buffer is ready), each block reads its share of
every peer's range for us straight from the peer's mapped send buffer (``exchange_kernels.copy_reads``: ranges and
peer offsets from the exchange's table), then meets every peer again, so no rank returns while a peer still reads
its buffer. Two meetings of all ranks a call, where the exchange's zero-copy kernel trades a pair check and a credit
per block and peer.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..callcheck.device import post_call
from .blocks import meet_all, meet_when_posted
from .exchange_kernels import TABLE_WORDS, ZC_PEERS, copy_reads, fill_table
from .protocols import SIMPLE_LIMITS

READ_ALL = (1 << ZC_PEERS) - 1  # ``copy_reads``' mode bits: every peer's range is read from its buffer


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def exchange_counts_read_simple(chans, call_check, fingerprint, windows, ins, inp, out, table, rank, nranks):
    """Every peer's range for us (``table``) read from its send buffer (``ins``) into ``out``, our own range copied,
    between two meetings of every rank (pulls write no peer's memory: the second one orders nothing)."""
    seq = post_call(call_check, fingerprint, windows, rank, nranks)
    sh = cuda.shared.array(TABLE_WORDS, np.int64)
    fill_table(sh, table)  # while the call's fingerprint travels: peers wait for that, not for the table
    if not meet_when_posted(chans, call_check, fingerprint, windows, seq, rank, nranks):
        return
    copy_reads(sh, np.int64(READ_ALL), ins, inp, out, rank, nranks)
    meet_all(chans, nranks, False, -1)

"""The device error area: where a wait that ran out of budget records what it waited for.

Layout (int64[ERR_WORDS]): state, op, rank, peer, channel, expected, seen, block. The first
failing wait wins (compare-and-swap on ``state``); the host turns it into CommTimeoutError.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .ptx import fence_sys

ERR_WORDS = 8
OP_NAMES = {1: "semaphore wait", 2: "packet wait (unpack_packets)", 3: "fifo push", 4: "flush",
            5: "packet wait (read_packets)", 6: "port channel wait (aborted early: a proxy failed, see ProxyError)"}
OP_WAIT, OP_PACKET, OP_FIFO_PUSH, OP_FLUSH, OP_READ_PACKET, OP_PROXY_ABORT = 1, 2, 3, 4, 5, 6


@cuda.jit(device=True)
def record_timeout(err, op, rank, peer, channel, expected, seen):
    """Record the first timed-out wait of a launch into ``err`` (int64[ERR_WORDS])."""
    if cuda.atomic.cas(err, 0, 0, 1) == 0:
        err[1] = op
        err[2] = rank
        err[3] = peer
        err[4] = channel
        err[5] = expected
        err[6] = seen
        err[7] = cuda.blockIdx.x
        fence_sys()


def describe(err: np.ndarray) -> str | None:
    """Human-readable text of a recorded timeout, or None when the area is clear."""
    if int(err[0]) == 0:
        return None
    op = OP_NAMES.get(int(err[1]), f"op {int(err[1])}")
    return (f"rank {int(err[2])}: {op} on channel {int(err[4])} with peer {int(err[3])} timed out "
            f"in thread block {int(err[7])}: expected {int(err[5])}, saw {int(err[6])}")

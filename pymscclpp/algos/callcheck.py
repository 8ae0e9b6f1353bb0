"""The cross-rank call check of the one-shot algorithms, host side: one area per communicator, shared by every
one-shot algorithm whatever its protocol and grid, into which each peer writes its call's fingerprint packet.

Area: 2 halves x ``size`` LL16 packets (slot r: rank r's fingerprint, data words its low and high 32 bits,
flags the call's sequence number; the half is the number's parity). The sequence number lives on the device
(``counts``, one word per block index up to ``MAX_BLOCKS``, all equal), so every launch, CUDA-graph replays
included, gets a fresh one; kernels read a fingerprint of 0 as "check off".
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba.core import types

from ..channels.primitives import LL16_BYTES
from ..runtime import config
from ..runtime.fingerprint import pack
from ..runtime.handle_types import BYTES, U32, WAIT_CONTEXT
from ..runtime.memory import alloc
from .algorithm import Call

MAX_BLOCKS = 128  # the largest grid of a one-shot algorithm

CallCheckHandle = namedtuple("CallCheckHandle", "inbox peers counts err abort rank peer channel timeout_ns")
"""What kernels take: our area, every peer's (in peer order), the sequence words, and the error context."""


def handle_type(peers: int) -> types.NamedTuple:
    """The numba type of a ``CallCheckHandle`` with ``peers`` peer areas."""
    return types.NamedTuple([BYTES, types.UniTuple(BYTES, peers), U32, *WAIT_CONTEXT], CallCheckHandle)


class CallCheck:
    """The communicator's call-check area, registered with every peer; ``handle`` is plain data for kernels."""

    def __init__(self, comm):
        from numba import cuda
        self.enabled = config.call_check()
        self.area = alloc(2 * comm.size * LL16_BYTES)
        peers = [p for p in range(comm.size) if p != comm.rank]
        remotes = [comm.exchange_memory(self.area, p) for p in peers]
        self.counts = cuda.to_device(np.zeros(MAX_BLOCKS, np.uint32))
        self.handle = CallCheckHandle(self.area, tuple(r.array for r in remotes), self.counts, *comm.wait_context())

    def fingerprint(self, call: Call, send_bytes: int) -> int:
        """What a kernel serving ``call`` (``send_bytes`` in its send buffer) compares: 0 with the check off."""
        return pack(call.collective, send_bytes, call.dtype, call.op, call.root) if self.enabled else 0


def callcheck(comm) -> CallCheck:
    """The communicator's call check (built collectively on first use)."""
    return comm.extension("callcheck", CallCheck)

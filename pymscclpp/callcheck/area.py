"""The cross-rank call check, host side: one area per communicator, shared by every checked algorithm (one-shot
kernels, execution plans, user kernels) whatever its protocol and grid, into which each peer writes its call's
fingerprint packet.

Area: 2 halves x ``size`` slots of two LL16 packets (slot r: rank r's fingerprint, data words its low and high 32
bits, flags the call's sequence number; then a zero-copy call's windows tag, alike; the half is the number's
parity). The sequence number lives on the device
(``counts``, one word per block index up to ``MAX_BLOCKS``, all equal), so every launch, CUDA-graph replays
included, gets a fresh one; kernels read a fingerprint of 0 as "check off". ``verdict`` (device uint32[1], 1
until a check fails) is what a kernel that is not a one-shot one found (``device.checked_call``): the executor's
copies after a plan kernel and a user's kernel after the check kernel read it (``device.call_agreed``).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import cuda
from numba.core import types

from ..channels.primitives import copy_bytes
from .. import config
from ..runtime.backend import IS_SIM
from ..runtime.fingerprint import pack
from ..runtime.handle_types import BYTES, U32, WAIT_CONTEXT
from ..runtime.launch import Launch
from ..runtime.memory import alloc
from .device import SLOT_BYTES, call_agreed, checked_call

MAX_BLOCKS = 128  # the largest grid of a checked kernel (one sequence word per block)
SENDS_ALL = frozenset({"reduce_scatter", "all_to_all"})  # send buffers of ``size`` slots of ``Call.peer_bytes``
_COPY_THREADS = 256

CallCheckHandle = namedtuple("CallCheckHandle",
                             "inbox peers counts verdict err abort rank peer channel timeout_ns")
"""What kernels take: our area, every peer's (in peer order), the sequence words, the verdict, the error context."""


@cuda.jit(cache=True)
def check_kernel(call_check, fingerprint, rank, nranks, op):
    """The call check alone, on one block: ahead of a user's kernel, or on a rank a plan gives no thread blocks."""
    checked_call(call_check, fingerprint, rank, nranks, op)


@cuda.jit(cache=True)
def copy_if_agreed(verdict, dst, src):
    """``dst[:] = src`` (views of one size) unless the call check before this kernel found the calls differ."""
    if call_agreed(verdict):
        copy_bytes(dst, 0, src, 0, dst.size, cuda.grid(1), cuda.gridsize(1))


def handle_type(peers: int) -> types.NamedTuple:
    """The numba type of a ``CallCheckHandle`` with ``peers`` peer areas."""
    return types.NamedTuple([BYTES, types.UniTuple(BYTES, peers), U32, U32, *WAIT_CONTEXT], CallCheckHandle)


def fingerprint_of(call, size: int) -> int:
    """The fingerprint of ``call`` (an ``algos.algorithm.Call``: collective, nbytes, dtype, op, root) on a
    communicator of ``size`` ranks (never 0)."""
    send_bytes = call.peer_bytes * size if call.collective in SENDS_ALL else call.peer_bytes
    return pack(call.collective, send_bytes, call.dtype, call.op, call.root)


class CallCheck:
    """The communicator's call-check area, registered with every peer; ``handle`` is plain data for kernels."""

    def __init__(self, comm):
        self.enabled = config.get("PYMSCCLPP_CHECK")
        self.rank, self.size = comm.rank, comm.size
        self.area = alloc(2 * comm.size * SLOT_BYTES)
        peers = [p for p in range(comm.size) if p != comm.rank]
        remotes = [comm.exchange_memory(self.area, p) for p in peers]
        self.counts = cuda.to_device(np.zeros(MAX_BLOCKS, np.uint32))
        self.verdict = cuda.to_device(np.ones(1, np.uint32))
        self.handle = CallCheckHandle(self.area, tuple(r.array for r in remotes), self.counts, self.verdict,
                                      *comm.wait_context())

    def fingerprint(self, call) -> int:
        """What a kernel serving ``call`` compares: 0 with the check off."""
        return fingerprint_of(call, self.size) if self.enabled else 0

    def fits(self, grid: int, threads: int) -> bool:
        """Whether a kernel of ``grid`` blocks of ``threads`` can run ``checked_call``: a sequence word per block,
        a thread per peer."""
        return 0 < grid <= MAX_BLOCKS and threads >= self.size - 1

    def check_launch(self, op: int) -> Launch:
        """A launch of the check kernel recording a disagreement with ``op`` (OP_CALLCHECK, OP_PRECHECK); set its
        ``fingerprint`` slot per call."""
        threads = max(1, self.size - 1) if IS_SIM else -(-max(1, self.size - 1) // 32) * 32
        return Launch(check_kernel, 1, threads, {"call_check": self.handle, "fingerprint": 0, "rank": self.rank,
                                                 "nranks": self.size, "op": op})

    def copy_launch(self, dst, src) -> Launch:
        """A launch of ``copy_if_agreed`` from device view ``src`` into ``dst`` (GPU backend)."""
        blocks = max(1, min(4 * MAX_BLOCKS, -(-dst.size // (_COPY_THREADS * 64))))
        return Launch(copy_if_agreed, blocks, _COPY_THREADS, {"verdict": self.verdict, "dst": dst, "src": src})

    def agreed(self) -> bool:
        """The verdict as the host reads it (the simulator, whose kernels have finished by then)."""
        return bool(self.verdict.copy_to_host()[0])


def callcheck(comm) -> CallCheck:
    """The communicator's call check (built collectively on first use)."""
    return comm.extension("callcheck", CallCheck)


def callcheck_on_one_host(comm) -> CallCheck | None:
    """``callcheck(comm)`` when all its ranks share one host, else None: ranks on several hosts share no memory
    for the device check (``CrossHost`` checks their calls on the host, ``callcheck.hosts``)."""
    return callcheck(comm) if len(set(comm.host_ids)) == 1 else None

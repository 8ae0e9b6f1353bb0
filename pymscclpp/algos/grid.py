"""How many blocks a built-in kernel runs on: its configured grid, cut to the SMs of the smallest share of the
GPU any rank has (under CUDA MPS, the share ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` gives), one 512-thread block
per SM, so every block of a launch is resident at once: blocks of one kernel wait on the same blocks of peers,
and a block left waiting for an SM would hold up every rank. As with NCCL, kernels of two communicators in
flight at once on different streams must be issued in the same order on every rank. ``PYMSCCLPP_MAX_BLOCKS``
caps every grid. Every rank uses the smallest figures of all ranks (blocks pair up by index across ranks).
"""

from __future__ import annotations

import struct

from .. import config
from ..runtime.backend import IS_SIM


def _local_limits() -> tuple[int, int]:
    """(SMs this rank's kernels can use, PYMSCCLPP_MAX_BLOCKS or 0)."""
    cap = config.get("PYMSCCLPP_MAX_BLOCKS")
    if IS_SIM:
        return 1 << 30, cap
    from numba import cuda
    return cuda.get_current_device().MULTIPROCESSOR_COUNT, cap


class GridLimits:
    """The smallest SM count and block cap over every rank of a communicator (gathered once)."""

    def __init__(self, comm):
        mine = struct.pack("<qq", *_local_limits())
        rows = [struct.unpack("<qq", raw) for raw in comm.bootstrap.all_gather(mine, what="grid limits")]
        self.sms = min(sms for sms, _ in rows)
        caps = [cap for _, cap in rows if cap > 0]
        self.cap = min(caps) if caps else 0

    def blocks(self, configured: int) -> int:
        """The grid a kernel configured for ``configured`` blocks runs on."""
        blocks = max(1, min(configured, self.sms))
        return max(1, min(blocks, self.cap)) if self.cap else blocks


SMALL_CALL_BYTES = 4 << 20  # zero-copy calls of smaller messages run on half the grid (``call_blocks``)
SMALL_COPY_BYTES = 32 << 20  # the same for kernels that only move bytes (no reduction)


def call_blocks(blocks: int, message_bytes: int, copies: bool = False) -> int:
    """The grid of a zero-copy call of ``message_bytes`` (nccl-tests sizes) by a kernel of ``blocks`` blocks: half of
    it (at least two) below ``SMALL_CALL_BYTES``, where every block's two meetings with its peers cost more than its
    few bytes save, as NCCL runs small calls on fewer channels; a kernel that ``copies`` (no reduction) below
    ``SMALL_COPY_BYTES``, where half the blocks still move the bytes at full speed (measured, docs/performance.md);
    else all of it."""
    small = message_bytes < (SMALL_COPY_BYTES if copies else SMALL_CALL_BYTES)
    return max(min(2, blocks), blocks // 2) if small else blocks


def blocks_for(comm, configured: int) -> int:
    """``GridLimits.blocks`` of ``comm`` (its limits gathered on first use, collectively)."""
    return comm.extension("grid-limits", GridLimits).blocks(configured)

"""The proxy FIFO, host side: the trigger format and the ring in pinned host memory the proxy pops from.

Trigger words (MSCCL++'s layout): w0 = size (32 bits) | src offset (32) << 32; w1 = dst offset (32)
| src memory id (9) << 32 | dst memory id (9) << 41 | type (3) << 50 | semaphore id (10) << 53 |
lap parity << 63. A device pusher (``channels.fifo``) takes a ticket with an atomic add on ``head``, waits
(bounded) while the ring is full, stores w0 then w1 with release; the parity bit of w1 (1 on even laps, 0 on
odd) tells the host a slot is filled, so slots are never cleared. The host publishes how many it popped in
``ctrl[CTRL_TAIL]``; ``ctrl[CTRL_ABORT]`` set by the proxy ends every device wait early.
"""

from __future__ import annotations

import mmap
from collections import namedtuple
from typing import NamedTuple

import numpy as np

from ..errors import InvalidUsageError
from .backend import IS_SIM

if not IS_SIM:
    from . import cudadrv

TRIGGER_DATA, TRIGGER_FLAG, TRIGGER_SYNC = 1, 2, 4
MAX_FIELD = 0xFFFFFFFF          # size and offsets are 32-bit
MAX_MEMORIES = 512              # 9-bit memory ids
MAX_SEMAPHORES = 1024           # 10-bit semaphore ids
CTRL_TAIL, CTRL_ABORT, CTRL_STOP = 0, 1, 2
CTRL_WORDS = 8
PUSH_FAILED = 0xFFFFFFFFFFFFFFFF
DEFAULT_SIZE = 512

FifoHandle = namedtuple("FifoHandle", "triggers ctrl head tail_cache fifo_size")


class Trigger(NamedTuple):
    """One request to the proxy, as the device encodes it."""
    type: int
    size: int
    src_offset: int
    dst_offset: int
    src_id: int
    dst_id: int
    semaphore_id: int


def encode(t: Trigger) -> tuple[int, int]:
    """The two words of ``t`` (parity bit clear); fields out of their bit range raise InvalidUsageError."""
    for name, value, bits in (("type", t.type, 3), ("size", t.size, 32), ("src_offset", t.src_offset, 32),
                              ("dst_offset", t.dst_offset, 32), ("src_id", t.src_id, 9),
                              ("dst_id", t.dst_id, 9), ("semaphore_id", t.semaphore_id, 10)):
        if not 0 <= value < 1 << bits:
            raise InvalidUsageError(f"trigger {name}={value} does not fit in {bits} bits")
    w0 = t.size | t.src_offset << 32
    w1 = t.dst_offset | t.src_id << 32 | t.dst_id << 41 | t.type << 50 | t.semaphore_id << 53
    return w0, w1


def decode(w0: int, w1: int) -> Trigger:
    """Inverse of ``encode`` (the parity bit is ignored)."""
    w0, w1 = int(w0), int(w1)
    return Trigger(type=(w1 >> 50) & 7, size=w0 & MAX_FIELD, src_offset=w0 >> 32, dst_offset=w1 & MAX_FIELD,
                   src_id=(w1 >> 32) & 0x1FF, dst_id=(w1 >> 41) & 0x1FF, semaphore_id=(w1 >> 53) & 0x3FF)


def lap_parity(ticket: int, size: int) -> int:
    """The parity bit a trigger with this ticket carries: 1 on laps 0, 2, 4..., so zeroed slots read as empty."""
    return ((ticket // size) + 1) & 1


def _pinned_words(count: int):
    """``count`` zeroed host u64 words the device can read and write (page-aligned; pinned and mapped on GPUs)."""
    raw = mmap.mmap(-1, max(count * 8, mmap.PAGESIZE))
    host = np.frombuffer(raw, np.uint64, count)
    if IS_SIM:
        return raw, host, host
    dev_ptr = cudadrv.host_register(np.frombuffer(raw, np.uint8))
    return raw, host, cudadrv.device_array(dev_ptr, count * 8, np.uint64)


class Fifo:
    """A trigger ring of ``size`` slots in pinned host memory, with its control words and device counters."""

    def __init__(self, size: int = DEFAULT_SIZE):
        if not isinstance(size, (int, np.integer)) or not 1 <= size <= 1 << 20:
            raise InvalidUsageError(f"fifo size {size!r}: expected an int in [1, 2**20]")
        self.size = int(size)
        self._raw, host, dev = _pinned_words(CTRL_WORDS + 2 * self.size)
        self.ctrl, self.triggers = host[:CTRL_WORDS], host[CTRL_WORDS:]
        self._dev_ctrl, self._dev_triggers = dev[:CTRL_WORDS], dev[CTRL_WORDS:]
        counters = np.zeros(2, np.uint64) if IS_SIM else _device_zeros(2)
        self._head, self._tail_cache = counters[0:1], counters[1:2]
        self.tail = 0  # host-side count of popped triggers

    def device_handle(self) -> FifoHandle:
        """Plain data for device code: trigger slots, control words, ticket counter, tail cache, size."""
        return FifoHandle(self._dev_triggers, self._dev_ctrl, self._head, self._tail_cache, np.uint64(self.size))

    def poll(self) -> Trigger | None:
        """The next trigger if one was pushed (not yet popped), else None."""
        slot = self.tail % self.size
        w1 = int(self.triggers[2 * slot + 1])
        if w1 >> 63 != lap_parity(self.tail, self.size):
            return None
        return decode(self.triggers[2 * slot], w1)

    def pop(self) -> None:
        """Consume the trigger ``poll`` returned and publish the new tail (frees its slot for pushers)."""
        self.tail += 1
        self.ctrl[CTRL_TAIL] = self.tail

    def abort(self) -> None:
        """Make every device push, flush and port-channel wait on this FIFO end early (error recorded)."""
        self.ctrl[CTRL_ABORT] = 1

    def close(self) -> None:
        if not IS_SIM and self._raw is not None:
            cudadrv.host_unregister(np.frombuffer(self._raw, np.uint8))
        self._raw = None


def _device_zeros(count: int):
    """``count`` zeroed u64 words in device memory (the ticket counter and tail cache)."""
    from numba import cuda
    return cuda.to_device(np.zeros(count, np.uint64))

"""Token pools: the 64-bit semaphore words of one rank, shared with its same-host peers once.

A device pool holds inbound tokens that peers' kernels add to; a host pool (POSIX shared
memory, device-mapped on GPUs) holds tokens that peers' hosts add to. Each semaphore takes
one slot; slot numbers are exchanged pairwise when the semaphore is built.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidUsageError
from . import shm
from .backend import IS_SIM
from .memory import RegisteredMemory, RemoteMemory, alloc, view_as

if not IS_SIM:
    from . import cudadrv

TOKEN_BYTES = 8


def u64_view(u8_array, slot: int, count: int = 1):
    """``count`` u64 words starting at word ``slot`` of a uint8 device array."""
    return view_as(u8_array, np.uint64, slot * TOKEN_BYTES, count)


class SlotAllocator:
    """Hands out slot numbers of a pool, failing clearly when it is full."""

    def __init__(self, slots: int, what: str):
        self.slots, self.next, self.what = slots, 0, what

    def check(self, count: int) -> None:
        """Raise unless ``count`` more slots are free (a pre-flight check before a set-up takes them one by one)."""
        if count < 1 or self.next + count > self.slots:
            raise InvalidUsageError(f"{self.what} cannot give {count} more semaphores ({self.slots - self.next} "
                                    f"of {self.slots} left); set PYMSCCLPP_MAX_SEMAPHORES higher")

    def take(self, count: int = 1) -> int:
        """The first of ``count`` consecutive free slots."""
        self.check(count)
        self.next += count
        return self.next - count


class DevicePool:
    """Inbound device tokens of this rank (registered) and local expected counters (private)."""

    def __init__(self, slots: int, job_token: bytes, rank: int, device: int):
        self.buffer = alloc(slots * TOKEN_BYTES)
        self.expected = alloc(slots * TOKEN_BYTES)
        self.registered = RegisteredMemory(self.buffer, job_token=job_token, rank=rank, device=device)
        self.slots = SlotAllocator(slots, "the device semaphore pool")

    def inbound(self, slot: int, count: int = 1):
        return u64_view(self.buffer, slot, count)

    def expected_counter(self, slot: int, count: int = 1):
        return u64_view(self.expected, slot, count)


class HostPool:
    """Inbound host tokens of this rank in shared memory; device-mapped on GPUs for host-to-device waits."""

    def __init__(self, slots: int):
        self.segment = shm.create(slots * TOKEN_BYTES, prefix="pymscclpp-tok")
        self.words = self.segment.array.view(np.uint64)
        self.expected = np.zeros(slots, np.uint64)  # host-side expected counters of host waits
        self.slots = SlotAllocator(slots, "the host semaphore pool")
        self._device = None
        if not IS_SIM:
            self._device_ptr = cudadrv.host_register(self.segment.array)
            self._device = cudadrv.device_array(self._device_ptr, self.segment.nbytes, np.uint8)

    def device_inbound(self, slot: int, count: int = 1):
        """The device-visible view of ``count`` inbound host tokens."""
        return u64_view(self._device if self._device is not None else self.segment.array, slot, count)

    def close(self) -> None:
        if not IS_SIM and self._device is not None:
            cudadrv.host_unregister(self.segment.array)
            self._device = None
        self.segment.close()


class PeerPools:
    """A same-host peer's pools mapped here: its device tokens and its host tokens."""

    def __init__(self, device_handle: bytes, host_name: str, host_bytes: int, job_token: bytes):
        self.device = RemoteMemory(device_handle, job_token=job_token)
        self.host_segment = shm.attach(host_name, host_bytes)
        self.host_words = self.host_segment.array.view(np.uint64)

    def device_inbound(self, slot: int, count: int = 1):
        return u64_view(self.device.array, slot, count)

    def close(self) -> None:
        self.device.close()

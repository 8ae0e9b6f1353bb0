"""MemoryChannel, host side: built by both ranks of a pair over peer mappings (NVLink/PCIe, or shared memory).

``MemoryChannel(comm, peer, src, inbox)``: ``inbox`` is the local buffer this rank exposes (the peer's ``dst``,
and where the peer's packets land). ``device_handle()`` is the plain data the device functions of
``channels.memory_channel`` take.
"""

from __future__ import annotations

from collections import namedtuple

from .buffers import as_bytes
from .semaphore import Device2DeviceSemaphore

MemoryChannelHandle = namedtuple(
    "MemoryChannelHandle",
    "src dst pkt inbound outbound expected err abort rank peer channel timeout_ns")


class MemoryChannel:
    """Host object of a channel from this rank to ``peer``; ``device_handle()`` is what kernels take."""

    def __init__(self, comm, peer: int, src, inbox=None, semaphores: int = 1):
        inbox = src if inbox is None else inbox
        self.comm, self.peer = comm, peer
        self.semaphore = Device2DeviceSemaphore(comm, peer, semaphores)
        self.remote = comm.exchange_memory(inbox, peer)
        self.dst = self.remote.device_view()
        self.src = as_bytes(src)
        self.inbox = as_bytes(inbox)

    def device_handle(self) -> MemoryChannelHandle:
        """Plain data: local src, the peer's inbox (dst), our inbox (pkt), and the semaphore words."""
        s = self.semaphore.device_handle()
        return MemoryChannelHandle(self.src, self.dst, self.inbox, s.inbound, s.outbound, s.expected,
                                   s.err, s.abort, s.rank, s.peer, s.channel, s.timeout_ns)

    def close(self) -> None:
        self.dst = None
        self.remote.close()

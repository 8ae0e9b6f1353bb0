"""PortChannel, host side: a channel through a ProxyService to one peer; kernels push requests and the CPU
proxy moves the bytes (copy engine or network). ``ProxyService.port_channel(...)`` / ``connect(...)`` build
one; ``device_handle()`` is the plain data the device functions of ``channels.port_channel`` take.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..runtime.fifo import CTRL_ABORT

PortChannelHandle = namedtuple(
    "PortChannelHandle",
    "triggers ctrl head tail_cache fifo_size inbound expected err abort rank peer channel timeout_ns dst_id src_id")


class PortChannel:
    """Host object of a channel through a ProxyService to one peer: semaphore ``semaphore_id``, memories by id."""

    def __init__(self, proxy, semaphore_id: int, dst_id: int, src_id: int):
        self.proxy, self.semaphore_id, self.dst_id, self.src_id = proxy, semaphore_id, dst_id, src_id
        self.peer = proxy.semaphore_peer(semaphore_id)

    def device_handle(self) -> PortChannelHandle:
        """Plain data: the proxy's FIFO, our inbound token and expected counter, the ids triggers carry."""
        f = self.proxy.fifo.device_handle()
        inbound, expected = self.proxy.semaphore_words(self.semaphore_id)
        c = self.proxy.comm
        abort = f.ctrl[CTRL_ABORT:CTRL_ABORT + 1]  # the FIFO's abort word: waits end when any proxy fails
        return PortChannelHandle(f.triggers, f.ctrl, f.head, f.tail_cache, f.fifo_size, inbound, expected,
                                 c.error_area, abort, np.int64(c.rank), np.int64(self.peer),
                                 np.int64(self.semaphore_id), np.uint64(c.timeout_ns), np.int64(self.dst_id),
                                 np.int64(self.src_id))

    def __repr__(self) -> str:
        return (f"<PortChannel rank {self.proxy.comm.rank} -> peer {self.peer}, semaphore {self.semaphore_id}, "
                f"dst memory {self.dst_id}, src memory {self.src_id}>")

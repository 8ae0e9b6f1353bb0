"""Ethernet transport: data staged through host memory and sent over the proxies' TCP link.

The sender copies the source range to a pinned staging buffer (device-to-host) chunk by chunk and
streams it as one DATA frame; the receiver reads each chunk into its staging buffer and copies it
to the destination (host-to-device), then a FLAG frame bumps the receiver's host token: the TCP
stream keeps data before flag. Under the simulator "device" memory is host memory: no staging.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..runtime.backend import IS_SIM
from . import driver
from . import frames

CHUNK = 4 << 20


def _host_view(addr: int, nbytes: int) -> memoryview:
    return memoryview((ctypes.c_uint8 * nbytes).from_address(addr)).cast("B")


class Stager:
    """A pinned staging buffer and the copies through it (one per thread that moves data)."""

    def __init__(self, stream: int, chunk: int = CHUNK):
        self.chunk, self.stream = chunk, stream
        if IS_SIM:
            self.buf = None
        else:
            from numba import cuda
            self.buf = cuda.pinned_array(chunk, np.uint8)
            self.addr = self.buf.ctypes.data

    def send(self, link, remote_id: int, dst_off: int, src_addr: int, nbytes: int) -> None:
        """One DATA frame: ``nbytes`` from local device address ``src_addr`` to the peer's memory ``remote_id``."""
        header = frames.encode(frames.Kind.DATA, remote_id, dst_off, nbytes)
        if self.buf is None:
            link.send(header, _host_view(src_addr, nbytes) if nbytes else b"")
            return
        link.send(header, self._staged(src_addr, nbytes))

    def _staged(self, src_addr: int, nbytes: int):
        """The source range chunk by chunk, each copied device-to-host just before it is sent."""
        for off in range(0, nbytes, self.chunk):
            n = min(self.chunk, nbytes - off)
            driver.to_host(self.addr, src_addr + off, n, self.stream)
            yield memoryview(self.buf)[:n]

    def receive(self, link, dst_addr: int, nbytes: int) -> None:
        """Read a DATA payload of ``nbytes`` from ``link`` into local device address ``dst_addr``."""
        if self.buf is None:
            if nbytes:
                link.read_into(_host_view(dst_addr, nbytes))
            return
        for off in range(0, nbytes, self.chunk):
            n = min(self.chunk, nbytes - off)
            link.read_into(memoryview(self.buf)[:n])
            driver.to_device(dst_addr + off, self.addr, n, self.stream)

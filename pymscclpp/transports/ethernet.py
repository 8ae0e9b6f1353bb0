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
    """Two pinned staging buffers and the copies through them (one Stager per thread that moves data).

    Sending, the device-to-host copy of chunk i+1 runs while chunk i is being sent; receiving, the
    host-to-device copy of chunk i runs while chunk i+1 is being received. Each copy is waited for
    before its buffer is reused, and the last one before ``send``/``receive`` return."""

    def __init__(self, stream: int, chunk: int = CHUNK):
        self.chunk, self.stream = chunk, stream
        if IS_SIM:
            self.bufs = None
        else:
            from numba import cuda
            self.bufs = [cuda.pinned_array(chunk, np.uint8) for _ in range(2)]
            self.addrs = [int(b.ctypes.data) for b in self.bufs]

    def send(self, link, remote_id: int, dst_off: int, src_addr: int, nbytes: int, trailer: bytes = b"") -> None:
        """One DATA frame: ``nbytes`` from local device address ``src_addr`` to the peer's memory
        ``remote_id``, then ``trailer`` (e.g. the FLAG frame) in the same locked send."""
        header = frames.encode(frames.Kind.DATA, remote_id, dst_off, nbytes)
        if self.bufs is None:
            link.send(header, _host_view(src_addr, nbytes) if nbytes else b"", trailer)
            return
        link.send(header, self._staged(src_addr, nbytes), trailer)

    def _staged(self, src_addr: int, nbytes: int):
        """The source range chunk by chunk; the copy of the next chunk is in flight while one is sent."""
        if nbytes <= 0:
            return
        check, stream = driver.check, self.stream
        n = min(self.chunk, nbytes)
        check(driver.copy_dtoh_async(self.addrs[0], src_addr, n, stream), "cuMemcpyDtoHAsync")
        off, i = 0, 0
        while off < nbytes:
            check(driver.stream_sync(stream), "cuStreamSynchronize")   # chunk i is in buffer i % 2
            nxt = off + n
            if nxt < nbytes:  # start chunk i+1 into the other buffer (sent out, so free) before sending chunk i
                m = min(self.chunk, nbytes - nxt)
                check(driver.copy_dtoh_async(self.addrs[(i + 1) % 2], src_addr + nxt, m, stream),
                      "cuMemcpyDtoHAsync")
            else:
                m = 0
            yield memoryview(self.bufs[i % 2])[:n]
            off, n, i = nxt, m, i + 1

    def receive(self, link, dst_addr: int, nbytes: int) -> None:
        """Read a DATA payload of ``nbytes`` from ``link`` into local device address ``dst_addr``."""
        if self.bufs is None:
            if nbytes:
                link.read_into(_host_view(dst_addr, nbytes))
            return
        check, stream = driver.check, self.stream
        try:
            for i, off in enumerate(range(0, nbytes, self.chunk)):
                n = min(self.chunk, nbytes - off)
                link.read_into(memoryview(self.bufs[i % 2])[:n])  # (the copy of chunk i-1 runs meanwhile)
                check(driver.stream_sync(stream), "cuStreamSynchronize")  # chunk i-2 left this buffer long ago
                check(driver.copy_htod_async(dst_addr + off, self.addrs[i % 2], n, stream), "cuMemcpyHtoDAsync")
        finally:
            driver.stream_sync(stream)  # the data is in place before any later FLAG bumps the token

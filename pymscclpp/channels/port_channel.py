"""PortChannel: a kernel asks, the CPU proxy moves the bytes (copy engine or network), so no SM copies.

Host side: ``ProxyService.port_channel(...)`` / ``ProxyService.connect(...)`` build a ``PortChannel``;
its ``device_handle()`` is what kernels take. Device side: put, signal, put_with_signal,
put_with_signal_and_flush, flush, wait, poll; offsets and sizes in bytes. Any thread may push;
call wait/poll from one thread per channel and let the rest of the block wait with syncthreads.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import cuda

from . import fifo
from . import semaphore as sem
from .fifo import CTRL_ABORT, TRIGGER_DATA, TRIGGER_FLAG, TRIGGER_SYNC

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


@cuda.jit(device=True)
def _push(ch, kind, dst_off, src_off, nbytes):
    w0, w1 = fifo.trigger_words(kind, ch.dst_id, dst_off, ch.src_id, src_off, nbytes, ch.channel)
    return fifo.push(ch, w0, w1)


@cuda.jit(device=True)
def put(ch, dst_off, src_off, nbytes):
    """Ask the proxy to copy ``nbytes`` from our ``src[src_off:]`` to the peer's ``dst[dst_off:]``; False on error."""
    return _push(ch, TRIGGER_DATA, dst_off, src_off, nbytes) != fifo.PUSH_FAILED


@cuda.jit(device=True)
def signal(ch):
    """Ask the proxy to signal the peer once all our earlier puts on this channel have landed."""
    return _push(ch, TRIGGER_FLAG, 0, 0, 0) != fifo.PUSH_FAILED


@cuda.jit(device=True)
def put_with_signal(ch, dst_off, src_off, nbytes):
    """put then signal, in one trigger."""
    return _push(ch, TRIGGER_DATA | TRIGGER_FLAG, dst_off, src_off, nbytes) != fifo.PUSH_FAILED


@cuda.jit(device=True)
def put_with_signal_and_flush(ch, dst_off, src_off, nbytes):
    """put, signal, and wait until the proxy completed them (``src`` may then be overwritten)."""
    return fifo.wait_popped(ch, _push(ch, TRIGGER_DATA | TRIGGER_FLAG | TRIGGER_SYNC, dst_off, src_off, nbytes))


@cuda.jit(device=True)
def flush(ch):
    """Wait until the proxy completed every trigger pushed before this one; False on error or timeout."""
    return fifo.wait_popped(ch, _push(ch, TRIGGER_SYNC, 0, 0, 0))


@cuda.jit(device=True)
def poll(ch):
    """True (and the expected token advanced) if the peer's next signal has arrived; never blocks."""
    return sem.poll(ch)


@cuda.jit(device=True)
def wait(ch):
    """Wait for the peer's next signal (acquire): its data has landed. False (error recorded) past the
    budget, or soon after any proxy of the job failed (the handle's ``abort`` is its FIFO's abort word)."""
    return sem.wait(ch)

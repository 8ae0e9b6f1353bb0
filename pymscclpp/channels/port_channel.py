"""PortChannel, device side: a kernel asks, the CPU proxy moves the bytes, so no SM copies.

put, signal, put_with_signal, put_with_signal_and_flush, flush, wait, poll take the plain-data handle of
``proxy.port_channel.PortChannel``; offsets and sizes in bytes. Any thread may push; call wait/poll from one
thread per channel and let the rest of the block wait with syncthreads.
"""

from __future__ import annotations

from numba import cuda

from ..runtime.fifo import PUSH_FAILED, TRIGGER_DATA, TRIGGER_FLAG, TRIGGER_SYNC
from . import fifo
from . import semaphore as sem


@cuda.jit(device=True)
def _push(ch, kind, dst_off, src_off, nbytes):
    w0, w1 = fifo.trigger_words(kind, ch.dst_id, dst_off, ch.src_id, src_off, nbytes, ch.channel)
    return fifo.push(ch, w0, w1)


@cuda.jit(device=True)
def put(ch, dst_off, src_off, nbytes):
    """Ask the proxy to copy ``nbytes`` from our ``src[src_off:]`` to the peer's ``dst[dst_off:]``; False on error."""
    return _push(ch, TRIGGER_DATA, dst_off, src_off, nbytes) != PUSH_FAILED


@cuda.jit(device=True)
def signal(ch):
    """Ask the proxy to signal the peer once all our earlier puts on this channel have landed."""
    return _push(ch, TRIGGER_FLAG, 0, 0, 0) != PUSH_FAILED


@cuda.jit(device=True)
def put_with_signal(ch, dst_off, src_off, nbytes):
    """put then signal, in one trigger."""
    return _push(ch, TRIGGER_DATA | TRIGGER_FLAG, dst_off, src_off, nbytes) != PUSH_FAILED


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

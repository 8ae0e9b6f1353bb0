"""The proxy FIFO, device side: push a 128-bit trigger into the host ring and wait until the proxy popped it.

The format, the constants and the host ring are ``runtime.fifo``'s; a handle is any plain-data tuple with the
``FifoHandle`` fields and err/abort/rank/peer/channel/timeout_ns.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..runtime.fifo import CTRL_TAIL, MAX_FIELD, PUSH_FAILED
from .device_errors import OP_FIFO_PUSH, OP_FLUSH, OP_PROXY_ABORT
from .ptx import load_acquire, load_relaxed, store_release, store_relaxed
from .spin import at_least, spin_until


@cuda.jit(device=True)
def field32(x):
    """``x`` as a u64 trigger field; values outside [0, 2**32) saturate so the proxy rejects them."""
    if x < 0 or x > MAX_FIELD:
        return np.uint64(MAX_FIELD)
    return np.uint64(x)


@cuda.jit(device=True)
def trigger_words(kind, dst_id, dst_off, src_id, src_off, nbytes, sem_id):
    """The two words of a trigger (parity clear); see the module docstring for the layout."""
    w0 = field32(nbytes) | (field32(src_off) << np.uint64(32))
    w1 = (field32(dst_off) | (np.uint64(src_id & 0x1FF) << np.uint64(32))
          | (np.uint64(dst_id & 0x1FF) << np.uint64(41)) | (np.uint64(kind & 7) << np.uint64(50))
          | (np.uint64(sem_id & 0x3FF) << np.uint64(53)))
    return w0, w1


@cuda.jit(device=True)
def _has_room(ch, _, ticket):
    """Probe (``spin.spin_until``): the ring has room for trigger ``ticket``; the proxy's tail."""
    tail = load_acquire(ch.ctrl, CTRL_TAIL)
    return ticket < tail + ch.fifo_size, tail, tail


@cuda.jit(device=True)
def push(ch, w0, w1):
    """Push one trigger; its ticket, or PUSH_FAILED (error recorded) if the ring stayed full past the budget
    or the proxy aborted. ``ch`` is any handle with the FifoHandle fields and err/abort/rank/peer/channel/timeout_ns
    (``abort``: the FIFO's abort word)."""
    size = ch.fifo_size
    ticket = cuda.atomic.add(ch.head, 0, np.uint64(1))
    if ticket >= load_relaxed(ch.tail_cache, 0) + size:
        ok, tail = spin_until(_has_room, ch, 0, ticket, ch, ch.peer, ch.channel, OP_FIFO_PUSH, OP_PROXY_ABORT)
        if not ok:
            return np.uint64(PUSH_FAILED)
        cuda.atomic.max(ch.tail_cache, 0, tail)
    slot = np.uint64(2) * (ticket % size)
    parity = ((ticket // size) + np.uint64(1)) & np.uint64(1)
    store_relaxed(ch.triggers, slot, w0)
    store_release(ch.triggers, slot + np.uint64(1), w1 | (parity << np.uint64(63)))
    return ticket


@cuda.jit(device=True)
def wait_popped(ch, ticket):
    """Wait until the proxy has popped trigger ``ticket`` (so it and all before it were executed); False on error."""
    if ticket == PUSH_FAILED:
        return False
    ok, _ = spin_until(at_least, ch.ctrl, CTRL_TAIL, ticket + np.uint64(1), ch, ch.peer, ch.channel, OP_FLUSH,
                       OP_PROXY_ABORT)
    return ok

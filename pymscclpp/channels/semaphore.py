"""Device side of semaphores: signal, wait, poll on 64-bit monotonic tokens.

A handle is any plain-data tuple with fields ``inbound`` (own token, written by the peer),
``outbound`` (the peer's inbound token), ``expected`` (own counter on the device), ``err``
(device error area), and ints ``rank``, ``peer``, ``channel``, ``timeout_ns`` (0: no budget).
Call signal/wait/poll from one thread; make the rest of the block wait with syncthreads.
"""

from __future__ import annotations

from numba import cuda

from .device_errors import OP_WAIT, record_timeout
from .ptx import (atomic_add_relaxed, atomic_add_release, globaltimer, load_acquire,
                  spin_pause)


@cuda.jit(device=True)
def signal(sem):
    """Release-ordered system-scope increment of the peer's inbound token: our writes before it are visible."""
    atomic_add_release(sem.outbound, 0, 1)


@cuda.jit(device=True)
def relaxed_signal(sem):
    """Increment the peer's token with no ordering of earlier writes (for pure synchronisation)."""
    atomic_add_relaxed(sem.outbound, 0, 1)


@cuda.jit(device=True)
def poll(sem):
    """True (and the expected token advanced) if the next signal has arrived; never blocks."""
    want = sem.expected[0] + 1
    if load_acquire(sem.inbound, 0) >= want:
        sem.expected[0] = want
        return True
    return False


@cuda.jit(device=True)
def wait(sem):
    """Acquire-ordered wait for the next signal; False (error recorded) if the budget runs out."""
    want = sem.expected[0] + 1
    sem.expected[0] = want
    seen = load_acquire(sem.inbound, 0)
    if seen >= want:
        return True
    start = globaltimer()
    while True:
        spin_pause()
        seen = load_acquire(sem.inbound, 0)
        if seen >= want:
            return True
        if sem.timeout_ns > 0 and globaltimer() - start > sem.timeout_ns:
            record_timeout(sem.err, OP_WAIT, sem.rank, sem.peer, sem.channel, want, seen)
            return False

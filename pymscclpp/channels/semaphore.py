"""Device side of semaphores: signal, wait, poll on 64-bit monotonic tokens.

A handle is any plain-data tuple with fields ``inbound`` (own token, written by the peer),
``outbound`` (the peer's inbound token), ``expected`` (own counter on the device), ``err``
(device error area), ``abort`` (the communicator's abort word), and ints ``rank``, ``peer``, ``channel``,
``timeout_ns`` (0: no budget).
The token arrays may hold several independent semaphores; ``idx`` picks one (default 0).
Call signal/wait/poll from one thread; make the rest of the block wait with syncthreads.
"""

from __future__ import annotations

from numba import cuda

from .device_errors import OP_WAIT
from .ptx import atomic_add_relaxed, atomic_add_release, load_acquire
from .spin import wait_at_least


@cuda.jit(device=True)
def signal(sem, idx=0):
    """Release-ordered system-scope increment of the peer's inbound token: our writes before it are visible."""
    atomic_add_release(sem.outbound, idx, 1)


@cuda.jit(device=True)
def relaxed_signal(sem, idx=0):
    """Increment the peer's token with no ordering of earlier writes (for pure synchronisation)."""
    atomic_add_relaxed(sem.outbound, idx, 1)


@cuda.jit(device=True)
def poll(sem, idx=0):
    """True (and the expected token advanced) if the next signal has arrived; never blocks."""
    want = sem.expected[idx] + 1
    if load_acquire(sem.inbound, idx) >= want:
        sem.expected[idx] = want
        return True
    return False


@cuda.jit(device=True)
def wait(sem, idx=0):
    """Acquire-ordered wait for the next signal; False (error recorded) if the budget runs out or the host
    aborts the communicator's waits."""
    return wait_for(sem, idx, OP_WAIT)


@cuda.jit(device=True)
def wait_for(sem, idx, op):
    """``wait``, a failure recorded as ``op`` (``runtime.device_errors.OP_NAMES``: what the wait was for)."""
    want = sem.expected[idx] + 1
    sem.expected[idx] = want
    return wait_at_least(sem.inbound, idx, want, sem, sem.peer, sem.channel + idx, op)

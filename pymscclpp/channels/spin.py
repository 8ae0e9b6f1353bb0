"""The one bounded device wait: poll a probe until it reports done, giving up past the budget or once the abort word
is set, and recording why in the error area (as MSCCL++'s POLL_MAYBE_JAILBREAK bounds its spins).

A probe is a device function ``probe(where, at, want) -> (done, seen, value)`` that reads memory once through the
inline-PTX loads of ``ptx`` (a plain load would be hoisted out of the loop on the GPU); ``value`` is what the wait
returns (the packet's data, the tail it saw). ``ctx`` is any handle with ``err``, ``abort``, ``rank`` and
``timeout_ns`` (0: no budget): a channel or semaphore handle, a ``WaitContext``.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .device_errors import QUIET, aborted, record_abort, record_timeout
from .ptx import globaltimer, load_acquire, load_relaxed, spin_pause


@cuda.jit(device=True)
def spin_until(probe, where, at, want, ctx, peer, channel, op, abort_op):
    """(True, value) once ``probe(where, at, want)`` is done; (False, the last value) with ``op``, ``peer``,
    ``channel``, ``want`` and the last ``seen`` recorded in ``ctx.err`` when the budget runs out or the abort word
    ends the wait. ``abort_op``: what an abort records, ``op`` itself (the wait was aborted) or OP_PROXY_ABORT for
    the FIFO's own waits (``runtime.device_errors`` words that as a failed proxy). An ``op`` plus ``QUIET`` gives up
    alike but records nothing: the caller's block reports for it."""
    done, seen, value = probe(where, at, want)
    if done:
        return True, value
    start = globaltimer()
    spins = 0
    while True:
        spin_pause()
        done, seen, value = probe(where, at, want)
        if done:
            return True, value
        spins += 1
        if aborted(ctx.abort, ctx.err, spins):
            if op >= QUIET:
                return False, value
            if abort_op == op:
                record_abort(ctx.err, op, ctx.rank, peer, channel, want, seen)
            else:
                record_timeout(ctx.err, abort_op, ctx.rank, peer, channel, want, seen)
            return False, value
        if ctx.timeout_ns > 0 and globaltimer() - start > ctx.timeout_ns:
            if op < QUIET:
                record_timeout(ctx.err, op, ctx.rank, peer, channel, want, seen)
            return False, value


@cuda.jit(device=True)
def report_quiet(ctx, op, peer, channel, want, seen):
    """Record, for a wait that gave up quietly (``QUIET``), what it would have, unless an error is recorded already:
    an abort if the host's abort word is set, else a timeout."""
    if load_relaxed(ctx.err, 0) != 0:
        return
    if load_relaxed(ctx.abort, 0) != 0:
        record_abort(ctx.err, op, ctx.rank, peer, channel, want, seen)
    else:
        record_timeout(ctx.err, op, ctx.rank, peer, channel, want, seen)


@cuda.jit(device=True)
def at_least(words, i, want):
    """Probe: ``words[i]`` (acquire-ordered) has reached ``want``; a monotonic token, counter or tail."""
    seen = load_acquire(words, i)
    return seen >= want, seen, seen


@cuda.jit(device=True)
def wait_at_least(words, i, want, ctx, peer, channel, op):
    """Wait until ``words[i]`` reaches ``want`` (``spin_until`` with ``at_least``); False, recorded, on failure."""
    ok, _ = spin_until(at_least, words, i, np.uint64(want), ctx, peer, channel, op, op)
    return ok

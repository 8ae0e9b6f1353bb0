"""Device side of the error area (layout: ``runtime.device_errors``): record the first failing wait of a
launch (or a call that disagrees with a peer's), and read the host's abort word and the area's state every
``ABORT_CHECK_EVERY`` spins.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..runtime.device_errors import (ABORT_CHECK_EVERY, ABORTED, MISMATCH, OP_CALLCHECK, OP_FIFO_PUSH,  # noqa: F401
                                     OP_FLUSH, OP_PACKET, OP_PAIR_RECV, OP_PAIR_SEND, OP_PAIR_WAIT, OP_PRECHECK,
                                     OP_PROXY_ABORT, OP_READ_DONE, OP_READ_PACKET, OP_RECV_DATA, OP_SEND_CREDIT,
                                     OP_WAIT, OP_WINDOWS, QUIET, TIMED_OUT)
from .ptx import fence_sys, load_relaxed


@cuda.jit(device=True)
def aborted(abort, err, spins):
    """True when a wait at its ``spins``-th spin should give up: the host set the abort word, or a wait of the
    communicator already failed (its error is the one reported: the simulator, which runs blocks one after
    another, would otherwise spend a budget per block before reporting)."""
    return spins % ABORT_CHECK_EVERY == 0 and (load_relaxed(abort, 0) != 0 or load_relaxed(err, 0) != 0)


@cuda.jit(device=True)
def _record(err, state, op, rank, peer, channel, expected, seen):
    """The one writer of the error area; its callers pass int64s only (not the literal codes), so it compiles
    once per kernel."""
    if cuda.atomic.cas(err, 0, 0, state) == 0:
        err[1] = op
        err[2] = rank
        err[3] = peer
        err[4] = channel
        err[5] = expected
        err[6] = seen
        err[7] = cuda.blockIdx.x
        fence_sys()


@cuda.jit(device=True)
def record_timeout(err, op, rank, peer, channel, expected, seen):
    """Record the first timed-out wait of a launch into ``err`` (int64[ERR_WORDS])."""
    _record(err, np.int64(TIMED_OUT), np.int64(op), rank, peer, channel, expected, np.int64(seen))


@cuda.jit(device=True)
def record_abort(err, op, rank, peer, channel, expected, seen):
    """Record a wait the host's abort word ended (a peer was declared dead)."""
    _record(err, np.int64(ABORTED), np.int64(op), rank, peer, channel, expected, np.int64(seen))


@cuda.jit(device=True)
def record_mismatch(err, op, rank, peer, seq, ours, theirs):
    """Record that call ``seq``'s fingerprint ``ours`` differs from ``peer``'s ``theirs`` (the call check; ``op``:
    OP_CALLCHECK in the call's own kernel, OP_PRECHECK in a check kernel ahead of it; OP_WINDOWS: the windows tags
    of a zero-copy call whose fingerprints agree)."""
    _record(err, np.int64(MISMATCH), np.int64(op), rank, peer, seq, np.int64(ours), np.int64(theirs))

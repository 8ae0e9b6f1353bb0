"""Rank functions for symmetric set-up failure, run by a ``RankPool``: ``fn(comm, state, **params)``.

One rank (or two) fails a collective set-up (``comm.setup``) while its peers are mid-exchange with it; each
rank records its error as ``(scope, type, text, monotonic time)`` and goes on, so the test also sees that
the communicator sets up and works after the failed scope. Each returns (errors, result).
"""

from __future__ import annotations

import time

import numpy as np

from pymscclpp.errors import PymscclppError  # pymscclpp first: it picks the backend numba.cuda loads
from pymscclpp.runtime.memory import alloc
from numba import cuda  # noqa: E402


def _failed(comm, errors: list, what: str, body) -> None:
    """Run ``body()`` in set-up scope ``what``; it must raise on this rank: record the error."""
    try:
        with comm.setup(what):
            body()
    except PymscclppError as exc:
        errors.append((what, type(exc).__name__, str(exc), time.monotonic()))
    else:
        raise AssertionError(f"{what} succeeded on rank {comm.rank} although a rank failed it")


def _peers(comm) -> list[int]:
    return [p for p in range(comm.size) if p != comm.rank]


def registration_fails_on_one_rank(comm, state, bad_rank: int):
    """MemoryChannels to every peer where ``bad_rank`` offers process-local memory (refused at registration,
    after its semaphore exchange with the first peer); then channels of good buffers map each peer's memory."""
    def channels(buf):
        return lambda: comm.memory_channels(_peers(comm), src=buf, semaphores=1)

    errors: list = []
    bad = cuda.to_device(np.zeros(256, np.uint8)) if comm.rank == bad_rank else alloc(256)
    _failed(comm, errors, "memory channels", channels(bad))
    good = alloc(256)
    good.copy_to_device(np.full(256, comm.rank + 1, np.uint8))
    with comm.setup("memory channels again"):
        chans = comm.memory_channels(_peers(comm), src=good, semaphores=1)
    comm.barrier()
    return errors, {p: int(ch.remote.array.copy_to_host()[0]) for p, ch in chans.items()}  # each peer's marker


def pool_exhausted_on_some_ranks(comm, state, short_ranks: list[int]):
    """``short_ranks`` spent most of a tiny pool on a channel among themselves; then every rank builds
    MemoryChannels to all peers, then runs its first all_reduce (building an algorithm), each in a scope."""
    scratch = alloc(64)
    kept = [comm.memory_channel(p, scratch, semaphores=5) for p in short_ranks if comm.rank in short_ranks
            and p != comm.rank]
    errors: list = []
    _failed(comm, errors, "all-peer channels", lambda: comm.memory_channels(_peers(comm), src=scratch, semaphores=2))
    buf = cuda.to_device(np.ones(64, np.float32))
    _failed(comm, errors, "all_reduce simple", lambda: comm.all_reduce(buf, algo="simple"))
    return errors, len(kept)

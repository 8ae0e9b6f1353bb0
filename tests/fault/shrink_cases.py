"""Rank functions for abort, shrink and split tests, run by ``harness.Job``: ``fn(comm, report, **params)``.

The survivors of a killed rank catch its error, shrink, and carry on with checked all-reduces; a victim reports
its progress so that the test kills it in the middle of an all-reduce loop.
"""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
from numba import cuda

from pymscclpp.errors import CommAbortedError, InvalidUsageError, PymscclppError

import collective_cases as cc
from fault.harness import held, shared_unique_id

COUNT = 256


def checked_all_reduce(comm, seed: int, count: int = COUNT) -> None:
    """One all-reduce of rank-specific data, checked against NumPy's (raises on a wrong result)."""
    send = cuda.to_device(cc.rank_data(comm.rank, count, "float32", seed))
    recv = cuda.to_device(np.zeros(count, np.float32))
    comm.all_reduce(send, recv)
    cuda.synchronize()
    comm.check_device_errors()
    np.testing.assert_array_equal(recv.copy_to_host(), cc.expected_allreduce(comm.size, count, "float32", seed, "sum"))


def _in_thread(call) -> dict:
    """Run ``call()`` in a thread; a dict that gets its error's type and text, and when it ended."""
    out: dict = {}

    def run():
        try:
            call()
            out["kind"] = "returned"
        except BaseException as exc:
            out["kind"], out["text"] = type(exc).__name__, str(exc)
        out["at"] = time.monotonic()
    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out


def abort_in_flight(comm, report, abort_after: float):
    """After a warm-up all-reduce, rank 0 starts one in a thread that rank 1 never joins (a device wait) and rank 1
    a barrier that rank 0 never enters (a bootstrap wait); each aborts its communicator ``abort_after`` s later
    (rank 1 first). What the thread raised and how long it took; then that later calls fail at once."""
    checked_all_reduce(comm, 0)
    report("ready")
    x = cuda.to_device(np.ones(COUNT, np.float32))
    if comm.rank == 0:
        flight = _in_thread(lambda: (comm.all_reduce(x), cuda.synchronize()))
    else:
        flight = _in_thread(comm.barrier)
    time.sleep(abort_after / 2 if comm.rank == 1 else abort_after)
    alive_before = flight["thread"].is_alive()
    aborted_at = time.monotonic()
    comm.abort()
    abort_s = time.monotonic() - aborted_at
    flight["thread"].join(10)
    later = []
    for call in (lambda: comm.all_reduce(x), comm.barrier, comm.check_device_errors, lambda: comm.split(0)):
        t0 = time.monotonic()
        try:
            call()
            later.append(("returned", 0.0))
        except CommAbortedError as exc:
            later.append((type(exc).__name__, time.monotonic() - t0))
    comm.abort()  # idempotent; the harness's close() after it is fine too
    return dict(alive_before=alive_before, kind=flight.get("kind"), text=flight.get("text", ""),
                ended_s=flight["at"] - aborted_at, abort_s=abort_s, later=later)


def _loop_until_peer_dies(comm, report, phase: int, seed: int) -> tuple[str, int]:
    """Checked all-reduces until one fails (a peer died); (the error's type, the good ones before it)."""
    done = 0
    while True:
        try:
            checked_all_reduce(comm, seed + done)
        except PymscclppError as exc:
            return type(exc).__name__, done
        done += 1
        if done % 2 == 0:
            report("progress", (phase, comm.rank, done))


def survive_deaths(comm, report, deaths: int, after: int = 3):
    """All-reduce until a peer dies, shrink, and again ``deaths`` times; then ``after`` checked all-reduces on the
    last communicator. Per death: the error, good calls before it, the new rank and size, seconds to shrink."""
    report("ready")
    phases = []
    for phase in range(deaths):
        kind, good = _loop_until_peer_dies(comm, report, phase, 1000 * phase)
        t0 = time.monotonic()
        old = comm.rank
        comm = comm.shrink()
        phases.append(dict(kind=kind, good=good, old=old, rank=comm.rank, size=comm.size,
                           shrink_s=time.monotonic() - t0))
    try:
        for i in range(after):
            checked_all_reduce(comm, 9000 + i)
    finally:
        comm.close()
    return phases


def split_colors(comm, report, colors: list, keys: list):
    """Bad colors, keys and excluded ranks are refused first; then ``comm.split(colors[rank], keys[rank])``: the
    new rank and size (None when not a member), a checked all-reduce on each new communicator, then one on the old,
    which still works."""
    report("ready")
    refused = []
    for bad in (lambda: comm.split(-1), lambda: comm.split(True), lambda: comm.split(0, key="a"),
                lambda: comm.shrink(exclude=[comm.size])):
        try:
            bad()
        except InvalidUsageError as exc:  # raised before any message: the ranks stay in step
            refused.append(str(exc))
    assert len(refused) == 4 and all(t.startswith(f"rank {comm.rank}: ") for t in refused), refused
    new = comm.split(colors[comm.rank], keys[comm.rank])
    out = None
    if new is not None:
        try:
            checked_all_reduce(new, 7)
            out = (new.rank, new.size)
        finally:
            new.close()
    checked_all_reduce(comm, 8)
    return out


def abort_and_shrink_cycles(comm, cycles: int) -> tuple:
    """Make ``cycles`` communicators of two ranks one after another (unique ids over ``comm``'s bootstrap), each
    runs an all-reduce and is aborted, or shrunk to both ranks, or shrunk without rank 1 (which aborts its own);
    every shrunk one runs an all-reduce and is closed. What this rank held before and after, collector off."""
    from pymscclpp import Communicator
    gc.collect()
    gc.disable()
    try:
        before = held()
        for i in range(cycles):
            made = Communicator.from_unique_id(shared_unique_id(comm), comm.rank, comm.size)
            checked_all_reduce(made, i)
            comm.barrier()  # both checked theirs: a peer that aborts first looks dead to the other's check
            if i % 3 == 0 or (i % 3 == 2 and comm.rank == 1):
                made.abort()
            else:
                shrunk = made.shrink(exclude=() if i % 3 == 1 else [1])
                assert shrunk.size == (2 if i % 3 == 1 else 1) and made.aborted
                checked_all_reduce(shrunk, i)
                shrunk.close()
                del shrunk
            del made
        return before, held()
    finally:
        gc.enable()

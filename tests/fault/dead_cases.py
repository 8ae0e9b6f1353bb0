"""Rank functions for dead-peer tests, run by ``harness.Job``: ``fn(comm, report, **params)``.

Every rank starts a LivenessMonitor (a collective call), reports ``ready``, then either plays the
victim (busy, until the test kills or freezes it) or the survivor (a barrier or a collective loop
that must end with an error naming the dead peer, in bounded time).
"""

from __future__ import annotations

import time

import numpy as np
from numba import cuda

from pymscclpp.errors import PymscclppError
from pymscclpp.runtime.liveness import LivenessMonitor

import collective_cases as cc


def _outcome(exc: BaseException, monitor: LivenessMonitor) -> dict:
    return dict(kind=type(exc).__name__, text=str(exc), at=time.monotonic(), dead=monitor.dead())


def barrier_while_peer_dies(comm, report, victim: int, interval: float = 0.2, dead_after: float | None = None):
    """Survivors enter a barrier the victim never reaches; the victim is killed (or frozen) meanwhile."""
    monitor = LivenessMonitor(comm.bootstrap, interval=interval, dead_after=dead_after).start()
    try:
        report("ready")
        if comm.rank == victim:
            time.sleep(120)  # busy elsewhere until killed
            return None
        try:
            comm.barrier()
        except PymscclppError as exc:
            return _outcome(exc, monitor)
        raise AssertionError("the barrier completed although a rank never entered it")
    finally:
        monitor.stop()


def allreduce_loop_while_peer_dies(comm, report, victim: int, iters: int = 10_000, count: int = 256,
                                   dead_after: float | None = None):
    """Every rank runs checked all-reduces; the victim reports its progress and is killed mid-loop."""
    monitor = LivenessMonitor(comm.bootstrap, interval=0.2, dead_after=dead_after).start()
    done = 0
    try:
        report("ready")
        for i in range(iters):
            x = cc.rank_data(comm.rank, count, "float32", i)
            send = cuda.to_device(x)
            recv = cuda.to_device(np.zeros(count, np.float32))
            try:
                comm.all_reduce(send, recv)
                cuda.synchronize()
                monitor.check()          # a dead peer, named, if the monitor saw one
                comm.check_device_errors()  # else a device wait that ran out of budget
            except PymscclppError as exc:
                out = _outcome(exc, monitor)
                try:
                    comm.check_device_errors()
                except PymscclppError as dev:  # the communicator's own monitor may name the dead peer first
                    out["device_error"] = str(dev)
                out["good_iters"] = done
                return out
            np.testing.assert_array_equal(recv.copy_to_host(), cc.expected_allreduce(comm.size, count, "float32",
                                                                                    i, "sum"))
            done += 1
            if comm.rank == victim and done % 4 == 0:
                report("progress", done)
        raise AssertionError(f"{iters} all-reduces completed although rank {victim} was killed")
    finally:
        monitor.stop()

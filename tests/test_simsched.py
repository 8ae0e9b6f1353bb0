"""The simulator's block barrier and shared arrays (``runtime.simsched``): syncthreads orders a block's threads,
threads that returned count as arrived, the block reductions see every thread, a thread's exception ends the launch
without a hang, and a block's threads share one array per ``cuda.shared.array`` call site."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import pymscclpp  # noqa: F401  (installs the barrier on the simulator)
from numba import cuda
from pymscclpp.runtime.backend import IS_SIM

pytestmark = pytest.mark.skipif(not IS_SIM, reason="the barrier replaces the simulator's scheduler")


@cuda.jit
def _rotate(out, rounds):
    """Each round every thread reads its right neighbour's slot, then writes its own: right only if the barrier
    holds every read of a round before any write of the next."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    base = cuda.blockIdx.x * nt
    for _ in range(rounds):
        v = out[base + (tid + 1) % nt]
        cuda.syncthreads()
        out[base + tid] = v
        cuda.syncthreads()


@cuda.jit
def _early_exit(out, live):
    """Threads from ``live`` on return at once; the rest meet twice and count each other."""
    tid = cuda.threadIdx.x
    if tid >= live:
        return
    cuda.atomic.add(out, 0, 1)
    cuda.syncthreads()
    out[1 + tid] = out[0]
    cuda.syncthreads()


@cuda.jit
def _any(out, who):
    out[cuda.threadIdx.x] = cuda.syncthreads_or(1 if cuda.threadIdx.x == who else 0)


@cuda.jit
def _raise_in_one(out, culprit):
    if cuda.threadIdx.x == culprit:
        raise ValueError("thread failed on purpose")
    cuda.syncthreads()
    out[cuda.threadIdx.x] = 1


def test_syncthreads_holds_every_read_of_a_round_before_any_write_of_the_next():
    nt, blocks, rounds = 16, 3, 5
    start = np.arange(blocks * nt, dtype=np.int64)
    out = cuda.to_device(start)
    _rotate[blocks, nt](out, rounds)
    want = np.concatenate([np.roll(start[b * nt:(b + 1) * nt], -rounds) for b in range(blocks)])
    np.testing.assert_array_equal(out.copy_to_host(), want)


def test_threads_that_returned_count_as_arrived():
    out = cuda.to_device(np.zeros(33, np.int64))
    _early_exit[1, 32](out, 5)
    got = out.copy_to_host()
    assert got[0] == 5
    np.testing.assert_array_equal(got[1:6], [5] * 5)
    assert not got[6:].any()


@pytest.mark.parametrize("who", [-1, 0, 7])
def test_syncthreads_or_sees_every_thread(who):
    out = cuda.to_device(np.full(8, 9, np.int64))
    _any[1, 8](out, who)
    assert out.copy_to_host().tolist() == [int(who >= 0)] * 8


def test_a_thread_that_raises_ends_the_launch_and_the_next_launch_runs():
    before = threading.active_count()
    out = cuda.to_device(np.zeros(8, np.int64))
    with pytest.raises(ValueError, match=r"tid=\[3, 0, 0\].*thread failed on purpose"):
        _raise_in_one[1, 8](out, 3)
    _raise_in_one[1, 8](out, -1)
    assert out.copy_to_host().tolist() == [1] * 8
    for t in threading.enumerate():  # the first launch's waiting threads were released, not left behind
        if t is not threading.current_thread() and type(t).__name__ == "BlockThread":
            t.join(timeout=10)
    assert threading.active_count() <= before


def test_every_thread_of_a_block_gets_the_same_shared_array_even_when_they_create_it_at_once(monkeypatch):
    # numpy.empty made slow: without one locked lookup-and-create, every thread finds no array and makes its own
    from numba.cuda.simulator.kernelapi import FakeCUDAShared
    shared, real, start, got = FakeCUDAShared(0), np.empty, threading.Barrier(8), []
    monkeypatch.setattr(np, "empty", lambda *args, **kwargs: (time.sleep(0.05), real(*args, **kwargs))[1])

    def thread():
        start.wait()
        got.append(shared.array(16, np.int64))

    threads = [threading.Thread(target=thread) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and all(a is got[0] for a in got)
    assert shared.array(16, np.int32) is not got[0]  # another call site: another array

"""Give numba's CUDA simulator a block barrier that waits instead of polling, and shared arrays every thread of a
block sees.

The simulator runs each block on one OS thread per CUDA thread and implements ``syncthreads`` with a scheduler
loop that polls every thread without pause, holding the GIL while our kernels' threads spin-wait on peers. Here a
block's threads meet at a condition-variable barrier instead, and the block's launcher sleeps until they are done
or one failed. A thread that returned counts as arrived, as in the simulator's own loop; a thread's exception
ends every later ``syncthreads`` of its block and is raised by the launch, as before.

The simulator finds a block's ``cuda.shared.array`` by its call site, looking it up and creating it without a lock:
two threads that both find none each create their own, and the one that fills it (a call's table, thread 0) fills
an array the others never read (a wrong result, seen under load as an all-to-all's garbage bytes). Here the lookup
and the creation are one locked step.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

_shared_lock = threading.Lock()  # one lookup-or-create of a shared array at a time, across every launch


class BlockBarrier:
    """``syncthreads`` of one simulated block of ``nthreads`` threads, and the wait for its end."""

    def __init__(self, nthreads: int):
        self._cond = threading.Condition()
        self._live, self._arrived, self._generation = nthreads, 0, 0
        self.culprit: threading.Thread | None = None  # the first thread that raised

    def wait(self) -> None:
        """Block until every live thread of the block arrived; RuntimeError once a thread of the block failed."""
        with self._cond:
            if self.culprit is not None:
                raise RuntimeError("abort flag set on syncthreads call")
            generation = self._generation
            self._arrived += 1
            if self._arrived == self._live:
                self._release()
            while generation == self._generation and self.culprit is None:
                self._cond.wait()
            if self.culprit is not None:
                raise RuntimeError("abort flag set on syncthreads clear")

    def leave(self, failed: bool) -> None:
        """The calling thread's kernel returned (``failed``: raised); the others stop waiting for it."""
        with self._cond:
            self._live -= 1
            if failed and self.culprit is None:
                self.culprit = threading.current_thread()
            if self._arrived and self._arrived == self._live:
                self._release()
            self._cond.notify_all()

    def finish(self) -> threading.Thread | None:
        """Wait until every thread returned or one failed; the failed thread, if any."""
        with self._cond:
            while self._live and self.culprit is None:
                self._cond.wait()
            return self.culprit

    def _release(self) -> None:
        self._arrived = 0
        self._generation += 1
        self._cond.notify_all()


def _install_shared_arrays() -> None:
    """Replace ``cuda.shared.array`` of the simulator's kernels by one whose lookup and creation are one step."""
    from numba.cuda import types
    from numba.cuda.np import numpy_support
    from numba.cuda.simulator.kernelapi import FakeCUDAShared
    original = FakeCUDAShared.array

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:  # dynamic shared memory (one buffer), or the simulator's refusal
            return original(self, shape, dtype, alignment)
        caller = sys._getframe(1)  # a static array is its call site's, as the simulator has it
        key = (caller.f_code.co_filename, caller.f_lineno)
        with _shared_lock:
            found = self._allocations.get(key)
            if found is None:
                found = self._allocations[key] = np.empty(
                    shape, numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else dtype)
        return found

    FakeCUDAShared.array = array


def install() -> None:
    """Patch the simulator's block scheduler and shared arrays once (call only when the simulator backend is
    active)."""
    from numba.cuda.simulator import kernel as sim_kernel
    manager_cls, thread_cls = sim_kernel.BlockManager, sim_kernel.BlockThread
    if getattr(manager_cls, "_pymscclpp_barrier", False):
        return

    def run(self, grid_point, *args) -> None:
        barrier = self._barrier = BlockBarrier(int(np.prod(self._block_dim)))

        def target() -> None:
            failed = True
            try:
                self._f(*args)
                failed = False
            finally:
                barrier.leave(failed)

        threads = [thread_cls(target, self, grid_point, point, self._debug) for point in np.ndindex(*self._block_dim)]
        for t in threads:
            t.start()
        culprit = barrier.finish()
        if culprit is not None:
            culprit.join()  # its exception is stored once its run() returns
            if culprit.exception is None:  # not an Exception: the simulator's run() let it through
                raise RuntimeError(f"simulated thread {culprit} ended abnormally")
            raise culprit.exception[0].with_traceback(culprit.exception[1])

    def syncthreads(self) -> None:
        self._manager._barrier.wait()

    manager_cls.run = run
    thread_cls.syncthreads = syncthreads
    _install_shared_arrays()
    manager_cls._pymscclpp_barrier = True

"""Make numba's CUDA simulator stop starving the threads it simulates.

The simulator runs each block on one OS thread per CUDA thread and a scheduler loop that polls every
thread's ``is_alive()`` without pause, holding the GIL while our kernels' threads spin-wait on peers.
Pausing the poll for 0.1 ms every 64 calls changes no result and made a 2-rank all-reduce 3.5x faster.
"""

from __future__ import annotations

import itertools
import time

POLLS_PER_PAUSE = 64
PAUSE_S = 1e-4


def install() -> None:
    """Patch the simulator's thread class once (call only when the simulator backend is active)."""
    from numba.cuda.simulator import kernel as sim_kernel
    thread_cls = sim_kernel.BlockThread
    if getattr(thread_cls, "_pymscclpp_paced", False):
        return
    polled = thread_cls.is_alive
    counter = itertools.count(1)

    def is_alive(self) -> bool:
        if next(counter) % POLLS_PER_PAUSE == 0:
            time.sleep(PAUSE_S)  # lets the simulated threads (and the peer ranks' processes) run
        return polled(self)

    thread_cls.is_alive = is_alive
    thread_cls._pymscclpp_paced = True

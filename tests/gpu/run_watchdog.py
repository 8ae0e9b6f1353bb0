"""The watchdog on a real device wait: ``mpirun -np 2 python tests/gpu/run_watchdog.py`` (GPUs or the simulator).

Rank 0 launches a wait rank 1 never signals (budget 1 s) and makes no further call; the watchdog must log
the timeout, naming rank, peer, channel and op, within 3 s of the budget, reading the error area on its
own stream while the kernel still spins; the next check then raises it. Prints PASS/FAIL; exit 1 on failure.
"""

from __future__ import annotations

import logging
import sys
import time

from mpi4py import MPI

import pymscclpp
import pymscclpp.channels.memory_channel as mc
from numba import cuda
from pymscclpp.errors import CommTimeoutError

BUDGET_S = 1.0


@cuda.jit
def lonely_wait(ch):
    if cuda.threadIdx.x == 0:
        mc.wait(ch)


class Records(logging.Handler):
    """Keeps the watchdog's log records."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(record.getMessage())


def main() -> int:
    comm = pymscclpp.Communicator.from_mpi(MPI.COMM_WORLD, timeout_s=BUDGET_S)
    if comm.size != 2:
        raise SystemExit("run with exactly 2 ranks")
    records = Records()
    logging.getLogger("pymscclpp.watchdog").addHandler(records)
    ch = comm.memory_channel(1 - comm.rank, pymscclpp.alloc(64), pymscclpp.alloc(64)).device_handle()
    ok = True
    if comm.rank == 0:
        start = time.monotonic()
        lonely_wait[1, 32](ch)  # asynchronous on GPUs; the simulator returns after the budget
        while not records.texts and time.monotonic() - start < BUDGET_S + 3:
            time.sleep(0.05)
        seen = time.monotonic() - start
        text = records.texts[0] if records.texts else ""
        ok = all(s in text for s in ("rank 0", "peer 1", "channel", "semaphore wait", "timed out"))
        print(f"{'PASS' if ok else 'FAIL'} watchdog logged the timeout {seen:.2f} s after launch "
              f"(budget {BUDGET_S} s): {text or 'nothing'}", flush=True)
        cuda.synchronize()
        try:
            comm.check_device_errors()
            ok = False
            print("FAIL the next check did not raise the timeout", flush=True)
        except CommTimeoutError:
            print("PASS the next check raised it", flush=True)
    ok = bool(MPI.COMM_WORLD.allreduce(int(ok), op=MPI.MIN))
    comm.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

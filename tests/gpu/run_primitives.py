"""Primitive API cases on real GPUs: ``mpirun -np N python tests/gpu/run_primitives.py``.

Runs the same cases as the simulator tests (tests/channel_cases.py) over MPI, with random
sizes, offsets and seeds; prints one line per case and exits non-zero on any failure.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import pymscclpp  # noqa: E402,F401
import channel_cases as cases  # noqa: E402
from gpu.runner import run_cases  # noqa: E402
from pymscclpp.runtime.communicator import Communicator  # noqa: E402


def main() -> int:
    comm = Communicator.from_mpi(MPI.COMM_WORLD)
    rng = np.random.default_rng(1234)
    plan = [(cases.ring_pingpong, dict(iters=1000))]
    for i in range(40):
        nbytes = int(rng.integers(1, cases.ARENA // 4))
        plan.append((cases.put_get_roundtrip, dict(nbytes=nbytes, src_off=int(rng.integers(0, 64)),
                                                   dst_off=int(rng.integers(0, 64)), seed=i,
                                                   nthreads=int(rng.choice([32, 128, 1024])))))
        plan.append((cases.packet_exchange, dict(nbytes=int(rng.integers(1, cases.ARENA // 16)),
                                                 src_off=int(rng.integers(0, 64)),
                                                 out_off=cases.ARENA // 2 + int(rng.integers(0, 64)),
                                                 seed=i, ll8=bool(i % 2), rounds=3,
                                                 nthreads=int(rng.choice([32, 256])))))
    plan.append((cases.wait_times_out, {}))
    failures = run_cases(comm, plan, "gpu primitives", stop_on_failure=True)
    comm.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Soak all_reduce under mpirun on GPUs (or the simulator): many all-reduces, every result checked.

    mpirun -np 8 python tests/fault/soak.py --iters 100000

Sizes from 1 element to 280 KB (past each default algorithm threshold) cycle against the algorithms
(``--algos``; ``auto`` lets the selector choose), so every size meets every algorithm.

Prints one line per ``--report`` iterations and a summary; exits 1 on the first wrong result or error,
naming the iteration, rank, size, dtype and op.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import pymscclpp  # noqa: E402,F401  (chooses the backend before numba.cuda loads)
from numba import cuda  # noqa: E402

from collective_cases import expected_allreduce, rank_data  # noqa: E402
from fault.cases import SOAK_SHAPES  # noqa: E402

# the small shapes, then 16 KB, 80 KB and 280 KB: the default packet / packet_wide / simple ranges of all_reduce
SHAPES = SOAK_SHAPES + [(4096, "float32", "sum"), (20000, "float32", "max"), (70000, "int32", "sum")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--report", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--algos", default="auto,packet,packet_wide,simple,rsag",
                    help="comma-separated; auto: the selector")
    args = ap.parse_args()
    algos = [None if a == "auto" else a for a in args.algos.split(",")]
    comm = pymscclpp.Communicator.from_mpi()
    start = time.monotonic()
    try:
        for i in range(args.iters):
            count, dtype, op = SHAPES[i % len(SHAPES)]
            algo = algos[i // len(SHAPES) % len(algos)]
            seed = args.seed + i
            send = cuda.to_device(rank_data(comm.rank, count, dtype, seed))
            recv = cuda.to_device(np.zeros(count, np.dtype(dtype)))
            comm.all_reduce(send, recv, op=op, algo=algo)
            cuda.synchronize()
            comm.check_device_errors()
            got, want = recv.copy_to_host(), expected_allreduce(comm.size, count, dtype, seed, op)
            if not np.array_equal(got, want):
                bad = int(np.flatnonzero(got != want)[0])
                print(f"rank {comm.rank}: iteration {i} ({count} x {dtype}, {op}, algo {algo}): element {bad} is "
                      f"{got[bad]}, expected {want[bad]}", file=sys.stderr, flush=True)
                return 1
            if comm.rank == 0 and (i + 1) % args.report == 0:
                print(f"{i + 1} all-reduces ok ({time.monotonic() - start:.1f} s)", flush=True)
        comm.barrier()
        if comm.rank == 0:
            print(f"soak: {args.iters} all-reduces on {comm.size} ranks, every result exact, "
                  f"{time.monotonic() - start:.1f} s", flush=True)
        return 0
    except pymscclpp.PymscclppError as exc:
        print(f"rank {comm.rank}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        comm.close()


if __name__ == "__main__":
    sys.exit(main())

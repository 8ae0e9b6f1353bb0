"""The size sweep on the CUDA simulator: numba arrays, host clock, NumPy as the reference (no torch, no NCCL).

It checks that every collective runs and agrees with NumPy at small sizes; simulator times say nothing
about GPU speed.
"""

from __future__ import annotations

import numpy as np

from .timing import host_samples
from .verb_cases import VERBS, elements, expected_of, run_verb

_REDUCE = {"sum": np.sum, "min": np.min, "max": np.max}


def _np_dtype(name: str):
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise SystemExit("bfloat16 on the simulator needs ml_dtypes (pip install ml_dtypes); "
                             "or pass --dtype float32") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def data(dtype, count: int, rank: int, salt: int) -> np.ndarray:
    """Small integers, so every dtype and summation order is exact."""
    rng = np.random.default_rng(1000 * salt + rank)
    low, high = (-8, 9) if dtype.kind == "f" or dtype.name == "bfloat16" else (0, 4)
    return rng.integers(low, high, count).astype(dtype)


def make_sim_case(op: str, comm, dtype, nbytes: int, redop: str, algo: str | None):
    """(count, call, output array, expected NumPy result, bus factor) of collective ``op`` at ``nbytes``."""
    from numba import cuda
    n, rank = comm.size, comm.rank
    count = max(n, nbytes // dtype.itemsize) // n * n
    part = count // n
    kw = {} if algo is None else {"algo": algo}
    every = [data(dtype, count, r, 1) for r in range(n)]
    x = cuda.to_device(every[rank][:part] if op == "all_gather" else every[rank])
    if op == "all_reduce":
        out = cuda.device_array(count, dtype)
        want = _REDUCE[redop](np.stack(every).astype(np.float64), axis=0).astype(dtype)
        return count, lambda: comm.all_reduce(x, out, op=redop, **kw), out, want, 2 * (n - 1) / n
    if op == "all_gather":
        out = cuda.device_array(count, dtype)
        want = np.concatenate([e[:part] for e in every])
        return count, lambda: comm.all_gather(x, out, **kw), out, want, (n - 1) / n
    if op == "reduce_scatter":
        out = cuda.device_array(part, dtype)
        want = _REDUCE[redop](np.stack(every).astype(np.float64), axis=0).astype(dtype)[rank * part:(rank + 1) * part]
        return count, lambda: comm.reduce_scatter(x, out, op=redop, **kw), out, want, (n - 1) / n
    if op == "all_to_all":
        out = cuda.device_array(count, dtype)
        want = np.concatenate([e[rank * part:(rank + 1) * part] for e in every])
        return count, lambda: comm.all_to_all(x, out, **kw), out, want, (n - 1) / n
    if op == "broadcast":
        out = cuda.device_array(count, dtype)
        return count, lambda: comm.broadcast(x, out, 0, **kw), out, every[0], 1.0
    if op in VERBS:
        return make_sim_verb_case(op, comm, dtype, nbytes, redop, algo)
    raise ValueError(f"unknown collective {op!r}")


def make_sim_verb_case(op: str, comm, dtype, nbytes: int, redop: str, algo: str | None):
    """(count, call, output array, expected NumPy result, bus factor) of verb ``op`` at ``nbytes`` (simulator)."""
    from numba import cuda
    n, rank = comm.size, comm.rank
    count = max(n, nbytes // dtype.itemsize) // n * n
    part = count // n
    s_n, r_n = elements(op, count, n)
    inputs = [data(dtype, s_n, p, 10 + VERBS.index(op)) for p in range(n)]
    x, out = cuda.to_device(inputs[rank]), cuda.to_device(np.zeros(r_n, dtype))
    kw = {} if algo is None or op == "send_recv" else {"algo": algo}
    wide = [a.astype(np.float64) for a in inputs]
    fold = {"sum": np.add, "min": np.minimum, "max": np.maximum}[redop]
    want = expected_of(op, wide, rank, part, np.zeros(r_n), fold, np.concatenate).astype(dtype)
    bus = {"send_recv": 1.0, "reduce": 1.0}.get(op, (n - 1) / n)
    return count, lambda: run_verb(comm, op, x, out, part, redop, **kw), out, want, bus


def run_sim_sweep(args) -> list[dict] | None:
    """Run the sweep on the simulator; rank 0 prints the table and gets the rows (others get None)."""
    from mpi4py import MPI

    from .. import Communicator
    from .sweep import HEADER, print_row, result_row, served_by, slowest_rank
    world = MPI.COMM_WORLD
    comm = Communicator.from_mpi(world)
    dtype = _np_dtype(args.dtype)
    if comm.rank == 0:
        print(f"# {args.op} on the CUDA simulator, {comm.size} ranks, eager, NumPy-checked; no NCCL, and times "
              f"are not GPU times (median of {args.reps} x {args.iters} calls)", flush=True)
        print(HEADER, flush=True)
    rows = []
    size = args.minbytes
    while size <= args.maxbytes:
        count, call, out, want, bus = make_sim_case(args.op, comm, dtype, size, args.redop, args.algo)
        for _ in range(args.warmup):
            call()
        call()
        wrong = world.allreduce(int((out.copy_to_host() != want).sum()))

        def calls(call=call):
            for _ in range(args.iters):
                call()
        samples = [t / args.iters for t in host_samples(calls, args.reps, world.Barrier)]
        comm.check_device_errors()
        row = result_row(args, count * dtype.itemsize, count, slowest_rank(world, samples), float("nan"), wrong, bus,
                         served_by(comm, args.op))
        rows.append(row)
        if comm.rank == 0:
            print_row(row, True)
        size *= args.stepfactor
    comm.close()
    return rows if comm.rank == 0 else None

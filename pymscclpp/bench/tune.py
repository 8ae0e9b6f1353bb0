"""The tuner: time every registered algorithm (kernels and plans) per collective and size, on staged calls and on
calls that run zero-copy, and write the selection table.

``mpirun -np 2 python -m pymscclpp.bench.tune --out tuning.json`` on the target machine, then
``export PYMSCCLPP_TUNING_FILE=tuning.json``. CUDA-graph timing, median of ``--reps`` replays, the slowest rank's
(every rank decides alike). Each collective gets two row lists: its staged calls' (captured with
``PYMSCCLPP_GRAPH_ZERO_COPY=0``, so nothing maps peers' buffers) and, where an algorithm has a zero-copy kernel, its
zero-copy calls' (``collective@zero_copy``: the buffers registered first), whose candidates are the algorithms that
run such a call zero-copy and the staged winner, which serves it where a staged kernel wins. An algorithm that
serves zero-copy calls only (the all-to-all with counts' ``read``) cannot serve a staged call and so appears in
zero-copy rows only. The file holds a table per rank count: a run at another rank count adds its own and keeps the
others. ``--programs`` also times the library's DSL programs with every protocol, instance count and chunk factor
(``algos.library_plans``); a winner is written by its name (``plan:PROGRAM/PROTOCOL/iN/cN``), which any process
rebuilds from the library.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Callable

from .. import config
from ..algos.collection import ZERO_COPY
from ..algos.library_plans import search_space
from ..errors import InvalidUsageError
from .__main__ import parse_size
from .cases import make_case
from .sweep import setup, slowest
from ..runtime.collectives import COLLECTIVES
from .timing import capture, time_graph

# what the tuner times: send/recv names no algorithm per call (the exchange serves every pair)
TUNED = COLLECTIVES + ("reduce", "gather", "scatter", "all_to_allv")

Measure = Callable[[str, int, bool], "float | None"]
"""(algorithm name, bytes, buffers registered) -> microseconds per call, or None where it cannot serve the call
(alike on every rank: the algorithm says so before any launch)."""
Agree = Callable[[dict], dict]
"""This rank's times by name -> the times every rank decides by (the slowest rank's, ``sweep.slowest``): each rank's
own would part the ranks' winners, and with them the calls they time next."""


def table_from_winners(winners: list[tuple[int, str]]) -> list[list]:
    """Selection rows ``[[max_bytes, name], ...]`` from ``(size, best algorithm)`` in ascending size:
    consecutive sizes with one winner merge; the last row covers every larger size."""
    rows: list[list] = []
    for size, name in winners:
        if rows and rows[-1][1] == name:
            rows[-1][0] = size
        else:
            rows.append([size, name])
    if rows:
        rows[-1][0] = float("inf")
    return rows


def slowest_times(world) -> Agree:
    """``Agree`` over the MPI communicator ``world``: each name's time, the slowest rank's."""
    return lambda times: {name: slowest(world, t) for name, t in times.items()}


def tune_collective(sizes: list[int], names: list[str], measure: Measure, runs_zero_copy: Callable[[str], bool],
                    report: Callable[[int, dict, dict], None] = lambda size, staged, zero_copy: None,
                    agree: Agree = lambda times: times) -> dict:
    """One collective's rows: ``{"staged": rows, "zero_copy": rows or None}``, the latter None when no algorithm
    has a zero-copy kernel (``runs_zero_copy``). At each size every name is timed staged; then, buffers registered,
    those with one and the staged winner (by the ``agree``d times: every rank times the same calls and writes the
    same rows). ``report(size, staged times, zero-copy times)`` after each size."""
    zero_copy_names = [n for n in names if runs_zero_copy(n)]
    staged, zero_copy = [], []
    for size in sizes:
        staged_times = agree({n: t for n in names if (t := measure(n, size, False)) is not None})
        best = min(staged_times, key=staged_times.get) if staged_times else None
        if best is not None:
            staged.append((size, best))
        candidates = [n for n in names if n == best or n in zero_copy_names] if zero_copy_names else []
        zero_copy_times = agree({n: t for n in candidates if (t := measure(n, size, True)) is not None})
        if zero_copy_times:
            zero_copy.append((size, min(zero_copy_times, key=zero_copy_times.get)))
        report(size, staged_times, zero_copy_times)
    return {"staged": table_from_winners(staged),
            "zero_copy": table_from_winners(zero_copy) if zero_copy_names else None}


def write_table(path: str, nranks: int, table: dict) -> None:
    """Store ``table`` as the one for ``nranks`` ranks in the tuning file at ``path``, keeping its other rank
    counts' tables (a file of the older flat form is replaced)."""
    tables = {}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        if old and all(str(key).isdigit() for key in old):
            tables = old
    tables[str(nranks)] = table
    with open(path, "w") as f:
        json.dump(tables, f, indent=1)


def _times(times: dict) -> str:
    return " ".join(f"{n}={t:.2f}us" for n, t in times.items()) + \
        (f" -> {min(times, key=times.get)}" if times else " (none served)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pymscclpp.bench.tune", description=__doc__)
    ap.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("1K"))
    ap.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("256M"))
    ap.add_argument("-f", "--stepfactor", type=int, default=4)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--ops", default=",".join(TUNED), help=f"collectives to tune, comma-separated (default: {TUNED})")
    ap.add_argument("--out", required=True)
    ap.add_argument("--programs", action="store_true", help="also search the library's DSL programs' parameters")
    args = ap.parse_args(argv)
    ops = args.ops.split(",")
    unknown = [op for op in ops if op not in TUNED]
    if unknown:
        ap.error(f"--ops: cannot tune {unknown}: choose from {TUNED}")
    config.set_value("PYMSCCLPP_GRAPH_ZERO_COPY", "0")  # a captured call stages unless its buffers are registered
    world, comm, torch, _ = setup(nccl=False)
    dtype = getattr(torch, args.dtype)
    sizes = []
    size = args.minbytes
    while size <= args.maxbytes:
        sizes.append(size)
        size *= args.stepfactor
    table = {}
    for op in ops:
        names = comm.algorithms.names(op)
        if args.programs:
            names += [spec.name for spec in search_space(comm.size, op)]
        if not names:
            continue
        skipped: set[tuple[str, bool]] = set()

        def measure(name: str, nbytes: int, registered: bool, op=op, skipped=skipped) -> float | None:
            case = make_case(op, comm, None, torch, dtype, nbytes, "sum", name)
            if registered and not case.buffers:  # a case that maps nothing has no zero-copy call to time
                return None
            mapped = case.buffers if registered else ()
            for buf in mapped:
                comm.register_buffer(buf)
            try:
                try:  # every rank alike: an algorithm that cannot serve the call says so before any launch
                    case.ours()
                except InvalidUsageError as exc:
                    if comm.rank == 0 and (name, registered) not in skipped:
                        print(f"{op} {name}: cannot serve {'zero-copy' if registered else 'staged'} calls from "
                              f"{nbytes} bytes ({exc})", flush=True)
                    skipped.add((name, registered))
                    return None
                torch.cuda.synchronize()
                return time_graph(capture(case.ours, args.iters), args.iters, args.reps, world.Barrier)
            finally:
                torch.cuda.synchronize()
                for buf in mapped:
                    comm.deregister_buffer(buf)

        def report(nbytes: int, staged: dict, zero_copy: dict, op=op) -> None:
            if comm.rank == 0:
                print(f"{op} {nbytes:>12} staged: {_times(staged)}" + (f" | zero-copy: {_times(zero_copy)}"
                                                                       if zero_copy else ""), flush=True)

        has_zero_copy = lambda name, op=op: comm.algorithms.peek(op, name).zero_copy_kernel is not None  # noqa: E731
        rows = tune_collective(sizes, names, measure, has_zero_copy, report, slowest_times(world))
        table[op] = rows["staged"]
        if rows["zero_copy"] is not None:
            table[op + ZERO_COPY] = rows["zero_copy"]
    if comm.rank == 0:
        write_table(args.out, comm.size, table)
        print(f"selection table for {comm.size} ranks written to {args.out}; use it with "
              f"PYMSCCLPP_TUNING_FILE={args.out}", flush=True)
    comm.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

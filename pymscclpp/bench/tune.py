"""The tuner: time every registered algorithm (kernels and plans) per collective and size, write the selection
table.

``mpirun -np 2 python -m pymscclpp.bench.tune --out tuning.json`` on the target machine, then
``export PYMSCCLPP_TUNING_FILE=tuning.json``. CUDA-graph timing, median of ``--reps`` replays. The file holds a
table per rank count: a run at another rank count adds its own and keeps the others. ``--programs`` also times the
library's DSL programs with every protocol, instance count and chunk factor (``algos.library_plans``); a winner
is written by its name (``plan:PROGRAM/PROTOCOL/iN/cN``), which any process rebuilds from the library.
"""

from __future__ import annotations

import argparse
import json
import os

from ..algos.library_plans import search_space
from ..errors import InvalidUsageError
from .__main__ import parse_size
from .cases import make_case
from .sweep import setup
from ..runtime.collectives import COLLECTIVES
from .timing import capture, time_graph


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pymscclpp.bench.tune", description=__doc__)
    ap.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("1K"))
    ap.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("256M"))
    ap.add_argument("-f", "--stepfactor", type=int, default=4)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", required=True)
    ap.add_argument("--programs", action="store_true", help="also search the library's DSL programs' parameters")
    args = ap.parse_args(argv)
    world, comm, torch, _ = setup(nccl=False)
    dtype = getattr(torch, args.dtype)
    table = {}
    for op in COLLECTIVES:
        names = comm.algorithms.names(op)
        if args.programs:
            names += [spec.name for spec in search_space(comm.size, op)]
        if not names:
            continue
        winners, skipped = [], set()
        size = args.minbytes
        while size <= args.maxbytes:
            times = {}
            for name in names:
                case = make_case(op, comm, None, torch, dtype, size, "sum", name)
                try:  # every rank alike: an algorithm that cannot serve the call says so before any launch
                    case.ours()
                except InvalidUsageError as exc:
                    if comm.rank == 0 and name not in skipped:
                        print(f"{op} {name}: skipped from {size} bytes ({exc})", flush=True)
                    skipped.add(name)
                    continue
                torch.cuda.synchronize()
                times[name] = time_graph(capture(case.ours, args.iters), args.iters, args.reps, world.Barrier)
            best = min(times, key=times.get)
            winners.append((size, best))
            if comm.rank == 0:
                print(f"{op} {size:>12} " + " ".join(f"{n}={t:.2f}us" for n, t in times.items()) + f" -> {best}",
                      flush=True)
            size *= args.stepfactor
        table[op] = table_from_winners(winners)
    if comm.rank == 0:
        write_table(args.out, comm.size, table)
        print(f"selection table for {comm.size} ranks written to {args.out}; use it with "
              f"PYMSCCLPP_TUNING_FILE={args.out}")
    comm.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

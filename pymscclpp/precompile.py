"""``python -m pymscclpp.precompile``: compile, for this machine's GPU, every kernel a Communicator of the given
rank counts on one host compiles (``algos.entries.entry_kernels``) into the kernel cache, so that a server's
first calls load them from disk. Prints a line per kernel (rank count, compile seconds or ``cached``) and a total.

One process per entry kernel compiles its rank counts one after another (numba's cache index of a kernel is
not safe to write from two processes at once; the kept cubins are, being replaced atomically).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Iterator, NamedTuple

from .runtime.backend import BACKEND


class Built(NamedTuple):
    """One kernel brought into the cache: its name, rank count, seconds taken and whether it was there already."""

    kernel: str
    nranks: int
    seconds: float
    cached: bool

    def line(self) -> str:
        """What the command prints for it."""
        return f"{self.kernel:<18} {self.nranks:>3} ranks  " + ("cached" if self.cached else f"{self.seconds:7.2f} s")


def build(kernel: str, ranks: list[int]) -> list[Built]:
    """Compile (or find in the cache) entry kernel ``kernel`` for each rank count of ``ranks`` on this GPU."""
    from .algos.entries import entry_kernels
    from .runtime import kernel_cache
    out = []
    for nranks in ranks:
        dispatcher, argtypes = entry_kernels(nranks)[kernel]
        _, seconds, cached = kernel_cache.function_for(dispatcher, argtypes)
        out.append(Built(kernel, nranks, seconds, cached))
    return out


def batches(names: list[str], ranks: list[int], jobs: int) -> Iterator[list[Built]]:
    """``build`` of each entry kernel of ``names`` for ``ranks``, as each is done, in ``jobs`` processes (1: in
    this one)."""
    if jobs == 1:
        yield from (build(name, ranks) for name in names)
        return
    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
        for future in as_completed([pool.submit(build, name, ranks) for name in names]):
            yield future.result()


def _jobs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of processes, 1 or more")
    return int(text)


def _ranks(text: str) -> list[int]:
    try:
        ranks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected rank counts such as 2,4,8") from None
    if not ranks or ranks[0] < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: rank counts start at 2 (one rank compiles no kernel)")
    return ranks


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m pymscclpp.precompile``."""
    p = argparse.ArgumentParser(prog="python -m pymscclpp.precompile",
                                description="Compile every kernel a Communicator on this host compiles, for this "
                                "GPU, into the kernel cache (PYMSCCLPP_CACHE_DIR) ahead of a deployment.")
    p.add_argument("--ranks", type=_ranks, help="communicator sizes to compile for, e.g. 2,4,8 (default: 2 to "
                   "the number of GPUs visible); dtypes, ops, grids and buffers share one kernel")
    p.add_argument("--jobs", type=_jobs, default=len(os.sched_getaffinity(0)),
                   help="compiling processes (default: the CPUs usable; 1 compiles in this process)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command; its exit status."""
    args = parser().parse_args(argv)
    if BACKEND != "gpu":
        print(f"pymscclpp.precompile: the {BACKEND} backend runs no compiled kernels (no GPU): nothing to compile")
        return 0
    from numba import cuda
    from .algos.entries import entry_kernels
    from .runtime import kernel_cache
    major, minor = cuda.get_current_device().compute_capability
    ranks = args.ranks or list(range(2, max(2, len(cuda.gpus)) + 1))
    names = list(entry_kernels(2))
    jobs = min(args.jobs, len(names))
    start = time.perf_counter()
    done: list[Built] = []
    for batch in batches(names, ranks, jobs):
        for row in batch:
            print(row.line(), flush=True)
            done.append(row)
    compiled = [row for row in done if not row.cached]
    print(f"total: {len(done)} kernels for sm_{major}{minor}, {len(compiled)} compiled "
          f"({sum(row.seconds for row in compiled):.1f} s of compiling), {len(done) - len(compiled)} cached; "
          f"{time.perf_counter() - start:.1f} s with {jobs} job(s), in {kernel_cache.root()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

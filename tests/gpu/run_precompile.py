"""Precompiling on a GPU: ``python tests/gpu/run_precompile.py [--ranks 2,4,8] [--jobs N]`` (no MPI).

In a fresh kernel cache, ``python -m pymscclpp.precompile`` compiles every entry kernel for each rank count
(its output is the cold compile time per kernel); a second run finds all of them cached; then the one-shot
algorithms of a 2-rank communicator (both ranks on the first GPU, set up but not launched) declare the same
argument types as their values have and load every kernel from that cache. PASS/FAIL lines; exit 1 on failure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rankpool import RankPool  # noqa: E402


def _launches(comm, state) -> list:
    """(kernel, argument types, loaded from disk, seconds) of every launch of every one-shot and two-step
    algorithm (the zero-copy all-reduce's after one call on a registered buffer)."""
    import torch
    from pymscclpp.algos.algorithm import COLLECTIVES
    from pymscclpp.algos.oneshot import OneShot
    buf = torch.zeros(16, device="cuda")
    comm.register_buffer(buf)
    comm.all_reduce(buf, algo="rsag")
    torch.cuda.synchronize()
    out = []
    for collective in COLLECTIVES:
        for name in comm.algorithms.names(collective):
            algo = comm.algorithms.get(collective, name)
            if isinstance(algo, OneShot):
                out += [(launch.kernel.py_func.__name__, repr(launch.argtypes), launch.disk_cache_hit,
                         launch.compile_s) for launch in algo.kernel_launches()]
    comm.deregister_buffer(buf)
    return out


def _precompile(args: list[str]) -> list[str]:
    """The kernel lines of one run of the command (its whole output printed)."""
    done = subprocess.run([sys.executable, "-m", "pymscclpp.precompile", *args], capture_output=True,
                          text=True, timeout=550)
    print(done.stdout + done.stderr[-3000:], end="", flush=True)
    if done.returncode != 0:
        raise SystemExit(f"FAIL precompile {args}: exit {done.returncode}")
    return [line for line in done.stdout.splitlines() if " ranks " in line]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", default="2,4,8")
    p.add_argument("--jobs", default=str(len(os.sched_getaffinity(0))))
    a = p.parse_args()
    os.environ.pop("NUMBA_CACHE_DIR", None)  # before pymscclpp is imported: it goes inside the fresh cache
    os.environ["PYMSCCLPP_CACHE_DIR"] = tempfile.mkdtemp(prefix="precompile-")
    from pymscclpp.algos.entries import entry_kernels
    expected = len(entry_kernels(2)) * len(a.ranks.split(","))
    checks = {}
    first = _precompile(["--ranks", a.ranks, "--jobs", a.jobs])
    checks["first run compiles every kernel"] = len(first) == expected and not any(x.endswith("cached") for x in first)
    second = _precompile(["--ranks", a.ranks])
    checks["second run finds every kernel cached"] = len(second) == expected and all(x.endswith("cached")
                                                                                      for x in second)
    pool = RankPool(2)
    try:
        ranks = pool.run(_launches)  # a launch whose values differ from the declared types raises here
    finally:
        pool.close()
    for row in ranks[0]:
        print("rank 0 launch", row[0], "from disk" if row[2] else "COMPILED", f"{row[3]:.3f} s")
    listed = {(name, repr(types)) for name, (_, types) in entry_kernels(2).items()}
    checks["a communicator's launches are the precompiled kernels"] = all(
        {row[:2] for row in r} == listed for r in ranks)
    checks["a communicator loads every kernel from the cache"] = all(row[2] for r in ranks for row in r)
    for what, ok in checks.items():
        print("PASS" if ok else "FAIL", what, flush=True)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

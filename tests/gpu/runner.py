"""Run a list of collective test cases on every MPI rank, one PASS/FAIL line each (with the slowest rank's
seconds: where a runner's time goes), and count failures."""

from __future__ import annotations

import time
import traceback

from mpi4py import MPI


def run_cases(comm, plan: list, label: str, state: dict | None = None, stop_on_failure: bool = False) -> int:
    """Run each ``(fn, params)`` of ``plan`` as ``fn(comm, state, **params)`` on every rank; the failure count.

    A case fails when it fails on any rank (tracebacks are printed by the rank that saw them)."""
    state = {} if state is None else state
    failures = 0
    for fn, params in plan:
        start = time.monotonic()
        try:
            fn(comm, state, **params)
            ok = True
        except Exception:
            ok = False
            traceback.print_exc()
        all_ok = MPI.COMM_WORLD.allreduce(int(ok), op=MPI.MIN)
        seconds = MPI.COMM_WORLD.allreduce(time.monotonic() - start, op=MPI.MAX)
        failures += 0 if all_ok else 1
        if comm.rank == 0:
            print(f"{'PASS' if all_ok else 'FAIL'} {fn.__name__} {params} ({seconds:.2f} s)", flush=True)
        if failures and stop_on_failure:
            break
    if comm.rank == 0:
        print(f"{label}: {len(plan)} cases, {failures} failed", flush=True)
    return failures

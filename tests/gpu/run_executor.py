"""Executor cases across ranks under MPI: ``mpirun -np N python tests/gpu/run_executor.py [--quick]``.

Every library DSL program (and the feature programs of tests/executor/programs.py) runs through the executor
with random sizes (odd element counts included) and dtypes, and each output is compared with the reference
interpreter's; on GPUs also with torch tensors and through a CUDA graph captured once and replayed. Works on
the simulator too (``--quick`` keeps it small; CI runs it that way). Prints one line per case, then kernel
compile times; exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import pymscclpp  # noqa: E402
from executor import cases, oracle  # noqa: E402
from executor.programs import FEATURE_PROGRAMS  # noqa: E402
from pymscclpp.executor import ExecutionPlan  # noqa: E402
from pymscclpp.language.programs import PROGRAMS  # noqa: E402
from pymscclpp.runtime.backend import IS_SIM  # noqa: E402
from pymscclpp.runtime.communicator import Communicator  # noqa: E402

LIBRARY = [("allreduce_allpairs", {}), ("allreduce_allpairs", {"protocol": "packet"}), ("allreduce_rsag", {}),
           ("allgather", {}), ("allgather", {"protocol": "packet"}), ("reducescatter", {}),
           ("reducescatter", {"protocol": "packet"}), ("alltoall", {})]
DTYPES = ["float16", "bfloat16", "float32", "int32"]


def plan_cases(n: int, quick: bool, rng) -> list[dict]:
    """The cases to run: (program, kwargs, dtype, count, buffer kind, same buffer, graph)."""
    kinds = ["plain", "registered"] if IS_SIM else ["plain", "torch"]
    out = []
    for name, kwargs in LIBRARY:
        for variant in ([{}] if quick else [{}, {"instances": 4}, {"inplace": True}, {"chunk_factor": 2}]):
            if "inplace" in variant and name == "alltoall":
                continue
            for _ in range(1 if quick else 3):
                hi = 200 if quick else 1 << 17
                dtype, kind = str(rng.choice(DTYPES)), str(rng.choice(kinds))
                if dtype == "bfloat16" and not IS_SIM:
                    kind = "torch"  # numba device arrays cannot hold bfloat16 on GPUs; torch tensors can
                out.append(dict(program=name, kwargs={**kwargs, **variant}, dtype=dtype,
                                count=int(rng.integers(1, hi)), kind=kind, same_buffer=False, graph=False))
    for name in FEATURE_PROGRAMS:
        out.append(dict(program=name, kwargs={}, dtype="float32", count=int(rng.integers(1, 300)), kind=kinds[0],
                        same_buffer=False, graph=False))
    if not IS_SIM:
        for name, kwargs in LIBRARY:  # captured once, replayed for each input
            out.append(dict(program=name, kwargs=kwargs, dtype="float32", count=(1 << 16) + 5 * (name != "alltoall"),
                            kind="torch", same_buffer=False, graph=True))
        out.append(dict(program="allreduce_allpairs", kwargs={"inplace": True, "instances": 8}, dtype="bfloat16",
                        count=1 << 20, kind="torch", same_buffer=True, graph=True))
    return out


def run_one(comm, state: dict, case: dict) -> str:
    programs = {**PROGRAMS, **FEATURE_PROGRAMS}
    xplan = ExecutionPlan.from_plan(programs[case["program"]](comm.size, **case["kwargs"]))
    executions = 3 if case["graph"] else 2
    inputs = oracle.make_inputs(xplan, case["dtype"], case["count"], 1000 + comm.size, executions)
    expected = [out for k in range(0, executions, 2)  # the interpreter runs two back-to-back executions at a time
                for out in oracle.expected_outputs(xplan, inputs[k:k + 2], case["count"], "sum")]
    direct = cases.check_executions(comm, state, xplan, inputs, expected, "sum", case["kind"], case["same_buffer"],
                                    case["graph"])
    return "direct" if direct else "staged"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few small cases (the simulator CI run)")
    args = parser.parse_args()
    comm = Communicator.from_mpi(MPI.COMM_WORLD)
    state: dict = {}
    failures = 0
    todo = plan_cases(comm.size, args.quick, np.random.default_rng(4321))
    for case in todo:
        try:
            how, ok = run_one(comm, state, case), True
        except Exception:
            how, ok = "", False
            traceback.print_exc()
        all_ok = MPI.COMM_WORLD.allreduce(int(ok), op=MPI.MIN)
        failures += 0 if all_ok else 1
        if comm.rank == 0:
            print(f"{'PASS' if all_ok else 'FAIL'} {case} {how}", flush=True)
    if comm.rank == 0:
        for s in state["executor"].stats:
            print(f"kernel {s.plan} size class {s.size_class}: source {s.source_s * 1e3:.1f} ms, compile "
                  f"{s.compile_s * 1e3:.1f} ms{' (numba disk cache)' if s.disk_cache_hit else ''}", flush=True)
        print(f"executor ({pymscclpp.BACKEND}, {comm.size} ranks): {len(todo)} cases, {failures} failed", flush=True)
    comm.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

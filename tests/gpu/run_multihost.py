"""Collectives across faked hosts under MPI: ``mpirun -np N python tests/gpu/run_multihost.py --layout 2,2``.

``--layout`` gives the ranks of each host (``2,2``: ranks 0-1 on host 0, 2-3 on host 1; ``2,2,1`` is uneven);
each rank sets PYMSCCLPP_HOST_ID from it before the communicator starts, so ports between hosts use Ethernet
(loopback). Every collective of ``plan_for`` (both protocols where offered) runs through the executor for
several sizes, each output compared with the reference interpreter's; on GPUs also through a CUDA graph
captured once and replayed. Works on the simulator too (``--quick``). Exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def _hosts(layout: str) -> list[int]:
    return [h for h, count in enumerate(int(x) for x in layout.split(",")) for _ in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layout", default="2,2", help="ranks per host, comma-separated")
    parser.add_argument("--quick", action="store_true", help="small sizes only (the simulator)")
    args = parser.parse_args()
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
    os.environ.setdefault("PYMSCCLPP_HOST_ID", f"host{_hosts(args.layout)[rank]}")

    from mpi4py import MPI
    import pymscclpp  # noqa: F401  (chooses the backend first)
    from executor import cases, oracle
    from gpu.runner import run_cases
    from pymscclpp.executor import ExecutionPlan
    from pymscclpp.language.programs.hierarchical import COLLECTIVES, plan_for
    from pymscclpp.runtime.backend import IS_SIM
    from pymscclpp.runtime.communicator import Communicator

    comm = Communicator.from_mpi(MPI.COMM_WORLD)
    if len(_hosts(args.layout)) != comm.size:
        raise SystemExit(f"--layout {args.layout} has {len(_hosts(args.layout))} ranks, mpirun started {comm.size}")

    def one(comm, state, collective: str, protocol: str, count: int, graph: bool) -> None:
        xplan = ExecutionPlan.from_plan(plan_for(collective, comm.host_ids, protocol))
        executions = 3 if graph else 2
        inputs = oracle.make_inputs(xplan, "float32", count, 7 + count, executions)
        expected = [out for k in range(0, executions, 2)
                    for out in oracle.expected_outputs(xplan, inputs[k:k + 2], count, "sum")]
        cases.check_executions(comm, state, xplan, inputs, expected, "sum", "plain" if IS_SIM else "torch", False,
                               graph)

    counts = [5, 300] if args.quick else [5, 3000, 1 << 16, (1 << 20) + 3]
    plan = []
    for collective in COLLECTIVES:
        for protocol in ("simple", "packet"):
            if protocol == "packet" and collective in ("alltoall", "broadcast"):
                continue
            for count in counts:
                if protocol == "packet" and count > 1 << 16:
                    continue
                plan.append((one, dict(collective=collective, protocol=protocol, count=count, graph=False)))
            if not IS_SIM:
                plan.append((one, dict(collective=collective, protocol=protocol, count=1 << 14, graph=True)))
    state: dict = {}
    failures = run_cases(comm, plan, f"multihost {args.layout}", state)
    if "executor" in state:
        state["executor"].close()  # its proxy's links end in order
    comm.barrier()
    comm.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Collective API cases on real GPUs: ``mpirun -np N python tests/gpu/run_collectives.py``."""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import pymscclpp  # noqa: E402
import collective_cases as cases  # noqa: E402
import verb_cases  # noqa: E402
from gpu.runner import run_cases  # noqa: E402


def _other_collectives(rng, size: int) -> list:
    """all_gather, reduce_scatter, all_to_all, broadcast: both algorithms, repeats, several rounds, bad input."""
    fns = {"all_gather": cases.all_gather, "reduce_scatter": cases.reduce_scatter, "all_to_all": cases.all_to_all,
           "broadcast": cases.broadcast}
    plan = []
    two_step = {"all_gather": "read", "broadcast": "scatter_gather", "reduce_scatter": "read"}
    for name, fn in fns.items():
        extra = lambda: {"reduce_scatter": {"op": str(rng.choice(["sum", "min", "max"]))},  # noqa: E731
                         "broadcast": {"root": int(rng.integers(size))}}.get(name, {})
        algos = ["packet", "simple", *([two_step[name]] if name in two_step else [])]
        for i in range(6 * len(algos)):
            algo = algos[i % len(algos)]
            hi = (1 << 18) // size if algo == "packet" else (1 << 23)  # bytes per slot
            plan.append((fn, dict(count=int(rng.integers(1, hi // 4)), seed=i, algo=algo, repeat=3,
                                  dtype=str(rng.choice(["float32", "float16", "int32", "uint8"])),
                                  inplace=bool(i % 3 == 0), **extra())))
        for mb, inplace in [(70, False), (33, True)]:  # several 32 MB rounds per slot, a short last one
            for algo in algos[1:]:
                plan.append((fn, dict(count=(mb << 20) // 4 + 3, dtype="float32", seed=mb, inplace=inplace,
                                      algo=algo, repeat=2, **extra())))
        plan.append((fn, dict(count=5000, dtype="uint8", seed=1, inplace=False, repeat=4, **extra())))  # selector
    for i, count in enumerate([1, 4097, 1 << 17, (1 << 18) - 5]):  # the two-step packet broadcast, to 1 MB
        plan.append((cases.broadcast, dict(count=count, dtype="float32", seed=i, inplace=i % 2 == 1, repeat=3,
                                           algo="scatter_gather_packet", root=(3 * i) % size)))
    bad = [(c, case) for c in fns for case in ["size", "dtype", "host", "strided", "overlap"]]
    bad += [("reduce_scatter", "slots"), ("all_to_all", "slots"), ("reduce_scatter", "op"), ("broadcast", "root")]
    plan += [(cases.bad_collective_input, dict(collective=c, case=case)) for c, case in bad]
    return plan


def _verbs(rng, size: int) -> list:
    """send/recv rings, uneven all-to-all, reduce/gather/scatter at every root, avg on every reducing algorithm,
    the packet and two-step reduces, and the zero-copy reduce-scatter and packet two-shot all-reduce."""
    plan = []
    for i, count in enumerate([1, 1000, 1 << 18, (1 << 22) + 5]):
        plan.append((verb_cases.ring, dict(count=count, dtype=["float32", "float16"][i % 2], repeat=3)))
    for i in range(6):
        hi = [8, 4096, 1 << 20][i % 3]
        counts = [[int(rng.integers(0, hi)) for _ in range(size)] for _ in range(size)]
        plan.append((verb_cases.all_to_allv, dict(counts=counts, dtype=["float32", "int32", "uint8"][i % 3], seed=i)))
    for verb in ("reduce", "gather", "scatter"):
        for root in range(size):
            plan.append((verb_cases.rooted, dict(verb=verb, count=int(rng.integers(1, 1 << 20)), root=root,
                                                 dtype="float32", seed=root)))
    for algo in ("packet", "simple", "rsag", "rsag_packet"):
        plan.append((verb_cases.avg, dict(verb="all_reduce", count=4099, dtype="float32", algo=algo)))
    for algo in ("packet", "simple", "read"):
        plan.append((verb_cases.avg, dict(verb="reduce_scatter", count=1027, dtype="float16", algo=algo)))
    plan.append((verb_cases.avg, dict(verb="reduce", count=5000, dtype="float32")))
    for algo, count, op in (("packet_one_block", 511, "min"), ("packet", 1000, "sum"), ("packet", 4099, "max"),
                            ("packet_wide", 30001, "sum")):
        for root in (0, size - 1):  # the all-reduce's packets: only the root's output written
            plan.append((verb_cases.rooted, dict(verb="reduce", count=count, root=root, dtype="float16", op=op,
                                                 seed=count, algo=algo, others_recv=True)))
    for count, inplace, register in [((1 << 18) + 7, True, True), ((1 << 25) + 5, False, True),
                                     ((1 << 25) + 5, True, False)]:  # staged and zero-copy; 128 MB: 2 rounds
        plan.append((verb_cases.rooted, dict(verb="reduce", count=count, root=size - 1, dtype="float32", seed=count,
                                             inplace=inplace, register=register, algo="rsag")))
    plan.append((verb_cases.mismatched_counts, {}))
    for count, dtype in [(1000, "float32"), ((1 << 22) + 5, "float16")]:  # send/recv read from registered buffers
        plan.append((verb_cases.registered_ring, dict(count=count, dtype=dtype)))
    plan.append((verb_cases.registered_send_to_receivers, dict(count=1 << 20, dtype="uint8", receivers=size - 1)))
    if size >= 3:
        plan.append((verb_cases.mixed_ring, dict(count=(1 << 20) + 3, dtype="float32")))
    if size >= 3:  # the all-to-all with counts read between two meetings: by default at every size, and forced
        big = [[int(rng.integers(1 << 16, 1 << 18)) for _ in range(size)] for _ in range(size)]
        small = [[int(rng.integers(0, 3000)) for _ in range(size)] for _ in range(size)]
        alone = [row[:] for row in big]  # the last rank trades nothing with a peer: it selects as they do
        for j in range(size - 1):
            alone[j][size - 1] = alone[size - 1][j] = 0
        for counts, dtype, algo in ((big, "float32", None), (small, "uint8", "read"), (alone, "float16", None)):
            plan.append((verb_cases.all_to_allv_zero_copy, dict(counts=counts, dtype=dtype, registered=[0] * size,
                                                                captured=False, algo=algo, served_by="read")))
    for verb in ("gather", "scatter"):  # read zero-copy from registered buffers
        plan.append((verb_cases.rooted_zero_copy, dict(verb=verb, count=(1 << 18) + 1, root=size - 1,
                                                       dtype="float16", registered=[0] * size)))
    for count, inplace in [(1003, False), ((1 << 21) + 3, True)]:
        plan.append((cases.reduce_scatter_registered, dict(count=count, dtype="float32", seed=count, inplace=inplace)))
    for count in (1, 4097, 1 << 17):
        plan.append((cases.all_reduce, dict(count=count, dtype="float16" if count > 1 else "float32", op="sum",
                                            seed=count, inplace=count % 2 == 1, algo="rsag_packet", repeat=3)))
    return plan


def _zero_copy(size: int) -> list:
    """The zero-copy kernels on registered buffers (send and receive, in place the one), about 1 MB and 8 MB with
    odd counts (calls on half the grid below 4 MB, on all of it above), each called twice."""
    two_step = size > 2
    plan = []
    for collective, algo, inplace in [("all_gather", "read" if two_step else "simple", False),
                                      ("all_gather", "read" if two_step else "simple", True),
                                      ("all_gather", "push", False), ("all_to_all", "simple", False),
                                      ("broadcast", "scatter_gather" if two_step else "simple", False),
                                      ("broadcast", "scatter_gather" if two_step else "simple", True),
                                      *([("broadcast", "push", False)] if two_step else [])]:
        for total in ((1 << 18) + 3 * size, (2 << 20) + size):  # float32 elements of the larger buffer
            count = total if collective == "broadcast" else total // size
            plan.append((cases.exchanges_zero_copy, dict(collective=collective, count=count, dtype="float32",
                                                         inplace=inplace, algo=algo, captured=False)))
    for count, inplace in [((1 << 19) + 5, False), ((2 << 20) + 3, True)]:
        plan.append((cases.all_reduce_registered, dict(count=count, dtype="float16", seed=count, inplace=inplace)))
    return plan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--verbs", action="store_true", help="just the verbs' cases (a quicker check of the exchange "
                    "kernel)")
    ap.add_argument("--algo", metavar="NAME", help="just the cases forcing an algorithm whose name holds NAME "
                    "(packet: every packet kernel's, a check of the packet primitives)")
    args = ap.parse_args()
    comm = pymscclpp.Communicator.from_mpi(MPI.COMM_WORLD)
    rng = np.random.default_rng(99)
    if args.verbs:
        failures = run_cases(comm, _verbs(rng, comm.size), "gpu verbs")
        comm.close()
        return 1 if failures else 0
    plan = []
    for i in range(45):
        algo = ["packet", "simple", "rsag"][i % 3]
        hi = (1 << 18) if algo == "packet" else (1 << 24)
        plan.append((cases.all_reduce, dict(count=int(rng.integers(1, hi // 4)), seed=i,
                                            dtype=str(rng.choice(["float32", "float16", "int32", "uint8"])),
                                            op=str(rng.choice(["sum", "min", "max"])), inplace=bool(i % 3 == 0),
                                            algo=algo, repeat=3)))
    for mb, inplace in [(300, True), (70, False), (33, True), (96, False)]:  # several rounds, short last one
        for algo in ("simple", "rsag"):
            plan.append((cases.all_reduce, dict(count=(mb << 20) // 4 + 3, dtype="float32", op="sum", seed=mb,
                                                inplace=inplace, algo=algo, repeat=2)))
    for algo in ["packet_one_block", "packet", "packet_wide"]:
        plan.append((cases.all_reduce, dict(count=200_000, dtype="float16", op="max", seed=1, inplace=False,
                                            algo=algo, repeat=3)))
    for case in ["size", "dtype", "host", "op"]:
        plan.append((cases.bad_input, dict(case=case)))
    plan += _other_collectives(rng, comm.size)
    plan += _zero_copy(comm.size)
    plan += _verbs(rng, comm.size)
    if args.algo is not None:
        plan = [(fn, kw) for fn, kw in plan if args.algo in str(kw.get("algo", ""))]
    failures = run_cases(comm, plan, "gpu collectives")
    comm.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

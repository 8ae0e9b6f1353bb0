"""Collectives captured once in a CUDA graph and replayed many times with fresh input, every result checked;
and two communicators running all-reduces on two streams at once.

    mpirun -np N python tests/gpu/run_graphs.py [--replays 1000]

On GPUs each case warms the collective up, captures one call with ``torch.cuda.graph``, then before every
replay writes new input (outside the graph) and after it compares the output with values computed by torch.
Under the simulator (CPU torch tensors, no graphs, one stream) the same cases call the collective directly.
Inputs are small integers, so every reduction is exact in every dtype and order. Two communicators' kernels in
flight at once must fit the GPU side by side (grids fill a rank's SMs, ``algos/grid.py``), so every grid here is
capped at half the SMs (``PYMSCCLPP_MAX_BLOCKS``), as an application running communicators concurrently does.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
from mpi4py import MPI  # noqa: E402

import pymscclpp  # noqa: E402
from gpu.runner import run_cases  # noqa: E402

GPU = pymscclpp.BACKEND == "gpu"
DEVICE = "cuda" if GPU else "cpu"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


def pattern(rank: int, n: int, k: int, dtype, start: int = 0) -> torch.Tensor:
    """Rank ``rank``'s input elements ``start .. start+n`` at replay ``k``: at most 3 * size + 1, exact sums."""
    j = torch.arange(start, start + n, device=DEVICE)
    return ((rank + 1) * (k % 3 + 1) + j % 2).to(dtype)


def expected(collective: str, size: int, rank: int, c: int, k: int, dtype, root: int) -> torch.Tensor:
    """What ``collective`` leaves in this rank's output when every rank's input is ``pattern``; ``c`` elements
    per slot (the whole buffer for all_reduce and broadcast)."""
    if collective == "all_reduce" or (collective == "reduce" and rank == root):
        return sum(pattern(r, c, k, torch.float32) for r in range(size)).to(dtype)
    if collective == "reduce":  # a non-root's buffer, never written
        return torch.full((c,), 99, dtype=dtype, device=DEVICE)
    if collective == "broadcast":
        return pattern(root, c, k, dtype)
    if collective == "all_gather":
        return torch.cat([pattern(r, c, k, dtype) for r in range(size)])
    if collective == "reduce_scatter":
        return sum(pattern(r, c, k, torch.float32, rank * c) for r in range(size)).to(dtype)
    return torch.cat([pattern(r, c, k, dtype, rank * c) for r in range(size)])  # all_to_all


def _capture(call):
    """``call`` as a replayable CUDA graph on GPUs (warmed up first: set-up must not happen inside a capture)."""
    call()
    if not GPU:
        return call
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return graph.replay


def replayed(comm, state, collective: str, count: int, dtype: str, replays: int, algo=None, root: int = 0):
    """One call of ``collective`` (``count`` elements per slot) captured, then replayed ``replays`` times."""
    dt, size, rank = getattr(torch, dtype), comm.size, comm.rank
    whole = collective in ("all_reduce", "broadcast", "reduce")
    send_n = count if whole or collective == "all_gather" else size * count
    recv_n = count if whole or collective == "reduce_scatter" else size * count
    send = torch.zeros(send_n, dtype=dt, device=DEVICE)
    recv = torch.full((recv_n,), 99, dtype=dt, device=DEVICE)
    call = {"all_reduce": lambda: comm.all_reduce(send, recv, algo=algo),
            "all_gather": lambda: comm.all_gather(send, recv, algo=algo),
            "reduce_scatter": lambda: comm.reduce_scatter(send, recv, algo=algo),
            "all_to_all": lambda: comm.all_to_all(send, recv, algo=algo),
            "broadcast": lambda: comm.broadcast(send, recv, root=root, algo=algo),
            "reduce": lambda: comm.reduce(send, recv if rank == root else None, root=root, algo=algo)}[collective]
    run = _capture(call)
    for k in range(replays):
        send.copy_(pattern(rank, send_n, k, dt))
        run()
        want = expected(collective, size, rank, count, k, dt, root)
        if not torch.equal(recv, want):
            bad = int((recv != want).nonzero()[0])
            raise AssertionError(f"rank {rank}: {collective} replay {k} of {replays}: element {bad} is "
                                 f"{recv[bad].item()}, expected {want[bad].item()}")
    comm.check_device_errors()


def _second_communicator(comm, state):
    """A second communicator over the same ranks (rank 0 makes the unique id, MPI carries its bytes)."""
    if "comm2" not in state:
        uid = pymscclpp.get_unique_id("127.0.0.1").to_bytes() if comm.rank == 0 else None
        uid = pymscclpp.UniqueId.from_bytes(MPI.COMM_WORLD.bcast(uid, root=0))
        state["comm2"] = pymscclpp.Communicator.from_unique_id(uid, comm.rank, comm.size)
    return state["comm2"]


def two_streams(comm, state, count: int, dtype: str, batches: int, per_batch: int = 8):
    """All-reduces of two communicators, each on its own stream, ``per_batch`` of each in flight before a
    synchronize; every result checked."""
    comm2 = _second_communicator(comm, state)
    dt, size, rank = getattr(torch, dtype), comm.size, comm.rank
    streams = (torch.cuda.Stream(), torch.cuda.Stream()) if GPU else (None, None)
    bufs = [[torch.zeros(count, dtype=dt, device=DEVICE) for _ in range(per_batch)] for _ in range(2)]
    for b in range(batches):
        for i in range(per_batch):
            for c, (com, stream) in enumerate(zip((comm, comm2), streams)):
                k = b * per_batch + i + c  # the two communicators reduce different data
                with torch.cuda.stream(stream) if GPU else contextlib.nullcontext():
                    bufs[c][i].copy_(pattern(rank, count, k, dt))
                    com.all_reduce(bufs[c][i])
        if GPU:
            torch.cuda.synchronize()
        for c in range(2):
            for i in range(per_batch):
                want = expected("all_reduce", size, rank, count, b * per_batch + i + c, dt, 0)
                if not torch.equal(bufs[c][i], want):
                    raise AssertionError(f"rank {rank}: communicator {c + 1}, batch {b}, call {i}: wrong result")
    comm.check_device_errors()
    comm2.check_device_errors()


def plan_cases(size: int, replays: int) -> list:
    """Every collective with both algorithms and two dtypes, the wide packet all-reduce, reduce by each of its
    algorithms, two streams."""
    big = (1 << 20) + 3 if GPU else 3000 + 3  # elements per slot; odd on purpose; the simulator is slow
    plan = []
    two_step = {"all_reduce": "rsag", "all_gather": "read", "broadcast": "scatter_gather"}
    for collective in COLLECTIVES:
        extra = [(two_step[collective], big)] if collective in two_step else []
        for algo, count in (("packet", 1000), ("simple", big), *extra):
            for dtype in ("bfloat16", "float32"):
                params = dict(collective=collective, count=count, dtype=dtype, replays=replays, algo=algo)
                if collective == "broadcast":
                    params["root"] = size - 1
                plan.append((replayed, params))
    plan.append((replayed, dict(collective="all_reduce", count=500, dtype="bfloat16", replays=replays,
                                algo="packet_one_block")))
    for algo, count in (("packet", 1000), ("exchange", 1000), ("rsag", big)):  # captured rsag: into the root's output
        plan.append((replayed, dict(collective="reduce", count=count, dtype="bfloat16", replays=replays, algo=algo,
                                    root=size - 1)))
    per_batch = 8 if GPU else 3  # calls of each communicator in flight
    plan.append((replayed, dict(collective="all_reduce", count=20_000 if GPU else 4000, dtype="float16",
                                replays=replays, algo="packet_wide")))
    plan.append((two_streams, dict(count=4096, dtype="bfloat16", batches=max(1, replays // 40), per_batch=per_batch)))
    plan.append((two_streams, dict(count=4 * big if GPU else big, dtype="float32", batches=max(1, replays // 200),
                                   per_batch=per_batch)))
    return plan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replays", type=int, default=1000 if GPU else 3)
    args = ap.parse_args()
    comm = pymscclpp.Communicator.from_mpi(MPI.COMM_WORLD)
    if GPU:
        from numba import cuda
        torch.cuda.set_device(comm.device)
        sms = cuda.get_current_device().MULTIPROCESSOR_COUNT  # read before the first call fits its grids
        os.environ.setdefault("PYMSCCLPP_MAX_BLOCKS", str(max(1, sms // 2)))
    state: dict = {}
    failures = run_cases(comm, plan_cases(comm.size, args.replays), f"graph replays x{args.replays}", state)
    if "comm2" in state:
        state["comm2"].close()
    comm.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

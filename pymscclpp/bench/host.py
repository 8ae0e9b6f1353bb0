"""Host-side costs, in one run: import, communicator set-up, each collective's first call (and whether numba's
disk cache served its kernel), and the eager enqueue cost of each collective against a one-element-wise torch
op (a trivial numba kernel launch without torch) in the same process, the two measured in alternation so that
drift reaches both; with torch on a GPU, also the CUDA-graph latency of a bf16 all-reduce at 1 KB, 64 KB and
1 MB, and the eager cost of an all-reduce through the NCCL drop-in, the torch.distributed backend and a
backend that does nothing (torch's own part of every call). Eager buffers are bf16 torch tensors (float32 numba
arrays without torch).

The first calls are timed at the eager size and, on GPUs, at 16 MB (the simple protocol's kernels).
``mpirun -np 2 python -m pymscclpp.bench --op host [--json FILE]``: on one GPU (ranks may share it) or on the
simulator, where only the host figures mean anything. Run it twice with one ``PYMSCCLPP_CACHE_DIR`` to see a
cold and a warm kernel cache.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from numba import cuda  # pymscclpp, the parent package, chose the backend first

from ..runtime.collectives import COLLECTIVES

LARGE_BYTES = 16 << 20  # a message of the large size class, whose first calls the GPU runs also time


@cuda.jit(cache=True)
def add_one(a):
    """The reference op without torch: one trivial kernel."""
    i = cuda.threadIdx.x
    if i < a.shape[0]:
        a[i] += 1


def import_seconds() -> float:
    """Seconds ``import pymscclpp`` takes in a fresh interpreter (no torch)."""
    code = "import time; t = time.perf_counter(); import pymscclpp; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


class Buffers:
    """Device buffers of one collective at ``nbytes``: bf16 torch tensors when torch is here, else float32 numba
    arrays."""

    def __init__(self, torch, comm, nbytes: int):
        self.torch, self.comm, self.n = torch, comm, max(1, nbytes // (2 if torch is not None else 4))

    def make(self, count: int):
        if self.torch is not None:
            return self.torch.ones(count, dtype=self.torch.bfloat16, device=_device(self.torch))
        import numpy as np
        return cuda.to_device(np.ones(count, np.float32))

    def call(self, collective: str):
        """A no-argument function issuing ``collective`` on these buffers."""
        c, n, size = self.comm, self.n, self.comm.size
        if collective == "all_reduce":
            x = self.make(n)
            return lambda: c.all_reduce(x)
        if collective == "broadcast":
            x = self.make(n)
            return lambda: c.broadcast(x, 0)
        if collective == "all_gather":
            x, out = self.make(n), self.make(n * size)
            return lambda: c.all_gather(x, out)
        x, out = self.make(n * size), self.make(n if collective == "reduce_scatter" else n * size)
        return lambda: getattr(c, collective)(x, out)


def _device(torch) -> str:
    import pymscclpp
    return "cuda" if pymscclpp.BACKEND == "gpu" else "cpu"


def _sync(torch) -> None:
    import pymscclpp
    if pymscclpp.BACKEND != "gpu":
        return
    if torch is not None:
        torch.cuda.synchronize()
    else:
        cuda.synchronize()


def reference_op(torch):
    """The op an eager collective is held against: ``x.add_(1)`` on 256 floats, else a numba kernel launch."""
    if torch is not None:
        y = torch.ones(256, dtype=torch.float32, device=_device(torch))
        return "torch x.add_(1)", lambda: y.add_(1)
    import numpy as np
    arr = cuda.to_device(np.ones(32, np.float32))
    return "numba kernel launch", lambda: add_one[1, 32](arr)


def _batch_us(fn, calls: int, barrier, torch) -> float:
    """Host microseconds per call of ``fn`` issued ``calls`` times without synchronizing."""
    barrier()
    _sync(torch)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = (time.perf_counter() - start) / calls * 1e6
    _sync(torch)
    return elapsed


def host_us(fn, calls: int, reps: int, barrier, torch) -> float:
    """Median host microseconds per call of ``fn`` over ``reps`` batches of ``calls``."""
    return statistics.median(_batch_us(fn, calls, barrier, torch) for _ in range(reps))


def paired_us(fn, ref, calls: int, reps: int, barrier, torch) -> tuple[float, float]:
    """(median host us per call of ``fn``, median of its ratio to ``ref``'s), batches of the two alternated."""
    times, ratios = [], []
    for _ in range(reps):
        ours, theirs = _batch_us(fn, calls, barrier, torch), _batch_us(ref, calls, barrier, torch)
        times.append(ours)
        ratios.append(ours / theirs)
    return statistics.median(times), statistics.median(ratios)


def graph_us(torch, comm, nbytes: int, barrier, iters: int = 50, reps: int = 20) -> float:
    """Median microseconds per all-reduce of ``nbytes`` bf16 over CUDA-graph replays of ``iters`` calls."""
    from .timing import capture, time_graph
    x = torch.ones(max(1, nbytes // 2), dtype=torch.bfloat16, device="cuda")
    comm.all_reduce(x)
    torch.cuda.synchronize()
    return time_graph(capture(lambda: comm.all_reduce(x), iters), iters, reps, barrier)


def _first_calls(rows: dict, calls: dict, suffix: str, barrier, torch) -> None:
    """Rows ``first_<collective><suffix>_s``: seconds of each collective's first call, to its end on the device."""
    for c, fn in calls.items():
        barrier()
        start = time.perf_counter()
        fn()
        _sync(torch)
        rows[f"first_{c}{suffix}_s"] = time.perf_counter() - start


def _eager(rows: dict, name: str, fn, ref, calls: int, reps: int, barrier, torch) -> None:
    """Rows ``eager_<name>_us`` and ``eager_<name>_vs_reference`` (alternated with ``ref``)."""
    rows[f"eager_{name}_us"], rows[f"eager_{name}_vs_reference"] = paired_us(fn, ref, calls, reps, barrier, torch)


def integration_us(torch, world, nbytes: int, ref, calls: int, reps: int) -> dict:
    """Eager host us per all-reduce of ``nbytes`` bf16 through the NCCL drop-in (raw pointers, torch's
    stream), the torch.distributed backend (each on a communicator of its own) and the floor backend of
    ``_register_floor`` (GPU runs with torch only)."""
    import socket

    import torch.distributed as dist

    from .. import nccl as pn
    from .. import torch as _registers_backend  # noqa: F401
    rank, size = world.Get_rank(), world.Get_size()
    x = torch.ones(max(1, nbytes // 2), dtype=torch.bfloat16, device="cuda")
    drop_in = pn.NcclCommunicator(size, world.bcast(pn.get_unique_id() if rank == 0 else None), rank)
    stream = torch.cuda.current_stream().cuda_stream
    rows: dict = {}
    _eager(rows, "nccl_dropin_all_reduce",
           lambda: drop_in.allReduce(x.data_ptr(), x.data_ptr(), x.numel(), pn.NCCL_BFLOAT16, pn.NCCL_SUM, stream),
           ref, calls, reps, world.Barrier, torch)
    drop_in.destroy()
    port = None
    if rank == 0:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", world.bcast(port), size, rank == 0)
    dist.init_process_group("mscclpp", store=store, rank=rank, world_size=size)
    _eager(rows, "torch_backend_all_reduce", lambda: dist.all_reduce(x), ref, calls, reps, world.Barrier, torch)
    dist.destroy_process_group()
    dist.init_process_group(_register_floor(dist), store=dist.PrefixStore("floor/", store), rank=rank, world_size=size)
    _eager(rows, "torch_dispatch_floor", lambda: dist.all_reduce(x), ref, calls, reps, world.Barrier, torch)
    dist.destroy_process_group()
    return rows


def _register_floor(dist) -> str:
    """Register (once) a backend whose all_reduce does nothing and returns what ours returns: what torch itself
    adds to every call into a Python backend; its name."""
    from ..torch.work import finished
    name = "pymscclpp_floor"
    if name not in dist.Backend.backend_list:
        class Floor(dist.ProcessGroup):
            def allreduce(self, tensors: list, opts) -> dist.Work:
                return finished(tensors, opts)

        dist.Backend.register_backend(name, lambda store, rank, size, timeout: Floor(rank, size), devices=["cuda"])
    return name


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pymscclpp.bench --op host", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", type=int, default=1024, help="message size of the eager calls")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", help="write the figures here (rank 0)")
    args = ap.parse_args(argv)
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    rows: dict = {"import_pymscclpp_s": import_seconds() if world.Get_rank() == 0 else None}
    import pymscclpp
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and pymscclpp.BACKEND == "gpu":
        torch.cuda.set_device(0 if torch.cuda.device_count() == 1 else world.Get_rank() % torch.cuda.device_count())
    start = time.perf_counter()
    comm = pymscclpp.Communicator.from_mpi(world)
    rows["setup_s"] = time.perf_counter() - start
    bufs = Buffers(torch, comm, args.bytes)
    calls = {c: bufs.call(c) for c in COLLECTIVES}
    _first_calls(rows, calls, "", world.Barrier, torch)
    if pymscclpp.BACKEND == "gpu":  # the other size class: the simple protocol's kernels
        large = Buffers(torch, comm, LARGE_BYTES)
        _first_calls(rows, {c: large.call(c) for c in COLLECTIVES}, "_16MB", world.Barrier, torch)
    rows["disk_cache_hits"] = sum(bool(getattr(getattr(a, "kernel_launch", None), "disk_cache_hit", False))
                                  for a in comm.algorithms.built())
    name, ref = reference_op(torch)
    ref()
    _sync(torch)
    rows["reference_op"] = name
    rows["reference_us"] = host_us(ref, args.calls, args.reps, world.Barrier, torch)
    for c, fn in calls.items():
        _eager(rows, c, fn, ref, args.calls, args.reps, world.Barrier, torch)
    if torch is not None and pymscclpp.BACKEND == "gpu":  # device latency, for runs before and after a change
        for nbytes in (1 << 10, 64 << 10, 1 << 20):
            rows[f"graph_all_reduce_{nbytes}_us"] = graph_us(torch, comm, nbytes, world.Barrier)
        rows.update(integration_us(torch, world, args.bytes, ref, args.calls, args.reps))
    comm.check_device_errors()
    comm.close()
    if world.Get_rank() == 0:
        print(f"# host costs: {comm.size} ranks, backend {pymscclpp.BACKEND}, {args.bytes}-byte eager calls, "
              f"median of {args.reps} x {args.calls}, each batch alternated with one of the reference op", flush=True)
        for key, value in rows.items():
            if key.endswith("_vs_reference"):
                continue
            vs = rows.get(key.removesuffix("_us") + "_vs_reference")
            ratio = f"  ({vs:.2f}x the reference op)" if vs is not None else ""
            print(f"{key:<34} {value:.6g}{ratio}" if isinstance(value, float) else f"{key:<34} {value}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"args": vars(args), "rows": rows, "ranks": comm.size,
                           "cache_dir": os.environ.get("NUMBA_CACHE_DIR")}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The size sweep: set up torch + NCCL + pymscclpp, time each size for both, check, print rows."""

from __future__ import annotations

import os
import statistics

from .cases import make_case
from .timing import capture, eager_samples, graph_samples, time_eager, time_graph

_TORCH_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32", "int32": "int32",
                 "uint8": "uint8"}
HEADER = (f"{'size':>12} {'count':>12} {'type':>9} {'redop':>6} | {'pymscclpp us':>12} {'algbw':>7} {'busbw':>7} "
           f"{'#wrong':>6} | {'REF us':>9} {'algbw':>7} {'busbw':>7} | {'speedup':>7}  served by")


def setup(nccl: bool):
    """mpi4py world, torch device, pymscclpp communicator and (``nccl``) NCCL's process group, else None for it.
    Ranks sharing a GPU (CUDA MPS) take device ``local % count``."""
    try:
        import torch
    except ImportError:
        raise SystemExit("python -m pymscclpp.bench on GPUs needs torch (tensors, CUDA events, NCCL): "
                         "pip install torch") from None
    import torch.distributed as dist
    from mpi4py import MPI

    import pymscclpp
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("MPI_LOCALRANKID", rank)))
    local %= torch.cuda.device_count()
    torch.cuda.set_device(local)
    comm = pymscclpp.Communicator.from_mpi(world)
    if not nccl:
        return world, comm, torch, None
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    port = world.bcast(29500 + (os.getpid() % 1000) if rank == 0 else None)
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("nccl", rank=rank, world_size=size, device_id=torch.device("cuda", local))
    return world, comm, torch, dist


def slowest(world, value: float) -> float:
    """The largest ``value`` over the ranks of MPI communicator ``world``: a collective ends when its last rank does,
    and every rank that decides by it decides alike."""
    from mpi4py import MPI
    return world.allreduce(value, op=MPI.MAX)


def _profile(fn, rank: int, world) -> None:
    """cProfile 2000 eager calls (both ranks call; rank 0 prints the top entries)."""
    import cProfile
    import pstats
    import time
    world.Barrier()
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    for _ in range(2000):
        fn()
    prof.disable()
    host_us = (time.perf_counter() - start) / 2000 * 1e6
    if rank == 0:
        print(f"# host time per call under the profiler: {host_us:.1f} us", flush=True)
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)


def served_by(comm, op: str) -> str:
    """Which algorithm (and kernel and its grid, where it tells; for the exchange, the peers it read zero-copy)
    served this rank's last ``op`` call."""
    algorithm = comm.last_algorithm(op)
    if algorithm is None:
        return "-"
    text = f"{algorithm.name}: {algorithm.last_kernel}" if algorithm.last_kernel else algorithm.name
    if algorithm.last_grid:
        text += f" on {algorithm.last_grid} block{'s' if algorithm.last_grid > 1 else ''}"
    modes = algorithm.pair_modes() if hasattr(algorithm, "pair_modes") else {}
    read = sum("read" in mode.split(", ") for mode in modes.values())
    return f"{text}, {read} of {len(modes)} peers read zero-copy" if modes else text


def slowest_rank(world, samples: list[float]) -> tuple[float, float, float]:
    """(median, fastest, slowest) of a size's runs ``samples`` (microseconds per call), each the slowest rank's: a
    collective ends when its last rank does, and the spread tells a few stalled runs from every call slow."""
    return tuple(slowest(world, v) for v in (statistics.median(samples), min(samples), max(samples)))


def result_row(args, nbytes: int, count: int, times: tuple[float, float, float], t_ref: float, wrong: int,
               bus_factor: float, served: str) -> dict:
    """One size's results: times in microseconds (``times``: ``slowest_rank``'s), bandwidths in GB/s; ``served``:
    ``served_by``'s answer."""
    t_ours, fastest, slowest = times
    return {"op": args.op, "served": served, "bytes": nbytes, "count": count, "dtype": args.dtype, "redop": args.redop,
            "us": t_ours, "us_fastest": fastest, "us_slowest": slowest, "algbw": nbytes / t_ours / 1e3,
            "busbw": nbytes / t_ours / 1e3 * bus_factor, "wrong": wrong, "nccl_us": t_ref,
            "nccl_algbw": nbytes / t_ref / 1e3, "nccl_busbw": nbytes / t_ref / 1e3 * bus_factor,
            "speedup": t_ref / t_ours, "reference": args.compare}


def print_row(row: dict, checked: bool) -> None:
    """Print one row of the table (rank 0)."""
    print(f"{row['bytes']:>12} {row['count']:>12} {row['dtype']:>9} {row['redop']:>6} | {row['us']:>12.2f} "
          f"{row['algbw']:>7.1f} {row['busbw']:>7.1f} {row['wrong'] if checked else 'N/A':>6} | {row['nccl_us']:>9.2f} "
          f"{row['nccl_algbw']:>7.1f} {row['nccl_busbw']:>7.1f} | {row['speedup']:>6.2f}x  {row['served']}", flush=True)


def run_sweep(args) -> list[dict] | None:
    """Run the sweep; rank 0 prints the table and gets the rows (others get None)."""
    world, comm, torch, dist = setup(args.compare == "nccl")
    dtype = getattr(torch, _TORCH_DTYPES[args.dtype])
    rows = []
    floor = args.compare == "floor"
    if comm.rank == 0:
        ref = ("the memory floor (the same bytes moved by one local torch op on every rank; speedup = floor / ours)"
               if floor else f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}")
        print(f"# {args.op}: pymscclpp vs {ref}, {comm.size} ranks, "
              f"{'CUDA graph' if args.graph else 'eager'}, median of {args.reps} x {args.iters} calls", flush=True)
        print(HEADER.replace("REF", "floor" if floor else "nccl"), flush=True)
    size = args.minbytes
    while size <= args.maxbytes:
        case = make_case(args.op, comm, dist, torch, dtype, size, args.redop, args.algo)
        nbytes = case.count * case.outputs[0].element_size()
        reference = case.floor if floor else case.nccl
        registered = case.buffers if args.register else ()
        for buf in registered:
            comm.register_buffer(buf)
        for _ in range(args.warmup):
            case.ours()
            if reference is not None:
                reference()
        torch.cuda.synchronize()
        wrong = -1
        if args.check:
            case.ours()
            if dist is None:
                want = case.expected()
            else:
                case.nccl()
                want = case.outputs[1]
            torch.cuda.synchronize()
            wrong = world.allreduce(int((case.outputs[0] != want).sum().item()))
        barrier = world.Barrier
        if args.graph:
            samples = graph_samples(capture(case.ours, args.iters), args.iters, args.reps, barrier)
            t_ref = time_graph(capture(reference, args.iters), args.iters, args.reps, barrier) \
                if reference is not None else float("nan")
        else:
            if args.profile:
                _profile(case.ours, comm.rank, world)
            samples = eager_samples(case.ours, args.iters, args.reps, barrier)
            t_ref = time_eager(reference, args.iters, args.reps, barrier) if reference is not None else float("nan")
        t_ref = slowest(world, t_ref)
        comm.check_device_errors()
        for buf in registered:
            comm.deregister_buffer(buf)
        row = result_row(args, nbytes, case.count, slowest_rank(world, samples), t_ref, wrong, case.bus_factor,
                         served_by(comm, args.op))
        rows.append(row)
        if comm.rank == 0:
            print_row(row, args.check)
        size *= args.stepfactor
    if dist is not None:
        dist.destroy_process_group()
    comm.close()
    return rows if world.Get_rank() == 0 else None

"""The size sweep: set up torch + NCCL + pymscclpp, time each size for both, check, print rows."""

from __future__ import annotations

import os

from .timing import capture, time_eager, time_graph

_TORCH_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32", "int32": "int32",
                 "uint8": "uint8"}
_HEADER = (f"{'size':>12} {'count':>12} {'type':>9} {'redop':>6} | {'pymscclpp us':>12} {'algbw':>7} {'busbw':>7} "
           f"{'#wrong':>6} | {'nccl us':>9} {'algbw':>7} {'busbw':>7} | {'speedup':>7}")


def _setup():
    """mpi4py world, torch device and process group, pymscclpp communicator."""
    import torch
    import torch.distributed as dist
    from mpi4py import MPI

    import pymscclpp
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("MPI_LOCALRANKID", rank)))
    torch.cuda.set_device(local)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    port = world.bcast(29500 + (os.getpid() % 1000) if rank == 0 else None)
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("nccl", rank=rank, world_size=size, device_id=torch.device("cuda", local))
    comm = pymscclpp.Communicator.from_mpi(world)
    return world, comm, torch, dist


def _bus_factor(op: str, n: int) -> float:
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


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


def run_sweep(args) -> list[dict] | None:
    """Run the sweep; rank 0 prints the table and gets the rows (others get None)."""
    world, comm, torch, dist = _setup()
    tdtype = getattr(torch, _TORCH_DTYPES[args.dtype])
    itemsize = torch.tensor([], dtype=tdtype).element_size()
    redop = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[args.redop]
    rows = []
    if comm.rank == 0:
        print(f"# pymscclpp vs NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, {comm.size} ranks, "
              f"{'CUDA graph' if args.graph else 'eager'}, median of {args.reps} x {args.iters} calls", flush=True)
        print(_HEADER, flush=True)
    size = args.minbytes
    while size <= args.maxbytes:
        count = max(1, size // itemsize)
        nbytes = count * itemsize
        gen = torch.Generator(device="cuda").manual_seed(1234 + comm.rank)
        if tdtype.is_floating_point:
            x = torch.randint(-8, 9, (count,), device="cuda", generator=gen).to(tdtype)
        else:
            x = torch.randint(0, 4, (count,), device="cuda", generator=gen).to(tdtype)
        ours, ref = x.clone(), x.clone()
        out_ours, out_ref = torch.empty_like(x), torch.empty_like(x)
        stream = torch.cuda.current_stream()

        def call_ours():  # stream=None: torch's current stream (the capture stream inside a graph)
            comm.all_reduce(ours, out_ours, op=args.redop, algo=args.algo)

        def call_ref():
            out_ref.copy_(ref)
            dist.all_reduce(out_ref, op=redop)

        wrong = 0
        for _ in range(args.warmup):
            call_ours()
            call_ref()
        torch.cuda.synchronize()
        if args.check:
            call_ours()
            call_ref()
            torch.cuda.synchronize()
            wrong = int((out_ours != out_ref).sum().item())
        barrier = world.Barrier
        if args.graph:
            t_ours = time_graph(capture(call_ours, args.iters), args.iters, args.reps, barrier)
            t_ref = time_graph(capture(call_ref, args.iters), args.iters, args.reps, barrier) \
                if args.compare == "nccl" else float("nan")
        else:
            if args.profile:
                _profile(call_ours, comm.rank, world)
            t_ours = time_eager(call_ours, args.iters, args.reps, barrier)
            t_ref = time_eager(call_ref, args.iters, args.reps, barrier) if args.compare == "nccl" else float("nan")
        comm.check_device_errors()
        stream.synchronize()
        wrong = world.allreduce(wrong)
        bus = _bus_factor(args.op, comm.size)
        row = {"bytes": nbytes, "count": count, "dtype": args.dtype, "redop": args.redop, "us": t_ours,
               "algbw": nbytes / t_ours / 1e3, "busbw": nbytes / t_ours / 1e3 * bus, "wrong": wrong if args.check else -1,
               "nccl_us": t_ref, "nccl_algbw": nbytes / t_ref / 1e3, "nccl_busbw": nbytes / t_ref / 1e3 * bus,
               "speedup": t_ref / t_ours}
        rows.append(row)
        if comm.rank == 0:
            print(f"{nbytes:>12} {count:>12} {args.dtype:>9} {args.redop:>6} | {t_ours:>12.2f} {row['algbw']:>7.1f} "
                  f"{row['busbw']:>7.1f} {row['wrong'] if args.check else 'N/A':>6} | {t_ref:>9.2f} "
                  f"{row['nccl_algbw']:>7.1f} {row['nccl_busbw']:>7.1f} | {row['speedup']:>6.2f}x", flush=True)
        size *= args.stepfactor
    dist.destroy_process_group()
    comm.close()
    return rows if world.Get_rank() == 0 else None


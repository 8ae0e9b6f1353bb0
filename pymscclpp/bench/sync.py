"""What meeting the other ranks costs on this machine, apart from any bytes: the latency floor of a collective.

``mpirun -np N python -m pymscclpp.bench --op sync [--iters 20 --reps 25 --inner 1000 --json FILE]`` times, in one
run, each as a CUDA graph of ``iters`` launches (median of ``reps`` replays, the slowest rank): an empty kernel
(the launch alone), the same with every peer's channel handle as arguments (what passing them costs: their arrays
travel as kernel parameters, kilobytes at 8 ranks), a kernel that meets every peer once (thread j signals peer j,
then waits for peer j's signal), the same on each grid of ``--blocks`` (block b meets block b of every peer,
as a collective's blocks do: what a meeting costs per block), both with two meetings in a row (the floor of a call
that meets twice, as a zero-copy one does: before it reads peers' bytes and after), a 1 KB bf16 all_reduce, and
``inner`` meetings inside one kernel (the meeting alone, no launch between). On the simulator the same kernels
run eager, host-timed, at small counts: only that they finish means anything there.
"""

from __future__ import annotations

import argparse

import numpy as np
from mpi4py import MPI

import pymscclpp  # chooses the backend before numba.cuda loads
from numba import cuda

import pymscclpp.channels.memory_channel as mc
from pymscclpp.bench.report import report
from pymscclpp.bench.sweep import slowest
from pymscclpp.bench.timing import time_host
from pymscclpp.runtime.backend import IS_SIM
from pymscclpp.runtime.memory import alloc


@cuda.jit(cache=True)
def empty_kernel(word):
    """Nothing but a launch (one thread stores one word, so the launch is not optimised away)."""
    if cuda.threadIdx.x == 0:
        word[0] = 1


@cuda.jit(cache=True)
def empty_with_channels_kernel(chans, word):
    """``empty_kernel`` launched with the meeting's channel handles as arguments, which it does not read."""
    if cuda.threadIdx.x == 0:
        word[0] = 1


@cuda.jit(cache=True)
def meet_kernel(chans, times):
    """``times`` meetings of every rank: thread j signals peer j and waits for its signal on the block's semaphore,
    then the block syncs. Returns early once a wait fails (recorded; the host raises from ``check_device_errors``)."""
    j, b = cuda.threadIdx.x, cuda.blockIdx.x
    for _ in range(times):
        failed = 0
        if j < len(chans):
            mc.signal(chans[j], b)
            if not mc.wait(chans[j], b):
                failed = 1
        if cuda.syncthreads_or(failed):
            return


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m pymscclpp.bench --op sync", description=__doc__)
    ap.add_argument("--iters", type=int, default=2 if IS_SIM else 20, help="launches per graph")
    ap.add_argument("--reps", type=int, default=2 if IS_SIM else 25, help="graph replays (the median is reported)")
    ap.add_argument("--inner", type=int, default=3 if IS_SIM else 1000, help="meetings inside one kernel")
    ap.add_argument("--blocks", default="2" if IS_SIM else "8,16",
                    help="grids (comma-separated block counts) to time a meeting on, besides one block")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    world = MPI.COMM_WORLD
    if not IS_SIM:
        import torch
        torch.cuda.set_device(world.Get_rank() % torch.cuda.device_count())
    comm = pymscclpp.Communicator.from_mpi(world)
    if comm.size < 2:
        raise SystemExit("run with at least 2 ranks")
    src, inbox = alloc(64), alloc(64)
    peers = [p for p in range(comm.size) if p != comm.rank]
    grids = sorted({int(b) for b in args.blocks.split(",") if b.strip()} - {1})
    channels = comm.memory_channels(peers, src, inbox, semaphores=max([1, *grids]))
    chans = tuple(ch.device_handle() for ch in channels.values())
    word = cuda.device_array(1, np.int32)
    threads = 32 * ((len(chans) + 31) // 32)
    res: dict = {"ranks": comm.size, "iters": args.iters, "reps": args.reps, "inner": args.inner}
    if IS_SIM:
        x = cuda.to_device(np.ones(256, np.float32))
        cases = {"empty": lambda: empty_kernel[1, 32](word),
                 "empty_with_channels": lambda: empty_with_channels_kernel[1, 32](chans, word),
                 "meet": lambda: meet_kernel[1, threads](chans, 1),
                 **{f"meet_{g}_blocks": lambda g=g: meet_kernel[g, threads](chans, 1) for g in grids},
                 "meet_twice": lambda: meet_kernel[1, threads](chans, 2),
                 **{f"meet_twice_{g}_blocks": lambda g=g: meet_kernel[g, threads](chans, 2) for g in grids},
                 "all_reduce_1KB": lambda: comm.all_reduce(x)}
        for name, fn in cases.items():
            fn()
            res[f"{name}_us"] = slowest(world, time_host(fn, args.reps, world.Barrier))
        inner = time_host(lambda: meet_kernel[1, threads](chans, args.inner), args.reps, world.Barrier)
    else:
        from pymscclpp.bench.timing import capture, time_graph
        x = torch.ones(512, dtype=torch.bfloat16, device="cuda")

        def on_torch_stream(kernel, *a, blocks=1):
            return lambda: kernel[blocks, threads, cuda.external_stream(torch.cuda.current_stream().cuda_stream)](*a)

        cases = {"empty": on_torch_stream(empty_kernel, word),
                 "empty_with_channels": on_torch_stream(empty_with_channels_kernel, chans, word),
                 "meet": on_torch_stream(meet_kernel, chans, 1),
                 **{f"meet_{g}_blocks": on_torch_stream(meet_kernel, chans, 1, blocks=g) for g in grids},
                 "meet_twice": on_torch_stream(meet_kernel, chans, 2),
                 **{f"meet_twice_{g}_blocks": on_torch_stream(meet_kernel, chans, 2, blocks=g) for g in grids},
                 "all_reduce_1KB": lambda: comm.all_reduce(x)}
        for name, fn in cases.items():
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            world.Barrier()
            graph = capture(fn, args.iters)
            time_graph(graph, args.iters, 2, world.Barrier)
            res[f"{name}_us"] = slowest(world, time_graph(graph, args.iters, args.reps, world.Barrier))
        one = on_torch_stream(meet_kernel, chans, args.inner)
        one()
        torch.cuda.synchronize()
        world.Barrier()
        inner = time_graph(capture(one, 1), 1, args.reps, world.Barrier)
    res["meet_inside_kernel_us"] = slowest(world, inner / args.inner)
    comm.check_device_errors()
    report(comm.rank, res, args.json)
    for ch in channels.values():
        ch.close()
    comm.close()


if __name__ == "__main__":
    main()

"""Primitive API microbenchmarks on 2 GPUs, with NCCL (through torch) timed in the same run.

``mpirun -np 2 python -m pymscclpp.bench --op memory_channel [--json FILE]``. Measures MemoryChannel put bandwidth
(one direction and both at once), signal/wait ping-pong and LL16/LL8 packet ping-pong one-way
latency (many round trips inside one kernel, so launch cost is excluded), and NCCL send/recv
bandwidth and a 1-element send/recv ping-pong as the reference. Median of repeated timings. On the CUDA
simulator it runs the same kernels at small sizes, timed by the host clock, without NCCL.
"""

from __future__ import annotations

import argparse
import os
import statistics

from mpi4py import MPI

import pymscclpp  # noqa: F401  (chooses the backend before numba.cuda loads)
from numba import cuda

import pymscclpp.channels.memory_channel as mc
from pymscclpp.bench.report import report
from pymscclpp.bench.timing import time_host
from pymscclpp.channels.ptx import store_v4
from pymscclpp.runtime.backend import IS_SIM
from pymscclpp.runtime.communicator import Communicator
from pymscclpp.runtime.memory import alloc


@cuda.jit(cache=True)
def put_kernel(ch, nbytes):
    tid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    mc.put(ch, 0, 0, nbytes, tid, cuda.gridDim.x * cuda.blockDim.x)


@cuda.jit(cache=True)
def write_only_kernel(ch, nbytes):
    """Remote 16-byte stores of a constant: the NVLink write ceiling without local loads."""
    tid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    nt = cuda.gridDim.x * cuda.blockDim.x
    i = tid
    while i < nbytes // 16:
        store_v4(ch.dst, i * 16, 1, 2, 3, 4)
        i += nt


@cuda.jit(cache=True)
def get_kernel(ch, nbytes):
    """Pull: read the peer's memory into ours (the NVLink read path)."""
    tid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    mc.get(ch, 0, 0, nbytes, tid, cuda.gridDim.x * cuda.blockDim.x)


@cuda.jit(cache=True)
def signal_pingpong(ch, iters, initiator):
    if cuda.threadIdx.x == 0:
        for _ in range(iters):
            if initiator:
                mc.signal(ch)
                mc.wait(ch)
            else:
                mc.wait(ch)
                mc.signal(ch)


@cuda.jit(cache=True)
def packet_pingpong(ch, iters, initiator, flag_base, ll8):
    for i in range(iters):
        f = flag_base + i
        if initiator:
            if ll8:
                mc.put_packets_ll8(ch, 0, 0, 4, 0, 1, f)
                mc.unpack_packets_ll8(ch, 64, 0, 4, 0, 1, f)
            else:
                mc.put_packets(ch, 0, 0, 8, 0, 1, f)
                mc.unpack_packets(ch, 64, 0, 8, 0, 1, f)
        else:
            if ll8:
                mc.unpack_packets_ll8(ch, 64, 0, 4, 0, 1, f)
                mc.put_packets_ll8(ch, 0, 0, 4, 0, 1, f)
            else:
                mc.unpack_packets(ch, 64, 0, 8, 0, 1, f)
                mc.put_packets(ch, 0, 0, 8, 0, 1, f)


def timed(fn, reps: int, world) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` runs, ranks started together each time."""
    if IS_SIM:  # the simulator has no events
        return time_host(fn, reps, world.Barrier) / 1e3
    times = []
    for _ in range(reps):
        world.Barrier()
        start, stop = cuda.event(), cuda.event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop))
    return statistics.median(times)


def nccl_reference(rank: int, nbytes: int, reps: int) -> dict:
    """NCCL send/recv bandwidth and 1-element ping-pong one-way latency through torch.distributed."""
    import torch
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", rank))
    big = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    one = torch.zeros(1, dtype=torch.float32, device="cuda")
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def run(fn, n):
        out = []
        for _ in range(n):
            dist.barrier()
            torch.cuda.synchronize()
            ev0.record()
            fn()
            ev1.record()
            ev1.synchronize()
            out.append(ev0.elapsed_time(ev1))
        return statistics.median(out)

    def send_big():
        dist.send(big, 1) if rank == 0 else dist.recv(big, 0)

    iters = 200

    def pingpong():
        for _ in range(iters):
            if rank == 0:
                dist.send(one, 1)
                dist.recv(one, 1)
            else:
                dist.recv(one, 0)
                dist.send(one, 0)

    run(send_big, 3)
    bw_ms = run(send_big, reps)
    run(pingpong, 1)
    pp_ms = run(pingpong, 5)
    dist.destroy_process_group()
    return {"nccl_sendrecv_GBps": nbytes / bw_ms / 1e6, "nccl_pingpong_oneway_us": pp_ms * 1e3 / (2 * iters)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m pymscclpp.bench --op memory_channel", description=__doc__)
    ap.add_argument("--bytes", type=int, default=4096 if IS_SIM else 128 << 20)
    ap.add_argument("--reps", type=int, default=2 if IS_SIM else 20)
    ap.add_argument("--blocks", type=int, default=1 if IS_SIM else 132)
    ap.add_argument("--threads", type=int, default=32 if IS_SIM else 1024)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    world = MPI.COMM_WORLD
    comm = Communicator.from_mpi(world)
    if comm.size != 2:
        raise SystemExit("run with exactly 2 ranks")
    peer = 1 - comm.rank
    src, inbox = alloc(args.bytes), alloc(args.bytes)
    ch = comm.memory_channel(peer, src, inbox).device_handle()
    res: dict = {"bytes": args.bytes, "blocks": args.blocks, "threads": args.threads}

    sweep = {}
    grids = [(args.blocks, args.threads)] + ([] if IS_SIM else [(264, 512), (132, 512), (66, 1024), (32, 1024),
                                                                 (16, 1024), (32, 512), (8, 1024)])
    for blocks, threads in grids:
        def put_one_way():
            if comm.rank == 0:
                put_kernel[blocks, threads](ch, args.bytes)

        timed(put_one_way, 2, world)
        sweep[f"{blocks}x{threads}"] = args.bytes / timed(put_one_way, args.reps, world) / 1e6
    best = max(sweep, key=sweep.get)
    res["put_oneway_GBps_by_grid"] = sweep
    res["put_oneway_GBps"], res["put_grid"] = sweep[best], best
    blocks, threads = (int(x) for x in best.split("x"))
    for name, kern in [("write_only", write_only_kernel), ("get", get_kernel)]:
        def one_way(kern=kern):
            if comm.rank == 0:
                kern[blocks, threads](ch, args.bytes)
        timed(one_way, 2, world)
        res[f"{name}_oneway_GBps"] = args.bytes / timed(one_way, args.reps, world) / 1e6
    res["put_bidir_GBps_per_direction"] = args.bytes / timed(
        lambda: put_kernel[blocks, threads](ch, args.bytes), args.reps, world) / 1e6

    iters = 20 if IS_SIM else 10000
    initiator = comm.rank == 0
    signal_pingpong[1, 1](ch, 100, initiator)
    res["signal_oneway_us"] = timed(lambda: signal_pingpong[1, 1](ch, iters, initiator), 5, world) * 1e3 / (2 * iters)
    flag = [1]

    def packets(ll8):
        packet_pingpong[1, 1](ch, iters, initiator, flag[0], ll8)
        flag[0] += iters

    packets(False)
    res["ll16_oneway_us"] = timed(lambda: packets(False), 5, world) * 1e3 / (2 * iters)
    res["ll8_oneway_us"] = timed(lambda: packets(True), 5, world) * 1e3 / (2 * iters)
    comm.check_device_errors()
    try:
        if IS_SIM:
            raise ImportError("the CUDA simulator has no NCCL")
        res.update(nccl_reference(comm.rank, args.bytes, args.reps))
    except ImportError as exc:
        res["nccl"] = f"not measured: {exc}"
    report(comm.rank, res, args.json)
    comm.close()


if __name__ == "__main__":
    main()

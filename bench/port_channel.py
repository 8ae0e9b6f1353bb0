"""PortChannel benchmarks on 2 GPUs: ``mpirun -np 2 python bench/port_channel.py [--json FILE]``.

Measures, with many operations inside one kernel so that launch cost is amortised (median of
repeats): CudaIpc put bandwidth (128 MB put_with_signal, acknowledged by the peer); 1 KB
put+signal+wait one-way latency (ping-pong); push-to-completion latency (put_with_signal_and_flush);
proxy throughput in triggers/s (0-byte puts, which the loop validates and skips, and signals);
and the same bandwidth, latency and signal rate over the Ethernet transport on loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from mpi4py import MPI

import pymscclpp  # noqa: F401  (chooses the backend before numba.cuda loads)
from numba import cuda

import pymscclpp.channels.port_channel as pc
from pymscclpp.proxy import ProxyService
from pymscclpp.runtime.communicator import Communicator
from pymscclpp.runtime.memory import alloc


@cuda.jit
def put_ack(ch, nbytes, iters, initiator):
    """Initiator: put_with_signal ``nbytes`` then wait for the peer's ack; the peer waits then acks."""
    if cuda.threadIdx.x == 0:
        for _ in range(iters):
            if initiator:
                pc.put_with_signal(ch, 0, 0, nbytes)
                pc.wait(ch)
            else:
                pc.wait(ch)
                pc.signal(ch)
        pc.flush(ch)


@cuda.jit
def pingpong(ch, nbytes, iters, initiator):
    """1 KB put+signal+wait ping-pong: both sides put, the initiator first."""
    if cuda.threadIdx.x == 0:
        for _ in range(iters):
            if initiator:
                pc.put_with_signal(ch, 0, 0, nbytes)
                pc.wait(ch)
            else:
                pc.wait(ch)
                pc.put_with_signal(ch, 0, 0, nbytes)
        pc.flush(ch)


@cuda.jit
def push_to_completion(ch, nbytes, iters):
    if cuda.threadIdx.x == 0:
        for _ in range(iters):
            pc.put_with_signal_and_flush(ch, 0, 0, nbytes)


@cuda.jit
def trigger_storm(ch, iters, signals):
    """``iters`` triggers from one thread: signals, or 0-byte puts (validated, nothing to copy)."""
    if cuda.threadIdx.x == 0:
        for _ in range(iters):
            if signals:
                pc.signal(ch)
            else:
                pc.put(ch, 0, 0, 0)
        pc.flush(ch)


def timed(fn, reps: int, world) -> float:
    """Median milliseconds of ``fn()`` (a kernel launch, until it finished) over ``reps`` runs, ranks started
    together; wall clock, so that it also works on the simulator."""
    times = []
    for _ in range(reps):
        world.Barrier()
        start = time.perf_counter()
        fn()
        cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def measure(comm, world, transport: str, big: int, reps: int, storm: int) -> dict:
    """Bandwidth, latency and trigger rate of PortChannels over ``transport`` between the two ranks."""
    peer, initiator = 1 - comm.rank, comm.rank == 0
    proxy = ProxyService(comm, fifo_size=512, transport=transport)
    buf = alloc(big)
    handle = proxy.connect(peer, buf).device_handle()
    proxy.start()
    out: dict = {}
    try:
        iters = 5
        put_ack[1, 1](handle, big, 1, initiator)
        ms = timed(lambda: put_ack[1, 1](handle, big, iters, initiator), reps, world)
        out["put_GBps"] = big * iters / ms / 1e6
        lat_iters = 2000 if transport == "cuda_ipc" else 500
        pingpong[1, 1](handle, 1024, 50, initiator)
        ms = timed(lambda: pingpong[1, 1](handle, 1024, lat_iters, initiator), reps, world)
        out["put_signal_wait_1KB_oneway_us"] = ms * 1e3 / (2 * lat_iters)
        if initiator:
            push_to_completion[1, 1](handle, 1024, 50)
        ms = timed(lambda: push_to_completion[1, 1](handle, 1024, lat_iters) if initiator else None, reps, world)
        out["push_to_completion_1KB_us"] = ms * 1e3 / lat_iters if initiator else None
        for signals, key in ((False, "noop"), (True, "signal")):
            n = storm if transport == "cuda_ipc" or not signals else storm // 10
            ms = timed(lambda: trigger_storm[1, 1](handle, n, signals) if initiator else None, reps, world)
            out[f"proxy_{key}_triggers_per_s"] = n / ms * 1e3 if initiator else None
        world.Barrier()
        cuda.synchronize()
        proxy.check()
        comm.check_device_errors()
    finally:
        world.Barrier()
        proxy.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bytes", type=int, default=128 << 20)
    ap.add_argument("--eth-bytes", type=int, default=32 << 20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--storm", type=int, default=100_000)
    ap.add_argument("--json")
    args = ap.parse_args()
    os.environ.setdefault("PYMSCCLPP_SOCKET_ADDR", "127.0.0.1")
    world = MPI.COMM_WORLD
    comm = Communicator.from_mpi(world)
    if comm.size != 2:
        raise SystemExit("run with exactly 2 ranks")
    res = {"bytes": args.bytes, "eth_bytes": args.eth_bytes, "reps": args.reps}
    res["cuda_ipc"] = measure(comm, world, "cuda_ipc", args.bytes, args.reps, args.storm)
    res["ethernet_loopback"] = measure(comm, world, "ethernet", args.eth_bytes, max(2, args.reps // 2),
                                       args.storm)
    if comm.rank == 0:
        print(json.dumps(res, indent=1))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1)
    comm.close()


if __name__ == "__main__":
    main()

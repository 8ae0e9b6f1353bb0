"""PortChannel benchmarks on 2 GPUs: ``mpirun -np 2 python -m pymscclpp.bench --op port_channel [--json FILE]``.

Every number is timed on the device (``%globaltimer`` of the initiator's thread, so kernel launch
and the ranks' start skew are not counted: each timed kernel first does a signal handshake, so both
kernels run before the clock starts) and reported as the median over ``--reps`` launches, after one
warm-up launch of each kernel:

- ``put_GBps``: ``iters`` puts of ``--bytes`` back to back, then one signal and the peer's ack,
  bytes delivered (``bytes * iters``) over the time from the first put to the ack; ``put_GBps_by_size``
  does the same per size. ``put_ack_GBps``: one put_with_signal then the peer's ack per iteration.
- ``put_signal_wait_1KB_oneway_us``: 1 KB put_with_signal ping-pong, one-way = round trip / 2;
  ``signal_wait_oneway_us``: the same with 0 bytes (flag only).
- ``push_to_completion_1KB_us``: one put_with_signal_and_flush (push until the proxy popped it).
- ``proxy_{noop,signal}_triggers_per_s``: triggers from one thread (0-byte puts, which the loop
  validates and skips; signals), until the closing flush returned.
- CudaIpc only, ``ce_copy_GBps`` / ``ce_copy_4streams_GBps``: the copy engine's own rate for the same
  peer copy, issued from Python without proxy or kernel (1 stream, or 4 streams with a quarter each):
  the ceiling the proxy's put can reach.

Then the same over the Ethernet transport on loopback (``--eth-bytes``). ``info`` says how the proxy
ran (stream writes for flags, the CPUs of its thread and of the main thread).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
from mpi4py import MPI

import pymscclpp  # noqa: F401  (chooses the backend before numba.cuda loads)
from numba import cuda

import pymscclpp.channels.port_channel as pc
from pymscclpp.bench.report import report
from pymscclpp.channels.ptx import globaltimer
from pymscclpp.proxy import ProxyService, loop
from pymscclpp.runtime.backend import IS_SIM
from pymscclpp.runtime.communicator import Communicator
from pymscclpp.runtime.memory import alloc
from pymscclpp.transports import driver


@cuda.jit(device=True)
def _handshake(ch, initiator):
    """Both kernels are running once this returns (one signal each way)."""
    if initiator:
        pc.signal(ch)
        pc.wait(ch)
    else:
        pc.wait(ch)
        pc.signal(ch)


@cuda.jit(cache=True)
def put_bw(ch, nbytes, iters, initiator, out):
    """Initiator: ``iters`` puts back to back, one signal, then wait for the peer's ack; out[0] = ns."""
    if cuda.threadIdx.x == 0:
        _handshake(ch, initiator)
        t0 = globaltimer()
        if initiator:
            for _ in range(iters):
                pc.put(ch, 0, 0, nbytes)
            pc.signal(ch)
            pc.wait(ch)
        else:
            pc.wait(ch)
            pc.signal(ch)
        out[0] = globaltimer() - t0
        pc.flush(ch)


@cuda.jit(cache=True)
def pingpong(ch, nbytes, iters, echo, initiator, out):
    """The initiator put_with_signal's ``nbytes`` and waits; the peer answers with the same (``echo``) or with
    a bare signal (an ack), ``iters`` times; out[0] = ns."""
    if cuda.threadIdx.x == 0:
        _handshake(ch, initiator)
        t0 = globaltimer()
        for _ in range(iters):
            if initiator:
                pc.put_with_signal(ch, 0, 0, nbytes)
                pc.wait(ch)
            else:
                pc.wait(ch)
                if echo:
                    pc.put_with_signal(ch, 0, 0, nbytes)
                else:
                    pc.signal(ch)
        out[0] = globaltimer() - t0
        pc.flush(ch)


@cuda.jit(cache=True)
def push_to_completion(ch, nbytes, iters, out):
    """``iters`` put_with_signal_and_flush, each waiting until the proxy completed it; out[0] = ns."""
    if cuda.threadIdx.x == 0:
        t0 = globaltimer()
        for _ in range(iters):
            pc.put_with_signal_and_flush(ch, 0, 0, nbytes)
        out[0] = globaltimer() - t0


@cuda.jit(cache=True)
def trigger_storm(ch, iters, signals, out):
    """``iters`` triggers from one thread: signals, or 0-byte puts (validated, nothing to copy), then a
    flush; out[0] = ns until the flush returned."""
    if cuda.threadIdx.x == 0:
        t0 = globaltimer()
        for _ in range(iters):
            if signals:
                pc.signal(ch)
            else:
                pc.put(ch, 0, 0, 0)
        pc.flush(ch)
        out[0] = globaltimer() - t0


class Timer:
    """Device-timed launches: ``run(kernel, args)`` launches on both ranks (barrier first) and returns
    the initiator's ns; ``median`` runs one warm-up launch then ``reps`` timed ones."""

    def __init__(self, world, reps: int):
        self.world, self.reps = world, reps
        self.out = cuda.to_device(np.zeros(1, np.uint64))

    def run(self, kernel, *args) -> float:
        self.world.Barrier()
        kernel[1, 1](*args, self.out)
        cuda.synchronize()
        return float(self.out.copy_to_host()[0])

    def median(self, kernel, *args, active: bool = True) -> float | None:
        """Median ns; ``active=False``: this rank launches nothing (a one-sided kernel), returns None."""
        times = []
        for _ in range(self.reps + 1):
            if active:
                times.append(self.run(kernel, *args))
            else:
                self.world.Barrier()
        return statistics.median(times[1:]) if active else None


def ce_copy_GBps(proxy, ch, nbytes: int, iters: int, reps: int, nstreams: int, world, initiator: bool):
    """The copy engine alone: ``iters`` copies of ``nbytes`` from our buffer to the peer's (the put's
    source and destination), split over ``nstreams`` streams, timed on the host; median GB/s."""
    times = []
    streams = [driver.create_stream() for _ in range(nstreams)] if initiator else []
    dst = int(proxy._mem[ch.dst_id, loop.M_BASE])
    src = int(proxy._mem[ch.src_id, loop.M_BASE])
    part = (nbytes // nstreams) // 256 * 256
    try:
        for rep in range(reps + 1):
            world.Barrier()
            if not initiator:
                continue
            start = time.perf_counter()
            for _ in range(iters):
                for k, s in enumerate(streams):
                    n = part if k < nstreams - 1 else nbytes - part * (nstreams - 1)
                    driver.check(driver.copy_dtod_async(dst + k * part, src + k * part, n, s), "cuMemcpyDtoDAsync")
            for s in streams:
                driver.check(driver.stream_sync(s), "cuStreamSynchronize")
            if rep:
                times.append(time.perf_counter() - start)
    finally:
        for s in streams:
            driver.destroy_stream(s)
    world.Barrier()
    return nbytes * iters / statistics.median(times) / 1e9 if initiator else None


def measure(comm, world, transport: str, big: int, reps: int, storm: int, lat_iters: int | None = None,
            bw_total: int | None = None) -> dict:
    """Bandwidth, latency and trigger rate of PortChannels over ``transport`` between the two ranks.
    ``world`` needs only ``Barrier()``; ``lat_iters``/``bw_total`` shrink the runs (simulator smoke test)."""
    peer, initiator = 1 - comm.rank, comm.rank == 0
    ipc = transport == "cuda_ipc"
    proxy = ProxyService(comm, fifo_size=512, transport=transport)
    buf = alloc(big)
    ch = proxy.connect(peer, buf)
    handle = ch.device_handle()
    proxy.start()
    timer = Timer(world, reps)
    out: dict = {"info": {"proxy_stream_writes": proxy.stream_writes,
                          "proxy_cpus": sorted(proxy.cpus) if proxy.cpus else "inherited",
                          "main_cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None}}
    try:
        if ipc and not IS_SIM:
            out["ce_copy_GBps"] = ce_copy_GBps(proxy, ch, big, 8, reps, 1, world, initiator)
            out["ce_copy_4streams_GBps"] = ce_copy_GBps(proxy, ch, big, 8, reps, 4, world, initiator)
        sizes = sorted({s for s in ((1 << 20, 8 << 20, 32 << 20) if ipc else (1 << 20,)) if s < big} | {big})
        by_size = {}
        for size in sizes:
            total = bw_total or ((1 << 30) if ipc else (128 << 20))
            iters = int(max(4 if ipc else 2, min(200, total // size)))
            ns = timer.median(put_bw, handle, size, iters, initiator)
            by_size[str(size)] = size * iters / ns if initiator else None  # bytes/ns = GB/s
        out["put_GBps"] = by_size[str(big)]
        out["put_GBps_by_size"] = by_size
        iters = 8 if ipc else 4
        ns = timer.median(pingpong, handle, big, iters, False, initiator)
        out["put_ack_GBps"] = big * iters / ns if initiator else None
        lat_iters = lat_iters or (2000 if ipc else 500)
        ns = timer.median(pingpong, handle, 1024, lat_iters, True, initiator)
        out["put_signal_wait_1KB_oneway_us"] = ns / 1e3 / (2 * lat_iters) if initiator else None
        ns = timer.median(pingpong, handle, 0, lat_iters, True, initiator)
        out["signal_wait_oneway_us"] = ns / 1e3 / (2 * lat_iters) if initiator else None
        # one-sided from here on (the peer's token runs ahead of its waits: nothing waits on it later)
        ns = timer.median(push_to_completion, handle, 1024, lat_iters, active=initiator)
        out["push_to_completion_1KB_us"] = ns / 1e3 / lat_iters if initiator else None
        for signals, key in ((False, "noop"), (True, "signal")):
            n = storm if ipc else storm // 10  # (each Ethernet trigger is a Python round trip)
            ns = timer.median(trigger_storm, handle, n, signals, active=initiator)
            out[f"proxy_{key}_triggers_per_s"] = n / ns * 1e9 if initiator else None
        world.Barrier()
        cuda.synchronize()
        proxy.check()
        comm.check_device_errors()
    finally:
        world.Barrier()
        proxy.close()
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m pymscclpp.bench --op port_channel", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", type=int, default=128 << 20)
    ap.add_argument("--eth-bytes", type=int, default=32 << 20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--storm", type=int, default=100_000)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYMSCCLPP_SOCKET_ADDR", "127.0.0.1")
    world = MPI.COMM_WORLD
    comm = Communicator.from_mpi(world)
    if comm.size != 2:
        raise SystemExit("run with exactly 2 ranks")
    res = {"bytes": args.bytes, "eth_bytes": args.eth_bytes, "reps": args.reps, "timing": "device, median"}
    res["cuda_ipc"] = measure(comm, world, "cuda_ipc", args.bytes, args.reps, args.storm)
    if comm.rank == 0:
        print(json.dumps({"cuda_ipc": res["cuda_ipc"]}), flush=True)
    res["ethernet_loopback"] = measure(comm, world, "ethernet", args.eth_bytes, max(3, args.reps // 2),
                                       args.storm)
    report(comm.rank, res, args.json)
    comm.close()


if __name__ == "__main__":
    main()

"""All-reduce across hosts (the executor's plan from ``plan_for``) against the raw TCP bandwidth of the same pairs.

Hosts are faked: rank r is on host ``r // ranks_per_host`` (PYMSCCLPP_HOST_ID, unless already set), so the
ports between hosts run over Ethernet (TCP on loopback when all ranks share a machine). In the same run it
measures plain sockets between the ranks the plan pairs across hosts (same local index, both directions at
once, as the all-reduce drives them), then times the all-reduce and reports how much of that bandwidth it
reaches: each rank sends its block (1 / L of the message) to the H - 1 ranks of its local index on other
hosts (and receives as much), so ``inter_host_GBps`` is (H - 1) / L of the message over the whole call.

GPU: ``mpirun -np 4 python bench/multihost.py --ranks-per-host 2 --sizes 1M,16M,64M,256M``.
Simulator (proves it runs): ``python bench/multihost.py --spawn 4 --ranks-per-host 2 --sizes 4K --iters 2``.
Prints JSON (rank 0).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import threading
import time

TAG = 0x4D48  # bootstrap tag of the socket addresses


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def _partner(rank: int, local: int, size: int) -> int:
    """The rank of the same local index on the next host (the all-reduce's inter-host pairing for 2 hosts)."""
    return (rank + local) % size


def tcp_gbps(comm, local: int, nbytes: int, iters: int) -> float:
    """GB/s one way between this rank and its partner, both sending ``nbytes`` at once, ``iters`` times."""
    peer = _partner(comm.rank, local, comm.size)
    if comm.rank < peer:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            comm.bootstrap.send(str(listener.getsockname()[1]).encode(), peer, TAG)
            sock, _ = listener.accept()
    else:
        port = int(comm.bootstrap.recv(peer, TAG))
        sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    payload, inbox = bytearray(nbytes), bytearray(nbytes)

    def send() -> None:
        for _ in range(iters):
            sock.sendall(payload)

    comm.barrier()
    start = time.perf_counter()
    sender = threading.Thread(target=send)
    sender.start()
    view = memoryview(inbox)
    for _ in range(iters):
        got = 0
        while got < nbytes:
            got += sock.recv_into(view[got:], nbytes - got)
    sender.join()
    took = time.perf_counter() - start
    sock.close()
    return nbytes * iters / took / 1e9


def allreduce_seconds(comm, ex, plan, nbytes: int, iters: int) -> float:
    """Seconds per all-reduce of ``nbytes`` float32 bytes (after one warm-up call that sets up and checks)."""
    import numpy as np
    from numba import cuda
    count = nbytes // 4
    send = cuda.to_device(np.full(count, comm.rank + 1, np.float32))
    recv = cuda.to_device(np.zeros(count, np.float32))
    ex.execute(plan, send, recv)
    cuda.synchronize()
    want = comm.size * (comm.size + 1) / 2
    got = recv.copy_to_host()
    if not np.all(got == want):
        raise AssertionError(f"rank {comm.rank}: all-reduce gave {got[:4]}..., expected {want}")
    comm.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        ex.execute(plan, send, recv)
    cuda.synchronize()
    comm.check_device_errors()
    ex.check()
    return (time.perf_counter() - start) / iters


def measure(comm, local: int, sizes: list[int], iters: int, instances: int = 1) -> list[dict]:
    from pymscclpp.executor import ExecutionPlan, Executor
    from pymscclpp.language.programs.hierarchical import plan_for
    hosts = [r // local for r in range(comm.size)]
    plan = ExecutionPlan.from_plan(plan_for("allreduce", hosts, instances=instances))
    ex = Executor(comm)
    rows = []
    try:
        for nbytes in sizes:
            raw = tcp_gbps(comm, local, max(nbytes // local, 1 << 16), iters)
            seconds = allreduce_seconds(comm, ex, plan, nbytes, iters)
            h = comm.size // local
            link = nbytes / local * (h - 1) / seconds / 1e9  # bytes each rank sends to other hosts per call
            rows.append(dict(bytes=nbytes, plan=plan.name, us=seconds * 1e6, algbw_GBps=nbytes / seconds / 1e9,
                             inter_host_GBps=link, raw_tcp_GBps=raw, fraction_of_tcp=link / raw))
    finally:
        ex.close()
    return rows


def _rank_main(rank: int, size: int, uid: bytes, local: int, sizes: list[int], iters: int, instances: int,
               out) -> None:
    os.environ.setdefault("PYMSCCLPP_HOST_ID", f"host{rank // local}")
    from pymscclpp import Communicator
    from pymscclpp.runtime.bootstrap import UniqueId
    with Communicator.from_unique_id(UniqueId.from_bytes(uid), rank, size) as comm:
        rows = measure(comm, local, sizes, iters, instances)
    if rank == 0:
        out.put(rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks-per-host", type=int, default=2)
    parser.add_argument("--sizes", default="1M,16M,64M", help="comma-separated message sizes (K, M, G suffixes)")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--instances", type=int, default=1, help="thread blocks the plan is replicated over")
    parser.add_argument("--spawn", type=int, default=0, help="start this many local rank processes (no MPI)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    sizes = [_size(s) for s in args.sizes.split(",")]
    if args.spawn and args.spawn != 2 * args.ranks_per_host:
        parser.error("the benchmark pairs two hosts: --spawn must be 2 x --ranks-per-host")
    if args.spawn:
        from pymscclpp.runtime.bootstrap import get_unique_id
        ctx = mp.get_context("spawn")
        out, uid = ctx.Queue(), get_unique_id(addr="127.0.0.1").to_bytes()
        procs = [ctx.Process(target=_rank_main, args=(r, args.spawn, uid, args.ranks_per_host, sizes, args.iters,
                                                                  args.instances, out))
                 for r in range(args.spawn)]
        for p in procs:
            p.start()
        rows = out.get(timeout=1800)
        for p in procs:
            p.join(60)
        if any(p.exitcode for p in procs):
            raise SystemExit(f"rank exit codes {[p.exitcode for p in procs]}")
    else:
        rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
        os.environ.setdefault("PYMSCCLPP_HOST_ID", f"host{rank // args.ranks_per_host}")
        from pymscclpp import Communicator
        with Communicator.from_mpi() as comm:
            rows = measure(comm, args.ranks_per_host, sizes, args.iters, args.instances)
            if comm.rank != 0:
                return
    print(json.dumps(rows, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()

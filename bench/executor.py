"""DSL-generated all-reduce vs the hand-written kernel of the same algorithm, and executor start-up times.

``mpirun -np 2 python bench/executor.py [--json FILE] [--sizes 1024,1048576,268435456]``. For each size the
Collective API's algorithm (``pymscclpp.algos.collection``: one-shot LL packets for small messages, one-shot
puts + signals for large ones) is written in the DSL with the same grid (``instances`` = its blocks,
``num_threads_per_block`` = its threads), run by the executor, and both are timed with CUDA events over many
back-to-back calls (median of several rounds, alternating). Also reports the executor's first-compile time
(fresh kernel cache), its cached start (generated module and numba disk cache reloaded, as a second process
would), setup time, and host-side cost per call. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
from mpi4py import MPI

import pymscclpp
from numba import cuda

from pymscclpp.algos import Call, CallBuffer
from pymscclpp.executor import ExecutionPlan, Executor
from pymscclpp.executor import cache as kernel_cache
from pymscclpp.language.channel import MemoryChannel
from pymscclpp.language.collectives import AllReduce
from pymscclpp.language.general import JSON
from pymscclpp.language.program import CollectiveProgram
from pymscclpp.language.rank import Buffer, Rank
from pymscclpp.runtime.backend import IS_SIM
from pymscclpp.runtime.buffers import as_bytes, buffer_info


def oneshot_allreduce(n: int, protocol: str, instances: int, threads: int) -> dict:
    """One-shot all-pairs all-reduce: every rank sends its input to every peer's scratch (LL packets, or puts
    then a signal), then reduces all ranks' data; thread block t handles chunk t (``instances`` of them)."""
    packets = protocol == "packet"
    with CollectiveProgram(f"allreduce_oneshot_{protocol}", AllReduce(n, 1, False), n, instances=instances,
                           protocol=protocol, use_double_scratch_buffer=True, num_threads_per_block=threads):
        ranks = [Rank(r) for r in range(n)]
        scratch = [Buffer(r, (n - 1) * n) for r in range(n)]  # a slot of n chunks (a whole input) per peer
        ch = {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}

        def slot(owner: int, sender: int):
            at = (sender if sender < owner else sender - 1) * n
            return scratch[owner][at:at + n]

        for r in range(n):
            inp, out = ranks[r].get_input_buffer(), ranks[r].get_output_buffer()
            peers = [p for p in range(n) if p != r]
            for p in peers:
                (ch[r, p].put_packets if packets else ch[r, p].put)(slot(p, r), inp[0:n], tb=0)
            if not packets:
                for p in peers:
                    ch[r, p].signal(tb=0)
                for p in peers:
                    ch[r, p].wait(tb=0)
            ranks[r].reduce(inp[0:n], [slot(r, p) for p in peers], tb=0, dst_chunk=out[0:n], packet=packets)
        return json.loads(JSON())


def matching_plan(comm, nbytes: int) -> tuple[str, ExecutionPlan]:
    """The hand-written algorithm the Collective API picks at ``nbytes``, and its DSL twin."""
    name = next(algo for limit, algo in comm.algorithms.table["all_reduce"] if nbytes <= limit)
    impl = comm.algorithms.get("all_reduce", name)
    protocol = "packet" if name.startswith("packet") else "simple"
    return name, ExecutionPlan.from_plan(oneshot_allreduce(comm.size, protocol, impl.blocks, impl.threads))


def device_us(fn, iters: int) -> float:
    """Microseconds per call of ``fn`` over ``iters`` back-to-back calls, by CUDA events on the default stream."""
    start, end = cuda.event(), cuda.event()
    MPI.COMM_WORLD.Barrier()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


def host_us(fn, iters: int) -> float:
    """Host microseconds per call (launch cost; the GPU runs behind)."""
    cuda.synchronize()
    MPI.COMM_WORLD.Barrier()
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    elapsed = time.perf_counter() - t
    cuda.synchronize()
    return elapsed * 1e6 / iters


def start_times(comm, xplan: ExecutionPlan, send, recv) -> dict:
    """First-compile (fresh kernel cache) and cached-start (module and numba disk cache reloaded) times."""
    out = {}
    for phase in ("first", "cached"):
        kernel_cache._modules.clear()
        ex = Executor(comm)
        MPI.COMM_WORLD.Barrier()
        t = time.perf_counter()
        ex.prepare(xplan, send, recv)
        total = time.perf_counter() - t
        stats = ex.stats[-1]
        out[phase] = {"total_s": total, "source_s": stats.source_s, "compile_s": stats.compile_s,
                      "disk_cache_hit": stats.disk_cache_hit, "setup_s": total - stats.source_s - stats.compile_s}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--sizes", default=f"{1 << 10},{1 << 20},{256 << 20}")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("PYMSCCLPP_CACHE_DIR", tempfile.mkdtemp(prefix="pymscclpp-bench-cache-"))
    comm = pymscclpp.Communicator.from_mpi(MPI.COMM_WORLD)
    ex = Executor(comm)
    results = {"backend": pymscclpp.BACKEND, "ranks": comm.size, "dtype": "float32", "sizes": []}
    for nbytes in (int(s) for s in args.sizes.split(",")):
        algo, xplan = matching_plan(comm, nbytes)
        count = nbytes // 4
        send = cuda.to_device(np.random.default_rng(comm.rank).standard_normal(count).astype(np.float32))
        recv = cuda.device_array(count, np.float32)
        recv_hand = cuda.device_array(count, np.float32)
        row = {"bytes": nbytes, "algorithm": algo, "plan": xplan.name, "blocks": len(xplan.plan.gpus[0].threadblocks),
               "threads": xplan.plan.num_threads_per_block}
        if nbytes == 1 << 20 or "start" not in results:
            results.setdefault("start", {})[f"{nbytes}"] = start_times(comm, xplan, send, recv)

        prepared = ex.prepare(xplan, send, recv)
        impl = comm.algorithms.get("all_reduce", algo)
        call = Call(collective="all_reduce", sendbuf=send, recvbuf=recv_hand,
                    send=CallBuffer(buffer_info(send).ptr, as_bytes(send) if IS_SIM else None),
                    recv=CallBuffer(buffer_info(recv_hand).ptr, as_bytes(recv_hand) if IS_SIM else None),
                    peer_bytes=nbytes, message_bytes=nbytes, dtype="float32", op="sum", root=0, stream=0,
                    in_place=False)

        def dsl():  # both sides through their prepared launches, so neither pays Python argument handling
            prepared.run(0)

        def hand():
            impl.launch(call)

        dsl(), hand()
        cuda.synchronize()
        comm.check_device_errors()
        row["max_abs_diff"] = float(np.abs(recv.copy_to_host() - recv_hand.copy_to_host()).max())
        iters = 2 if pymscclpp.BACKEND == "sim" else max(5, min(2000, (1 << 30) // max(nbytes, 1) // 4))
        dsl_t, hand_t = [], []
        for _ in range(args.rounds):
            dsl_t.append(device_us(dsl, iters))
            hand_t.append(device_us(hand, iters))
        row.update(dsl_us=statistics.median(dsl_t), hand_us=statistics.median(hand_t), iters=iters,
                   dsl_host_us=host_us(dsl, min(iters, 200)), hand_host_us=host_us(hand, min(iters, 200)))
        row["ratio"] = row["dsl_us"] / row["hand_us"]
        results["sizes"].append(row)
        comm.check_device_errors()
    if comm.rank == 0:
        text = json.dumps(results, indent=2)
        print(text, flush=True)
        if args.json:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    comm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

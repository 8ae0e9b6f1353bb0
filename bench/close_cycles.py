"""Make, use and close many communicators in turn on the GPU, the garbage collector off, and report what each
rank holds before and after: descriptors, shared-memory segments, threads, memory mappings (IPC included) and the
device's free memory. Usage: mpirun -np N python3 bench/close_cycles.py [--cycles 1000] [--register]"""

from __future__ import annotations

import argparse
import gc
import os
import threading

import numpy as np
from mpi4py import MPI
from numba import cuda

import pymscclpp


def held(world: MPI.Comm) -> dict[str, int]:
    """What this process holds now; device memory in use on the whole GPU once every rank has flushed its frees."""
    cuda.synchronize()
    cuda.current_context().deallocations.clear()  # numba defers frees: flush them before counting
    world.Barrier()
    free, total = cuda.current_context().get_memory_info()
    with open("/proc/self/maps") as maps:
        mappings = sum(1 for _ in maps)
    segments = [s for s in os.listdir("/dev/shm") if s.startswith("pymscclpp") and f"-{os.getpid()}-" in s]
    return {"fds": len(os.listdir("/proc/self/fd")), "shm": len(segments), "threads": threading.active_count(),
            "maps": mappings, "gpu_used_mib": (total - free) >> 20}


def cycle(world: MPI.Comm, nbytes: int, register: bool) -> None:
    """One communicator: made over MPI, one checked all-reduce (zero-copy on a registered buffer), closed."""
    with pymscclpp.Communicator.from_mpi(world) as comm:
        x = cuda.to_device(np.ones(nbytes // 4, np.float32))
        if register:
            comm.register_buffer(x)
        comm.all_reduce(x)
        cuda.synchronize()
        comm.check_device_errors()
        if x[:4].copy_to_host().tolist() != [float(comm.size)] * 4:
            raise AssertionError("all-reduce result wrong")
        if register:
            comm.deregister_buffer(x)
        del x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--bytes", type=int, default=1 << 20)
    ap.add_argument("--register", action="store_true")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    cycle(world, args.bytes, args.register)  # the first one loads and compiles what later ones reuse
    world.Barrier()
    gc.collect()
    gc.disable()
    before = held(world)
    for _ in range(args.cycles):
        cycle(world, args.bytes, args.register)
    world.Barrier()
    after = held(world)
    gc.enable()
    rows = world.gather((world.rank, before, after), root=0)
    if world.rank == 0:
        for rank, b, a in rows:
            grown = [k for k in b if a[k] > b[k] + (2 if k == "maps" else 0)]  # the heap may add a mapping or two
            print(f"CLOSE rank {rank} cycles {args.cycles} register {args.register} before {b} after {a} "
                  f"{'LEAK of ' + ', '.join(grown) if grown else 'baseline'}", flush=True)


if __name__ == "__main__":
    main()

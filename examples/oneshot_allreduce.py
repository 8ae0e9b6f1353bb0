"""One-shot all-reduce written by hand with MemoryChannel: the docs/tutorial.md example.

Every rank puts its input into slot ``rank`` of each peer's inbox, signals, waits for all
peers, then sums. Run: ``.venv/bin/mpiexec -n 2 .venv/bin/python examples/oneshot_allreduce.py`` (GPU or simulator).
"""
import numpy as np
from mpi4py import MPI

import pymscclpp
import pymscclpp.channels.memory_channel as mc
from numba import cuda
from pymscclpp.runtime.communicator import Communicator
from pymscclpp.runtime.memory import alloc, view_as


@cuda.jit
def allreduce(chans, inp, inbox, out, n, rank):
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    for p in range(len(chans)):  # my input -> slot `rank` of every peer's inbox
        mc.put(chans[p], rank * n * 4, 0, n * 4, tid, nt)
    cuda.syncthreads()
    if tid < len(chans):  # one thread per peer: "my data is there", then "is theirs here?"
        mc.signal(chans[tid])
        mc.wait(chans[tid])
    cuda.syncthreads()
    for i in range(tid, n, nt):
        acc = inp[i]
        for p in range(len(chans)):
            acc += inbox[chans[p].peer * n + i]
        out[i] = acc


def main(n: int = 1000) -> None:
    comm = Communicator.from_mpi(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    inp = alloc(n * 4)                      # registered-capable device memory
    inbox = alloc(size * n * 4)             # peers write their inputs here
    x = np.random.default_rng(rank).standard_normal(n).astype(np.float32)
    view_as(inp, np.float32).copy_to_device(x)
    peers = [p for p in range(size) if p != rank]
    chans = comm.memory_channels(peers, src=inp, inbox=inbox)
    handles = tuple(chans[p].device_handle() for p in peers)
    out = cuda.device_array(n, np.float32)
    allreduce[1, 64](handles, view_as(inp, np.float32), view_as(inbox, np.float32), out, n, rank)
    cuda.synchronize()
    comm.check_device_errors()
    expected = sum(np.random.default_rng(r).standard_normal(n).astype(np.float32) for r in range(size))
    err = np.abs(out.copy_to_host() - expected).max()
    assert err < 1e-4, f"rank {rank}: max error {err}"
    print(f"rank {rank}/{size} ({pymscclpp.BACKEND}): one-shot all-reduce of {n} floats OK (max error {err:.1e})")
    comm.close()


if __name__ == "__main__":
    main()

"""Your own all-gather kernel as a pymscclpp algorithm: written with MemoryChannel, registered on the
communicator, then picked by ``comm.all_gather`` like a built-in one (docs/algorithms.md). It gates on the call
check that runs ahead of it, so ranks whose calls differ raise CallMismatchError with its output untouched.

Run: ``.venv/bin/mpiexec -n 2 .venv/bin/python examples/custom_algorithm.py`` (GPU or simulator).
"""
import numpy as np
from mpi4py import MPI

import pymscclpp  # before numba.cuda: it chooses the GPU or the simulator
import pymscclpp.channels.memory_channel as mc
from numba import cuda
from pymscclpp.algos import KernelAlgorithm
from pymscclpp.callcheck.area import callcheck
from pymscclpp.callcheck.device import call_agreed
from pymscclpp.channels.primitives import copy_bytes
from pymscclpp.runtime.launch import Launch
from pymscclpp.runtime.memory import alloc

MAX_BYTES = 1 << 16  # per rank


@cuda.jit
def gather(verdict, chans, inp, inbox, out, nbytes, rank):
    """Unless the ranks' calls differ: write our input into slot ``rank`` of every peer's inbox, signal, wait, copy
    every peer's slot out."""
    if not call_agreed(verdict):  # the call check ran just before, on this stream
        return
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    for p in range(len(chans)):
        mc.write(chans[p], rank * nbytes, inp, 0, nbytes, tid, nt)
    copy_bytes(out, rank * nbytes, inp, 0, nbytes, tid, nt)
    cuda.syncthreads()
    if tid < len(chans):
        mc.signal(chans[tid])
        mc.wait(chans[tid])
    cuda.syncthreads()
    for p in range(len(chans)):
        peer = chans[p].peer
        copy_bytes(out, peer * nbytes, inbox, peer * nbytes, nbytes, tid, nt)
    cuda.syncthreads()
    if tid < len(chans):  # every peer has read its slots: the inbox may be written again by the next call
        mc.signal(chans[tid])
        mc.wait(chans[tid])


def setup(comm) -> Launch:
    """Once per communicator, on every rank: an inbox for every rank's slot, channels to the peers, a launch."""
    verdict = callcheck(comm).verdict
    inbox = alloc(comm.size * MAX_BYTES)
    peers = [p for p in range(comm.size) if p != comm.rank]
    chans = comm.memory_channels(peers, src=inbox, inbox=inbox)
    view = chans[peers[0]].inbox
    return Launch(gather, 1, 64, {"verdict": verdict, "chans": tuple(chans[p].device_handle() for p in peers),
                                  "inp": view, "inbox": view, "out": view, "nbytes": 0, "rank": comm.rank})


def launch(state: Launch, call) -> None:
    """Per call: point the launch at the caller's buffers and size, then issue it on the caller's stream."""
    state.set_buffer("inp", call.send.ptr, call.peer_bytes, call.send.array)
    state.set_buffer("out", call.recv.ptr, call.message_bytes, call.recv.array)  # all_gather: the gathered output
    state.set_int("nbytes", call.peer_bytes)
    state.launch(call.stream)


def my_all_gather(size: int) -> KernelAlgorithm:
    """The algorithm, for messages (the gathered output) of up to ``size * MAX_BYTES`` bytes."""
    return KernelAlgorithm("my_gather", "all_gather", setup, launch, message_range=(0, size * MAX_BYTES))


def main(n: int = 1000) -> None:
    comm = pymscclpp.Communicator.from_mpi(MPI.COMM_WORLD)
    comm.register_algorithm(my_all_gather(comm.size))  # preferred for every call it can serve
    x = cuda.to_device(np.full(n, comm.rank + 1, np.float32))
    out = cuda.device_array(n * comm.size, np.float32)
    comm.all_gather(x, out)
    cuda.synchronize()
    comm.check_device_errors()
    expected = np.repeat(np.arange(1, comm.size + 1, dtype=np.float32), n)
    assert np.array_equal(out.copy_to_host(), expected), f"rank {comm.rank}: wrong all-gather"
    print(f"rank {comm.rank}/{comm.size} ({pymscclpp.BACKEND}): my_gather all-gather of {n} floats per rank OK")
    comm.close()


if __name__ == "__main__":
    main()

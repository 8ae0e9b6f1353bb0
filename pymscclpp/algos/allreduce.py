"""All-reduce algorithms: set up scratch and channels once per communicator, then launch per call.

``PacketAllReduce`` (LL16, one packet hop: small messages) and ``SimpleAllReduce`` (puts plus one
signal per block: large messages). Each owns its scratch, channels (one semaphore per block) and
per-block flags; the grid is fixed per algorithm so every block's flag parity stays in step.
"""

from __future__ import annotations

import numpy as np

from ..runtime.memory import alloc
from . import allreduce_kernels as k
from .launch import PatchableLaunch


class _OneShot:
    """Scratch of ``slots * slot_bytes`` per half, channels to every peer, fixed grid."""

    name = "base"
    kernel = None
    max_bytes = float("inf")

    def __init__(self, comm, slot_bytes: int, blocks: int, threads: int):
        from numba import cuda
        self.comm, self.blocks, self.threads, self.slot_bytes = comm, blocks, threads, slot_bytes
        size = comm.size
        self.scratch = alloc(2 * size * slot_bytes)
        peers = [p for p in range(size) if p != comm.rank]
        chans = comm.memory_channels(peers, src=self.scratch, inbox=self.scratch, semaphores=blocks)
        self.handles = tuple(chans[p].device_handle() for p in peers)
        self.scratch_bytes = chans[peers[0]].inbox
        self.flags = cuda.to_device(np.zeros(blocks, np.uint32))

        args = (self.handles, self.scratch_bytes, self.scratch_bytes, self.scratch_bytes, self.flags, 0,
                slot_bytes, 0, 0, comm.rank, size)
        self._launch = PatchableLaunch(self.kernel, blocks, threads, args)

    def launch(self, send, recv, nbytes: int, kind: int, op: int, stream: int) -> None:
        """Run on the raw stream handle ``stream``; ``send``/``recv`` are (device address, byte array or
        None) pairs. Not thread-safe: one call at a time per communicator, as with NCCL."""
        launch = self._launch
        launch.set_bytes(1, send[0], nbytes, send[1])
        launch.set_bytes(2, recv[0], nbytes, recv[1])
        launch.set_int(5, nbytes)
        launch.set_int(7, kind)
        launch.set_int(8, op)
        launch.launch(stream)


class PacketAllReduce(_OneShot):
    """LL16 one-shot all-pairs all-reduce for messages up to ``max_bytes``."""

    name = "packet"
    kernel = staticmethod(k.allreduce_packets)

    def __init__(self, comm, max_bytes: int, blocks: int, threads: int):
        super().__init__(comm, 2 * max_bytes, blocks, threads)
        self.max_bytes = max_bytes


class SimpleAllReduce(_OneShot):
    """Put-and-signal one-shot all-reduce, in rounds of ``round_bytes``: any size."""

    name = "simple"
    kernel = staticmethod(k.allreduce_simple)

    def __init__(self, comm, round_bytes: int, blocks: int, threads: int):
        super().__init__(comm, round_bytes, blocks, threads)

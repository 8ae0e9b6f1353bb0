"""``OneShot``: the set-up every one-shot collective shares (scratch, channels, flags, a prepared launch on
a fixed grid), built once per communicator and patched per call.
"""

from __future__ import annotations

import numpy as np

from ..runtime.memory import alloc
from .launch import PatchableLaunch


class OneShot:
    """Scratch of two halves of ``size`` slots (one for ``rooted`` collectives), MemoryChannels to every peer
    with one semaphore per block, per-block flags, and a fixed grid so every block's flag advances in step.

    A call moves ``nbytes`` per slot (what one rank sends one peer); ``max_bytes`` bounds the selection size
    (the buffer holding every slot). Kernels take ``(chans, inp, out, scratch, flags, nbytes, slot_bytes,
    rank, nranks, *params)``, ``params`` being ``nparams`` integers given to ``launch``."""

    kernels: dict = {}
    send_all = recv_all = rooted = False  # the send / receive buffer holds ``size`` slots; one sender
    nparams = 0

    def __init__(self, comm, name: str, slot_bytes: int, blocks: int, threads: int, max_bytes: float):
        from numba import cuda
        self.comm, self.name, self.max_bytes, self.blocks, self.threads = comm, name, max_bytes, blocks, threads
        size = comm.size
        self.scratch = alloc(2 * (1 if self.rooted else size) * slot_bytes)
        peers = [p for p in range(size) if p != comm.rank]
        chans = comm.memory_channels(peers, src=self.scratch, inbox=self.scratch, semaphores=blocks)
        handles = tuple(chans[p].device_handle() for p in peers)
        scratch = chans[peers[0]].inbox
        self.flags = cuda.to_device(np.zeros(blocks, np.uint32))
        args = (handles, scratch, scratch, scratch, self.flags, 0, slot_bytes, comm.rank, size) + (0,) * self.nparams
        self._launch = PatchableLaunch(self.kernels[name], blocks, threads, args)

    @classmethod
    def packet(cls, comm, max_bytes: int, blocks: int, threads: int) -> "OneShot":
        """The LL16 variant (one packet hop) for selection sizes up to ``max_bytes``."""
        per_slot = max_bytes // comm.size if cls.send_all or cls.recv_all else max_bytes
        return cls(comm, "packet", (per_slot + 7) // 8 * 16, blocks, threads, max_bytes)

    @classmethod
    def simple(cls, comm, round_bytes: int, blocks: int, threads: int) -> "OneShot":
        """The put-and-signal variant, in rounds of ``round_bytes`` (a multiple of 16) per slot: any size."""
        return cls(comm, "simple", round_bytes, blocks, threads, float("inf"))

    def launch(self, send, recv, nbytes: int, stream: int, *params: int) -> None:
        """Run on the raw stream handle ``stream``; ``send``/``recv`` are (device address, byte array or None)
        pairs. Not thread-safe: one call at a time per communicator, as with NCCL."""
        size, launch = self.comm.size, self._launch
        launch.set_bytes(1, send[0], nbytes * (size if self.send_all else 1), send[1])
        launch.set_bytes(2, recv[0], nbytes * (size if self.recv_all else 1), recv[1])
        launch.set_int(5, nbytes)
        for i, value in enumerate(params):
            launch.set_int(9 + i, value)
        launch.launch(stream)

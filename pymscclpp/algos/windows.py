"""Buffers registered with a communicator for zero-copy collectives: each rank registers its own buffer in the
same order (a collective call), and gets a MemoryChannel to every peer's buffer of that registration, so a kernel
reads peers' inputs and writes peers' outputs directly, with no scratch copy (NCCL's window registration)."""

from __future__ import annotations

from ..errors import InvalidUsageError
from ..runtime.buffers import buffer_info


class Window:
    """One registration: this rank's buffer (start address and bytes) and its channels to every peer's buffer."""

    def __init__(self, comm, buf):
        info = buffer_info(buf, comm.device)
        self.address, self.nbytes = info.ptr, info.nbytes
        peers = [p for p in range(comm.size) if p != comm.rank]
        self.channels = comm.memory_channels(peers, src=buf, inbox=buf)
        self.handles = tuple(self.channels[p].device_handle() for p in peers)
        self.local = self.channels[peers[0]].inbox if peers else None  # our buffer as the uint8 array kernels take

    def close(self) -> None:
        for ch in self.channels.values():
            ch.close()
        self.channels = {}
        self.handles = ()


class Windows:
    """The communicator's registered buffers by start address (``comm.extension("windows", Windows)``)."""

    def __init__(self, comm):
        self.comm = comm
        self._by_address: dict[int, Window] = {}
        self.generation = 0  # bumped by every deregistration: launches prepared for a window are stale

    def register(self, buf) -> None:
        """Register ``buf`` (collective: every rank registers its own, in the same order)."""
        info = buffer_info(buf, self.comm.device)
        if info.ptr in self._by_address:
            raise InvalidUsageError(f"rank {self.comm.rank}: register_buffer: a buffer at {info.ptr:#x} is "
                                    "registered already")
        with self.comm.setup("register_buffer"):
            self._by_address[info.ptr] = Window(self.comm, buf)

    def deregister(self, buf) -> None:
        """Forget the registration of ``buf`` (every rank alike); calls on it run with scratch copies again."""
        info = buffer_info(buf, self.comm.device)
        window = self._by_address.pop(info.ptr, None)
        if window is None:
            raise InvalidUsageError(f"rank {self.comm.rank}: deregister_buffer: no buffer at {info.ptr:#x} is "
                                    "registered")
        self.generation += 1
        window.close()

    def find(self, address: int, nbytes: int) -> Window | None:
        """The window starting at ``address`` that holds ``nbytes``, or None."""
        window = self._by_address.get(address)
        return window if window is not None and nbytes <= window.nbytes else None

    def close(self) -> None:
        for window in self._by_address.values():
            window.close()
        self._by_address.clear()

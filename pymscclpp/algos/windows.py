"""Buffers registered with a communicator for zero-copy collectives: each rank registers its own buffer in the
same order (a collective call) and maps every peer's buffer of that registration, so a kernel reads peers' inputs
and writes peers' outputs directly, with no scratch copy (NCCL's window registration). A call captured into a
CUDA graph registers its own buffers, every rank at the same captured call, and keeps them mapped until the
communicator closes (the graph holds the addresses; vLLM's graph buffers)."""

from __future__ import annotations

from typing import Callable, Sequence

from ..errors import InvalidUsageError, RegistrationError
from ..runtime.backend import IS_SIM
from ..runtime.buffers import buffer_info
from ..runtime.capture import relaxed
from ..runtime.launch import Launch
from ..runtime.memory import PeerMemory, RemoteMemory
from .algorithm import CallBuffer

if not IS_SIM:
    from ..runtime import cudadrv

MAX_SERIAL = 2046  # the largest registration serial: at most 2047 buffers registered at once


class Window:
    """One registration: this rank's buffer (start address and bytes, ``local`` as kernels take it) and every
    peer's buffer of the same registration (``handles``, in rank order without ours). ``serial``: the
    registration's number among the live ones (the smallest free, the same on every rank: registrations and
    deregistrations are collective); -1 for a captured call's."""

    def __init__(self, comm, buf, what: str = "register_buffer", serial: int = -1):
        self.serial = serial
        reg = comm.register_memory(buf)
        self.address, self.nbytes, self.local = reg.info.ptr, reg.nbytes, reg.local_bytes()
        blobs = comm.bootstrap.all_gather(reg.serialize(), what=f"{what}: every rank's buffer handle")
        self._remotes = []
        for peer in range(comm.size):
            if peer == comm.rank:
                continue
            remote = RemoteMemory(blobs[peer], job_token=comm.job_token)
            self._remotes.append(remote)
            if remote.rank != peer:
                raise RegistrationError(f"rank {comm.rank}: {what}: the handle from peer {peer} claims rank "
                                        f"{remote.rank}")
        self.handles = tuple(PeerMemory(remote.device_view()) for remote in self._remotes)

    def close(self) -> None:
        for remote in self._remotes:
            remote.close()
        self._remotes, self.handles = [], ()


class Windows:
    """The communicator's registered buffers by start address, and those of captured calls
    (``comm.extension("windows", Windows)``)."""

    def __init__(self, comm):
        self.comm = comm
        self._by_address: dict[int, Window] = {}
        self._captured: list[Window] = []
        self.generation = 0  # bumped by every deregistration: launches prepared for a window are stale

    def register(self, buf) -> None:
        """Register ``buf`` (collective: every rank registers its own, in the same order)."""
        info = buffer_info(buf, self.comm.device)
        if info.ptr in self._by_address:
            raise InvalidUsageError(f"rank {self.comm.rank}: register_buffer: a buffer at {info.ptr:#x} is "
                                    "registered already")
        used = {w.serial for w in self._by_address.values()}
        serial = next((k for k in range(MAX_SERIAL + 1) if k not in used), None)
        if serial is None:
            raise InvalidUsageError(f"rank {self.comm.rank}: register_buffer: {MAX_SERIAL + 1} buffers are "
                                    "registered already; deregister one first")
        with self.comm.setup("register_buffer"):
            self._by_address[info.ptr] = Window(self.comm, buf, serial=serial)

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

    def capture(self, what: str, bufs: Sequence[tuple[CallBuffer, int]]) -> tuple[Window, ...]:
        """Windows of a call being captured into a CUDA graph, one per (buffer, bytes) of ``bufs`` (collective:
        every rank captures the same call and maps peers' buffers of it, in relaxed capture mode so the capture
        goes on)."""
        views = [buf.array if buf.array is not None else cudadrv.device_array(buf.ptr, nbytes)
                 for buf, nbytes in bufs]
        absent = ("a rank that captures this call on registered buffers maps nothing: every rank passes buffers of "
                  "the same registration, or none does")
        with self.comm.setup(f"{what} (captured)", absent), relaxed():
            windows = tuple(Window(self.comm, view, f"{what} (captured)") for view in views)
        self._captured.extend(windows)
        return windows

    @property
    def captured(self) -> int:
        """How many buffers of captured calls are mapped (each until the communicator closes)."""
        return len(self._captured)

    def close(self) -> None:
        for window in [*self._by_address.values(), *self._captured]:
            window.close()
        self._by_address.clear()
        self._captured.clear()


class PreparedLaunches:
    """Launches prepared for tuples of registered windows (by their start addresses), forgotten at any
    deregistration (the windows' generation): what a zero-copy algorithm launches on registered buffers."""

    def __init__(self, windows: Windows):
        self.windows = windows
        self._by_key: dict[tuple, Launch] = {}
        self._generation = windows.generation

    def _forget_stale(self) -> None:
        if self._generation != self.windows.generation:  # a deregistration: launches of closed windows go
            self._by_key.clear()
            self._generation = self.windows.generation

    def get(self, windows: tuple[Window, ...], make: Callable[[tuple], Launch], grid: int = 0) -> Launch:
        """The launch prepared for ``windows`` (and ``grid``, where a family launches on several), ``make``
        building it the first time."""
        self._forget_stale()
        key = (grid, *(w.address for w in windows))
        launch = self._by_key.get(key)
        if launch is None:
            launch = self._by_key[key] = make(windows)
        return launch

    def values(self) -> list[Launch]:
        """The launches prepared for windows still registered."""
        self._forget_stale()
        return list(self._by_key.values())

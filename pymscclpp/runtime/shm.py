"""POSIX shared-memory segments: device memory under the simulator, host token pools on both backends.

Each segment is a file in /dev/shm mapped into the process; peers on the same host map it by
name. A registry of live mappings turns an address back into (segment, offset) so that views
of library allocations can be registered.
"""

from __future__ import annotations

import mmap
import os
import secrets
import threading
import weakref

import numpy as np

from .._log import get_logger
from ..errors import RegistrationError

_log = get_logger("memory")
_SHM_DIR = "/dev/shm"
_lock = threading.Lock()
# base address -> segment; closed and collected ones are pruned by the next segment's registration: a segment's
# finalizer may run inside a locked section of its own thread (a garbage collection there), so it takes no lock
_live: dict[int, weakref.ref] = {}


class Segment:
    """One mapped shared-memory segment; the creator unlinks its file on close."""

    def __init__(self, name: str, nbytes: int, create: bool):
        if nbytes <= 0:
            raise RegistrationError(f"shared-memory segment of {nbytes} bytes: size must be positive")
        self.name = name
        self.nbytes = nbytes
        self.owner = create
        self.closed = False
        path = os.path.join(_SHM_DIR, name)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            raise RegistrationError(f"shared-memory segment {name!r} does not exist on this host "
                                    "(its owner closed it, or it lives on another host)") from None
        try:
            if create:
                os.ftruncate(fd, nbytes)
            elif os.fstat(fd).st_size < nbytes:
                raise RegistrationError(f"shared-memory segment {name!r} is smaller than the {nbytes} bytes announced")
            self._map = mmap.mmap(fd, nbytes)
        finally:
            os.close(fd)
        self.array = np.frombuffer(self._map, dtype=np.uint8, count=nbytes)
        self.base = self.array.ctypes.data
        with _lock:
            _prune()
            _live[self.base] = weakref.ref(self)
        self._finalizer = weakref.finalize(self, _release, path if create else None)

    def close(self) -> None:
        """Forget the mapping (it stays valid while arrays still view it) and unlink if we created it."""
        self.closed = True
        self._finalizer()


def release_all() -> None:
    """Close every segment this process still maps, unlinking the ones it created: what the interpreter's exit does,
    for a process that ends without it (a forked process ends in ``os._exit``)."""
    with _lock:
        segments = [ref() for ref in _live.values()]
    for segment in segments:
        if segment is not None:
            segment.close()


def _release(path: str | None) -> None:
    """A segment's finalizer: its file unlinked if this process created it (no lock: see ``_live``; the registry
    prunes its entry later)."""
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _prune() -> None:
    """Under ``_lock``: forget the segments that were closed or collected."""
    for base in [b for b, ref in _live.items() if (seg := ref()) is None or seg.closed]:
        del _live[base]


def create(nbytes: int, prefix: str = "pymscclpp") -> Segment:
    """A new zero-filled segment of ``nbytes`` with a unique name."""
    return Segment(f"{prefix}-{os.getpid()}-{secrets.token_hex(6)}", nbytes, create=True)


def attach(name: str, nbytes: int) -> Segment:
    """Map a peer's segment by name."""
    if not name or "/" in name or len(name) > 64:
        raise RegistrationError(f"bad shared-memory segment name {name!r}")
    return Segment(name, nbytes, create=False)


def find(address: int, nbytes: int) -> tuple[Segment, int] | None:
    """The live segment holding ``[address, address + nbytes)`` and the offset in it, if any."""
    with _lock:
        for base, ref in _live.items():
            seg = ref()
            if seg is not None and not seg.closed and base <= address and address + nbytes <= base + seg.nbytes:
                return seg, address - base
    return None

"""MPI bootstrap over mpi4py, using only the buffer-based (uppercase) calls: nothing is pickled.

Waits poll nonblocking requests against a deadline, so every wait is bounded. MPI does
not report dead peers: a rank that dies normally makes the launcher abort the job.
"""

from __future__ import annotations

import array
import itertools
import os
import struct
import threading
import time
from typing import Any

from ..._log import get_logger
from ...errors import BootstrapError, InvalidUsageError
from ..deadline import Deadline
from .base import Bootstrap
from .mailbox import Mailbox
from .wire import TOKEN_BYTES

_log = get_logger("bootstrap")
_HEADER = struct.Struct("!Q")  # the 64-bit bootstrap tag, before the payload
_MPI_TAG = 0x5042              # one MPI tag for all messages (MPI only guarantees tags up to 32767)
_MAX_PAUSE_S = 0.002


class MpiBootstrap(Bootstrap):
    """The ranks of ``comm`` (default COMM_WORLD), talking on a private duplicate of it."""

    def __init__(self, comm: Any = None, timeout: float | None = None) -> None:
        from mpi4py import MPI  # here, not at module import: importing mpi4py initializes MPI
        if comm is None:
            comm = MPI.COMM_WORLD
        if not isinstance(comm, MPI.Intracomm):
            raise InvalidUsageError(f"comm must be an mpi4py intracommunicator, got {type(comm).__name__}")
        super().__init__(comm.Get_rank(), comm.Get_size(), timeout)
        self._mpi = MPI
        self._comm = comm.Dup()
        self._mailbox = Mailbox(self.rank)
        self._lock = threading.Lock()  # guards _pending and matched probes
        self._pending: list[tuple[Any, object]] = []  # requests still in flight, with their buffers
        token = bytearray(os.urandom(TOKEN_BYTES) if self.rank == 0 else TOKEN_BYTES)
        self._wait(self._comm.Ibcast([token, MPI.BYTE], root=0), token, Deadline(self.timeout),
                   "broadcast of the job token")
        self.job_token = bytes(token)

    def _send(self, payload: bytes, peer: int, tag: int, deadline: Deadline, what: str) -> None:
        buf = bytearray(_HEADER.pack(tag))
        buf += payload
        request = self._comm.Isend([buf, self._mpi.BYTE], dest=peer, tag=_MPI_TAG)
        with self._lock:
            self._pending.append((request, buf))
        self._progress()

    def _recv(self, peer: int, tag: int, deadline: Deadline, what: str) -> bytes:
        pause = 1e-5
        while True:
            self._mailbox.check_abort(what)
            data = self._mailbox.pop(peer, tag)
            if data is not None:
                return data
            if self._drain():
                continue
            self._progress()
            if deadline.expired():
                raise deadline.error(self.rank, what)
            time.sleep(pause)
            pause = min(2 * pause, _MAX_PAUSE_S)

    def _all_gather(self, payload: bytes, deadline: Deadline, op: str) -> list[bytes]:
        MPI = self._mpi
        lengths = array.array("q", bytes(8 * self.size))
        mine = array.array("q", [len(payload)])
        self._wait(self._comm.Iallgather([mine, MPI.INT64_T], [lengths, MPI.INT64_T]), (mine, lengths),
                   deadline, f"{op}: the lengths")
        counts = list(lengths)
        displs = list(itertools.accumulate(counts, initial=0))[:-1]
        out = bytearray(sum(counts))
        self._wait(self._comm.Iallgatherv([payload, MPI.BYTE], [out, (counts, displs), MPI.BYTE]),
                   (payload, out), deadline, op)
        return [bytes(out[d:d + n]) for d, n in zip(displs, counts)]

    def _barrier(self, deadline: Deadline) -> None:
        self._wait(self._comm.Ibarrier(), None, deadline, "barrier")

    def _close(self) -> None:
        deadline = Deadline(self.timeout)
        while self._progress() and not deadline.expired():
            time.sleep(_MAX_PAUSE_S)
        if self._pending:
            _log.warning("rank %d: %d bootstrap messages were never received by their peers",
                         self.rank, len(self._pending))
        if not self._mpi.Is_finalized():
            self._comm.Free()
        self._mailbox.close()

    def _wait(self, request: Any, buffers: object, deadline: Deadline, what: str) -> None:
        """Poll ``request`` until done; on timeout keep it (and its buffers) alive and raise."""
        pause = 1e-5
        while not request.Test():
            if deadline.expired():
                with self._lock:
                    self._pending.append((request, buffers))
                raise deadline.error(self.rank, what)
            time.sleep(pause)
            pause = min(2 * pause, _MAX_PAUSE_S)

    def _progress(self) -> int:
        """Drop completed requests; how many remain in flight."""
        with self._lock:
            self._pending = [(req, buf) for req, buf in self._pending if not req.Test()]
            return len(self._pending)

    def _drain(self) -> bool:
        """Move every message that has arrived (from any peer: an abort may come from any) into the mailbox;
        whether there was one."""
        MPI = self._mpi
        got = False
        status = MPI.Status()
        with self._lock:
            while (message := self._comm.Improbe(source=MPI.ANY_SOURCE, tag=_MPI_TAG, status=status)) is not None:
                peer = status.Get_source()
                size = status.Get_count(MPI.BYTE)
                buf = bytearray(size)
                message.Recv([buf, MPI.BYTE])
                if not _HEADER.size <= size <= _HEADER.size + self.max_payload:
                    raise BootstrapError(f"rank {self.rank}: malformed bootstrap message of {size} bytes from peer {peer}")
                (tag,) = _HEADER.unpack_from(buf)
                self._mailbox.put(peer, tag, bytes(memoryview(buf)[_HEADER.size:]))
                got = True
        return got

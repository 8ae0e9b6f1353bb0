"""Ranks as threads of one process: messages go straight into the peer's in-memory mailbox.

Not exported, and for bootstrap-level tests and one-rank communicators only: numba's CUDA simulator cannot run
two ranks' kernels in one process. It swaps a fake ``cuda`` module into the globals of a kernel's module for
the launch, so a second thread's launch saves the first's fake and restores it when done (rank 0:
``'Thread' object has no attribute 'threadIdx'``) while the first rank's kernel waits on the peer forever.
Several ranks of a test are processes: ``pymscclpp.testing.ranks``.
"""

from __future__ import annotations

import os

from ..deadline import Deadline
from .base import Bootstrap, MAX_RANKS, check_int
from .mailbox import Mailbox
from .wire import TOKEN_BYTES


class LocalBootstrap(Bootstrap):
    """One rank of a group made by ``LocalBootstrap.create``; same semantics as the TCP bootstrap."""

    def __init__(self, rank: int, group: list[LocalBootstrap], job_token: bytes, timeout: float | None) -> None:
        super().__init__(rank, len(group), timeout)
        self.job_token = job_token
        self._group = group
        self._mailbox = Mailbox(rank)

    @classmethod
    def create(cls, n: int, timeout: float | None = None) -> list[LocalBootstrap]:
        """``n`` connected ranks, by rank, to be driven from ``n`` threads."""
        n = check_int(n, "n", 1, MAX_RANKS)
        group: list[LocalBootstrap] = [None] * n  # type: ignore[list-item]
        token = os.urandom(TOKEN_BYTES)
        for rank in range(n):
            group[rank] = cls(rank, group, token, timeout)
        return list(group)

    def _send(self, payload: bytes, peer: int, tag: int, deadline: Deadline, what: str) -> None:
        self._mailbox.check_peer(peer, what)
        self._group[peer]._mailbox.put(self.rank, tag, payload)

    def _recv(self, peer: int, tag: int, deadline: Deadline, what: str) -> bytes:
        return self._mailbox.get(peer, tag, deadline, what)

    def _close(self) -> None:
        self._mailbox.close()
        for other in self._group:
            if other is not self:
                other._mailbox.lose(self.rank, "it closed its bootstrap")

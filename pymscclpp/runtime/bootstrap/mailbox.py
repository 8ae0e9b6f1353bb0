"""Received messages demultiplexed into per-(peer, tag) FIFO queues that receivers wait on."""

from __future__ import annotations

import threading
from collections import deque

from ...errors import BootstrapError, PeerDisconnectedError
from .base import Deadline


class Mailbox:
    """The inbox of one rank: transports ``put`` messages and report lost peers, receivers ``get``."""

    def __init__(self, rank: int) -> None:
        self._rank = rank
        self._cond = threading.Condition()
        self._queues: dict[tuple[int, int], deque[bytes]] = {}
        self._lost: dict[int, str] = {}
        self._closed = False

    def put(self, peer: int, tag: int, data: bytes) -> None:
        with self._cond:
            self._queues.setdefault((peer, tag), deque()).append(data)
            self._cond.notify_all()

    def lose(self, peer: int, reason: str) -> None:
        """Record that ``peer`` is gone: its queued messages still arrive, then receives fail at once."""
        with self._cond:
            self._lost.setdefault(peer, reason)
            self._cond.notify_all()

    def close(self) -> None:
        """Wake every waiter with an error: this rank's bootstrap is closed."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def check_peer(self, peer: int, what: str) -> None:
        """Raise ``PeerDisconnectedError`` if ``peer`` is gone."""
        reason = self._lost.get(peer)
        if reason is not None:
            raise PeerDisconnectedError(f"rank {self._rank}: {what}: peer {peer} disconnected ({reason})")

    def pop(self, peer: int, tag: int) -> bytes | None:
        """The next queued message from ``peer`` under ``tag``, or None; never waits."""
        with self._cond:
            queue = self._queues.get((peer, tag))
            if not queue:
                return None
            data = queue.popleft()
            if not queue:
                del self._queues[(peer, tag)]
            return data

    def get(self, peer: int, tag: int, deadline: Deadline, what: str) -> bytes:
        """Wait for the next message from ``peer`` under ``tag`` until ``deadline``."""
        with self._cond:
            while True:
                data = self.pop(peer, tag)
                if data is not None:
                    return data
                if self._closed:
                    raise BootstrapError(f"rank {self._rank}: {what}: bootstrap closed while waiting")
                self.check_peer(peer, what)
                remaining = deadline.remaining()
                if remaining == 0.0:
                    raise deadline.error(self._rank, what)
                self._cond.wait(remaining)

"""Received messages demultiplexed into per-(peer, tag) FIFO queues that receivers wait on.

Abort messages (``ABORT_TAG``) are not queued: they mark a set-up scope as failed, and every receive
made while that scope is open raises ``SetupAbortedError`` at once (``Communicator.setup``).
"""

from __future__ import annotations

import threading
from collections import deque

from ...errors import BootstrapError, CommAbortedError, PeerDisconnectedError, SetupAbortedError
from ..deadline import Deadline
from .wire import ABORT_TAG, decode_abort


class Mailbox:
    """The inbox of one rank: transports ``put`` messages and report lost peers, receivers ``get``."""

    def __init__(self, rank: int) -> None:
        self._rank = rank
        self._cond = threading.Condition()
        self._queues: dict[tuple[int, int], deque[bytes]] = {}
        self._lost: dict[int, str] = {}
        self._closed = False
        self._aborted: str | None = None  # why every wait ends with CommAbortedError (``abort``)
        self._aborts: dict[int, tuple[int, str]] = {}  # set-up scope -> (failing rank, reason), first heard
        self.scope: int | None = None  # the set-up scope receives belong to now (None: outside any)

    def put(self, peer: int, tag: int, data: bytes) -> None:
        with self._cond:
            if tag == ABORT_TAG:
                scope, origin, reason = decode_abort(data)
                self._aborts.setdefault(scope, (origin, reason))
                self._cond.notify_all()
                return
            self._queues.setdefault((peer, tag), deque()).append(data)
            self._cond.notify_all()

    def lose(self, peer: int, reason: str) -> None:
        """Record that ``peer`` is gone: its queued messages still arrive, then receives fail at once."""
        with self._cond:
            self._lost.setdefault(peer, reason)
            self._cond.notify_all()

    def lost(self) -> dict[int, str]:
        """The peers recorded as gone, with the reason each was first recorded."""
        with self._cond:
            return dict(self._lost)

    def close(self) -> None:
        """Wake every waiter with an error: this rank's bootstrap is closed."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def abort(self, reason: str) -> None:
        """End every wait, now and later, with ``CommAbortedError`` saying ``reason``."""
        with self._cond:
            self._aborted = reason
            self._cond.notify_all()

    def check_peer(self, peer: int, what: str) -> None:
        """Raise ``PeerDisconnectedError`` if ``peer`` is gone."""
        reason = self._lost.get(peer)
        if reason is not None:
            raise PeerDisconnectedError(f"rank {self._rank}: {what}: peer {peer} disconnected ({reason})")

    def enter(self, scope: int | None) -> None:
        """Receives from now on belong to set-up ``scope`` (None: to no set-up)."""
        with self._cond:
            self.scope = scope

    def check_abort(self, what: str) -> None:
        """Raise ``CommAbortedError`` once this rank aborted, or ``SetupAbortedError`` if a peer aborted the set-up
        scope receives belong to now."""
        if self._aborted is not None:
            raise CommAbortedError(f"rank {self._rank}: {what}: {self._aborted}")
        found = self._aborts.get(self.scope) if self.scope is not None else None
        if found is not None:
            origin, reason = found
            raise SetupAbortedError(f"rank {self._rank}: {what}: set-up aborted by rank {origin} ({reason})", origin)

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
                self.check_abort(what)
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

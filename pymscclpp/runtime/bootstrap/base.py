"""The ``Bootstrap`` interface: small byte messages between ranks during setup.

Subclasses move bytes (``_send``/``_recv``); this class validates arguments, applies the
default timeout and builds ``all_gather`` and ``barrier`` on point-to-point messages.
"""

from __future__ import annotations

import abc
import contextlib
import math
import operator
import threading
import time
from typing import TYPE_CHECKING

from ...errors import BootstrapError, CommAbortedError, CommTimeoutError, InvalidUsageError
from ... import config
from ..deadline import Deadline
from . import wire
from .wire import ABORT_TAG, ALL_GATHER_TAG, BARRIER_TAG, TAG_LIMIT, encode_abort

if TYPE_CHECKING:
    from .mailbox import Mailbox

MAX_RANKS = 2**31


def _words(verb: str, preposition: str, peer: int, tag: int, what: str | None) -> str:
    """``recv of <what> from peer 1``, or with no words for the message ``recv from peer 1 tag 7``."""
    return f"{verb} of {what} {preposition} peer {peer}" if what else f"{verb} {preposition} peer {peer} tag {tag}"


def check_timeout(timeout: float | None) -> float | None:
    """A timeout in seconds as a float (>= 0), or None for no limit (also for ``math.inf``)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout != timeout or timeout < 0:
        raise InvalidUsageError(f"timeout={timeout!r}: expected seconds >= 0 or None")
    return None if math.isinf(timeout) else float(timeout)


def default_timeout(timeout: float | None) -> float | None:
    """``timeout`` checked, or when None the configured budget (``PYMSCCLPP_TIMEOUT_S``)."""
    return config.get("PYMSCCLPP_TIMEOUT_S") if timeout is None else check_timeout(timeout)


def check_int(value: object, name: str, low: int, high: int) -> int:
    """``value`` as an int in ``[low, high)``; bools and non-integers are refused."""
    if isinstance(value, bool):
        raise InvalidUsageError(f"{name}={value!r}: expected an int")
    try:
        number = operator.index(value)
    except TypeError:
        raise InvalidUsageError(f"{name}={value!r}: expected an int") from None
    if not low <= number < high:
        raise InvalidUsageError(f"{name}={number}: must be in [{low}, {high})")
    return number


class Bootstrap(abc.ABC):
    """Byte messages between the ``size`` ranks of a job; this object is rank ``rank``.

    Messages between a pair with the same tag arrive in order; different tags are
    independent queues. Waits default to ``timeout`` (else ``PYMSCCLPP_TIMEOUT_S``).
    """

    rank: int
    size: int
    job_token: bytes            # 16 bytes naming the job, equal on all ranks
    timeout: float | None       # default budget of waits, seconds (None: no limit)
    max_payload: int            # largest message, bytes (PYMSCCLPP_BOOTSTRAP_MAX_MSG)
    closed: bool
    host: str | None = None     # the address peers reach this rank at (TCP), where a new root can listen
    _aborted: str | None = None  # why ``abort`` ended every wait (None: not aborted)
    _mailbox: Mailbox           # where transports put received messages (and abort notices)

    def __init__(self, rank: int, size: int, timeout: float | None) -> None:
        self.size = check_int(size, "size", 1, MAX_RANKS)
        self.rank = check_int(rank, "rank", 0, self.size)
        self.timeout = default_timeout(timeout)
        self.max_payload = wire.max_payload()
        self.closed = False
        self._scopes = 0  # set-up scopes opened so far
        self._scope_spent: float | None = None  # seconds the open scope's waits took (None: no scope open)
        self._scope_thread = 0  # the thread that opened it: only its waits share the scope's budget

    def send(self, data: bytes, peer: int, tag: int, what: str | None = None) -> None:
        """Queue ``data`` for ``peer`` under ``tag`` (0 <= tag < 2**63); returns once handed over. ``what``: the
        message in words, for errors (else they name the tag)."""
        payload = self._payload(data)
        peer, tag = self._check_peer(peer), self._check_tag(tag)
        self._check_open()
        self._send(payload, peer, tag, self._deadline(None), _words("send", "to", peer, tag, what))

    def recv(self, peer: int, tag: int, timeout: float | None = None, what: str | None = None) -> bytes:
        """The next message from ``peer`` under ``tag``, waiting at most ``timeout`` seconds; ``what``: the
        message in words, for errors (else they name the tag)."""
        peer, tag = self._check_peer(peer), self._check_tag(tag)
        self._check_open()
        with self._waiting():
            return self._recv(peer, tag, self._deadline(timeout), _words("recv", "from", peer, tag, what))

    def send_reserved(self, data: bytes, peer: int, tag: int, deadline: Deadline, what: str) -> None:
        """``send`` under one of the bootstrap's own tags (``tag >= TAG_LIMIT``): the runtime's protocols (liveness,
        shrink) talk there, apart from every user and set-up message."""
        self._check_open()
        self._send(self._payload(data), self._check_peer(peer), self._check_reserved(tag), deadline, what)

    def recv_reserved(self, peer: int, tag: int, deadline: Deadline, what: str) -> bytes:
        """``recv`` under one of the bootstrap's own tags (see ``send_reserved``)."""
        self._check_open()
        return self._recv(self._check_peer(peer), self._check_reserved(tag), deadline, what)

    def all_gather(self, data: bytes, timeout: float | None = None, what: str | None = None) -> list[bytes]:
        """Every rank's ``data``, indexed by rank; all ranks must call it in the same order. ``what``: the data in
        words, for errors."""
        payload = self._payload(data)
        self._check_open()
        with self._waiting():
            return self._all_gather(payload, self._deadline(timeout), f"all_gather of {what}" if what else "all_gather")

    def barrier(self, timeout: float | None = None) -> None:
        """Return once every rank has entered the barrier."""
        self._check_open()
        with self._waiting():
            self._barrier(self._deadline(timeout))

    def open_scope(self) -> int:
        """Open the next collective set-up scope (every rank opens them in the same order) and return its number:
        once a peer aborts it (``abort_scope``), every receive made in it, waiting or later, raises
        ``SetupAbortedError``. The waits of this thread in it share one budget (``timeout``), so a set-up that
        waits on an absent peer step after step reports within that budget, not a multiple of it."""
        self._scopes += 1
        self._mailbox.enter(self._scopes)
        self._scope_spent, self._scope_thread = 0.0, threading.get_ident()
        return self._scopes

    def close_scope(self) -> None:
        """Receives from now on belong to no set-up scope."""
        self._mailbox.enter(None)
        self._scope_spent = None

    def scope_budget_left(self) -> float | None:
        """Seconds of the open set-up scope's shared wait budget not yet spent; None without a scope or a limit."""
        if self._scope_spent is None or self.timeout is None:
            return None
        return max(0.0, self.timeout - self._scope_spent)

    def abort_scope(self, scope: int, reason: str) -> None:
        """Tell every peer that set-up ``scope`` failed on this rank because of ``reason`` (best effort: a peer
        that is gone is skipped)."""
        payload = encode_abort(scope, self.rank, reason)
        for peer in range(self.size):
            if peer != self.rank:
                try:
                    self._send(payload, peer, ABORT_TAG, Deadline(1.0), f"abort of set-up {scope} to peer {peer}")
                except (BootstrapError, CommTimeoutError):
                    pass

    def abort(self, reason: str) -> None:
        """End every wait of this bootstrap, in any thread, now and later, with ``CommAbortedError`` saying
        ``reason``; no message is sent, from now on either (``close`` still releases the connections)."""
        self._aborted = reason
        self._mailbox.abort(reason)

    def close(self) -> None:
        """Release connections and threads; idempotent. Peers then see this rank disconnected."""
        if not self.closed:
            self.closed = True
            self._close()

    def __enter__(self) -> Bootstrap:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<{type(self).__name__} rank {self.rank} of {self.size}, {state}>"

    @abc.abstractmethod
    def _send(self, payload: bytes, peer: int, tag: int, deadline: Deadline, what: str) -> None:
        """Hand ``payload`` over to the transport for ``peer``."""

    @abc.abstractmethod
    def _recv(self, peer: int, tag: int, deadline: Deadline, what: str) -> bytes:
        """Wait for the next message from ``peer`` under ``tag``."""

    @abc.abstractmethod
    def _close(self) -> None:
        """Release the transport's resources."""

    def _all_gather(self, payload: bytes, deadline: Deadline, op: str) -> list[bytes]:
        return self._exchange(payload, deadline, ALL_GATHER_TAG, op)

    def _barrier(self, deadline: Deadline) -> None:
        self._exchange(b"", deadline, BARRIER_TAG, "barrier")

    def _exchange(self, payload: bytes, deadline: Deadline, tag: int, op: str) -> list[bytes]:
        """All-gather over point-to-point messages under the bootstrap's own ``tag``."""
        out = [b""] * self.size
        out[self.rank] = payload
        peers = [(self.rank + i) % self.size for i in range(1, self.size)]
        for peer in peers:
            self._send(payload, peer, tag, deadline, f"{op}: send to peer {peer}")
        for peer in peers:
            out[peer] = self._recv(peer, tag, deadline, f"{op}: recv from peer {peer}")
        return out

    def _deadline(self, timeout: float | None) -> Deadline:
        if timeout is None and self._in_scope():
            left = self.scope_budget_left()
            return Deadline(self.timeout, left) if left is not None else Deadline(None)
        return Deadline(self.timeout if timeout is None else check_timeout(timeout))

    def _in_scope(self) -> bool:
        return self._scope_spent is not None and threading.get_ident() == self._scope_thread

    @contextlib.contextmanager
    def _waiting(self):
        """Count the time of the wait inside to the open scope's budget (when this thread opened it)."""
        if not self._in_scope():
            yield
            return
        start = time.monotonic()
        try:
            yield
        finally:
            if self._scope_spent is not None:
                self._scope_spent += time.monotonic() - start

    def _check_open(self) -> None:
        if self._aborted is not None:
            raise CommAbortedError(f"rank {self.rank}: bootstrap: {self._aborted}")
        if self.closed:
            raise BootstrapError(f"rank {self.rank}: bootstrap is closed")

    def _check_peer(self, peer: int) -> int:
        peer = check_int(peer, "peer", 0, self.size)
        if peer == self.rank:
            raise InvalidUsageError(f"rank {self.rank}: peer={peer} is this rank; messages go to other ranks")
        return peer

    def _check_tag(self, tag: int) -> int:
        return check_int(tag, "tag", 0, TAG_LIMIT)

    def _check_reserved(self, tag: int) -> int:
        return check_int(tag, "reserved tag", TAG_LIMIT, 2**64)

    def _payload(self, data: bytes) -> bytes:
        try:
            view = memoryview(data)
        except TypeError:
            raise InvalidUsageError(f"data must be bytes-like, got {type(data).__name__}") from None
        if view.nbytes > self.max_payload:
            raise InvalidUsageError(f"rank {self.rank}: message of {view.nbytes} bytes exceeds the bootstrap limit "
                                    f"of {self.max_payload} bytes ({wire.MAX_PAYLOAD_ENV})")
        return data if isinstance(data, bytes) else view.tobytes()

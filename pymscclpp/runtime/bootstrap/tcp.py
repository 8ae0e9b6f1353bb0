"""TCP bootstrap: a root rendezvous hands out addresses, then ranks connect in a full mesh.

Every connection opens with a HELLO carrying the 16-byte job token; a connection whose
first frame is anything else is refused, closed and logged. The token only keeps jobs
(and stray connections) apart: it is not authentication against an attacker on the network.
"""

from __future__ import annotations

import hashlib
import os
import select
import socket
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ... import config
from ..._log import get_logger
from ...errors import BootstrapError, CommTimeoutError, InvalidUsageError, PeerDisconnectedError
from ..deadline import Deadline
from .base import MAX_RANKS, Bootstrap, check_int, default_timeout
from .mailbox import Mailbox
from .receiver import Receiver
from .root import Root, running
from . import sockets, wire

_log = get_logger("bootstrap")
SOCKET_ADDR_ENV = "PYMSCCLPP_SOCKET_ADDR"
JOB_TOKEN_ENV = "PYMSCCLPP_JOB_TOKEN"
_ID_MAGIC = b"PMID"
_ID_VERSION = 1
_ID_HEAD = struct.Struct("!4sB")
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)  # a dead peer must raise EPIPE, not kill us with SIGPIPE


@dataclass(frozen=True)
class UniqueId:
    """Where the root listens and the job token: all ranks need, in a fixed 128-byte layout."""

    host: str
    port: int
    token: bytes
    SIZE: ClassVar[int] = 128

    def __post_init__(self) -> None:
        try:
            host = sockets.resolve_literal(self.host)
        except ValueError:
            raise InvalidUsageError(f"UniqueId host={self.host!r}: expected a numeric IPv4/IPv6 address") from None
        object.__setattr__(self, "host", host)
        check_int(self.port, "UniqueId port", 1, 65536)
        if not isinstance(self.token, bytes) or len(self.token) != wire.TOKEN_BYTES:
            raise InvalidUsageError(f"UniqueId token: expected {wire.TOKEN_BYTES} bytes")

    def to_bytes(self) -> bytes:
        """magic, version, address record, token; zero-padded to ``SIZE`` bytes."""
        head = _ID_HEAD.pack(_ID_MAGIC, _ID_VERSION) + wire.pack_addr(self.host, self.port) + self.token
        return head.ljust(self.SIZE, b"\0")

    @classmethod
    def from_bytes(cls, data: bytes) -> UniqueId:
        try:
            data = memoryview(data).tobytes()
        except TypeError:
            raise InvalidUsageError(f"a UniqueId is read from bytes, got {type(data).__name__}") from None
        body = _ID_HEAD.size + wire.ADDR_SIZE
        if len(data) != cls.SIZE:
            raise InvalidUsageError(f"a UniqueId is {cls.SIZE} bytes, got {len(data)}")
        magic, version = _ID_HEAD.unpack_from(data)
        if magic != _ID_MAGIC or version != _ID_VERSION or any(data[body + wire.TOKEN_BYTES:]):
            raise InvalidUsageError("not a pymscclpp UniqueId (bad magic, version or padding)")
        try:
            host, port = wire.unpack_addr(data[_ID_HEAD.size:body])
        except BootstrapError as exc:
            raise InvalidUsageError(f"not a pymscclpp UniqueId: {exc}") from None
        return cls(host, port, data[body:body + wire.TOKEN_BYTES])

    def hex(self) -> str:
        return self.to_bytes().hex()

    @classmethod
    def from_hex(cls, text: str) -> UniqueId:
        try:
            data = bytes.fromhex(text)
        except (TypeError, ValueError):
            raise InvalidUsageError(f"UniqueId.from_hex: expected {2 * cls.SIZE} hex digits") from None
        return cls.from_bytes(data)


def get_unique_id(addr: str | None = None, port: int = 0) -> UniqueId:
    """A new job id; starts its root rendezvous listener in this process now (like ncclGetUniqueId).

    The root listens on ``addr`` (default: ``PYMSCCLPP_SOCKET_ADDR``, else this host name's
    address, else 127.0.0.1) and ``port`` (0: any free port), for ``PYMSCCLPP_TIMEOUT_S``.
    """
    port = check_int(port, "port", 0, 65536)
    host = sockets.resolve(addr, "addr") if addr is not None else _env_socket_addr() or _host_addr()
    return _start_root(host, port, os.urandom(wire.TOKEN_BYTES), default_timeout(None))


class TcpBootstrap(Bootstrap):
    """Rank ``rank`` of ``size``, found through the root of ``unique_id``; one TCP connection per pair."""

    def __init__(self, rank: int, size: int, unique_id: UniqueId, timeout: float | None = None) -> None:
        super().__init__(rank, size, timeout)
        if not isinstance(unique_id, UniqueId):
            raise InvalidUsageError(f"unique_id must be a UniqueId, got {type(unique_id).__name__}")
        self.job_token = unique_id.token
        self._root = running(unique_id.token)
        self._mailbox = Mailbox(self.rank)
        try:
            self._conns, self.host = _connect(self.rank, self.size, unique_id, Deadline(self.timeout))
        except BaseException as exc:
            if self._root is not None:
                self._root.stop()
            if isinstance(exc, OSError) and not isinstance(exc, CommTimeoutError):
                raise BootstrapError(f"rank {self.rank}: TCP bootstrap setup failed: {exc}") from exc
            raise
        self._send_locks = {peer: threading.Lock() for peer in self._conns}
        self._receiver = Receiver(self.rank, self._conns, self._mailbox, self.max_payload)
        _log.debug("rank %d of %d: TCP bootstrap connected", self.rank, self.size)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, timeout: float | None = None) -> TcpBootstrap:
        """Set up from torchrun-style RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; rank 0 runs the root there.

        ``environ`` defaults to ``os.environ``. MASTER_PORT must be free on rank 0: it cannot
        also serve torch.distributed's store.

        The job token is ``PYMSCCLPP_JOB_TOKEN`` (32 hex digits) if set, else a sha256 of
        MASTER_ADDR, MASTER_PORT, WORLD_SIZE and TORCHELASTIC_RUN_ID: that derived token only
        separates jobs, it is no secret.
        """
        env = os.environ if environ is None else environ
        size = _env_int(env, "WORLD_SIZE", 1, MAX_RANKS)
        rank = _env_int(env, "RANK", 0, size)
        port = _env_int(env, "MASTER_PORT", 1, 65536)
        host = sockets.resolve(_env_str(env, "MASTER_ADDR"), "MASTER_ADDR")
        token = _env_token(env)
        if rank == 0:
            _start_root(host, port, token, default_timeout(timeout))
        return cls(rank, size, UniqueId(host, port, token), timeout)

    def _send(self, payload: bytes, peer: int, tag: int, deadline: Deadline, what: str) -> None:
        frame = wire.encode(wire.Kind.DATA, self.rank, tag, payload)
        conn = self._conns[peer]
        with self._send_locks[peer]:
            self._mailbox.check_peer(peer, what)
            try:
                complete = _write(conn, frame, deadline)
            except OSError as exc:
                reason = f"send failed: {exc.strerror or exc}"
                self._mailbox.lose(peer, reason)
                raise PeerDisconnectedError(f"rank {self.rank}: {what}: peer {peer} disconnected ({reason})") from exc
            if not complete:
                self._mailbox.lose(peer, "an earlier send timed out mid-frame, so the connection was dropped")
                _shutdown(conn, socket.SHUT_RDWR)
                raise deadline.error(self.rank, what)

    def _recv(self, peer: int, tag: int, deadline: Deadline, what: str) -> bytes:
        return self._mailbox.get(peer, tag, deadline, what)

    def _close(self) -> None:
        for conn in self._conns.values():
            _shutdown(conn, socket.SHUT_WR)  # the peer reads what we sent, then EOF
        self._receiver.stop()
        for conn in self._conns.values():
            conn.close()
        self._mailbox.close()
        if self._root is not None:
            self._root.join()


def _connect(rank: int, size: int, uid: UniqueId, deadline: Deadline) -> tuple[dict[int, socket.socket], str]:
    """Register with the root, then connect to lower ranks and accept higher ones: one socket per peer, and the
    address this rank listened on (its peers reached it there)."""
    listener, table = _rendezvous(rank, size, uid, deadline)
    conns: dict[int, socket.socket] = {}
    try:
        with listener:
            for peer in range(rank):
                what = f"connect to peer {peer} at {table[peer][0]}:{table[peer][1]}"
                conns[peer] = sockets.connect(*table[peer], deadline, rank, what)
                sockets.offer_hello(conns[peer], uid.token, rank, peer, deadline, what)
            while len(conns) < size - 1:
                missing = set(range(rank + 1, size)) - conns.keys()
                conn, origin = sockets.accept(listener, deadline, rank,
                                              f"wait for connections from peers {sorted(missing)}")
                try:
                    peer = sockets.accept_hello(conn, uid.token, rank, missing, deadline, "handshake")
                except (OSError, BootstrapError) as exc:
                    _log.warning("rank %d: refused a bootstrap connection from %s: %s", rank, origin, exc)
                    conn.close()
                    continue
                conns[peer] = conn
    except BaseException:
        for conn in conns.values():
            conn.close()
        raise
    for conn in conns.values():
        conn.setblocking(False)
    return conns, table[rank][0]


def _rendezvous(rank: int, size: int, uid: UniqueId, deadline: Deadline) -> tuple[socket.socket, list[tuple[str, int]]]:
    """Open this rank's listener, register it with the root; the listener and every rank's address."""
    what = f"rendezvous with root {uid.host}:{uid.port}"
    with sockets.connect(uid.host, uid.port, deadline, rank, what) as root:
        sockets.offer_hello(root, uid.token, rank, sockets.ROOT_SRC, deadline, what)
        host = _env_socket_addr() or root.getsockname()[0]
        listener = sockets.listen(host, 0, backlog=size)
        try:
            port = listener.getsockname()[1]
            register = wire.encode(wire.Kind.REGISTER, rank, 0, wire.encode_register(size, host, port))
            sockets.send_frame(root, register, deadline, rank, what)
            reply = sockets.read_frame(root, deadline, size * wire.ADDR_SIZE, rank, what)
            if reply.kind != wire.Kind.TABLE:
                raise BootstrapError(f"rank {rank}: {what}: expected the address table, got {reply.kind.name}")
            return listener, wire.decode_table(reply.payload, size)
        except BaseException:
            listener.close()
            raise


def _write(conn: socket.socket, data: bytes, deadline: Deadline) -> bool:
    """Send all of ``data`` on a non-blocking socket; False if ``deadline`` passed first."""
    view = memoryview(data)
    while view:
        try:
            view = view[conn.send(view, _NOSIGNAL):]
        except BlockingIOError:
            remaining = deadline.remaining()
            poller = select.poll()
            poller.register(conn, select.POLLOUT)
            if not poller.poll(None if remaining is None else remaining * 1000):
                return False
    return True


def _shutdown(conn: socket.socket, how: int) -> None:
    try:
        conn.shutdown(how)
    except OSError:
        pass


def _start_root(host: str, port: int, token: bytes, timeout: float | None) -> UniqueId:
    try:
        root = Root(host, port, token, timeout)
    except OSError as exc:
        raise BootstrapError(f"cannot listen for the bootstrap root on {host}:{port}: {exc}") from exc
    return UniqueId(root.host, root.port, token)


def _host_addr() -> str:
    try:
        return sockets.resolve(socket.gethostname(), "hostname")
    except InvalidUsageError:
        return "127.0.0.1"


def _env_socket_addr() -> str | None:
    raw = config.get(SOCKET_ADDR_ENV)
    return sockets.resolve(raw, SOCKET_ADDR_ENV) if raw else None


def _env_str(env: Mapping[str, str], name: str) -> str:
    raw = env.get(name, "").strip()
    if not raw:
        raise InvalidUsageError(f"{name} is not set; TcpBootstrap.from_env needs RANK, WORLD_SIZE, "
                                "MASTER_ADDR and MASTER_PORT")
    return raw


def _env_int(env: Mapping[str, str], name: str, low: int, high: int) -> int:
    raw = _env_str(env, name)
    try:
        value = int(raw)
    except ValueError:
        raise InvalidUsageError(f"{name}={raw!r}: expected an integer") from None
    return check_int(value, name, low, high)


def _env_token(env: Mapping[str, str]) -> bytes:
    """PYMSCCLPP_JOB_TOKEN if set, else a digest of the rendezvous settings (separates jobs; not a secret)."""
    token = config.get(JOB_TOKEN_ENV, env)
    if token is not None:
        return token
    parts = ["pymscclpp-bootstrap", *(env.get(k, "").strip() for k in
                                     ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"))]
    return hashlib.sha256("\0".join(parts).encode()).digest()[:wire.TOKEN_BYTES]

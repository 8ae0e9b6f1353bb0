"""The rendezvous root: a thread that collects every rank's listening address, then sends each the table."""

from __future__ import annotations

import socket
import threading

from ..._log import get_logger
from ...errors import BootstrapError
from ..deadline import Deadline
from . import sockets, wire

_log = get_logger("bootstrap")
_POLL_S = 0.1  # how often a waiting root checks for stop()
# the root waits this much longer than the ranks' budget, so a rank that registered and waits for the table
# reports its own timeout, never the root's close of the connection a moment before
GRACE_S = 1.0
_RUNNING: dict[bytes, Root] = {}
_RUNNING_LOCK = threading.Lock()


def running(token: bytes) -> Root | None:
    """The root of job ``token`` if this process runs it and it has not finished."""
    with _RUNNING_LOCK:
        return _RUNNING.get(token)


class Root:
    """Listens on ``host:port`` (port 0: any) for the ranks of job ``token``, for at most ``timeout`` seconds (the
    ranks' budget) and ``GRACE_S``."""

    def __init__(self, host: str, port: int, token: bytes, timeout: float | None) -> None:
        self._listener = sockets.listen(host, port, backlog=128)
        self.host, self.port = self._listener.getsockname()[:2]
        self._token = token
        self._budget = timeout
        self._deadline = Deadline(None if timeout is None else timeout + GRACE_S)
        self._stop = threading.Event()
        with _RUNNING_LOCK:
            _RUNNING[token] = self
        self._thread = threading.Thread(target=self._run, name=f"pymscclpp-bootstrap-root-{self.port}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Give up waiting for ranks and end the thread."""
        self._stop.set()
        self.join()

    def join(self) -> None:
        self._thread.join()

    def _run(self) -> None:
        conns: dict[int, socket.socket] = {}
        try:
            self._serve(conns)
        except Exception:
            _log.exception("root %s:%d: rendezvous failed", self.host, self.port)
        finally:
            for conn in conns.values():
                conn.close()
            self._listener.close()
            with _RUNNING_LOCK:
                _RUNNING.pop(self._token, None)

    def _serve(self, conns: dict[int, socket.socket]) -> None:
        addrs: dict[int, tuple[str, int]] = {}
        size = None
        self._listener.settimeout(_POLL_S)
        while size is None or len(conns) < size:
            if self._stop.is_set():
                return
            if self._deadline.expired():
                _log.error("root %s:%d: gave up after the ranks' budget of %s s and %s s of grace: %d rank(s) "
                           "registered, job size %s", self.host, self.port, self._budget, GRACE_S, len(conns),
                           size or "unknown")
                return
            try:
                conn, origin = self._listener.accept()
            except TimeoutError:
                continue
            try:
                rank, rank_size, host, port = self._register(conn)
                if size is not None and rank_size != size:
                    raise BootstrapError(f"rank {rank} says the job has {rank_size} ranks, others said {size}")
                if rank >= rank_size:
                    raise BootstrapError(f"rank {rank} is out of range for {rank_size} ranks")
                if rank in conns:
                    raise BootstrapError(f"rank {rank} registered twice")
            except (OSError, BootstrapError) as exc:
                _log.warning("root %s:%d: refused connection from %s: %s", self.host, self.port, origin, exc)
                conn.close()
                continue
            size = rank_size
            conns[rank] = conn
            addrs[rank] = (host, port)
            _log.debug("root: rank %d of %d registered at %s:%d", rank, size, host, port)
        table = wire.encode(wire.Kind.TABLE, sockets.ROOT_SRC, 0, wire.encode_table([addrs[r] for r in range(size)]))
        for rank, conn in conns.items():
            try:
                sockets.send_frame(conn, table, self._deadline, sockets.ROOT_SRC, f"root: send table to rank {rank}")
            except OSError as exc:
                _log.warning("root: could not send the address table to rank %d: %s", rank, exc)
        _log.info("root %s:%d: all %d ranks registered", self.host, self.port, size)

    def _register(self, conn: socket.socket) -> tuple[int, int, str, int]:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rank = sockets.accept_hello(conn, self._token, sockets.ROOT_SRC, range(sockets.ROOT_SRC),
                                    self._deadline, "root: handshake")
        frame = sockets.read_frame(conn, sockets.handshake_deadline(self._deadline), wire.REGISTER_SIZE,
                                   sockets.ROOT_SRC, "root: registration")
        if frame.kind != wire.Kind.REGISTER or frame.src != rank:
            raise BootstrapError(f"expected REGISTER from rank {rank}, got {frame.kind.name} from {frame.src}")
        return (rank, *wire.decode_register(frame.payload))

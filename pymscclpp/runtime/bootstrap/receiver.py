"""One thread per TCP bootstrap that reads all peer connections (a selector) and fills the mailbox."""

from __future__ import annotations

import selectors
import socket
import threading

from ..._log import get_logger
from ...errors import BootstrapError
from .mailbox import Mailbox
from . import wire

_log = get_logger("bootstrap")
_CHUNK = 1 << 20


class _Stream:
    """Reassembles the DATA frames of one peer's byte stream."""

    def __init__(self, peer: int, limit: int) -> None:
        self.peer = peer
        self._limit = limit
        self._header: wire.Header | None = None
        self._need = wire.HEADER_SIZE
        self._chunks: list[bytes] = []

    def feed(self, sock: socket.socket) -> wire.Frame | None:
        """Read what is available; the frame it completes, if any. EOF and bad frames raise."""
        chunk = sock.recv(min(self._need, _CHUNK))
        if not chunk:
            raise ConnectionResetError("connection closed by the peer")
        self._chunks.append(chunk)
        self._need -= len(chunk)
        if self._need:
            return None
        data = b"".join(self._chunks)
        self._chunks = []
        self._need = wire.HEADER_SIZE
        header, self._header = self._header, None
        if header is not None:
            return wire.Frame(header.kind, header.src, header.tag, data)
        header = wire.decode_header(data, self._limit)
        if header.kind != wire.Kind.DATA or header.src != self.peer:
            raise BootstrapError(f"unexpected {header.kind.name} frame from source {header.src} after the handshake")
        if not header.length:
            return wire.Frame(header.kind, header.src, header.tag, b"")
        self._header, self._need = header, header.length
        return None


class Receiver:
    """Reads the non-blocking peer connections ``conns`` of ``rank`` into ``mailbox`` until ``stop``."""

    def __init__(self, rank: int, conns: dict[int, socket.socket], mailbox: Mailbox, limit: int) -> None:
        self._rank = rank
        self._mailbox = mailbox
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        for peer, conn in conns.items():
            self._selector.register(conn, selectors.EVENT_READ, _Stream(peer, limit))
        self._thread = threading.Thread(target=self._run, name=f"pymscclpp-bootstrap-r{rank}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the thread and release the selector (the connections stay open)."""
        self._wake_w.send(b"\0")
        self._thread.join()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _run(self) -> None:
        try:
            while True:
                for key, _ in self._selector.select():
                    if key.data is None:
                        return
                    self._read(key)
        except Exception:
            _log.exception("rank %d: bootstrap receiver failed", self._rank)
            for key in list(self._selector.get_map().values()):
                if key.data is not None:
                    self._mailbox.lose(key.data.peer, "this rank's receiver thread failed")

    def _read(self, key: selectors.SelectorKey) -> None:
        stream, conn = key.data, key.fileobj
        try:
            frame = stream.feed(conn)
        except (BlockingIOError, InterruptedError):
            return
        except (OSError, BootstrapError) as exc:
            self._selector.unregister(conn)
            if isinstance(exc, OSError):
                reason = exc.strerror or str(exc)
            else:
                reason = f"malformed frame: {exc}"
                _log.error("rank %d: peer %d sent a malformed frame, closing that connection: %s",
                           self._rank, stream.peer, exc)
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._mailbox.lose(stream.peer, reason)
            return
        if frame is not None:
            self._mailbox.put(stream.peer, frame.tag, frame.payload)

"""A TCP link between the proxies of two ranks: Ethernet data, and for every transport the fault path.

Set up pairwise through the bootstrap (the lower rank listens, the higher connects) and opened
with the bootstrap's HELLO handshake carrying the job token. A link that closes without a BYE
means the peer (or its proxy) died; the receiver turns that into an error within a poll period.
"""

from __future__ import annotations

import socket
import threading

from .. import config
from ..errors import PeerDisconnectedError, ProxyError
from ..runtime.bootstrap import sockets, wire
from ..runtime.deadline import Deadline
from . import frames

PROXY_ADDR_ENV = "PYMSCCLPP_SOCKET_ADDR"
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)


def listen_address() -> str:
    """The address this rank's proxy listens on: PYMSCCLPP_SOCKET_ADDR, else this host name's, else loopback."""
    raw = config.get(PROXY_ADDR_ENV)
    if raw:
        return sockets.resolve(raw, PROXY_ADDR_ENV)
    try:
        return sockets.resolve(socket.gethostname(), "hostname")
    except Exception:
        return "127.0.0.1"


class Link:
    """One connected socket to ``peer``'s proxy; ``send`` may be called from several threads."""

    def __init__(self, sock: socket.socket, rank: int, peer: int, timeout: float | None):
        self.sock, self.rank, self.peer, self.timeout = sock, rank, peer, timeout
        self._send_lock = threading.Lock()
        self.bye_sent = self.bye_received = False
        sock.settimeout(timeout)
        try:  # frames are small and latency-bound: no Nagle (it held a FLAG behind the peer's delayed ACK)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    @classmethod
    def connect(cls, comm, peer: int) -> "Link":
        """Both ranks of a pair call this in step; the connected link."""
        deadline = Deadline(comm.timeout_s)
        tag = comm.next_pair_tag(peer)
        what = f"proxy link to peer {peer}"
        if comm.rank < peer:
            host = listen_address()
            with sockets.listen(host, 0, backlog=1) as listener:
                comm.bootstrap.send(wire.pack_addr(host, listener.getsockname()[1]), peer, tag,
                                    what=f"our listening address for the {what}")
                while True:
                    conn, _ = sockets.accept(listener, deadline, comm.rank, what)
                    try:
                        sockets.accept_hello(conn, comm.job_token, comm.rank, (peer,), deadline, what)
                        break
                    except Exception:  # a stray connection: drop it and keep waiting for the peer
                        conn.close()
        else:
            host, port = wire.unpack_addr(comm.bootstrap.recv(peer, tag, what=f"its listening address for the {what}"))
            conn = sockets.connect(host, port, deadline, comm.rank, what)
            try:
                sockets.offer_hello(conn, comm.job_token, comm.rank, peer, deadline, what)
            except BaseException:
                conn.close()
                raise
        return cls(conn, comm.rank, peer, comm.timeout_s)

    def send(self, header: bytes, payload=b"", trailer: bytes = b"") -> None:
        """Send one frame (and ``trailer``, e.g. a whole FLAG frame) atomically with respect to other
        senders; ``payload`` is bytes-like or an iterable of bytes-like chunks (produced while sending,
        e.g. staged from the GPU). The header goes out with the first chunk and the trailer with the
        last, in one gathered send each: a small frame is one syscall and one TCP segment."""
        with self._send_lock:
            try:
                pending = [header]
                for chunk in ((payload,) if isinstance(payload, (bytes, bytearray, memoryview)) else payload):
                    if len(chunk):
                        pending.append(chunk)
                        self._send_all(pending)
                        pending = []
                if trailer:
                    pending.append(trailer)
                self._send_all(pending)
            except OSError as exc:
                raise PeerDisconnectedError(f"rank {self.rank}: proxy link to peer {self.peer} failed while "
                                            f"sending: {exc}") from None

    def _send_all(self, bufs: list) -> None:
        """All bytes of ``bufs`` in order, gathered (sendmsg), looping over partial sends."""
        views = [memoryview(b).cast("B") for b in bufs if len(b)]
        while views:
            if len(views) == 1:
                self.sock.sendall(views[0], _NOSIGNAL)
                return
            sent = self.sock.sendmsg(views, (), _NOSIGNAL)
            while sent:
                if sent >= len(views[0]):
                    sent -= len(views[0])
                    views.pop(0)
                else:
                    views[0] = views[0][sent:]
                    sent = 0

    def send_bye(self) -> None:
        if not self.bye_sent:
            self.bye_sent = True
            self.send(frames.encode(frames.Kind.BYE))

    def read_exact(self, n: int) -> bytes:
        """``n`` bytes from the peer; EOF raises PeerDisconnectedError, a stall past the timeout ProxyError."""
        buf = bytearray(n)
        self.read_into(memoryview(buf))
        return bytes(buf)

    def read_into(self, view: memoryview) -> None:
        """Fill ``view`` from the socket (same errors as ``read_exact``)."""
        got = 0
        while got < len(view):
            try:
                n = self.sock.recv_into(view[got:])
            except TimeoutError:
                raise ProxyError(f"rank {self.rank}: proxy link to peer {self.peer} stalled mid-frame for "
                                 f"{self.timeout} s") from None
            except OSError as exc:
                raise PeerDisconnectedError(f"rank {self.rank}: proxy link to peer {self.peer} failed: {exc}") from None
            if n == 0:
                raise PeerDisconnectedError(f"rank {self.rank}: peer {self.peer} closed its proxy link "
                                            "(the rank or its proxy died)")
            got += n

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

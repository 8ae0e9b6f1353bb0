"""Blocking socket steps of TCP setup, each bounded by a deadline: resolve, listen, connect, handshake."""

from __future__ import annotations

import hmac
import ipaddress
import socket
import time
from collections.abc import Container

from ...errors import BootstrapError, InvalidUsageError, PeerDisconnectedError
from ..deadline import Deadline
from . import wire

HELLO_WAIT_S = 10.0   # a legitimate peer sends its HELLO right after connecting
ROOT_SRC = 2**32 - 1  # source "rank" of the root's frames


def resolve_literal(host: str) -> str:
    """``host`` as a normalized numeric IPv4/IPv6 address; anything else raises ``ValueError``."""
    return str(ipaddress.ip_address(host))


def resolve(host: str, what: str) -> str:
    """The numeric IPv4/IPv6 address of ``host`` (a name or a literal); ``what`` names the setting."""
    try:
        return resolve_literal(host)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise InvalidUsageError(f"{what}={host!r}: cannot resolve this address ({exc})") from None
    return infos[0][4][0]


def family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET


def listen(host: str, port: int, backlog: int) -> socket.socket:
    """A TCP socket listening on ``host:port`` (port 0: any free port)."""
    sock = socket.socket(family(host), socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def connect(host: str, port: int, deadline: Deadline, rank: int, what: str) -> socket.socket:
    """Connect to ``host:port``, retrying refused attempts (the listener may not be up yet)."""
    pause = 0.01
    while (remaining := deadline.remaining()) != 0.0:
        sock = socket.socket(family(host), socket.SOCK_STREAM)
        try:
            sock.settimeout(remaining)
            sock.connect((host, port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError, TimeoutError):
            sock.close()
        except BaseException:
            sock.close()
            raise
        time.sleep(pause if remaining is None else min(pause, remaining))
        pause = min(pause * 2, 0.5)
    raise deadline.error(rank, what)


def accept(listener: socket.socket, deadline: Deadline, rank: int, what: str) -> tuple[socket.socket, tuple]:
    """The next connection on ``listener`` and its origin address, within ``deadline``."""
    listener.settimeout(deadline.remaining())
    try:
        conn, origin = listener.accept()
    except TimeoutError:
        raise deadline.error(rank, what) from None
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn, origin


def send_frame(sock: socket.socket, frame: bytes, deadline: Deadline, rank: int, what: str) -> None:
    """Send one encoded frame on a blocking socket within ``deadline``."""
    sock.settimeout(deadline.remaining())
    try:
        sock.sendall(frame)
    except (TimeoutError, BlockingIOError):
        raise deadline.error(rank, what) from None


def read_frame(sock: socket.socket, deadline: Deadline, limit: int, rank: int, what: str) -> wire.Frame:
    """Read one whole frame; a closed connection raises ``PeerDisconnectedError``."""
    header = wire.decode_header(_read_exact(sock, wire.HEADER_SIZE, deadline, rank, what), limit)
    payload = _read_exact(sock, header.length, deadline, rank, what)
    return wire.Frame(header.kind, header.src, header.tag, payload)


def _read_exact(sock: socket.socket, n: int, deadline: Deadline, rank: int, what: str) -> bytes:
    chunks = []
    while n:
        sock.settimeout(deadline.remaining())
        try:
            chunk = sock.recv(min(n, 1 << 20))
        except (TimeoutError, BlockingIOError):
            raise deadline.error(rank, what) from None
        if not chunk:
            raise PeerDisconnectedError(f"rank {rank}: {what}: connection closed by the other side")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def offer_hello(sock: socket.socket, token: bytes, rank: int, expect_src: int, deadline: Deadline,
                what: str) -> None:
    """Connecting side: send our HELLO, then check the reply carries the token and comes from ``expect_src``."""
    send_frame(sock, wire.encode(wire.Kind.HELLO, rank, 0, token), deadline, rank, what)
    reply = read_frame(sock, deadline, wire.TOKEN_BYTES, rank, what)
    _check_hello(reply, token, (expect_src,))


def accept_hello(sock: socket.socket, token: bytes, rank: int, allowed: Container[int], deadline: Deadline,
                 what: str) -> int:
    """Accepting side: check the first frame is a HELLO with the token from an allowed rank, then reply."""
    hello = read_frame(sock, handshake_deadline(deadline), wire.TOKEN_BYTES, rank, what)
    _check_hello(hello, token, allowed)
    send_frame(sock, wire.encode(wire.Kind.HELLO, rank, 0, token), deadline, rank, what)
    return hello.src


def _check_hello(frame: wire.Frame, token: bytes, allowed: Container[int]) -> None:
    if frame.kind != wire.Kind.HELLO:
        raise BootstrapError(f"first frame is {frame.kind.name}, expected HELLO")
    if not hmac.compare_digest(frame.payload, token):
        raise BootstrapError("HELLO carries the wrong job token (a connection from another job?)")
    if frame.src not in allowed:
        raise BootstrapError(f"HELLO from unexpected rank {frame.src}")


def handshake_deadline(deadline: Deadline) -> Deadline:
    """``deadline``, shortened to ``HELLO_WAIT_S``: a silent connection must not stall setup."""
    remaining = deadline.remaining()
    return Deadline(HELLO_WAIT_S if remaining is None else min(remaining, HELLO_WAIT_S))

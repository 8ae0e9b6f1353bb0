"""Binary wire format of bootstrap frames (a fixed struct header, then the payload), the bootstrap's own tags and its
abort message.

Nothing received is ever unpickled; the parsers here are pure functions over bytes so
they can be fuzzed, and every malformed input raises ``BootstrapError``.
"""

from __future__ import annotations

import enum
import ipaddress
import socket
import struct
from typing import NamedTuple

from ... import config
from ...errors import BootstrapError
from ..frames import check_header

MAGIC = b"PMCB"
VERSION = 1
MAX_PAYLOAD_ENV = "PYMSCCLPP_BOOTSTRAP_MAX_MSG"
DEFAULT_MAX_PAYLOAD: int = config.VARIABLES[MAX_PAYLOAD_ENV].default
TOKEN_BYTES = 16

TAG_LIMIT = 2**63                  # user tags are below; tags above are the bootstrap's own
ALL_GATHER_TAG = TAG_LIMIT
BARRIER_TAG = TAG_LIMIT + 1
ABORT_TAG = TAG_LIMIT + 2          # a set-up scope failed (see Mailbox); never queued
_ABORT = struct.Struct("!QI")      # an abort message: scope, failing rank; the reason follows as UTF-8

# magic, version, kind, reserved (0), source rank, tag, payload length
_HEADER = struct.Struct("!4sBBHIQQ")
HEADER_SIZE = _HEADER.size
# family (4 or 6), address (IPv4 in the first 4 bytes), port
_ADDR = struct.Struct("!B16sH")
ADDR_SIZE = _ADDR.size
_REGISTER = struct.Struct("!I")
REGISTER_SIZE = _REGISTER.size + ADDR_SIZE


class Kind(enum.IntEnum):
    """What a frame carries."""

    HELLO = 1     # first frame of every connection: the job token
    REGISTER = 2  # rank -> root: world size and the rank's listening address
    TABLE = 3     # root -> rank: every rank's listening address, by rank
    DATA = 4      # a user or collective message, demultiplexed by (source, tag)


class Header(NamedTuple):
    kind: Kind
    src: int
    tag: int
    length: int


class Frame(NamedTuple):
    kind: Kind
    src: int
    tag: int
    payload: bytes


def max_payload() -> int:
    """Largest payload accepted, from PYMSCCLPP_BOOTSTRAP_MAX_MSG (bytes; default 256 MiB)."""
    return config.get(MAX_PAYLOAD_ENV)


def encode(kind: Kind, src: int, tag: int, payload: bytes = b"") -> bytes:
    """One frame as bytes; the caller has validated rank, tag and payload size."""
    return _HEADER.pack(MAGIC, VERSION, kind, 0, src, tag, len(payload)) + payload


def decode_header(buf: bytes, limit: int = DEFAULT_MAX_PAYLOAD) -> Header:
    """Parse and validate exactly one header; a payload longer than ``limit`` is refused."""
    if len(buf) != HEADER_SIZE:
        raise BootstrapError(f"truncated frame header: {len(buf)} of {HEADER_SIZE} bytes")
    magic, version, kind, reserved, src, tag, length = _HEADER.unpack(buf)
    kind = check_header(magic, version, kind, reserved, expect_magic=MAGIC, expect_version=VERSION, kinds=Kind,
                        error=BootstrapError, what="bootstrap")
    if length > limit:
        raise BootstrapError(f"frame payload of {length} bytes exceeds the limit of {limit} bytes ({MAX_PAYLOAD_ENV})")
    return Header(kind, src, tag, length)


def decode(buf: bytes, limit: int = DEFAULT_MAX_PAYLOAD) -> Frame:
    """Parse exactly one whole frame (header and payload, nothing after)."""
    header = decode_header(bytes(buf[:HEADER_SIZE]), limit)
    payload = bytes(buf[HEADER_SIZE:])
    if len(payload) != header.length:
        what = "truncated" if len(payload) < header.length else "trailing bytes after"
        raise BootstrapError(f"{what} frame payload: header announces {header.length} bytes, got {len(payload)}")
    return Frame(header.kind, header.src, header.tag, payload)


def pack_addr(host: str, port: int) -> bytes:
    """A numeric IPv4/IPv6 address and port in the fixed ``ADDR_SIZE`` layout."""
    ip = ipaddress.ip_address(host)
    return _ADDR.pack(ip.version, ip.packed, port)


def unpack_addr(buf: bytes) -> tuple[str, int]:
    """Inverse of ``pack_addr``: ``(host, port)``; malformed input raises ``BootstrapError``."""
    if len(buf) != ADDR_SIZE:
        raise BootstrapError(f"address record of {len(buf)} bytes, expected {ADDR_SIZE}")
    family, packed, port = _ADDR.unpack(buf)
    if family == 4 and not any(packed[4:]):
        return socket.inet_ntop(socket.AF_INET, packed[:4]), port
    if family == 6:
        return socket.inet_ntop(socket.AF_INET6, packed), port
    raise BootstrapError(f"bad address record (family {family})")


def encode_register(size: int, host: str, port: int) -> bytes:
    """Payload of a REGISTER frame: the world size and the rank's listening address."""
    return _REGISTER.pack(size) + pack_addr(host, port)


def decode_register(payload: bytes) -> tuple[int, str, int]:
    """Inverse of ``encode_register``: ``(size, host, port)``."""
    if len(payload) != REGISTER_SIZE:
        raise BootstrapError(f"REGISTER payload of {len(payload)} bytes, expected {REGISTER_SIZE}")
    (size,) = _REGISTER.unpack_from(payload)
    return (size, *unpack_addr(payload[_REGISTER.size:]))


def encode_table(addrs: list[tuple[str, int]]) -> bytes:
    """Payload of a TABLE frame: one address record per rank, by rank."""
    return b"".join(pack_addr(host, port) for host, port in addrs)


def decode_table(payload: bytes, size: int) -> list[tuple[str, int]]:
    """Payload of a TABLE frame: ``size`` address records, by rank."""
    if len(payload) != size * ADDR_SIZE:
        raise BootstrapError(f"TABLE payload of {len(payload)} bytes, expected {size * ADDR_SIZE} for {size} ranks")
    return [unpack_addr(payload[i:i + ADDR_SIZE]) for i in range(0, len(payload), ADDR_SIZE)]


def encode_abort(scope: int, origin: int, reason: str) -> bytes:
    """The payload of an abort message: set-up ``scope`` failed on rank ``origin`` because of ``reason``."""
    return _ABORT.pack(scope, origin) + reason.encode(errors="replace")[:4000]


def decode_abort(payload: bytes) -> tuple[int, int, str]:
    """(scope, failing rank, reason) of an abort message; a short one reads as scope 0 (never opened)."""
    if len(payload) < _ABORT.size:
        return 0, -1, "malformed abort message"
    scope, origin = _ABORT.unpack_from(payload)
    return scope, origin, payload[_ABORT.size:].decode(errors="replace")

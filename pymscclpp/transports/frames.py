"""Binary wire format of the frames between two proxies: a fixed header, then the payload.

DATA carries bytes for the receiver's memory ``a`` at offset ``b``; FLAG bumps the receiver's
host token ``a``; ABORT carries a failure text; BYE ends the link in order. Nothing received is
unpickled; ``decode_header`` validates every field and raises ProxyError on malformed input.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from ..errors import ProxyError
from ..runtime.frames import check_header

MAGIC = b"PMPX"
VERSION = 1
MAX_DATA = 1 << 32        # DATA payloads: sizes are 32-bit
MAX_REASON = 4096         # ABORT payloads
_HEADER = struct.Struct("!4sBBHIQQ")  # magic, version, kind, reserved, a, b, payload length
HEADER_SIZE = _HEADER.size


class Kind(enum.IntEnum):
    DATA = 1
    FLAG = 2
    ABORT = 3
    BYE = 4


class Header(NamedTuple):
    kind: Kind
    a: int
    b: int
    length: int


def encode(kind: Kind, a: int = 0, b: int = 0, length: int = 0) -> bytes:
    """A header; the payload (``length`` bytes) follows it on the wire."""
    return _HEADER.pack(MAGIC, VERSION, kind, 0, a, b, length)


def abort_frame(reason: str) -> bytes:
    """A whole ABORT frame with ``reason`` (cut to MAX_REASON bytes of UTF-8)."""
    text = reason.encode("utf-8", "replace")[:MAX_REASON]
    return encode(Kind.ABORT, length=len(text)) + text


def decode_header(buf: bytes) -> Header:
    """Parse and validate one header; anything malformed raises ProxyError."""
    if len(buf) != HEADER_SIZE:
        raise ProxyError(f"truncated proxy frame header: {len(buf)} of {HEADER_SIZE} bytes")
    magic, version, kind, reserved, a, b, length = _HEADER.unpack(buf)
    kind = check_header(magic, version, kind, reserved, expect_magic=MAGIC, expect_version=VERSION, kinds=Kind,
                        error=ProxyError, what="proxy")
    limit = {Kind.DATA: MAX_DATA, Kind.ABORT: MAX_REASON}.get(kind, 0)
    if length > limit:
        raise ProxyError(f"{kind.name} frame announces {length} payload bytes (limit {limit})")
    if kind != Kind.DATA and (b or (kind != Kind.FLAG and a)):
        raise ProxyError(f"{kind.name} frame with unexpected fields a={a} b={b}")
    return Header(kind, a, b, length)

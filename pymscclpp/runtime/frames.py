"""The checks every pymscclpp wire header shares (bootstrap and proxy links): magic, version, kind, reserved."""

from __future__ import annotations

import enum


def check_header(magic: bytes, version: int, kind: int, reserved: int, *, expect_magic: bytes, expect_version: int,
                 kinds: type[enum.IntEnum], error: type[Exception], what: str) -> enum.IntEnum:
    """The frame's kind, after raising ``error`` (naming ``what`` link) for a foreign or malformed header."""
    if magic != expect_magic:
        raise error(f"bad {what} frame magic {magic!r} (expected {expect_magic!r}): not a pymscclpp {what} peer")
    if version != expect_version:
        raise error(f"unsupported {what} wire version {version} (this side speaks {expect_version})")
    try:
        kind = kinds(kind)
    except ValueError:
        raise error(f"unknown {what} frame kind {kind}") from None
    if reserved:
        raise error(f"reserved {what} header field is {reserved}, expected 0")
    return kind

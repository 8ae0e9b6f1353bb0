"""Unique ids as cupy shapes them (128 signed chars) around a pymscclpp bootstrap ``UniqueId``."""

from __future__ import annotations

from ..errors import InvalidUsageError
from ..runtime.bootstrap import UniqueId, get_unique_id as _new_unique_id


def get_unique_id() -> tuple[int, ...]:
    """A new job id as 128 ints in -128..127 (like cupy's); this process now runs the job's rendezvous root."""
    return encode(_new_unique_id())


def encode(uid: UniqueId) -> tuple[int, ...]:
    """``uid``'s 128 bytes as C ``char`` values."""
    return tuple(b - 256 if b > 127 else b for b in uid.to_bytes())


def decode(comm_id) -> UniqueId:
    """The UniqueId of a tuple from ``get_unique_id`` (bytes, or ints read as signed or unsigned chars)."""
    try:
        values = [int(v) for v in comm_id]
    except (TypeError, ValueError):
        raise InvalidUsageError(f"commId must be the tuple from get_unique_id(), "
                                f"got {type(comm_id).__name__}") from None
    if len(values) != UniqueId.SIZE or not all(-128 <= v <= 255 for v in values):
        raise InvalidUsageError(f"commId must be {UniqueId.SIZE} char values (from get_unique_id()), got "
                                f"{len(values)} values")
    try:
        return UniqueId.from_bytes(bytes(v & 0xFF for v in values))
    except InvalidUsageError as exc:
        raise InvalidUsageError(f"commId is not a pymscclpp unique id ({exc}): make it with "
                                "pymscclpp.nccl.get_unique_id(), not cupy.cuda.nccl.get_unique_id()") from None

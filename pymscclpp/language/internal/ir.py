"""The compiler's intermediate form: ops as the DSL recorded them, with real ranks and gpu-level channel ids."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

from .types import BufferType, ChannelType, ReduceOperationType, SyncType

_DSL_DIRS = frozenset({os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))})


@dataclass
class Ref:
    """A chunk range of ``rank``'s ``buffer``; ``remote`` when the op reaches it through a channel; ``group``
    when it is that range on every rank of a switch channel's group (a multimem access)."""

    rank: int
    buffer: BufferType
    index: int
    size: int
    remote: bool = False
    group: tuple[int, ...] = ()

    def same_range(self, other: "Ref") -> bool:
        return (self.rank, self.buffer, self.index, self.size) == (other.rank, other.buffer, other.index, other.size)


@dataclass(eq=False)
class IrOp:
    """One instruction of one thread block; ``channels`` holds gpu-level channel ids of ``channel_type``."""

    rank: int
    tb: int
    name: str
    src: list[Ref] = field(default_factory=list)
    dst: list[Ref] = field(default_factory=list)
    channel_type: ChannelType | None = None
    channels: list[int] = field(default_factory=list)
    reduce_op: ReduceOperationType | None = None
    tbg: tuple[int, int] | None = None  # (index in group, group size)
    data_sync: SyncType = SyncType.none
    barrier: tuple[int, int] | None = None  # (barrier id, number of thread blocks)
    semaphores: list[int] = field(default_factory=list)
    loop: Any = None  # the LoopIterationContext the op was written in
    ops: list["IrOp"] = field(default_factory=list)  # body of a "pipeline" op
    where: str = ""  # file:line of the DSL call that made it

    def describe(self) -> str:
        """Short human description for error messages: rank, thread block, op, and the user's source line."""
        at = f" at {self.where}" if self.where else ""
        return f"rank {self.rank} tb {self.tb} op '{self.name}'{at}"


def caller_location() -> str:
    """``file:line`` of the innermost frame outside the DSL's own modules: the call in the user's program."""
    frame = sys._getframe(1)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) in _DSL_DIRS:
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else ""

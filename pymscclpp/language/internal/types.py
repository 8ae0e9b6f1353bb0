"""Enums and small value types of the DSL, named and valued as in MSCCL++'s ``internal/types.py``."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

_SYNC_BITS = {"none": 0, "before": 1, "after": 2, "both": 3}


class SyncType(Enum):
    """Where an op gets a thread-block-wide ``__syncthreads`` (a ``nop``): before, after, both or none."""

    none = "none"
    before = "before"
    after = "after"
    both = "both"

    def __str__(self) -> str:
        return self.value

    def _bits(self) -> int:
        return _SYNC_BITS[self.value]

    @staticmethod
    def _from_bits(bits: int) -> "SyncType":
        return [SyncType.none, SyncType.before, SyncType.after, SyncType.both][bits]

    def __or__(self, other: "SyncType") -> "SyncType":
        return SyncType._from_bits(self._bits() | other._bits())

    def __and__(self, other: "SyncType") -> "SyncType":
        return SyncType._from_bits(self._bits() & other._bits())


class ReduceOperationType(Enum):
    """Element-wise reduction applied by reduce ops."""

    sum = "sum"
    min = "min"
    max = "max"

    def __str__(self) -> str:
        return self.value


class BufferType(Enum):
    """The three buffers of a rank, with their plan codes."""

    input = "i"
    output = "o"
    scratch = "s"

    def __str__(self) -> str:
        return self.value

    def __lt__(self, other: "BufferType") -> bool:
        return self.value < other.value


class ChannelType(Enum):
    """Channel kinds: point-to-point ``memory`` and ``port`` channels, and ``switch`` (NVLS) channels over a group."""

    port = "port"
    memory = "memory"
    switch = "switch"
    none = "none"

    def __str__(self) -> str:
        return self.value


class ReplicationPolicy(Enum):
    """How chunk indices of replicated instances are laid out (MSCCL++ ``ReplicationPolicy``)."""

    interleaved = "interleaved"
    none = "none"

    def __str__(self) -> str:
        return self.value


@dataclass
class RankGroup:
    """The ranks of a switch channel's group (MSCCL++ ``RankGroup``)."""

    size: int
    ranks: list[int]

    def to_dict(self) -> dict:
        return {"size": self.size, "ranks": list(self.ranks)}


@dataclass(frozen=True)
class Chunk:
    """A contiguous range of ``size`` chunks starting at ``index`` in one buffer of one rank."""

    rank: int
    buffer: BufferType
    index: int
    size: int

    def to_dict(self) -> dict:
        return {"rank": self.rank, "type": self.buffer.value, "index": self.index, "size": self.size}

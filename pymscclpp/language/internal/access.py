"""What each IR op reads and writes within one thread block, for the automatic-synchronization pass.

Two accesses conflict when they overlap and one writes, except an LL packet write followed by a packet read:
the reader spins on the packet's flag, so it needs no barrier. The interpreter applies the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...plan.layout import IoLayout
from ...plan.opcodes import DATA_OPS, PACKET_ROLES, roles
from .ir import IrOp, Ref
from .types import BufferType, ChannelType


@dataclass(frozen=True)
class Access:
    """An access at chunk granularity: chunks [lo, hi) of ``space`` ("io" or "s") on ``rank``."""

    rank: int
    space: str
    lo: int
    hi: int
    write: bool
    packet: bool

    def conflicts_with_later(self, later: "Access") -> bool:
        """True when ``later``, in the same thread block and epoch, needs a barrier after this access."""
        if (self.rank, self.space) != (later.rank, later.space) or self.hi <= later.lo or later.hi <= self.lo:
            return False
        if not (self.write or later.write):
            return False
        return not (self.write and self.packet and later.packet and not later.write)


def _locate(ref: Ref, layouts: list[IoLayout], rank: int) -> tuple[str, int]:
    if ref.buffer == BufferType.scratch:
        return "s", ref.index
    return "io", layouts[rank].offset(ref.buffer.value) + ref.index


def accesses(op: IrOp, layouts: list[IoLayout]) -> list[Access]:
    """Accesses made by the thread block itself (a port channel's proxy writes the remote side on its own)."""
    if op.name == "pipeline":
        return [a for inner in op.ops for a in accesses(inner, layouts)]
    if op.name not in DATA_OPS:
        return []
    src_roles, dst_roles = roles(op.name, len(op.src), len(op.dst))
    proxied = op.channel_type == ChannelType.port
    out = []
    for refs, rls, write in ((op.src, src_roles, False), (op.dst, dst_roles, True)):
        for ref, role in zip(refs, rls):
            if proxied and ref.remote:
                continue
            for rank in ref.group or (ref.rank,):
                space, lo = _locate(ref, layouts, rank)
                out.append(Access(rank, space, lo, lo + ref.size, write, role in PACKET_ROLES))
    return out

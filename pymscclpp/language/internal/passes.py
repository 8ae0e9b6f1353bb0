"""Per-thread-block compiler passes: instruction fusion, data-sync barriers, automatic sync, barrier cleanup."""

from __future__ import annotations

from typing import Callable

from ...plan.layout import IoLayout
from ...plan.opcodes import CHANNEL_SYNC_OPS, SEMAPHORE_OPS
from .access import Access, accesses
from .ir import IrOp
from .types import ChannelType, SyncType

_REDUCE_SEND = {"re": "res", "rre": "rres", "res": "res", "rres": "rres"}


def _nop(like: IrOp) -> IrOp:
    return IrOp(like.rank, like.tb, "nop", loop=like.loop, where=like.where)


def _same_refs(a, b) -> bool:
    return len(a) == len(b) and all(x.same_range(y) for x, y in zip(a, b))


def _fuse_pair(a: IrOp, b: IrOp) -> IrOp | None:
    """One op doing what ``a`` then ``b`` do, or None. Fusions keep the result identical to the unfused pair."""
    if a.tbg != b.tbg:
        return None
    both_sync = a.name == b.name and a.name in ("signal", "rlxsignal", "wait", "rlxwait", "flush")
    if both_sync and a.channel_type == b.channel_type and not set(a.channels) & set(b.channels):
        return IrOp(a.rank, a.tb, a.name, channel_type=a.channel_type, channels=a.channels + b.channels,
                    data_sync=a.data_sync | b.data_sync, loop=a.loop, where=a.where)
    if a.name == b.name and a.name in ("put", "pws", "pwsf", "ppkt", "get") and a.channel_type == b.channel_type \
            and a.src[0].size == b.src[0].size and a.src[0].buffer == b.src[0].buffer and a.src[0].remote == b.src[0].remote:
        return IrOp(a.rank, a.tb, a.name, a.src + b.src, a.dst + b.dst, channel_type=a.channel_type,
                    channels=a.channels + b.channels, tbg=a.tbg, loop=a.loop, where=a.where)
    # packets forwarded from one scratch chunk to several peers: one multi-destination forward
    if a.name == b.name == "rppkt" and a.channel_type == b.channel_type and _same_refs(a.src, b.src):
        return IrOp(a.rank, a.tb, "rppkt", list(a.src), a.dst + b.dst, channel_type=a.channel_type,
                    channels=a.channels + b.channels, tbg=a.tbg, loop=a.loop, where=a.where)
    # accumulating reduces into the same chunk merge their sources: dst = dst + x + y
    if a.name == b.name and a.name in ("re", "rre", "repkt") and a.reduce_op == b.reduce_op \
            and a.dst[0].same_range(a.src[0]) and _same_refs(a.dst, b.dst) and a.src[0].same_range(b.src[0]) \
            and a.channel_type == b.channel_type:
        return IrOp(a.rank, a.tb, a.name, a.src + b.src[1:], list(a.dst), channel_type=a.channel_type,
                    channels=a.channels + b.channels, reduce_op=a.reduce_op, tbg=a.tbg, loop=a.loop, where=a.where)
    # a reduce followed by a put of its result becomes a reduce-send
    if a.name in _REDUCE_SEND and b.name == "put" and b.channel_type == ChannelType.memory \
            and b.src[0].same_range(a.dst[0]) and len(b.src) == 1:
        return IrOp(a.rank, a.tb, _REDUCE_SEND[a.name], list(a.src), a.dst + b.dst, channel_type=ChannelType.memory,
                    channels=a.channels + b.channels, reduce_op=a.reduce_op, tbg=a.tbg, loop=a.loop, where=a.where)
    if a.name in ("repkt", "respkt") and b.name == "ppkt" and b.channel_type == ChannelType.memory \
            and b.src[0].same_range(a.dst[0]) and len(b.src) == 1:
        return IrOp(a.rank, a.tb, "respkt", list(a.src), a.dst + b.dst, channel_type=ChannelType.memory,
                    channels=a.channels + b.channels, reduce_op=a.reduce_op, tbg=a.tbg, loop=a.loop, where=a.where)
    if a.name == "repkt" and b.name == "cpkt" and b.src[0].same_range(a.dst[0]):
        return IrOp(a.rank, a.tb, "recpkt", list(a.src), a.dst + b.dst, reduce_op=a.reduce_op, tbg=a.tbg,
                    loop=a.loop, where=a.where)
    if a.name in ("recpkt", "recspkt") and b.channel_type == ChannelType.memory and len(b.src) == 1 and (
            (b.name == "ppkt" and b.src[0].same_range(a.dst[0])) or (b.name == "rppkt" and b.src[0].same_range(a.dst[1]))):
        return IrOp(a.rank, a.tb, "recspkt", list(a.src), a.dst + b.dst, channel_type=ChannelType.memory,
                    channels=a.channels + b.channels, reduce_op=a.reduce_op, tbg=a.tbg, loop=a.loop, where=a.where)
    # a multimem load-reduce whose result is multicast-stored becomes one load-reduce-store (the local chunk
    # in between is not written, as in MSCCL++)
    if a.name == "glre" and b.name == "gstore" and a.channels == b.channels and b.src[0].same_range(a.dst[0]) \
            and a.src[0].buffer == b.dst[0].buffer and a.src[0].size == b.dst[0].size:
        return IrOp(a.rank, a.tb, "glres", list(a.src), list(b.dst), channel_type=ChannelType.switch,
                    channels=list(a.channels), reduce_op=a.reduce_op, loop=a.loop, where=a.where)
    return None


def fuse(ops: list[IrOp]) -> list[IrOp]:
    """Greedily fuse each op with the ops that follow it, as MSCCL++'s optimizer does."""
    out: list[IrOp] = []
    for op in ops:
        if op.name == "pipeline":
            op.ops = fuse(op.ops)
        fused = _fuse_pair(out[-1], op) if out else None
        if fused is None:
            out.append(op)
        else:
            out[-1] = fused
    return out


def insert_data_sync(ops: list[IrOp]) -> list[IrOp]:
    """Turn each sync op's ``data_sync`` into explicit ``nop`` barriers before and/or after it."""
    out: list[IrOp] = []
    for op in ops:
        if op.name == "pipeline":
            op.ops = insert_data_sync(op.ops)
        syncs = op.name in CHANNEL_SYNC_OPS or op.name in SEMAPHORE_OPS
        if syncs and op.data_sync & SyncType.before == SyncType.before:
            out.append(_nop(op))
        out.append(op)
        if syncs and op.data_sync & SyncType.after == SyncType.after:
            out.append(_nop(op))
    return out


def auto_sync(ops: list[IrOp], layouts: list[IoLayout]) -> list[IrOp]:
    """Insert a ``nop`` before any op that conflicts with an access since the thread block's last barrier."""
    out: list[IrOp] = []
    seen: list[Access] = []
    for op in ops:
        if op.name in ("nop", "barrier"):
            seen = []
            out.append(op)
            continue
        if op.name == "pipeline":
            op.ops = auto_sync(op.ops, layouts)
        mine = accesses(op, layouts)
        if any(prev.conflicts_with_later(a) for prev in seen for a in mine):
            out.append(_nop(op))
            seen = []
        seen.extend(mine)
        out.append(op)
    return out


def merge_syncs(ops: list[IrOp], top_level: bool = True) -> list[IrOp]:
    """Drop redundant barriers: repeated ``nop``s, ``nop``s next to a ``barrier``, and at a thread block's ends."""
    out: list[IrOp] = []
    for op in ops:
        if op.name == "pipeline":
            op.ops = merge_syncs(op.ops, top_level=False)
        if op.name == "nop" and out and out[-1].name in ("nop", "barrier"):
            continue
        if op.name == "barrier" and out and out[-1].name == "nop":
            out.pop()
        out.append(op)
    if top_level:
        while out and out[0].name == "nop":
            out.pop(0)
        while out and out[-1].name == "nop":
            out.pop()
    return out


def run_passes(ops: list[IrOp], layouts: list[IoLayout], instr_fusion: bool, sync: bool) -> list[IrOp]:
    """The pipeline of passes MSCCL++ runs: fusion, data-sync insertion, automatic sync; then barrier cleanup."""
    steps: list[Callable[[list[IrOp]], list[IrOp]]] = []
    if instr_fusion:
        steps.append(fuse)
    steps.append(insert_data_sync)
    if sync:
        steps.append(lambda o: auto_sync(o, layouts))
    steps.append(merge_syncs)
    for step in steps:
        ops = step(ops)
    return ops

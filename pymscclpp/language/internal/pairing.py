"""Signal/wait pairing check: every signal on a channel must meet exactly one wait on its partner channel."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from ..errors import DSLError
from .ir import IrOp
from .types import ChannelType

_SIGNALS = ("signal", "rlxsignal", "pws", "pwsf")  # a put-with-signal signals its channel too
_WAITS = ("wait", "rlxwait")


def _walk(tbs: dict[int, list[IrOp]]) -> Iterable[IrOp]:
    for tb in sorted(tbs):
        for op in tbs[tb]:
            yield op
            yield from op.ops


def partner(channels: list[list[int]], rank: int, channel: int) -> int | None:
    """Index, on the peer, of the channel paired with ``rank``'s ``channel`` (k-th a->b pairs with k-th b->a)."""
    peer = channels[rank][channel]
    occurrence = channels[rank][:channel].count(peer)
    back = [i for i, p in enumerate(channels[peer]) if p == rank]
    return back[occurrence] if occurrence < len(back) else None


def check_pairing(ops_by_rank: list[dict[int, list[IrOp]]], channels: dict[ChannelType, list[list[int]]]) -> None:
    """Raise ``DSLError`` naming the first signal or wait that has no counterpart on the other rank."""
    signals: dict[tuple, list[IrOp]] = defaultdict(list)
    waits: dict[tuple, list[IrOp]] = defaultdict(list)
    for rank, tbs in enumerate(ops_by_rank):
        for op in _walk(tbs):
            table = signals if op.name in _SIGNALS else waits if op.name in _WAITS else None
            if table is not None:
                for c in op.channels:
                    table[(op.channel_type, rank, c)].append(op)
    for ctype, lists in channels.items():
        kind = ctype.value
        for rank, peers in enumerate(lists):
            for c, peer in enumerate(peers):
                sent = signals[(ctype, rank, c)]
                back = partner(lists, rank, c)
                if back is None:
                    if sent or waits[(ctype, rank, c)]:
                        op = (sent or waits[(ctype, rank, c)])[0]
                        raise DSLError(f"{op.describe()} uses {kind} channel {c} to rank {peer}, but rank {peer} has no "
                                       f"{kind} channel back to rank {rank} to pair with it "
                                       f"(create one with {type_name(ctype)}({rank}, {peer}))")
                    continue
                received = waits[(ctype, peer, back)]
                if len(sent) > len(received):
                    op = sent[len(received)]
                    raise DSLError(f"{op.describe()}: signal number {len(received) + 1} on {kind} channel {c} to rank "
                                   f"{peer} is never waited for: rank {peer} waits {len(received)} time(s) on its "
                                   f"paired channel {back}, rank {rank} signals {len(sent)} time(s)")
                if len(received) > len(sent):
                    op = received[len(sent)]
                    raise DSLError(f"{op.describe()}: wait number {len(sent) + 1} on {kind} channel {back} from rank "
                                   f"{rank} can never be satisfied: rank {rank} signals its paired channel {c} only "
                                   f"{len(sent)} time(s), rank {peer} waits {len(received)} time(s)")


def type_name(ctype: ChannelType) -> str:
    return "MemoryChannel" if ctype == ChannelType.memory else "PortChannel"

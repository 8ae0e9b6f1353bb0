"""Signal/wait pairing checks of the compiler.

``check_pairing`` is MSCCL++'s rule: for each pair of ranks and channel type, the signals rank a sends to b
equal the waits b does for a, whichever of their channels carry them. ``check_channel_pairing`` is the
stricter opt-in lint: each channel's signals must meet waits on its partner channel (the k-th a->b pairs
with the k-th b->a, as the executor connects them); a mismatch there is a hang at run time.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from ..errors import DSLError
from .ir import IrOp
from .types import ChannelType

_SIGNALS = ("signal", "rlxsignal", "pws", "pwsf")  # a put-with-signal signals its channel too
_WAITS = ("wait", "rlxwait")

Channels = dict[ChannelType, list[list[int]]]


def _walk(tbs: dict[int, list[IrOp]]) -> Iterable[IrOp]:
    for tb in sorted(tbs):
        for op in tbs[tb]:
            yield op
            yield from op.ops


def _tally(ops_by_rank: list[dict[int, list[IrOp]]]) -> tuple[dict[tuple, list[IrOp]], dict[tuple, list[IrOp]]]:
    """Signal and wait ops by (channel type, rank, channel index), one entry per channel an op names."""
    signals: dict[tuple, list[IrOp]] = defaultdict(list)
    waits: dict[tuple, list[IrOp]] = defaultdict(list)
    for rank, tbs in enumerate(ops_by_rank):
        for op in _walk(tbs):
            table = signals if op.name in _SIGNALS else waits if op.name in _WAITS else None
            if table is not None and op.channel_type in (ChannelType.memory, ChannelType.port):
                for c in op.channels:
                    table[(op.channel_type, rank, c)].append(op)
    return signals, waits


def check_pairing(ops_by_rank: list[dict[int, list[IrOp]]], channels: Channels) -> None:
    """Raise ``DSLError`` when rank a's signals to rank b on some channel type are not as many as b's waits for a."""
    signals, waits = _tally(ops_by_rank)
    sent: dict[tuple, list[IrOp]] = defaultdict(list)  # (type, from, to)
    awaited: dict[tuple, list[IrOp]] = defaultdict(list)  # (type, signaller, waiter)
    for (ctype, rank, c), ops in signals.items():
        sent[(ctype, rank, channels[ctype][rank][c])].extend(ops)
    for (ctype, rank, c), ops in waits.items():
        awaited[(ctype, channels[ctype][rank][c], rank)].extend(ops)
    for key in sorted(set(sent) | set(awaited), key=lambda k: (k[0].value, k[1], k[2])):
        ctype, src, dst = key
        s, w = sent[key], awaited[key]
        if len(s) > len(w):
            raise DSLError(f"{s[len(w)].describe()}: signal number {len(w) + 1} to rank {dst} on {ctype.value} "
                           f"channels is never waited for: rank {src} signals rank {dst} {len(s)} time(s), rank "
                           f"{dst} waits for rank {src} {len(w)} time(s){_no_way_back(channels, ctype, src, dst)}")
        if len(w) > len(s):
            raise DSLError(f"{w[len(s)].describe()}: wait number {len(s) + 1} for rank {src} on {ctype.value} "
                           f"channels can never be satisfied: rank {src} signals rank {dst} only {len(s)} time(s), "
                           f"rank {dst} waits {len(w)} time(s)")


def _no_way_back(channels: Channels, ctype: ChannelType, src: int, dst: int) -> str:
    if src in channels[ctype][dst]:
        return ""
    return (f"; rank {dst} has no {ctype.value} channel back to rank {src} to wait on "
            f"(create one with {type_name(ctype)}({src}, {dst}))")


def partner(channels: list[list[int]], rank: int, channel: int) -> int | None:
    """Index, on the peer, of the channel paired with ``rank``'s ``channel`` (k-th a->b pairs with k-th b->a)."""
    peer = channels[rank][channel]
    occurrence = channels[rank][:channel].count(peer)
    back = [i for i, p in enumerate(channels[peer]) if p == rank]
    return back[occurrence] if occurrence < len(back) else None


def check_channel_pairing(ops_by_rank: list[dict[int, list[IrOp]]], channels: Channels) -> None:
    """Raise ``DSLError`` naming the first signal or wait that has no counterpart on its partner channel."""
    signals, waits = _tally(ops_by_rank)
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
                                       f"{kind} channel paired with it (create one with {type_name(ctype)}({rank}, {peer}))")
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

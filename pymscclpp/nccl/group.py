"""NCCL group semantics: calls between ``groupStart()`` and ``groupEnd()`` are queued, then issued together."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, NamedTuple

from ..errors import InvalidUsageError
from ..fallback import nccl as fb


class Call(NamedTuple):
    """One validated operation; ``fallback`` is set when NCCL runs it (then it joins an NCCL group), ``p2p`` is
    the Communicator a send or recv posts to (a group's go out in one ``p2p.group()``)."""
    issue: Callable[[], None]
    fallback: fb.NcclFallback | None
    p2p: Any = None


class _State(threading.local):  # like NCCL, a group belongs to the thread that opened it
    depth = 0
    queue: list[Call]

    def __init__(self):
        self.queue = []


_state = _State()


def groupStart() -> None:  # noqa: N802 (cupy's name)
    """Start queueing calls (groups nest; the outermost ``groupEnd`` issues them)."""
    _state.depth += 1


def groupEnd() -> None:  # noqa: N802
    """End a group: at the outermost level issue the queued calls, pymscclpp's in order (sends and receives
    together at the end, one group per communicator), then NCCL's fused."""
    if _state.depth == 0:
        raise InvalidUsageError("groupEnd() without a matching groupStart()")
    _state.depth -= 1
    if _state.depth == 0:
        calls, _state.queue = _state.queue, []
        _issue(calls)


def submit(call: Call) -> None:
    """Issue ``call`` now, or queue it inside a group."""
    if _state.depth:
        _state.queue.append(call)
    elif call.fallback is None:
        call.issue()
    else:
        _issue([call])


def submit_served(issue: Callable[[], None]) -> None:
    """``submit`` of a call pymscclpp serves, with no ``Call`` made unless a group queues it (every eager call)."""
    if _state.depth:
        _state.queue.append(Call(issue, None))
    else:
        issue()


def _issue(calls: list[Call]) -> None:
    with contextlib.ExitStack() as groups:  # each communicator's sends and receives: one launch at the end
        for comm in dict.fromkeys(call.p2p for call in calls if call.p2p is not None):
            groups.enter_context(comm.group())
        for call in calls:
            if call.fallback is None:
                call.issue()
    fused = [call for call in calls if call.fallback is not None]
    if not fused:
        return
    for call in fused:  # NCCL communicators are made outside the group: ncclCommInitRank blocks on all ranks
        call.fallback.ready()
    fb.group_start()
    try:
        for call in fused:
            call.issue()
    finally:
        fb.group_end()

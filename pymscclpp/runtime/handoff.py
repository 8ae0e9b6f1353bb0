"""Pairwise hand-off of memory handles: each side maps the other's handle, then both trade the outcome.

Neither side returns before its peer has mapped its memory, so a rank that fails right afterwards (and
exits, unlinking its segments) cannot turn the peer's mapping into a misleading "segment does not
exist"; and a mapping that fails on one side raises on both, with that first cause.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from ..errors import PymscclppError, RegistrationError

T = TypeVar("T")
_OK = b"ok"
_FAILED = b"failed:"


def trade(bootstrap, peer: int, tag: int, handle: bytes, open_peer: Callable[[bytes], T], what: str) -> T:
    """Send ``handle`` to ``peer``, map the peer's with ``open_peer``, and agree on success (a pair call);
    ``what``: the memory, in words (for errors)."""
    bootstrap.send(handle, peer, tag, what=f"the handle of our {what}")
    received = bootstrap.recv(peer, tag, what=f"the handle of its {what}")
    try:
        mapped, failure = open_peer(received), None
    except PymscclppError as exc:
        mapped, failure = None, exc
    bootstrap.send(_OK if failure is None else _FAILED + f"{type(failure).__name__}: {failure}".encode(), peer, tag,
                   what=f"whether we mapped its {what}")
    answer = bootstrap.recv(peer, tag, what=f"whether it mapped our {what}")
    if failure is not None:
        raise failure
    if answer != _OK:
        getattr(mapped, "close", lambda: None)()
        cause = answer[len(_FAILED):].decode(errors="replace")
        raise RegistrationError(f"rank {bootstrap.rank}: peer {peer} could not map this rank's memory: {cause}")
    return mapped

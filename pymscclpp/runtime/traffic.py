"""Channel traffic under the simulator: the bytes this rank moves through its channels, per peer, as a check of
what each algorithm states (``Algorithm.traffic``) that needs no hardware.

With ``PYMSCCLPP_TRAFFIC=1`` in the environment of a simulator rank, the peer memory of every MemoryChannel made
afterwards (its ``dst``) is a NumPy view that counts every element read from it (bytes this rank pulled from the
peer) and written to it (bytes it pushed to the peer). ``counts()`` gives them by peer; ``reset()`` zeroes them.
A rank's sent bytes are its pushes plus what peers pulled from it (``per_rank`` combines every rank's counts).
"""

from __future__ import annotations

import numpy as np

from .. import config

ENV = "PYMSCCLPP_TRAFFIC"
_COUNTS: dict[int, list[int]] = {}  # peer -> [bytes pushed to it, bytes pulled from it]


def enabled() -> bool:
    """Whether PYMSCCLPP_TRAFFIC asks for counting (``1``) or not (unset, ``0``)."""
    return config.get(ENV)


class _Counted(np.ndarray):
    """A view of a peer's memory whose element reads and writes add to ``_COUNTS[peer]``."""

    peer: int = -1

    def __array_finalize__(self, obj) -> None:
        self.peer = getattr(obj, "peer", -1)

    def __getitem__(self, idx):
        out = super().__getitem__(idx)
        if not isinstance(out, np.ndarray):
            _COUNTS.setdefault(self.peer, [0, 0])[1] += self.itemsize
        return out

    def __setitem__(self, idx, value) -> None:
        super().__setitem__(idx, value)
        size = np.ndarray.__getitem__(self, idx)
        _COUNTS.setdefault(self.peer, [0, 0])[0] += (size.size if isinstance(size, np.ndarray) else 1) * self.itemsize


def counted(array: np.ndarray, peer: int) -> np.ndarray:
    """``array`` (peer ``peer``'s memory) as a view that counts the bytes moved through it."""
    view = array.view(_Counted)
    view.peer = peer
    return view


def reset() -> None:
    """Zero every count."""
    _COUNTS.clear()


def counts() -> dict[int, tuple[int, int]]:
    """(bytes pushed to, bytes pulled from) each peer since the last ``reset``."""
    return {peer: (pushed, pulled) for peer, (pushed, pulled) in _COUNTS.items()}


def per_rank(all_counts: list[dict[int, tuple[int, int]]]) -> list[tuple[int, int]]:
    """(bytes sent, bytes received) of each rank from every rank's ``counts()`` (in rank order): a rank sends
    what it pushes and what peers pull from it, and receives what it pulls and what peers push to it."""
    sent = [0] * len(all_counts)
    received = [0] * len(all_counts)
    for rank, by_peer in enumerate(all_counts):
        for peer, (pushed, pulled) in by_peer.items():
            sent[rank] += pushed
            received[peer] += pushed
            received[rank] += pulled
            sent[peer] += pulled
    return list(zip(sent, received))

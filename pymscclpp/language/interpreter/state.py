"""Execution state of the interpreter's actors: thread blocks, port-channel proxies, and their vector clocks."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...plan import Op


@dataclass
class Site:
    """Where an access comes from, for error messages."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass
class MicroOp:
    """One op as a thread block executes it: a plan op, and for pipeline bodies the byte window of this pass."""

    op: Op
    site: int
    window: tuple[int, int] | None = None  # (offset, unit) bytes within each buffer the op names


@dataclass
class TbState:
    """A thread block: program counter and clocks. ``vc`` is what all its threads know (as of the last
    ``__syncthreads``); ``pending`` is what some of its threads learnt since (from waits, flushes)."""

    rank: int
    id: int
    actor: int
    micro: list[MicroOp]
    vc: np.ndarray
    pending: np.ndarray
    epoch: int = 1
    pc: int = 0
    execution: int = 1
    at_barrier: bool = False

    def __post_init__(self) -> None:
        self.vc[self.actor] = self.epoch - 1
        self.start_vc = self.vc.copy()

    def start_kernel(self, known: np.ndarray, execution: int) -> None:
        """Begin ``execution`` knowing ``known`` (everything ordered before this kernel's launch)."""
        self.vc = known.copy()
        self.pending[:] = 0
        self.epoch += 1
        self.vc[self.actor] = self.epoch - 1
        self.start_vc = self.vc.copy()
        self.pc = 0
        self.execution = execution

    def sync(self) -> None:
        """A ``__syncthreads``: everything any thread learnt becomes known to all, and a new epoch starts."""
        np.maximum(self.vc, self.pending, out=self.vc)
        self.epoch += 1
        self.vc[self.actor] = self.epoch - 1

    def knowledge(self) -> np.ndarray:
        """Everything this block knows including its current epoch: what a barrier or kernel end publishes."""
        known = np.maximum(self.vc, self.pending)
        known[self.actor] = self.epoch
        return known

    @property
    def at_end(self) -> bool:
        return self.pc >= len(self.micro)

    def where(self) -> str:
        return f"rank {self.rank} tb {self.id}"


@dataclass
class Proxy:
    """The host proxy of one port channel: it performs that channel's puts in FIFO order."""

    actor: int
    vc: np.ndarray
    count: int = 0

    def issue(self, issuer_vc: np.ndarray) -> int:
        """Accept one more put issued by a thread block knowing ``issuer_vc``; returns its stamp."""
        np.maximum(self.vc, issuer_vc, out=self.vc)
        self.count += 1
        self.vc[self.actor] = self.count - 1
        return self.count

    def completed(self) -> np.ndarray:
        """Knowledge that every put issued so far has landed (what a signal or flush on the channel conveys)."""
        known = self.vc.copy()
        known[self.actor] = self.count
        return known


@dataclass
class SignalQueue:
    """Signals sent on one channel end, as cumulative knowledge: wait number k learns ``joined[k]``.

    ``launched[k]`` is the part of it that a relaxed wait learns: what was ordered before the signalling
    kernels started (a kernel boundary is a full fence, so even a relaxed signal conveys that much)."""

    joined: list[np.ndarray] = field(default_factory=list)
    launched: list[np.ndarray] = field(default_factory=list)
    consumed: int = 0

    def push(self, message: np.ndarray, at_launch: np.ndarray) -> None:
        self.joined.append(message if not self.joined else np.maximum(self.joined[-1], message))
        self.launched.append(at_launch if not self.launched else np.maximum(self.launched[-1], at_launch))

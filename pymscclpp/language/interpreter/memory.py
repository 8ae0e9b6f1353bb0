"""Simulated device memory with happens-before race detection and LL packet flags.

Every access is stamped (actor, clock): an actor is a thread block, a port channel's proxy, or a rank's host.
An earlier access is ordered before a later one when the later actor's vector clock has caught up with the
earlier stamp. Two unordered accesses to the same bytes race when one writes, except that an LL packet read
of packet-written bytes is synchronized by the packet's flag. Each packet also remembers its writer's
knowledge (``pkt_ref``): an op computing from packets cannot have its writes observed by reads that the
packets causally depend on, so those writes are checked against earlier reads with that knowledge added.
Tracking is per ``cell`` bytes (the plan's buffer alignment), so reported ranges are cell-rounded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Conflict:
    """An earlier access (by ``site``) that a new access races with, at byte ``offset`` of a space."""

    site: int
    earlier_write: bool
    offset: int


class Space:
    """One address space of one rank (its io buffers or its scratch): bytes, last writer, readers, packet flags."""

    def __init__(self, nbytes: int, cell: int):
        self.cell = cell
        ncells = -(-nbytes // cell)
        self.data = np.zeros(ncells * cell, dtype=np.uint8)
        self.w_actor = np.full(ncells, -1, dtype=np.int64)
        self.w_clock = np.zeros(ncells, dtype=np.int64)
        self.w_site = np.full(ncells, -1, dtype=np.int64)
        self.w_packet = np.zeros(ncells, dtype=bool)
        self.reads: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.flags = np.zeros(ncells, dtype=np.int64)  # execution whose packet a cell holds; 0: none
        self.pkt_ref = np.zeros(ncells, dtype=np.int64)  # index of the knowledge its packet carries; 0: none

    def cells(self, lo: int, hi: int) -> slice:
        return slice(lo // self.cell, -(-hi // self.cell))

    def check_read(self, lo: int, hi: int, vc: np.ndarray, packet: bool) -> Conflict | None:
        """The earlier write this read races with, if any."""
        c = self.cells(lo, hi)
        actors = self.w_actor[c]
        racy = (actors >= 0) & (self.w_clock[c] > vc[np.maximum(actors, 0)])
        if packet:
            racy &= ~self.w_packet[c]
        return self._first(racy, self.w_site[c], True, c.start)

    def check_write(self, lo: int, hi: int, vc: np.ndarray, war_vc: np.ndarray | None = None) -> Conflict | None:
        """The earlier write or read this write races with, if any; ``war_vc`` orders it after earlier reads."""
        c = self.cells(lo, hi)
        actors = self.w_actor[c]
        racy = (actors >= 0) & (self.w_clock[c] > vc[np.maximum(actors, 0)])
        found = self._first(racy, self.w_site[c], True, c.start)
        if found is not None:
            return found
        war_vc = vc if war_vc is None else war_vc
        for actor, (clocks, sites) in self.reads.items():
            found = self._first(clocks[c] > war_vc[actor], sites[c], False, c.start)
            if found is not None:
                return found
        return None

    def _first(self, racy: np.ndarray, sites: np.ndarray, write: bool, start: int) -> Conflict | None:
        hits = np.flatnonzero(racy)
        if hits.size == 0:
            return None
        return Conflict(int(sites[hits[0]]), write, (start + int(hits[0])) * self.cell)

    def record_read(self, lo: int, hi: int, actor: int, clock: int, site: int) -> None:
        c = self.cells(lo, hi)
        if actor not in self.reads:
            n = self.w_actor.size
            self.reads[actor] = (np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64))
        clocks, sites = self.reads[actor]
        clocks[c] = clock
        sites[c] = site

    def record_write(self, lo: int, hi: int, actor: int, clock: int, site: int, packet: bool, flag: int,
                     knowledge: int = 0) -> None:
        """Record a race-free write: it becomes the last writer, and earlier reads (all ordered before it) are dropped."""
        c = self.cells(lo, hi)
        self.pkt_ref[c] = knowledge if packet else 0
        self.w_actor[c] = actor
        self.w_clock[c] = clock
        self.w_site[c] = site
        self.w_packet[c] = packet
        self.flags[c] = flag if packet else 0
        for clocks, _ in self.reads.values():
            clocks[c] = 0

    def packet_knowledge(self, lo: int, hi: int) -> np.ndarray:
        """Indices of the knowledge carried by the packets in [lo, hi)."""
        return np.unique(self.pkt_ref[self.cells(lo, hi)])

    def packets_ready(self, lo: int, hi: int, flag: int) -> bool:
        """True when every cell of [lo, hi) holds a packet of execution ``flag``."""
        return bool(np.all(self.flags[self.cells(lo, hi)] == flag))

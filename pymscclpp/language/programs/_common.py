"""Helpers shared by the library programs."""

from __future__ import annotations

from typing import Sequence

from ...plan.protocols import protocol_name
from ..channel import MemoryChannel, PortChannel


def slot(owner: int, sender: int) -> int:
    """Index of ``sender`` among ``owner``'s peers (all ranks but ``owner``, in order)."""
    return sender if sender < owner else sender - 1


def peers(rank: int, num_ranks: int) -> list[int]:
    return [p for p in range(num_ranks) if p != rank]


def memory_channels(num_ranks: int, lanes: int, hosts: Sequence | None = None) -> dict[tuple[int, int, int], object]:
    """A channel per (lane, src, dst); lane k on both ends pairs up because channels are made in lane order.
    Memory channels, or with ``hosts`` (a host id per rank) port channels between ranks of different hosts."""
    if hosts is not None and len(hosts) != num_ranks:
        raise ValueError(f"hosts names {len(hosts)} ranks, the program has {num_ranks}")

    def make(r: int, p: int):
        return MemoryChannel(p, r) if hosts is None or hosts[r] == hosts[p] else PortChannel(p, r)
    return {(k, r, p): make(r, p) for k in range(lanes) for r in range(num_ranks) for p in peers(r, num_ranks)}


def flush_ports(ch: dict) -> None:
    """End each lane's thread block by flushing its port channels: the proxy has read every source before the
    kernel ends, so the caller may rewrite its buffers."""
    for (k, _, _), c in ch.items():
        if isinstance(c, PortChannel):
            c.flush(tb=k)


def check_args(num_ranks: int, chunk_factor: int, instances: int, protocol: str) -> str:
    """Raise unless a library program can be built so; the protocol by pymscclpp's name."""
    if num_ranks < 2:
        raise ValueError(f"library programs need at least 2 ranks, got {num_ranks}")
    if chunk_factor < 1 or instances < 1:
        raise ValueError(f"chunk_factor ({chunk_factor}) and instances ({instances}) must be >= 1")
    return protocol_name(protocol)

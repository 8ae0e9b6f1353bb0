"""Helpers shared by the library programs."""

from __future__ import annotations

from ..channel import MemoryChannel


def slot(owner: int, sender: int) -> int:
    """Index of ``sender`` among ``owner``'s peers (all ranks but ``owner``, in order)."""
    return sender if sender < owner else sender - 1


def peers(rank: int, num_ranks: int) -> list[int]:
    return [p for p in range(num_ranks) if p != rank]


def memory_channels(num_ranks: int, lanes: int) -> dict[tuple[int, int, int], MemoryChannel]:
    """A memory channel per (lane, src, dst); lane k on both ends pairs up because channels are made in lane order."""
    return {(k, r, p): MemoryChannel(p, r) for k in range(lanes) for r in range(num_ranks) for p in peers(r, num_ranks)}


def check_args(num_ranks: int, chunk_factor: int, instances: int, protocol: str) -> None:
    if num_ranks < 2:
        raise ValueError(f"library programs need at least 2 ranks, got {num_ranks}")
    if chunk_factor < 1 or instances < 1:
        raise ValueError(f"chunk_factor ({chunk_factor}) and instances ({instances}) must be >= 1")
    if protocol not in ("Simple", "LL"):
        raise ValueError(f"protocol must be 'Simple' or 'LL', got {protocol!r}")

"""The shards of a two-step call as the kernels cut them (``twoshot_kernels.shard_bytes``), on the host, and the
bytes a scatter + all-gather broadcast moves over them: what the algorithms state as their traffic."""

from __future__ import annotations

from . import twoshot_kernels as k2


def call_shards(size: int, nranks: int) -> list[int]:
    """The shard lengths of a zero-copy call of ``size`` bytes (one round: ``twoshot_kernels.shard_bytes``)."""
    sh = k2.shard_bytes.py_func(size, nranks)
    return [max(0, min(sh, size - min(s * sh, size))) for s in range(nranks)]


def scatter_gather_traffic(lens: list[int], rank: int, root: int) -> tuple[int, int]:
    """(sent, received) of ``rank`` in a scatter + all-gather broadcast of shards ``lens`` from ``root``: rank r
    pulls shard r from the root, then every shard it lacks from the rank holding it (the root's own from the
    root); at two ranks the root pushes its own shard instead, which moves the same bytes."""
    if rank == root:
        return sum(lens) - lens[root] + (len(lens) - 1) * lens[root], 0
    return (len(lens) - 2) * lens[rank], sum(lens)

"""Rank order of a channel tuple: ``chans[j]`` goes to the j-th peer in rank order, skipping our own rank."""

from __future__ import annotations

from numba import cuda


@cuda.jit(device=True)
def peer_rank(j, rank):
    """Rank of the j-th peer (``chans[j]``)."""
    return j if j < rank else j + 1


@cuda.jit(device=True)
def peer_index(r, rank):
    """Index into ``chans`` of rank ``r`` (which is not ``rank``)."""
    return r if r < rank else r - 1

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


@cuda.jit(device=True)
def peer_after(i, rank, nranks):
    """Index into ``chans`` of the ``i``-th peer after ``rank`` (ranks ``rank + 1``, ``rank + 2``, ... mod
    ``nranks``). A loop that moves a large slice to or from each peer in turn goes in this order, so at each step
    every rank works with a different peer; in rank order every rank would start on rank 0, sharing its links
    (on NVLink, one GPU's bandwidth for seven) while the others' sit idle."""
    return peer_index((rank + 1 + i) % nranks, rank)

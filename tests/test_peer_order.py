"""The order loops visit peers in (``peers.peer_after``): each rank visits every peer once, and at each step the
ranks visit different peers, so no rank's links carry every other rank's traffic at once."""

import numpy as np
import pytest
from numba import cuda

from pymscclpp.channels.peers import peer_after, peer_rank


@cuda.jit
def _order(out, nranks):
    rank = cuda.threadIdx.x
    for i in range(nranks - 1):
        out[rank, i] = peer_rank(peer_after(i, rank, nranks), rank)


def order(nranks: int) -> np.ndarray:
    """``[rank, i]``: the rank of the i-th peer ``rank`` visits."""
    out = cuda.to_device(np.full((nranks, max(1, nranks - 1)), -1, np.int64))
    _order[1, nranks](out, nranks)
    return out.copy_to_host()


@pytest.mark.parametrize("nranks", [2, 3, 4, 5, 8])
def test_each_rank_visits_every_peer_once_and_the_ranks_visit_different_peers_at_each_step(nranks):
    got = order(nranks)[:, :nranks - 1]
    for rank in range(nranks):
        assert sorted(got[rank]) == [p for p in range(nranks) if p != rank]
    for i in range(nranks - 1):
        assert sorted(got[:, i]) == list(range(nranks)), (i, got[:, i])

"""How a block's threads share a loop over peers (``blocks.peer_groups``): with packets every peer is served by one
group of whole units whose threads are numbered 0..size-1, each once, groups never overlap and a thread serves as
few peers as the block's units allow; simple rounds keep the whole block on every peer."""

import numpy as np
import pytest
from numba import cuda

from pymscclpp.algos.blocks import GROUP_THREADS, peer_groups
from pymscclpp.algos.protocols import PACKET, SIMPLE


@cuda.jit
def _groups(out, proto, npeers, nthreads):
    """Thread 0 asks ``peer_groups`` for every thread index of a block of ``nthreads``: row t is thread t's answer."""
    if cuda.threadIdx.x == 0:
        for tid in range(nthreads):
            first, step, t, n = peer_groups(proto, npeers, tid, nthreads)
            out[tid, 0], out[tid, 1], out[tid, 2], out[tid, 3] = first, step, t, n


def groups(proto: int, npeers: int, nthreads: int) -> dict[int, list[tuple[int, int, int]]]:
    """peer -> [(thread, index in its group, group's threads)] of every thread that serves it."""
    rows = cuda.to_device(np.zeros((nthreads, 4), np.int64))
    _groups[1, 1](rows, proto, npeers, nthreads)
    served: dict[int, list[tuple[int, int, int]]] = {p: [] for p in range(npeers)}
    for tid, (first, step, t, n) in enumerate(rows.copy_to_host()):
        for p in range(first, npeers, step):
            served[p].append((tid, t, n))
    return served


SHAPES = [(1, 512), (2, 512), (3, 512), (7, 512), (7, 1024), (15, 512), (63, 512), (3, 32), (7, 32), (7, 33),
          (7, 64), (1, 8), (5, 7)]


@pytest.mark.parametrize("npeers,nthreads", SHAPES)
def test_packets_give_every_peer_one_group_whose_threads_are_numbered_from_zero(npeers, nthreads):
    served = groups(PACKET, npeers, nthreads)
    owner = {}
    for p, threads in served.items():
        sizes = {n for _, _, n in threads}
        assert len(sizes) == 1, (p, sizes)
        assert sorted(t for _, t, _ in threads) == list(range(sizes.pop())), p
        group = frozenset(tid for tid, _, _ in threads)
        for other, g in owner.items():
            assert g == group or not g & group, (p, other)  # a group serves its peers whole, or shares no thread
        owner[p] = group


@pytest.mark.parametrize("npeers,nthreads", SHAPES)
def test_packet_groups_are_whole_units_and_spread_the_peers_as_far_as_the_block_allows(npeers, nthreads):
    served = groups(PACKET, npeers, nthreads)
    units = nthreads // GROUP_THREADS
    per_thread = {}
    for threads in served.values():
        for tid, _, _ in threads:
            per_thread[tid] = per_thread.get(tid, 0) + 1
    if min(npeers, units) <= 1:  # one group: the whole block on every peer, as simple rounds
        assert all(len(threads) == nthreads for threads in served.values())
        return
    assert all(n % GROUP_THREADS == 0 for threads in served.values() for _, _, n in threads)
    ngroups = min(npeers, units)
    assert max(per_thread.values()) == -(-npeers // ngroups)  # a thread serves as few peers as there are groups for
    # idle threads: the units left over after an even split (fewer than one per group) and a last partial unit
    assert nthreads - len(per_thread) < (ngroups + 1) * GROUP_THREADS


@pytest.mark.parametrize("npeers,nthreads", [(1, 512), (7, 512), (3, 32)])
def test_simple_rounds_keep_the_whole_block_on_every_peer(npeers, nthreads):
    served = groups(SIMPLE, npeers, nthreads)
    assert all(threads == [(tid, tid, nthreads) for tid in range(nthreads)] for threads in served.values())

"""Pairwise memory hand-off: no rank drops memory its peer has not mapped, and one side's failure raises on both."""

import threading
import time

import pytest

from pymscclpp.errors import RegistrationError
from pymscclpp.runtime import handoff, shm
from pymscclpp.runtime.bootstrap.local import LocalBootstrap


def run_pair(fn):
    """``fn(bootstrap)`` on two thread ranks; their results or exceptions, by rank."""
    boots = LocalBootstrap.create(2, timeout=20)
    out = [None, None]

    def rank(r):
        try:
            out[r] = fn(boots[r])
        except Exception as exc:
            out[r] = exc

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for b in boots:
        b.close()
    return out


def test_a_rank_that_fails_right_after_the_handoff_cannot_unlink_memory_its_slow_peer_still_maps():
    def rank(boot):
        seg = shm.create(64)

        def open_peer(name: bytes):
            if boot.rank == 1:
                time.sleep(0.5)  # the slow partner
            return shm.attach(name.decode(), 64)

        mapped = handoff.trade(boot, 1 - boot.rank, 7, seg.name.encode(), open_peer, "test segment")
        if boot.rank == 0:
            seg.close()  # rank 0 "fails" at once and its segment goes
        return mapped.nbytes

    assert run_pair(rank) == [64, 64]


def test_a_mapping_failure_on_one_side_raises_on_both_with_its_cause():
    def rank(boot):
        def open_peer(_data):
            if boot.rank == 1:
                raise RegistrationError("handle from rank 0 was made on another host")
            return "mapped"

        return handoff.trade(boot, 1 - boot.rank, 7, b"handle", open_peer, "test segment")

    first, second = run_pair(rank)
    assert isinstance(second, RegistrationError) and "another host" in str(second)
    assert isinstance(first, RegistrationError)
    assert "peer 1 could not map" in str(first) and "another host" in str(first)

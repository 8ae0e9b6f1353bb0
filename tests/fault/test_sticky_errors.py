"""Sticky errors, as NCCL's asynchronous errors: after a device wait fails, every call on the communicator
raises that error before launching, until a new communicator is made."""

from __future__ import annotations

from fault import sticky_cases as cases
from rankpool import RankPool


def test_a_timed_out_wait_makes_every_later_call_raise_at_once():
    pool = RankPool(2, env={"PYMSCCLPP_TIMEOUT_S": "2"})
    try:
        results = pool.run(cases.absent_peer_then_calls, absent=1)
    finally:
        pool.close()
    raised = results[0]
    assert len(raised) == 4, raised
    first = raised[0][0]
    assert "rank 0:" in first and "with peer 1 timed out" in first
    assert all(text == first for text, _ in raised), "later calls must raise the first error"
    assert all(seconds < 0.5 for _, seconds in raised[1:]), [s for _, s in raised]

"""Host waits of setup are bounded: a peer that never shows up gives CommTimeoutError naming rank, peer and op."""

from __future__ import annotations

import threading
import time

import pytest

from fault import cases
from fault.conftest import pool
from pymscclpp import Communicator, CommTimeoutError
from pymscclpp.runtime.bootstrap import get_unique_id


def test_communicator_whose_peers_never_start_times_out_at_rendezvous_within_budget(monkeypatch):
    monkeypatch.setenv("PYMSCCLPP_TIMEOUT_S", "0.5")
    before = set(threading.enumerate())
    uid = get_unique_id("127.0.0.1")
    start = time.monotonic()
    with pytest.raises(CommTimeoutError, match=r"^rank 0: rendezvous with root 127\.0\.0\.1:\d+ timed out after 0.5 s"):
        Communicator.from_unique_id(uid, 0, 3)
    assert time.monotonic() - start < 3
    deadline = time.monotonic() + 5  # the root thread gives up on the same budget
    while set(threading.enumerate()) != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(threading.enumerate()) == before, "setup left threads behind"


@pytest.mark.parametrize("op, words", [
    ("memory_channel", "recv from peer 1 tag"),
    ("exchange_memory", "recv from peer 1 tag"),
    ("barrier", "barrier: recv from peer 1"),
    ("all_reduce", "recv from peer 1 tag"),
])
def test_setup_call_the_peer_never_makes_times_out_naming_rank_peer_and_op(op, words):
    out = pool().run(cases.setup_peer_absent, op=op, budget=0.5, timeout=60)[0]
    assert out["kind"] == "CommTimeoutError", out
    assert "rank 0: " in out["text"] and words in out["text"] and "timed out after 0.5 s" in out["text"], out
    assert 0.45 <= out["elapsed"] < 4, out["elapsed"]

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
    ("memory_channel", "recv of its slot number and count (pair set-up of a device semaphore) from peer 1 timed out "
                       "after 0.5 s"),
    ("exchange_memory", "recv of the handle of its registered buffer of 256 bytes (exchange_memory) from peer 1 timed "
                        "out after 0.5 s"),
    ("barrier", "barrier: recv from peer 1 timed out after 0.5 s"),
    ("all_reduce", "rank 1 did not begin all_reduce algorithm 'packet_one_block' within 0.5 s: has it made the same "
                   "call?"),
    ("send", "rank 1 did not begin the 'exchange' algorithms of all_to_allv, gather, reduce, scatter, send_recv "
             "within 0.5 s: has it made the same call? (the verbs set up their channels at each rank's first call of "
             "them, collectively: every rank makes a send/recv with another rank"),
])
def test_setup_call_the_peer_never_makes_times_out_naming_rank_peer_and_what_was_awaited(op, words):
    out = pool().run(cases.setup_peer_absent, op=op, budget=0.5, timeout=60)[0]
    assert out["kind"] == "CommTimeoutError", out
    assert "rank 0: " in out["text"] and words in out["text"] and "tag" not in out["text"], out
    assert 0.45 <= out["elapsed"] < 4, out["elapsed"]


BUDGET_S = 2.0
SLACK_S = 1.0  # what the report may take beyond the budget, measured on a loaded 2-core machine


@pytest.mark.parametrize("first, algo", [(True, None), (True, "simple"), (False, None)])
def test_a_forgotten_call_is_reported_within_one_budget_naming_the_peer_that_never_made_it(first, algo):
    """The set-up's waits (the peers' set-up names, its body, the verdicts) share one budget, and the call's
    kernels stop once one wait has failed: one report, not one per wait or per block."""
    out = pool().run(cases.forgotten_call, budget=BUDGET_S, first=first, algo=algo, timeout=120)[0]
    assert out["kind"] == "CommTimeoutError", out
    assert BUDGET_S * 0.9 <= out["elapsed"] <= BUDGET_S + SLACK_S, out
    text = out["text"]
    if first:
        name = algo or "packet_one_block"  # the default for 32 bytes at 2 ranks
        assert text == (f"all_reduce algorithm {name!r} failed on rank 0: rank 0: rank 1 did not begin all_reduce "
                        f"algorithm {name!r} within {BUDGET_S} s: has it made the same call?"), text
    else:
        assert text.startswith("rank 0: call check wait (a peer's call fingerprint) with peer 1 timed out"), text
        assert "expected peer 1's fingerprint of call 2 on this communicator" in text, text

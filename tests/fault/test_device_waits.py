"""Device waits nobody satisfies end within their budget, and the error names rank, peer, channel and op."""

from __future__ import annotations

import pytest

from fault import cases
from fault.conftest import pool

BUDGET = 1.0   # PYMSCCLPP_TIMEOUT_S of the pool these tests use
SLACK = 6.0    # simulator overhead on a loaded 2-core machine


def _named(out: dict, rank: int, peer: int, op: str) -> str:
    text = out["text"]
    assert text is not None, f"no CommTimeoutError recorded: {out}"
    assert text.startswith(f"rank {rank}: {op}"), text
    assert f"with peer {peer}" in text and f"on channel {out['channel']}" in text, text
    assert "timed out" in text, text
    return text


def test_semaphore_wait_nobody_signals_ends_at_env_budget_naming_rank_peer_channel_op():
    out = pool(PYMSCCLPP_TIMEOUT_S=str(BUDGET)).run(cases.semaphore_wait_unsatisfied)[0]
    assert out["timeout_s"] == BUDGET and out["timeout_ns"] == int(BUDGET * 1e9)
    assert out["ok"] == 0, "wait() must return False when its budget runs out"
    assert BUDGET * 0.9 <= out["elapsed"] < BUDGET + SLACK, out["elapsed"]
    _named(out, 0, 1, "semaphore wait")
    assert out["second"] == out["text"], "the error is sticky: a second check raises it again"


def test_packet_wait_nobody_sends_ends_at_env_budget_naming_the_packet_wait():
    out = pool(PYMSCCLPP_TIMEOUT_S=str(BUDGET)).run(cases.packet_wait_unsatisfied)[0]
    assert out["ok"] == 0
    # every thread of the block spins on its own packet; the first to give up records the error
    assert BUDGET * 0.9 <= out["elapsed"] < BUDGET + SLACK, out["elapsed"]
    text = _named(out, 0, 1, "packet wait (unpack_packets)")
    assert "expected peer 1's packets of this call (flag 12345)" in text, text  # the flag it waited for
    assert out["unchanged"], "a timed-out packet wait must not write stale packet data to its output"


@pytest.mark.parametrize("report", [False, True])
def test_a_quiet_packet_wait_records_nothing_until_its_block_reports_it_naming_peer_and_flag(report):
    out = pool(PYMSCCLPP_TIMEOUT_S=str(BUDGET)).run(cases.quiet_packet_wait, report=report)[0]
    assert out["ok"] == 0 and BUDGET * 0.9 <= out["elapsed"] < BUDGET + SLACK, out
    if not report:
        assert out["text"] is None, out["text"]
    else:
        text = _named(out, 0, 1, "packet wait (unpack_packets)")
        assert "expected peer 1's packets of this call (flag 777)" in text, text


def test_port_channel_flush_with_no_proxy_running_ends_at_budget_naming_flush():
    out = pool(PYMSCCLPP_TIMEOUT_S=str(BUDGET)).run(cases.port_flush_unsatisfied, timeout=60)[0]
    assert out["ok"] == 0
    assert BUDGET * 0.9 <= out["elapsed"] < BUDGET + SLACK, out["elapsed"]
    _named(out, 0, 1, "flush")


def test_per_communicator_timeout_s_overrides_the_environment():
    # the pool's environment says 30 s; the communicator built with timeout_s=0.5 must give up after 0.5 s
    out = pool().run(cases.per_communicator_budget, timeout_s=0.5)[0]
    assert out["timeout_s"] == 0.5
    assert 0.45 <= out["elapsed"] < 0.5 + SLACK, out["elapsed"]
    _named(out, 0, 1, "semaphore wait")


def test_timeout_zero_per_communicator_turns_the_budget_off_and_a_late_signal_still_arrives():
    delay = 1.5
    out = pool(PYMSCCLPP_TIMEOUT_S=str(BUDGET)).run(cases.per_communicator_budget, timeout_s=0, signal_after=delay,
                                                    timeout=60)[0]
    assert out["timeout_s"] is None and out["timeout_ns"] == 0
    assert out["ok"] == 1 and out["text"] is None, out
    assert out["elapsed"] >= delay * 0.9, "the wait returned before the signal was sent"
    assert out["elapsed"] > BUDGET, "with budgets off the wait outlasted what the environment's budget allows"


def test_env_timeout_zero_turns_device_budgets_off_and_a_late_signal_still_arrives():
    out = pool(PYMSCCLPP_TIMEOUT_S="0").run(cases.env_budget_off_wait_satisfied_later, delay=1.2, timeout=60)[0]
    assert out["timeout_s"] is None and out["timeout_ns"] == 0
    assert out["ok"] == 1 and out["text"] is None, out
    assert out["elapsed"] >= 1.2 * 0.9


@pytest.mark.parametrize("kind, op", [("semaphore", "semaphore wait"), ("packet", "packet wait (unpack_packets)")])
def test_host_abort_ends_a_wait_long_before_its_budget_and_says_a_peer_was_declared_dead(kind, op):
    abort_after = 0.5
    out = pool(PYMSCCLPP_TIMEOUT_S="60").run(cases.wait_aborted_by_host, kind=kind, abort_after=abort_after,
                                             timeout=120)[0]
    assert out["ok"] == 0, "an aborted wait must return False"
    # ended by the abort, soon after it (timed from the abort itself: its timer starts before the wait does)
    assert out["after_abort"] is not None and 0 <= out["after_abort"] < SLACK, out
    assert out["elapsed"] < abort_after + SLACK, out["elapsed"]
    text = out["text"]
    assert text.startswith(f"rank 0: {op} on channel {out['channel']} with peer 1 was aborted by the host "
                           "(a peer declared dead: PeerDisconnectedError"), text
    if kind == "packet":
        assert out["unchanged"], "an aborted packet wait must not write stale packet data to its output"


def test_host_abort_ends_an_executor_kernel_whose_peer_never_launches():
    abort_after = 0.5
    out = pool(PYMSCCLPP_TIMEOUT_S="60").run(cases.executor_wait_aborted_by_host, abort_after=abort_after,
                                             timeout=180)[0]
    assert out["text"] is not None and "was aborted by the host (a peer declared dead" in out["text"], out
    # whichever wait the abort ends first: the plan's wait for its peer, or the executor's barrier its blocks meet in
    assert out["text"].startswith(("rank 0: semaphore wait on channel 0 with peer 1 ",
                                   "rank 0: semaphore wait in the executor's barrier of ")), out["text"]
    assert out["after_abort"] is not None and 0 <= out["after_abort"] < SLACK, out
    assert out["elapsed"] < abort_after + SLACK + 10, out["elapsed"]  # + first-run codegen


def test_a_wait_on_no_single_channel_or_peer_is_described_in_words():
    import numpy as np
    from pymscclpp.runtime.device_errors import OP_CALLCHECK, OP_WAIT, TIMED_OUT, describe
    text = describe(np.array([TIMED_OUT, OP_WAIT, 0, -1, -2, 3, 2, 5], np.int64))
    assert text == ("rank 0: semaphore wait in the executor's barrier of one thread block's threads timed out in "
                    "thread block 5: expected the block's other threads at barrier generation 3, it stayed 2"), text
    text = describe(np.array([TIMED_OUT, OP_CALLCHECK, 0, 1, -1, 2, 0, 0], np.int64))
    assert text == ("rank 0: call check wait (a peer's call fingerprint) with peer 1 timed out in thread block 0: "
                    "expected peer 1's fingerprint of call 2 on this communicator, its slot holds nothing: peer 1 has "
                    "not made this call"), text

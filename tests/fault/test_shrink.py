"""Survive a lost rank: abort ends a call in flight, shrink carries the survivors on (after one death and after
a second), split makes sub-communicators, and neither leaves anything of the old communicator behind."""

from __future__ import annotations

from fault import shrink_cases
from fault.harness import Job, leaked_segments
from pymscclpp.testing import run_ranks


def _run(job: Job, ranks, timeout: float) -> dict:
    """Each rank's returned value, after every one of ``ranks`` finished without an error or a failed close."""
    try:
        outs = job.outcomes(ranks, timeout)
        job.join(30)
    finally:
        job.close()
    for r in ranks:
        kind, value, _ = outs[r]
        assert kind == "done", f"rank {r} failed:\n{value[3] if kind == 'error' else value}"
    closes = [m for m in job.messages if m[1] == "close-error"]
    assert not closes, f"comm.close() failed: {closes}"
    assert not leaked_segments(job.pids), f"shared-memory segments left behind: {leaked_segments(job.pids)}"
    return {r: outs[r][1] for r in ranks}


def test_abort_ends_a_device_wait_and_a_bootstrap_wait_in_another_thread_within_1_s():
    job = Job(shrink_cases.abort_in_flight, 2, env={"PYMSCCLPP_LIVENESS": "0", "PYMSCCLPP_TIMEOUT_S": "60"},
              abort_after=1.0)
    outs = _run(job, [0, 1], 120)
    for r, out in outs.items():
        assert out["alive_before"], f"rank {r}: the call ended before abort(): {out}"
        assert out["kind"] == "CommAbortedError", out
        assert out["text"].startswith(f"rank {r}: ") and "aborted" in out["text"], out
        assert out["ended_s"] < 1.0, f"rank {r}: the call in flight took {out['ended_s']:.2f} s to end"
        assert out["abort_s"] < 2.0, out
        assert [kind for kind, _ in out["later"]] == ["CommAbortedError"] * 4, out
        assert max(s for _, s in out["later"]) < 0.1, out


def _kill_in_phase(job: Job, victim: int, phase: int) -> None:
    """Kill old rank ``victim`` once it reported progress in all-reduce loop ``phase``."""
    job.expect_where("progress", victim, lambda value: value[0] == phase, 120)
    job.kill(victim)


def test_survivors_shrink_after_a_death_mid_all_reduce_even_of_the_root_and_reduce_correctly():
    job = Job(shrink_cases.survive_deaths, 3, deaths=1)
    try:
        job.expect("ready", range(3), 120)
        _kill_in_phase(job, 0, 0)  # rank 0: the old bootstrap's root and lowest rank
    except BaseException:
        job.close()
        raise
    outs = _run(job, [1, 2], 180)
    for r, (phase,) in outs.items():
        assert phase["kind"] == "PeerDisconnectedError", phase
        assert (phase["old"], phase["rank"], phase["size"]) == (r, r - 1, 2), phase


def test_a_second_death_after_a_shrink_shrinks_again():
    job = Job(shrink_cases.survive_deaths, 4, deaths=2)
    try:
        job.expect("ready", range(4), 120)
        _kill_in_phase(job, 2, 0)
        _kill_in_phase(job, 1, 1)
    except BaseException:
        job.close()
        raise
    outs = _run(job, [0, 3], 240)
    assert [(p["rank"], p["size"]) for p in outs[0]] == [(0, 3), (0, 2)], outs
    assert [(p["rank"], p["size"]) for p in outs[3]] == [(2, 3), (1, 2)], outs
    for phases in outs.values():
        assert [p["kind"] for p in phases] == ["PeerDisconnectedError"] * 2, phases


def test_split_by_color_orders_by_key_then_rank_and_none_is_no_member():
    colors, keys = [0, None, 0, 1], [5, 0, 1, 0]
    outs = _run(Job(shrink_cases.split_colors, 4, colors=colors, keys=keys), range(4), 180)
    assert outs == {0: (1, 2), 1: None, 2: (0, 2), 3: (0, 1)}, outs


def test_aborted_and_shrunk_communicators_leave_no_descriptor_segment_or_thread_behind_without_the_collector():
    for before, after in run_ranks(2, shrink_cases.abort_and_shrink_cycles, 9, timeout=300):
        assert after == before, f"(descriptors, segments, threads) before {before}, after 9 aborted/shrunk: {after}"

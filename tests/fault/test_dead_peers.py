"""kill -9 (or SIGSTOP) one rank mid-job: survivors raise within bounded time naming the dead peer, and no
shared-memory segment of any rank of the job is left in /dev/shm."""

from __future__ import annotations

import subprocess
import sys
import time

from fault import dead_cases
from fault.harness import Job, leaked_segments
from pymscclpp.runtime.liveness import reap_segments, segments_of, wait_gone

BUDGET_S = "60"   # PYMSCCLPP_TIMEOUT_S of barrier jobs: detection must come from the failure, not the budget


def _finish(job: Job, survivors, timeout: float, reap: list[int] = ()) -> dict:
    try:
        outs = job.outcomes(survivors, timeout)
        codes = job.join(30)
    finally:
        job.close()
    for r in survivors:
        kind, value, _ = outs[r]
        assert kind == "done", f"rank {r} failed instead of reporting the fault:\n{value[3] if kind == 'error' else value}"
        assert codes[r] == 0, f"survivor rank {r} exited with {codes[r]}"
    for pid in reap:  # a rank killed after it was declared dead: a survivor or the launcher unlinks its segments
        reap_segments([pid])
        assert not segments_of(pid)
    closes = [m for m in job.messages if m[1] == "close-error"]
    assert not closes, f"comm.close() failed after the fault: {closes}"
    leaked = leaked_segments(job.pids)
    assert not leaked, f"shared-memory segments left behind: {leaked}"
    return {r: outs[r][1] for r in survivors}


def test_rank_killed_while_others_wait_in_a_barrier_surfaces_peer_disconnected_within_5_s():
    job = Job(dead_cases.barrier_while_peer_dies, 3, env={"PYMSCCLPP_TIMEOUT_S": BUDGET_S}, victim=2)
    try:
        job.expect("ready", range(3), 60)
        time.sleep(0.3)
        killed = job.kill(2)
    except BaseException:
        job.close()
        raise
    outs = _finish(job, [0, 1], 30)
    for r, out in outs.items():
        assert out["kind"] == "PeerDisconnectedError", out
        assert out["text"].startswith(f"rank {r}: barrier: recv from peer 2") and "peer 2 disconnected" in out["text"], out
        assert out["at"] - killed < 5, f"rank {r} took {out['at'] - killed:.1f} s to notice"
        assert 2 in out["dead"] or out["at"] - killed < 1, out  # the monitor agrees (or had no tick yet)


def test_frozen_rank_sigstop_is_declared_dead_by_missing_heartbeats_and_the_barrier_fails():
    dead_after = 1.5
    job = Job(dead_cases.barrier_while_peer_dies, 2, env={"PYMSCCLPP_TIMEOUT_S": BUDGET_S}, victim=1,
              interval=0.2, dead_after=dead_after)
    try:
        job.expect("ready", range(2), 60)
        time.sleep(0.3)
        frozen = job.freeze(1)  # its sockets stay open: only the missing heartbeats tell
        job.outcomes([0], 30)  # the survivor reported (checked below, with the frozen rank's segments)
        alive_segments = segments_of(job.pids[1])
        job.kill(1)
    except BaseException:
        job.close()
        raise
    assert alive_segments, "the frozen rank's segments were unlinked while it was alive"
    out = _finish(job, [0], 30, reap=[job.pids[1]])[0]
    assert out["kind"] == "PeerDisconnectedError", out
    assert "peer 1 disconnected (declared dead by the liveness monitor: no heartbeat for" in out["text"], out
    assert dead_after * 0.9 < out["at"] - frozen < dead_after + 5, out["at"] - frozen
    assert 1 in out["dead"]


def test_rank_killed_during_an_all_reduce_loop_ends_survivors_kernels_early_and_names_the_peer():
    budget = 60.0  # far longer than the test allows: the waits must end because the host aborted them
    job = Job(dead_cases.allreduce_loop_while_peer_dies, 3, env={"PYMSCCLPP_TIMEOUT_S": str(budget)}, victim=1)
    try:
        job.expect("ready", range(3), 60)
        reached = job.expect("progress", [1], 60)[1]
        killed = job.kill(1)
    except BaseException:
        job.close()
        raise
    outs = _finish(job, [0, 2], 60)
    for r, out in outs.items():
        assert out["kind"] == "PeerDisconnectedError", out
        assert out["text"].startswith(f"rank {r}: ") and "peer 1 (pid" in out["text"] and "is dead" in out["text"], out
        # a survivor is at most one all-reduce behind the victim; its last one may end in the fault itself
        assert out["good_iters"] >= reached - 1, "results before the kill must have been exact"
        assert out["at"] - killed < 10, f"rank {r} took {out['at'] - killed:.1f} s (its waits' budget is {budget} s)"
        assert 1 in out["dead"], out


def test_a_peer_still_exiting_keeps_its_segments_until_it_is_gone_and_the_wait_for_it_is_bounded(tmp_path):
    # a killed rank closes its sockets before it has finished exiting: a survivor that reaps at once finds it alive
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.0)"])
    segment = tmp_path / f"pymscclpp-{proc.pid}-0123456789ab"
    segment.write_bytes(b"\0" * 16)
    try:
        assert reap_segments([proc.pid], str(tmp_path)) == [] and segment.exists()  # alive: kept
        assert not wait_gone([proc.pid], 0.05)  # still alive when the bound ends
        assert wait_gone([proc.pid], 30)  # exited (a zombie until waited for: gone all the same)
        assert reap_segments([proc.pid], str(tmp_path)) == [segment.name] and not segment.exists()
    finally:
        proc.kill()
        proc.wait()

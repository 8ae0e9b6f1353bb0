"""Faults of collectives across hosts: a rank killed mid-collective is reported on every survivor naming the
peer and its host, within seconds; ranks that chose different plans fail at set-up, on every rank."""

from __future__ import annotations

import time

import numpy as np
from numba import cuda

from fault.harness import Job
from pymscclpp.errors import PymscclppError

HOSTS = (0, 0, 1, 1)
VICTIM = 3


def allreduce_while_peer_dies(comm, report, victim: int, hosts: tuple):
    """Hierarchical all-reduces through the executor; the victim stops entering them and is killed."""
    from pymscclpp.executor import ExecutionPlan, Executor
    from pymscclpp.language.programs.hierarchical import plan_for
    ex = Executor(comm, sim_threads=2)
    plan = ExecutionPlan.from_plan(plan_for("allreduce", hosts))
    send, recv = cuda.to_device(np.ones(64, np.float32)), cuda.to_device(np.zeros(64, np.float32))
    try:
        ex.execute(plan, send, recv)
        report("ready")
        if comm.rank == victim:
            time.sleep(120)  # the others are inside the next all-reduce, waiting for it, until it is killed
            return None
        try:
            ex.execute(plan, send, recv)
        except PymscclppError as exc:
            return dict(kind=type(exc).__name__, text=str(exc), at=time.monotonic())
        raise AssertionError("the all-reduce completed although a rank never entered it")
    finally:
        ex.close()


def test_rank_killed_mid_collective_is_named_with_its_host_on_every_survivor():
    job = Job(allreduce_while_peer_dies, 4, env={"PYMSCCLPP_TIMEOUT_S": "60"},
              rank_env=[{"PYMSCCLPP_HOST_ID": f"host{h}"} for h in HOSTS], victim=VICTIM, hosts=HOSTS)
    try:
        job.expect("ready", range(4), 180)
        time.sleep(0.5)
        killed = job.kill(VICTIM)
        outs = job.outcomes([0, 1, 2], 60)
    finally:
        job.close()
    for r in (0, 1, 2):
        kind, out, _ = outs[r]
        assert kind == "done", f"rank {r}: {out}"
        assert out["kind"] in ("ProxyError", "PeerDisconnectedError"), out
        assert f"peer {VICTIM}" in out["text"] and "host 1" in out["text"], out
        assert out["at"] - killed < 10, f"rank {r} took {out['at'] - killed:.1f} s to notice"

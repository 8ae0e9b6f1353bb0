"""A torch job survives a lost rank: in one process, a group whose peer died is destroyed and a new one made on
the survivors; under torchrun --max-restarts=1, a job whose rank killed itself restarts and finishes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from torch_ranks import run_ranks  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _lose_a_peer_then_regroup(dist, store, rank: int, size: int):
    """Rank 2 dies after one all-reduce; the others see the failure, destroy the group and make a new one."""
    import os
    import signal

    import torch
    dist.init_process_group("mscclpp", store=store, rank=rank, world_size=size)
    x = torch.ones(32)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((32,), float(size)))
    store.set(f"first-call-done-{rank}", "1")
    if rank == 2:  # once every rank's first call has returned: a death during it may fail it (the peer is gone)
        store.wait([f"first-call-done-{r}" for r in range(size)])
        os.kill(os.getpid(), signal.SIGKILL)
    failed = None
    try:
        for _ in range(50):  # the next call (or the one after, if it raced the death) fails
            dist.all_reduce(x)
    except Exception as exc:  # torch wraps nothing: pymscclpp's own error
        failed = type(exc).__name__
    dist.destroy_process_group()
    regroup = dist.PrefixStore("regroup", store)
    dist.init_process_group("mscclpp", store=regroup, rank=rank, world_size=size - 1)
    y = torch.full((16,), float(rank + 1))
    dist.all_reduce(y)
    dist.destroy_process_group()
    return failed, y.tolist()


def test_a_group_whose_peer_died_is_destroyed_and_a_new_one_made_in_the_same_process():
    out = run_ranks(_lose_a_peer_then_regroup, 3, lost=(2,), timeout=180)
    for rank in (0, 1):
        failed, y = out[rank]
        assert failed == "PeerDisconnectedError", out
        assert y == [3.0] * 16, out


def test_torchrun_restarts_a_job_whose_rank_killed_itself_and_it_finishes_correctly(tmp_path):
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    env = {**os.environ, "PYMSCCLPP_BACKEND": "sim", "PYMSCCLPP_SOCKET_ADDR": "127.0.0.1",
           "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([torchrun, "--nproc-per-node=2", "--max-restarts=1", "--monitor-interval=0.5",
                           "--master-addr=127.0.0.1", f"--master-port={_free_port()}",
                           os.path.join(ROOT, "tests", "torchrun_recovery_job.py"), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    for rank in (0, 1):
        result = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert result == {"attempt": 1, "sums": [float(1 + 2 * i) for i in range(6)]}, result


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

"""Shared fixtures of the fault suite: rank pools per environment, and a /dev/shm leak check by pid."""

from __future__ import annotations

import os

import pytest

from fault.harness import leaked_segments
from rankpool import RankPool

_pools: dict[tuple, RankPool] = {}


def pool(size: int = 2, **env) -> RankPool:
    """A rank pool of ``size`` processes with ``env`` (PYMSCCLPP_* settings), shared within the session."""
    key = (size, tuple(sorted(env.items())))
    if key not in _pools:
        _pools[key] = RankPool(size, env={"PYMSCCLPP_TIMEOUT_S": "30", **env})
    return _pools[key]


def pool_pids(p: RankPool) -> list[int]:
    return p.pids


@pytest.fixture(scope="session", autouse=True)
def _close_pools_and_check_leaks():
    yield
    pids = []
    for p in _pools.values():
        pids += pool_pids(p)
        p.close()
    _pools.clear()
    leaked = leaked_segments(pids)
    assert not leaked, f"rank processes left shared-memory segments behind: {leaked}"

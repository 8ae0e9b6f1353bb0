"""The suite's rank pools, over ``pymscclpp.testing``: cases are ``fn(comm, state, **params)``, ``state`` a dict
each rank keeps across its pool's calls (an executor, a registered algorithm), which the kit's calls do not pass.
"""

from __future__ import annotations

from pymscclpp.testing import ranks

_STATE: dict = {}  # in each rank process (one pool each): what its cases keep


def _with_state(comm, fn, params: dict):
    return fn(comm, _STATE, **params)


class RankPool:
    """``size`` ranks started now; ``run(fn, timeout, **params)`` is the kit's ``run`` with the state."""

    def __init__(self, size: int, env: dict | None = None, start_timeout: float = 120.0,
                 rank_env: list[dict] | None = None, preload: tuple[str, ...] | None = None):
        self.size = size
        self._pool = ranks(size, env=env, rank_env=rank_env, start_timeout=start_timeout, preload=preload).start()

    @property
    def pids(self) -> list[int]:
        return self._pool.pids

    def run(self, fn, timeout: float = 120.0, **params) -> list:
        """``fn(comm, state, **params)`` on every rank; their results (``RankFailure`` when one raises or hangs)."""
        return self._pool.run(_with_state, fn, params, timeout=timeout)

    def close(self, kill: bool = False) -> None:
        self._pool.close(kill)


class PoolCache:
    """Rank pools made on first use, one per rank count, sharing one environment; ``close()`` ends them all.

    A test module keeps one and closes it in a module fixture, so its tests reuse warm rank processes."""

    def __init__(self, env: dict | None = None):
        self.env = env or {}
        self.pools: dict[tuple, RankPool] = {}

    def __call__(self, size: int, rank_env: list[dict] | None = None) -> RankPool:
        """The pool of ``size`` ranks (with ``rank_env[r]`` added to rank r's environment, e.g. a host id)."""
        key = (size, repr(rank_env))
        if key not in self.pools:
            self.pools[key] = RankPool(size, env=self.env, rank_env=rank_env)
        return self.pools[key]

    def close(self) -> None:
        for p in self.pools.values():
            p.close()
        self.pools.clear()

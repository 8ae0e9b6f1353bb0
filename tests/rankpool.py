"""A pool of rank processes for tests: each builds a Communicator once, then runs cases on request.

Cases run collectively: ``pool.run(fn, **params)`` calls ``fn(comm, state, **params)`` on every
rank and returns their results, re-raising the first rank's failure with its traceback. A case
that does not finish within its budget kills the pool, so a hang becomes a test failure.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import traceback

_CTX = mp.get_context("spawn")


def _forkserver(preload: tuple[str, ...]):
    """A forkserver context whose server imports ``preload`` once: its ranks start without importing them
    again (the first pool to start the server chooses what it preloads)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(preload))
    return ctx


def _worker(rank: int, size: int, uid_bytes: bytes, env: dict, tasks, results) -> None:
    os.environ.update(env)
    from pymscclpp.runtime.bootstrap import UniqueId
    from pymscclpp import Communicator
    try:
        comm = Communicator.from_unique_id(UniqueId.from_bytes(uid_bytes), rank, size)
    except BaseException:
        results.put((rank, False, traceback.format_exc()))
        return
    results.put((rank, True, "ready"))
    state: dict = {}
    while True:
        item = tasks.get()
        if item is None:
            break
        fn, params = item
        try:
            results.put((rank, True, fn(comm, state, **params)))
        except BaseException:
            results.put((rank, False, traceback.format_exc()))
    comm.close()


class RankPool:
    """``size`` rank processes on the simulator (or whatever PYMSCCLPP_BACKEND says) sharing one job."""

    def __init__(self, size: int, env: dict | None = None, start_timeout: float = 120.0,
                 rank_env: list[dict] | None = None, preload: tuple[str, ...] = ()):
        """``preload``: modules that a forkserver imports once for every rank (many ranks start in seconds);
        they must not depend on ``env`` at import time. Without it, ranks are spawned afresh."""
        from pymscclpp.runtime.bootstrap import get_unique_id
        self.size = size
        uid = get_unique_id(addr="127.0.0.1")
        env = {"PYMSCCLPP_BACKEND": os.environ.get("PYMSCCLPP_BACKEND", "sim"), **(env or {})}
        ctx = _forkserver(preload) if preload else _CTX
        self._results = ctx.Queue()
        self._tasks = [ctx.Queue() for _ in range(size)]
        per_rank = rank_env or [{}] * size  # e.g. a PYMSCCLPP_HOST_ID per rank to fake several hosts
        self._procs = [ctx.Process(target=_worker, args=(r, size, uid.to_bytes(), {**env, **per_rank[r]}, self._tasks[r],
                                                          self._results), daemon=True) for r in range(size)]
        for p in self._procs:
            p.start()
        self._collect(start_timeout, "start-up")

    def _collect(self, timeout: float, what: str) -> list:
        out: list = [None] * self.size
        errors = []
        for _ in range(self.size):
            try:
                rank, ok, value = self._results.get(timeout=timeout)
            except queue.Empty:
                self.close(kill=True)
                raise TimeoutError(f"{what}: ranks did not answer within {timeout} s (pool killed)") from None
            if ok:
                out[rank] = value
            else:
                errors.append(f"--- rank {rank} ---\n{value}")
        if errors:
            raise AssertionError(f"{what} failed on {len(errors)} rank(s):\n" + "\n".join(sorted(errors)))
        return out

    def run(self, fn, timeout: float = 120.0, **params) -> list:
        """Run ``fn(comm, state, **params)`` on every rank; the list of per-rank results."""
        for q in self._tasks:
            q.put((fn, params))
        return self._collect(timeout, f"{fn.__name__}({params})")

    def close(self, kill: bool = False) -> None:
        for q, p in zip(self._tasks, self._procs):
            if p.is_alive() and not kill:
                q.put(None)
        for p in self._procs:
            p.join(timeout=0 if kill else 20)
            if p.is_alive():
                p.kill()
                p.join()


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

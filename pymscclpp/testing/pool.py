"""Rank processes for tests: ``ranks(n)`` keeps ``n`` of them, each with a Communicator, for many calls;
``run_ranks`` is one call on a pool of its own. A failed or hung call raises ``RankFailure`` and the pool
starts afresh for the next call, so a test never inherits a broken or stuck job."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import pickle
import queue
import shutil
import tempfile
import time
from typing import Any, Callable

from .. import config
from . import pickling, worker
from .failure import RankFailure

GRACE_S = 5.0  # after a rank raised, how long the others may take to answer before they count as hung
STACK_WAIT_S = 2.0  # how long a hung rank may take to write its stacks
POLL_S = 0.5  # how often a wait for answers looks for rank processes that ended without one
IMPORTED_ONCE = ("pymscclpp.communicator",)  # what a simulator pool's forkserver imports by default


def _default_preload(envs: list[dict]) -> tuple[str, ...]:
    """What ranks with environments ``envs`` fork from by default: on the simulator, a server that imported
    pymscclpp once with this process's environment (a rank starts in milliseconds, not seconds of importing
    numba-cuda); fresh interpreters where a rank's environment changes what is read at import (the backend,
    numba's settings), and on GPUs, where a fork after CUDA started breaks CUDA."""
    from ..runtime.backend import IS_SIM
    backends = {env.get("PYMSCCLPP_BACKEND", "sim") for env in envs} - {"sim", config.get("PYMSCCLPP_BACKEND")}
    unchanged = not backends and all(v == os.environ.get(k) for env in envs for k, v in env.items()
                                     if k.startswith("NUMBA_"))
    return IMPORTED_ONCE if IS_SIM and unchanged else ()


def _context(preload: tuple[str, ...]) -> Any:
    """Fresh interpreters (spawn), or forks of a server that imported ``preload`` once (many ranks start in
    seconds; the first pool to start the server chooses what it imports)."""
    if not preload:
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(preload))
    return ctx


class RankPool:
    """``n`` rank processes sharing one job (the simulator unless PYMSCCLPP_BACKEND says otherwise), made by
    ``ranks``. ``env``: environment of every rank, over this process's at start-up (forked ranks too);
    ``rank_env[r]``: more for rank r (e.g. a PYMSCCLPP_HOST_ID)."""

    def __init__(self, n: int, timeout: float = 60.0, env: dict | None = None, rank_env: list[dict] | None = None,
                 start_timeout: float = 120.0, preload: tuple[str, ...] | None = None):
        if n < 1:
            raise ValueError(f"ranks({n}): a pool needs at least one rank")
        self.size, self.timeout, self.start_timeout = n, timeout, start_timeout
        backend = config.get("PYMSCCLPP_BACKEND") if config.is_set("PYMSCCLPP_BACKEND") else "sim"
        self.env = {"PYMSCCLPP_BACKEND": backend, **(env or {})}
        self.rank_env = rank_env or [{}] * n
        envs = [{**self.env, **e} for e in self.rank_env]
        self._ctx = _context(_default_preload(envs) if preload is None else tuple(preload))
        self._procs: list = []
        self._dir = ""  # where the ranks write their stacks, made by each start

    @property
    def pids(self) -> list[int]:
        """The rank processes' ids, by rank (empty until the first call starts them)."""
        return [p.pid for p in self._procs]

    def start(self) -> RankPool:
        """Start the rank processes now rather than on the first call (no-op when they run)."""
        if not self._procs:
            self._start()
        return self

    def _start(self) -> None:
        from ..runtime.bootstrap import get_unique_id
        uid = get_unique_id(addr="127.0.0.1").to_bytes()
        self._dir = tempfile.mkdtemp(prefix="pymscclpp-ranks-")
        self._results = self._ctx.Queue()
        self._tasks = [self._ctx.Queue() for _ in range(self.size)]
        for r in range(self.size):
            proc = self._ctx.Process(target=worker.main, daemon=True, name=f"rank{r}", args=(
                r, self.size, uid, {**os.environ, **self.env, **self.rank_env[r]}, self._tasks[r], self._results,
                self._stack_path(r)))
            proc.start()
            self._procs.append(proc)  # started ones only: close() joins them
        self._collect(self.start_timeout, "start-up")

    def _stack_path(self, rank: int) -> str:
        return os.path.join(self._dir, f"stack{rank}.txt")

    def run(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None, **kwargs: Any) -> list:
        """``fn(comm, *args, **kwargs)`` on every rank; their results in rank order. Raises ``RankFailure`` when a
        rank raises or ranks still run after ``timeout`` seconds (default: the pool's)."""
        task = pickling.dumps((fn, args, kwargs))
        self.start()
        for q in self._tasks:
            q.put(task)
        return [pickle.loads(v) for v in self._collect(self.timeout if timeout is None else timeout,
                                                        getattr(fn, "__qualname__", repr(fn)))]

    def _collect(self, timeout: float, what: str) -> list:
        """Every rank's answer, or the pool killed and ``RankFailure`` raised (at once when a rank process ends
        without answering: a crash, or a rank that could not start)."""
        out: dict[int, Any] = {}
        errors: dict[int, tuple] = {}
        deadline = time.monotonic() + timeout
        while len(out) + len(errors) < self.size:
            try:
                rank, ok, value = self._results.get(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    break
                if any(not self._procs[r].is_alive() for r in range(self.size) if r not in out and r not in errors):
                    deadline = min(deadline, time.monotonic() + POLL_S)  # answers already sent still arrive
                continue
            (out if ok else errors)[rank] = value
            if errors:
                deadline = min(deadline, time.monotonic() + GRACE_S)
        running = [r for r in range(self.size) if r not in out and r not in errors]
        if not errors and not running:
            return [out[r] for r in range(self.size)]
        message = self._message(what, timeout, errors, {r: self._stacks_of(r) for r in running})
        self.close(kill=True)
        raise RankFailure(message, sorted([*errors, *running]), {r: e[0] for r, e in errors.items()})

    def _stacks_of(self, rank: int) -> str:
        """The Python stacks rank ``rank`` writes when signalled, or why there are none."""
        path = self._stack_path(rank)
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        proc = self._procs[rank]
        if not proc.is_alive():
            return f"(no stack: the process ended with exit code {proc.exitcode})"
        os.kill(proc.pid, worker.STACK_SIGNAL)
        end = time.monotonic() + STACK_WAIT_S
        while time.monotonic() < end:
            if os.path.exists(path):
                with open(path) as f:
                    return f.read()
            time.sleep(0.02)
        return f"(no stack: the process did not answer within {STACK_WAIT_S} s, stuck outside Python)"

    def _message(self, what: str, timeout: float, errors: dict[int, tuple], stacks: dict[int, str]) -> str:
        parts = [f"rank {r} raised {name}: {text}\n{tb}" for r, (name, text, tb) in sorted(errors.items())]
        ended = sorted(r for r in stacks if self._procs[r].exitcode is not None)
        if ended:
            parts.append(f"ranks {ended} ended without answering (exit codes "
                         f"{[self._procs[r].exitcode for r in ended]})")
        hung = {r: s for r, s in stacks.items() if r not in ended}
        if hung:
            head = f"ranks {sorted(hung)} still running after {timeout} s" if not errors and not ended else \
                f"ranks {sorted(hung)} still running {GRACE_S if errors else POLL_S} s after a rank " + \
                ("raised" if errors else "ended")
            parts.append(head + " (pool killed):\n" + "\n".join(f"--- rank {r} stack ---\n{s}"
                                                                for r, s in sorted(hung.items())))
        return f"{what} failed on {len(errors) + len(stacks)} of {self.size} rank(s):\n" + "\n".join(parts)

    def close(self, kill: bool = False) -> None:
        """End the rank processes (``kill``: at once); a later call starts new ones."""
        for q, p in zip(getattr(self, "_tasks", []), self._procs):
            if p.is_alive() and not kill:
                q.put(None)
        for p in self._procs:
            p.join(timeout=0 if kill else 20)
            if p.is_alive():
                p.kill()
                p.join()
        self._procs = []
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> RankPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def ranks(n: int, *, timeout: float = 60.0, env: dict | None = None, rank_env: list[dict] | None = None,
          start_timeout: float = 120.0, preload: tuple[str, ...] | None = None) -> RankPool:
    """A pool of ``n`` ranks for ``with ranks(n) as pool: pool.run(fn, ...)``; processes start on the first
    call and serve every later one (hypothesis examples pay start-up once). ``timeout``: each call's default
    budget; ``start_timeout``: start-up's; ``preload``: modules a forkserver imports once for every rank (None:
    ``IMPORTED_ONCE`` on the simulator where the ranks' environment allows it; ``()``: fresh interpreters)."""
    return RankPool(n, timeout, env, rank_env, start_timeout, preload)


def run_ranks(n: int, fn: Callable[..., Any], *args: Any, timeout: float = 60.0, env: dict | None = None,
              **kwargs: Any) -> list:
    """Start ``n`` ranks, call ``fn(comm, *args, **kwargs)`` on each, and return their results in rank order."""
    with ranks(n, timeout=timeout, env=env) as pool:
        return pool.run(fn, *args, **kwargs)



"""Rank processes that tests can kill: each runs one function and reports progress and its outcome.

``Job(fn, size, env)`` spawns ``size`` ranks; each builds a Communicator and calls
``fn(comm, report, **params)``, where ``report(kind, value)`` sends a message to the test. The
test waits for messages (``expect``), kills or freezes ranks (``kill``, ``freeze``) and collects
outcomes (``outcomes``): ``("done", value)`` or ``("error", (type, text, monotonic time))``.
Every wait has a timeout and ``close`` kills what is left, so a test can never hang.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from multiprocessing.connection import wait as wait_conns
import signal
import threading
import time
import traceback

from pymscclpp.runtime.liveness import segments_of

_CTX = mp.get_context("spawn")


def leaked_segments(pids) -> dict[int, list[str]]:
    """/dev/shm segments still named after any of ``pids``."""
    found = {pid: segments_of(pid) for pid in pids}
    return {pid: names for pid, names in found.items() if names}


def held() -> tuple[int, int, int]:
    """(open descriptors, this process's pymscclpp shared-memory segments, threads): what a released communicator
    must give back."""
    fds = os.listdir("/proc/self/fd")
    segments = [s for s in os.listdir("/dev/shm") if s.startswith("pymscclpp") and f"-{os.getpid()}-" in s]
    return len(fds), len(segments), threading.active_count()


def shared_unique_id(comm):
    """A new unique id that rank 0 makes and shares over ``comm``'s bootstrap (collective): for the next
    communicator of the same ranks."""
    from pymscclpp.runtime.bootstrap import UniqueId, get_unique_id
    mine = get_unique_id(addr="127.0.0.1").to_bytes() if comm.rank == 0 else b""
    return UniqueId.from_bytes(comm.bootstrap.all_gather(mine)[0])


def _rank_main(rank, size, uid_bytes, env, fn, params, results):
    os.environ.update(env)
    from pymscclpp import Communicator
    from pymscclpp.runtime.bootstrap import UniqueId

    def report(kind, value=None):
        results.send((rank, kind, value, time.monotonic()))

    comm = None
    try:
        comm = Communicator.from_unique_id(UniqueId.from_bytes(uid_bytes), rank, size)
        report("done", fn(comm, report, **params))
    except BaseException as exc:
        report("error", (type(exc).__name__, str(exc), time.monotonic(), traceback.format_exc()))
    finally:
        if comm is not None:
            try:
                comm.close()
            except BaseException as exc:
                report("close-error", f"{type(exc).__name__}: {exc}")
        report("exit")


class Job:
    """``size`` rank processes running ``fn``; the test drives them through messages and signals."""

    def __init__(self, fn, size: int, env: dict | None = None, rank_env: list[dict] | None = None, **params):
        from pymscclpp.runtime.bootstrap import get_unique_id
        self.size = size
        self.uid = get_unique_id(addr="127.0.0.1")
        env = {"PYMSCCLPP_BACKEND": "sim", "PYMSCCLPP_TIMEOUT_S": "60", **(env or {})}
        # one pipe per rank: a rank killed mid-write cannot block the others' reports
        pipes = [_CTX.Pipe(duplex=False) for _ in range(size)]
        self._readers = [r for r, _ in pipes]
        self.procs = [_CTX.Process(target=_rank_main, daemon=True,
                                   args=(r, size, self.uid.to_bytes(), {**env, **(rank_env or [{}] * size)[r]}, fn,
                                         params, pipes[r][1]))
                      for r in range(size)]
        for p in self.procs:
            p.start()
        for _, w in pipes:
            w.close()
        self.pids = [p.pid for p in self.procs]
        self.messages: list[tuple] = []
        self.killed_at: dict[int, float] = {}

    def _next(self, timeout: float):
        """Read at least one pending message (all that are ready); TimeoutError if none came in time."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            ready = wait_conns(self._readers, timeout=max(0.0, deadline - time.monotonic()))
            got = False
            for conn in ready:
                try:
                    self.messages.append(conn.recv())
                    got = True
                except (EOFError, OSError):
                    self._readers.remove(conn)  # that rank exited or was killed
            if got:
                return
            if time.monotonic() >= deadline or not self._readers:
                raise TimeoutError

    def expect(self, kind: str, ranks, timeout: float) -> dict[int, object]:
        """Wait until every rank in ``ranks`` sent a ``kind`` message; their values by rank."""
        want = set(ranks)
        got = {r: v for r, k, v, _ in self.messages if k == kind and r in want}
        deadline = time.monotonic() + timeout
        while want - got.keys():
            bad = [(r, v) for r, k, v, _ in self.messages if k == "error" and r in want - got.keys()]
            if bad and kind != "error":
                raise AssertionError(f"rank(s) failed while waiting for {kind!r}: " +
                                     "\n".join(f"rank {r}: {v[3]}" for r, v in bad))
            try:
                self._next(deadline - time.monotonic())
            except TimeoutError:
                raise TimeoutError(f"ranks {sorted(want - got.keys())} sent no {kind!r} within {timeout} s; "
                                   f"messages so far: {[m[:3] for m in self.messages]}") from None
            got.update({r: v for r, k, v, _ in self.messages if k == kind and r in want})
        return got

    def expect_where(self, kind: str, rank: int, accept, timeout: float) -> object:
        """Wait until rank ``rank`` sent a ``kind`` message whose value ``accept(value)`` takes; that value."""
        deadline = time.monotonic() + timeout
        while True:
            for r, k, v, _ in self.messages:
                if r == rank and k == kind and accept(v):
                    return v
                if r == rank and k == "error":
                    raise AssertionError(f"rank {rank} failed while waiting for {kind!r}: {v[3]}")
            try:
                self._next(deadline - time.monotonic())
            except TimeoutError:
                raise TimeoutError(f"rank {rank} sent no such {kind!r} within {timeout} s; "
                                   f"messages so far: {[m[:3] for m in self.messages]}") from None

    def outcomes(self, ranks, timeout: float) -> dict[int, tuple]:
        """(kind, value, time) of the final ``done``/``error`` message of each rank in ``ranks``."""
        deadline = time.monotonic() + timeout
        out = {}
        while True:
            for r, k, v, t in self.messages:
                if k in ("done", "error") and r in ranks:
                    out[r] = (k, v, t)
            if set(ranks) <= out.keys():
                return out
            try:
                self._next(deadline - time.monotonic())
            except TimeoutError:
                raise TimeoutError(f"ranks {sorted(set(ranks) - out.keys())} did not finish within {timeout} s "
                                   f"(a hang); messages: {[m[:3] for m in self.messages]}") from None

    def kill(self, rank: int) -> float:
        """SIGKILL rank ``rank`` (kill -9) and reap it; the monotonic time of the kill."""
        at = time.monotonic()
        os.kill(self.pids[rank], signal.SIGKILL)
        self.procs[rank].join(10)
        self.killed_at[rank] = at
        return at

    def freeze(self, rank: int) -> float:
        """SIGSTOP rank ``rank``: alive, sockets open, but silent (a hung process or a lost host)."""
        at = time.monotonic()
        os.kill(self.pids[rank], signal.SIGSTOP)
        return at

    def join(self, timeout: float) -> list[int | None]:
        """Wait for every process to exit (survivors exit on their own); exit codes."""
        deadline = time.monotonic() + timeout
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        return [p.exitcode for p in self.procs]

    def close(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join(10)
        for conn in self._readers:
            conn.close()

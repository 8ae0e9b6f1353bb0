"""The loop of one rank process of a pool: make a Communicator, then run the calls it is sent until told to stop.

Results go back pickled (an unpicklable result is that rank's failure); SIGUSR1 makes the rank write its
threads' Python stacks to a file, which is how a pool shows where ranks hang when a call runs past its budget.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import traceback
from types import FrameType
from typing import Any

STACK_SIGNAL = signal.SIGUSR1


def _stacks(here: FrameType | None) -> str:
    """Every thread's Python stack (this one's from frame ``here``), the main thread first; threads with the same
    stack (a simulated block's CUDA threads) are shown once, with their count."""
    names = {t.ident: t.name for t in threading.enumerate()}
    groups: dict[str, list[str]] = {}
    for ident, frame in {**sys._current_frames(), threading.get_ident(): here}.items():
        groups.setdefault("".join(traceback.format_stack(frame)), []).append(names.get(ident, hex(ident)))
    order = sorted(groups.items(), key=lambda kv: "MainThread" not in kv[1])
    return "\n".join(f"{who[0] if len(who) == 1 else f'{len(who)} threads ({who[0]}, ...)'}:\n{text}"
                     for text, who in order)


def _dump_stacks_to(path: str) -> None:
    def dump(signum: int, frame: FrameType | None) -> None:
        with open(path + ".tmp", "w") as f:
            f.write(_stacks(frame))
        os.replace(path + ".tmp", path)
    signal.signal(STACK_SIGNAL, dump)


def _failure(exc: BaseException) -> tuple:
    return type(exc).__name__, str(exc), traceback.format_exc()


def main(rank: int, size: int, uid_bytes: bytes, env: dict, tasks: Any, results: Any, stack_path: str) -> None:
    """Rank ``rank`` of ``size``: answers ``(rank, ok, payload)`` once ready, then once per task. Whatever
    shared memory the calls left mapped is released at the end, also in a rank forked from a server (those end in
    ``os._exit``, which skips the interpreter's exit hooks)."""
    os.environ.update(env)
    _dump_stacks_to(stack_path)
    from pymscclpp.runtime import shm
    try:
        _serve(rank, size, uid_bytes, tasks, results)
    finally:
        shm.release_all()


def _serve(rank: int, size: int, uid_bytes: bytes, tasks: Any, results: Any) -> None:
    try:
        from pymscclpp import Communicator
        from pymscclpp.runtime.backend import IS_SIM
        from pymscclpp.runtime.bootstrap import UniqueId
        from pymscclpp.runtime.liveness import reap_orphans
        if IS_SIM:  # what importing pymscclpp does, which a rank forked from a server that imported it skipped
            reap_orphans()
        comm = Communicator.from_unique_id(UniqueId.from_bytes(uid_bytes), rank, size)
    except BaseException as exc:
        results.put((rank, False, _failure(exc)))
        return
    results.put((rank, True, None))
    while (task := tasks.get()) is not None:
        try:
            fn, args, kwargs = pickle.loads(task)
            results.put((rank, True, pickle.dumps(fn(comm, *args, **kwargs), protocol=pickle.HIGHEST_PROTOCOL)))
        except BaseException as exc:
            results.put((rank, False, _failure(exc)))
    comm.close()

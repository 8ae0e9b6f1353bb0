"""A host thread that watches the device error areas of live communicators (like torch's
TORCH_NCCL_ASYNC_ERROR_HANDLING), so a failed device wait is reported even if no call follows it.

Every ``POLL_S`` seconds it reads each watched communicator's error area (host memory the device writes, so
no copy and no stream: it neither waits behind nor delays user work) and, for each new error, logs rank,
peer, channel and op. ``PYMSCCLPP_ASYNC_ERROR_HANDLING`` says
what follows: ``0``/``none`` (default) leaves the error in place for the communicator's next
check to raise; ``1``/``abort`` ends the process with that message (SIGABRT: launchers then end the
job). Collectives never touch the watchdog: ``watch``/``unwatch`` run once per communicator.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import weakref

from .. import config
from .._log import get_logger

ENV = "PYMSCCLPP_ASYNC_ERROR_HANDLING"
POLL_S = 1.0
_log = get_logger("watchdog")
_lock = threading.Lock()
_watched: "weakref.WeakSet" = weakref.WeakSet()
_reported: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # comm -> the error text last logged
_thread: threading.Thread | None = None
_stopping = threading.Event()  # set at interpreter exit: no driver calls while CUDA is torn down
atexit.register(_stopping.set)


def mode() -> str:
    """``"none"`` or ``"abort"``, from PYMSCCLPP_ASYNC_ERROR_HANDLING."""
    return config.get(ENV)


def watch(comm) -> None:
    """Watch ``comm``'s error area from now on (a weak reference: a dropped communicator is forgotten)."""
    global _thread
    mode()  # a bad setting fails at construction, not later in the thread
    with _lock:
        _watched.add(comm)
        if _thread is None:
            _thread = threading.Thread(target=_run, daemon=True, name="pymscclpp-watchdog")
            _thread.start()


def unwatch(comm) -> None:
    """Stop watching ``comm`` (before its error area is released)."""
    with _lock:
        _watched.discard(comm)


def poll() -> list[str]:
    """Check every watched communicator once; the errors newly found (logged, or the process aborted)."""
    with _lock:
        comms = list(_watched)
    found = []
    for comm in comms:
        text = comm.device_error()
        if text is None:
            _reported.pop(comm, None)
            continue
        if _reported.get(comm) == text:
            continue
        _reported[comm] = text
        found.append(text)
        if mode() == "abort":
            _abort(text)
        _log.error("watchdog: %s (%s=none: every later call on the communicator raises it)", text, ENV)
    return found


def _abort(text: str) -> None:
    sys.stderr.write(f"pymscclpp watchdog: {text}; aborting the process ({ENV}=abort)\n")
    sys.stderr.flush()
    os.abort()


def _run() -> None:
    while not _stopping.wait(POLL_S):
        try:
            poll()
        except Exception:  # the watchdog must never take the rank down by itself
            _log.exception("watchdog: polling failed; device errors are no longer watched")
            return


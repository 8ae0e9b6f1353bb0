"""A host thread that watches the device error areas of live communicators (like torch's
TORCH_NCCL_ASYNC_ERROR_HANDLING), so a failed device wait is reported even if no call follows it.

Every ``POLL_S`` seconds it copies each watched communicator's error area to the host (on its own
non-blocking stream, never the legacy default one, so it neither waits behind nor delays user work)
and, for each new error, logs rank, peer, channel and op. ``PYMSCCLPP_ASYNC_ERROR_HANDLING`` says
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

import numpy as np

from .._log import get_logger
from ..channels.device_errors import ERR_WORDS, describe
from ..errors import InvalidUsageError
from .memory import buffer_info

ENV = "PYMSCCLPP_ASYNC_ERROR_HANDLING"
POLL_S = 1.0
_MODES = {"0": "none", "none": "none", "1": "abort", "abort": "abort"}
_log = get_logger("watchdog")
_lock = threading.Lock()
_watched: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # comm -> (device, error area address)
_reported: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # comm -> the error words last logged
_thread: threading.Thread | None = None
_stopping = threading.Event()  # set at interpreter exit: no driver calls while CUDA is torn down
atexit.register(_stopping.set)


def mode() -> str:
    """``"none"`` or ``"abort"``, from PYMSCCLPP_ASYNC_ERROR_HANDLING."""
    raw = os.environ.get(ENV, "0").strip().lower() or "0"
    if raw not in _MODES:
        raise InvalidUsageError(f"{ENV}={raw!r}: expected 0 (or none: the next call raises) or 1 (or abort)")
    return _MODES[raw]


def watch(comm) -> None:
    """Watch ``comm``'s error area from now on (a weak reference: a dropped communicator is forgotten)."""
    global _thread
    mode()  # a bad setting fails at construction, not later in the thread
    address = buffer_info(comm.error_area).ptr
    with _lock:
        _watched[comm] = (comm.device, address)
        if _thread is None:
            _thread = threading.Thread(target=_run, daemon=True, name="pymscclpp-watchdog")
            _thread.start()


def unwatch(comm) -> None:
    """Stop watching ``comm`` (before its error area is released)."""
    with _lock:
        _watched.pop(comm, None)


def poll() -> list[str]:
    """Check every watched communicator once; the errors newly found (logged, or the process aborted)."""
    with _lock:
        comms = list(_watched.items())
    found = []
    for comm, (device, address) in comms:
        words = _read(device, address)
        text = describe(words)
        if text is None:
            _reported.pop(comm, None)  # cleared by a check: the same error later is a new one
            continue
        if _reported.get(comm) == words.tobytes():
            continue
        _reported[comm] = words.tobytes()
        found.append(text)
        if mode() == "abort":
            _abort(text)
        _log.error("watchdog: %s (%s=none: the communicator's next check raises it)", text, ENV)
    return found


_streams: dict[int, int] = {}  # device -> the watchdog's non-blocking stream


def _read(device: int, address: int) -> np.ndarray:
    """A host copy of the error area (int64[ERR_WORDS]) at device ``address``."""
    from ..transports import driver
    out = np.zeros(ERR_WORDS, np.int64)
    driver.make_current(device)
    if device not in _streams:
        _streams[device] = driver.create_stream()
    driver.to_host(out.ctypes.data, address, out.nbytes, _streams[device])
    return out


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


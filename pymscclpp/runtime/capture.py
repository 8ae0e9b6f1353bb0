"""Stream capture: whether a stream is being captured into a CUDA graph, and the guard that puts the calling
thread in relaxed capture mode, so driver calls made while a stream is captured (mapping peers' memory, making a
graph) do not invalidate the capture (torch captures in global mode)."""

from __future__ import annotations

import contextlib
import ctypes
from typing import ContextManager

from .backend import IS_SIM, driver_function

_CAPTURE_MODE_RELAXED = 2  # CU_STREAM_CAPTURE_MODE_RELAXED


class Relaxed:
    """The calling thread in relaxed stream-capture mode for the ``with`` body, its own mode restored after;
    ``exchange``: the address of ``cuThreadExchangeStreamCaptureMode``."""

    def __init__(self, exchange: int):
        self._exchange, self._mode = ctypes.CFUNCTYPE(ctypes.c_int)(exchange), ctypes.c_int()

    def __enter__(self) -> None:
        self._mode.value = _CAPTURE_MODE_RELAXED
        self._exchange(ctypes.byref(self._mode))

    def __exit__(self, *exc) -> None:
        self._exchange(ctypes.byref(self._mode))


_DRIVER: dict = {}


def _driver(name: str, argtypes: list):
    if name not in _DRIVER:
        _DRIVER[name] = driver_function((name,), argtypes)
    return _DRIVER[name]


def capturing(stream: int) -> bool:
    """True when ``stream`` (a CUstream handle, 0 the legacy stream) is being captured; always False on the
    simulator."""
    if IS_SIM:
        return False
    status = ctypes.c_int(0)
    fn = _driver("cuStreamIsCapturing", [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)])
    return fn(ctypes.c_void_p(stream), ctypes.byref(status)) == 0 and status.value != 0


def relaxed() -> ContextManager[None]:
    """A ``Relaxed`` guard over the driver's own call (a no-op on the simulator, where nothing is captured)."""
    if IS_SIM:
        return contextlib.nullcontext()
    fn = _driver("cuThreadExchangeStreamCaptureMode", [ctypes.POINTER(ctypes.c_int)])
    return Relaxed(ctypes.cast(fn, ctypes.c_void_p).value)

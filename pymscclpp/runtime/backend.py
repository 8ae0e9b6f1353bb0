"""Choose the device backend once per process: ``gpu`` (numba-cuda on real GPUs) or ``sim``.

``sim`` is numba's CUDA simulator; memory shared with peers then lives in POSIX shared
memory. ``PYMSCCLPP_BACKEND=auto|gpu|sim`` overrides the automatic choice (sim when no
GPU is visible); ``compile`` generates GPU code (PTX) without a GPU, for tests of codegen.
This module must run before anything imports ``numba.cuda``.
"""

from __future__ import annotations

import ctypes
import os
import sys

from .._log import get_logger
from ..errors import BackendError

_log = get_logger("backend")
_CHOICES = ("auto", "gpu", "sim", "compile")


def _gpu_count() -> int:
    """Number of CUDA devices the driver sees, 0 when there is no driver."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    if libcuda.cuInit(0) != 0:
        return 0
    count = ctypes.c_int(0)
    if libcuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def _select() -> str:
    asked = os.environ.get("PYMSCCLPP_BACKEND", "auto").strip().lower() or "auto"
    if asked not in _CHOICES:
        raise BackendError(f"PYMSCCLPP_BACKEND={asked!r}: expected one of {', '.join(_CHOICES)}")
    numba_cuda_loaded = "numba.cuda" in sys.modules
    if numba_cuda_loaded:
        from numba.core import config
        already = "sim" if config.ENABLE_CUDASIM else "gpu"
        if asked == "compile" and already == "gpu":
            return "compile"
        if asked not in ("auto", already) or (already == "gpu" and _gpu_count() == 0):
            raise BackendError(
                f"numba.cuda was imported in {already} mode before pymscclpp could choose the backend "
                f"(PYMSCCLPP_BACKEND={asked}, {_gpu_count()} GPUs visible): import pymscclpp before "
                "numba.cuda, or set NUMBA_ENABLE_CUDASIM=1 for the simulator")
        return already
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0") and asked != "gpu":
        chosen = "sim"
    elif asked == "auto":
        chosen = "gpu" if _gpu_count() > 0 else "sim"
        if chosen == "sim":
            _log.warning("no CUDA GPU visible: running kernels on the numba CUDA simulator "
                         "(PYMSCCLPP_BACKEND=gpu|sim overrides)")
    else:
        chosen = asked
    if chosen == "gpu" and _gpu_count() == 0:
        raise BackendError("PYMSCCLPP_BACKEND=gpu but no CUDA device is visible (no driver or no GPU); "
                           "use PYMSCCLPP_BACKEND=sim to run on the CUDA simulator")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1" if chosen == "sim" else "0"
    if "numba" in sys.modules:
        from numba.core import config
        config.reload_config()
    return chosen


BACKEND: str = _select()
IS_SIM: bool = BACKEND == "sim"
if IS_SIM:
    from . import simsched
    simsched.install()


def name() -> str:
    """The backend this process runs on: ``"gpu"`` or ``"sim"``."""
    return BACKEND

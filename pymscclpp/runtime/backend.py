"""Choose the device backend once per process: ``gpu`` (numba-cuda on real GPUs) or ``sim``.

``sim`` is numba's CUDA simulator; memory shared with peers then lives in POSIX shared
memory. ``PYMSCCLPP_BACKEND=auto|gpu|sim`` overrides the automatic choice (sim when no
GPU is visible); ``compile`` generates GPU code (PTX) without a GPU, for tests of codegen.
Run it before ``numba.cuda`` is imported; run after, it keeps numba's mode or, when the simulator is
wanted (or no GPU is visible), re-imports ``numba.cuda`` as the simulator.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import os
import sys

from .. import config
from .._log import get_logger
from ..errors import BackendError
from . import numba_text

_log = get_logger("backend")


@functools.cache
def libcuda() -> ctypes.CDLL | None:
    """The CUDA driver library, loaded once per process; None when there is no driver."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def driver_function(names: tuple[str, ...], argtypes: list, restype=ctypes.c_int):
    """A function object of its own (typed as asked, whatever other modules set) for the first of ``names`` that
    libcuda has; None when it has none of them (or there is no driver)."""
    lib = libcuda()
    for name in names if lib is not None else ():
        try:
            fn = lib[name]
        except AttributeError:
            continue
        fn.argtypes, fn.restype = argtypes, restype
        return fn
    return None


def _gpu_count() -> int:
    """Number of CUDA devices the driver sees, 0 when there is no driver."""
    lib = libcuda()
    if lib is None or lib.cuInit(0) != 0:
        return 0
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def _select() -> str:
    asked = config.get("PYMSCCLPP_BACKEND")
    if "numba.cuda" in sys.modules:
        return _adopt_loaded(asked)
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0") and asked != "gpu":
        chosen = "sim"
    elif asked == "auto":
        chosen = "gpu" if _gpu_count() > 0 else "sim"
    else:
        chosen = asked
    if chosen == "gpu" and _gpu_count() == 0:
        raise BackendError("PYMSCCLPP_BACKEND=gpu but no CUDA device is visible (no driver or no GPU); "
                           "use PYMSCCLPP_BACKEND=sim to run on the CUDA simulator")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1" if chosen == "sim" else "0"
    if "numba" in sys.modules:
        from numba.core import config as numba_config
        numba_config.reload_config()
    return chosen


def _adopt_loaded(asked: str) -> str:
    """The backend when numba.cuda was imported first: keep its mode, or re-import it as the simulator
    when that is what is asked for (or no GPU is visible) and it has not touched a GPU yet."""
    from numba.core import config as numba_config
    if numba_config.ENABLE_CUDASIM:
        if asked in ("gpu", "compile"):
            raise BackendError(f"PYMSCCLPP_BACKEND={asked} but numba.cuda was imported as the simulator "
                               "(NUMBA_ENABLE_CUDASIM=1): unset NUMBA_ENABLE_CUDASIM")
        return "sim"
    gpus = _gpu_count()
    if asked == "compile" or (asked in ("auto", "gpu") and gpus > 0):
        return asked if asked == "compile" else "gpu"
    if asked == "gpu":
        raise BackendError("PYMSCCLPP_BACKEND=gpu but no CUDA device is visible (no driver or no GPU); "
                           "use PYMSCCLPP_BACKEND=sim to run on the CUDA simulator")
    from numba.cuda.cudadrv import driver
    if driver.driver.is_initialized and gpus > 0:
        raise BackendError("PYMSCCLPP_BACKEND=sim but numba.cuda already uses the GPU in this process: "
                           "import pymscclpp first, or set NUMBA_ENABLE_CUDASIM=1 before starting Python")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    numba_config.reload_config()
    importlib.reload(sys.modules["numba.cuda"])  # in place: `from numba import cuda` done earlier follows
    return "sim"


numba_text.install()
_AUTO = (config.get("PYMSCCLPP_BACKEND") == "auto"
         and os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0"))  # sim only if no GPU is visible
BACKEND: str = _select()
IS_SIM: bool = BACKEND == "sim"
_announced = False
if IS_SIM:
    from . import simsched
    from .liveness import reap_orphans
    simsched.install()
    reap_orphans()  # segments of ranks that ended without cleaning up (os._exit, kill -9)


def announce(rank: int) -> None:
    """Say once per job (rank 0, first communicator) that kernels run on the simulator because no GPU is visible."""
    global _announced
    if IS_SIM and rank == 0 and not _announced and _AUTO:
        _announced = True
        sys.stdout.flush()  # the notice goes to stderr: never glued to the end of a buffered stdout line
        _log.warning("no CUDA GPU visible: running kernels on the numba CUDA simulator "
                     "(PYMSCCLPP_BACKEND=gpu|sim overrides)")


def name() -> str:
    """The backend this process runs on: ``"gpu"`` or ``"sim"``."""
    return BACKEND

"""Where compiled kernels are kept between processes: numba's disk cache, in a folder named by a digest of
pymscclpp's device code and the numba-cuda version, so that a change to any device function (which numba's own
cache does not track across modules) compiles afresh, and two ranks compiling one kernel at once are safe
(numba writes its cache files atomically). ``PYMSCCLPP_CACHE_DIR`` moves it (default ``~/.cache/pymscclpp``);
``NUMBA_CACHE_DIR``, when set, is left as it is.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
# every file whose code ends up in a compiled kernel, or whose constants do
DEVICE_SOURCES = ("channels", "algos", "executor/device.py", "executor/codegen.py", "runtime/device_errors.py",
                  "runtime/fifo.py", "bench/memory_channel.py", "bench/port_channel.py")


def root() -> Path:
    """``$PYMSCCLPP_CACHE_DIR`` (default ``~/.cache/pymscclpp``)."""
    return Path(os.environ.get("PYMSCCLPP_CACHE_DIR") or Path.home() / ".cache" / "pymscclpp")


@functools.cache
def device_code_digest() -> str:
    """Hash of pymscclpp's version, the numba-cuda version and every device source file."""
    from .. import __version__
    h = hashlib.sha256(f"{__version__}|{importlib.metadata.version('numba-cuda')}".encode())
    for rel in DEVICE_SOURCES:
        path = _ROOT / rel
        for f in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            h.update(f.relative_to(_ROOT).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:20]


def configure() -> None:
    """Point numba's disk cache at this code's folder (before any ``cache=True`` kernel is defined)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    where = str(root() / "numba" / device_code_digest())
    os.environ["NUMBA_CACHE_DIR"] = where
    import sys
    if "numba" in sys.modules:
        from numba.core import config
        config.CACHE_DIR = where

"""Where compiled kernels are kept between processes, in folders named by a digest of pymscclpp's device code
and the numba-cuda version, so that a change to any device function (which numba's own cache does not track
across modules) compiles afresh: numba's disk cache, and the linked cubins of pymscclpp's own kernels (and the
executor's generated ones), which a later process loads with no numba typing or target set-up at all (that
set-up costs 0.5-1 s per process). Two ranks writing one kernel at once are safe (files are replaced
atomically). ``PYMSCCLPP_CACHE_DIR`` moves it (default ``~/.cache/pymscclpp``); ``NUMBA_CACHE_DIR``, when set,
is left as it is.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import tempfile
import time
import warnings
from pathlib import Path

from .. import config
from ..errors import BackendError
from . import numba_compat as nc

_ROOT = Path(__file__).resolve().parent.parent  # the package: only its kernels (and generated ones) are kept
_sources: tuple[str, ...] | None = None  # what the digest covers, named by the package (``configure``)
_version = ""  # the package's version (``configure``)


def root() -> Path:
    """``$PYMSCCLPP_CACHE_DIR`` (default ``~/.cache/pymscclpp``)."""
    return Path(config.get("PYMSCCLPP_CACHE_DIR") or Path.home() / ".cache" / "pymscclpp")


@functools.cache
def device_code_digest() -> str:
    """Hash of pymscclpp's version, the numba-cuda version and every device source file ``configure`` was given."""
    if _sources is None:
        raise BackendError("the kernel cache was not configured: importing pymscclpp names its device sources")
    h = hashlib.sha256(f"{_version}|{importlib.metadata.version('numba-cuda')}".encode())
    for rel in _sources:
        path = _ROOT / rel
        for f in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            h.update(f.relative_to(_ROOT).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:20]


def configure(sources: tuple[str, ...], version: str) -> None:
    """Key the cache by the package's ``version`` and ``sources`` (files and folders relative to the package: every
    file whose code ends up in a compiled kernel, or whose constants do; the layers that hold them are above this
    one, so the package names them) and point numba's disk cache at their digest's folder (before any
    ``cache=True`` kernel is defined)."""
    global _sources, _version
    _sources, _version = tuple(sources), version
    device_code_digest.cache_clear()
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    where = str(root() / "numba" / device_code_digest())
    os.environ["NUMBA_CACHE_DIR"] = where
    import sys
    if "numba" in sys.modules:
        from numba.core import config as numba_config
        numba_config.CACHE_DIR = where


def _cubin_path(kernel, argtypes: tuple, cc: tuple[int, int]) -> Path | None:
    """Where the cubin of ``kernel`` for ``argtypes`` on ``cc`` is kept, or None for a kernel defined outside
    pymscclpp and its generated code (its device functions could change unseen)."""
    source = Path(kernel.py_func.__code__.co_filename).resolve()
    if not (source.is_relative_to(_ROOT) or source.is_relative_to(root().resolve())) or not source.is_file():
        return None
    h = hashlib.sha256(source.read_bytes())
    for part in (kernel.py_func.__qualname__, repr(argtypes), repr(cc), nc.options(kernel)):
        h.update(b"|" + part.encode())
    return root() / "cubin" / device_code_digest() / f"{kernel.py_func.__name__}-{h.hexdigest()[:24]}.cubin"


_functions: dict[tuple[Path, int], int] = {}  # (cubin, context) -> CUfunction: each module loaded once per context


def function_for(kernel, argtypes: tuple) -> tuple[int, float, bool]:
    """(CUfunction, seconds to get it, whether it came from disk) of dispatcher ``kernel`` for ``argtypes`` in
    the current context: the one got before (every communicator's launches share it: loading a module per launch
    grew GPU memory with each communicator made), else a kept cubin if there is one, else numba compiles (or loads
    its cache) and the cubin is kept."""
    from numba import cuda
    start = time.perf_counter()
    path = _cubin_path(kernel, argtypes, cuda.get_current_device().compute_capability)
    key = None if path is None else (path, nc.context_id())
    if key in _functions:
        return _functions[key], time.perf_counter() - start, True
    func = None
    if path is not None and path.is_file():
        entry, _, cubin = path.read_bytes().partition(b"\n")
        try:
            func, hit = nc.load_binary(cubin, entry.decode()), True
        except BackendError:  # a damaged file: compile again and replace it
            pass
    if func is None:
        compiled, _, hit = nc.compile_for(kernel, argtypes)
        func = nc.cu_function(compiled)
        kept = nc.binary(compiled, cuda.get_current_device().compute_capability) if path is not None else None
        if kept is not None:
            _keep(path, kept[1].encode() + b"\n" + kept[0])
    if key is not None:
        _functions[key] = func
    return func, time.perf_counter() - start, hit


def _keep(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; a cache that cannot be written only costs the next process time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        warnings.warn(f"pymscclpp: cannot keep a compiled kernel in {path.parent}: {exc}", RuntimeWarning,
                      stacklevel=3)

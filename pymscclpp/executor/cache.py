"""Compile cache of generated kernels: in this process, and on disk for the next one.

A kernel's source file is named by a hash of everything it depends on (plan hash, rank, dtype kind, op,
size class, variant, call check, and the source of pymscclpp's device code); GPU kernels are ``cuda.jit(cache=True)``,
so numba keeps their compiled code in ``runtime.kernel_cache``'s folder and a second process loads it instead
of compiling.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from ..runtime import kernel_cache
from .codegen import KernelSpec

_modules: dict[str, ModuleType] = {}


def cache_dir() -> Path:
    """Where generated kernels live: ``$PYMSCCLPP_CACHE_DIR/executor`` (default ``~/.cache/pymscclpp``)."""
    return kernel_cache.root() / "executor"


def kernel_key(spec: KernelSpec) -> str:
    """The cache key of a kernel."""
    fields = (spec.xplan.key, spec.rank, spec.kind, spec.op, spec.size_class, spec.sim_threads, spec.checked,
              kernel_cache.device_code_digest())
    return hashlib.sha256(repr(fields).encode()).hexdigest()[:32]


def _write_once(path: Path, text: str) -> None:
    """Create ``path`` with ``text`` unless it exists (an existing file keeps its timestamp, which numba's
    on-disk index checks); concurrent writers leave one complete file."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".py")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def load_module(spec: KernelSpec) -> tuple[ModuleType, float]:
    """The generated module of ``spec`` (written and imported on first use); seconds it took."""
    key = kernel_key(spec)
    module = _modules.get(key)
    if module is not None:
        return module, 0.0
    start = time.perf_counter()
    path = cache_dir() / f"k_{key}.py"
    _write_once(path, spec.source())
    name = f"pymscclpp_executor_k_{key}"
    loader = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(loader)
    sys.modules[name] = module
    loader.loader.exec_module(module)
    _modules[key] = module
    return module, time.perf_counter() - start

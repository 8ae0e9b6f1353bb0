"""Kept cubins are named by the kernel's source, argument types and GPU, inside the device-code digest's folder,
and only for pymscclpp's own kernels."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _paths(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "NUMBA_CACHE_DIR")}
    env["PYMSCCLPP_CACHE_DIR"] = str(tmp_path)
    script = Path(__file__).parent / "ptx" / "cubin_paths.py"
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(line.split(" ", 1) for line in done.stdout.splitlines())


def test_cubins_are_named_by_kernel_types_and_gpu_and_kept_only_for_pymscclpp_kernels(tmp_path):
    from pymscclpp.runtime.kernel_cache import device_code_digest
    paths = _paths(tmp_path)
    assert paths["reduce_ll"] == paths["reduce_ll_again"]
    assert paths["reduce_ll"].startswith(str(tmp_path / "cubin" / device_code_digest()))
    assert Path(paths["reduce_ll"]).name.startswith("reduce_ll-")
    distinct = {paths[k] for k in ("reduce_ll", "reduce_ll_other_types", "reduce_ll_other_gpu", "reduce_simple")}
    assert len(distinct) == 4
    assert paths["user"] == "None"  # its device functions could change without the digest seeing them


def test_the_digest_covers_every_file_with_device_functions():
    """numba's cache does not see a device function change in another module: each such file must be in the key."""
    import pymscclpp
    root = Path(pymscclpp.__file__).parent
    covered = set()
    for rel in pymscclpp._DEVICE_SOURCES:
        path = root / rel
        assert path.exists(), f"{rel} (a device source the package names) does not exist"
        covered |= set(path.glob("*.py")) if path.is_dir() else {path}
    devices = {p for p in root.rglob("*.py") if "@cuda.jit(device=True" in p.read_text()}
    assert devices <= covered, sorted(str(p.relative_to(root)) for p in devices - covered)


def test_a_kept_cubin_is_loaded_once_per_context_however_many_launches_use_it(tmp_path, monkeypatch):
    """Every communicator's launches share a kernel's module: loading one per launch grew GPU memory per
    communicator made (bench/close_cycles.py on the GPU)."""
    from pymscclpp.algos.exchange_kernels import peer_exchange_simple
    from pymscclpp.runtime import kernel_cache, numba_compat
    monkeypatch.setattr(kernel_cache, "_functions", {})
    cubin = tmp_path / "peer_exchange_simple-0.cubin"
    cubin.write_bytes(b"entry\ncubin bytes")
    loads = []
    monkeypatch.setattr(numba_compat, "load_binary", lambda data, entry: loads.append((data, entry)) or 1000 + len(loads))
    monkeypatch.setattr(numba_compat, "context_id", lambda: context[0])
    monkeypatch.setattr(kernel_cache, "_cubin_path", lambda kernel, argtypes, cc: cubin)
    context = [7]
    first = [kernel_cache.function_for(peer_exchange_simple, ("types",)) for _ in range(3)]
    assert loads == [(b"cubin bytes", "entry")] and {f[0] for f in first} == {1001}
    context[0] = 8  # another context (a new device context): its own module
    assert kernel_cache.function_for(peer_exchange_simple, ("types",))[0] == 1002

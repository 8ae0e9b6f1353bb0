"""Run the compile-only scripts (kernels to sm_90 PTX, no GPU) and read their output. The first request starts
all of them at once, each in its own process (on a 2-core machine the later ones are done by the time their
tests come), and waits for the one it asked for."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SCRIPTS = {"compile_all.py": HERE / "compile_all.py", "compile_port.py": HERE / "compile_port.py",
           "compile_kernels.py": HERE.parent / "executor" / "compile_kernels.py"}
_running: dict[str, tuple] = {}  # script -> (process, its stdout file, its stderr file)
_done: dict[str, tuple[int, str, str]] = {}


def _start_all() -> None:
    if _running:
        return
    work = tempfile.mkdtemp(prefix="pymscclpp-ptx-")
    atexit.register(shutil.rmtree, work, True)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYMSCCLPP_CACHE_DIR"] = work  # the executor's generated sources
    for name, path in SCRIPTS.items():
        out, err = open(os.path.join(work, name + ".out"), "w+"), open(os.path.join(work, name + ".err"), "w+")
        _running[name] = (subprocess.Popen([sys.executable, str(path)], env=env, stdout=out, stderr=err), out, err)
    atexit.register(_stop_all)  # runs before the folder's removal: a session that never asked for one stops it


def _stop_all() -> None:
    for proc, _, _ in _running.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def script_output(script: str) -> str:
    """What compile-only ``script`` printed (a name in ``SCRIPTS``); skips without NVVM."""
    _start_all()
    if script not in _done:
        proc, out, err = _running[script]
        try:
            proc.wait(timeout=900)
        finally:
            if proc.poll() is None:
                proc.kill()
        out.seek(0)
        err.seek(0)
        _done[script] = (proc.returncode, out.read(), err.read())
        out.close()
        err.close()
    code, out_text, err_text = _done[script]
    if code != 0 and "libnvvm" in err_text.lower() + out_text.lower():
        pytest.skip("NVVM is not installed (pip install nvidia-nvvm)")
    assert code == 0, err_text[-3000:]
    return out_text


def ptx_counts(script: str) -> dict[tuple[str, str], int]:
    """{(kernel, instruction pattern): count} printed by ``tests/ptx/<script>``."""
    counts = {}
    for line in script_output(script).splitlines():
        kernel, pattern, count = line.split(" ")
        counts[kernel, pattern] = int(count)
    return counts

"""Run a compile-only script (kernels to sm_90 PTX, no GPU) and read its ``kernel pattern count`` lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def ptx_counts(script: str) -> dict[tuple[str, str], int]:
    """{(kernel, instruction pattern): count} printed by ``tests/ptx/<script>``; skips without NVVM."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    path = Path(__file__).parent / script
    proc = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and "libnvvm" in proc.stderr.lower() + proc.stdout.lower():
        pytest.skip("NVVM is not installed (pip install nvidia-nvvm)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = {}
    for line in proc.stdout.splitlines():
        kernel, pattern, count = line.split(" ")
        counts[kernel, pattern] = int(count)
    return counts

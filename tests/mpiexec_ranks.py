"""Scripts on simulator ranks under the venv's mpiexec (``pip install mpich``), for the tests that need real MPI
processes; such a test is skipped where there is no mpiexec."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = Path(sys.executable).parent / "mpiexec"


def mpiexec_stdout(ranks: int, argv: list[str], timeout: int, **env: str) -> str:
    """What ``python ARGV`` printed on ``ranks`` simulator ranks (the project first on PYTHONPATH, ``env`` added to
    the environment); the run must exit 0."""
    if not MPIEXEC.exists():
        pytest.skip(f"no mpiexec next to {sys.executable} (pip install mpich)")
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    full = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYMSCCLPP_BACKEND": "sim", **env}
    proc = subprocess.run([str(MPIEXEC), "-n", str(ranks), sys.executable, *argv], env=full, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"mpiexec exited {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout

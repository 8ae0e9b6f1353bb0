"""tests/gpu/run_graphs.py under mpiexec on the simulator: the replay harness (fresh input before every call,
every output checked) and two communicators at once, on CPU torch tensors (CUDA graphs only exist on GPUs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = Path(sys.executable).parent / "mpiexec"


@pytest.mark.mpi
def test_every_collective_stays_exact_call_after_call_with_fresh_input_and_two_communicators_at_once():
    if not MPIEXEC.exists():
        pytest.skip(f"no mpiexec next to {sys.executable} (pip install mpich)")
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYMSCCLPP_BACKEND": "sim",
           "PYMSCCLPP_TIMEOUT_S": "60"}
    proc = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, str(ROOT / "tests" / "gpu" / "run_graphs.py"),
                           "--replays", "2"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"mpiexec exited {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert "graph replays x2: 33 cases, 0 failed" in proc.stdout, proc.stdout[-4000:]

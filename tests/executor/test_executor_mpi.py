"""tests/gpu/run_executor.py --quick under mpiexec on the simulator: the executor across real MPI ranks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "gpu" / "run_executor.py"
MPIEXEC = Path(sys.executable).parent / "mpiexec"


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_every_program_matches_the_interpreter_across_mpi_ranks(ranks, tmp_path):
    if not MPIEXEC.exists():
        pytest.skip(f"no mpiexec next to {sys.executable} (pip install mpich)")
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYMSCCLPP_BACKEND": "sim",
           "PYMSCCLPP_CACHE_DIR": str(tmp_path), "PYMSCCLPP_TIMEOUT_S": "30"}
    proc = subprocess.run([str(MPIEXEC), "-n", str(ranks), sys.executable, str(SCRIPT), "--quick"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"mpiexec exited {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert f"{ranks} ranks): " in proc.stdout and " 0 failed" in proc.stdout, proc.stdout[-4000:]

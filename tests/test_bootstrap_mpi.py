"""Runs tests/mpi/bootstrap_mpi.py under mpiexec: MpiBootstrap and TcpBootstrap in real MPI ranks."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "mpi" / "bootstrap_mpi.py"
MPIEXEC = Path(sys.executable).parent / "mpiexec"


@pytest.mark.mpi
def test_mpi_and_tcp_bootstraps_work_across_three_mpi_ranks():
    if not MPIEXEC.exists():
        pytest.skip(f"no mpiexec next to {sys.executable} (pip install mpich)")
    paths = [str(SCRIPT.parents[2]), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    proc = subprocess.run([str(MPIEXEC), "-n", "3", sys.executable, str(SCRIPT)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"mpiexec exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.count("bootstrap MPI checks passed") == 3, proc.stdout

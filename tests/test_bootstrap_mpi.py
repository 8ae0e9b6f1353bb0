"""Runs tests/mpi/bootstrap_mpi.py under mpiexec: MpiBootstrap and TcpBootstrap in real MPI ranks."""

import pytest

from mpiexec_ranks import ROOT, mpiexec_stdout

SCRIPT = ROOT / "tests" / "mpi" / "bootstrap_mpi.py"


@pytest.mark.mpi
def test_mpi_and_tcp_bootstraps_work_across_three_mpi_ranks():
    out = mpiexec_stdout(3, [str(SCRIPT)], timeout=120)
    assert out.count("bootstrap MPI checks passed") == 3, out

"""tests/gpu/run_executor.py --quick under mpiexec on the simulator: the executor across real MPI ranks."""

from __future__ import annotations

import pytest

from mpiexec_ranks import ROOT, mpiexec_stdout

SCRIPT = ROOT / "tests" / "gpu" / "run_executor.py"


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_every_program_matches_the_interpreter_across_mpi_ranks(ranks, tmp_path):
    out = mpiexec_stdout(ranks, [str(SCRIPT), "--quick"], timeout=300, PYMSCCLPP_CACHE_DIR=str(tmp_path),
                         PYMSCCLPP_TIMEOUT_S="30")
    assert f"{ranks} ranks): " in out and " 0 failed" in out, out[-4000:]

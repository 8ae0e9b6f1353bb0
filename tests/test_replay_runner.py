"""tests/gpu/run_graphs.py under mpiexec on the simulator: the replay harness (fresh input before every call,
every output checked) and two communicators at once, on CPU torch tensors (CUDA graphs only exist on GPUs)."""

from __future__ import annotations

import pytest

from mpiexec_ranks import ROOT, mpiexec_stdout

pytest.importorskip("torch")


@pytest.mark.mpi
def test_every_collective_stays_exact_call_after_call_with_fresh_input_and_two_communicators_at_once():
    out = mpiexec_stdout(2, [str(ROOT / "tests" / "gpu" / "run_graphs.py"), "--replays", "2"], timeout=600,
                         PYMSCCLPP_TIMEOUT_S="60")
    assert "graph replays x2: 33 cases, 0 failed" in out, out[-4000:]

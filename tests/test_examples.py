"""The examples and the tutorial's kernel run end to end under mpiexec on the simulator."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = Path(sys.executable).parent / "mpiexec"


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_oneshot_allreduce_example_sums_across_ranks(ranks):
    if not MPIEXEC.exists():
        pytest.skip(f"no mpiexec next to {sys.executable} (pip install mpich)")
    env = {**os.environ, "PYMSCCLPP_BACKEND": "sim", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([str(MPIEXEC), "-n", str(ranks), sys.executable, str(ROOT / "examples" / "oneshot_allreduce.py")],
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("one-shot all-reduce of 1000 floats OK") == ranks, proc.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_collectives_demo_checks_every_collective(ranks):
    if not MPIEXEC.exists():
        pytest.skip(f"no mpiexec next to {sys.executable} (pip install mpich)")
    env = {**os.environ, "PYMSCCLPP_BACKEND": "sim", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([str(MPIEXEC), "-n", str(ranks), sys.executable, str(ROOT / "examples" / "collectives_demo.py")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("all_reduce, all_gather, reduce_scatter(max), all_to_all, broadcast OK") == ranks


def readme_block(marker: str) -> str:
    """The README's Python block that follows the line naming ``marker``."""
    text = (ROOT / "README.md").read_text()
    after = text[text.index(marker):]
    start = after.index("```python\n") + len("```python\n")
    return after[start:after.index("```", start)]


@pytest.mark.mpi
def test_readme_numba_all_reduce_runs_as_written_on_the_simulator(tmp_path):
    if not MPIEXEC.exists():
        pytest.skip(f"no mpiexec next to {sys.executable} (pip install mpich)")
    script = tmp_path / "readme_allreduce.py"
    script.write_text(readme_block("readme_allreduce.py") + "print('README all_reduce OK')\n")
    env = {**os.environ, "PYMSCCLPP_BACKEND": "sim", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("README all_reduce OK") == 2, proc.stdout

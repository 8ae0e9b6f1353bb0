"""The examples and the tutorial's kernel run end to end under mpiexec on the simulator."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = Path(sys.executable).parent / "mpiexec"


def run_script(script: Path, ranks: int, timeout: int) -> str:
    """``script``'s output on ``ranks`` simulator ranks under the venv's mpiexec (skipped without one); it must
    exit 0."""
    if not MPIEXEC.exists():
        pytest.skip(f"no mpiexec next to {sys.executable} (pip install mpich)")
    env = {**os.environ, "PYMSCCLPP_BACKEND": "sim", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([str(MPIEXEC), "-n", str(ranks), sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_oneshot_allreduce_example_sums_across_ranks(ranks):
    out = run_script(ROOT / "examples" / "oneshot_allreduce.py", ranks, timeout=180)
    assert out.count("one-shot all-reduce of 1000 floats OK") == ranks, out


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_collectives_demo_checks_every_collective(ranks):
    out = run_script(ROOT / "examples" / "collectives_demo.py", ranks, timeout=300)
    assert out.count("all_reduce, all_gather, reduce_scatter(max), all_to_all, broadcast OK") == ranks, out


def readme_block(marker: str) -> str:
    """The README's Python block that follows the line naming ``marker``."""
    text = (ROOT / "README.md").read_text()
    after = text[text.index(marker):]
    start = after.index("```python\n") + len("```python\n")
    return after[start:after.index("```", start)]


@pytest.mark.mpi
def test_readme_numba_all_reduce_runs_as_written_on_the_simulator(tmp_path):
    script = tmp_path / "readme_allreduce.py"
    script.write_text(readme_block("readme_allreduce.py") + "print('README all_reduce OK')\n")
    out = run_script(script, 2, timeout=180)
    assert out.count("README all_reduce OK") == 2, out

"""The examples and the tutorial's kernel run end to end under mpiexec on the simulator."""

import pytest

from mpiexec_ranks import ROOT, mpiexec_stdout


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_oneshot_allreduce_example_sums_across_ranks(ranks):
    out = mpiexec_stdout(ranks, [str(ROOT / "examples" / "oneshot_allreduce.py")], timeout=180)
    assert out.count("one-shot all-reduce of 1000 floats OK") == ranks, out


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_collectives_demo_checks_every_collective(ranks):
    out = mpiexec_stdout(ranks, [str(ROOT / "examples" / "collectives_demo.py")], timeout=300)
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
    out = mpiexec_stdout(2, [str(script)], timeout=180)
    assert out.count("README all_reduce OK") == 2, out

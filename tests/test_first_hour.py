"""What a new user meets first: import order, the simulator notice, clean stdout, streams, alloc, stale segments."""

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pytest

from mpiexec_ranks import mpiexec_stdout

ROOT = Path(__file__).resolve().parents[1]
NOTICE = "running kernels on the numba CUDA simulator"


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with no backend chosen (as a new user's script starts)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("PYMSCCLPP_BACKEND", "NUMBA_ENABLE_CUDASIM")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env={**clean, **env}, capture_output=True,
                          text=True, timeout=120)


def test_numba_cuda_imported_before_pymscclpp_runs_kernels_on_the_simulator():
    proc = run_python("""
        from numba import cuda
        import numpy as np
        import pymscclpp

        @cuda.jit
        def bump(a):
            a[cuda.threadIdx.x] += 1

        a = cuda.to_device(np.zeros(4))
        bump[1, 4](a)
        print(pymscclpp.BACKEND, a.copy_to_host().sum())
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["sim", "4.0"]


def test_numba_cuda_imported_first_with_gpu_forced_and_no_gpu_fails_clearly():
    proc = run_python("from numba import cuda; import pymscclpp", PYMSCCLPP_BACKEND="gpu")
    assert proc.returncode != 0 and "no CUDA device is visible" in proc.stderr


def test_simulator_notice_waits_for_a_communicator_and_prints_once_on_rank_0():
    quiet = run_python("import pymscclpp")
    assert quiet.returncode == 0 and NOTICE not in quiet.stderr, quiet.stderr
    proc = run_python("""
        import pymscclpp.runtime.backend as backend
        backend.announce(1)
        backend.announce(0)
        backend.announce(0)
    """)
    assert proc.returncode == 0 and proc.stderr.count(NOTICE) == 1, proc.stderr


def test_bench_help_shows_its_usage_without_the_simulator_notice():
    proc = run_python("import runpy, sys; sys.argv = ['x', '--help']; runpy.run_module('pymscclpp.bench', "
                      "run_name='__main__')")
    assert "usage: python -m pymscclpp.bench" in proc.stdout and "python python" not in proc.stdout
    assert NOTICE not in proc.stderr


FAKE_COLORAMA = '''
__version__ = "0.4.6"
class Fore: BLUE = YELLOW = WHITE = GREEN = RED = BLACK = MAGENTA = CYAN = "\\x1b[3Xm"
class Style: BRIGHT = "\\x1b[1m"; RESET_ALL = "\\x1b[0m"
def init(*a, **k): print("\\x1b[0m", end="")
reinit = deinit = init
'''


@pytest.mark.parametrize("order", ["pymscclpp first", "numba first"])
def test_numba_messages_carry_no_ansi_codes_even_with_colorama(tmp_path, order):
    (tmp_path / "colorama.py").write_text(FAKE_COLORAMA)  # colours every text and writes a reset, like colorama
    first = {"pymscclpp first": "import pymscclpp; import numba.cuda",
             "numba first": "import numba.cuda; import pymscclpp"}[order]
    proc = run_python(f"""
        {first}
        from numba.core import errors
        print(errors.NumbaWarning("careful").args[0])
    """, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "careful\n"


def test_a_numba_stream_is_accepted_under_the_simulator():
    from numba import cuda
    from pymscclpp import Communicator
    from pymscclpp.runtime.bootstrap.local import LocalBootstrap
    from pymscclpp.runtime.buffers import stream_handle
    assert stream_handle(cuda.stream()) == 0
    comm = Communicator(LocalBootstrap.create(1)[0])
    try:
        x, out = cuda.to_device(np.arange(8, dtype=np.float32)), cuda.device_array(8, np.float32)
        comm.all_reduce(x, out, stream=cuda.stream())
        assert (out.copy_to_host() == np.arange(8)).all()
    finally:
        comm.close()


def test_alloc_named_by_the_registration_error_exists_at_top_level():
    import pymscclpp
    from numba import cuda
    from pymscclpp.errors import RegistrationError
    from pymscclpp.runtime.memory import RegisteredMemory, alloc
    assert pymscclpp.alloc is alloc and "alloc" in pymscclpp.__all__
    with pytest.raises(RegistrationError, match=r"pymscclpp\.alloc\(\)"):
        RegisteredMemory(cuda.to_device(np.zeros(4)), job_token=b"t" * 16, rank=0)
    RegisteredMemory(pymscclpp.alloc(64), job_token=b"t" * 16, rank=0)


def test_segments_of_dead_processes_are_removed_at_start_up():
    from pymscclpp.runtime import shm
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = Path("/dev/shm") / f"pymscclpp-{int(dead.stdout)}-0123456789ab"
    stale.write_bytes(b"\0" * 64)
    live = shm.create(64)  # ours: this process is alive, so it stays
    try:
        proc = run_python("import pymscclpp")
        assert proc.returncode == 0, proc.stderr
        assert not stale.exists()
        assert (Path("/dev/shm") / live.name).exists()
    finally:
        live.close()
        stale.unlink(missing_ok=True)


def test_pyproject_license_is_an_spdx_string_with_a_setuptools_that_reads_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT"
    assert any(r.startswith("setuptools>=77") for r in project["build-system"]["requires"])


@pytest.mark.mpi
@pytest.mark.parametrize("op,args,expect", [
    ("all_reduce", ["-e", "1K", "--iters", "1", "--reps", "1", "--warmup", "0"], "bfloat16    sum"),
    ("memory_channel", ["--bytes", "256", "--threads", "16", "--reps", "1"], '"ll8_oneway_us"'),
])
def test_bench_runs_on_the_simulator_with_numba_arrays(op, args, expect):
    out = mpiexec_stdout(2, ["-m", "pymscclpp.bench", "--op", op, *args], timeout=180)
    assert expect in out, out
    if op == "all_reduce":
        row = next(line for line in out.splitlines() if expect in line)
        assert row.split("|")[1].split()[-1] == "0", row  # #wrong

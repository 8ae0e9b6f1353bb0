"""Backend choice: automatic simulator fallback, overrides, and clear errors for bad settings."""

import os
import subprocess
import sys

import pytest


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYMSCCLPP_BACKEND", "NUMBA_ENABLE_CUDASIM")}
    return subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True,
                          timeout=60)


def test_no_gpu_falls_back_to_simulator():
    proc = run_python("import pymscclpp, pymscclpp.runtime.backend as b; print(pymscclpp.BACKEND)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "sim"


def test_unknown_backend_value_is_rejected_with_the_choices():
    proc = run_python("import pymscclpp", PYMSCCLPP_BACKEND="tpu")
    assert proc.returncode != 0 and "expected one of auto, gpu, sim" in proc.stderr


def test_forcing_gpu_without_a_gpu_fails_clearly():
    proc = run_python("import pymscclpp", PYMSCCLPP_BACKEND="gpu")
    assert proc.returncode != 0 and "no CUDA device is visible" in proc.stderr


def test_simulator_env_set_before_numba_import_is_honoured():
    proc = run_python("from numba import cuda; import pymscclpp; print(pymscclpp.BACKEND)", NUMBA_ENABLE_CUDASIM="1")
    assert proc.returncode == 0 and proc.stdout.strip() == "sim", proc.stderr


@pytest.mark.parametrize("value", ["abc", "-1"])
def test_bad_timeout_env_is_rejected(value, monkeypatch):
    from pymscclpp.errors import InvalidUsageError
    from pymscclpp import config
    monkeypatch.setenv("PYMSCCLPP_TIMEOUT_S", value)
    with pytest.raises(InvalidUsageError, match="PYMSCCLPP_TIMEOUT_S"):
        config.get("PYMSCCLPP_TIMEOUT_S")


def test_driver_functions_share_one_library_but_keep_their_own_argument_types(monkeypatch):
    import ctypes
    from pymscclpp.runtime import backend
    libc = ctypes.CDLL(None)  # stands in for libcuda: the lookup rules are the same
    monkeypatch.setattr(backend, "libcuda", lambda: libc)
    first = backend.driver_function(("no_such_call", "memcpy"), [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t],
                                    ctypes.c_uint64)
    second = backend.driver_function(("memcpy",), [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t], ctypes.c_void_p)
    assert first is not second and first.argtypes[0] is ctypes.c_uint64 and second.argtypes[0] is ctypes.c_void_p
    src, dst = ctypes.create_string_buffer(b"abc", 4), ctypes.create_string_buffer(4)
    first(ctypes.addressof(dst), ctypes.addressof(src), 4)
    assert dst.value == b"abc"
    assert backend.driver_function(("no_such_call",), []) is None


def test_no_driver_means_no_driver_function(monkeypatch):
    from pymscclpp.runtime import backend
    monkeypatch.setattr(backend, "libcuda", lambda: None)
    assert backend.driver_function(("cuInit",), []) is None


def test_simulator_notice_starts_on_its_own_line_after_buffered_stdout():
    clean = {k: v for k, v in os.environ.items()
             if k not in ("PYMSCCLPP_BACKEND", "NUMBA_ENABLE_CUDASIM", "PYTHONUNBUFFERED")}  # stdout buffered
    code = "print('the line before'); from pymscclpp.runtime import backend; backend.announce(0)"
    proc = subprocess.run([sys.executable, "-c", code], env=clean, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=60)  # one pipe, as mpiexec merges a rank's stdout and stderr
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.index("the line before\n") < proc.stdout.index("no CUDA GPU visible"), proc.stdout

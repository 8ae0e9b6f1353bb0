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

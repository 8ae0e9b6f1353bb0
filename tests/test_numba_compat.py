"""The launcher leans on numba-cuda internals: this fails loudly on a numba-cuda it was not checked against."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pymscclpp.errors import BackendError
from pymscclpp.runtime import numba_compat as nc


def test_installed_numba_cuda_is_a_tested_version():
    low, high = (".".join(map(str, t)) for t in nc.TESTED)
    assert nc.is_tested(), (f"numba-cuda {nc.version()} is outside [{low}, {high}), the versions whose internals "
                            "pymscclpp/runtime/numba_compat.py matches: check its functions against this numba-cuda "
                            "(run tests/gpu/ on a GPU), then widen TESTED and the pin in pyproject.toml")


def test_tested_range_is_half_open():
    assert nc.is_tested(nc.TESTED[0]) and not nc.is_tested(nc.TESTED[1])
    assert not nc.is_tested((0, 30, 3))


def test_pyproject_pins_numba_cuda_to_the_tested_range():
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    low, high = (".".join(map(str, t)) for t in nc.TESTED)
    assert re.search(rf'"numba-cuda>={re.escape(low)},<{re.escape(high)}"', text), "pin numba-cuda to TESTED"


def test_a_launch_whose_arguments_do_not_match_the_kernel_parameters_is_refused():
    from numba import cuda

    from pymscclpp.runtime.launch import Launch

    @cuda.jit
    def kernel(a, n):
        pass

    with pytest.raises(BackendError, match=r"arguments \['n', 'a'\] do not match its parameters \['a', 'n'\]"):
        Launch(kernel, 1, 1, {"n": 0, "a": cuda.to_device([1])})


def test_launch_mode_is_checked():
    from pymscclpp.runtime.launch import launch_mode
    assert launch_mode() == ("numba" if os.environ.get("PYMSCCLPP_BACKEND", "sim") == "sim" else "packed")

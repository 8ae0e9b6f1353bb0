"""The Collective API across rank processes on the simulator: results, algorithms, bad input."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import collective_cases as cases
from rankpool import RankPool

_pools: dict[int, RankPool] = {}


def pool(size: int) -> RankPool:
    if size not in _pools:
        _pools[size] = RankPool(size, env={"PYMSCCLPP_TIMEOUT_S": "30"})
    return _pools[size]


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    for p in _pools.values():
        p.close()
    _pools.clear()


DTYPES = ["float32", "float16", "int32", "uint8"]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(size=st.sampled_from([2, 3, 4]), count=st.integers(1, 700), dtype=st.sampled_from(DTYPES),
       op=st.sampled_from(["sum", "min", "max"]), seed=st.integers(0, 1000), inplace=st.booleans(),
       algo=st.sampled_from(["packet", "simple"]))
def test_all_reduce_matches_numpy_for_any_size_dtype_op_and_algorithm(size, count, dtype, op, seed, inplace, algo):
    pool(size).run(cases.all_reduce, count=count, dtype=dtype, op=op, seed=seed, inplace=inplace, algo=algo)


@pytest.mark.parametrize("algo", ["packet", "simple"])
def test_repeated_all_reduces_reuse_scratch_safely(algo):
    pool(2).run(cases.all_reduce, count=333, dtype="float32", op="sum", seed=7, inplace=False, algo=algo, repeat=5)


def test_simple_all_reduce_runs_in_several_rounds():
    # 40000 floats = 160 KB > the simulator's 64 KB rounds
    pool(2).run(cases.all_reduce, count=40000, dtype="float32", op="sum", seed=3, inplace=True, algo="simple")


@pytest.mark.parametrize("case", ["size", "dtype", "host", "op"])
def test_bad_all_reduce_arguments_raise_before_writing(case):
    pool(2).run(cases.bad_input, case=case)

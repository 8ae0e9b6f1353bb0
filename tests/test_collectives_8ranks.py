"""Every collective at 8 ranks on the simulator (tiny sizes): the scale of one 8-GPU host, in CI."""

from __future__ import annotations

import pytest

import collective_cases as cases
from rankpool import RankPool

CASES = {
    "all_reduce": (cases.all_reduce, dict(count=19, dtype="float32", op="sum", inplace=False, algo="packet")),
    "all_gather": (cases.all_gather, dict(count=5, dtype="int32", inplace=True, algo="simple")),
    "reduce_scatter": (cases.reduce_scatter, dict(count=3, dtype="float16", op="max", inplace=False, algo="packet")),
    "all_to_all": (cases.all_to_all, dict(count=2, dtype="uint8", inplace=False, algo="simple")),
    "broadcast": (cases.broadcast, dict(count=9, dtype="float32", root=5, inplace=True, algo="packet")),
}


@pytest.fixture(scope="module")
def pool8():
    p = RankPool(8, env={"PYMSCCLPP_TIMEOUT_S": "60"}, start_timeout=300, preload=("pymscclpp", "collective_cases"))
    yield p
    p.close()


@pytest.mark.parametrize("collective", list(CASES))
def test_collective_is_exact_on_eight_ranks(pool8, collective):
    fn, params = CASES[collective]
    pool8.run(fn, timeout=300, seed=8, **params)

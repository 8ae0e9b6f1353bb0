"""Every collective at 8 ranks on the simulator (tiny sizes): the scale of one 8-GPU host, in CI."""

from __future__ import annotations

import pytest

import collective_cases as cases
import traffic_cases
from rankpool import RankPool
from pymscclpp.runtime import traffic

CASES = {
    "all_reduce": (cases.all_reduce, dict(count=19, dtype="float32", op="sum", inplace=False, algo="packet")),
    "all_gather": (cases.all_gather, dict(count=5, dtype="int32", inplace=True, algo="simple")),
    "reduce_scatter": (cases.reduce_scatter, dict(count=3, dtype="float16", op="max", inplace=False, algo="packet")),
    "all_to_all": (cases.all_to_all, dict(count=2, dtype="uint8", inplace=False, algo="simple")),
    "broadcast": (cases.broadcast, dict(count=9, dtype="float32", root=5, inplace=True, algo="packet")),
    # the two-step algorithms the selection picks at 8 ranks for large messages
    "all_reduce_rsag": (cases.all_reduce, dict(count=8 * 37 + 3, dtype="float16", op="sum", inplace=True,
                                               algo="rsag", repeat=2)),
    "all_gather_read": (cases.all_gather, dict(count=13, dtype="float32", inplace=False, algo="read")),
    "broadcast_scatter_gather": (cases.broadcast, dict(count=8 * 21 + 5, dtype="int32", root=6, inplace=False,
                                                       algo="scatter_gather", repeat=2)),
}


@pytest.fixture(scope="module")
def pool8():
    p = RankPool(8, env={"PYMSCCLPP_TIMEOUT_S": "60", "PYMSCCLPP_TRAFFIC": "1"}, start_timeout=300,
                 preload=("pymscclpp", "collective_cases", "traffic_cases"))
    yield p
    p.close()


@pytest.mark.parametrize("collective", list(CASES))
def test_collective_is_exact_on_eight_ranks(pool8, collective):
    fn, params = CASES[collective]
    pool8.run(fn, timeout=300, seed=8, **params)


@pytest.mark.parametrize("collective,algo", [("all_reduce", "rsag"), ("all_gather", "read"),
                                             ("broadcast", "scatter_gather"), ("reduce_scatter", "simple")])
def test_channel_traffic_on_eight_ranks_equals_the_stated_traffic(pool8, collective, algo):
    outs = pool8.run(traffic_cases.measured_call, timeout=300, collective=collective, algo=algo, count=8 * 53, root=3)
    assert traffic.per_rank([o["counts"] for o in outs]) == [tuple(o["stated"]) for o in outs]

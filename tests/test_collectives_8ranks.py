"""Every collective at 8 ranks on the simulator (tiny sizes): the scale of one 8-GPU host, in CI; and hypothesis over
every collective, algorithm, dtype and op at 5 and 8 ranks (2 to 4: ``test_collectives``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import collective_cases as cases
import traffic_cases
import verb_cases as vc
from rankpool import PoolCache, RankPool
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


ALGOS = {"all_reduce": ["packet", "simple", "rsag", "rsag_packet"], "all_gather": ["packet", "simple", "read"],
         "reduce_scatter": ["packet", "simple", "read"], "all_to_all": ["packet", "simple"],
         "broadcast": ["packet", "simple", "scatter_gather", "scatter_gather_packet"]}
five = PoolCache(env={"PYMSCCLPP_TIMEOUT_S": "60"})


@pytest.fixture(scope="module", autouse=True)
def _close_five():
    yield
    five.close()


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(size=st.sampled_from([5, 8]), call=st.sampled_from([(c, a) for c, algos in ALGOS.items() for a in algos]),
       count=st.integers(1, 150), dtype=st.sampled_from(["float32", "float16", "int32", "uint8"]),
       op=st.sampled_from(["sum", "min", "max"]), root=st.integers(0, 7), seed=st.integers(0, 1000),
       inplace=st.booleans())
def test_every_collective_and_algorithm_is_exact_on_five_and_eight_ranks(pool8, size, call, count, dtype, op, root,
                                                                          seed, inplace):
    collective, algo = call
    params = dict(count=count, dtype=dtype, seed=seed, inplace=inplace, algo=algo)
    if collective in ("all_reduce", "reduce_scatter"):
        params["op"] = op
    if collective == "broadcast":
        params["root"] = root % size
    (pool8 if size == 8 else five(size)).run(getattr(cases, collective), timeout=300, **params)


@pytest.mark.parametrize("collective", list(CASES))
def test_collective_is_exact_on_eight_ranks(pool8, collective):
    fn, params = CASES[collective]
    pool8.run(fn, timeout=300, seed=8, **params)


@pytest.mark.parametrize("collective,algo", [("all_reduce", "rsag"), ("all_gather", "read"),
                                             ("broadcast", "scatter_gather"), ("reduce_scatter", "simple")])
def test_channel_traffic_on_eight_ranks_equals_the_stated_traffic(pool8, collective, algo):
    outs = pool8.run(traffic_cases.measured_call, timeout=300, collective=collective, algo=algo, count=8 * 53, root=3)
    assert traffic.per_rank([o["counts"] for o in outs]) == [tuple(o["stated"]) for o in outs]


@pytest.mark.parametrize("algo,kernel", [("push", "broadcast_push_zero_copy_simple"),
                                         ("scatter_gather", "broadcast_zero_copy_simple")])
def test_the_zero_copy_broadcasts_are_exact_and_move_what_they_state_on_eight_ranks(pool8, algo, kernel):
    pool8.run(cases.exchanges_zero_copy, timeout=300, collective="broadcast", count=8 * 21 + 5, dtype="int32",
              inplace=False, algo=algo, captured=False, repeat=3)
    outs = pool8.run(traffic_cases.measured_call, timeout=300, collective="broadcast", algo=algo, count=8 * 53,
                     root=3, zero_copy=True)
    assert [o["kernel"] for o in outs] == [kernel] * 8
    assert traffic.per_rank([o["counts"] for o in outs]) == [tuple(o["stated"]) for o in outs]


def test_small_zero_copy_all_to_alls_with_counts_read_peers_by_default_on_eight_ranks(pool8):
    counts = [[(3 * i + j) % 5 for j in range(8)] for i in range(8)]  # uneven, some pairs empty
    got = pool8.run(vc.all_to_allv_zero_copy, timeout=300, counts=counts, dtype="float16", registered=[0] * 8,
                    captured=False, algo=None, served_by="read")
    assert got == ["zero-copy (registered)"] * 8, got


def test_mid_size_all_reduces_run_the_two_shot_packets_staged_and_rsag_zero_copy_on_eight_ranks(pool8):
    outs = pool8.run(cases.default_rows_at_eight_ranks, timeout=300, collective="all_reduce", count=(128 << 10) // 4)
    assert all(o == {"staged": ("rsag_packet", "all_reduce_packet_two_shot_ll"),
                     "registered": ("rsag", "all_reduce_zero_copy_simple")} for o in outs), outs


def test_mid_size_broadcasts_run_the_two_step_packets_staged_and_the_zero_copy_scatter_gather_on_eight_ranks(pool8):
    outs = pool8.run(cases.default_rows_at_eight_ranks, timeout=300, collective="broadcast", count=(256 << 10) // 4)
    assert all(o == {"staged": ("scatter_gather_packet", "broadcast_packet_two_step_ll"),
                     "registered": ("scatter_gather", "broadcast_zero_copy_simple")} for o in outs), outs

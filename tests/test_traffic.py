"""Every built-in algorithm moves exactly the bytes it states through its channels (counted under the simulator),
staged and zero-copy, and what the default selection moves at 8 ranks stays near the lower bound of each
collective."""

from __future__ import annotations

import pytest

import traffic_cases as tc
from rankpool import PoolCache
from pymscclpp.algos import collection
from pymscclpp.algos.exchange import EXCHANGED
from pymscclpp.algos.zero_copy import ZeroCopy
from pymscclpp.runtime import traffic

pool = PoolCache(env={"PYMSCCLPP_TIMEOUT_S": "30", "PYMSCCLPP_TRAFFIC": "1"})


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pool.close()


BUILTIN = [(c, a) for c in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
           for a in ("packet", "simple")] + [(c, n) for c, n in collection.TWO_STEP_NAMES.items()] + \
    [("all_reduce", "rsag_packet"), ("broadcast", "scatter_gather_packet"), ("reduce", "packet"),
     ("all_to_allv", "packet"), ("all_to_allv", "simple")] + \
    [(c, "exchange") for c in EXCHANGED]


def _measured_and_stated(nranks: int, collective: str, algo: str, count: int, root: int):
    outs = pool(nranks).run(tc.measured_call, collective=collective, algo=algo, count=count, root=root)
    return traffic.per_rank([o["counts"] for o in outs]), [tuple(o["stated"]) for o in outs]


@pytest.mark.parametrize("collective,algo", BUILTIN)
@pytest.mark.parametrize("nranks,count", [(2, 1001), (4, 4 * 337)])  # 337 floats: shards of odd length
def test_measured_channel_traffic_equals_the_stated_traffic(nranks, count, collective, algo):
    measured, stated = _measured_and_stated(nranks, collective, algo, count, root=nranks - 1)
    assert measured == stated


ZERO_COPY = [("all_reduce", "rsag"), ("all_gather", "simple"), ("all_gather", "read"), ("reduce_scatter", "read"),
             ("all_to_all", "simple"), ("broadcast", "simple"), ("broadcast", "scatter_gather"),
             ("all_gather", "push"), ("all_to_all", "push"), ("broadcast", "push"), ("reduce", "rsag")]
_ZERO_COPY_CASES = [(c, a, *shape) for c, a in ZERO_COPY for shape in [(2, 1001, 0), (4, 4 * 337, 2)]] + \
    [("all_reduce", "push", 2, 1001, 0), ("reduce_scatter", "push", 2, 1001, 0)]  # two ranks only


@pytest.mark.parametrize("collective,algo,nranks,count,root", _ZERO_COPY_CASES)
def test_zero_copy_calls_move_what_their_zero_copy_traffic_states(nranks, count, root, collective, algo):
    outs = pool(nranks).run(tc.measured_call, collective=collective, algo=algo, count=count, root=root,
                            zero_copy=True)
    assert all(o["kernel"].endswith("zero_copy_simple") for o in outs), [o["kernel"] for o in outs]
    assert traffic.per_rank([o["counts"] for o in outs]) == [tuple(o["stated"]) for o in outs]


@pytest.mark.parametrize("collective,algo", list(collection.TWO_STEP_NAMES.items()))
def test_two_step_traffic_over_several_rounds_equals_the_stated_traffic(collective, algo):
    # 70001 floats (280 KB): several of the simulator's 64 KB-slot rounds
    measured, stated = _measured_and_stated(2, collective, algo, 70001, root=0)
    assert measured == stated


@pytest.mark.parametrize("nranks", [3, 4])
def test_a_two_step_reduce_moves_what_it_states_and_its_root_receives_far_less_than_every_buffer(nranks):
    # 1200 floats: every rank reduces its shard, the root (rank 1) reads the others' reduced shards
    measured, stated = _measured_and_stated(nranks, "reduce", "rsag", 1200, root=1)
    assert measured == stated
    assert measured[1][1] == 2 * (nranks - 1) * 4 * 1200 // nranks < (nranks - 1) * 4 * 1200


def _bound(collective: str, size: int, n: int) -> float:
    """The least bytes a rank must send (broadcast: the root) in a call of ``size`` bytes on ``n`` ranks."""
    return {"all_reduce": 2 * size * (n - 1) / n, "broadcast": size}.get(collective, size * (n - 1) / n)


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
                                        "reduce"])
def test_the_default_choice_at_eight_ranks_moves_near_the_lower_bound_from_1_mb(collective):
    factories = collection.builtin_factories()
    rows = collection.default_table(8)[collective]
    for size in (1 << 20, 16 << 20, 256 << 20, 3 << 30):
        name = next(n for limit, n in rows if size <= limit)
        algo = factories[collective, name]()
        statements = [algo.traffic] + ([algo.zero_copy_traffic] if isinstance(algo, ZeroCopy) else [])
        for stated in statements:  # staged, and zero-copy (registered buffers, captured calls)
            sent = max(stated(size, 8, rank, root=0)[0] for rank in range(8))
            limit = 2 * size if collective == "broadcast" else 1.15 * _bound(collective, size, 8)
            assert _bound(collective, size, 8) <= sent <= limit, (collective, size, name, stated, sent)


@pytest.mark.parametrize("nranks,count", [(3, 3 * 337), (4, 4 * 337)])
def test_the_all_to_all_with_counts_read_from_peers_buffers_moves_what_it_states(nranks, count):
    outs = pool(nranks).run(tc.measured_call, collective="all_to_allv", algo="read", count=count, zero_copy=True)
    assert all(o["kernel"] == "exchange_counts_read_simple" for o in outs), [o["kernel"] for o in outs]
    assert traffic.per_rank([o["counts"] for o in outs]) == [tuple(o["stated"]) for o in outs]

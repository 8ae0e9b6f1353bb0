"""Collectives from the Communicator on ranks of two (faked) hosts: served by the cross-host plans."""

from __future__ import annotations

import pytest

import collective_cases as cases
from rankpool import PoolCache

pools = PoolCache(env={"PYMSCCLPP_TIMEOUT_S": "60"})


def pool(hosts: tuple):
    """Ranks on the faked hosts ``hosts`` (a host id per rank)."""
    return pools(len(hosts), [{"PYMSCCLPP_HOST_ID": h} for h in hosts])


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pools.close()


@pytest.mark.parametrize("hosts", [("A", "B"), ("A", "A", "B")])
@pytest.mark.parametrize("count", [40, 3000])  # the LL plan (<= 64 KB), the Simple one
def test_all_reduce_across_hosts_matches_numpy(hosts, count):
    pool(hosts).run(cases.all_reduce, count=count, dtype="float32", op="sum", seed=count, inplace=False)


@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter", "all_to_all"])
def test_the_other_collectives_across_hosts_match_numpy(collective):
    kwargs = {"op": "sum"} if collective == "reduce_scatter" else {}
    pool(("A", "B")).run(getattr(cases, collective), count=33, dtype="float32", seed=3, inplace=False, **kwargs)


def test_broadcast_across_hosts_from_every_root():
    for root in (0, 1):
        pool(("A", "B")).run(cases.broadcast, count=57, dtype="float32", seed=root, root=root, inplace=True)

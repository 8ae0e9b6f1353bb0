"""The Algorithm interface: built-ins, plans and user kernels behind one selection, on simulator ranks."""

from __future__ import annotations

import pytest

import algorithm_cases as cases
from rankpool import PoolCache

pool = PoolCache(env={"PYMSCCLPP_TIMEOUT_S": "30"})


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pool.close()


def test_a_registered_kernel_algorithm_serves_all_gather_correctly():
    assert pool(2).run(cases.user_kernel_serves_all_gather, count=37, calls=3) == [True, True]


@pytest.mark.parametrize("prefer", [True, False])
def test_a_registered_dsl_plan_serves_all_reduce_through_the_executor(prefer):
    results = pool(2).run(cases.plan_serves_all_reduce, count=50, prefer=prefer)
    assert all(name == "allpairs_plan" and kernels >= 1 for name, kernels in results)


def test_a_rank_limit_refuses_larger_communicators_and_says_why():
    from types import SimpleNamespace

    from pymscclpp.algos import Constraint
    from pymscclpp.algos.exchange import Exchange
    from pymscclpp.algos.exchange_kernels import MAX_RANKS

    def comm(n):
        return SimpleNamespace(size=n, host_ids=[0] * n, local_peers=list(range(n)))

    assert Constraint(max_ranks=4).why_not(comm(4)) is None
    assert Constraint(max_ranks=4).why_not(comm(5)) == "serves at most 4 ranks, the communicator has 5"
    assert Exchange("gather").constraint.why_not(comm(MAX_RANKS)) is None
    assert "serves at most" in Exchange("gather").constraint.why_not(comm(MAX_RANKS + 1))


def test_an_algorithm_that_cannot_serve_a_call_is_skipped_and_refused_when_forced_without_its_set_up():
    for text in pool(2).run(cases.unservable_algorithms_are_skipped_or_refused):
        assert "'for7' cannot serve this call: needs 7 ranks, the communicator has 2" in text

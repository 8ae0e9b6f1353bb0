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


def test_an_algorithm_that_cannot_serve_a_call_is_skipped_and_refused_when_forced():
    for text in pool(2).run(cases.unservable_algorithms_are_skipped_or_refused):
        assert "'for7' cannot serve this call: needs 7 ranks, the communicator has 2" in text

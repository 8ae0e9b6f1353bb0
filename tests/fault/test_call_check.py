"""The cross-rank call check: ranks whose one-shot calls differ (size, dtype, op, root, all_gather send size,
collective) all raise CallMismatchError naming both sides within seconds, writing no output byte, as do ranks
whose plan calls or user-kernel calls differ, and ranks on two hosts (checked on the host); matched calls pass with
the check on and off."""

from __future__ import annotations

import pytest

import collective_cases
from fault import callcheck_cases as cases
from rankpool import PoolCache

pools = PoolCache(env={"PYMSCCLPP_TIMEOUT_S": "60"})
unchecked = PoolCache(env={"PYMSCCLPP_TIMEOUT_S": "60", "PYMSCCLPP_CHECK": "0"})


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pools.close()
    unchecked.close()


def _check_mismatch(mismatch: tuple, size: int, algorithm: str | None = None, untouched: bool = True,
                    where: str = "kernel", hosts: tuple | None = None) -> None:
    """Run ``mismatch`` (an entry of ``callcheck_cases.MISMATCHES``) on ``size`` ranks (on faked ``hosts``, a host
    id per rank), through ``algorithm``: ``callcheck_cases.check_mismatch`` on every rank's result."""
    calls, texts = cases.odd_one_out(mismatch, size)
    rank_env = None if hosts is None else [{"PYMSCCLPP_HOST_ID": h} for h in hosts]
    results = pools(size, rank_env).run(cases.mismatched_calls, calls=calls, algorithm=algorithm)
    for rank, out in enumerate(results):
        cases.check_mismatch(rank, out, texts, untouched, where)


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("what", list(cases.MISMATCHES))
def test_mismatched_calls_raise_on_every_rank_at_once_naming_both_sides_and_writing_nothing(what, size):
    _check_mismatch(cases.MISMATCHES[what], size)


# (mismatch, ranks, algorithm): a plan's buffers used as they are, staged (odd sizes: copies out after the
# kernel), and an in-place plan called out of place (staged under the check, not copied into the output before it)
SIZES = cases.MISMATCHES["sizes"]
PLAN_MISMATCHES = [(SIZES, 2, "plan"), (cases.ODD_SIZES, 2, "plan"), (SIZES, 2, "plan_inplace"), (SIZES, 3, "plan")]


@pytest.mark.parametrize("mismatch, size, algorithm", PLAN_MISMATCHES,
                         ids=["sizes", "odd sizes", "in place", "3 ranks"])
def test_mismatched_plan_calls_raise_on_every_rank_before_any_op_or_copy_out(mismatch, size, algorithm):
    _check_mismatch(mismatch, size, algorithm)


def test_mismatched_user_kernel_calls_raise_on_every_rank_from_the_check_kernel_ahead_of_it():
    _check_mismatch(cases.MISMATCHES["all_gather send sizes"], 2, "gated", where="ahead")
    _check_mismatch(SIZES, 2, "ungated", untouched=False, where="ahead")  # the kernel ran all the same


@pytest.mark.parametrize("what", ["sizes", "roots"])
def test_mismatched_calls_of_ranks_on_two_hosts_raise_on_every_rank_from_the_host_check_before_any_launch(what):
    _check_mismatch(cases.MISMATCHES[what], 2, where="host", hosts=("A", "B"))


@pytest.mark.parametrize("cache", [pools, unchecked], ids=["check on", "check off"])
def test_matched_calls_pass_with_the_check_on_and_off(cache):
    pool = cache(2)
    pool.run(collective_cases.all_reduce, count=300, dtype="float32", op="sum", seed=1, inplace=False, repeat=3)
    pool.run(collective_cases.all_reduce, count=300, dtype="int32", op="max", seed=2, inplace=True, algo="simple")
    pool.run(collective_cases.all_gather, count=40, dtype="float32", seed=3, inplace=False)
    pool.run(collective_cases.broadcast, count=40, dtype="float32", root=1, seed=4, inplace=False)


@pytest.mark.parametrize("cache", [pools, unchecked], ids=["check on", "check off"])
def test_matched_plan_one_shot_and_user_kernel_calls_interleaved_pass_with_the_check_on_and_off(cache):
    words = cache(2).run(cases.mixed_calls)
    assert words == ([[8], [8]] if cache is pools else [[0], [0]])  # every checked call took the next number


def test_each_call_advances_the_sequence_and_the_switch_turns_the_exchange_off():
    on = pools(2).run(cases.sequence_words, calls=3)[0]
    assert len(on) == 1 and on[0] > 0, on  # every block's word holds the last call's number
    assert unchecked(2).run(cases.sequence_words, calls=3) == [[0], [0]]

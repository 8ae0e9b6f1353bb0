"""The cross-rank call check: ranks whose one-shot calls differ (size, dtype, op, root, all_gather send size,
collective) all raise CallMismatchError naming both sides within seconds, writing no output byte, as do ranks
whose plan calls or user-kernel calls differ; matched calls pass with the check on and off."""

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


def _ar(count, dtype="float32", op="sum"):
    return {"collective": "all_reduce", "count": count, "dtype": dtype, "op": op}


def _ag(count):
    return {"collective": "all_gather", "count": count, "dtype": "float32"}


def _bc(root):
    return {"collective": "broadcast", "count": 64, "dtype": "float32", "root": root}


# (what the majority calls, its text, what the odd rank out calls, its text)
MISMATCHES = {
    "sizes": (_ar(1024), "all_reduce of 1024 float32", _ar(2048), "all_reduce of 2048 float32"),
    "dtypes": (_ar(256), "all_reduce of 256 float32", _ar(256, "int32"), "all_reduce of 256 int32"),
    "ops": (_ar(64), "all_reduce of 64 float32", _ar(64, op="max"), "all_reduce of 64 float32 with op max"),
    "roots": (_bc(0), "broadcast of 64 float32 from root 0", _bc(1), "broadcast of 64 float32 from root 1"),
    "all_gather send sizes": (_ag(64), "all_gather of 64 float32", _ag(128), "all_gather of 128 float32"),
    "collectives": (_ar(96), "all_reduce of 96 float32", _ag(96), "all_gather of 96 float32"),
}


def _check_mismatch(what: str, size: int, algorithm: str | None = None) -> list[dict]:
    """Run mismatch ``what`` on ``size`` ranks (through ``algorithm``): every rank raised naming both sides, fast,
    and the next call raised the same; each rank's result."""
    common, common_text, odd, odd_text = MISMATCHES[what]
    calls = [common] * (size - 1) + [odd]
    texts = [common_text] * (size - 1) + [odd_text]
    results = pools(size).run(cases.mismatched_calls, calls=calls, algorithm=algorithm)
    for rank, out in enumerate(results):
        assert out["raised"] is not None, f"rank {rank} returned normally"
        kind, text = out["raised"]
        assert kind == "CallMismatchError", (rank, kind, text)
        assert text.startswith(f"rank {rank} called {texts[rank]}, rank "), (rank, text)
        peer = int(text.split(", rank ")[1].split(" ")[0])
        assert texts[peer] != texts[rank] and f", rank {peer} called {texts[peer]}: " in text, (rank, text)
        assert out["seconds"] < 5.0, (rank, out["seconds"])  # the budget is 60 s
        assert out["after"] == text, "the error is sticky"
    return results


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("what", list(MISMATCHES))
def test_mismatched_calls_raise_on_every_rank_at_once_naming_both_sides_and_writing_nothing(what, size):
    for rank, out in enumerate(_check_mismatch(what, size)):
        assert out["untouched"], f"rank {rank} wrote its output"
        assert out["raised"][1].endswith("found on the device before any output was written)")


# (mismatch, ranks, algorithm): a plan's buffers direct, staged (odd sizes: copies out after the kernel), and an
# in-place plan called out of place (staged under the check, not copied into the output before it)
PLAN_MISMATCHES = [("sizes", 2, "plan"), ("odd sizes", 2, "plan"), ("sizes", 2, "plan_inplace"), ("sizes", 3, "plan")]
MISMATCHES["odd sizes"] = (_ar(1001), "all_reduce of 1001 float32", _ar(2002), "all_reduce of 2002 float32")
MISMATCHES["user sizes"] = (_ag(64), "all_gather of 64 float32", _ag(128), "all_gather of 128 float32")


@pytest.mark.parametrize("what, size, algorithm", PLAN_MISMATCHES)
def test_mismatched_plan_calls_raise_on_every_rank_before_any_op_or_copy_out(what, size, algorithm):
    for rank, out in enumerate(_check_mismatch(what, size, algorithm)):
        assert out["untouched"], f"rank {rank} wrote its output"
        assert out["raised"][1].endswith("found on the device before any output was written)")


def test_mismatched_user_kernel_calls_raise_on_every_rank_from_the_check_kernel_ahead_of_it():
    for rank, out in enumerate(_check_mismatch("user sizes", 2, "gated")):
        assert out["untouched"], f"rank {rank}: the gated kernel wrote its output"
        assert "found by the check kernel ahead of the algorithm's own kernel" in out["raised"][1]
    for rank, out in enumerate(_check_mismatch("sizes", 2, "ungated")):
        assert not out["untouched"], f"rank {rank}: the kernel that does not gate did not run"


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

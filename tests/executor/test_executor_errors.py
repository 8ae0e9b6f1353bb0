"""A plan the executor cannot run fails before anything is set up or launched, with a message saying why."""

from __future__ import annotations

import json

import pytest

from executor import cases
from pymscclpp.executor import ExecutionPlan
from pymscclpp.plan import PlanError
from pymscclpp.language.programs import PROGRAMS
from rankpool import RankPool

_pools: dict[str, RankPool] = {}


def pool(name: str = "default", **env) -> RankPool:
    if name not in _pools:
        _pools[name] = RankPool(2, env={"PYMSCCLPP_TIMEOUT_S": "30", **env})
    return _pools[name]


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    for p in _pools.values():
        p.close()
    _pools.clear()


def error_of(plan: dict, count: int = 64, dtype: str = "float32", pool_name: str = "default", env=None,
             **executor_args) -> str:
    messages = pool(pool_name, **(env or {})).run(cases.expect_error, plan_json=json.dumps(plan), count=count,
                                                  dtype=dtype, **executor_args)
    assert messages[0].split(":")[0] == messages[1].split(":")[0]
    return messages[0]


def test_plan_for_more_ranks_than_the_communicator_has():
    text = error_of(PROGRAMS["allgather"](4), count=16)
    assert text.startswith("PlanError") and "is for 4 ranks, but the communicator has 2" in text


def test_dtype_a_reducing_plan_cannot_reduce():
    text = error_of(PROGRAMS["allreduce_allpairs"](2), dtype="float64")
    assert text.startswith("PlanError") and "cannot reduce float64" in text and "float32" in text


def test_non_reducing_plan_moves_any_dtype():
    # float64 is fine for allgather: no reduction; the error here is only the receive size
    text = error_of(PROGRAMS["allgather"](2), dtype="float64")
    assert "cannot reduce" not in text and "receive buffer" in text


def test_more_scratch_than_allowed():
    text = error_of(PROGRAMS["allreduce_allpairs"](2), count=4096, max_scratch_bytes=1024)
    assert text.startswith("PlanError") and "bytes of scratch" in text and "more than the 1024 bytes" in text


def test_more_channels_than_semaphore_tokens_left():
    text = error_of(PROGRAMS["allreduce_allpairs"](2, instances=8), count=1024, pool_name="few-semaphores",
                    env={"PYMSCCLPP_MAX_SEMAPHORES": "4"})
    assert text.startswith("PlanError") and "needs 8 semaphore tokens" in text and "PYMSCCLPP_MAX_SEMAPHORES" in text


def test_buffers_that_do_not_make_the_collective_parts():
    text = error_of(PROGRAMS["allgather"](2), count=16)  # allgather's receive buffer must be 2x the send buffer
    assert text.startswith("PlanError") and "do not make 1 input and 2 output parts" in text


def test_too_many_threads_per_block_is_refused_at_load():
    plan = PROGRAMS["allgather"](2)
    plan["num_threads_per_block"] = 2048
    with pytest.raises(PlanError, match="2048 exceeds the 1024 threads"):
        ExecutionPlan.from_json(json.dumps(plan))


def test_malformed_plan_names_the_field():
    plan = PROGRAMS["allgather"](2)
    plan["gpus"][1]["threadblocks"][0]["ops"][0]["name"] = "frobnicate"
    with pytest.raises(PlanError, match=r"gpus\[1\]\.threadblocks\[0\]\.ops\[0\]\.name: unknown op"):
        ExecutionPlan.from_json(json.dumps(plan))

"""pymscclpp.testing: rank pools, their failures, the NumPy reference against the library, the strategies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kit_cases
from pymscclpp.testing import RankFailure, ranks, reference, run_ranks, strategies as S

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_run_ranks_returns_every_ranks_result_in_rank_order():
    assert run_ranks(3, kit_cases.identity, "x") == [(0, 3, "x"), (1, 3, "x"), (2, 3, "x")]


def test_simulator_ranks_fork_from_a_preloaded_server_unless_their_environment_changes_what_is_read_at_import(
        monkeypatch):
    import os
    with ranks(2) as pool:  # forks of the server that imported pymscclpp: their parent is not this process
        assert [ppid != os.getpid() for ppid, _ in pool.run(kit_cases.start_facts)] == [True, True]
    monkeypatch.setenv("PYMSCCLPP_KIT_PROBE", "set after the server started")
    with ranks(2) as pool:  # forked ranks see this process's environment as it is when the pool starts
        assert [v for _, v in pool.run(kit_cases.start_facts, "PYMSCCLPP_KIT_PROBE")] == \
            ["set after the server started"] * 2
    with ranks(2, env={"NUMBA_PYMSCCLPP_PROBE": "1"}) as pool:  # numba reads NUMBA_* at import: fresh interpreters
        assert pool.run(kit_cases.start_facts) == [(os.getpid(), "1")] * 2
    with ranks(2, preload=()) as pool:  # asked for fresh interpreters
        assert [ppid for ppid, _ in pool.run(kit_cases.start_facts)] == [os.getpid()] * 2


def test_a_pool_runs_lambdas_and_local_functions_with_their_closures(ranks):
    k = 7

    def times_k(comm, x):
        return comm.rank * k * x
    assert ranks(2).run(times_k, 2) == [0, 14]
    assert ranks(2).run(lambda comm: comm.size + k) == [9, 9]


def test_a_rank_that_raises_is_named_with_its_error_and_traceback_and_the_pool_recovers():
    with ranks(2) as pool:
        with pytest.raises(RankFailure) as info:
            pool.run(kit_cases.raise_on_rank_one)
        text = str(info.value)
        assert "rank 1 raised ValueError: bad value on rank 1" in text
        assert "Traceback" in text and "raise_on_rank_one" in text
        assert info.value.ranks == [1] and info.value.errors == {1: "ValueError"}
        assert pool.run(kit_cases.identity, 1) == [(0, 2, 1), (1, 2, 1)]


def test_a_rank_whose_process_ends_is_reported_at_once_not_at_the_timeout_and_the_pool_recovers():
    import time
    with ranks(3) as pool:
        start = time.monotonic()
        with pytest.raises(RankFailure) as info:
            pool.run(kit_cases.exit_on_rank_one, 3, timeout=120)
        assert time.monotonic() - start < 30  # well before the call's 120 s
        assert "ranks [1] ended without answering (exit codes [3])" in str(info.value)
        assert info.value.ranks == [1]
        assert pool.run(kit_cases.identity, 2) == [(0, 3, 2), (1, 3, 2), (2, 3, 2)]


def test_a_call_past_its_timeout_names_the_hung_ranks_with_their_stacks_and_the_pool_recovers():
    with ranks(2) as pool:
        before = pool.start().pids
        with pytest.raises(RankFailure) as info:
            pool.run(kit_cases.sleep_on_rank_zero, 60, timeout=2)
        text = str(info.value)
        assert "ranks [0] still running after 2 s" in text
        assert "in sleep_on_rank_zero" in text and "time.sleep(seconds)" in text
        assert isinstance(info.value, AssertionError) and info.value.ranks == [0]
        assert pool.run(kit_cases.identity, 2) == [(0, 2, 2), (1, 2, 2)]
        assert set(pool.pids).isdisjoint(before)


calls_and_inputs = S.collective_calls(max_ranks=3, max_count=40).flatmap(
    lambda call: st.tuples(st.just(call), S.rank_inputs(call)))


@SETTINGS
@given(calls_and_inputs)
def test_the_library_computes_what_the_reference_says_bit_for_bit(ranks, case):
    call, inputs = case
    results = ranks(call.nranks).run(kit_cases.collective, call, inputs)
    for (got, _), want in zip(results, reference.expected(call, inputs)):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@SETTINGS
@given(S.collective_calls(min_ranks=3, max_ranks=4, max_count=24, collectives=["all_reduce", "reduce_scatter"],
                          dtypes=["float16", "bfloat16", "float32"]), st.integers(0, 2**16))
def test_the_reference_rounds_arbitrary_floats_as_the_library_does(ranks, call, seed):
    rng = np.random.default_rng(seed)
    inputs = [(rng.standard_normal(call.in_count) * 100).astype(S.np_dtype(call.dtype)) for _ in range(call.nranks)]
    results = ranks(call.nranks).run(kit_cases.collective, call, inputs)
    for (got, _), want in zip(results, reference.expected(call, inputs)):
        assert got.tobytes() == want.tobytes()


def test_last_algorithm_and_the_debug_log_name_the_algorithm_that_served_the_call(ranks):
    call = S.CollectiveCall("all_reduce", 2, 8, "float32", "sum")
    inputs = [np.arange(8, dtype=np.float32)] * 2
    (_, name), _ = ranks(2).run(kit_cases.collective, call, inputs)
    lines = ranks(2).run(kit_cases.logged_algorithm, call, inputs)[0]
    assert name and any(f"all_reduce of 32 bytes (float32, sum) served by" in ln and name in ln for ln in lines)


def test_a_kernel_algorithm_sees_typed_views_of_the_call_buffers():
    x = np.arange(6, dtype=np.float32)
    for rank, (send, dtype, size, out) in enumerate(run_ranks(2, kit_cases.viewed_call, x)):
        assert np.array_equal(send, x) and (dtype, size) == ("float32", 12)
        assert np.array_equal(out, np.tile(x, 2))


@SETTINGS
@given(calls_and_inputs)
def test_rank_inputs_have_the_shapes_and_dtype_the_call_needs(case):
    call, inputs = case
    assert len(inputs) == call.nranks
    assert all(x.shape == (call.in_count,) and x.dtype == S.np_dtype(call.dtype) for x in inputs)
    assert (call.op is not None) == (call.collective in ("all_reduce", "reduce_scatter"))
    assert 0 <= call.root < call.nranks


def test_the_reference_of_each_collective_on_two_ranks():
    a, b = np.array([1, 2, 3, 4], np.int32), np.array([10, 20, 30, 40], np.int32)
    assert [x.tolist() for x in reference.all_reduce([a, b], "max")] == [[10, 20, 30, 40]] * 2
    assert [x.tolist() for x in reference.all_gather([a, b])] == [[1, 2, 3, 4, 10, 20, 30, 40]] * 2
    assert [x.tolist() for x in reference.reduce_scatter([a, b])] == [[11, 22], [33, 44]]
    assert [x.tolist() for x in reference.all_to_all([a, b])] == [[1, 2, 10, 20], [3, 4, 30, 40]]
    assert [x.tolist() for x in reference.broadcast([a, b], root=1)] == [[10, 20, 30, 40]] * 2


def test_the_reference_rounds_half_precision_after_each_combine():
    ones = [np.array([2048], np.float16), np.array([1], np.float16), np.array([1], np.float16)]
    assert reference.all_reduce(ones)[0].tolist() == [2048.0]  # 2048 + 1 rounds to even each time, not 2050


def test_local_bootstrap_is_no_longer_exported():
    import pymscclpp.runtime.bootstrap as bootstrap
    assert not hasattr(bootstrap, "LocalBootstrap") and "LocalBootstrap" not in bootstrap.__all__

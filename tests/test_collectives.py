"""The Collective API across rank processes on the simulator: results, algorithms, bad input."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import collective_cases as cases
from rankpool import PoolCache

pool = PoolCache(env={"PYMSCCLPP_TIMEOUT_S": "30"})


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pool.close()


DTYPES = ["float32", "float16", "int32", "uint8"]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(size=st.sampled_from([2, 3, 4]), count=st.integers(1, 700), dtype=st.sampled_from(DTYPES),
       op=st.sampled_from(["sum", "min", "max"]), seed=st.integers(0, 1000), inplace=st.booleans(),
       algo=st.sampled_from(["packet", "packet_one_block", "simple", "rsag", "rsag_packet"]))
def test_all_reduce_matches_numpy_for_any_size_dtype_op_and_algorithm(size, count, dtype, op, seed, inplace, algo):
    pool(size).run(cases.all_reduce, count=count, dtype=dtype, op=op, seed=seed, inplace=inplace, algo=algo)


@pytest.mark.parametrize("algo", ["packet", "simple", "rsag", "rsag_packet"])
def test_repeated_all_reduces_reuse_scratch_safely(algo):
    pool(2).run(cases.all_reduce, count=333, dtype="float32", op="sum", seed=7, inplace=False, algo=algo, repeat=5)


@pytest.mark.parametrize("algo", ["simple", "rsag"])
def test_simple_all_reduce_runs_in_several_rounds(algo):
    # 40000 floats = 160 KB > the simulator's 64 KB rounds (the two-shot's rounds at 3 ranks: 128 KB)
    pool(3 if algo == "rsag" else 2).run(cases.all_reduce, count=40000, dtype="float32", op="sum", seed=3,
                                         inplace=True, algo=algo)


@pytest.mark.parametrize("algo,registered,size", [("packet", False, 4), ("simple", False, 4), ("rsag", False, 4),
                                                   ("rsag_packet", False, 4), ("rsag", True, 4), ("push", True, 2)])
def test_all_reduce_algorithms_give_bit_identical_results_on_every_rank(algo, registered, size):
    # bfloat16 sums of non-integers round at every step: equal results mean one reduction order everywhere
    outs = pool(size).run(cases.all_reduce_result, count=1001, dtype="bfloat16", seed=11, algo=algo,
                          registered=registered)
    assert all(o.tobytes() == outs[0].tobytes() for o in outs), algo
    assert outs[0].tobytes() == pool(size).run(cases.all_reduce_result, count=1001, dtype="bfloat16", seed=11,
                                               algo="packet")[0].tobytes()


@pytest.mark.parametrize("case", ["size", "dtype", "host", "op"])
def test_bad_all_reduce_arguments_raise_before_writing(case):
    pool(2).run(cases.bad_input, case=case)


_SIM = dict(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
_COMMON = dict(size=st.sampled_from([2, 3, 4]), count=st.integers(1, 300), dtype=st.sampled_from(DTYPES),
               seed=st.integers(0, 1000), inplace=st.booleans())
_ALGOS = {name: st.sampled_from(["packet", "simple", *extra]) for name, extra in
          {"all_gather": ["read"], "reduce_scatter": ["read"], "all_to_all": [],
           "broadcast": ["scatter_gather", "scatter_gather_packet"]}.items()}


@settings(**_SIM)
@given(algo=_ALGOS["all_gather"], **_COMMON)
def test_all_gather_collects_every_rank_at_its_slot(size, count, dtype, seed, inplace, algo):
    pool(size).run(cases.all_gather, count=count, dtype=dtype, seed=seed, inplace=inplace, algo=algo)


@settings(**_SIM)
@given(op=st.sampled_from(["sum", "min", "max"]), algo=_ALGOS["reduce_scatter"], **_COMMON)
def test_reduce_scatter_matches_a_rank_order_numpy_reduction(size, count, dtype, op, seed, inplace, algo):
    pool(size).run(cases.reduce_scatter, count=count, dtype=dtype, op=op, seed=seed, inplace=inplace, algo=algo)


@settings(**_SIM)
@given(algo=_ALGOS["all_to_all"], **_COMMON)
def test_all_to_all_transposes_slots_across_ranks(size, count, dtype, seed, inplace, algo):
    pool(size).run(cases.all_to_all, count=count, dtype=dtype, seed=seed, inplace=inplace, algo=algo)


@settings(**_SIM)
@given(root=st.integers(0, 3), algo=_ALGOS["broadcast"], **_COMMON)
def test_broadcast_copies_the_roots_buffer_everywhere(size, count, dtype, root, seed, inplace, algo):
    pool(size).run(cases.broadcast, count=count, dtype=dtype, root=root % size, seed=seed, inplace=inplace,
                   algo=algo)


_COLLECTIVES = {"all_gather": cases.all_gather, "reduce_scatter": cases.reduce_scatter,
                "all_to_all": cases.all_to_all, "broadcast": cases.broadcast}


def _params(collective: str, **kw) -> dict:
    extra = {"reduce_scatter": {"op": "sum"}, "broadcast": {"root": 1}}.get(collective, {})
    return {**kw, **extra}


_TWO_STEP = [("all_gather", "read"), ("broadcast", "scatter_gather"), ("broadcast", "scatter_gather_packet")]


@pytest.mark.parametrize("collective,algo", [(c, a) for c in _COLLECTIVES for a in ("packet", "simple")] + _TWO_STEP)
def test_repeated_collectives_reuse_scratch_safely(collective, algo):
    # four ranks: broadcast's root changes every call
    pool(4).run(_COLLECTIVES[collective], **_params(collective, count=77, dtype="uint8", seed=5, inplace=False,
                                                    algo=algo, repeat=5))


@pytest.mark.parametrize("collective,algo", [(c, a) for c in _COLLECTIVES for a in ("packet", "simple")] + _TWO_STEP)
def test_in_place_collectives_on_four_ranks(collective, algo):
    # rank >= 2 of an in-place reduce_scatter reads its own slot after the output has been written
    pool(4).run(_COLLECTIVES[collective], **_params(collective, count=45, dtype="float16", seed=9, inplace=True,
                                                    algo=algo, repeat=2))


@pytest.mark.parametrize("collective,algo", [(c, "simple") for c in _COLLECTIVES] + _TWO_STEP)
def test_simple_collectives_run_in_several_rounds(collective, algo):
    # 20000 floats = 80 KB per slot > the simulator's 64 KB rounds (broadcast's two steps at 3 ranks: 192 KB)
    count = 60000 if algo == "scatter_gather" else 20000
    pool(3 if algo == "scatter_gather" else 2).run(_COLLECTIVES[collective], **_params(
        collective, count=count, dtype="float32", seed=3, inplace=True, algo=algo, repeat=2))


@pytest.mark.parametrize("collective", list(_COLLECTIVES))
def test_the_selector_picks_an_algorithm_for_small_and_large_messages(collective):
    for count in (10, 70000):  # 280 KB: above the 256 KB packet limit
        pool(2).run(_COLLECTIVES[collective], **_params(collective, count=count, dtype="float32", seed=count,
                                                        inplace=False))


def test_one_rank_collectives_are_local_copies():
    for collective, fn in _COLLECTIVES.items():
        pool(1).run(fn, **_params(collective, count=33, dtype="float16", seed=2, inplace=False))


_BAD = [(c, case) for c in _COLLECTIVES for case in ["size", "dtype", "host", "strided", "overlap"]]
_BAD += [("reduce_scatter", "slots"), ("all_to_all", "slots"), ("reduce_scatter", "op"), ("broadcast", "root")]


@pytest.mark.parametrize("collective,case", _BAD)
def test_bad_collective_arguments_raise_before_writing(collective, case):
    pool(2).run(cases.bad_collective_input, collective=collective, case=case)


def test_ops_only_nccl_has_name_nccl_in_the_error_when_it_is_missing():
    pool(2).run(cases.nccl_only_op_without_nccl)


@pytest.mark.parametrize("size,count,dtype,inplace", [(2, 1003, "float32", False), (3, 517, "float16", True),
                                                      (4, 4 * 301 + 1, "int32", False)])
def test_all_reduce_on_registered_buffers_runs_zero_copy_and_is_exact(size, count, dtype, inplace):
    pool(size).run(cases.all_reduce_registered, count=count, dtype=dtype, seed=count, inplace=inplace)


@pytest.mark.parametrize("size,count,dtype,inplace", [(2, 1003, "float32", False), (3, 517, "float16", True),
                                                      (4, 301, "int32", False)])
def test_reduce_scatter_on_a_registered_send_buffer_runs_zero_copy_and_is_exact(size, count, dtype, inplace):
    pool(size).run(cases.reduce_scatter_registered, count=count, dtype=dtype, seed=count, inplace=inplace)


@pytest.mark.parametrize("size,count,dtype,inplace", [(2, 501, "float32", False), (3, 130, "float16", True),
                                                      (4, 77, "int32", False)])
def test_calls_captured_into_a_graph_map_their_buffers_and_run_zero_copy_exactly(size, count, dtype, inplace):
    pool(size).run(cases.captured_calls_zero_copy, count=count, dtype=dtype, inplace=inplace)


@pytest.mark.parametrize("size", [2, 3])
def test_selection_runs_the_zero_copy_rows_for_registered_buffers_only(size):
    pool(size).run(cases.selection_follows_the_zero_copy_rows, count=size * 600)  # above the one-block packets


def test_a_kept_call_runs_the_zero_copy_rows_only_while_captured():
    pool(2).run(cases.kept_calls_switch_to_zero_copy_when_captured, count=701)  # above the one-block packets


def _failing_run(case, timeout_s: float = 30, **params) -> list:
    """What ``case`` returns on two ranks of a pool of its own (its communicators fail for good)."""
    from rankpool import RankPool
    p = RankPool(2, env={"PYMSCCLPP_TIMEOUT_S": str(timeout_s)})
    try:
        return p.run(case, **params)
    finally:
        p.close()


def test_a_zero_copy_call_meeting_staged_ones_fails_the_call_check_on_every_rank():
    texts = _failing_run(cases.registered_on_some_ranks, count=999)
    assert "rank 0 called all_reduce of 999 float32 on registered buffers (zero-copy), rank 1 called all_reduce " \
           "of 999 float32:" in texts[0], texts
    assert "rank 0 called all_reduce of 999 float32 on registered buffers (zero-copy)" in texts[1], texts


def test_zero_copy_calls_on_buffers_of_other_registrations_fail_the_call_check_on_every_rank_writing_nothing():
    texts = _failing_run(cases.zero_copy_calls_on_buffers_of_other_registrations, collective="all_reduce", count=999)
    assert texts[0][0].startswith("rank 0 called all_reduce on buffers of registrations 0 and 1, rank 1 called "
                                  "all_reduce on buffers of registrations 1 and 0 (zero-copy): the ranks' calls do "
                                  "not match"), texts
    assert texts[1][0].startswith("rank 1 called all_reduce on buffers of registrations 1 and 0, rank 0 called "
                                  "all_reduce on buffers of registrations 0 and 1"), texts
    assert all(kept for _, kept in texts), texts


def test_a_zero_copy_broadcast_in_place_on_the_root_and_out_of_place_elsewhere_fails_on_every_rank():
    texts = _failing_run(cases.zero_copy_calls_on_buffers_of_other_registrations, collective="broadcast", count=333)
    assert "rank 0 called broadcast on buffers of registrations 0 and 1, rank 1 called broadcast on buffers of " \
           "registrations 1 and 1 (zero-copy)" in texts[0][0], texts
    assert all(kept for _, kept in texts), texts


@pytest.mark.parametrize("collective,size,algo", [("all_reduce", 2, "rsag"), ("all_reduce", 3, "rsag"),
                                                  ("broadcast", 2, "simple"), ("broadcast", 3, "scatter_gather")])
def test_captured_calls_in_place_on_some_ranks_and_out_of_place_on_others_run_zero_copy_exactly(collective, size,
                                                                                                algo):
    assert pool(size).run(cases.captured_in_place_on_rank_zero, collective=collective, count=301,
                          algo=algo) == [None] * size


def test_a_captured_all_gather_in_place_on_some_ranks_only_fails_the_call_check_on_every_rank_writing_nothing():
    texts = _failing_run(cases.captured_in_place_on_rank_zero, collective="all_gather", count=301, algo="simple")
    assert texts[0].startswith("rank 0 called all_gather in place on buffers mapped when captured, rank 1 called "
                               "all_gather on buffers mapped when captured (zero-copy): the ranks' calls do not "
                               "match"), texts
    assert "rank 1 called all_gather on buffers mapped when captured, rank 0 called all_gather in place" in texts[1]


def test_broadcast_without_a_root_says_the_root_is_required():
    texts = pool(2).run(cases.broadcast_without_root)
    assert all(t.startswith("broadcast: root is required: the rank whose buffer every rank gets, 0 to 1") for t in texts)


_ZERO_COPY_EXCHANGES = [("all_gather", 2, 301, "float32", False, "simple", False),
                        ("all_gather", 3, 130, "float16", False, "read", False),
                        ("all_gather", 2, 301, "float32", True, "simple", False),
                        ("all_gather", 3, 131, "bfloat16", True, "read", False),
                        ("all_gather", 4, 77, "int32", True, "read", True),
                        ("all_gather", 2, 55, "uint8", False, "simple", True),
                        ("all_to_all", 2, 213, "float32", False, "simple", False),
                        ("all_to_all", 4, 41, "float16", False, "simple", True),
                        ("broadcast", 2, 517, "int32", False, "simple", False),
                        ("broadcast", 2, 1001, "float16", True, "simple", True),
                        ("broadcast", 3, 1003, "float32", True, "scatter_gather", False),
                        ("broadcast", 3, 256, "float32", False, "scatter_gather", False),
                        ("broadcast", 4, 999, "bfloat16", False, "scatter_gather", False),
                        ("broadcast", 4, 333, "float16", True, "scatter_gather", True),
                        ("broadcast", 3, 250, "int16", False, "simple", True),
                        ("all_gather", 2, 301, "float32", False, "push", False),
                        ("all_gather", 3, 130, "float16", True, "push", False),
                        ("all_gather", 4, 77, "int32", False, "push", True),
                        ("all_to_all", 2, 213, "bfloat16", False, "push", False),
                        ("all_to_all", 3, 41, "float16", False, "push", True),
                        ("broadcast", 2, 517, "int32", False, "push", False),
                        ("broadcast", 3, 1003, "float32", True, "push", False),
                        ("broadcast", 4, 333, "float16", False, "push", True),
                        ("broadcast", 4, 130, "bfloat16", True, "push", True)]


@pytest.mark.parametrize("collective,size,count,dtype,inplace,algo,captured", _ZERO_COPY_EXCHANGES)
def test_gathers_and_broadcasts_on_mapped_buffers_run_zero_copy_and_are_exact(collective, size, count, dtype,
                                                                              inplace, algo, captured):
    pool(size).run(cases.exchanges_zero_copy, collective=collective, count=count, dtype=dtype, inplace=inplace,
                   algo=algo, captured=captured)


def test_two_rank_all_reduces_to_2_kb_run_on_one_block_between_calls_on_wider_grids():
    # float32: 512 elements are 2 KB (``collection.ONE_BLOCK_MAX``); 400 bytes are 4 packets a thread of 32
    counts = (100, 1000, 512, 5000, 1, 513, 100)
    names = ["packet_one_block", "packet", "packet_one_block", "packet_wide", "packet_one_block", "packet",
             "packet_one_block"]
    assert pool(2).run(cases.small_all_reduces_on_one_block_and_on_many, counts=counts) == [names, names]


@pytest.mark.parametrize("size,count,dtype", [(2, 1003, "float32"), (3, 2 * 517, "bfloat16")])
def test_small_zero_copy_calls_run_on_half_the_grid_between_calls_on_all_of_it(size, count, dtype):
    pool(size).run(cases.zero_copy_calls_on_two_grids, count=count, dtype=dtype)


def test_zero_copy_copies_run_on_half_the_grid_below_their_own_size_not_the_reductions():
    pool(3).run(cases.zero_copy_copies_on_two_grids, count=517, dtype="float16")


def test_zero_copy_calls_of_two_sizes_on_two_grids_fail_the_call_check_on_every_rank():
    texts = _failing_run(cases.zero_copy_calls_of_two_sizes_on_two_grids, count=998)
    assert "rank 0 called all_reduce of 499 float32 on registered buffers (zero-copy), rank 1 called all_reduce " \
           "of 998 float32 on registered buffers (zero-copy)" in texts[0], texts
    assert "rank 0 called all_reduce of 499 float32" in texts[1] and "998 float32" in texts[1], texts


def test_a_zero_copy_broadcast_meeting_staged_ones_fails_the_call_check_on_every_rank():
    texts = _failing_run(cases.broadcast_registered_on_the_root_only, count=999)
    assert "rank 1 called broadcast of 999 float32 from root 1 on registered buffers (zero-copy), rank 0 called " \
           "broadcast of 999 float32 from root 1:" in texts[1], texts
    assert all("CallMismatch" in t or "do not match" in t for t in texts), texts


@pytest.mark.parametrize("collective,count,dtype,op,captured", [("all_reduce", 1003, "float32", "sum", False),
                                                                ("all_reduce", 130, "bfloat16", "max", True),
                                                                ("all_reduce", 77, "int32", "prod", False),
                                                                ("reduce_scatter", 517, "float16", "sum", False),
                                                                ("reduce_scatter", 301, "int32", "min", True),
                                                                ("all_reduce", 501, "float32", "avg", False)])
def test_two_rank_reductions_by_writes_into_the_peers_output_are_exact(collective, count, dtype, op, captured):
    pool(2).run(cases.reductions_pushed, collective=collective, count=count, dtype=dtype, op=op, captured=captured)


def test_an_in_place_call_takes_the_next_zero_copy_row_when_push_cannot_serve_it():
    pool(2).run(cases.in_place_calls_take_the_next_zero_copy_row, count=1001)


def test_a_pushing_rank_meeting_a_pulling_one_fails_the_call_check_on_every_rank():
    texts = _failing_run(cases.pushing_and_pulling_ranks, count=301)
    assert "rank 0 called all_gather of 301 float32 on registered buffers (zero-copy, writing into peers' " \
           "outputs), rank 1 called all_gather of 301 float32 on registered buffers (zero-copy):" in texts[0], texts


def test_zero_copy_kernels_with_the_check_off_meet_by_a_barrier_and_are_exact():
    from rankpool import RankPool
    unchecked = RankPool(2, env={"PYMSCCLPP_TIMEOUT_S": "30", "PYMSCCLPP_CHECK": "0"})
    try:
        unchecked.run(cases.all_reduce_registered, count=1003, dtype="float32", seed=5, inplace=False)
        unchecked.run(cases.exchanges_zero_copy, collective="all_to_all", count=213, dtype="float32", inplace=False,
                      algo="push", captured=False)
        unchecked.run(cases.reductions_pushed, collective="reduce_scatter", count=301, dtype="int32", op="sum",
                      captured=False)
    finally:
        unchecked.close()


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(collective=st.sampled_from(["all_gather", "all_to_all"]), size=st.sampled_from([2, 3, 4]),
       count=st.integers(1, 300), dtype=st.sampled_from(DTYPES + ["bfloat16"]), inplace=st.booleans(),
       captured=st.booleans())
def test_pushed_gathers_and_all_to_alls_equal_numpy_for_any_size_dtype_and_mode(collective, size, count, dtype,
                                                                             inplace, captured):
    inplace = inplace and collective == "all_gather"  # a pushed all_to_all runs out of place only
    pool(size).run(cases.exchanges_zero_copy, collective=collective, count=count, dtype=dtype, inplace=inplace,
                   algo="push", captured=captured)


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(collective=st.sampled_from(["all_reduce", "reduce_scatter"]), count=st.integers(1, 700),
       dtype=st.sampled_from(DTYPES + ["bfloat16"]), op=st.sampled_from(["sum", "min", "max", "prod"]),
       captured=st.booleans())
def test_two_rank_pushed_reductions_equal_numpy_for_any_count_dtype_and_op(collective, count, dtype, op, captured):
    pool(2).run(cases.reductions_pushed, collective=collective, count=count, dtype=dtype, op=op, captured=captured)


def test_a_call_captured_on_registered_buffers_on_one_rank_only_fails_on_every_rank_within_the_budget():
    """Rank 0 maps nothing (its buffer is registered) and launches; rank 1 waits to map its buffer with it: both
    raise once the 4 s budget is spent, rank 1 saying why."""
    texts = _failing_run(cases.captured_registered_on_some_ranks, timeout_s=4, count=999)
    assert texts[0].startswith("CommTimeoutError: rank 0: call check wait (a peer's call fingerprint) with peer 1 "
                               "timed out"), texts
    assert texts[1].startswith("CommTimeoutError: rsag (captured) failed on rank 1: rank 1: rank 0 did not begin rsag "
                               "(captured) within 4.0 s: has it made the same call? (a rank that captures this call "
                               "on registered buffers maps nothing: every rank passes buffers of the same "
                               "registration, or none does)"), texts

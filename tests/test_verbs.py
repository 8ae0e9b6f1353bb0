"""send/recv with groups, all-to-all with counts, gather, scatter, reduce and avg across simulator ranks: results
against NumPy, groups that cannot deadlock, mismatches raising on both ranks, bad input raising before launch."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import verb_cases as vc
from rankpool import PoolCache, RankPool

pool = PoolCache(env={"PYMSCCLPP_TIMEOUT_S": "30"})


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pool.close()


@pytest.mark.parametrize("size", [2, 3, 4])
def test_a_grouped_ring_of_sends_and_receives_delivers_every_buffer(size):
    # 3000 floats: twelve of the simulator's 1 KB rounds on four lanes per peer, so its 4-slot rings wrap around
    # three times; the second call starts on the rings the first drained
    pool(size).run(vc.ring, count=3000, repeat=2)


def test_a_ring_without_a_group_delivers_when_ranks_alternate_send_and_recv():
    pool(2).run(vc.ring, count=500, grouped=False)


@pytest.mark.parametrize("dtype", ["float16", "int32", "uint8"])
def test_send_recv_moves_any_dtype_and_odd_counts(dtype):
    pool(2).run(vc.ring, count=1001, dtype=dtype)


def test_a_group_of_many_sends_and_receives_in_any_order_including_to_itself_does_not_deadlock():
    # rank 0 sends rank 1 twice, both send to themselves, 2 <-> 0 and 1 -> 2, counts of several rounds
    plan = [(0, 1, 1500), (0, 1, 7), (1, 0, 2100), (0, 0, 33), (1, 1, 5), (2, 0, 1200), (0, 2, 64), (1, 2, 3)]
    names = pool(3).run(vc.send_recv_plan, plan=plan)
    assert names == ["exchange"] * 3


_PROPERTIES = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
_SIZES = st.sampled_from([2, 3, 5, 8])


@st.composite
def _plans(draw):
    """(ranks, [(src, dst, count), ...]): any sends between any ranks, to themselves and several per pair too."""
    size = draw(_SIZES)
    rank = st.integers(0, size - 1)
    return size, draw(st.lists(st.tuples(rank, rank, st.integers(1, 1500)), min_size=1, max_size=10))


def _exchanging(size: int):
    """The pool of ``size`` ranks, each of which has made a send/recv: the exchange's set-up with every peer is
    collective, so a later group may leave ranks out."""
    p = pool(size)
    if tuple(p.pids) not in _exchanged:  # new ranks (a failed call restarts the pool): set up again
        p.run(vc.ring, count=4)
        _exchanged.add(tuple(p.pids))
    return p


_exchanged: set[tuple] = set()  # the pids of pools whose ranks have made a send/recv


@_PROPERTIES
@given(plan=_plans(), seed=st.integers(0, 1000))
def test_any_group_of_sends_and_receives_between_two_to_eight_ranks_delivers_every_buffer(plan, seed):
    size, ops = plan
    _exchanging(size).run(vc.send_recv_plan, plan=ops, seed=seed)


@st.composite
def _count_tables(draw):
    size = draw(_SIZES)
    row = st.lists(st.integers(0, 700), min_size=size, max_size=size)
    return draw(st.lists(row, min_size=size, max_size=size))


@_PROPERTIES
@given(counts=_count_tables(), dtype=st.sampled_from(["float32", "float16", "int32", "uint8"]),
       seed=st.integers(0, 1000), algo=st.sampled_from([None, "exchange"]))
def test_all_to_all_with_any_counts_on_two_to_eight_ranks_matches_numpy(counts, dtype, seed, algo):
    assume(any(sum(row) for row in counts))  # no data at all returns before any launch
    pool(len(counts)).run(vc.all_to_allv, counts=counts, dtype=dtype, seed=seed, algo=algo)


@_PROPERTIES
@given(size=_SIZES, verb=st.sampled_from(["gather", "scatter", "reduce"]), count=st.integers(1, 700),
       root=st.integers(0, 7), dtype=st.sampled_from(["float32", "float16", "int32", "uint8"]),
       op=st.sampled_from(["sum", "min", "max"]), inplace=st.booleans(), seed=st.integers(0, 1000))
def test_rooted_verbs_on_two_to_eight_ranks_match_numpy(size, verb, count, root, dtype, op, inplace, seed):
    reducing = verb == "reduce"
    pool(size).run(vc.rooted, verb=verb, count=count, root=root % size, dtype=dtype, op=op if reducing else "sum",
                   inplace=inplace and reducing, seed=seed)


@_PROPERTIES
@given(size=_SIZES, count=st.integers(1, 3000), root=st.integers(0, 7),
       dtype=st.sampled_from(["float32", "bfloat16", "float16", "int32", "uint8"]),
       op=st.sampled_from(["sum", "min", "max", "prod", "avg"]), inplace=st.booleans(), register=st.booleans(),
       seed=st.integers(0, 1000))
def test_two_step_reduces_on_two_to_eight_ranks_match_numpy(size, count, root, dtype, op, inplace, register, seed):
    pool(size).run(vc.rooted, verb="reduce", count=count, root=root % size, dtype=dtype, op=op, inplace=inplace,
                   register=register, seed=seed, algo="rsag")


def test_a_rank_that_only_sends_to_itself_needs_no_other_rank():
    p = RankPool(2, env={"PYMSCCLPP_TIMEOUT_S": "30"})  # fresh ranks: no exchange set up yet
    try:
        assert p.run(vc.self_only_group, count=300) == [False, False]
    finally:
        p.close()


def test_ranks_may_start_with_different_verbs():
    p = RankPool(3, env={"PYMSCCLPP_TIMEOUT_S": "30"})  # fresh ranks: the exchange is set up by their first verbs
    try:
        p.run(vc.send_recv_then_gather, count=100)
    finally:
        p.close()


def _failing(fn, rank_env=None, **params) -> list:
    """``fn`` on a pool of its own: its communicators fail for good."""
    p = RankPool(2, env={"PYMSCCLPP_TIMEOUT_S": "30"}, rank_env=rank_env)
    try:
        return p.run(fn, **params)
    finally:
        p.close()


@pytest.mark.parametrize("case", ["count", "dtype"])
def test_a_send_that_does_not_match_its_recv_raises_on_both_ranks_naming_both_sides(case):
    texts = _failing(vc.mismatched_send_recv, case=case)
    want = "128 float32" if case == "count" else "64 int32"
    for rank, text in enumerate(texts):
        assert "64 float32" in text and want in text and f"rank {1 - rank}" in text, text


@pytest.mark.parametrize("case,words", [("root", ("to root 0", "to root 1")),
                                        ("registered", ("on registered buffers (zero-copy)",))])
def test_two_step_reduces_that_differ_raise_on_both_ranks_naming_both_calls(case, words):
    for text in _failing(vc.mismatched_reduce, case=case):
        assert all(w in text for w in words) and "reduce of 300 float32" in text, text


def test_sends_matched_to_receives_of_other_sizes_in_order_raise_on_both_ranks():
    for text in _failing(vc.reordered_sends):
        assert "1507 float32" in text and "op sizes" in text, text


@pytest.mark.parametrize("case,words", [("peer", "peer must be a rank in [0, 2)"),
                                        ("self_count", "sends to itself"), ("overlap", "overlaps")])
def test_bad_send_recv_arguments_raise_before_any_launch(case, words):
    for text in pool(2).run(vc.bad_p2p, case=case):
        assert words in text, text


@pytest.mark.parametrize("case,words", [
    ("a2a_too_many", "send_counts add up to 10 elements, the buffer holds 8"),
    ("a2a_negative", "send_counts must be 2 non-negative integers"), ("a2a_length", "must be 2 non-negative"),
    ("a2a_in_place", "cannot run in place"), ("root", "root must be a rank in [0, 2)"),
    ("gather_small", "the root's receive buffer has 15 float32, expected 16 float32"),
    ("scatter_none", "the root (rank 0) needs a send buffer"), ("reduce_dtype", "cannot reduce dtype float64")])
def test_bad_collective_arguments_raise_before_any_launch(case, words):
    for rank, text in enumerate(pool(2).run(vc.bad_collective, case=case)):
        assert words in text or (text == "" and rank == 1), text


@pytest.mark.parametrize("size,counts", [
    (2, [[3, 1500], [0, 2001]]),
    (3, [[5, 0, 1100], [7, 9, 0], [1, 1030, 4]]),
    # five ranks: zero counts, one-lane and four-lane streams, rings wrapping around (1 KB rounds, 4 slots)
    (5, [[0, 1300, 0, 64, 7], [2100, 3, 0, 0, 900], [0, 0, 11, 1500, 0], [77, 0, 1200, 0, 1], [5, 260, 0, 3000, 2]]),
])
@pytest.mark.parametrize("algo", [None, "packet", "simple", "exchange"])
def test_all_to_all_with_uneven_counts_matches_numpy_in_one_hop_and_through_the_exchange(size, counts, algo):
    # by default packets from 3 ranks, the exchange at 2
    packets = algo == "packet" or (algo is None and size > 2)
    kernel = "exchange_counts_simple" if algo == "simple" else "exchange_counts_ll" if packets else \
        "peer_exchange_simple"
    assert pool(size).run(vc.all_to_allv, counts=counts, algo=algo) == [kernel] * size


def test_an_all_to_all_with_counts_in_simple_rounds_takes_the_rounds_its_largest_range_needs_and_is_exact():
    # 64 KB simulator rounds: rank 0 sends 120 KB in all, 60 KB at most to one peer (one round); rank 0 sends rank 1
    # 68 KB (two rounds) while every other pair is done in the first, and every rank still meets every round
    small, large = [[5, 15000, 15000], [10, 0, 300], [200, 7, 1]], [[3, 17000, 20], [0, 5, 1], [40, 0, 2]]
    for counts, rounds in ((small, 1), (large, 2)):
        for moved in pool(3).run(vc.all_to_allv_rounds, counts=counts, algo="simple"):
            assert set(moved) == {rounds}, (counts, moved)


def test_all_to_all_with_even_counts_equals_the_even_all_to_all():
    pool(3).run(vc.all_to_allv, counts=[[40] * 3] * 3, dtype="int32")


def test_all_to_all_counts_that_disagree_raise_on_every_rank_before_data_moves():
    for text in pool(3).run(vc.mismatched_counts):
        assert "rank 0 sends rank 1 5 float32, rank 1 receives 4 float32 from rank 0" in text, text


@pytest.mark.parametrize("verb", ["gather", "scatter", "reduce"])
@pytest.mark.parametrize("size,root", [(2, 0), (3, 2), (5, 3)])
def test_rooted_verbs_match_numpy(verb, size, root):
    pool(size).run(vc.rooted, verb=verb, count=1100, root=root)


@pytest.mark.parametrize("dtype,op", [("float16", "max"), ("int32", "prod"), ("uint8", "min")])
def test_reduce_serves_every_dtype_and_op(dtype, op):
    pool(3).run(vc.rooted, verb="reduce", count=301, root=1, dtype=dtype, op=op)


def test_reduce_in_place_on_the_root():
    pool(2).run(vc.rooted, verb="reduce", count=77, root=1, inplace=True)


@pytest.mark.parametrize("algo", ["packet_one_block", "packet", "packet_wide", "exchange"])
@pytest.mark.parametrize("size,root,op,inplace,count", [
    (2, 1, "sum", False, 1001), (3, 0, "max", True, 300), (5, 3, "sum", False, 4099), (4, 2, "avg", False, 7)])
def test_a_reduce_by_each_small_message_algorithm_writes_the_roots_output_and_nothing_else(size, root, op, inplace,
                                                                                           count, algo):
    pool(size).run(vc.rooted, verb="reduce", count=count, root=root, op=op, inplace=inplace, algo=algo,
                   others_recv=True)


@pytest.mark.parametrize("verb,kernel", [("reduce", "peer_reduce_simple"), ("gather", "peer_exchange_simple"),
                                         ("scatter", "peer_exchange_simple")])
def test_only_a_reduce_runs_the_exchange_kernel_that_holds_the_reductions(verb, kernel):
    assert pool(3).run(vc.exchange_kernel, verb=verb, count=300, root=1) == [kernel] * 3


def test_a_packet_reduce_writes_nothing_into_a_non_roots_own_packet_scratch():
    pool(3).run(vc.packet_reduce_leaves_its_own_scratch_slots_alone, count=1000, root=1)


@pytest.mark.parametrize("size,count,served", [(2, 512, "packet_one_block"), (2, 4096, "packet"),
                                               (3, 512, "packet"), (3, 16384, "packet_wide"),
                                               (2, 100000, "exchange"), (3, 70000, "rsag")])
def test_small_reduces_run_the_all_reduce_packets_by_default(size, count, served):
    # float32: 2 KB is the one-block packets' last size (2 ranks), 16 KB the narrow ones', 256 KB the wide ones' at
    # 2-7 ranks
    assert pool(size).run(vc.rooted, verb="reduce", count=count, root=size - 1) == [served] * size


@pytest.mark.parametrize("size,root,op,inplace,count", [
    (2, 1, "sum", False, 1001), (3, 0, "sum", False, 1200), (4, 1, "max", True, 1200), (4, 3, "sum", False, 37),
    (5, 2, "min", True, 90001)])  # 37: shards of one element, some empty; 90001 floats: two rounds of 256 KB
def test_a_two_step_reduce_reduces_each_shard_on_its_rank_into_the_root(size, root, op, inplace, count):
    pool(size).run(vc.rooted, verb="reduce", count=count, root=root, op=op, inplace=inplace, algo="rsag")


@pytest.mark.parametrize("size,root,inplace,count", [(3, 2, False, 1200), (2, 0, True, 999), (4, 1, True, 70001)])
def test_a_two_step_reduce_of_registered_send_buffers_reads_them_zero_copy(size, root, inplace, count):
    pool(size).run(vc.rooted, verb="reduce", count=count, root=root, inplace=inplace, register=True, algo="rsag")


@pytest.mark.parametrize("size,root,inplace,count,register", [
    (2, 1, False, 1001, False), (3, 0, True, 1200, False), (4, 2, False, 70001, False), (3, 1, False, 999, True)])
def test_a_captured_two_step_reduce_writes_every_shard_into_the_roots_mapped_output(size, root, inplace, count,
                                                                                     register):
    pool(size).run(vc.captured_reduce, count=count, root=root, inplace=inplace, register=register)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_avg_of_a_two_step_reduce_divides_in_the_kernel(dtype):
    pool(3).run(vc.avg, verb="reduce", count=96, dtype=dtype, algo="rsag")


@pytest.mark.parametrize("verb,algo", [("all_reduce", "packet"), ("all_reduce", "simple"), ("all_reduce", "rsag"),
                                       ("reduce_scatter", None), ("reduce", None)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_avg_divides_the_sum_in_the_kernel(verb, algo, dtype):
    pool(3).run(vc.avg, verb=verb, count=99, dtype=dtype, algo=algo)


@pytest.mark.parametrize("size,dtype,redop", [(2, "float32", "sum"), (3, "float16", "max")])
def test_every_verbs_benchmark_case_checks_out_on_the_simulator(size, dtype, redop):
    pool(size).run(vc.bench_cases, dtype=dtype, redop=redop)


hosts = PoolCache(env={"PYMSCCLPP_TIMEOUT_S": "30"})


@pytest.fixture(scope="module", autouse=True)
def _close_host_pools():
    yield
    hosts.close()


def _two_hosts(size: int):
    """``size`` ranks faked onto two hosts (PYMSCCLPP_HOST_ID): the verbs go over PortChannels."""
    return hosts(size, [{"PYMSCCLPP_HOST_ID": f"host-{r % 2}"} for r in range(size)])


def test_send_recv_across_two_hosts_delivers_a_ring_and_a_group_with_self_sends():
    _two_hosts(2).run(vc.ring, count=2500, repeat=2)
    names = _two_hosts(3).run(vc.send_recv_plan, plan=[(0, 1, 1500), (1, 0, 7), (2, 2, 9), (1, 2, 1100)])
    assert names == ["cross_host"] * 3


def test_all_to_all_with_uneven_counts_across_two_hosts_matches_numpy():
    _two_hosts(3).run(vc.all_to_allv, counts=[[5, 0, 1100], [7, 9, 0], [1, 1030, 4]])


@pytest.mark.parametrize("verb,op", [("gather", "sum"), ("scatter", "sum"), ("reduce", "sum"), ("reduce", "avg")])
def test_rooted_verbs_across_two_hosts_match_numpy(verb, op):
    _two_hosts(3).run(vc.rooted, verb=verb, count=1100, root=1, op=op)


def test_a_mismatched_send_across_hosts_raises_on_both_ranks_before_launch():
    texts = _failing(vc.mismatched_send_recv, rank_env=[{"PYMSCCLPP_HOST_ID": f"host-{r}"} for r in range(2)],
                     case="count")
    for text in texts:
        assert "64 float32" in text and "128 float32" in text and "found on the host" in text, text


def test_two_ranks_sending_first_outside_a_group_raise_and_say_to_group_them():
    for text in _failing(vc.both_send_first):
        assert "receives nothing" in text and "comm.group()" in text, text


def test_with_the_check_off_the_verbs_still_deliver():
    unchecked = RankPool(3, env={"PYMSCCLPP_TIMEOUT_S": "30", "PYMSCCLPP_CHECK": "0"})
    try:
        unchecked.run(vc.ring, count=3000)
        served = unchecked.run(vc.all_to_allv, counts=[[5, 0, 1100], [7, 9, 0], [1, 1030, 4]])
        assert served == ["peer_exchange_simple"] * 3, served  # packets need the check's meeting
        refused = unchecked.run(vc.all_to_allv_zero_copy_refused, counts=[[5, 0, 1100], [7, 9, 0], [1, 1030, 4]])
        assert all("PYMSCCLPP_CHECK=1" in words for words in refused), refused  # 'read' as well
        unchecked.run(vc.rooted, verb="reduce", count=500, root=2)
    finally:
        unchecked.close()


@pytest.mark.parametrize("size,counts,dtype,registered,captured,served", [
    (2, [[3, 1500], [0, 2001]], "float32", [0, 0], False, "zero-copy (registered)"),
    (3, [[5, 0, 1100], [7, 9, 0], [1, 1030, 4]], "int16", [1, 1, 1], False, "zero-copy (registered)"),
    (3, [[5, 0, 1100], [7, 9, 0], [1, 1030, 4]], "float16", [None, None, None], True, "zero-copy (captured)"),
    (4, [[0, 300, 0, 64], [210, 3, 0, 0], [0, 0, 11, 150], [77, 0, 120, 0]], "uint8", [0, 0, 0, 0], False,
     "zero-copy (registered)"),
    # not every rank's send buffer starts at the same registration: every rank stages, the result the same
    (3, [[5, 0, 1100], [7, 9, 0], [1, 1030, 4]], "float32", [0, 1, 0], False, "staged"),
    (2, [[3, 1500], [0, 2001]], "float32", [0, None], False, "staged"),
])
def test_all_to_all_with_counts_on_mapped_send_buffers_reads_peers_directly(size, counts, dtype, registered,
                                                                            captured, served):
    got = pool(size).run(vc.all_to_allv_zero_copy, counts=counts, dtype=dtype, registered=registered,
                         captured=captured)
    assert got == [served] * size, got


@pytest.mark.parametrize("size,counts,dtype,captured", [
    (2, [[3, 1500], [0, 2001]], "float32", False),
    (3, [[5, 0, 1100], [7, 9, 0], [1, 1030, 4]], "float16", True),
    (4, [[0, 300, 0, 64], [210, 3, 0, 0], [0, 0, 11, 150], [77, 0, 120, 0]], "uint8", False),
    (5, [[0, 1300, 0, 64, 7], [2100, 3, 0, 0, 900], [0, 0, 11, 1500, 0], [77, 0, 1200, 0, 1], [5, 260, 0, 3000, 2]],
     "int32", True),
])
def test_all_to_all_with_counts_read_between_two_meetings_of_all_ranks_matches_numpy(size, counts, dtype, captured):
    got = pool(size).run(vc.all_to_allv_zero_copy, counts=counts, dtype=dtype,
                         registered=[None if captured else 0] * size, captured=captured, algo="read", served_by="read")
    assert got == ["zero-copy (captured)" if captured else "zero-copy (registered)"] * size, got


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(counts=_count_tables(), dtype=st.sampled_from(["float32", "float16", "uint8"]), captured=st.booleans())
def test_all_to_all_with_any_counts_read_between_two_meetings_on_two_to_eight_ranks_matches_numpy(counts, dtype,
                                                                                                  captured):
    assume(any(sum(row) for row in counts))  # no data at all returns before any launch
    n = len(counts)
    got = pool(n).run(vc.all_to_allv_zero_copy, counts=counts, dtype=dtype, registered=[None if captured else 0] * n,
                      captured=captured, algo="read", served_by="read")
    assert got == ["zero-copy (captured)" if captured else "zero-copy (registered)"] * n, got


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(counts=_count_tables(), dtype=st.sampled_from(["float32", "float16", "uint8"]),
       mapped=st.sampled_from(["registered", "captured", "rank 0 elsewhere"]))
def test_every_rank_serves_an_all_to_all_with_any_counts_on_mapped_buffers_alike(counts, dtype, mapped):
    assume(any(sum(row) for row in counts))  # no data at all returns before any launch
    n = len(counts)
    registered = [None] * n if mapped == "captured" else [1 if mapped != "registered" and r == 0 else 0
                                                           for r in range(n)]
    got = pool(n).run(vc.all_to_allv_zero_copy, counts=counts, dtype=dtype, registered=registered,
                      captured=mapped == "captured", algo=None)
    assert len(set(got)) == 1 and (mapped != "rank 0 elsewhere" or got[0] in ("staged", "packets")), got


def test_read_refuses_an_all_to_all_with_counts_whose_send_buffers_are_not_mapped_on_every_rank():
    words = pool(3).run(vc.all_to_allv_zero_copy_refused, counts=[[5, 0, 1100], [7, 9, 0], [1, 1030, 4]])
    assert all("register_buffer" in w and "'read'" in w for w in words), words


def test_large_all_to_alls_with_counts_on_registered_buffers_read_peers_between_two_meetings_by_default():
    # from 3 ranks, above the packets' 256 KB (the most any rank sends): uint8, rank 0 sends 300,000 bytes
    counts = [[100_000, 150_000, 50_000], [7, 90_000, 0], [1, 1030, 4]]
    got = pool(3).run(vc.all_to_allv_zero_copy, counts=counts, dtype="uint8", registered=[0, 0, 0], captured=False,
                      algo=None, repeat=1, served_by="read")
    assert got == ["zero-copy (registered)"] * 3, got


@pytest.mark.parametrize("counts,dtype", [
    ([[5, 300_000, 0], [100_000, 5, 0], [0, 0, 7]], "uint8"),  # 3 ranks, above the packets' 256 KB: read
    ([[4] + [0] * 7] + [[(i + j) % 3 if 0 < j < 7 else 0 for j in range(8)] for i in range(1, 7)] + [[0] * 7 + [9]],
     "float16"),  # 8 ranks, small: read; ranks 0 and 7 trade nothing with a peer
])
def test_a_rank_that_moves_only_its_own_range_reads_zero_copy_with_its_peers(counts, dtype):
    n = len(counts)
    got = pool(n).run(vc.all_to_allv_zero_copy, counts=counts, dtype=dtype, registered=[0] * n, captured=False,
                      algo=None, repeat=2, served_by="read")
    assert got == ["zero-copy (registered)"] * n, got


@pytest.mark.parametrize("size,dtype", [(2, "float32"), (3, "int32"), (4, "float16")])
def test_a_grouped_ring_on_registered_send_buffers_is_read_zero_copy(size, dtype):
    pool(size).run(vc.registered_ring, count=301, dtype=dtype)


def test_registered_send_buffers_stage_when_send_recv_zero_copy_is_off():
    pool(2).run(vc.registered_sends_stage_when_zero_copy_is_off, count=129)


@pytest.mark.parametrize("size,dtype", [(3, "float32"), (4, "int16")])
def test_one_call_reads_zero_copy_where_a_pair_shares_a_registration_and_stages_the_other_pairs(size, dtype):
    pool(size).run(vc.mixed_ring, count=333, dtype=dtype)


@pytest.mark.parametrize("size,receivers,dtype", [(3, 1, "float32"), (4, 3, "uint8")])
def test_sends_to_receivers_of_the_same_registration_are_read_zero_copy(size, receivers, dtype):
    pool(size).run(vc.registered_send_to_receivers, count=257, dtype=dtype, receivers=receivers)


@pytest.mark.parametrize("both", [False, True])
def test_a_registered_send_meeting_an_unregistered_recv_or_another_registration_stages_exactly(both):
    pool(2).run(vc.registered_on_one_side, both=both)


@st.composite
def _registered_groups(draw):
    """(ranks, each rank's destinations, counts, whether it sends from the registration)."""
    size = draw(_SIZES)
    dests = [sorted(draw(st.sets(st.integers(0, size - 1), max_size=3))) for _ in range(size)]
    counts = [draw(st.integers(1, 900)) for _ in range(size)]
    return size, dests, counts, [draw(st.booleans()) for _ in range(size)]


@_PROPERTIES
@given(group=_registered_groups(), seed=st.integers(0, 1000))
def test_any_group_reads_zero_copy_exactly_between_ranks_sending_from_one_registration_and_stages_the_rest(group,
                                                                                                           seed):
    size, dests, counts, registered = group
    assume(any(dests))
    _exchanging(size).run(vc.registered_sends, dests=dests, counts=counts, registered=registered, seed=seed)


def _rooted_modes(size: int, root: int, verb: str, read: bool) -> list:
    """Each rank's expected pair modes of a gather (the root reads) or scatter (the others read the root) that
    reads zero-copy (``read``) or stages."""
    reader, readee = ("read", "read by") if read else ("staged", "staged")
    out = []
    for me in range(size):
        if me == root:
            out.append({p: reader if verb == "gather" else readee for p in range(size) if p != root})
        else:
            want = {p: "staged" for p in range(size) if p != me}
            want[root] = readee if verb == "gather" else reader
            out.append(want)
    return out


@pytest.mark.parametrize("verb", ["gather", "scatter"])
@pytest.mark.parametrize("size,root,registered,captured,read", [
    (2, 0, [0, 0], False, True),
    (3, 2, [1, 1, 1], False, True),
    (4, 1, [None] * 4, True, True),  # captured: every rank maps its buffer at the call
    (3, 0, [0, 1, 0], False, False),  # one rank on another registration: the pairs with the root stage...
    (2, 1, [None, 0], False, False),
])
def test_gather_and_scatter_read_zero_copy_where_the_registrations_match_and_stage_elsewhere(
        verb, size, root, registered, captured, read):
    got = pool(size).run(vc.rooted_zero_copy, verb=verb, count=301, root=root, dtype="float32",
                         registered=registered, captured=captured)
    want = _rooted_modes(size, root, verb, read)
    if not read and size == 3:  # ...rank 1's alone: the root reads (or is read by) rank 2 zero-copy
        want = _rooted_modes(size, root, verb, True)
        for me, modes in enumerate(want):
            for p in modes:
                if 1 in (me, p):
                    modes[p] = "staged"
    assert got == want, got


def test_a_table_with_more_peers_than_the_kernel_tells_apart_carries_no_zero_copy_codes():
    from pymscclpp.algos.exchange import layout
    from pymscclpp.algos.exchange_kernels import ROW, SEND_ZC, ZC_PEERS
    fps = {1: (5, 5)}
    codes = {1: (3, 3, 0)}
    assert layout(ZC_PEERS + 1, {1: (0, 64)}, {1: (0, 64)}, fps, codes)[ROW + SEND_ZC] == 3
    assert layout(ZC_PEERS + 2, {1: (0, 64)}, {1: (0, 64)}, fps, codes)[ROW + SEND_ZC] == 0


def test_ranks_whose_own_sends_differ_in_size_choose_the_same_all_to_all_with_counts(tmp_path):
    # packets up to 1000 bytes: rank 0 sends 1204 bytes and rank 1 eight, yet both take the exchange (the most any
    # rank sends decides), where each rank's own size would part them and leave each waiting for the other
    path = tmp_path / "tuning.json"
    path.write_text('{"all_to_allv": [[1000, "packet"], [1e30, "exchange"]]}')
    ranks = RankPool(2, env={"PYMSCCLPP_TIMEOUT_S": "30", "PYMSCCLPP_TUNING_FILE": str(path)})
    try:
        assert ranks.run(vc.all_to_allv, counts=[[1, 300], [1, 1]]) == ["peer_exchange_simple"] * 2
        assert ranks.run(vc.all_to_allv, counts=[[1, 200], [1, 1]]) == ["exchange_counts_ll"] * 2
    finally:
        ranks.close()


def test_a_tuned_table_serves_small_zero_copy_all_to_alls_with_counts_by_its_zero_copy_rows(tmp_path):
    # the tuner's rows for 3 ranks: staged calls as packets, and zero-copy calls too, the packets (timed on
    # registered buffers as the staged winner) beating 'read' (the defaults' zero-copy row)
    from pymscclpp.bench.tune import tune_collective, write_table
    times = {("packet", 1024, False): 1.0, ("exchange", 1024, False): 2.0, ("packet", 1024, True): 0.5,
             ("exchange", 1024, True): 1.5, ("read", 1024, True): 1.0}
    rows = tune_collective([1024], ["packet", "exchange", "read"], lambda n, s, r: times.get((n, s, r)),
                           lambda name: name in ("exchange", "read"))
    path = tmp_path / "tuning.json"
    write_table(str(path), 3, {"all_to_allv": rows["staged"], "all_to_allv@zero_copy": rows["zero_copy"]})
    ranks = RankPool(3, env={"PYMSCCLPP_TIMEOUT_S": "30", "PYMSCCLPP_TUNING_FILE": str(path)})
    counts = [[5, 0, 110], [7, 9, 0], [1, 103, 4]]
    try:
        assert rows["zero_copy"] == [[float("inf"), "packet"]]
        for registered in ([0] * 3, [None] * 3):
            got = ranks.run(vc.all_to_allv_zero_copy, counts=counts, dtype="float32", registered=registered,
                            captured=False, algo=None, served_by="packet")
            assert got == ["packets"] * 3, got
    finally:
        ranks.close()

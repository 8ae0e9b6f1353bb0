"""Soak and concurrency, sized for the simulator: many checked all-reduces, flags and tokens across their
wrap-around, and two communicators in the same processes taking turns."""

from __future__ import annotations

import os

import pytest

from fault import cases
from fault.conftest import pool

SOAK_S = float(os.environ.get("PYMSCCLPP_SOAK_S", "12"))  # GPUs: tests/fault/soak.py --iters 100000 under mpirun
SOAK_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "soak_table.json")  # every kernel at small sizes


def test_soak_many_small_all_reduces_every_result_exact(record_property):
    counts = pool().run(cases.soak, seconds=SOAK_S, timeout=SOAK_S + 120)
    assert counts[0] == counts[1] and counts[0] >= max(8, SOAK_S), counts
    record_property("soak_all_reduces", counts[0])
    print(f"\nsoak: {counts[0]} all-reduces on 2 ranks in ~{SOAK_S:.0f} s, every result checked")


@pytest.mark.parametrize("size,repeats", [(2, 2), (3, 1)])
def test_soak_of_every_collective_and_verb_on_registered_and_plain_buffers_is_exact_and_reaches_zero_copy(size,
                                                                                                         repeats):
    # GPUs: tests/fault/soak_collectives.py --iters 100000 under mpirun, the default table at sizes to 16 MB
    from fault.soak_collectives import SIM_SIZES, draw
    served = pool(size, PYMSCCLPP_TUNING_FILE=SOAK_TABLE).run(cases.soak_collectives, registered_share=0.5,
                                                              repeats=repeats, timeout=300)[0]
    made = sum(draw(i, SIM_SIZES, 0.5, size, repeats=repeats).repeats for i in range(100))
    assert sum(calls for _, calls in served) == made > (100 if repeats > 1 else 99), (made, served)
    kernels = {(collective, kernel) for (collective, _, kernel), _ in served}
    zero_copy = {("all_reduce", "all_reduce_zero_copy_simple"), ("reduce_scatter", "reduce_scatter_zero_copy_simple"),
                 ("all_gather", "exchange_zero_copy_simple"), ("all_to_all", "exchange_zero_copy_simple"),
                 ("broadcast", "broadcast_zero_copy_simple"), ("all_gather", "exchange_push_zero_copy_simple"),
                 ("all_to_allv", "peer_read_simple"), ("all_to_allv", "exchange_counts_read_simple"),
                 ("reduce", "reduce_zero_copy_simple")}
    staged = {("all_reduce", "reduce_ll"), ("all_gather", "exchange_ll"), ("broadcast", "broadcast_ll"),
              *([("broadcast", "broadcast_packet_two_step_ll")] if size > 2 else []),
              ("reduce", "reduce_ll"), ("reduce", "reduce_rsag_simple"), ("all_to_allv", "exchange_counts_ll"),
              ("all_to_allv", "exchange_counts_simple"), ("reduce", "peer_reduce_simple"),
              *((verb, "peer_exchange_simple") for verb in ("gather", "scatter", "send_recv"))}
    assert zero_copy | staged <= kernels, sorted((zero_copy | staged) - kernels)


def test_packet_flag_preset_near_2_pow_32_skips_zero_and_alternates_parity_across_the_wrap():
    for seen in pool().run(cases.packet_flags_across_wrap, start=0xFFFFFFFD, rounds=5):
        assert seen == [0xFFFFFFFE, 0xFFFFFFFF, 2, 3, 4], seen
        assert 0 not in seen and all((a ^ b) & 1 for a, b in zip(seen, seen[1:]))


def test_all_reduce_stays_exact_with_its_packet_flags_across_the_32_bit_wrap():
    for seen in pool().run(cases.allreduce_flags_across_wrap, start=0xFFFFFFFD, iters=5):
        assert seen == [0xFFFFFFFE, 0xFFFFFFFF, 2, 3, 4], seen


@pytest.mark.parametrize("start", [2**31 - 3, 2**32 - 3, 2**63 - 3, 2**64 - 9],
                         ids=["2^31", "2^32", "2^63", "near-2^64"])
def test_semaphore_tokens_near_their_limit_keep_ping_pong_ordered(start):
    # 64-bit tokens: crossing 2**64 itself takes 584 years at one signal per nanosecond (docs/reliability.md)
    rounds = 6
    for out in pool().run(cases.semaphore_tokens_near_limit, start=start, rounds=rounds, timeout=60):
        assert out["bad"] == [0, 0] and out["error"] is None, out
        assert out["inbound"] == out["expected"] == start + rounds, out


def test_two_communicators_in_the_same_processes_alternate_collectives_correctly():
    assert pool().run(cases.two_communicators_alternate, rounds=6, timeout=120) == [12, 12]

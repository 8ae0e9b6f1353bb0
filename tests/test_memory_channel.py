"""MemoryChannel and semaphores across real rank processes on the CUDA simulator.

Each rank count gets one pool of processes (a Communicator each); hypothesis draws the
cases in this process and every rank runs them together.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import channel_cases as cases
from rankpool import PoolCache

RANK_COUNTS = (2, 3, 4)


pool = PoolCache(env={"PYMSCCLPP_TIMEOUT_S": "30"})


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pool.close()


_SETTINGS = settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("size", RANK_COUNTS)
def test_signal_wait_ring_advances_tokens_exactly(size):
    pool(size).run(cases.ring_pingpong, iters=20)


@_SETTINGS
@given(size=st.sampled_from(RANK_COUNTS), nbytes=st.integers(1, 3000), src_off=st.integers(0, 40),
       dst_off=st.integers(0, 40), seed=st.integers(0, 2**16), nthreads=st.sampled_from([1, 7, 32]))
def test_put_then_get_round_trips_any_size_and_offset(size, nbytes, src_off, dst_off, seed, nthreads):
    pool(size).run(cases.put_get_roundtrip, nbytes=nbytes, src_off=src_off, dst_off=dst_off, seed=seed,
                   nthreads=nthreads)


@_SETTINGS
@given(size=st.sampled_from(RANK_COUNTS), nbytes=st.integers(1, 600), src_off=st.integers(0, 24),
       out_off=st.integers(0, 24), seed=st.integers(0, 2**16), ll8=st.booleans(),
       nthreads=st.sampled_from([1, 8, 32]))
def test_packets_deliver_exact_bytes_with_fresh_flags(size, nbytes, src_off, out_off, seed, ll8, nthreads):
    pool(size).run(cases.packet_exchange, nbytes=nbytes, src_off=src_off, out_off=cases.ARENA // 2 + out_off,
                   seed=seed, ll8=ll8, rounds=2, nthreads=nthreads)


def test_unsignalled_wait_times_out_with_rank_and_peer():
    pool(2).run(cases.wait_times_out)


@pytest.mark.parametrize("op, off, nbytes, words", [
    (0, cases.ARENA - 8, 64, f"put of 64 bytes at offset {cases.ARENA - 8} is outside the peer's inbox (dst) of "
                            f"{cases.ARENA} bytes"),
    (1, 16, cases.ARENA, f"get of {cases.ARENA} bytes at offset 16 is outside this rank's src buffer of {cases.ARENA} "
                         "bytes"),
    (2, cases.ARENA - 16, 16, f"unpack_packets of 32 bytes at offset {cases.ARENA - 16} is outside this rank's inbox "
                              f"(pkt) of {cases.ARENA} bytes"),
])
def test_a_channel_copy_past_a_buffer_raises_naming_the_peer_op_offset_size_and_buffer(op, off, nbytes, words):
    (kind, text), unchanged = pool(2).run(cases.out_of_bounds_copy, op=op, off=off, nbytes=nbytes)[0]
    assert kind == "InvalidUsageError", (kind, text)
    assert f"memory channel from rank 0 to peer 1: {words}" in text, text
    assert unchanged, "no byte may be copied by an op that is out of bounds"

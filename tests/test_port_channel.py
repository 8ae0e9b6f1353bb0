"""PortChannel through ProxyService across rank processes on the CUDA simulator.

Three pools: two ranks on one host (CudaIpc), two ranks on two fake hosts (PYMSCCLPP_HOST_ID per
rank: Ethernet over loopback), and three ranks on hosts A, A, B (a ring mixing both transports).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import port_cases as cases
from rankpool import RankPool

_ENV = {"PYMSCCLPP_TIMEOUT_S": "30", "PYMSCCLPP_SOCKET_ADDR": "127.0.0.1", "PYMSCCLPP_TRANSPORT": "auto"}
_HOSTS = {"ipc2": ["A", "A"], "eth2": ["A", "B"], "mixed3": ["A", "A", "B"]}
_pools: dict[str, RankPool] = {}


def pool(name: str) -> RankPool:
    if name not in _pools:
        hosts = _HOSTS[name]
        _pools[name] = RankPool(len(hosts), env=_ENV, rank_env=[{"PYMSCCLPP_HOST_ID": h} for h in hosts])
    return _pools[name]


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    for p in _pools.values():
        p.run(cases.teardown)
        p.close()
    _pools.clear()


@pytest.mark.parametrize("name, expected", [
    ("ipc2", [{1: "CUDA_IPC"}, {0: "CUDA_IPC"}]),
    ("eth2", [{1: "ETHERNET"}, {0: "ETHERNET"}]),
    ("mixed3", [{1: "CUDA_IPC", 2: "ETHERNET"}, {2: "ETHERNET", 0: "CUDA_IPC"}, {0: "ETHERNET", 1: "ETHERNET"}]),
])
def test_transport_follows_hosts(name, expected):
    assert pool(name).run(cases.transports) == expected


_SETTINGS = settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))


@_SETTINGS
@given(name=st.sampled_from(sorted(_HOSTS)), nbytes=st.integers(0, 5000), src_off=st.integers(0, 64),
       dst_off=st.integers(0, 64), seed=st.integers(0, 2**16), mode=st.sampled_from(cases.MODES))
def test_ring_put_delivers_exact_bytes(name, nbytes, src_off, dst_off, seed, mode):
    pool(name).run(cases.ring_put, nbytes=nbytes, src_off=src_off, dst_off=dst_off, seed=seed, mode=mode, rounds=2)


@pytest.mark.parametrize("name", sorted(_HOSTS))
def test_every_mode_round_trips(name):
    for i, mode in enumerate(cases.MODES):
        pool(name).run(cases.ring_put, nbytes=1000 + i, src_off=i, dst_off=3 * i, seed=i, mode=mode, rounds=3)


@pytest.mark.parametrize("name", ["ipc2", "eth2"])
def test_a_put_of_several_megabytes_lands_exactly(name):
    pool(name).run(cases.big_put, nbytes=(5 << 20) + 77, src_off=3, dst_off=4099, seed=2)


@pytest.mark.parametrize("name", ["ipc2", "eth2"])
def test_many_threads_push_through_a_small_fifo(name):
    pool(name).run(cases.many_pushers, nthreads=24, chunk=40, seed=5)


@pytest.mark.parametrize("name", ["ipc2", "eth2"])
def test_poll_sees_the_signal_once(name):
    pool(name).run(cases.poll_sees_signal)


@pytest.mark.parametrize("name", ["ipc2", "eth2"])
def test_out_of_range_trigger_is_rejected_naming_the_channel_on_every_rank(name):
    texts = pool(name).run(cases.bad_trigger_rejected)
    assert "PortChannel semaphore" in texts[1]


@pytest.mark.parametrize("name", ["ipc2", "eth2"])
def test_peer_disconnect_surfaces_within_seconds(name):
    pool(name).run(cases.peer_disconnects)


def test_dead_proxy_thread_surfaces_on_both_ranks():
    pool("eth2").run(cases.proxy_thread_dies)


def test_after_a_proxy_fault_a_new_communicator_on_the_same_ranks_works():
    # a fault is sticky on its communicator (as NCCL's errors): the ranks go on with a new one
    _pools.pop("eth2").close()
    pool("eth2").run(cases.ring_put, nbytes=777, src_off=1, dst_off=2, seed=9, mode="put_with_signal")

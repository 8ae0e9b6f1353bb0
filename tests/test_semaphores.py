"""Host-to-host and host-to-device semaphores across rank processes on the simulator."""

import pytest

import semaphore_cases as cases
from rankpool import RankPool


@pytest.fixture(scope="module")
def pool():
    p = RankPool(3, env={"PYMSCCLPP_TIMEOUT_S": "20"})
    yield p
    p.close()


def test_host_semaphores_ping_pong_in_order(pool):
    pool.run(cases.host_pingpong, iters=50)


def test_host_wait_without_signal_times_out_naming_rank_and_peer(pool):
    pool.run(cases.host_wait_times_out)


def test_host_signals_release_device_waits_one_for_one(pool):
    pool.run(cases.host_signals_device, count=5)

"""The port_channel microbenchmark (pymscclpp/bench/port_channel.py) runs end to end on the simulator (tiny sizes): its kernels, barriers and
signal counts line up, so the GPU run cannot hang or crash on the bench's own logic."""

from __future__ import annotations

import pytest

from rankpool import RankPool

class _World:
    def __init__(self, comm):
        self.comm = comm

    def Barrier(self):
        self.comm.barrier()


def _run_bench(comm, state, transport):
    import pymscclpp.bench.port_channel as bench
    return bench.measure(comm, _World(comm), transport, 1 << 14, 1, 20, lat_iters=3, bw_total=1 << 15)


@pytest.mark.parametrize("hosts, transport", [(["A", "A"], "cuda_ipc"), (["A", "B"], "ethernet")])
def test_bench_measures_every_number(hosts, transport):
    env = {"PYMSCCLPP_TIMEOUT_S": "60", "PYMSCCLPP_SOCKET_ADDR": "127.0.0.1"}
    pool = RankPool(2, env=env, rank_env=[{"PYMSCCLPP_HOST_ID": h} for h in hosts])
    try:
        res = pool.run(_run_bench, timeout=300, transport=transport)
    finally:
        pool.close()
    first = res[0]
    for key in ("put_GBps", "put_ack_GBps", "put_signal_wait_1KB_oneway_us", "signal_wait_oneway_us",
                "push_to_completion_1KB_us", "proxy_noop_triggers_per_s", "proxy_signal_triggers_per_s"):
        assert first[key] > 0, key
        assert res[1][key] is None
    assert first["put_GBps_by_size"] == {str(1 << 14): first["put_GBps"]}

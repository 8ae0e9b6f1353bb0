"""PortChannel device code compiles for the GPU (sm_90 PTX) with the ordering its FIFO relies on."""

import pytest

from ptx.counts import ptx_counts as _ptx_counts


@pytest.fixture(scope="module")
def ptx_counts():
    return _ptx_counts("compile_port.py")


def test_every_port_channel_kernel_compiles(ptx_counts):
    kernels = {k for k, _ in ptx_counts}
    assert {"ring", "scatter", "poll", "bad_put", "bench_put_bw", "bench_pingpong",
            "bench_push_to_completion", "bench_trigger_storm", "peer_exchange_port"} <= kernels


def test_push_takes_a_ticket_atomically_and_publishes_the_trigger_with_release(ptx_counts):
    assert ptx_counts["signal", "atom.global.add.u64"] > 0
    assert ptx_counts["signal", "st.relaxed.sys.global.b64"] == ptx_counts["signal", "st.release.sys.global.b64"] > 0


def test_flush_and_wait_read_the_tail_and_token_with_acquire_within_a_time_budget(ptx_counts):
    assert ptx_counts["bench_push_to_completion", "ld.acquire.sys.global.b64"] > 0
    assert ptx_counts["bench_push_to_completion", "%globaltimer"] > 0
    assert ptx_counts["poll", "ld.acquire.sys.global.b64"] == 1 and ptx_counts["poll", "%globaltimer"] == 0

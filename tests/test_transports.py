"""Transport choice, proxy-link frames and the device-free half of IB (QP info, regions, work requests).

The IB traffic test runs only where pyverbs finds an RDMA device and skips with the reason otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pymscclpp.runtime.fifo import TRIGGER_DATA, TRIGGER_FLAG, TRIGGER_SYNC, Trigger
from pymscclpp.errors import InvalidUsageError, ProxyError
from pymscclpp.transports import (TRANSPORT_ENV, Offer, Transport, forced, frames, ib, ib_wire, negotiate,
                                  pack_offer, parse, propose, unpack_offer)

_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
IPC, ETH, IB = Transport.CUDA_IPC, Transport.ETHERNET, Transport.IB
NO_IB = "pyverbs finds no RDMA device on this host"


@pytest.mark.parametrize("same_host, ib_problem, expected", [
    (True, None, IPC), (True, NO_IB, IPC), (False, None, IB), (False, NO_IB, ETH)])
def test_topology_picks_ipc_on_one_host_else_ib_when_usable_else_ethernet(same_host, ib_problem, expected):
    assert propose(same_host, ib_problem, None).choice == expected


def test_env_var_forces_a_transport_below_explicit_overrides(monkeypatch):
    monkeypatch.setenv(TRANSPORT_ENV, "ethernet")
    assert forced(None, None) == ETH
    assert forced("cuda_ipc", "ib") == IPC
    assert forced(None, Transport.IB) == IB
    monkeypatch.setenv(TRANSPORT_ENV, "auto")
    assert forced(None, None) is None
    monkeypatch.setenv(TRANSPORT_ENV, "carrier-pigeon")
    with pytest.raises(InvalidUsageError, match="carrier-pigeon"):
        forced(None)


def test_forcing_ib_without_a_device_names_the_missing_piece_and_the_fallback():
    with pytest.raises(InvalidUsageError, match="pyverbs.*ethernet"):
        propose(False, NO_IB, IB)
    with pytest.raises(InvalidUsageError, match="another host"):
        propose(False, None, IPC)


def test_ib_problem_here_names_pyverbs_or_the_device_and_ethernet():
    reason = ib.problem()
    if reason is not None:
        assert ("pyverbs" in reason or "RDMA device" in reason) and "Ethernet" in reason


@pytest.mark.parametrize("mine, theirs, expected", [
    (Offer(IPC, False, False), Offer(IPC, False, False), IPC),
    (Offer(IB, False, True), Offer(ETH, False, False), ETH),         # one side lacks IB: both use Ethernet
    (Offer(ETH, True, True), Offer(IPC, False, True), ETH),          # a forced choice wins
    (Offer(IB, True, True), Offer(ETH, False, True), IB),
])
def test_negotiation_gives_both_sides_the_same_transport(mine, theirs, expected):
    assert negotiate(mine, theirs) == negotiate(theirs, mine) == expected


@pytest.mark.parametrize("mine, theirs", [
    (Offer(IB, True, True), Offer(ETH, True, True)),
    (Offer(IB, True, True), Offer(ETH, False, False)),
])
def test_negotiation_fails_clearly_when_the_sides_cannot_agree(mine, theirs):
    with pytest.raises(ProxyError):
        negotiate(mine, theirs)


@given(data=st.binary(max_size=8))
@_SETTINGS
def test_offer_wire_format_round_trips_or_fails_cleanly(data):
    for offer in (Offer(IPC, True, False), Offer(IB, False, True)):
        assert unpack_offer(pack_offer(offer)) == offer
    try:
        unpack_offer(data)
    except ProxyError:
        pass


@pytest.mark.parametrize("name, expected", [("auto", None), ("CUDA_IPC", IPC), ("eth", ETH), ("rdma", IB)])
def test_transport_names_parse_to_their_transport(name, expected):
    assert parse(name) == expected


@given(kind=st.sampled_from(list(frames.Kind)), a=st.integers(0, 2**32 - 1), b=st.integers(0, 2**64 - 1),
       length=st.integers(0, 2**33))
@_SETTINGS
def test_frame_headers_round_trip_when_valid(kind, a, b, length):
    raw = frames.encode(kind, a, b, length)
    try:
        h = frames.decode_header(raw)
    except ProxyError:
        assert (length > {frames.Kind.DATA: frames.MAX_DATA, frames.Kind.ABORT: frames.MAX_REASON}.get(kind, 0)
                or (kind != frames.Kind.DATA and (b or (kind != frames.Kind.FLAG and a))))
    else:
        assert h == frames.Header(kind, a, b, length)


@given(raw=st.binary(min_size=0, max_size=2 * frames.HEADER_SIZE))
@_SETTINGS
def test_frame_decoder_refuses_garbage_with_proxy_error_only(raw):
    try:
        frames.decode_header(raw)
    except ProxyError:
        pass


def test_abort_frames_carry_a_bounded_reason():
    frame = frames.abort_frame("x" * 10_000)
    h = frames.decode_header(frame[:frames.HEADER_SIZE])
    assert h.kind == frames.Kind.ABORT and h.length == frames.MAX_REASON == len(frame) - frames.HEADER_SIZE


qp_infos = st.builds(ib_wire.QpInfo, port=st.integers(1, 255), lid=st.integers(0, 2**16 - 1),
                     qpn=st.integers(0, 2**24 - 1), psn=st.integers(0, 2**24 - 1), gid=st.binary(min_size=16, max_size=16),
                     mtu=st.integers(1, 5), gid_index=st.integers(0, 255), is_global=st.booleans())


@given(info=qp_infos, junk=st.binary(max_size=48))
@_SETTINGS
def test_qp_info_wire_format_round_trips_and_refuses_junk(info, junk):
    assert ib_wire.unpack_qp_info(ib_wire.pack_qp_info(info)) == info
    try:
        ib_wire.unpack_qp_info(junk)
    except ProxyError:
        pass


def test_region_table_translates_within_bounds_only():
    table = ib_wire.RegionTable()
    table.add(3, ib_wire.Region(0x1000, 256, 11, 22))
    assert table.address(3, 16, 240) == 0x1010
    for offset, nbytes in ((17, 240), (-1, 4), (256, 1)):
        with pytest.raises(ProxyError, match="memory 3"):
            table.address(3, offset, nbytes)
    with pytest.raises(ProxyError, match="memory 4"):
        table.address(4, 0, 1)
    region = ib_wire.Region(0x2000, 64, 0, 99)
    assert ib_wire.unpack_region(ib_wire.pack_region(ib_wire.Region(0x2000, 64, 5, 99))) == region


def test_trigger_becomes_rdma_write_then_atomic_add_of_the_peer_token():
    table = ib_wire.RegionTable()
    table.add(0, ib_wire.Region(0x10000, 4096, 7, 0))        # local source
    table.add(1, ib_wire.Region(0xA0000, 4096, 0, 42))       # the peer's inbox
    token, scratch = ib_wire.Region(0xF0008, 8, 0, 43), ib_wire.Region(0x500, 8, 9, 0)
    t = Trigger(TRIGGER_DATA | TRIGGER_FLAG | TRIGGER_SYNC, 100, 8, 16, 0, 1, 0)
    assert ib_wire.work_requests(t, table, token, scratch) == [
        ib_wire.WorkRequest("write", 0x10008, 7, 100, 0xA0010, 42, 0),
        ib_wire.WorkRequest("fetch_add", 0x500, 9, 8, 0xF0008, 43, 1)]
    assert ib_wire.work_requests(t._replace(type=TRIGGER_SYNC), table, token, scratch) == []
    with pytest.raises(ProxyError):
        ib_wire.work_requests(t._replace(dst_offset=4000), table, token, scratch)


@pytest.mark.skipif(ib.problem() is not None, reason=f"IB traffic needs an RDMA device: {ib.problem()}")
def test_ib_loopback_write_and_atomic_add():
    ep = ib.IbEndpoint()
    a, b = ib.IbQueuePair(ep), ib.IbQueuePair(ep)
    a.connect(b.info())
    b.connect(a.info())
    src, dst = np.arange(256, dtype=np.uint8), np.zeros(256, np.uint8)
    tok, scratch = np.zeros(1, np.uint64), np.zeros(1, np.uint64)
    table = ib_wire.RegionTable()
    table.add(0, ep.register(src.ctypes.data, src.nbytes))
    table.add(1, ep.register(dst.ctypes.data, dst.nbytes))
    token = ep.register(tok.ctypes.data, 8)
    wrs = ib_wire.work_requests(Trigger(TRIGGER_DATA | TRIGGER_FLAG, 128, 64, 32, 0, 1, 0), table, token,
                                ep.register(scratch.ctypes.data, 8))
    a.post(wrs, 10.0)
    a.flush(10.0)
    np.testing.assert_array_equal(dst[32:160], src[64:192])
    assert int(tok[0]) == 1
    a.close()
    b.close()
    ep.close()


def test_double_buffered_staging_moves_exact_bytes_with_async_copies(monkeypatch):
    """The GPU staging path of the Ethernet transport, with copies that only happen at the next stream
    sync (as async copies may): every chunk is synchronized before it is sent or its buffer reused."""
    import ctypes
    import socket
    import threading

    import numpy as np

    from pymscclpp.transports import driver, ethernet, frames
    from pymscclpp.transports.link import Link

    queues: dict = {1: [], 2: []}

    def copy_async(dst, src, n, stream):
        queues[stream].append((dst, src, n))
        return 0

    def sync(stream):
        for dst, src, n in queues[stream]:
            ctypes.memmove(dst, src, n)
        queues[stream].clear()
        return 0

    for name in ("copy_dtoh_async", "copy_htod_async"):
        monkeypatch.setattr(driver, name, copy_async, raising=False)
    monkeypatch.setattr(driver, "stream_sync", sync, raising=False)

    def stager(stream):
        st = ethernet.Stager.__new__(ethernet.Stager)
        st.chunk, st.stream = 1000, stream
        st.bufs = [np.zeros(1000, np.uint8) for _ in range(2)]
        st.addrs = [int(b.ctypes.data) for b in st.bufs]
        return st

    a, b = socket.socketpair()
    tx, rx = Link(a, 0, 1, 10.0), Link(b, 1, 0, 10.0)
    try:
        for nbytes in (0, 1, 999, 1000, 1001, 4321):
            src = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
            dst = np.zeros(nbytes + 1, np.uint8)
            flag = frames.encode(frames.Kind.FLAG, 7)
            sender = threading.Thread(target=stager(1).send, args=(tx, 3, 0, int(src.ctypes.data), nbytes, flag))
            sender.start()
            h = frames.decode_header(rx.read_exact(frames.HEADER_SIZE))
            assert (h.kind, h.a, h.length) == (frames.Kind.DATA, 3, nbytes)
            stager(2).receive(rx, int(dst.ctypes.data), nbytes)
            assert frames.decode_header(rx.read_exact(frames.HEADER_SIZE)) == (frames.Kind.FLAG, 7, 0, 0)
            sender.join()
            np.testing.assert_array_equal(dst[:nbytes], src)
            assert dst[nbytes] == 0 and not queues[1] and not queues[2]
    finally:
        tx.close()
        rx.close()

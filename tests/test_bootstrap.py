"""Bootstrap behaviour: LocalBootstrap and TcpBootstrap (threads and spawned processes), on loopback only."""

from __future__ import annotations

import gc
import multiprocessing
import os
import socket
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pymscclpp.errors import BootstrapError, CommTimeoutError, InvalidUsageError, PeerDisconnectedError
from pymscclpp.runtime.bootstrap import Bootstrap, TcpBootstrap, UniqueId, get_unique_id
from pymscclpp.runtime.bootstrap.local import LocalBootstrap
from pymscclpp.runtime.bootstrap import sockets, wire
from pymscclpp.runtime.deadline import Deadline

KINDS = ["local", "tcp"]
SIZES = [1, 2, 3, 4]
WAIT_S = 20.0  # generous budget of waits that should succeed at once


def run_ranks(fn, items):
    """``fn(item)`` for every item on its own thread; the results in order, or the first error raised."""
    items = list(items)
    with ThreadPoolExecutor(len(items)) as pool:
        futures = [pool.submit(fn, item) for item in items]
        return [f.result(timeout=WAIT_S) for f in futures]


def make_group(kind: str, n: int, timeout: float = WAIT_S) -> list[Bootstrap]:
    if kind == "local":
        return LocalBootstrap.create(n, timeout=timeout)
    uid = get_unique_id("127.0.0.1")
    return run_ranks(lambda rank: TcpBootstrap(rank, n, uid, timeout=timeout), range(n))


@pytest.fixture
def group():
    """A factory of bootstrap groups that are closed after the test."""
    made: list[Bootstrap] = []

    def factory(kind: str, n: int, timeout: float = WAIT_S) -> list[Bootstrap]:
        bs = make_group(kind, n, timeout)
        made.extend(bs)
        return bs

    yield factory
    for b in made:
        b.close()


@pytest.fixture(scope="module")
def shared_groups():
    """Groups kept open across hypothesis examples, made on first use: ``get(kind, n)``."""
    cache: dict[tuple[str, int], list[Bootstrap]] = {}

    def get(kind: str, n: int) -> list[Bootstrap]:
        if (kind, n) not in cache:
            cache[(kind, n)] = make_group(kind, n)
        return cache[(kind, n)]

    yield get
    for bs in cache.values():
        for b in bs:
            b.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ipv6_loopback_works() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


# ---------------------------------------------------------------- collectives and messages

@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", KINDS)
def test_all_gather_returns_every_ranks_data_in_rank_order(group, kind, n):
    bs = group(kind, n)
    out = run_ranks(lambda b: b.all_gather(b"rank-%d" % b.rank * (b.rank + 1)), bs)
    assert out == [[b"rank-%d" % r * (r + 1) for r in range(n)]] * n
    assert run_ranks(lambda b: b.all_gather(b""), bs) == [[b""] * n] * n


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", KINDS)
def test_barrier_releases_no_rank_before_the_last_one_enters(group, kind, n):
    bs = group(kind, n)

    def enter(b):
        time.sleep(0.02 * b.rank)
        entered = time.monotonic()
        b.barrier()
        return entered, time.monotonic()

    times = run_ranks(enter, bs)
    assert min(left for _, left in times) >= max(entered for entered, _ in times)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", KINDS)
def test_send_recv_delivers_between_every_pair(group, kind, n):
    bs = group(kind, n)
    for b in bs:
        for peer in range(n):
            if peer != b.rank:
                b.send(b"%d->%d" % (b.rank, peer), peer, tag=b.rank)
    for b in bs:
        for peer in range(n):
            if peer != b.rank:
                assert b.recv(peer, tag=peer) == b"%d->%d" % (peer, b.rank)


@pytest.mark.parametrize("kind", KINDS)
def test_messages_with_one_tag_arrive_in_send_order(group, kind):
    a, b = group(kind, 2)
    for i in range(50):
        a.send(b"%d" % i, 1, 3)
    assert [b.recv(0, 3) for _ in range(50)] == [b"%d" % i for i in range(50)]


@pytest.mark.parametrize("kind", KINDS)
def test_messages_with_different_tags_can_be_received_in_any_order(group, kind):
    a, b = group(kind, 2)
    for tag in (0, 1, 2**63 - 1, 42):
        a.send(b"tag %d" % tag, 1, tag)
    for tag in (42, 2**63 - 1, 0, 1):
        assert b.recv(0, tag) == b"tag %d" % tag


@pytest.mark.parametrize("kind", KINDS)
def test_concurrent_receivers_on_different_tags_each_get_their_message(group, kind):
    a, b = group(kind, 2)
    with ThreadPoolExecutor(2) as pool:
        waiting = [pool.submit(b.recv, 0, tag) for tag in (1, 2)]
        time.sleep(0.05)
        a.send(b"two", 1, 2)
        a.send(b"one", 1, 1)
        assert [f.result(timeout=WAIT_S) for f in waiting] == [b"one", b"two"]


@pytest.mark.parametrize("kind", KINDS)
def test_bytes_like_payloads_arrive_as_bytes(group, kind):
    a, b = group(kind, 2)
    a.send(bytearray(b"ba"), 1, 0)
    a.send(memoryview(b"xmvx")[1:3], 1, 0)
    assert b.recv(0, 0) == b"ba" and b.recv(0, 0) == b"mv"
    gathered = run_ranks(lambda x: x.all_gather(bytearray(b"q")), [a, b])[0]
    assert gathered == [b"q", b"q"] and all(type(g) is bytes for g in gathered)


def test_large_messages_cross_tcp_intact(group):
    a, b = group("tcp", 2)
    big = os.urandom(5 << 20)
    a.send(big, 1, 9)
    assert b.recv(0, 9) == big
    assert run_ranks(lambda x: x.all_gather(big[x.rank:]), [a, b]) == [[big, big[1:]]] * 2


@pytest.mark.parametrize("kind", KINDS)
def test_job_token_is_16_bytes_equal_on_all_ranks_and_new_per_job(group, kind):
    bs = group(kind, 3)
    assert len(bs[0].job_token) == 16 and {b.job_token for b in bs} == {bs[0].job_token}
    assert group(kind, 1)[0].job_token != bs[0].job_token


# ---------------------------------------------------------------- validation and lifecycle

@pytest.mark.parametrize("call, match", [
    (lambda b: b.send(b"x", 2, 0), "peer"),
    (lambda b: b.send(b"x", -1, 0), "peer"),
    (lambda b: b.send(b"x", 0, 0), "this rank"),
    (lambda b: b.send(b"x", "1", 0), "peer"),
    (lambda b: b.send(b"x", True, 0), "peer"),
    (lambda b: b.send(b"x", 1, -1), "tag"),
    (lambda b: b.send(b"x", 1, 2**63), "tag"),
    (lambda b: b.send(b"x", 1, 1.0), "tag"),
    (lambda b: b.send("text", 1, 0), "bytes-like"),
    (lambda b: b.send(5, 1, 0), "bytes-like"),
    (lambda b: b.recv(1, 0, timeout=-1), "timeout"),
    (lambda b: b.recv(1, 0, timeout=float("nan")), "timeout"),
    (lambda b: b.all_gather("text"), "bytes-like"),
])
def test_bad_arguments_raise_invalid_usage_error(group, call, match):
    b = group("local", 2)[0]
    with pytest.raises(InvalidUsageError, match=match):
        call(b)


def test_bad_group_shapes_raise_invalid_usage_error():
    uid = UniqueId("127.0.0.1", 1, bytes(16))
    for make in (lambda: LocalBootstrap.create(0), lambda: TcpBootstrap(2, 2, uid),
                 lambda: TcpBootstrap(0, 0, uid), lambda: TcpBootstrap(0, 1, uid.hex())):
        with pytest.raises(InvalidUsageError):
            make()


@pytest.mark.parametrize("kind", KINDS)
def test_calls_after_close_raise_bootstrap_error(group, kind):
    a, _ = group(kind, 2)
    with a:
        pass
    a.close()
    for call in (lambda: a.send(b"x", 1, 0), lambda: a.recv(1, 0), a.barrier, lambda: a.all_gather(b"")):
        with pytest.raises(BootstrapError, match="closed"):
            call()


@pytest.mark.parametrize("kind", KINDS)
def test_close_wakes_a_pending_recv_on_the_same_rank(group, kind):
    a, _ = group(kind, 2)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(a.recv, 1, 0)
        time.sleep(0.05)
        a.close()
        with pytest.raises(BootstrapError, match="closed"):
            waiting.result(timeout=5)


def test_close_leaves_no_threads_and_no_resource_warnings():
    before = set(threading.enumerate())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for n in SIZES:
            bs = make_group("tcp", n)
            run_ranks(lambda b: b.all_gather(b"x"), bs)
            for b in bs:
                b.close()
        del bs, b
        gc.collect()
    assert set(threading.enumerate()) == before
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


# ---------------------------------------------------------------- timeouts and lost peers

@pytest.mark.parametrize("kind", KINDS)
def test_recv_timeout_raises_comm_timeout_naming_rank_peer_tag_and_op(group, kind):
    _, b = group(kind, 2)
    start = time.monotonic()
    with pytest.raises(CommTimeoutError) as err:
        b.recv(0, 7, timeout=0.2)
    assert 0.2 <= time.monotonic() - start < 3
    assert str(err.value) == "rank 1: recv from peer 0 tag 7 timed out after 0.2 s"
    assert isinstance(err.value, TimeoutError)


@pytest.mark.parametrize("kind", KINDS)
def test_all_gather_timeout_names_what_was_gathered(group, kind):
    b, _ = group(kind, 2)
    with pytest.raises(CommTimeoutError, match=r"rank 0: all_gather of host ids.* timed out after 0.2 s"):
        b.all_gather(b"lonely", timeout=0.2, what="host ids")


@pytest.mark.parametrize("kind", KINDS)
def test_default_timeout_comes_from_pymscclpp_timeout_s(monkeypatch, kind):
    monkeypatch.setenv("PYMSCCLPP_TIMEOUT_S", "0.3")
    bs = make_group(kind, 2, timeout=None)
    try:
        assert bs[0].timeout == 0.3
        with pytest.raises(CommTimeoutError, match=r"rank 0: all_gather: recv from peer 1 timed out after 0.3 s"):
            bs[0].all_gather(b"lonely")
        with pytest.raises(CommTimeoutError, match=r"rank 1: barrier: recv from peer 0"):
            bs[1].barrier()
    finally:
        for b in bs:
            b.close()


@pytest.mark.parametrize("kind", KINDS)
def test_peer_close_fails_pending_and_later_recvs_quickly_after_queued_messages(group, kind):
    a, b = group(kind, 2, timeout=60)
    a.send(b"last words", 1, 4)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(b.recv, 0, 5)
        time.sleep(0.05)
        start = time.monotonic()
        a.close()
        with pytest.raises(PeerDisconnectedError, match="rank 1: recv from peer 0 tag 5: peer 0 disconnected"):
            waiting.result(timeout=5)
    assert time.monotonic() - start < 5
    assert b.recv(0, 4) == b"last words"
    with pytest.raises(PeerDisconnectedError):
        b.recv(0, 4)
    with pytest.raises(PeerDisconnectedError):
        b.all_gather(b"")
    with pytest.raises(PeerDisconnectedError):
        for _ in range(100):  # TCP may buffer the first sends to a closed peer
            b.send(b"anyone?", 0, 1)
            time.sleep(0.01)


def _rank_that_hangs(uid_hex: str) -> None:
    bs = TcpBootstrap(1, 2, UniqueId.from_hex(uid_hex), timeout=60)
    bs.barrier()
    time.sleep(60)


def test_peer_process_killed_surfaces_peer_disconnected_within_5_s():
    ctx = multiprocessing.get_context("spawn")
    uid = get_unique_id("127.0.0.1")
    proc = ctx.Process(target=_rank_that_hangs, args=(uid.hex(),), daemon=True)
    proc.start()
    try:
        with TcpBootstrap(0, 2, uid, timeout=60) as bs:
            bs.barrier()
            killer = threading.Timer(0.1, proc.kill)
            killer.start()
            start = time.monotonic()
            with pytest.raises(PeerDisconnectedError, match="rank 0: recv from peer 1 tag 0: peer 1 disconnected"):
                bs.recv(1, 0)
            assert time.monotonic() - start < 5
            killer.join()
    finally:
        proc.kill()
        proc.join(10)


def test_tcp_setup_with_a_missing_rank_times_out_and_leaves_no_threads():
    before = set(threading.enumerate())
    uid = get_unique_id("127.0.0.1")
    start = time.monotonic()
    with pytest.raises(CommTimeoutError, match=r"rank 0: rendezvous with root 127\.0\.0\.1:\d+ timed out after 0.3 s"):
        TcpBootstrap(0, 2, uid, timeout=0.3)
    assert time.monotonic() - start < 3
    assert set(threading.enumerate()) == before


def test_unused_root_gives_up_after_pymscclpp_timeout_s(monkeypatch, caplog):
    before = set(threading.enumerate())
    monkeypatch.setenv("PYMSCCLPP_TIMEOUT_S", "0.2")
    get_unique_id("127.0.0.1")
    deadline = time.monotonic() + 5
    while set(threading.enumerate()) != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(threading.enumerate()) == before
    assert "gave up after the ranks' budget of 0.2 s and 1.0 s of grace: 0 rank(s) registered, job size unknown" in caplog.text


# ---------------------------------------------------------------- size limits

@pytest.mark.parametrize("kind", KINDS)
def test_message_over_the_size_limit_is_rejected_at_send(monkeypatch, kind):
    monkeypatch.setenv(wire.MAX_PAYLOAD_ENV, "1024")
    bs = make_group(kind, 2)
    try:
        with pytest.raises(InvalidUsageError, match="1025 bytes exceeds the bootstrap limit of 1024 bytes"):
            bs[0].send(bytes(1025), 1, 0)
        with pytest.raises(InvalidUsageError, match=wire.MAX_PAYLOAD_ENV):
            bs[0].all_gather(bytes(2000))
        bs[0].send(bytes(1024), 1, 0)
        assert bs[1].recv(0, 0) == bytes(1024)
    finally:
        for b in bs:
            b.close()


# ---------------------------------------------------------------- refusing strangers

def _raw_hello(sock: socket.socket, token: bytes, src: int) -> None:
    sock.sendall(wire.encode(wire.Kind.HELLO, src, 0, token))


def _closed_by_other_side(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("opening", [
    lambda s, uid: _raw_hello(s, bytes(16), 0),
    lambda s, uid: s.sendall(wire.encode(wire.Kind.REGISTER, 0, 0, wire.encode_register(1, "127.0.0.1", 1))),
    lambda s, uid: s.sendall(b"GET / HTTP/1.1\r\n\r\n" + bytes(32)),
    lambda s, uid: s.sendall(wire.encode(wire.Kind.HELLO, 0, 0, uid.token + b"!")),
], ids=["wrong-token", "no-hello", "garbage", "long-hello"])
def test_root_refuses_connection_without_the_job_token_and_job_keeps_working(group, caplog, opening):
    uid = get_unique_id("127.0.0.1")
    with socket.create_connection((uid.host, uid.port), timeout=5) as stranger:
        opening(stranger, uid)
        assert _closed_by_other_side(stranger)
    bs = run_ranks(lambda rank: TcpBootstrap(rank, 2, uid, timeout=WAIT_S), range(2))
    try:
        assert run_ranks(lambda b: b.all_gather(b"%d" % b.rank), bs) == [[b"0", b"1"]] * 2
    finally:
        for b in bs:
            b.close()
    assert "refused connection" in caplog.text


class FakeRank1:
    """Rank 1 of 2 driven by hand, speaking the wire protocol to a real rank 0."""

    def __init__(self, uid: UniqueId) -> None:
        deadline = Deadline(WAIT_S)
        with sockets.connect(uid.host, uid.port, deadline, 1, "test") as root:
            sockets.offer_hello(root, uid.token, 1, sockets.ROOT_SRC, deadline, "test")
            root.sendall(wire.encode(wire.Kind.REGISTER, 1, 0, wire.encode_register(2, "127.0.0.1", 1)))
            table = sockets.read_frame(root, deadline, 1 << 10, 1, "test")
        self.rank0_addr = wire.decode_table(table.payload, 2)[0]
        self.uid = uid

    def connect(self) -> socket.socket:
        return socket.create_connection(self.rank0_addr, timeout=5)


def _rank0_with_fake_rank1(uid: UniqueId, caplog):
    """A real rank 0 and a FakeRank1 that first tries a wrong token, then connects properly."""
    with ThreadPoolExecutor(1) as pool:
        rank0 = pool.submit(TcpBootstrap, 0, 2, uid, WAIT_S)
        fake = FakeRank1(uid)
        with fake.connect() as stranger:
            _raw_hello(stranger, bytes(16), 1)
            assert _closed_by_other_side(stranger)
        conn = fake.connect()
        sockets.offer_hello(conn, uid.token, 1, 0, Deadline(5), "test")
        bs = rank0.result(timeout=WAIT_S)
    assert "refused a bootstrap connection" in caplog.text and "wrong job token" in caplog.text
    return bs, conn


def test_rank_refuses_peer_with_wrong_token_then_accepts_the_right_one(caplog):
    bs, conn = _rank0_with_fake_rank1(get_unique_id("127.0.0.1"), caplog)
    with bs, conn:
        conn.sendall(wire.encode(wire.Kind.DATA, 1, 11, b"from the fake"))
        assert bs.recv(1, 11) == b"from the fake"
        bs.send(b"to the fake", 1, 12)
        assert sockets.read_frame(conn, Deadline(5), 100, 1, "test") == (wire.Kind.DATA, 0, 12, b"to the fake")


@pytest.mark.parametrize("frame, reason", [
    (b"JUNK" + bytes(wire.HEADER_SIZE - 4), "bad bootstrap frame magic"),
    (wire.encode(wire.Kind.DATA, 1, 0, b"")[:-8] + (1 << 40).to_bytes(8, "big"), "exceeds the limit"),
    (wire.encode(wire.Kind.HELLO, 1, 0, bytes(16)), "unexpected HELLO"),
    (wire.encode(wire.Kind.DATA, 0, 0, b"spoofed"), "source 0"),
], ids=["bad-magic", "oversize", "late-hello", "wrong-source"])
def test_malformed_frame_from_a_peer_closes_that_connection(caplog, frame, reason):
    bs, conn = _rank0_with_fake_rank1(get_unique_id("127.0.0.1"), caplog)
    with bs, conn:
        conn.sendall(wire.encode(wire.Kind.DATA, 1, 1, b"fine") + frame)
        assert bs.recv(1, 1) == b"fine"
        start = time.monotonic()
        with pytest.raises(PeerDisconnectedError, match=f"peer 1 disconnected \\(malformed frame: .*{reason}"):
            bs.recv(1, 2)
        assert time.monotonic() - start < 5
        assert _closed_by_other_side(conn)


# ---------------------------------------------------------------- unique ids and the environment

@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "192.168.10.20", "2001:db8::5"])
def test_unique_id_round_trips_through_128_bytes_and_hex(host):
    uid = UniqueId(host, 29500, os.urandom(16))
    raw = uid.to_bytes()
    assert len(raw) == UniqueId.SIZE == 128
    assert UniqueId.from_bytes(raw) == uid == UniqueId.from_hex(uid.hex())
    assert UniqueId.from_bytes(bytearray(raw)) == uid


@pytest.mark.parametrize("raw", [b"", bytes(128), b"PMID" + bytes(124), UniqueId("::1", 1, bytes(16)).to_bytes()[:-1] + b"!"])
def test_unique_id_from_bad_bytes_raises_invalid_usage_error(raw):
    with pytest.raises(InvalidUsageError):
        UniqueId.from_bytes(raw)


def test_unique_id_refuses_bad_fields():
    for args in (("localhost", 1, bytes(16)), ("127.0.0.1", 0, bytes(16)), ("127.0.0.1", 1, bytes(15))):
        with pytest.raises(InvalidUsageError):
            UniqueId(*args)
    with pytest.raises(InvalidUsageError):
        UniqueId.from_hex("not hex")


def test_get_unique_id_listens_on_pymscclpp_socket_addr(monkeypatch):
    monkeypatch.setenv("PYMSCCLPP_SOCKET_ADDR", "127.0.0.1")
    uid = get_unique_id()
    assert uid.host == "127.0.0.1" and uid.port > 0
    with TcpBootstrap(0, 1, uid) as b:
        assert b.all_gather(b"solo") == [b"solo"]
    monkeypatch.setenv("PYMSCCLPP_SOCKET_ADDR", "not an address!")
    with pytest.raises(InvalidUsageError, match="PYMSCCLPP_SOCKET_ADDR"):
        get_unique_id()


@pytest.mark.skipif(not ipv6_loopback_works(), reason="no IPv6 loopback here")
def test_tcp_bootstrap_works_over_ipv6_loopback():
    uid = get_unique_id("::1")
    assert UniqueId.from_bytes(uid.to_bytes()).host == "::1"
    bs = run_ranks(lambda rank: TcpBootstrap(rank, 3, uid, timeout=WAIT_S), range(3))
    try:
        assert run_ranks(lambda b: b.all_gather(b"%d" % b.rank), bs) == [[b"0", b"1", b"2"]] * 3
    finally:
        for b in bs:
            b.close()


def torchrun_env(rank: int, size: int, port: int, **extra: str) -> dict[str, str]:
    return {"RANK": str(rank), "WORLD_SIZE": str(size), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), **extra}


def test_from_env_builds_a_working_group_with_rank_0_as_root():
    port = free_port()
    bs = run_ranks(lambda rank: TcpBootstrap.from_env(torchrun_env(rank, 3, port), timeout=WAIT_S), [2, 1, 0])
    try:
        assert sorted(b.rank for b in bs) == [0, 1, 2]
        assert len({b.job_token for b in bs}) == 1
        assert run_ranks(lambda b: b.all_gather(b"%d" % b.rank), bs) == [[b"0", b"1", b"2"]] * 3
    finally:
        for b in bs:
            b.close()


def test_from_env_job_token_is_pymscclpp_job_token_or_derived_per_run(monkeypatch):
    def token(**extra):
        with TcpBootstrap.from_env(torchrun_env(0, 1, free_port(), **extra)) as b:
            return b.job_token

    assert token(PYMSCCLPP_JOB_TOKEN="ab" * 16) == bytes([0xAB]) * 16
    derived = token(TORCHELASTIC_RUN_ID="run-1")
    assert len(derived) == 16 and derived != token(TORCHELASTIC_RUN_ID="run-2")
    port = free_port()
    for key, value in torchrun_env(0, 1, port).items():
        monkeypatch.setenv(key, value)
    with TcpBootstrap.from_env() as b:
        assert b.rank == 0 and b.size == 1


@pytest.mark.parametrize("change, variable", [
    ({"RANK": None}, "RANK"),
    ({"RANK": "first"}, "RANK"),
    ({"RANK": "2"}, "RANK"),
    ({"RANK": "-1"}, "RANK"),
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE"),
    ({"WORLD_SIZE": None}, "WORLD_SIZE"),
    ({"MASTER_ADDR": None}, "MASTER_ADDR"),
    ({"MASTER_ADDR": "no host here!"}, "MASTER_ADDR"),
    ({"MASTER_PORT": "70000"}, "MASTER_PORT"),
    ({"MASTER_PORT": "http"}, "MASTER_PORT"),
    ({"PYMSCCLPP_JOB_TOKEN": "abc"}, "PYMSCCLPP_JOB_TOKEN"),
    ({"PYMSCCLPP_JOB_TOKEN": "zz" * 16}, "PYMSCCLPP_JOB_TOKEN"),
])
def test_from_env_rejects_bad_or_missing_values_naming_the_variable(change, variable):
    env = torchrun_env(1, 2, 29500)
    for key, value in change.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    with pytest.raises(InvalidUsageError, match=variable):
        TcpBootstrap.from_env(env)


# ---------------------------------------------------------------- ranks as processes

def _process_rank(rank: int, size: int, uid_hex: str, results) -> None:
    with TcpBootstrap(rank, size, UniqueId.from_hex(uid_hex), timeout=WAIT_S) as bs:
        gathered = bs.all_gather(b"proc-%d" % rank)
        got = None
        if size > 1:
            bs.send(b"from %d" % rank, (rank + 1) % size, 1)
            got = bs.recv((rank - 1) % size, 1)
        bs.barrier()
        results.put((rank, gathered, got, bs.job_token))


@pytest.mark.parametrize("n", [1, 3, 4])
def test_tcp_ranks_as_spawned_processes_exchange_messages(n):
    ctx = multiprocessing.get_context("spawn")
    uid = get_unique_id("127.0.0.1")  # this process only hosts the root
    results = ctx.Queue()
    procs = [ctx.Process(target=_process_rank, args=(r, n, uid.hex(), results), daemon=True) for r in range(n)]
    for p in procs:
        p.start()
    try:
        got = sorted(results.get(timeout=60) for _ in range(n))
        for p in procs:
            p.join(WAIT_S)
            assert p.exitcode == 0
    finally:
        for p in procs:
            p.kill()
            p.join()
        results.close()
        results.join_thread()
    assert [g[0] for g in got] == list(range(n))
    assert all(g[1] == [b"proc-%d" % r for r in range(n)] for g in got)
    assert all(g[3] == uid.token for g in got)
    if n > 1:
        assert [g[2] for g in got] == [b"from %d" % ((r - 1) % n) for r in range(n)]


# ---------------------------------------------------------------- properties

messages = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from([0, 1, 7, 2**63 - 1]),
                              st.binary(max_size=64)), max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), n=st.integers(2, 4), sent=messages, data=st.data())
def test_property_messages_arrive_in_send_order_per_pair_and_tag(shared_groups, kind, n, sent, data):
    bs = shared_groups(kind, n)
    sent = [(s % n, d % n, tag, payload) for s, d, tag, payload in sent if s % n != d % n]
    # draw the receive order before sending: an example hypothesis aborts must leave no message behind
    order = data.draw(st.permutations([(dst, src, tag) for src, dst, tag, _ in sent]))
    queues: dict[tuple[int, int, int], list[bytes]] = {}
    for src, dst, tag, payload in sent:
        bs[src].send(payload, dst, tag)
        queues.setdefault((dst, src, tag), []).append(payload)
    got: dict[tuple[int, int, int], list[bytes]] = {}
    for dst, src, tag in order:
        got.setdefault((dst, src, tag), []).append(bs[dst].recv(src, tag, timeout=WAIT_S))
    assert got == queues


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), n=st.integers(1, 4), payloads=st.lists(st.binary(max_size=512), min_size=4, max_size=4))
def test_property_all_gather_returns_every_ranks_payload(shared_groups, kind, n, payloads):
    bs = shared_groups(kind, n)
    assert run_ranks(lambda b: b.all_gather(payloads[b.rank]), bs) == [payloads[:n]] * n

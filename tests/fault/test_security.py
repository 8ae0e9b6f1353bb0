"""Security of what comes off the network: job tokens, no unpickling or eval of received data, bounded
message sizes, and fuzzed parsers that raise only their own error type."""

from __future__ import annotations

import ast
import pathlib
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymscclpp
from pymscclpp.errors import BootstrapError, InvalidUsageError, ProxyError, RegistrationError
from pymscclpp.runtime.bootstrap import TcpBootstrap, UniqueId, get_unique_id, sockets, wire

PACKAGE = pathlib.Path(pymscclpp.__file__).parent
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "jsonpickle", "yaml"}
UNSAFE_CALLS = {"eval", "exec", "__import__"}
MPI_PICKLING = {"send", "recv", "isend", "irecv", "bcast", "gather", "allgather", "scatter", "alltoall",
                "sendrecv", "reduce", "allreduce", "ibcast", "mprobe"}


# pymscclpp.testing pickles test functions and their results through multiprocessing pipes to the rank processes
# it started itself (as multiprocessing does): nothing it unpickles comes off the network or from a peer
LOCAL_PICKLING = PACKAGE / "testing"


def _python_files():
    return sorted(PACKAGE.rglob("*.py"))


def _network_facing_files():
    return [p for p in _python_files() if LOCAL_PICKLING not in p.parents]


def test_package_never_imports_pickle_marshal_or_yaml_and_never_calls_eval_or_exec():
    found = []
    for path in _network_facing_files():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(path, node.lineno, a.name) for a in node.names if a.name.split(".")[0] in UNSAFE_MODULES]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNSAFE_MODULES:
                found.append((path, node.lineno, node.module))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in UNSAFE_CALLS:
                found.append((path, node.lineno, node.func.id))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load"
                  and any(k.arg == "allow_pickle" for k in node.keywords)):
                found.append((path, node.lineno, "np.load(allow_pickle=...)"))
    assert len(_python_files()) > 30 and not found, found


def test_mpi_bootstrap_uses_only_buffer_calls_never_mpi4py_pickling_ones():
    tree = ast.parse((PACKAGE / "runtime" / "bootstrap" / "mpi.py").read_text())
    calls = [n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and isinstance(n.func.value, ast.Attribute) and n.func.value.attr == "_comm"]
    assert calls and not [c for c in calls if c in MPI_PICKLING], calls


def test_plan_name_cannot_inject_code_into_generated_kernels():
    from pymscclpp.executor import ExecutionPlan
    from pymscclpp.executor.codegen import KernelSpec
    from pymscclpp.language.programs import PROGRAMS
    plan = PROGRAMS["allreduce_allpairs"](2)
    plan["name"] = 'x"""+__import__("os").getcwd()+"""'
    source = KernelSpec(ExecutionPlan.from_plan(plan), 0, 0, 0, 4, 0, 0).source()
    calls = [n.func.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == "__import__"]
    assert not calls, "the plan name became code in the generated kernel module"


# ---------------------------------------------------------------- job token and strangers

def _closed_by_other_side(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _job(uid, n=2, timeout=20.0):
    with ThreadPoolExecutor(n) as pool:
        return [f.result(timeout=30) for f in [pool.submit(TcpBootstrap, r, n, uid, timeout) for r in range(n)]]


@pytest.mark.parametrize("opening", [
    lambda uid: wire.encode(wire.Kind.HELLO, 0, 0, bytes(16)),                       # wrong token
    lambda uid: wire.encode(wire.Kind.HELLO, 0, 0, uid.token[:15]),                  # short token
    lambda uid: wire.encode(wire.Kind.DATA, 0, 7, b"no hello first"),                # skips the handshake
    lambda uid: wire.encode(wire.Kind.HELLO, 0, 0, uid.token)[:-8] + (1 << 40).to_bytes(8, "big"),  # huge length
], ids=["wrong-token", "short-token", "data-before-hello", "oversize-hello"])
def test_root_refuses_a_stranger_without_the_job_token_and_the_job_still_forms(opening, caplog):
    uid = get_unique_id("127.0.0.1")
    with socket.create_connection((uid.host, uid.port), timeout=5) as stranger:
        stranger.sendall(opening(uid))
        assert _closed_by_other_side(stranger)
    group = _job(uid)
    try:
        assert [b.job_token for b in group] == [uid.token] * 2
    finally:
        for b in group:
            b.close()
    assert "refused connection" in caplog.text


def test_oversize_register_frame_with_the_right_token_is_refused_without_reading_it(caplog):
    uid = get_unique_id("127.0.0.1")
    with socket.create_connection((uid.host, uid.port), timeout=5) as stranger:
        stranger.sendall(wire.encode(wire.Kind.HELLO, 0, 0, uid.token))
        sockets.read_frame(stranger, sockets.Deadline(5), 64, 0, "test")  # the root's HELLO reply
        header = wire.encode(wire.Kind.REGISTER, 0, 0, b"")[:-8] + (1 << 32).to_bytes(8, "big")
        stranger.sendall(header)
        assert _closed_by_other_side(stranger)
    group = _job(uid)
    for b in group:
        b.close()
    assert "exceeds the limit" in caplog.text


def test_silent_stranger_cannot_stall_setup_longer_than_the_hello_wait(monkeypatch):
    monkeypatch.setattr(sockets, "HELLO_WAIT_S", 1.0)
    uid = get_unique_id("127.0.0.1")
    with socket.create_connection((uid.host, uid.port), timeout=5):  # connects, then says nothing
        time.sleep(0.1)
        start = time.monotonic()
        group = _job(uid)
        elapsed = time.monotonic() - start
    for b in group:
        b.close()
    assert elapsed < 1.0 + 4, elapsed


# ---------------------------------------------------------------- fuzzing the parsers (gaps of test_wire.py)

frames = st.lists(st.tuples(st.integers(0, 2**64 - 1), st.binary(max_size=40)), max_size=6)


class _Chunks:
    """A fake socket returning ``data`` in the given chunk sizes (then EOF)."""

    def __init__(self, data: bytes, sizes: list[int]):
        self.data, self.sizes = data, sizes

    def recv(self, n: int) -> bytes:
        k = min(n, self.sizes.pop(0) if self.sizes else n)
        out, self.data = self.data[:k], self.data[k:]
        return out


@settings(max_examples=150, deadline=None)
@given(frames=frames, sizes=st.lists(st.integers(1, 64), max_size=200))
def test_receiver_reassembles_frames_split_at_any_byte(frames, sizes):
    from pymscclpp.runtime.bootstrap.receiver import _Stream
    data = b"".join(wire.encode(wire.Kind.DATA, 3, tag, payload) for tag, payload in frames)
    stream, sock, got = _Stream(3, 1 << 10), _Chunks(data, list(sizes)), []
    while sock.data:
        frame = stream.feed(sock)
        if frame is not None:
            got.append((frame.tag, frame.payload))
    assert got == frames


@settings(max_examples=300, deadline=None)
@given(prefix=st.lists(st.tuples(st.integers(0, 2**64 - 1), st.binary(max_size=16)), max_size=3),
       junk=st.binary(min_size=1, max_size=120), sizes=st.lists(st.integers(1, 64), max_size=100))
def test_receiver_fed_garbage_after_good_frames_raises_only_bootstrap_or_connection_errors(prefix, junk, sizes):
    from pymscclpp.runtime.bootstrap.receiver import _Stream
    data = b"".join(wire.encode(wire.Kind.DATA, 3, t, p) for t, p in prefix) + junk
    stream, sock = _Stream(3, 256), _Chunks(data, list(sizes))
    try:
        for _ in range(10_000):
            stream.feed(sock)
    except (BootstrapError, ConnectionResetError):
        pass


@settings(max_examples=300, deadline=None)
@given(buf=st.binary(max_size=64))
def test_register_payload_parser_raises_only_bootstrap_error(buf):
    try:
        size, host, port = wire.decode_register(buf)
    except BootstrapError:
        return
    assert 0 <= port < 65536 and size >= 0


@settings(max_examples=300, deadline=None)
@given(buf=st.one_of(st.binary(max_size=200), st.binary(min_size=128, max_size=128)))
def test_unique_id_parser_raises_only_invalid_usage_error(buf):
    try:
        UniqueId.from_bytes(buf)
    except InvalidUsageError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(buf=st.one_of(st.binary(max_size=300), st.binary(min_size=150, max_size=200)))
def test_registered_memory_handle_parser_raises_only_registration_error(buf):
    from pymscclpp.runtime.memory import RemoteMemory
    try:
        RemoteMemory(buf, job_token=bytes(16))
    except RegistrationError:
        pass


@settings(max_examples=300, deadline=None)
@given(buf=st.binary(max_size=80))
def test_proxy_frame_header_parser_raises_only_proxy_error(buf):
    from pymscclpp.transports import frames as proxy_frames
    try:
        proxy_frames.decode_header(buf)
    except ProxyError:
        pass

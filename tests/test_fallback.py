"""The NCCL fallback without GPUs: library lookup, the ctypes binding (on a fake libnccl built here), dtype and
op codes, the uniqueId exchange over the bootstrap, and the errors that name what is missing."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import threading
from types import SimpleNamespace

import pytest

import pymscclpp  # noqa: F401
from pymscclpp.errors import InvalidUsageError
from pymscclpp.fallback import _lib, nccl as fb
from pymscclpp.runtime.bootstrap.local import LocalBootstrap

FAKE_NCCL_C = r"""
#include <string.h>
typedef struct { unsigned char internal[128]; } ncclUniqueId;
static long long last[8];
static unsigned char last_id[128];
static int rec(long long tag, long long a, long long b, long long c, long long d, long long e, long long f,
               long long g) {
    long long v[8] = {tag, a, b, c, d, e, f, g};
    memcpy(last, v, sizeof last);
    return b == 999 ? 5 : 0;  /* count 999: ncclInvalidUsage */
}
void fake_last(long long *out) { memcpy(out, last, sizeof last); }
void fake_last_id(unsigned char *out) { memcpy(out, last_id, 128); }
const char *ncclGetErrorString(int r) { return r == 5 ? "invalid usage (fake)" : "fake error"; }
int ncclGetVersion(int *v) { *v = 22905; return 0; }
int ncclGetUniqueId(ncclUniqueId *id) { for (int i = 0; i < 128; i++) id->internal[i] = 255 - i; return 0; }
int ncclCommInitRank(void **comm, int n, ncclUniqueId id, int rank) {
    memcpy(last_id, id.internal, 128); *comm = (void *)0xC0FFEE; return rec(1, n, 0, rank, 0, 0, 0, 0); }
int ncclCommDestroy(void *c) { return rec(2, (long long)c, 0, 0, 0, 0, 0, 0); }
int ncclCommAbort(void *c) { return rec(3, (long long)c, 0, 0, 0, 0, 0, 0); }
int ncclAllReduce(void *s, void *r, size_t n, int t, int op, void *c, void *st) {
    return rec(4, (long long)s, n, (long long)r, t, op, (long long)c, (long long)st); }
int ncclAllGather(void *s, void *r, size_t n, int t, void *c, void *st) {
    return rec(5, (long long)s, n, (long long)r, t, 0, (long long)c, (long long)st); }
int ncclReduceScatter(void *s, void *r, size_t n, int t, int op, void *c, void *st) {
    return rec(6, (long long)s, n, (long long)r, t, op, (long long)c, (long long)st); }
int ncclBroadcast(void *s, void *r, size_t n, int t, int root, void *c, void *st) {
    return rec(7, (long long)s, n, (long long)r, t, root, (long long)c, (long long)st); }
int ncclSend(void *s, size_t n, int t, int peer, void *c, void *st) {
    return rec(8, (long long)s, n, 0, t, peer, (long long)c, (long long)st); }
int ncclRecv(void *s, size_t n, int t, int peer, void *c, void *st) {
    return rec(9, (long long)s, n, 0, t, peer, (long long)c, (long long)st); }
int ncclGroupStart(void) { return rec(10, 0, 0, 0, 0, 0, 0, 0); }
int ncclGroupEnd(void) { return rec(11, 0, 0, 0, 0, 0, 0, 0); }
"""


@pytest.fixture(scope="module")
def fake_lib_path(tmp_path_factory) -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake libnccl")
    d = tmp_path_factory.mktemp("fakenccl")
    (d / "fake.c").write_text(FAKE_NCCL_C)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(d / "libnccl.so.2"), str(d / "fake.c")], check=True)
    return str(d / "libnccl.so.2")


@pytest.fixture
def fake_lib(fake_lib_path, monkeypatch):
    """The fake libnccl, loaded through the real binding and installed as the fallback's library."""
    monkeypatch.setenv(_lib.LIB_ENV, fake_lib_path)
    lib = _lib.load()
    monkeypatch.setattr(fb, "_LOADED", (lib, ""))
    return lib


def last_call(path: str) -> list[int]:
    out = (ctypes.c_longlong * 8)()
    ctypes.CDLL(path).fake_last(out)
    return list(out)


class OneRankComm(SimpleNamespace):
    """What the fallback needs of a communicator: rank, size, bootstrap, and extensions closed with it."""

    def __init__(self):
        super().__init__(rank=0, size=1, bootstrap=LocalBootstrap.create(1)[0], made={})

    def extension(self, key, make=None):
        if key not in self.made and make is not None:
            self.made[key] = make(self)
        return self.made.get(key)


def one_rank_comm() -> OneRankComm:
    return OneRankComm()


def test_codes_are_nccl_h_values():
    assert fb.DTYPES == {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6,
                         "float32": 7, "float64": 8, "bfloat16": 9, "float8_e4m3": 10, "float8_e4m3fn": 10,
                         "float8_e5m2": 11}
    assert fb.OPS == {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
    with pytest.raises(InvalidUsageError, match="NCCL has no dtype 'complex64'"):
        fb.dtype_code("complex64")
    with pytest.raises(InvalidUsageError, match="NCCL has no reduction op 'xor'.*sum, prod, max, min, avg"):
        fb.op_code("xor")


def test_explicit_library_path_is_the_only_candidate(monkeypatch):
    monkeypatch.setenv(_lib.LIB_ENV, "/opt/mine/libnccl.so.2")
    assert _lib.candidates() == ["/opt/mine/libnccl.so.2"]


def test_wheel_library_comes_before_the_system_one(monkeypatch, tmp_path):
    lib = tmp_path / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    monkeypatch.delenv(_lib.LIB_ENV, raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path), "/nonexistent"])
    assert _lib.candidates() == [str(lib), "libnccl.so.2"]


def test_missing_library_error_names_the_package_and_the_variable(monkeypatch):
    monkeypatch.setenv(_lib.LIB_ENV, "/nonexistent/libnccl.so.2")
    monkeypatch.setattr(fb, "IS_SIM", False)
    monkeypatch.setattr(fb, "_LOADED", None)
    assert not fb.available()
    msg = str(fb.missing("allReduce of float64"))
    for words in ["allReduce of float64 needs NCCL", "/nonexistent/libnccl.so.2", "pip install nvidia-nccl-cu13",
                  "PYMSCCLPP_NCCL_LIB"]:
        assert words in msg, msg
    assert fb.fallback_for(one_rank_comm()) is None


def test_simulator_never_uses_nccl():
    assert not fb.available()
    with pytest.raises(fb.NcclUnavailableError, match="send needs NCCL.*simulator"):
        fb.library("send")


def test_nvls_is_off_unless_the_user_set_it(fake_lib_path, monkeypatch):
    monkeypatch.setenv(_lib.LIB_ENV, fake_lib_path)
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    _lib.load()
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    _lib.load()
    assert os.environ["NCCL_NVLS_ENABLE"] == "1"


def test_binding_marshals_every_call(fake_lib, fake_lib_path):
    assert fake_lib.version == 22905
    assert fake_lib.unique_id() == bytes(255 - i for i in range(128))
    comm = one_rank_comm()
    nccl = fb.fallback_for(comm)
    assert fb.fallback_for(comm) is nccl and comm.made == {fb.EXTENSION: nccl}
    nccl.all_reduce(0x1000, 0x2000, 3, "float64", "avg", 77)
    assert last_call(fake_lib_path) == [4, 0x1000, 3, 0x2000, 8, 4, 0xC0FFEE, 77]
    nccl.all_gather(0x1000, 0x2000, 5, "bfloat16", 0)
    assert last_call(fake_lib_path) == [5, 0x1000, 5, 0x2000, 9, 0, 0xC0FFEE, 0]
    nccl.reduce_scatter(0x1000, 0x2000, 2**40, "int64", "prod", 1)
    assert last_call(fake_lib_path) == [6, 0x1000, 2**40, 0x2000, 4, 1, 0xC0FFEE, 1]
    nccl.broadcast(0x1000, 0x2000, 6, "uint8", 0, 2)
    assert last_call(fake_lib_path) == [7, 0x1000, 6, 0x2000, 1, 0, 0xC0FFEE, 2]
    nccl.send(0x3000, 7, "float8_e5m2", 0, 3)
    assert last_call(fake_lib_path) == [8, 0x3000, 7, 0, 11, 0, 0xC0FFEE, 3]
    nccl.recv(0x4000, 8, "float8_e4m3", 0, 4)
    assert last_call(fake_lib_path) == [9, 0x4000, 8, 0, 10, 0, 0xC0FFEE, 4]
    fb.group_start()
    assert last_call(fake_lib_path)[0] == 10
    fb.group_end()
    assert last_call(fake_lib_path)[0] == 11
    with pytest.raises(fb.NcclError, match="ncclAllReduce failed: invalid usage \\(fake\\)") as err:
        nccl.all_reduce(0x1000, 0x2000, 999, "float32", "sum")
    assert err.value.status == 5
    nccl.close()
    assert last_call(fake_lib_path)[:2] == [2, 0xC0FFEE]
    nccl.close()  # idempotent: nothing destroyed twice
    assert last_call(fake_lib_path)[0] == 2


def test_communicator_is_made_on_first_use_from_rank_0s_id(fake_lib, fake_lib_path):
    comm = one_rank_comm()
    nccl = fb.NcclFallback(comm)
    assert nccl._handle is None
    nccl.send(0x10, 1, "int32", 0)
    ids = (ctypes.c_ubyte * 128)()
    ctypes.CDLL(fake_lib_path).fake_last_id(ids)
    assert bytes(ids) == bytes(255 - i for i in range(128))


class RecordingLib:
    """A Library stand-in: rank 0's id is its own; every call is recorded per thread."""

    version = 22905

    def __init__(self):
        self.calls = []

    def call(self, fn, *args):
        self.calls.append((fn, args))

    def unique_id(self):
        return b"\x07" * 128

    def comm_init_rank(self, nranks, uid, rank):
        self.calls.append(("init", (nranks, uid, rank)))
        return 100 + rank


def test_unique_id_goes_from_rank_0_to_every_rank_over_the_bootstrap(monkeypatch):
    lib = RecordingLib()
    monkeypatch.setattr(fb, "_LOADED", (lib, ""))
    boots = LocalBootstrap.create(3)
    handles = [None] * 3

    def rank(r):
        comm = SimpleNamespace(rank=r, size=3, bootstrap=boots[r])
        handles[r] = fb.NcclFallback(comm).ready()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert handles == [100, 101, 102]
    assert sorted(args for fn, args in lib.calls if fn == "init") == [(3, b"\x07" * 128, r) for r in range(3)]

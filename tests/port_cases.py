"""Collective PortChannel cases, run by every rank on the simulator or on GPUs (tests/gpu/run_port.py).

Each case is ``case(comm, state, **params)``; ranks form a ring (put to the next, wait on the
previous) through one ProxyService, whose transport per peer follows the ranks' hosts. Fault
cases build a proxy of their own, since a failed proxy stays failed.
"""

from __future__ import annotations

import socket
import time

import numpy as np
from numba import cuda

import pymscclpp.channels.port_channel as pc
from pymscclpp.errors import CommTimeoutError, ProxyError
from pymscclpp.proxy import ProxyService
from pymscclpp.runtime.memory import alloc

ARENA = 1 << 16
MODES = ("put_signal_flush", "put_with_signal", "put_with_signal_and_flush")


def _host(arr) -> np.ndarray:
    return arr.copy_to_host() if hasattr(arr, "copy_to_host") else np.array(getattr(arr, "_ary", arr))


def _fill(arr, data: np.ndarray, offset: int = 0) -> None:
    host = _host(arr)
    host[offset:offset + data.size] = data
    arr.copy_to_device(host)


def pattern(rank: int, nbytes: int, seed: int) -> np.ndarray:
    return np.random.default_rng([rank, seed, 7]).integers(0, 256, nbytes, dtype=np.uint8)


def _ring(comm, fifo_size: int = 8, arena: int = ARENA):
    """A proxy with channels to the next and previous ranks (ascending peer order on every rank)."""
    proxy = ProxyService(comm, fifo_size=fifo_size)
    src, inbox = alloc(arena), alloc(arena)
    nxt, prv = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    chans = {p: proxy.connect(p, src, inbox) for p in sorted({nxt, prv})}
    return dict(proxy=proxy, src=src, inbox=inbox, next=chans[nxt], prev=chans[prv])


def _setup(comm, state):
    if "proxy" not in state:
        state.update(_ring(comm))
        state["proxy"].start()
    return state


def transports(comm, state) -> dict:
    """The transport this rank's proxy uses to each ring neighbour, by peer."""
    s = _setup(comm, state)
    return {ch.peer: s["proxy"].transport(ch.peer).name for ch in (s["next"], s["prev"])}


@cuda.jit
def _ring_kernel(nxt, prv, dst_off, src_off, nbytes, mode, rounds, ok):
    if cuda.threadIdx.x == 0:
        good = True
        for _ in range(rounds):
            if mode == 0:
                good &= pc.put(nxt, dst_off, src_off, nbytes)
                good &= pc.signal(nxt)
                good &= pc.flush(nxt)
            elif mode == 1:
                good &= pc.put_with_signal(nxt, dst_off, src_off, nbytes)
            else:
                good &= pc.put_with_signal_and_flush(nxt, dst_off, src_off, nbytes)
            good &= pc.wait(prv)
        good &= pc.flush(nxt)
        ok[0] = 1 if good else 0


def ring_put(comm, state, nbytes: int, src_off: int, dst_off: int, seed: int, mode: str, rounds: int = 1):
    """Every rank puts a pattern to the next rank's inbox and waits for the previous one's: exact bytes land."""
    s = _setup(comm, state)
    _fill(s["src"], pattern(comm.rank, nbytes, seed), src_off)
    ok = cuda.to_device(np.zeros(1, np.int32))
    comm.barrier()
    _ring_kernel[1, 1](s["next"].device_handle(), s["prev"].device_handle(), dst_off, src_off, nbytes,
                       MODES.index(mode), rounds, ok)
    cuda.synchronize()
    s["proxy"].check()
    comm.check_device_errors()
    assert _host(ok)[0] == 1
    got = _host(s["inbox"])[dst_off:dst_off + nbytes]
    np.testing.assert_array_equal(got, pattern((comm.rank - 1) % comm.size, nbytes, seed))
    comm.barrier()


def big_put(comm, state, nbytes: int, src_off: int, dst_off: int, seed: int, mode: str = "put_with_signal"):
    """One put of several MB on a proxy of its own (several Ethernet staging chunks, one large copy):
    exact bytes land, nothing outside the range changes."""
    s = _ring(comm, fifo_size=8, arena=nbytes + 8192)
    s["proxy"].start()
    try:
        _fill(s["src"], pattern(comm.rank, nbytes, seed), src_off)
        ok = cuda.to_device(np.zeros(1, np.int32))
        comm.barrier()
        _ring_kernel[1, 1](s["next"].device_handle(), s["prev"].device_handle(), dst_off, src_off, nbytes,
                           MODES.index(mode), 1, ok)
        cuda.synchronize()
        s["proxy"].check()
        comm.check_device_errors()
        assert _host(ok)[0] == 1
        got = _host(s["inbox"])
        np.testing.assert_array_equal(got[dst_off:dst_off + nbytes], pattern((comm.rank - 1) % comm.size, nbytes, seed))
        assert not got[:dst_off].any() and not got[dst_off + nbytes:].any()
        comm.barrier()
    finally:
        s["proxy"].close()


@cuda.jit
def _scatter_kernel(nxt, prv, chunk, ok):
    tid = cuda.threadIdx.x
    good = pc.put(nxt, tid * chunk, tid * chunk, chunk)
    cuda.syncthreads()
    if tid == 0:
        good &= pc.signal(nxt)
        good &= pc.wait(prv)
        good &= pc.flush(nxt)
    if not good:
        ok[0] = 0


def many_pushers(comm, state, nthreads: int, chunk: int, seed: int):
    """Many threads push at once through a FIFO smaller than their number: every chunk arrives once, in place."""
    s = _setup(comm, state)
    nbytes = nthreads * chunk
    _fill(s["src"], pattern(comm.rank, nbytes, seed))
    ok = cuda.to_device(np.ones(1, np.int32))
    comm.barrier()
    _scatter_kernel[1, nthreads](s["next"].device_handle(), s["prev"].device_handle(), chunk, ok)
    cuda.synchronize()
    s["proxy"].check()
    comm.check_device_errors()
    assert _host(ok)[0] == 1
    np.testing.assert_array_equal(_host(s["inbox"])[:nbytes], pattern((comm.rank - 1) % comm.size, nbytes, seed))
    comm.barrier()


@cuda.jit
def _poll_kernel(prv, out):
    if cuda.threadIdx.x == 0:
        out[0] = 1 if pc.poll(prv) else 0


@cuda.jit
def _signal_kernel(nxt, ok):
    if cuda.threadIdx.x == 0:
        ok[0] = 1 if pc.signal(nxt) and pc.flush(nxt) else 0


def poll_sees_signal(comm, state):
    """poll is False before the previous rank signals and True (once) after."""
    s = _setup(comm, state)
    out = cuda.to_device(np.full(1, 7, np.int32))
    _poll_kernel[1, 1](s["prev"].device_handle(), out)
    cuda.synchronize()
    assert _host(out)[0] == 0
    comm.barrier()
    _signal_kernel[1, 1](s["next"].device_handle(), out)
    cuda.synchronize()
    assert _host(out)[0] == 1
    deadline = time.monotonic() + 20
    seen = 0
    while not seen and time.monotonic() < deadline:
        _poll_kernel[1, 1](s["prev"].device_handle(), out)
        cuda.synchronize()
        seen = int(_host(out)[0])
    assert seen == 1
    _poll_kernel[1, 1](s["prev"].device_handle(), out)
    cuda.synchronize()
    assert _host(out)[0] == 0
    s["proxy"].check()
    comm.barrier()


@cuda.jit
def _bad_put_kernel(nxt, prv, bad, ok):
    if cuda.threadIdx.x == 0:
        if bad:
            good = pc.put_with_signal(nxt, ARENA - 8, 0, 64)  # 56 bytes past the peer's inbox
            good &= pc.flush(nxt)
        else:
            good = pc.wait(prv)
        ok[0] = 1 if good else 0


def _expect_failure(comm, proxy, kernel_ok, started: float, *needles: str, device_fails: bool = True) -> str:
    """The ProxyError this rank's proxy reports (within 2 s) holds ``needles``, fast; with ``device_fails``
    this rank's kernel also failed (a rank whose ops need no failed proxy may finish them)."""
    elapsed = time.monotonic() - started
    text, until = None, time.monotonic() + 2.0  # a rank two links from the failure hears of it a hop later
    while text is None:
        try:
            proxy.check()
        except ProxyError as exc:
            text = str(exc)
        else:
            if time.monotonic() > until:
                raise AssertionError(f"rank {comm.rank}: no ProxyError")
            time.sleep(0.01)
    for needle in needles:
        assert needle in text, (needle, text)
    assert elapsed < 0.5 * (comm.timeout_s or 60.0), f"rank {comm.rank}: the failure took {elapsed:.1f} s to surface"
    if not device_fails:
        return text
    assert _host(kernel_ok)[0] == 0, "a device op succeeded although the proxy failed"
    try:
        comm.check_device_errors()
    except CommTimeoutError:
        pass
    else:
        raise AssertionError(f"rank {comm.rank}: no device error recorded")
    return text


def bad_trigger_rejected(comm, state):
    """Rank 0 puts past the end of rank 1's inbox: rejected naming the channel, not executed, and every rank
    learns within seconds (device waits end, ProxyError on the host)."""
    s = _ring(comm)
    s["proxy"].start()
    before = _host(s["inbox"]).copy()
    ok = cuda.to_device(np.ones(1, np.int32))
    comm.barrier()
    started = time.monotonic()
    _bad_put_kernel[1, 1](s["next"].device_handle(), s["prev"].device_handle(), comm.rank == 0, ok)
    cuda.synchronize()
    if comm.rank == 0:
        text = _expect_failure(comm, s["proxy"], ok, started, "rejected, not executed", "PortChannel semaphore",
                               f"-> peer {1 % comm.size}", "destination offset 65528")
    else:
        text = _expect_failure(comm, s["proxy"], ok, started, "aborted because a proxy failed")
    if comm.rank == 1:
        np.testing.assert_array_equal(_host(s["inbox"]), before)
    comm.barrier()
    s["proxy"].close()
    return text


def peer_disconnects(comm, state):
    """Rank 1's proxy link drops without a goodbye (as when the process dies): rank 0's wait ends within
    seconds with a ProxyError naming the peer."""
    s = _ring(comm)
    s["proxy"].start()
    ok = cuda.to_device(np.ones(1, np.int32))
    comm.barrier()
    started = time.monotonic()
    text = ""
    if comm.rank == 1:
        s["proxy"]._conns[0].link.sock.shutdown(socket.SHUT_RDWR)
    elif comm.rank == 0:  # the other ranks' links are whole: their waits would only run out their budget
        _bad_put_kernel[1, 1](s["next"].device_handle(), s["prev"].device_handle(), False, ok)
        cuda.synchronize()
        text = _expect_failure(comm, s["proxy"], ok, started, "peer 1")
    comm.barrier()
    s["proxy"].close()
    return text


def proxy_thread_dies(comm, state):
    """Rank 0's proxy thread raises while executing a network trigger: both ranks get a ProxyError."""
    s = _ring(comm)
    if comm.rank == 0:
        def broken(w0, w1):
            raise RuntimeError("injected fault")
        s["proxy"]._run_host = broken
    s["proxy"].start()
    ok = cuda.to_device(np.ones(1, np.int32))
    comm.barrier()
    started = time.monotonic()
    _ring_kernel[1, 1](s["next"].device_handle(), s["prev"].device_handle(), 0, 0, 64, 1, 1, ok)
    cuda.synchronize()
    needle = "injected fault" if comm.rank == 0 else "aborted because a proxy failed"
    # rank 0's puts and rank 1's wait for them fail; further round the ring, ops may finish first
    text = _expect_failure(comm, s["proxy"], ok, started, needle, device_fails=comm.rank < 2)
    comm.barrier()
    s["proxy"].close()
    return text


def teardown(comm, state):
    """Close the shared proxy (collective)."""
    if "proxy" in state:
        state.pop("proxy").close()
        state.clear()

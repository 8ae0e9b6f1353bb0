"""Collective test cases for the Primitive API: run by every rank, on the simulator or on GPUs.

Each case is ``case(comm, state, **params)``; it launches a kernel through MemoryChannels to
the ring neighbours and asserts on what arrived. ``state`` caches channels between cases.
"""

from __future__ import annotations

import numpy as np

import pymscclpp.channels.memory_channel as mc
from numba import cuda
from pymscclpp.runtime.memory import alloc

ARENA = 1 << 16  # bytes of each rank's src buffer and of its inbox


def _setup(comm, state):
    """Channels to the next and previous rank of the ring, built once per communicator."""
    if "next" not in state:
        src, inbox = alloc(ARENA), alloc(ARENA)
        nxt, prv = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        chans = comm.memory_channels({nxt, prv}, src, inbox)
        state.update(src=src, inbox=inbox, next=chans[nxt], prev=chans[prv],
                     flags=cuda.to_device(np.zeros(4, np.uint32)))
    return state


def _host(arr) -> np.ndarray:
    return arr.copy_to_host()


def _fill(arr, data: np.ndarray, offset: int = 0) -> None:
    host = _host(arr)
    host[offset:offset + data.size] = data
    arr.copy_to_device(host)


def pattern(rank: int, nbytes: int, seed: int) -> np.ndarray:
    """Bytes rank ``rank`` sends in case ``seed``: different per rank, seed and position."""
    return np.random.default_rng([rank, seed]).integers(0, 256, nbytes, dtype=np.uint8)


@cuda.jit
def _ring_pingpong_kernel(nxt, prv, iters):
    if cuda.threadIdx.x == 0:
        for _ in range(iters):
            mc.signal(nxt)
            mc.wait(prv)


def ring_pingpong(comm, state, iters: int):
    """Each rank signals the next and waits for the previous ``iters`` times; tokens advance by exactly iters."""
    s = _setup(comm, state)
    comm.barrier()
    before = int(_host(s["prev"].device_handle().inbound)[0])
    comm.barrier()
    _ring_pingpong_kernel[1, 1](s["next"].device_handle(), s["prev"].device_handle(), iters)
    cuda.synchronize()
    comm.check_device_errors()
    after = int(_host(s["prev"].device_handle().inbound)[0])
    assert after - before == iters, (before, after, iters)
    comm.barrier()


@cuda.jit
def _put_kernel(nxt, prv, dst_off, src_off, nbytes):
    tid = cuda.threadIdx.x
    mc.put(nxt, dst_off, src_off, nbytes, tid, cuda.blockDim.x)
    cuda.syncthreads()
    if tid == 0:
        mc.signal(nxt)
        mc.wait(prv)
    cuda.syncthreads()


@cuda.jit
def _get_kernel(nxt, back_off, dst_off, nbytes):
    mc.get(nxt, back_off, dst_off, nbytes, cuda.threadIdx.x, cuda.blockDim.x)


def put_get_roundtrip(comm, state, nbytes: int, src_off: int, dst_off: int, seed: int, nthreads: int = 32):
    """put lands the exact bytes at the peer's offset, and get reads them back unchanged."""
    s = _setup(comm, state)
    data = pattern(comm.rank, nbytes, seed)
    _fill(s["src"], data, src_off)
    comm.barrier()
    _put_kernel[1, nthreads](s["next"].device_handle(), s["prev"].device_handle(), dst_off, src_off, nbytes)
    cuda.synchronize()
    comm.check_device_errors()
    got = _host(s["inbox"])[dst_off:dst_off + nbytes]
    np.testing.assert_array_equal(got, pattern((comm.rank - 1) % comm.size, nbytes, seed))
    comm.barrier()
    back_off = (src_off + nbytes) % (ARENA - nbytes)
    _get_kernel[1, nthreads](s["next"].device_handle(), back_off, dst_off, nbytes)
    cuda.synchronize()
    np.testing.assert_array_equal(_host(s["src"])[back_off:back_off + nbytes], data)
    comm.barrier()


@cuda.jit
def _packet_kernel(nxt, prv, flags, pkt_base, src_off, out_off, nbytes, ll8):
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    flag = mc.packet_flag_begin(flags)
    pkt_off = pkt_base + (flag % 2) * (ARENA // 4)  # double-buffered by flag parity
    if ll8:
        mc.put_packets_ll8(nxt, pkt_off, src_off, nbytes, tid, nt, flag)
        mc.unpack_packets_ll8(prv, out_off, pkt_off, nbytes, tid, nt, flag)
    else:
        mc.put_packets(nxt, pkt_off, src_off, nbytes, tid, nt, flag)
        mc.unpack_packets(prv, out_off, pkt_off, nbytes, tid, nt, flag)
    cuda.syncthreads()
    mc.packet_flag_end(flags, flag)


def packet_exchange(comm, state, nbytes: int, src_off: int, out_off: int, seed: int, ll8: bool,
                    rounds: int = 2, nthreads: int = 32):
    """LL16/LL8 packets carry the exact bytes to the next rank, round after round with a fresh flag."""
    s = _setup(comm, state)
    for r in range(rounds):
        data = pattern(comm.rank, nbytes, seed + r)
        _fill(s["src"], data, src_off)
        comm.barrier()
        _packet_kernel[1, nthreads](s["next"].device_handle(), s["prev"].device_handle(), s["flags"], 0,
                                    src_off, out_off, nbytes, ll8)
        cuda.synchronize()
        comm.check_device_errors()
        got = _host(s["src"])[out_off:out_off + nbytes]
        np.testing.assert_array_equal(got, pattern((comm.rank - 1) % comm.size, nbytes, seed + r))
        comm.barrier()


@cuda.jit
def _lonely_wait_kernel(prv):
    if cuda.threadIdx.x == 0:
        mc.wait(prv)


def wait_times_out(comm, state):
    """A wait nobody signals ends within its budget and raises CommTimeoutError naming rank and peer."""
    from pymscclpp.errors import CommTimeoutError
    s = _setup(comm, state)
    handle = s["prev"].device_handle()._replace(timeout_ns=np.uint64(200_000_000))
    _lonely_wait_kernel[1, 1](handle)
    cuda.synchronize()
    try:
        comm.check_device_errors()
    except CommTimeoutError as exc:
        text = str(exc)
        assert f"rank {comm.rank}" in text and f"peer {(comm.rank - 1) % comm.size}" in text, text
        assert "semaphore wait" in text, text
    else:
        raise AssertionError("a wait with no signal did not report a timeout")
    # the previous rank now sends the signal we gave up on, so later cases start in step
    comm.barrier()
    _signal_kernel[1, 1](s["next"].device_handle())
    cuda.synchronize()
    comm.barrier()


@cuda.jit
def _signal_kernel(nxt):
    if cuda.threadIdx.x == 0:
        mc.signal(nxt)


@cuda.jit
def _out_of_bounds_kernel(ch, op, off, nbytes):
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    if op == 0:
        mc.put(ch, off, 0, nbytes, tid, nt)  # off: into the peer's inbox
    elif op == 1:
        mc.get(ch, off, 0, nbytes, tid, nt)  # off: into this rank's src
    else:
        mc.unpack_packets(ch, 0, off, nbytes, tid, nt, 1)  # off: in this rank's inbox


def out_of_bounds_copy(comm, state, op: int, off: int, nbytes: int):
    """Rank 0's kernel makes one channel op past a buffer; what the host got (class, text) and whether any byte of
    the peer's inbox or this rank's src changed."""
    s = _setup(comm, state)
    comm.barrier()
    out = (None, None)
    before = (_host(s["src"]).copy(), _host(s["inbox"]).copy())
    if comm.rank == 0:
        try:
            _out_of_bounds_kernel[1, 32](s["next"].device_handle(), op, off, nbytes)
            cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - the test asserts on its class and text
            out = (type(exc).__name__, str(exc))
    comm.barrier()
    unchanged = np.array_equal(before[0], _host(s["src"])) and np.array_equal(before[1], _host(s["inbox"]))
    return out, unchanged

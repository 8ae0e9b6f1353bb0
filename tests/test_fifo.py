"""The proxy FIFO and the compiled proxy loop, in one process on the CUDA simulator.

Device pushes run in simulated kernels; the host side pops from a thread, with random pauses, so
the ring wraps, fills and drains under many interleavings.
"""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import cuda

import pymscclpp.channels.fifo as dev_fifo
import pymscclpp.runtime.fifo as ff
from pymscclpp.runtime.device_errors import ERR_WORDS, OP_FIFO_PUSH, OP_PROXY_ABORT
from pymscclpp.proxy.port_channel import PortChannelHandle
from pymscclpp.errors import InvalidUsageError
from pymscclpp.proxy import loop

_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
triggers = st.builds(ff.Trigger, type=st.integers(0, 7), size=st.integers(0, 2**32 - 1),
                     src_offset=st.integers(0, 2**32 - 1), dst_offset=st.integers(0, 2**32 - 1),
                     src_id=st.integers(0, 511), dst_id=st.integers(0, 511), semaphore_id=st.integers(0, 1023))


def handle(fifo: ff.Fifo, timeout_ns: int = 0, err=None) -> PortChannelHandle:
    f = fifo.device_handle()
    word = np.zeros(1, np.uint64)
    err = np.zeros(ERR_WORDS, np.int64) if err is None else err
    return PortChannelHandle(f.triggers, f.ctrl, f.head, f.tail_cache, f.fifo_size, word, word.copy(), err,
                             f.ctrl[ff.CTRL_ABORT:ff.CTRL_ABORT + 1], np.int64(0), np.int64(1), np.int64(2),
                             np.uint64(timeout_ns), np.int64(0), np.int64(0))


@_SETTINGS
@given(t=triggers)
def test_trigger_encode_decode_round_trips(t):
    w0, w1 = ff.encode(t)
    assert w1 >> 63 == 0
    assert ff.decode(w0, w1 | 1 << 63) == t


@pytest.mark.parametrize("field, value", [("size", 2**32), ("src_id", 512), ("semaphore_id", 1024), ("type", 8),
                                          ("dst_offset", -1)])
def test_encode_refuses_fields_out_of_range(field, value):
    t = ff.Trigger(1, 0, 0, 0, 0, 0, 0)._replace(**{field: value})
    with pytest.raises(InvalidUsageError, match=field):
        ff.encode(t)


@cuda.jit
def _encode_kernel(fields, out):
    w0, w1 = dev_fifo.trigger_words(fields[0], fields[5], fields[3], fields[4], fields[2], fields[1], fields[6])
    out[0] = w0
    out[1] = w1


@_SETTINGS
@given(t=triggers)
def test_device_encoding_matches_host_encoding(t):
    out = np.zeros(2, np.uint64)
    _encode_kernel[1, 1](np.array([t.type, t.size, t.src_offset, t.dst_offset, t.src_id, t.dst_id, t.semaphore_id],
                                  np.int64), out)
    assert (int(out[0]), int(out[1])) == ff.encode(t)


def test_device_encoding_saturates_fields_that_do_not_fit():
    out = np.zeros(2, np.uint64)
    _encode_kernel[1, 1](np.array([1, 2**40, -5, 7, 1, 2, 3], np.int64), out)
    t = ff.decode(out[0], out[1])
    assert (t.size, t.src_offset, t.dst_offset) == (ff.MAX_FIELD, ff.MAX_FIELD, 7)


@cuda.jit
def _push_kernel(ch, count, per_thread_base):
    tid = cuda.threadIdx.x
    for i in range(count):
        dev_fifo.push(ch, np.uint64(tid), np.uint64(per_thread_base + i))


def _drain(fifo: ff.Fifo, total: int, pauses: list[float], out: list, budget: float = 60.0) -> None:
    deadline = time.monotonic() + budget
    while len(out) < total and time.monotonic() < deadline:
        t = fifo.poll()
        if t is None:
            time.sleep(1e-4)
            continue
        slot = fifo.tail % fifo.size
        out.append((int(fifo.triggers[2 * slot]), int(fifo.triggers[2 * slot + 1]) & ~(1 << 63)))
        fifo.pop()
        if pauses:
            time.sleep(pauses[len(out) % len(pauses)])


@_SETTINGS
@given(size=st.integers(1, 5), count=st.integers(1, 30), seed=st.integers(0, 1000))
def test_one_pusher_is_popped_in_order_through_any_interleaving(size, count, seed):
    fifo = ff.Fifo(size)
    rnd = random.Random(seed)
    out: list = []
    popper = threading.Thread(target=_drain, args=(fifo, count, [rnd.choice([0, 0, 1e-4, 1e-3]) for _ in range(7)], out))
    popper.start()
    _push_kernel[1, 1](handle(fifo, timeout_ns=30 * 10**9), count, 100)
    popper.join()
    assert out == [(0, 100 + i) for i in range(count)]
    assert int(fifo.ctrl[ff.CTRL_TAIL]) == count


@pytest.mark.parametrize("size", [1, 3, 16])
def test_many_pushers_each_arrive_once_and_in_their_own_order(size):
    fifo, nthreads, count = ff.Fifo(size), 12, 5
    out: list = []
    popper = threading.Thread(target=_drain, args=(fifo, nthreads * count, [0, 1e-4], out))
    popper.start()
    _push_kernel[1, nthreads](handle(fifo, timeout_ns=30 * 10**9), count, 0)
    popper.join()
    assert len(out) == nthreads * count
    for tid in range(nthreads):
        assert [w1 for w0, w1 in out if w0 == tid] == list(range(count))


def test_push_into_a_full_fifo_times_out_with_an_error():
    fifo, err = ff.Fifo(2), np.zeros(ERR_WORDS, np.int64)
    _push_kernel[1, 1](handle(fifo, timeout_ns=50_000_000, err=err), 3, 0)
    assert err[0] == 1 and err[1] == OP_FIFO_PUSH and err[4] == 2


def test_abort_ends_a_blocked_push_at_once():
    fifo, err = ff.Fifo(1), np.zeros(ERR_WORDS, np.int64)
    threading.Timer(0.2, fifo.abort).start()
    started = time.monotonic()
    _push_kernel[1, 1](handle(fifo, timeout_ns=60 * 10**9, err=err), 2, 0)
    assert time.monotonic() - started < 10
    assert err[1] == OP_PROXY_ABORT


class Tables:
    """A memory and semaphore table with one local source, one remote destination and one CudaIpc semaphore."""

    def __init__(self):
        self.mem = np.zeros((ff.MAX_MEMORIES, loop.MEM_COLS), np.uint64)
        self.sem = np.zeros((ff.MAX_SEMAPHORES, loop.SEM_COLS), np.uint64)
        self.state = np.zeros(loop.STATE_WORDS, np.uint64)
        self.src = np.arange(256, dtype=np.uint8)
        self.dst = np.zeros(128, np.uint8)
        self.token = np.zeros(1, np.uint64)
        self.mem[0] = [loop.KIND_LOCAL, 1, 0, self.src.ctypes.data, self.src.size]
        self.mem[1] = [loop.KIND_REMOTE, 1, 1, self.dst.ctypes.data, self.dst.size]
        self.mem[2] = [loop.KIND_REMOTE, 1, 5, 0, 64]
        self.sem[3] = [loop.CUDA_IPC_CODE, 1, self.token.ctypes.data, 0]
        self.sem[4] = [int(2), 1, 0, 0]

    def serve(self, fifo, *trigger):
        w0, w1 = ff.encode(ff.Trigger(*trigger))
        ticket = int(self.state[loop.ST_TAIL])
        slot = ticket % fifo.size
        fifo.triggers[2 * slot] = w0
        fifo.triggers[2 * slot + 1] = w1 | ff.lap_parity(ticket, fifo.size) << 63
        serve, _ = loop.build(False, False)
        return serve(fifo.triggers, fifo.ctrl, self.state, self.mem, self.sem, 0, 0, 10, 20_000_000)


def test_proxy_loop_runs_a_cuda_ipc_put_with_signal():
    tab, fifo = Tables(), ff.Fifo(2)
    for i in range(5):  # wraps the ring twice
        rc = tab.serve(fifo, ff.TRIGGER_DATA | ff.TRIGGER_FLAG | ff.TRIGGER_SYNC, 16, 16 * i, 8 * i, 0, 1, 3)
        assert rc == loop.IDLE
        assert int(tab.token[0]) == i + 1 and int(fifo.ctrl[ff.CTRL_TAIL]) == i + 1
    np.testing.assert_array_equal(tab.dst[32:48], tab.src[64:80])


def test_proxy_loop_hands_network_triggers_to_python():
    tab, fifo = Tables(), ff.Fifo(4)
    assert tab.serve(fifo, ff.TRIGGER_FLAG, 0, 0, 0, 0, 0, 4) == loop.HOST
    assert int(fifo.ctrl[ff.CTRL_TAIL]) == 0  # not popped until Python ran it
    loop.advance(tab.state, fifo.ctrl)
    assert int(fifo.ctrl[ff.CTRL_TAIL]) == 1


@pytest.mark.parametrize("trigger, reason", [
    ((0, 8, 0, 0, 0, 1, 3), 1),                               # no type bit
    ((ff.TRIGGER_FLAG, 0, 0, 0, 0, 1, 9), 2),                 # unknown semaphore
    ((ff.TRIGGER_DATA, 8, 0, 0, 1, 1, 3), 3),                 # source is a remote memory
    ((ff.TRIGGER_DATA, 8, 0, 0, 0, 7, 3), 4),                 # destination id not registered
    ((ff.TRIGGER_DATA, 8, 0, 0, 0, 2, 3), 5),                 # destination of another peer
    ((ff.TRIGGER_DATA, 8, 250, 0, 0, 1, 3), 6),               # source range past the end
    ((ff.TRIGGER_DATA, 8, 0, 121, 0, 1, 3), 7),               # destination range past the end
    ((ff.TRIGGER_DATA, 2**32 - 1, 2**32 - 1, 0, 0, 1, 3), 6),  # 32-bit fields cannot wrap around
])
def test_proxy_loop_rejects_bad_triggers_without_executing_them(trigger, reason):
    tab, fifo = Tables(), ff.Fifo(4)
    assert tab.serve(fifo, *trigger) == loop.REJECT
    assert int(tab.state[loop.ST_DETAIL]) == reason
    assert not tab.dst.any() and int(tab.token[0]) == 0 and int(fifo.ctrl[ff.CTRL_TAIL]) == 0
    assert loop.REASONS[reason]


def _serve_all(tab, fifo, trigger_list):
    """Write several triggers at once (the ring holds them all), then run the loop until it idles."""
    ticket = int(tab.state[loop.ST_TAIL])
    for k, t in enumerate(trigger_list):
        w0, w1 = ff.encode(ff.Trigger(*t))
        slot = (ticket + k) % fifo.size
        fifo.triggers[2 * slot] = w0
        fifo.triggers[2 * slot + 1] = w1 | ff.lap_parity(ticket + k, fifo.size) << 63
    serve, _ = loop.build(False, False)
    return serve(fifo.triggers, fifo.ctrl, tab.state, tab.mem, tab.sem, 0, 0, 10, 20_000_000)


def test_proxy_loop_merges_waiting_contiguous_puts_and_keeps_stream_order():
    tab, fifo = Tables(), ff.Fifo(16)
    d, f, s = ff.TRIGGER_DATA, ff.TRIGGER_FLAG, ff.TRIGGER_SYNC
    puts = [(d, 8, 8 * i, 8 * i, 0, 1, 3) for i in range(6)]           # one 48-byte run
    later = [(d, 8, 200, 8, 0, 1, 3), (d, 0, 0, 0, 0, 1, 3),           # overwrites bytes 8-15 after the run; a no-op
             (d | f, 16, 64, 64, 0, 1, 3), (d, 4, 80, 80, 0, 1, 3),    # put+flag, then a put right after it
             (s, 0, 0, 0, 0, 1, 3)]
    assert _serve_all(tab, fifo, puts + later) == loop.IDLE
    want = np.zeros(128, np.uint8)
    want[0:48] = tab.src[0:48]
    want[8:16] = tab.src[200:208]
    want[64:84] = tab.src[64:84]
    np.testing.assert_array_equal(tab.dst, want)
    assert int(tab.token[0]) == 1 and int(fifo.ctrl[ff.CTRL_TAIL]) == len(puts + later)


def test_proxy_loop_pops_zero_byte_puts_of_network_channels_itself():
    tab, fifo = Tables(), ff.Fifo(4)
    assert _serve_all(tab, fifo, [(ff.TRIGGER_DATA, 0, 0, 0, 0, 1, 4)]) == loop.IDLE
    assert int(fifo.ctrl[ff.CTRL_TAIL]) == 1
    assert _serve_all(tab, fifo, [(ff.TRIGGER_DATA, 0, 0, 0, 0, 1, 3), (ff.TRIGGER_FLAG, 0, 0, 0, 0, 0, 4)]) == loop.HOST
    assert int(fifo.ctrl[ff.CTRL_TAIL]) == 2  # the 0-byte put popped, the network flag handed to Python


def test_proxy_loop_issues_a_pending_copy_before_handing_a_trigger_to_python():
    tab, fifo = Tables(), ff.Fifo(4)
    assert _serve_all(tab, fifo, [(ff.TRIGGER_DATA, 8, 0, 0, 0, 1, 3), (ff.TRIGGER_FLAG, 0, 0, 0, 0, 0, 4)]) == loop.HOST
    np.testing.assert_array_equal(tab.dst[:8], tab.src[:8])
    tab, fifo = Tables(), ff.Fifo(4)
    assert _serve_all(tab, fifo, [(ff.TRIGGER_DATA, 8, 8, 0, 0, 1, 3), (0, 8, 0, 0, 0, 1, 3)]) == loop.REJECT
    np.testing.assert_array_equal(tab.dst[:8], tab.src[8:16])  # the popped put still ran
    assert int(fifo.ctrl[ff.CTRL_TAIL]) == 1

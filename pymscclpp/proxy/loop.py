"""The proxy's hot loop, compiled with numba (no GIL): pop triggers, validate them, run CudaIpc ones.

``serve`` polls the FIFO, checks every trigger against the memory and semaphore tables and runs
those of CudaIpc channels itself (async copy, then a stream write of the peer's new token, then a
stream sync for flushes, skipped when nothing was issued since the last one). Contiguous DATA
triggers that are already waiting in the ring are merged into one copy (up to ``MERGE_LIMIT``): the
copy engine wants few large transfers, and each driver call costs microseconds. It returns to
Python for a trigger of another transport (``HOST``), a rejected trigger (``REJECT``, reason in
``state[DETAIL]``), a driver failure, or after ``budget_ns``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..runtime.fifo import CTRL_ABORT, CTRL_STOP, CTRL_TAIL, MAX_FIELD, TRIGGER_DATA, TRIGGER_FLAG, TRIGGER_SYNC
from ..transports import driver

IDLE, HOST, REJECT, DRIVER = 0, 1, 2, 3
ST_TAIL, ST_W0, ST_W1, ST_DETAIL, ST_SCRATCH, ST_CLOCK = 0, 1, 2, 3, 4, 6  # state words (CLOCK: 2 words)
STATE_WORDS = 8
M_KIND, M_TRANSPORT, M_PEER, M_BASE, M_SIZE = 0, 1, 2, 3, 4
MEM_COLS = 5
KIND_LOCAL, KIND_REMOTE = 1, 2
S_TRANSPORT, S_PEER, S_TOKEN, S_VALUE = 0, 1, 2, 3
SEM_COLS = 4
MERGE_LIMIT = np.uint64(4 << 20)  # contiguous DATA triggers are merged into one copy up to this size
CUDA_IPC_CODE = 1
REASONS = {1: "has trigger type 0 (none of data, flag, sync)", 2: "names semaphore {sem} that this proxy does not have",
           3: "names source memory {src}, which is not a local memory of this proxy",
           4: "names destination memory {dst}, which is not a remote memory of this proxy",
           5: "names destination memory {dst}, which belongs to another peer than the channel's",
           6: "reads {size} bytes at source offset {src_off}, past the end of source memory {src}",
           7: "writes {size} bytes at destination offset {dst_off}, past the end of destination memory {dst}"}


def _item_pointer(context, builder, sig, args):
    aryty = sig.args[0]
    ary = context.make_array(aryty)(context, builder, args[0])
    return cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)


@intrinsic
def load_acquire(typingctx, arr, index):
    """Acquire load of ``arr[index]`` on the host (never hoisted out of a poll loop)."""
    def codegen(context, builder, sig, args):
        return builder.load_atomic(_item_pointer(context, builder, sig, args), "acquire", 8)
    return arr.dtype(arr, index), codegen


@intrinsic
def store_release(typingctx, arr, index, value):
    """Release store to ``arr[index]`` on the host."""
    def codegen(context, builder, sig, args):
        val = context.cast(builder, args[2], sig.args[2], sig.args[0].dtype)
        builder.store_atomic(val, _item_pointer(context, builder, sig, args), "release", 8)
        return context.get_dummy_value()
    return types.void(arr, index, value), codegen


def _ops(gpu: bool, stream_write: bool):
    """Compiled copy / token-write / sync for this backend: driver calls on the proxy stream, or memcpy."""
    memcpy = driver.memcpy
    if not gpu:
        @njit(nogil=True)
        def copy(dst, src, size, stream):
            memcpy(dst, src, size)
            return 0

        @njit(nogil=True)
        def write_token(addr, value, state, stream):
            state[ST_SCRATCH] = value
            memcpy(addr, state[ST_SCRATCH:].ctypes.data, 8)
            return 0

        @njit(nogil=True)
        def sync(stream):
            return 0
        return copy, write_token, sync
    copy_async, write64, stream_sync, htod = (driver.copy_dtod_async, driver.stream_write64, driver.stream_sync,
                                              driver.copy_htod_async)

    @njit(nogil=True)
    def copy(dst, src, size, stream):
        return copy_async(dst, src, size, stream)

    @njit(nogil=True)
    def sync(stream):
        return stream_sync(stream)

    if stream_write:
        @njit(nogil=True)
        def write_token(addr, value, state, stream):
            return write64(stream, addr, value, 0)
    else:
        @njit(nogil=True)
        def write_token(addr, value, state, stream):  # no stream memory ops: wait for the copies, then write
            rc = stream_sync(stream)
            if rc != 0:
                return rc
            state[ST_SCRATCH] = value
            rc = htod(addr, state[ST_SCRATCH:].ctypes.data, 8, stream)
            if rc != 0:
                return rc
            return stream_sync(stream)
    return copy, write_token, sync


def _build(gpu: bool, stream_write: bool):
    usleep, clock_gettime, clock = driver.usleep, driver.clock_gettime, driver.CLOCK_MONOTONIC
    copy, write_token, sync = _ops(gpu, stream_write)

    @njit(nogil=True)
    def now(state):
        clock_gettime(clock, state[ST_CLOCK:].ctypes.data)
        return np.int64(state[ST_CLOCK]) * 1000000000 + np.int64(state[ST_CLOCK + 1])

    @njit(nogil=True)
    def issue(dst, src, size, stream, state):
        """Start a (pending) copy on the stream; 0, or the driver's error code, also kept in state[ST_DETAIL]."""
        rc = copy(dst, src, size, stream)
        if rc != 0:
            state[ST_DETAIL] = rc
        return rc

    @njit(nogil=True)
    def reject_reason(w0, w1, mem, sem):
        kind = (w1 >> np.uint64(50)) & np.uint64(7)
        sid = (w1 >> np.uint64(53)) & np.uint64(0x3FF)
        if kind == 0:
            return 1
        if sem[sid, S_TRANSPORT] == 0:
            return 2
        if kind & TRIGGER_DATA:
            src = (w1 >> np.uint64(32)) & np.uint64(0x1FF)
            dst = (w1 >> np.uint64(41)) & np.uint64(0x1FF)
            if mem[src, M_KIND] != KIND_LOCAL:
                return 3
            if mem[dst, M_KIND] != KIND_REMOTE:
                return 4
            if mem[dst, M_PEER] != sem[sid, S_PEER]:
                return 5
            size = w0 & np.uint64(MAX_FIELD)
            if (w0 >> np.uint64(32)) + size > mem[src, M_SIZE]:
                return 6
            if (w1 & np.uint64(MAX_FIELD)) + size > mem[dst, M_SIZE]:
                return 7
        return 0

    @njit(nogil=True)
    def serve(triggers, ctrl, state, mem, sem, stream, spin_ns, sleep_us, budget_ns):
        """Pop and run triggers until a HOST/REJECT/DRIVER trigger, stop/abort, or ``budget_ns`` of idling.

        Data copies are deferred while the next trigger is already waiting and continues the same
        copy (contiguous source and destination, ``MERGE_LIMIT`` bytes at most): one large driver call
        instead of many small ones. A pending copy is issued before anything else touches the stream
        (flag, sync, another copy), before going back to Python and as soon as the ring is empty, so
        stream order (data before its flag) is kept and nothing waits behind an idle ring."""
        size = np.uint64(triggers.size // 2)
        tail = state[ST_TAIL]
        start = now(state)
        last_work = start
        pend_dst = np.uint64(0)
        pend_src = np.uint64(0)
        pend_size = np.uint64(0)
        dirty = False   # work issued on the stream since its last synchronize
        while True:
            slot = np.uint64(2) * (tail % size)
            w1 = load_acquire(triggers, slot + np.uint64(1))
            parity = ((tail // size) + np.uint64(1)) & np.uint64(1)
            if (w1 >> np.uint64(63)) != parity:
                if pend_size != 0:  # the ring ran dry: start the deferred copy now
                    if issue(pend_dst, pend_src, pend_size, stream, state) != 0:
                        return DRIVER
                    pend_size = np.uint64(0)
                    dirty = True
                if ctrl[CTRL_STOP] != 0 or ctrl[CTRL_ABORT] != 0:
                    return IDLE
                t = now(state)
                if t - start > budget_ns:
                    return IDLE
                if t - last_work > spin_ns:
                    usleep(sleep_us)
                continue
            w0 = triggers[slot]
            state[ST_W0] = w0
            state[ST_W1] = w1
            reason = reject_reason(w0, w1, mem, sem)
            sid = (w1 >> np.uint64(53)) & np.uint64(0x3FF)
            kind = (w1 >> np.uint64(50)) & np.uint64(7)
            nbytes = w0 & np.uint64(MAX_FIELD)
            if reason == 0 and kind == TRIGGER_DATA and nbytes == 0:
                pass  # a 0-byte put: nothing to do on any transport
            elif reason != 0 or sem[sid, S_TRANSPORT] != CUDA_IPC_CODE:
                if pend_size != 0:  # earlier triggers were popped: their copy is owed
                    if issue(pend_dst, pend_src, pend_size, stream, state) != 0:
                        return DRIVER
                    pend_size = np.uint64(0)
                    dirty = True
                if reason != 0:
                    state[ST_DETAIL] = reason
                    return REJECT
                return HOST
            if kind & TRIGGER_DATA and nbytes > 0:
                src = mem[(w1 >> np.uint64(32)) & np.uint64(0x1FF), M_BASE] + (w0 >> np.uint64(32))
                dst = mem[(w1 >> np.uint64(41)) & np.uint64(0x1FF), M_BASE] + (w1 & np.uint64(MAX_FIELD))
                if (pend_size != 0 and pend_src + pend_size == src and pend_dst + pend_size == dst
                        and pend_size + nbytes <= MERGE_LIMIT):
                    pend_size += nbytes
                else:
                    if pend_size != 0:
                        if issue(pend_dst, pend_src, pend_size, stream, state) != 0:
                            return DRIVER
                        dirty = True
                    pend_dst = dst
                    pend_src = src
                    pend_size = nbytes
                if kind == TRIGGER_DATA and nbytes >= MERGE_LIMIT:
                    # large: nothing to gain by waiting for a continuation
                    if issue(pend_dst, pend_src, pend_size, stream, state) != 0:
                        return DRIVER
                    pend_size = np.uint64(0)
                    dirty = True
            if kind & (TRIGGER_FLAG | TRIGGER_SYNC):
                if pend_size != 0:
                    if issue(pend_dst, pend_src, pend_size, stream, state) != 0:
                        return DRIVER
                    pend_size = np.uint64(0)
                    dirty = True
                if kind & TRIGGER_FLAG:
                    value = sem[sid, S_VALUE] + np.uint64(1)
                    sem[sid, S_VALUE] = value
                    rc = write_token(sem[sid, S_TOKEN], value, state, stream)
                    dirty = True
                    if rc != 0:
                        state[ST_DETAIL] = rc
                        return DRIVER
                if kind & TRIGGER_SYNC and dirty:
                    rc = sync(stream)
                    dirty = False
                    if rc != 0:
                        state[ST_DETAIL] = rc
                        return DRIVER
            tail += np.uint64(1)
            state[ST_TAIL] = tail
            store_release(ctrl, CTRL_TAIL, tail)
            last_work = now(state)

    return serve, reject_reason


_built: dict = {}


def build(gpu: bool, stream_write: bool):
    """The compiled ``(serve, reject_reason)`` pair for this backend (built once per process)."""
    key = (gpu, stream_write)
    if key not in _built:
        _built[key] = _build(gpu, stream_write)
    return _built[key]


def advance(state: np.ndarray, ctrl: np.ndarray) -> None:
    """Pop the trigger ``serve`` handed to Python: count it and publish the tail to the device."""
    state[ST_TAIL] += np.uint64(1)
    ctrl[CTRL_TAIL] = state[ST_TAIL]

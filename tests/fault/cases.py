"""Rank-side fault cases: ``case(comm, state, **params)`` run by every rank of a RankPool (2 ranks).

Each case injects one fault (a wait nobody satisfies, an absent peer, a bad argument, ...) and
returns what the test asserts on: error texts, elapsed times, and whether any output byte changed.
"""

from __future__ import annotations

import threading
import time

import numpy as np
from numba import cuda

import pymscclpp.channels.memory_channel as mc
import pymscclpp.channels.primitives as prim
from pymscclpp import Communicator
from pymscclpp.errors import CommTimeoutError, PymscclppError
from pymscclpp.runtime.device_errors import OP_PACKET, QUIET
from pymscclpp.runtime.bootstrap import TcpBootstrap, UniqueId, get_unique_id
from pymscclpp.runtime.memory import alloc

import collective_cases as cc

ARENA = 1 << 12


def _peer(comm) -> int:
    return (comm.rank + 1) % comm.size


def _channel(comm, state, key: str = "chan", semaphores: int = 1):
    """A memory channel to the other rank (2-rank pools), built once per communicator and key."""
    if key not in state:
        src, inbox = alloc(ARENA), alloc(ARENA)
        state[key] = dict(src=src, inbox=inbox, ch=comm.memory_channel(_peer(comm), src, inbox, semaphores))
    return state[key]


def _sync(comm) -> None:
    """A barrier with a generous budget of its own: a rank may be sitting out a short device budget."""
    comm.bootstrap.barrier(timeout=120)


def _error_text(comm) -> str | None:
    try:
        comm.check_device_errors()
    except CommTimeoutError as exc:
        return str(exc)
    return None


def _new_comm(comm, timeout_s="env", bootstrap_timeout=None):
    """A second communicator over the same ranks (rank 0 makes the unique id and sends it to the others)."""
    if comm.rank == 0:
        uid = get_unique_id("127.0.0.1")
        for r in range(1, comm.size):
            comm.bootstrap.send(uid.to_bytes(), r, 77)
    else:
        uid = UniqueId.from_bytes(comm.bootstrap.recv(0, 77))
    bootstrap = TcpBootstrap(comm.rank, comm.size, uid, timeout=bootstrap_timeout)
    return Communicator(bootstrap, timeout_s=timeout_s)


def _comm_on_budget(comm, budget: float):
    """A second communicator whose waits have ``budget``, made on a generous one (a loaded machine's slow start
    is not what times out)."""
    comm2 = _new_comm(comm, timeout_s=budget, bootstrap_timeout=60)
    comm2.bootstrap.timeout = budget
    return comm2


# ---------------------------------------------------------------- device waits

@cuda.jit
def _wait_kernel(ch, ok):
    if cuda.threadIdx.x == 0:
        ok[0] = 1 if mc.wait(ch) else 0


@cuda.jit
def _signal_kernel(ch):
    if cuda.threadIdx.x == 0:
        mc.signal(ch)


@cuda.jit
def _packet_wait_kernel(ch, pkt_off, nbytes, flag, ok):
    got = mc.unpack_packets(ch, 0, pkt_off, nbytes, cuda.threadIdx.x, cuda.blockDim.x, flag)
    if not got:
        ok[0] = 0


@cuda.jit
def _quiet_packet_wait_kernel(ch, pkt_off, flag, ok, report):
    """Thread 0 waits quietly for the LL16 packet at ``pkt_off``; with ``report``, then reports for it."""
    if cuda.threadIdx.x == 0:
        _, _, got = prim.read_packet_ll16(ch.pkt, pkt_off, flag, ch, OP_PACKET + QUIET)
        ok[0] = 1 if got else 0
        if not got and report:
            prim.report_packet_ll16(ch.pkt, pkt_off, flag, ch, ch.peer, OP_PACKET)


def quiet_packet_wait(comm, state, report: bool):
    """A quiet packet wait nobody satisfies gives up at the budget recording nothing; reported after it (the
    block's report for it), the error names the packet wait, the peer and the flag."""
    comm2 = _new_comm(comm)
    try:
        s = _channel(comm2, {})
        _sync(comm2)
        out = dict(ok=None, text=None, elapsed=None, channel=s["ch"].semaphore.id)
        if comm2.rank == 0:
            ok = cuda.to_device(np.ones(1, np.int32))
            start = time.monotonic()
            _quiet_packet_wait_kernel[1, 1](s["ch"].device_handle(), ARENA // 2, 777, ok, report)
            cuda.synchronize()
            out.update(ok=int(ok.copy_to_host()[0]), text=_error_text(comm2), elapsed=time.monotonic() - start)
        _sync(comm2)
        return out
    finally:
        comm2.close()


def _lonely_wait(comm, s, waiter: int, kind: str, signal_after: float | None = None) -> dict:
    """Rank ``waiter`` waits (semaphore or packet); the other rank signals after ``signal_after`` s, or never."""
    _sync(comm)
    out = dict(text=None, elapsed=None, ok=None, timeout_s=comm.timeout_s, timeout_ns=comm.timeout_ns,
               channel=s["ch"].semaphore.id, before=None, after=None)
    if comm.rank == waiter:
        ok = cuda.to_device(np.ones(1, np.int32))
        before = s["src"].copy_to_host()
        start = time.monotonic()
        if kind == "semaphore":
            _wait_kernel[1, 1](s["ch"].device_handle(), ok)
        else:
            _packet_wait_kernel[1, 4](s["ch"].device_handle(), ARENA // 2, 64, 12345, ok)
        cuda.synchronize()
        end = time.monotonic()
        out.update(elapsed=end - start, ended=end, ok=int(ok.copy_to_host()[0]), text=_error_text(comm),
                   second=_error_text(comm), unchanged=bool((s["src"].copy_to_host() == before).all()))
    elif signal_after is not None:
        time.sleep(signal_after)
        _signal_kernel[1, 1](s["ch"].device_handle())
        cuda.synchronize()
    _sync(comm)
    if kind == "semaphore" and signal_after is None and comm.rank != waiter:
        _signal_kernel[1, 1](s["ch"].device_handle())  # the signal the waiter gave up on: tokens back in step
        cuda.synchronize()
    _sync(comm)
    return out


def semaphore_wait_unsatisfied(comm, state, waiter: int = 0):
    """A semaphore wait nobody signals ends at the communicator's budget with a named CommTimeoutError (on a
    communicator of its own: the error is sticky)."""
    comm2 = _new_comm(comm)
    try:
        return _lonely_wait(comm2, _channel(comm2, {}), waiter, "semaphore")
    finally:
        comm2.close()


def packet_wait_unsatisfied(comm, state, waiter: int = 0):
    """A packet wait (LL16 unpack) for packets nobody sends ends at the budget, naming the packet wait."""
    comm2 = _new_comm(comm)
    try:
        return _lonely_wait(comm2, _channel(comm2, {}), waiter, "packet")
    finally:
        comm2.close()


def per_communicator_budget(comm, state, timeout_s: float, kind: str = "semaphore", signal_after=None):
    """The same lonely wait on a second communicator built with ``timeout_s``: its budget, not the env's."""
    comm2 = _new_comm(comm, timeout_s=timeout_s)
    try:
        s = _channel(comm2, {})
        return _lonely_wait(comm2, s, 0, kind, signal_after)
    finally:
        comm2.close()


def _abort_later(comm, after: float) -> list[float]:
    """Abort ``comm``'s device waits ``after`` s from now, as the liveness monitor does when a peer dies; the list
    it returns gets the monotonic time just before the abort."""
    issued: list[float] = []

    def fire():
        issued.append(time.monotonic())
        comm.abort_device_waits(1)

    threading.Timer(after, fire).start()
    return issued


def wait_aborted_by_host(comm, state, kind: str, abort_after: float):
    """A lonely wait on a second communicator whose host aborts its device waits after ``abort_after`` s: it ends
    then, not at its budget (``after_abort``: seconds from the abort to the wait's end, None if it ended before)."""
    comm2 = _new_comm(comm)
    try:
        s = _channel(comm2, {})
        issued = _abort_later(comm2, abort_after) if comm2.rank == 0 else []
        out = _lonely_wait(comm2, s, 0, kind)
        if comm2.rank == 0:
            out["after_abort"] = out["ended"] - issued[0] if issued else None
        return out
    finally:
        comm2.close()


def executor_wait_aborted_by_host(comm, state, abort_after: float):
    """An executor kernel on rank 0 whose peer never launches ends when the host aborts its communicator's
    waits (set-up is collective; only rank 0 runs the call)."""
    from pymscclpp.executor import ExecutionPlan, Executor
    from pymscclpp.language.programs import PROGRAMS
    comm2 = _new_comm(comm)
    try:
        executor = Executor(comm2)
        plan = ExecutionPlan.from_plan(PROGRAMS["allreduce_allpairs"](comm2.size))
        call = executor.prepare(plan, cuda.to_device(np.ones(64, np.float32)))
        out = dict(text=None, elapsed=None, after_abort=None)
        if comm2.rank == 0:
            issued = _abort_later(comm2, abort_after)
            start = time.monotonic()
            try:
                call.run()  # under the simulator, run() checks the device error area
                out["text"] = _error_text(comm2)
            except CommTimeoutError as exc:
                out["text"] = str(exc)
            end = time.monotonic()
            out.update(elapsed=end - start, after_abort=end - issued[0] if issued else None)
        _sync(comm)
        executor.close()
        return out
    finally:
        comm2.close()


def env_budget_off_wait_satisfied_later(comm, state, delay: float):
    """With PYMSCCLPP_TIMEOUT_S=0 a wait has no budget: it waits as long as the peer takes, then succeeds."""
    return _lonely_wait(comm, _channel(comm, state, "late"), 0, "semaphore", signal_after=delay)


def port_flush_unsatisfied(comm, state):
    """A PortChannel flush whose proxy never runs ends at the budget, naming the flush (on a communicator of its
    own: the error is sticky)."""
    comm2 = _new_comm(comm)
    try:
        return _unpopped_flush(comm2)
    finally:
        comm2.close()


def _unpopped_flush(comm):
    import pymscclpp.channels.port_channel as pc
    from pymscclpp.proxy import ProxyService

    @cuda.jit
    def flush_kernel(ch, ok):
        if cuda.threadIdx.x == 0:
            ok[0] = 1 if pc.flush(ch) else 0

    proxy = ProxyService(comm, fifo_size=8)
    src = alloc(ARENA)
    ch = proxy.connect(_peer(comm), src, src)
    _sync(comm)
    out = dict(text=None, elapsed=None, ok=None, channel=ch.semaphore_id, timeout_s=comm.timeout_s)
    if comm.rank == 0:
        ok = cuda.to_device(np.ones(1, np.int32))
        start = time.monotonic()
        flush_kernel[1, 1](ch.device_handle(), ok)  # the proxy is never started: nobody pops the FIFO
        cuda.synchronize()
        out.update(elapsed=time.monotonic() - start, ok=int(ok.copy_to_host()[0]), text=_error_text(comm))
    _sync(comm)
    try:
        proxy.close()
    except PymscclppError as exc:
        out["close"] = str(exc)
    _sync(comm)
    return out


# ---------------------------------------------------------------- host waits in setup

def setup_peer_absent(comm, state, op: str, budget: float):
    """Rank 0 makes a pair/collective setup call that rank 1 never makes: CommTimeoutError within budget."""
    comm2 = _comm_on_budget(comm, budget)
    out = dict(text=None, elapsed=None, kind=None)
    try:
        if comm.rank == 0:
            buf = alloc(256)
            start = time.monotonic()
            try:
                if op == "memory_channel":
                    comm2.memory_channel(1, buf)
                elif op == "exchange_memory":
                    comm2.exchange_memory(buf, 1)
                elif op == "barrier":
                    comm2.barrier()
                elif op == "all_reduce":
                    x = cuda.to_device(np.ones(8, np.float32))
                    comm2.all_reduce(x)
                elif op == "send":
                    comm2.send(cuda.to_device(np.ones(8, np.float32)), 1)
            except PymscclppError as exc:
                out.update(kind=type(exc).__name__, text=str(exc))
            out["elapsed"] = time.monotonic() - start
    finally:
        _sync(comm)
        comm2.close()
    return out


def forgotten_call(comm, state, budget: float, first: bool, algo: str | None = None):
    """Rank 0 makes an all-reduce that rank 1 forgets: its first on a new communicator (set-up waits, then the
    call's), or a later one (``first`` False: the call's own waits only). What rank 0 raised, and how long it took."""
    comm2 = _comm_on_budget(comm, budget)
    out = dict(text=None, elapsed=None, kind=None)
    try:
        x = cuda.to_device(np.ones(8, np.float32))
        if not first:
            comm2.all_reduce(x, algo=algo)
            comm2.check_device_errors()
            _sync(comm)
        if comm.rank == 0:
            start = time.monotonic()
            try:
                comm2.all_reduce(x, algo=algo)
                comm2.check_device_errors()
            except PymscclppError as exc:
                out.update(kind=type(exc).__name__, text=str(exc))
            out["elapsed"] = time.monotonic() - start
    finally:
        _sync(comm)
        comm2.close()
    return out


# ---------------------------------------------------------------- bad inputs

def _snapshot(*arrays) -> list:
    return [a.copy_to_host().copy() if hasattr(a, "copy_to_host") else np.array(a, copy=True) for a in arrays]


def _unchanged(before, *arrays) -> bool:
    return all(np.array_equal(b, a) for b, a in zip(before, _snapshot(*arrays)))


def _attempt(call) -> tuple[list[str] | None, str | None]:
    """The error's class names (its own first, then its bases) and text; (None, None) if none was raised."""
    try:
        call()
    except Exception as exc:
        return [c.__name__ for c in type(exc).__mro__], str(exc)
    return None, None


def bad_all_reduce(comm, state, case: str):
    """One bad all_reduce argument: the error type and text, and whether the buffers stayed untouched."""
    send = cuda.to_device(np.arange(16, dtype=np.float32))
    recv = cuda.to_device(np.full(16, 7, np.float32))
    strided = cuda.to_device(np.zeros(32, np.float32))
    calls = {
        "recv_too_small": lambda: comm.all_reduce(send, cuda.to_device(np.zeros(15, np.float32))),
        "recv_too_large": lambda: comm.all_reduce(send, cuda.to_device(np.zeros(17, np.float32))),
        "dtype_mismatch": lambda: comm.all_reduce(send, cuda.to_device(np.zeros(16, np.int32))),
        "host_send": lambda: comm.all_reduce(np.ones(16, np.float32), recv),
        "host_recv": lambda: comm.all_reduce(send, np.zeros(16, np.float32)),
        "list_send": lambda: comm.all_reduce([1.0] * 16, recv),
        "none_send": lambda: comm.all_reduce(None, recv),
        "unknown_op": lambda: comm.all_reduce(send, recv, op="xor"),
        "op_not_a_string": lambda: comm.all_reduce(send, recv, op=3),
        "unsupported_dtype": lambda: comm.all_reduce(cuda.to_device(np.ones(16, np.complex64)),
                                                     cuda.to_device(np.ones(16, np.complex64))),
        "bool_dtype": lambda: comm.all_reduce(cuda.to_device(np.ones(16, np.bool_)),
                                              cuda.to_device(np.ones(16, np.bool_))),
        "non_contiguous": lambda: comm.all_reduce(strided[::2], recv),
        "unknown_algo": lambda: comm.all_reduce(send, recv, algo="ring9000"),
        "bad_stream": lambda: comm.all_reduce(send, recv, stream="default"),
    }
    watched = (send, recv, strided)
    before = _snapshot(*watched)
    kind, text = _attempt(calls[case])
    return dict(kind=kind, text=text, unchanged=_unchanged(before, *watched))


COLLECTIVES = {  # name: recv elements per send element as (multiply, divide)
    "all_gather": (2, 1), "reduce_scatter": (1, 2), "broadcast": (1, 1), "all_to_all": (1, 1)}


def bad_other_collective(comm, state, name: str, case: str):
    """Bad arguments to a collective other than all_reduce, if this build has it ("absent" otherwise)."""
    import inspect
    fn = getattr(comm, name, None)
    if fn is None:
        return dict(absent=True)
    mul, div = COLLECTIVES[name]
    count = 16
    send = cuda.to_device(np.arange(count, dtype=np.float32))
    recv_n = count * mul // div
    recv = cuda.to_device(np.full(recv_n, 7, np.float32))
    args, kwargs = {
        "host_send": ((np.ones(count, np.float32), recv), {}),
        "host_recv": ((send, np.zeros(recv_n, np.float32)), {}),
        "dtype_mismatch": ((send, cuda.to_device(np.zeros(recv_n, np.int32))), {}),
        "recv_wrong_size": ((send, cuda.to_device(np.zeros(recv_n + 1, np.float32))), {}),
        "bad_root": ((send, recv), {"root": comm.size}),
    }[case]
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as exc:
        return dict(absent=True, why=f"signature {inspect.signature(fn)} does not take {case} args: {exc}")
    before = _snapshot(send, recv)
    kind, text = _attempt(lambda: fn(*args, **kwargs))
    return dict(kind=kind, text=text, unchanged=_unchanged(before, send, recv))


def bad_register_memory(comm, state, case: str):
    from pymscclpp.runtime.memory import view_as
    good = alloc(64)
    local = cuda.to_device(np.arange(64, dtype=np.uint8))
    host = np.arange(64, dtype=np.uint8)
    objs = {
        "host_numpy": host,
        "process_local_array": local,
        "non_contiguous": cuda.to_device(np.zeros((8, 8), np.uint8))[:, ::2],
        "empty_view": view_as(good, np.uint8, 0, 0),
        "not_an_array": [1, 2, 3],
        "none": None,
    }
    before = _snapshot(good, local, host)
    kind, text = _attempt(lambda: comm.register_memory(objs[case]))
    return dict(kind=kind, text=text, unchanged=_unchanged(before, good, local, host))


def bad_memory_channel(comm, state, case: str):
    """A bad memory_channel call (made identically by both ranks), then a good one still works."""
    src = alloc(256)
    peer = _peer(comm)
    calls = {
        "peer_is_self": lambda: comm.memory_channel(comm.rank, src),
        "peer_negative": lambda: comm.memory_channel(-1, src),
        "peer_out_of_range": lambda: comm.memory_channel(comm.size, src),
        "peer_is_a_string": lambda: comm.memory_channel(str(peer), src),
        "peer_is_a_float": lambda: comm.memory_channel(float(peer), src),
        "zero_semaphores": lambda: comm.memory_channel(peer, src, semaphores=0),
        "negative_semaphores": lambda: comm.memory_channel(peer, src, semaphores=-2),
        "too_many_semaphores": lambda: comm.memory_channel(peer, src, semaphores=1 << 30),
        "semaphores_not_an_int": lambda: comm.memory_channel(peer, src, semaphores="2"),
        "host_src": lambda: comm.memory_channel(peer, np.zeros(256, np.uint8)),
        "process_local_inbox": lambda: comm.memory_channel(peer, src, cuda.to_device(np.zeros(256, np.uint8))),
    }
    before = _snapshot(src)
    kind, text = _attempt(calls[case])
    unchanged = _unchanged(before, src)
    # the pair's setup sequence must still be in step: a fresh channel signals and waits
    s = _channel(comm, {}, "after")
    ok = cuda.to_device(np.zeros(1, np.int32))
    _sync(comm)
    _signal_kernel[1, 1](s["ch"].device_handle())
    _wait_kernel[1, 1](s["ch"].device_handle(), ok)
    cuda.synchronize()
    _sync(comm)
    return dict(kind=kind, text=text, unchanged=unchanged, still_works=int(ok.copy_to_host()[0]) == 1,
                device_error=_error_text(comm))


def bad_exchange_memory(comm, state, case: str):
    buf = alloc(256)
    calls = {
        "peer_is_self": lambda: comm.exchange_memory(buf, comm.rank),
        "peer_out_of_range": lambda: comm.exchange_memory(buf, comm.size + 3),
        "host_buffer": lambda: comm.exchange_memory(np.zeros(64, np.uint8), _peer(comm)),
        "process_local_buffer": lambda: comm.exchange_memory(cuda.to_device(np.zeros(64, np.uint8)), _peer(comm)),
    }
    before = _snapshot(buf)
    kind, text = _attempt(calls[case])
    unchanged = _unchanged(before, buf)
    _sync(comm)
    remote = comm.exchange_memory(buf, _peer(comm))  # still in step afterwards
    _sync(comm)  # ``buf`` must outlive the peer's mapping of it
    return dict(kind=kind, text=text, unchanged=unchanged, still_works=remote.rank == _peer(comm))


# ---------------------------------------------------------------- soak and wrap-around

SOAK_SHAPES = [(1, "float32", "sum"), (7, "int32", "max"), (64, "float32", "sum"), (33, "float16", "min"),
               (256, "int32", "sum"), (5, "uint8", "max"), (1024, "float32", "sum"), (100, "float32", "prod")]


def soak(comm, state, seconds: float, seed: int = 0):
    """All-reduces of varied sizes, dtypes and ops for ``seconds`` (rank 0 decides when to stop); every
    result checked. Returns the number of all-reduces run."""
    n = 0
    start = time.monotonic()
    while True:
        count, dtype, op = SOAK_SHAPES[n % len(SOAK_SHAPES)]
        cc.all_reduce(comm, state, count=count, dtype=dtype, op=op, seed=seed + n, inplace=bool(n % 3 == 0))
        n += 1
        if n % 8 == 0:
            stop = comm.bootstrap.all_gather(b"1" if time.monotonic() - start > seconds else b"0")
            if stop[0] == b"1":
                return n


def packet_flags_across_wrap(comm, state, start: int, rounds: int):
    """LL16 packets between ring neighbours with the block's flag preset to ``start``: data stays exact and
    the flag sequence (read back after each round) skips 0 and alternates parity across 2**32."""
    import channel_cases as chc
    sub: dict = {}
    s = chc._setup(comm, sub)
    s["flags"].copy_to_device(np.full(4, start, np.uint32))
    seen = []
    for r in range(rounds):
        chc.packet_exchange(comm, sub, nbytes=200, src_off=0, out_off=8192, seed=r, ll8=False, rounds=1)
        seen.append(int(s["flags"].copy_to_host()[0]))
    return seen


def allreduce_flags_across_wrap(comm, state, start: int, iters: int):
    """The packet all-reduce's per-block flags preset near 2**32: every result stays exact across the wrap."""
    cc.all_reduce(comm, state, count=64, dtype="float32", op="sum", seed=1, inplace=False, algo="packet")
    flags = comm.algorithms.get("all_reduce", "packet").lanes.flags
    _sync(comm)
    flags.copy_to_device(np.full(flags.shape[0], start, np.uint32))
    _sync(comm)
    seen = []
    for i in range(iters):
        cc.all_reduce(comm, state, count=64 + i, dtype="float32", op="sum", seed=100 + i, inplace=False,
                      algo="packet")
        seen.append(int(flags.copy_to_host()[0]))
    return seen


@cuda.jit
def _pingpong_kernel(ch, first, rounds, bad):
    """Ping-pong: the ``first`` rank writes round r to the peer, signals, then waits for the reply; the
    other waits, checks the value it got is r (a wait that passed early would read a stale one), replies."""
    if cuda.threadIdx.x == 0:
        for r in range(rounds):
            if first:
                ch.dst[0] = np.uint8(r + 1)
                mc.signal(ch)
                if not mc.wait(ch):
                    bad[0] += 1
                if ch.src[1] != np.uint8(r + 1):
                    bad[1] += 1
            else:
                if not mc.wait(ch):
                    bad[0] += 1
                if ch.src[0] != np.uint8(r + 1):
                    bad[1] += 1
                ch.dst[1] = np.uint8(r + 1)
                mc.signal(ch)


def semaphore_tokens_near_limit(comm, state, start: int, rounds: int):
    """Tokens and expected counters preset to ``start`` on both ranks: ``rounds`` ping-pongs stay ordered."""
    src = alloc(64)
    ch = comm.memory_channel(_peer(comm), src, src)
    h = ch.device_handle()
    h.inbound.copy_to_device(np.array([start], np.uint64))
    h.expected.copy_to_device(np.array([start], np.uint64))
    _sync(comm)
    bad = cuda.to_device(np.zeros(2, np.int64))
    _pingpong_kernel[1, 1](h, comm.rank == 0, rounds, bad)
    cuda.synchronize()
    _sync(comm)
    return dict(bad=bad.copy_to_host().tolist(), inbound=int(h.inbound.copy_to_host()[0]),
                expected=int(h.expected.copy_to_host()[0]), error=_error_text(comm))


def two_communicators_alternate(comm, state, rounds: int):
    """A second communicator over the same processes; all-reduces alternate between the two, all exact."""
    comm2 = _new_comm(comm)
    st2: dict = {}
    try:
        for i in range(rounds):
            cc.all_reduce(comm, state, count=40 + i, dtype="float32", op="sum", seed=500 + i, inplace=False)
            cc.all_reduce(comm2, st2, count=300 - i, dtype="int32", op="max", seed=900 + i, inplace=True)
        return 2 * rounds
    finally:
        _sync(comm)
        comm2.close()


def soak_collectives(comm, state, registered_share: float, repeats: int = 1, seed: int = 0) -> list:
    """``soak_collectives.soak`` of every collective and verb through the simulator's sizes, in as many rounds as
    ``registered_share`` takes to run each both plain and registered, half the calls made ``repeats`` times:
    ((collective, algorithm, kernel), calls) of what served them, every result checked."""
    from fault.soak_collectives import COLLECTIVES, SIM_SIZES, VERBS, soak
    rounds = round(1 / (1 - registered_share))
    served = soak(comm, iters=rounds * len(COLLECTIVES + VERBS) * len(SIM_SIZES), seed=seed, sizes=SIM_SIZES,
                  registered_share=registered_share, repeats=repeats)
    return sorted(served.items())

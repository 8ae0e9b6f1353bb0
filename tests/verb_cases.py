"""Rank functions for the verb tests (send/recv groups, all-to-all with counts, gather, scatter, reduce, avg):
the rank pools' ``fn(comm, state, **params)`` form, each checking its results against NumPy itself."""

from __future__ import annotations

import contextlib
import os

import numpy as np
from numba import cuda

from pymscclpp.errors import CallMismatchError, InvalidUsageError
from pymscclpp.runtime.memory import alloc, view_as
from pymscclpp.testing import reference
from pymscclpp.testing.calls import np_dtype


def data(rank: int, count: int, dtype: str = "float32", seed: int = 0) -> np.ndarray:
    """Rank ``rank``'s input: small integers, exact in every dtype and order of summation."""
    rng = np.random.default_rng([seed, rank])
    if dtype == "uint8":
        return rng.integers(0, 4, count, dtype=np.uint8)
    return rng.integers(-8, 9, count, dtype=np.int8).astype(np_dtype(dtype))  # drawn as int8: 10x faster


def _sync(comm) -> None:
    cuda.synchronize()
    comm.check_device_errors()


def send_recv_plan(comm, state, plan: list, seed: int = 0) -> str:
    """Run ``plan`` [(src, dst, count), ...] in one group, every rank posting its own ops in a rank-specific
    order (recvs before sends on odd ranks, peers in descending order on even ones, self-sends included; ops
    with one peer in one direction in plan order, as NCCL matches them); each recv gets exactly what its sender
    sent; the algorithm's name."""
    me = comm.rank
    ops = []
    for i, (src, dst, count) in enumerate(plan):
        if src == me:
            ops.append(("send", i, dst, cuda.to_device(data(100 * i + src, count, "float32", seed))))
        if dst == me:
            ops.append(("recv", i, src, cuda.to_device(np.full(count, -99, np.float32))))
    if me % 2:
        ops.sort(key=lambda o: (o[0] != "recv", o[1]))
    else:
        ops.sort(key=lambda o: (-o[2], o[1]))
    with comm.group():
        for kind, _, peer, buf in ops:
            (comm.send if kind == "send" else comm.recv)(buf, peer)
    _sync(comm)
    for kind, i, peer, buf in ops:
        if kind == "recv":
            np.testing.assert_array_equal(buf.copy_to_host(), data(100 * i + peer, plan[i][2], "float32", seed))
    served = comm.last_algorithm("send_recv")
    return served.name if served else ""


def self_only_group(comm, state, count: int) -> bool:
    """Rank 0 sends itself two buffers in a group while rank 1 makes no call: the copies arrive; whether the
    exchange's lanes (set up with every peer) were made."""
    if comm.rank == 0:
        xs = [cuda.to_device(data(i, count)) for i in range(2)]
        ys = [cuda.to_device(np.zeros(count, np.float32)) for _ in range(2)]
        with comm.group():
            for x, y in zip(xs, ys):
                comm.send(x, 0)
                comm.recv(y, 0)
        _sync(comm)
        for i, y in enumerate(ys):
            np.testing.assert_array_equal(y.copy_to_host(), data(i, count))
    return comm.extension("exchange") is not None


def send_recv_then_gather(comm, state, count: int) -> None:
    """Ranks 0 and 1 make a send/recv first while every other rank's first verb is the gather all ranks make next
    (the exchange's set-up is one, whatever verb a rank starts with)."""
    if comm.rank < 2:
        buf = cuda.to_device(data(7, count) if comm.rank == 0 else np.zeros(count, np.float32))
        (comm.send if comm.rank == 0 else comm.recv)(buf, 1 - comm.rank)
        _sync(comm)
        np.testing.assert_array_equal(buf.copy_to_host(), data(7, count))
    out = cuda.to_device(np.zeros(comm.size * count, np.float32)) if comm.rank == 0 else None
    comm.gather(cuda.to_device(data(comm.rank, count)), out, root=0)
    _sync(comm)
    if out is not None:
        np.testing.assert_array_equal(out.copy_to_host(), np.concatenate([data(r, count) for r in range(comm.size)]))


def ring(comm, state, count: int, dtype: str = "float32", grouped: bool = True, repeat: int = 1) -> None:
    """Every rank sends to the next and receives from the previous (one send and one recv buffer: no staging)."""
    n, me = comm.size, comm.rank
    for it in range(repeat):
        send = cuda.to_device(data(me, count, dtype, it))
        recv = cuda.to_device(np.zeros(count, np_dtype(dtype)))
        if grouped:
            with comm.group():
                comm.recv(recv, (me - 1) % n)
                comm.send(send, (me + 1) % n)
        elif me % 2 == 0:
            comm.send(send, (me + 1) % n)
            comm.recv(recv, (me - 1) % n)
        else:
            comm.recv(recv, (me - 1) % n)
            comm.send(send, (me + 1) % n)
        _sync(comm)
        np.testing.assert_array_equal(recv.copy_to_host(), data((me - 1) % n, count, dtype, it))


def mismatched_send_recv(comm, state, case: str) -> str:
    """Rank 0 sends rank 1 what rank 1 does not expect (``count`` or ``dtype``): both raise CallMismatchError
    naming the peer and both sides; the receive buffer is untouched. The error text."""
    count, dtype = 64, "float32"
    if comm.rank == 0:
        try:
            comm.send(cuda.to_device(data(0, count, dtype)), 1)
            _sync(comm)
        except CallMismatchError as exc:
            return str(exc)
        raise AssertionError("rank 0: a mismatched send did not raise")
    if comm.rank == 1:
        other = (count * 2, dtype) if case == "count" else (count, "int32")
        buf = cuda.to_device(np.full(other[0], 7, np_dtype(other[1])))
        try:
            comm.recv(buf, 0)
            _sync(comm)
        except CallMismatchError as exc:
            assert (buf.copy_to_host() == 7).all()
            return str(exc)
        raise AssertionError("rank 1: a mismatched recv did not raise")
    return ""


def mismatched_reduce(comm, state, case: str) -> str:
    """Two ranks' two-step reduces that differ (``root``: rank 1 names another root; ``registered``: both register a
    buffer, rank 1 reduces another, so only rank 0 runs zero-copy): both raise CallMismatchError and the root's
    output is untouched. The error text."""
    count, me = 300, comm.rank
    registered, other = (view_as(alloc(4 * count), np.float32) for _ in range(2))
    if case == "registered":
        comm.register_buffer(registered)
    send = other if case == "registered" and me == 1 else registered
    send.copy_to_device(data(me, count, "float32"))
    out = cuda.to_device(np.full(count, 7, np.float32))
    root = 1 if case == "root" and me == 1 else 0
    try:
        comm.reduce(send, out if me == root else None, root=root, algo="rsag")
        _sync(comm)
    except CallMismatchError as exc:
        assert (out.copy_to_host() == 7).all()
        return str(exc)
    raise AssertionError(f"rank {me}: a mismatched reduce did not raise")


def reordered_sends(comm, state) -> str:
    """Rank 0 sends rank 1 7 then 1500 elements, rank 1 receives 1500 then 7 (same totals, same op count): both
    raise CallMismatchError (the pair descriptors digest the op sizes in order); the error text."""
    sizes = [7, 1500] if comm.rank == 0 else [1500, 7]
    bufs = [cuda.to_device(np.zeros(n, np.float32)) for n in sizes]
    try:
        with comm.group():
            for b in bufs:
                (comm.send if comm.rank == 0 else comm.recv)(b, 1 - comm.rank)
        _sync(comm)
    except CallMismatchError as exc:
        return str(exc)
    raise AssertionError("reordered sends did not raise")


def bad_p2p(comm, state, case: str) -> str:
    """A send or recv with bad arguments raises InvalidUsageError before any launch; the error text."""
    buf = cuda.to_device(np.zeros(8, np.float32))
    try:
        if case == "peer":
            comm.send(buf, comm.size)
        elif case == "self_count":
            with comm.group():
                comm.send(buf, comm.rank)
                comm.recv(cuda.to_device(np.zeros(4, np.float32)), comm.rank)
        elif case == "overlap":
            with comm.group():
                comm.recv(buf[:4], (comm.rank + 1) % comm.size)
                comm.recv(buf[2:6], (comm.rank - 1) % comm.size)
    except InvalidUsageError as exc:
        return str(exc)
    raise AssertionError(f"{case}: no error")


def all_to_allv(comm, state, counts: list, dtype: str = "float32", seed: int = 0, algo: str | None = None) -> str:
    """``counts[i][j]``: elements rank i sends rank j; every rank's receive buffer holds what NumPy says; the
    kernel that served the call (``algo``: the algorithm asked for, None: the selection's)."""
    n, me = comm.size, comm.rank
    send_counts = counts[me]
    recv_counts = [counts[j][me] for j in range(n)]
    x = data(me, sum(send_counts), dtype, seed)
    send = cuda.to_device(x)
    recv = cuda.to_device(np.full(sum(recv_counts) + 3, 55, np_dtype(dtype)))  # 3 past the end stay untouched
    comm.all_to_all(send, recv, send_counts=send_counts, recv_counts=recv_counts, algo=algo)
    _sync(comm)
    parts = []
    for j in range(n):
        xj = data(j, sum(counts[j]), dtype, seed)
        start = sum(counts[j][:me])
        parts.append(xj[start:start + counts[j][me]])
    want = np.concatenate(parts + [np.full(3, 55, np_dtype(dtype))])
    np.testing.assert_array_equal(recv.copy_to_host(), want)
    np.testing.assert_array_equal(send.copy_to_host(), x)
    return comm.last_algorithm("all_to_allv").last_kernel


def all_to_allv_rounds(comm, state, counts: list, algo: str) -> list[int]:
    """``all_to_allv`` twice by ``algo`` (a one-hop kernel, on lanes); the rounds the second call took in each block
    (how far the block's flag moved)."""
    all_to_allv(comm, state, counts, algo=algo)
    flags = comm.last_algorithm("all_to_allv").lanes.flags
    before = flags.copy_to_host().astype(np.int64)
    all_to_allv(comm, state, counts, algo=algo, seed=1)
    return (flags.copy_to_host() - before).tolist()


def mismatched_counts(comm, state) -> str:
    """Rank 0 says it sends rank 1 one element more than rank 1 receives: every rank raises before any data
    moves (buffers untouched); the error text."""
    n = comm.size
    send_counts = [4] * n
    recv_counts = [4] * n
    if comm.rank == 0:
        send_counts[1] = 5
    recv = cuda.to_device(np.full(4 * n, 9, np.float32))
    try:
        comm.all_to_all(cuda.to_device(np.zeros(sum(send_counts), np.float32)), recv, send_counts=send_counts,
                        recv_counts=recv_counts)
    except InvalidUsageError as exc:
        assert (recv.copy_to_host() == 9).all()
        return str(exc)
    raise AssertionError("mismatched counts did not raise")


def rooted(comm, state, verb: str, count: int, root: int, dtype: str = "float32", op: str = "sum",
           inplace: bool = False, seed: int = 0, register: bool = False, algo: str | None = None,
           others_recv: bool = False) -> str:
    """``gather``, ``scatter`` or ``reduce`` (by ``algo``: None, the default choice) against the NumPy reference;
    non-roots pass None where allowed (``others_recv``: a reduce's non-roots pass a receive buffer, which stays
    untouched); a reduce leaves every input but the root's in place untouched; ``register``: a reduce's send
    buffer registered with the communicator for the call, which then runs zero-copy. The name of the algorithm
    that served it."""
    n, me = comm.size, comm.rank
    inputs = [data(r, count * (n if verb == "scatter" else 1), dtype, seed) for r in range(n)]
    x = inputs[me]
    if verb == "gather":
        recv = cuda.to_device(np.zeros(count * n, np_dtype(dtype))) if me == root else None
        comm.gather(cuda.to_device(x), recv, root=root)
        want = np.concatenate(inputs)
    elif verb == "scatter":
        recv = cuda.to_device(np.zeros(count, np_dtype(dtype)))
        comm.scatter(cuda.to_device(x) if me == root else None, recv, root=root)
        want = inputs[root][me * count:(me + 1) * count]
    else:
        if register:  # registered memory comes from alloc (the simulator shares only that)
            send = view_as(alloc(x.nbytes), x.dtype)
            send.copy_to_device(x)
            comm.register_buffer(send)
        else:
            send = cuda.to_device(x)
        zeros = np.zeros(count, np_dtype(dtype))
        recv = send if inplace else (cuda.to_device(zeros) if me == root or others_recv else None)
        comm.reduce(send, None if inplace else recv, root=root, op=op, algo=algo)
        if register:
            assert comm.algorithms.served["reduce"].last_kernel.endswith("zero_copy_simple")
            cuda.synchronize()
            comm.deregister_buffer(send)
        want = reference.all_reduce(inputs, op)[0]
        _sync(comm)
        if not (inplace and me == root):
            np.testing.assert_array_equal(send.copy_to_host(), x)
        if me != root and recv is not None and not inplace:
            np.testing.assert_array_equal(recv.copy_to_host(), zeros)
    _sync(comm)
    if recv is not None and (verb == "scatter" or me == root):
        np.testing.assert_array_equal(recv.copy_to_host(), want)
    return comm.algorithms.served[verb].name


def exchange_kernel(comm, state, verb: str, count: int, root: int) -> str:
    """``rooted`` by the exchange (a reduce forced to it; gather and scatter take it by default): the entry kernel
    that served it."""
    rooted(comm, state, verb, count, root, algo="exchange" if verb == "reduce" else None)
    return comm.algorithms.served[verb].last_kernel


def captured_reduce(comm, state, count: int, root: int, inplace: bool, register: bool = False,
                    repeat: int = 2) -> None:
    """A two-step reduce whose stream is captured (the capture check forced true, as the simulator has no graphs):
    every rank maps its send buffer and its output (a non-root passes none: its send buffer stands in), also where
    the send buffer is ``register``-ed, the ranks write their shards straight into the root's output, exact call
    after call, the inputs untouched."""
    from pymscclpp.algos import zero_copy
    n, me = comm.size, comm.rank
    real = zero_copy.capturing
    zero_copy.capturing = lambda stream: True
    try:
        for it in range(repeat):
            inputs = [data(r, count, "float32", seed=it) for r in range(n)]
            send = _mapped(count, "float32")  # the simulator maps only memory from alloc
            if register:
                comm.register_buffer(send)
            send.copy_to_device(inputs[me])
            recv = _mapped(count, "float32") if me == root and not inplace else None
            windows = comm.extension("windows")
            before = windows.captured if windows is not None else 0
            comm.reduce(send, recv, root=root, algo="rsag")
            _sync(comm)
            assert comm.algorithms.served["reduce"].last_kernel == "reduce_zero_copy_simple"
            assert comm.extension("windows").captured == before + 2
            want = reference.all_reduce(inputs, "sum")[0]
            if me == root:
                np.testing.assert_array_equal((send if inplace else recv).copy_to_host(), want)
            else:
                np.testing.assert_array_equal(send.copy_to_host(), inputs[me])
            if register:
                comm.deregister_buffer(send)
    finally:
        zero_copy.capturing = real


def avg(comm, state, verb: str, count: int, dtype: str, algo: str | None = None) -> None:
    """``op="avg"`` of all_reduce, reduce_scatter or reduce (by ``algo``) equals the reference (the sum divided in
    the kernel)."""
    n, me = comm.size, comm.rank
    inputs = [data(r, count * (n if verb == "reduce_scatter" else 1), dtype, 3) for r in range(n)]
    send = cuda.to_device(inputs[me])
    if verb == "all_reduce":
        recv = cuda.to_device(np.zeros(count, np_dtype(dtype)))
        comm.all_reduce(send, recv, op="avg", algo=algo)
        want = reference.all_reduce(inputs, "avg")[me]
    elif verb == "reduce_scatter":
        recv = cuda.to_device(np.zeros(count, np_dtype(dtype)))
        comm.reduce_scatter(send, recv, op="avg", algo=algo)
        want = reference.reduce_scatter(inputs, "avg")[me]
    else:
        recv = cuda.to_device(np.zeros(count, np_dtype(dtype)))
        comm.reduce(send, recv, root=0, op="avg", algo=algo)
        want = reference.all_reduce(inputs, "avg")[0] if me == 0 else np.zeros(count, np_dtype(dtype))
    _sync(comm)
    np.testing.assert_array_equal(recv.copy_to_host(), want)


def bench_cases(comm, state, dtype: str, redop: str) -> None:
    """Every verb's simulator benchmark case (``python -m pymscclpp.bench --op VERB``) gives the result it
    expects, twice in a row."""
    from pymscclpp.bench.sim_sweep import make_sim_verb_case
    from pymscclpp.bench.verb_cases import VERBS
    for op in VERBS:
        _, call, out, want, _ = make_sim_verb_case(op, comm, np_dtype(dtype), 4096, redop, None)
        for _ in range(2):
            call()
            _sync(comm)
            np.testing.assert_array_equal(out.copy_to_host(), want, err_msg=op)


def bad_collective(comm, state, case: str) -> str:
    """A rooted call or an all-to-all with counts given bad arguments raises InvalidUsageError on the rank that
    made it, before any launch, with the receive buffer untouched; the error text."""
    n = comm.size
    x = cuda.to_device(np.ones(8, np.float32))
    out = cuda.to_device(np.full(8 * n, 5, np.float32))
    calls = {"a2a_too_many": lambda: comm.all_to_all(x, out, send_counts=[5] * n, recv_counts=[1] * n),
             "a2a_negative": lambda: comm.all_to_all(x, out, send_counts=[-1] + [1] * (n - 1), recv_counts=[1] * n),
             "a2a_length": lambda: comm.all_to_all(x, out, send_counts=[1] * (n + 1), recv_counts=[1] * n),
             "a2a_in_place": lambda: comm.all_to_all(out, out, send_counts=[1] * n, recv_counts=[1] * n),
             "root": lambda: comm.gather(x, out, root=n),
             "gather_small": lambda: comm.gather(x, out[:8 * n - 1], root=0),
             "scatter_none": lambda: comm.scatter(None, x, root=0),
             "reduce_dtype": lambda: comm.reduce(cuda.to_device(np.ones(8, np.float64)), root=0)}
    if case in ("gather_small", "scatter_none") and comm.rank != 0:
        return ""  # only the root reads that buffer: the others' calls would go ahead (and wait for the root)
    try:
        calls[case]()
    except InvalidUsageError as exc:
        assert (out.copy_to_host() == 5).all()
        return str(exc)
    raise AssertionError(f"{case}: no error")


def both_send_first(comm, state) -> str:
    """Both ranks send first, outside a group: each send meets the peer's send, so both raise naming the fix
    (a group), rather than hang; the error text."""
    buf = cuda.to_device(np.ones(64, np.float32))
    try:
        comm.send(buf, 1 - comm.rank)
        _sync(comm)
    except CallMismatchError as exc:
        return str(exc)
    raise AssertionError("two sends meeting did not raise")


def all_to_allv_zero_copy(comm, state, counts: list, dtype: str, registered, captured: bool, repeat: int = 2,
                          algo: str | None = "exchange", served_by: str | None = None) -> str:
    """all_to_all with counts by ``algo`` (the exchange: small calls otherwise go as packets; ``read``; None: the
    default's choice) whose send buffers start at a registration (rank r: registration ``registered[r]`` of two;
    None: unregistered) or whose calls are captured (the capture check forced true, as the simulator has no graphs)
    equals NumPy on every rank, call after call; how the last call ran (by algorithm ``served_by``, if named):
    "zero-copy (captured)", "zero-copy (registered)", "packets" or "staged"."""
    from pymscclpp.algos import verb_calls
    n, me = comm.size, comm.rank
    send_counts = counts[me]
    recv_counts = [counts[j][me] for j in range(n)]
    item = np.dtype(np_dtype(dtype)).itemsize
    bufs = [view_as(alloc(max(1, sum(send_counts)) * item), np_dtype(dtype)) for _ in range(2)]
    for buf in bufs:
        comm.register_buffer(buf)
    own = view_as(alloc(max(1, sum(send_counts)) * item), np_dtype(dtype))  # shared memory, not registered
    send = (own if registered[me] is None else bufs[registered[me]])[:sum(send_counts)]
    windows = comm.extension("windows")
    mapped = windows.captured
    real = verb_calls.capturing
    verb_calls.capturing = lambda stream: captured
    try:
        for it in range(repeat):
            if sum(send_counts):  # the simulator refuses an empty copy
                send.copy_to_device(data(me, sum(send_counts), dtype, seed=it))
            recv = cuda.to_device(np.full(sum(recv_counts) + 3, 55, np_dtype(dtype)))
            comm.all_to_all(send, recv, send_counts=send_counts, recv_counts=recv_counts, algo=algo)
            _sync(comm)
            parts = [data(j, sum(counts[j]), dtype, seed=it)[sum(counts[j][:me]):][:counts[j][me]] for j in range(n)]
            np.testing.assert_array_equal(recv.copy_to_host(), np.concatenate(parts + [np.full(3, 55, np_dtype(dtype))]))
            np.testing.assert_array_equal(send.copy_to_host(), data(me, sum(send_counts), dtype, seed=it))
    finally:
        verb_calls.capturing = real
    served = comm.last_algorithm("all_to_allv")
    kernel = served.last_kernel
    assert served_by in (None, served.name), (served_by, served.name)
    if served.name == "read":  # every rank reads every peer's range between two meetings of all ranks
        read = True
        assert kernel == "exchange_counts_read_simple", kernel
    elif served.name == "packet":  # small staged calls from 3 ranks: packets into peers' scratch, nothing read
        read = False
        assert kernel == "exchange_counts_ll", kernel
    else:
        read = _reads_zero_copy(comm, "all_to_allv")  # every pair reads: the kernel without rings
        assert kernel == ("peer_read_simple" if read else "peer_exchange_simple"), kernel
    for buf in bufs:
        comm.deregister_buffer(buf)
    if windows.captured == mapped + repeat:
        return "zero-copy (captured)"
    assert windows.captured == mapped, (mapped, windows.captured)
    return "zero-copy (registered)" if read else "packets" if served.name == "packet" else "staged"


def all_to_allv_zero_copy_refused(comm, state, counts: list) -> str:
    """all_to_all with counts forced to ``read`` on unregistered send buffers raises on every rank before any launch
    (the receive buffer untouched); the error text."""
    me = comm.rank
    send = cuda.to_device(data(me, sum(counts[me]), "float32"))
    recv = cuda.to_device(np.full(sum(c[me] for c in counts), 55, np.float32))
    try:
        comm.all_to_all(send, recv, send_counts=counts[me], recv_counts=[c[me] for c in counts], algo="read")
    except InvalidUsageError as exc:
        _sync(comm)
        assert (recv.copy_to_host() == 55).all()
        return str(exc)
    raise AssertionError("an unmapped all_to_all forced to 'read' did not raise")


def _mapped(count: int, dtype: str):
    """A device buffer of ``count`` elements that peers can map (registered)."""
    return view_as(alloc(count * np_dtype(dtype).itemsize), np_dtype(dtype))


@contextlib.contextmanager
def _send_recv_staged():
    """PYMSCCLPP_SEND_RECV_ZERO_COPY=0 in this rank while the block runs (read at use)."""
    os.environ["PYMSCCLPP_SEND_RECV_ZERO_COPY"] = "0"
    try:
        yield
    finally:
        del os.environ["PYMSCCLPP_SEND_RECV_ZERO_COPY"]


def _modes(comm, collective: str = "send_recv") -> dict:
    """How this rank's last exchange call moved data with each peer (``ExchangeLanes.pair_modes``)."""
    return comm.last_algorithm(collective).pair_modes()


def _reads_zero_copy(comm, collective: str) -> bool:
    """Whether this rank's last ``collective`` call read some peer's bytes, or had its own read, zero-copy."""
    return any(mode != "staged" for mode in _modes(comm, collective).values())


def registered_ring(comm, state, count: int, dtype: str, repeat: int = 2) -> None:
    """Every rank registers its send buffer and sends it to the next rank, grouped with its recv from the
    previous: each receiver reads it zero-copy, exact, call after call, the send buffer untouched."""
    send, recv = _mapped(count, dtype), _mapped(count, dtype)
    comm.register_buffer(send)
    _ring(comm, send, recv, count, dtype, repeat)
    n, me = comm.size, comm.rank
    modes = _modes(comm)
    if n == 2:
        assert modes == {1 - me: "read, read by"}, modes
    else:
        assert modes[(me - 1) % n] == "read" and modes[(me + 1) % n] == "read by", modes
    comm.deregister_buffer(send)


def _ring(comm, send, recv, count: int, dtype: str, repeat: int) -> None:
    """``repeat`` grouped ring send/recvs from ``send`` into ``recv``, exact, the send buffer untouched."""
    n, me = comm.size, comm.rank
    for it in range(repeat):
        x = data(me, count, dtype, it)
        send.copy_to_device(x)
        recv.copy_to_device(np.full(count, 99, np_dtype(dtype)))
        with comm.group():
            comm.send(send, (me + 1) % n)
            comm.recv(recv, (me - 1) % n)
        _sync(comm)
        np.testing.assert_array_equal(recv.copy_to_host(), data((me - 1) % n, count, dtype, it))
        np.testing.assert_array_equal(send.copy_to_host(), x)


def registered_sends_stage_when_zero_copy_is_off(comm, state, count: int) -> None:
    """PYMSCCLPP_SEND_RECV_ZERO_COPY=0: a ring whose send buffers are registered stages, exact."""
    send, recv = _mapped(count, "float32"), _mapped(count, "float32")
    comm.register_buffer(send)
    with _send_recv_staged():
        _ring(comm, send, recv, count, "float32", 2)
    assert set(_modes(comm).values()) == {"staged"}, _modes(comm)
    comm.deregister_buffer(send)


def mixed_ring(comm, state, count: int, dtype: str) -> None:
    """A ring whose send buffers start one registration, but rank 0 sends another, unregistered buffer (and
    receives into one): in the one call the pairs from and to rank 0 stage and every other pair reads zero-copy,
    exact on every rank."""
    n, me = comm.size, comm.rank
    registered = _mapped(count, dtype)
    comm.register_buffer(registered)
    send, recv = (_mapped(count, dtype), _mapped(count, dtype)) if me == 0 else (registered, _mapped(count, dtype))
    _ring(comm, send, recv, count, dtype, 2)
    modes = _modes(comm)
    after, before = (me + 1) % n, (me - 1) % n
    assert modes[after] == ("staged" if 0 in (me, after) else "read by"), modes
    assert modes[before] == ("staged" if 0 in (me, before) else "read"), modes
    comm.deregister_buffer(registered)


def registered_send_to_receivers(comm, state, count: int, dtype: str, receivers: int) -> None:
    """Rank 0 sends its registered buffer to ranks 1 .. ``receivers`` (one group), each of which registered its
    receive buffer at the same registration: every receiver reads it zero-copy; the other ranks take no part."""
    buf = _mapped(count, dtype)
    comm.register_buffer(buf)
    x = data(0, count, dtype)
    if comm.rank == 0:
        buf.copy_to_device(x)
        with comm.group():
            for peer in range(1, receivers + 1):
                comm.send(buf, peer)
    elif comm.rank <= receivers:
        comm.recv(buf, 0)
    _sync(comm)
    if comm.rank == 0:
        assert _modes(comm) == {p: "read by" if p <= receivers else "staged" for p in range(1, comm.size)}
    elif comm.rank <= receivers:
        np.testing.assert_array_equal(buf.copy_to_host(), x)
        assert _modes(comm)[0] == "read", _modes(comm)
    comm.deregister_buffer(buf)


def registered_on_one_side(comm, state, both: bool) -> None:
    """Every rank registers a buffer (``both``: two); rank 0 sends rank 1 the first, rank 1 receives into another
    buffer (unregistered, or ``both``: the second, another registration): the pair stages, exact."""
    registered, other = _mapped(64, "float32"), _mapped(64, "float32")
    comm.register_buffer(registered)
    if both:
        comm.register_buffer(other)
    registered.copy_to_device(data(comm.rank, 64))
    other.copy_to_device(np.full(64, 7, np.float32))
    (comm.send(registered, 1) if comm.rank == 0 else comm.recv(other, 0))
    _sync(comm)
    if comm.rank == 1:
        np.testing.assert_array_equal(other.copy_to_host(), data(0, 64))
    assert _modes(comm) == {1 - comm.rank: "staged"}, _modes(comm)
    comm.deregister_buffer(registered)
    if both:
        comm.deregister_buffer(other)


def registered_sends(comm, state, dests: list, counts: list, registered: list, seed: int) -> None:
    """Rank r sends one buffer of ``counts[r]`` elements to each of ``dests[r]`` in one group, from a buffer that
    starts the one registration every rank makes if ``registered[r]``, else from an unregistered one; every
    receive is exact, and a pair reads zero-copy exactly where both ranks send from the registration."""
    n, me = comm.size, comm.rank
    reg = _mapped(max(counts), "float32")
    comm.register_buffer(reg)
    send = (reg if registered[me] else _mapped(max(counts), "float32"))[:counts[me]]
    send.copy_to_device(data(me, counts[me], seed=seed))
    recvs = {src: cuda.to_device(np.full(counts[src], -7, np.float32)) for src in range(n) if me in dests[src]}
    with comm.group():
        for dst in dests[me]:
            comm.send(send, dst)
        for src, buf in recvs.items():
            comm.recv(buf, src)
    _sync(comm)
    for src, buf in recvs.items():
        np.testing.assert_array_equal(buf.copy_to_host(), data(src, counts[src], seed=seed))
    if dests[me] or set(recvs) - {me}:
        sending = bool(dests[me])
        want = {}
        for p in range(n):
            if p == me:
                continue
            read = p in recvs and registered[p] and registered[me] and sending
            read_by = p in dests[me] and registered[me] and registered[p] and bool(dests[p])
            if p in recvs or p in dests[me]:
                want[p] = {(0, 0): "staged", (1, 0): "read", (0, 1): "read by", (1, 1): "read, read by"}[read, read_by]
        got = {p: m for p, m in _modes(comm).items() if p in want}
        assert got == want, (got, want)
    comm.deregister_buffer(reg)


def rooted_zero_copy(comm, state, verb: str, count: int, root: int, dtype: str, registered: list,
                     captured: bool = False, repeat: int = 2) -> dict:
    """``gather`` or ``scatter`` whose buffers that peers read (every rank's send buffer; a scatter's root send
    buffer and the others' receive buffers) start registration ``registered[r]`` of two on rank r (None:
    unregistered), or whose calls are captured (the capture check forced true, as the simulator has no graphs):
    exact, call after call, the read buffers untouched; how this rank's last call moved data with each peer."""
    from pymscclpp.algos import verb_calls
    n, me = comm.size, comm.rank
    slots = n if verb == "scatter" and me == root else 1
    regs = [_mapped(count * n, dtype) for _ in range(2)]
    for buf in regs:
        comm.register_buffer(buf)
    own = _mapped(count * n, dtype)
    read = (own if registered[me] is None else regs[registered[me]])[:count * slots]  # what peers read of ours
    mapped = comm.extension("windows").captured
    real = verb_calls.capturing
    verb_calls.capturing = lambda stream: captured
    try:
        for it in range(repeat):
            inputs = [data(r, count * (n if verb == "scatter" else 1), dtype, seed=it) for r in range(n)]
            if verb == "gather":
                read.copy_to_device(inputs[me])
                recv = cuda.to_device(np.full(count * n, 5, np_dtype(dtype))) if me == root else None
                comm.gather(read, recv, root=root)
                want = np.concatenate(inputs)
            else:
                send = read if me == root else None
                recv = cuda.to_device(np.zeros(count, np_dtype(dtype))) if me == root else read
                if me == root:
                    send.copy_to_device(inputs[root])
                else:
                    recv.copy_to_device(np.full(count, 5, np_dtype(dtype)))
                comm.scatter(send, recv, root=root)
                want = inputs[root][me * count:(me + 1) * count]
            _sync(comm)
            if verb == "scatter" or me == root:
                np.testing.assert_array_equal(recv.copy_to_host(), want)
            if verb == "gather" or me == root:
                np.testing.assert_array_equal(read.copy_to_host(), inputs[me])
    finally:
        verb_calls.capturing = real
    assert comm.extension("windows").captured == mapped + (repeat if captured else 0)
    kernel = comm.last_algorithm(verb).last_kernel  # captured: every pair reads, the kernel without rings
    assert kernel == ("peer_read_simple" if captured else "peer_exchange_simple"), kernel
    modes = _modes(comm, verb)
    for buf in regs:
        comm.deregister_buffer(buf)
    return modes


def packet_reduce_leaves_its_own_scratch_slots_alone(comm, state, count: int, root: int, repeat: int = 3) -> None:
    """Packet reduces of small integers (bytes that read as packet flags), each checked: a non-root's own slot of
    both halves of the shared packet scratch, which no peer writes and a later packet launch may read (slot 0 is
    the packet broadcast's), holds after them what it held before (its result goes to the communicator's sink)."""
    n, me = comm.size, comm.rank
    lanes = comm.algorithms.get("reduce", "packet").lanes
    slot = lanes.slot_bytes
    own = [h * n * slot + me * slot for h in range(2)]
    before = [lanes.view[at:at + slot].copy_to_host() for at in own]
    for it in range(repeat):
        inputs = [np.arange(count, dtype=np.int32) % 7 + r + it for r in range(n)]
        recv = cuda.to_device(np.zeros(count, np.int32)) if me == root else None
        comm.reduce(cuda.to_device(inputs[me]), recv, root=root, algo="packet")
        _sync(comm)
        if me == root:
            np.testing.assert_array_equal(recv.copy_to_host(), reference.all_reduce(inputs, "sum")[0])
    if me != root:
        for at, was in zip(own, before):
            np.testing.assert_array_equal(lanes.view[at:at + slot].copy_to_host(), was)

"""Collective API cases run by every rank (simulator rank pools, or GPUs under mpirun)."""

from __future__ import annotations

import numpy as np

import pymscclpp  # noqa: F401
from numba import cuda


NP_OPS = {"sum": np.add, "min": np.minimum, "max": np.maximum, "prod": np.multiply}


def rank_data(rank: int, count: int, dtype: str, seed: int) -> np.ndarray:
    """Rank ``rank``'s input: small integers (exact in every dtype and any summation order)."""
    rng = np.random.default_rng([seed, rank])
    if dtype == "uint8":
        return rng.integers(0, 4, count, dtype=np.uint8)
    return rng.integers(-8, 9, count, dtype=np.int8).astype(np.dtype(dtype))  # drawn as int8: 10x faster


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    """``np.testing.assert_array_equal``, its element-wise report only on a difference (100x faster when equal)."""
    if not np.array_equal(got, want):
        np.testing.assert_array_equal(got, want)


def expected_allreduce(size: int, count: int, dtype: str, seed: int, op: str) -> np.ndarray:
    acc = rank_data(0, count, dtype, seed)
    for r in range(1, size):
        acc = NP_OPS[op](acc, rank_data(r, count, dtype, seed))
    return acc.astype(np.dtype(dtype))


def all_reduce(comm, state, count: int, dtype: str, op: str, seed: int, inplace: bool, algo=None, repeat: int = 1):
    """all_reduce of rank-specific data equals the NumPy reduction on every rank, call after call."""
    for it in range(repeat):
        x = rank_data(comm.rank, count, dtype, seed + it)
        send = cuda.to_device(x)
        recv = send if inplace else cuda.to_device(np.full(count, 99, np.dtype(dtype)))
        comm.all_reduce(send, None if inplace else recv, op=op, algo=algo)
        cuda.synchronize()
        comm.check_device_errors()
        assert_same(recv.copy_to_host(), expected_allreduce(comm.size, count, dtype, seed + it, op))
        if not inplace:
            assert_same(send.copy_to_host(), x)


def all_reduce_result(comm, state, count: int, dtype: str, seed: int, algo: str,
                      registered: bool = False) -> np.ndarray:
    """This rank's all_reduce result (sum) of rank-specific non-integer data, to compare across ranks;
    ``registered``: on buffers registered with the communicator (its zero-copy kernel)."""
    import ml_dtypes
    from pymscclpp.runtime.memory import alloc, view_as
    np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng([seed, comm.rank])
    if registered:
        send, recv = (view_as(alloc(count * np_dtype.itemsize), np_dtype) for _ in range(2))
        comm.register_buffer(send)
        comm.register_buffer(recv)
        send.copy_to_device(rng.standard_normal(count).astype(np_dtype))
    else:
        send = cuda.to_device(rng.standard_normal(count).astype(np_dtype))
        recv = cuda.to_device(np.zeros(count, np_dtype))
    comm.all_reduce(send, recv, algo=algo)
    cuda.synchronize()
    comm.check_device_errors()
    if registered:
        assert comm.last_algorithm("all_reduce").last_kernel.endswith("zero_copy_simple")
        comm.deregister_buffer(send)
        comm.deregister_buffer(recv)
    return recv.copy_to_host()


def bad_input(comm, state, case: str):
    """A bad all_reduce argument raises InvalidUsageError naming the problem, and writes nothing."""
    from pymscclpp.errors import InvalidUsageError
    send = cuda.to_device(np.ones(16, np.float32))
    recv = cuda.to_device(np.full(16, 7, np.float32))
    args = {"size": (send, cuda.to_device(np.zeros(15, np.float32))),
            "dtype": (send, cuda.to_device(np.zeros(16, np.int32))),
            "host": (np.ones(16, np.float32), recv),
            "op": (send, recv)}[case]
    kwargs = {"op": "xor"} if case == "op" else {}
    try:
        comm.all_reduce(*args, **kwargs)
    except InvalidUsageError as exc:
        words = {"size": "elements", "dtype": "int32", "host": "host memory", "op": "xor"}[case]
        assert words in str(exc), str(exc)
    else:
        raise AssertionError(f"{case}: no error")
    assert_same(recv.copy_to_host(), np.full(16, 7, np.float32))


def _check(comm, got, want, send=None, sent=None) -> None:
    cuda.synchronize()
    comm.check_device_errors()
    assert_same(got.copy_to_host(), want)
    if send is not None:
        assert_same(send.copy_to_host(), sent)


def all_gather(comm, state, count: int, dtype: str, seed: int, inplace: bool, algo=None, repeat: int = 1):
    """all_gather puts every rank's data at its slot on every rank, call after call; in place from its slot."""
    n, r = comm.size, comm.rank
    for it in range(repeat):
        x = rank_data(r, count, dtype, seed + it)
        want = np.concatenate([rank_data(p, count, dtype, seed + it) for p in range(n)])
        init = np.full(n * count, 99, np.dtype(dtype))
        if inplace:
            init[r * count:(r + 1) * count] = x
        recv = cuda.to_device(init)
        send = recv[r * count:(r + 1) * count] if inplace else cuda.to_device(x)
        comm.all_gather(send, recv, algo=algo)
        _check(comm, recv, want, None if inplace else send, x)


def reduce_scatter(comm, state, count: int, dtype: str, op: str, seed: int, inplace: bool, algo=None,
                   repeat: int = 1):
    """reduce_scatter gives rank r the rank-order NumPy reduction of every rank's slot r; in place into its slot."""
    n, r = comm.size, comm.rank
    for it in range(repeat):
        x = rank_data(r, n * count, dtype, seed + it)
        want = expected_allreduce(n, n * count, dtype, seed + it, op)[r * count:(r + 1) * count]
        send = cuda.to_device(x)
        recv = send[r * count:(r + 1) * count] if inplace else cuda.to_device(np.full(count, 99, np.dtype(dtype)))
        comm.reduce_scatter(send, recv, op=op, algo=algo)
        _check(comm, recv, want, None if inplace else send, x)


def all_to_all(comm, state, count: int, dtype: str, seed: int, inplace: bool, algo=None, repeat: int = 1):
    """all_to_all moves rank j's slot r to rank r's slot j, call after call, in place or not."""
    n, r = comm.size, comm.rank
    for it in range(repeat):
        x = rank_data(r, n * count, dtype, seed + it)
        want = np.concatenate([rank_data(p, n * count, dtype, seed + it)[r * count:(r + 1) * count]
                               for p in range(n)])
        send = cuda.to_device(x)
        recv = send if inplace else cuda.to_device(np.full(n * count, 99, np.dtype(dtype)))
        comm.all_to_all(send, None if inplace else recv, algo=algo)
        _check(comm, recv, want, None if inplace else send, x)


def broadcast(comm, state, count: int, dtype: str, root: int, seed: int, inplace: bool, algo=None,
              repeat: int = 1):
    """broadcast copies the root's data to every rank; the root moves to the next rank each repeat."""
    for it in range(repeat):
        src = (root + it) % comm.size
        x = rank_data(comm.rank, count, dtype, seed + it)
        want = rank_data(src, count, dtype, seed + it)
        send = cuda.to_device(x)
        if inplace:
            comm.broadcast(send, src, algo=algo)
            _check(comm, send, want)
        else:
            recv = cuda.to_device(np.full(count, 99, np.dtype(dtype)))
            comm.broadcast(send, recv, src, algo=algo)
            _check(comm, recv, want, send, x)


# (send, recv) element counts per slot count n, for the bad-input cases of each collective
_SHAPES = {"all_gather": lambda n: (16, 16 * n), "reduce_scatter": lambda n: (16 * n, 16),
           "all_to_all": lambda n: (16 * n, 16 * n), "broadcast": lambda n: (16, 16)}
_WORDS = {"size": "elements", "dtype": "int32", "host": "host memory", "strided": "contiguous",
          "overlap": "overlap", "slots": "equal slots", "op": "xor", "root": "root"}


def bad_collective_input(comm, state, collective: str, case: str):
    """A bad argument to ``collective`` raises InvalidUsageError naming the problem, and writes nothing."""
    from pymscclpp.errors import InvalidUsageError
    n_send, n_recv = _SHAPES[collective](comm.size)
    backing = cuda.to_device(np.full(n_send + n_recv + 1, 7, np.float32))
    send = cuda.to_device(np.ones(n_send, np.float32))
    recv = backing[:n_recv]
    if case == "size":
        recv = backing[:n_recv + 1]
    elif case == "dtype":
        send = cuda.to_device(np.ones(n_send, np.int32))
    elif case == "host":
        send = np.ones(n_send, np.float32)
    elif case == "strided":
        send = cuda.to_device(np.ones((n_send, 2), np.float32))[:, 0]
    elif case == "overlap":
        send = backing[1:n_send + 1]
    elif case == "slots":
        send = cuda.to_device(np.ones(n_send + 1, np.float32))
    kwargs = {"op": "xor"} if case == "op" else {}
    root = comm.size if case == "root" else 0
    try:
        if collective == "broadcast":
            comm.broadcast(send, recv, root)
        else:
            getattr(comm, collective)(send, recv, **kwargs)
    except InvalidUsageError as exc:
        assert _WORDS[case] in str(exc), str(exc)
    else:
        raise AssertionError(f"{collective} {case}: no error")
    assert_same(backing.copy_to_host(), np.full(n_send + n_recv + 1, 7, np.float32))


def nccl_only_op_without_nccl(comm, state):
    """A reduction pymscclpp lacks (float64) goes to NCCL; without NCCL the error says so and writes nothing."""
    from pymscclpp.errors import InvalidUsageError
    send = cuda.to_device(np.ones(16, np.float64))
    recv = cuda.to_device(np.full(16, 7, np.float64))
    try:
        comm.all_reduce(send, recv, op="sum")
    except InvalidUsageError as exc:
        assert str(exc).startswith("pymscclpp does not serve all_reduce") and "float64" in str(exc), str(exc)
        assert "NCCL, which could, cannot be used" in str(exc), str(exc)
    else:
        raise AssertionError("no error")
    assert_same(recv.copy_to_host(), np.full(16, 7, np.float64))


def all_reduce_registered(comm, state, count: int, dtype: str, seed: int, inplace: bool, register: bool = True,
                          repeat: int = 2) -> np.ndarray:
    """all_reduce (sum, the two-shot algorithm) on buffers registered with the communicator equals the NumPy
    reduction, call after call; returns the last result."""
    from pymscclpp.runtime.memory import alloc, view_as
    size = np.dtype(dtype).itemsize
    send = view_as(alloc(count * size), np.dtype(dtype))
    recv = send if inplace else view_as(alloc(count * size), np.dtype(dtype))
    if register:
        comm.register_buffer(send)
        if not inplace:
            comm.register_buffer(recv)
    for it in range(repeat):
        send.copy_to_device(rank_data(comm.rank, count, dtype, seed + it))
        comm.all_reduce(send, None if inplace else recv, algo="rsag")
        cuda.synchronize()
        comm.check_device_errors()
        assert_same(recv.copy_to_host(), expected_allreduce(comm.size, count, dtype, seed + it, "sum"))
    if register:
        comm.deregister_buffer(send)
        if not inplace:
            comm.deregister_buffer(recv)
    return recv.copy_to_host()


def reduce_scatter_registered(comm, state, count: int, dtype: str, seed: int, inplace: bool, repeat: int = 2) -> None:
    """reduce_scatter (sum, ``read``) on a send buffer registered with the communicator runs the zero-copy kernel
    and equals the rank-order NumPy reduction, call after call, into a buffer that changes between calls."""
    from pymscclpp.runtime.memory import alloc, view_as
    n, r = comm.size, comm.rank
    np_dtype = np.dtype(dtype)
    send = view_as(alloc(n * count * np_dtype.itemsize), np_dtype)
    comm.register_buffer(send)
    for it in range(repeat):
        send.copy_to_device(rank_data(r, n * count, dtype, seed + it))
        recv = send[r * count:(r + 1) * count] if inplace else cuda.to_device(np.full(count, 99, np_dtype))
        comm.reduce_scatter(send, recv, algo="read")
        cuda.synchronize()
        comm.check_device_errors()
        want = expected_allreduce(n, n * count, dtype, seed + it, "sum")[r * count:(r + 1) * count]
        assert_same(recv.copy_to_host(), want)
    launches = comm.last_algorithm("reduce_scatter").kernel_launches()
    assert len(launches) == 2 and launches[1].kernel.py_func.__name__ == "reduce_scatter_zero_copy_simple", launches
    comm.deregister_buffer(send)


def captured_calls_zero_copy(comm, state, count: int, dtype: str, inplace: bool) -> None:
    """All-reduce (``rsag``) and reduce-scatter (``read``) calls made while their stream is captured (the capture
    check forced true, as the simulator has no graphs) map their unregistered buffers on every rank and run
    zero-copy, exact; a later capture whose buffers moved on one rank only maps them anew (no stale peer
    address), and a call not captured stages as before."""
    from pymscclpp.algos import zero_copy
    from pymscclpp.runtime.memory import alloc, view_as
    n, r, np_dtype = comm.size, comm.rank, np.dtype(dtype)
    windows = comm.extension("windows")
    first = view_as(alloc(n * count * np_dtype.itemsize), np_dtype)
    moved = view_as(alloc(n * count * np_dtype.itemsize), np_dtype)
    out = view_as(alloc(n * count * np_dtype.itemsize), np_dtype)
    real = zero_copy.capturing
    zero_copy.capturing = lambda stream: True
    try:
        for it, send in enumerate([first, moved if r == 1 else first]):
            before = 0 if windows is None else windows.captured
            send.copy_to_device(rank_data(r, n * count, dtype, it))
            comm.all_reduce(send, None if inplace else out, algo="rsag")
            cuda.synchronize()
            comm.check_device_errors()
            want = expected_allreduce(n, n * count, dtype, it, "sum")
            assert_same((send if inplace else out).copy_to_host(), want)
            windows = comm.extension("windows")
            assert windows.captured == before + 2, (before, windows.captured)  # in place: its buffer twice
            send.copy_to_device(rank_data(r, n * count, dtype, it + 7))
            shard = out[r * count:(r + 1) * count]
            comm.reduce_scatter(send, shard, algo="read")
            cuda.synchronize()
            comm.check_device_errors()
            want = expected_allreduce(n, n * count, dtype, it + 7, "sum")[r * count:(r + 1) * count]
            assert_same(shard.copy_to_host(), want)
    finally:
        zero_copy.capturing = real
    mapped = windows.captured
    comm.all_reduce(first, out, algo="rsag")
    cuda.synchronize()
    assert windows.captured == mapped


def registered_on_some_ranks(comm, state, count: int) -> str:
    """Every rank registers a buffer, but only rank 0 calls all_reduce on it (the others on another buffer): the
    zero-copy call and the staged ones disagree, so every rank raises CallMismatchError (no rank returns a wrong
    result); the error's text."""
    from pymscclpp.errors import CallMismatchError
    from pymscclpp.runtime.memory import alloc, view_as
    registered = view_as(alloc(4 * count), np.float32)
    other = view_as(alloc(4 * count), np.float32)
    comm.register_buffer(registered)
    buf = registered if comm.rank == 0 else other
    try:
        comm.all_reduce(buf, algo="rsag")
        cuda.synchronize()
        comm.check_device_errors()
    except CallMismatchError as exc:
        return str(exc)
    raise AssertionError("a zero-copy call met staged ones and nothing failed")


def captured_registered_on_some_ranks(comm, state, count: int) -> str:
    """Every rank registers a buffer, but only rank 0 captures an all_reduce on it (the others on another buffer;
    the capture check forced true, as the simulator has no graphs): rank 0 maps nothing and launches, the others
    wait to map their buffers with it. Every rank raises within the wait budget, saying so; the error's text."""
    from pymscclpp.algos import zero_copy
    from pymscclpp.errors import PymscclppError
    from pymscclpp.runtime.memory import alloc, view_as
    registered = view_as(alloc(4 * count), np.float32)
    other = view_as(alloc(4 * count), np.float32)
    comm.register_buffer(registered)
    buf = registered if comm.rank == 0 else other
    real = zero_copy.capturing
    zero_copy.capturing = lambda stream: True
    try:
        comm.all_reduce(buf, algo="rsag")
        cuda.synchronize()
        comm.check_device_errors()
    except PymscclppError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        zero_copy.capturing = real
    raise AssertionError("a captured call on registered buffers met captured ones on others and nothing failed")


def broadcast_without_root(comm, state) -> str:
    """broadcast(buf) with no root raises InvalidUsageError saying root is required; its text."""
    from pymscclpp.errors import InvalidUsageError
    try:
        comm.broadcast(cuda.to_device(np.ones(4, np.float32)))
    except InvalidUsageError as exc:
        return str(exc)
    raise AssertionError("broadcast without a root raised nothing")


def _exchange_buffers(comm, collective: str, count: int, dtype: str, inplace: bool, root: int):
    """(send, recv) device arrays of an all_gather, all_to_all or broadcast of ``count`` elements per slot."""
    from pymscclpp.runtime.memory import alloc, view_as
    n, r, np_dtype = comm.size, comm.rank, np.dtype(dtype)
    slots = 1 if collective == "broadcast" else n
    recv = view_as(alloc(slots * count * np_dtype.itemsize), np_dtype)
    if inplace:
        return (recv[r * count:(r + 1) * count] if collective == "all_gather" else recv), recv
    send_count = count if collective != "all_to_all" else n * count
    return view_as(alloc(send_count * np_dtype.itemsize), np_dtype), recv


def _exchange_expected(comm, collective: str, count: int, dtype: str, seed: int, root: int) -> np.ndarray:
    n, r = comm.size, comm.rank
    if collective == "all_gather":
        return np.concatenate([rank_data(p, count, dtype, seed) for p in range(n)])
    if collective == "all_to_all":
        return np.concatenate([rank_data(p, n * count, dtype, seed)[r * count:(r + 1) * count] for p in range(n)])
    return rank_data(root, count, dtype, seed)


def exchanges_zero_copy(comm, state, collective: str, count: int, dtype: str, inplace: bool, algo: str,
                        captured: bool, repeat: int = 2) -> None:
    """all_gather, all_to_all (out of place) and broadcast with ``algo`` on registered buffers (the send and
    receive buffers, in place the receive buffer), or on unregistered ones while their stream is captured (the
    capture check forced true, as the simulator has no graphs; a pulling broadcast maps both buffers, in place its
    one twice, the others one), run their zero-copy kernel and equal the NumPy result on every rank, call after
    call, the send buffer untouched."""
    from pymscclpp.algos import zero_copy
    n, r = comm.size, comm.rank
    root = 1 % n
    send, recv = _exchange_buffers(comm, collective, count, dtype, inplace, root)
    mapped = [recv] if inplace else [send, recv]  # pulls read peers' send buffers, pushes write their outputs
    if not captured:
        for buf in mapped:
            comm.register_buffer(buf)
    real = zero_copy.capturing
    zero_copy.capturing = lambda stream: captured
    try:
        for it in range(repeat):
            data = rank_data(r, send.size, dtype, seed=count + it)
            send.copy_to_device(data)
            if not inplace:
                recv.copy_to_device(np.full(recv.size, 99, np.dtype(dtype)))
            windows = comm.extension("windows")  # None until a first registration or captured call
            before = windows.captured if captured and windows is not None else 0
            kw = {"root": root} if collective == "broadcast" else {}
            into = None if inplace and collective != "all_gather" else recv  # in place: all_gather from its slot
            getattr(comm, collective)(send, into, algo=algo, **kw)
            cuda.synchronize()
            comm.check_device_errors()
            if captured:
                maps = 2 if collective == "broadcast" and algo != "push" else 1
                assert comm.extension("windows").captured == before + maps
            assert_same(recv.copy_to_host(), _exchange_expected(comm, collective, count, dtype,
                                                                                  count + it, root))
            if not inplace:
                assert_same(send.copy_to_host(), data)
    finally:
        zero_copy.capturing = real
    if not captured:
        names = [launch.kernel.py_func.__name__ for launch in comm.last_algorithm(collective).kernel_launches()]
        assert any(name.endswith("zero_copy_simple") for name in names), names
        for buf in mapped:
            comm.deregister_buffer(buf)


def broadcast_registered_on_the_root_only(comm, state, count: int) -> str:
    """Every rank registers a buffer, but only the root broadcasts on it (the others into another buffer): the
    zero-copy call and the staged ones disagree, so every rank raises CallMismatchError; the error's text."""
    from pymscclpp.errors import CallMismatchError
    from pymscclpp.runtime.memory import alloc, view_as
    registered = view_as(alloc(4 * count), np.float32)
    other = view_as(alloc(4 * count), np.float32)
    comm.register_buffer(registered)
    try:
        comm.broadcast(registered if comm.rank == 1 else other, root=1, algo="simple")
        cuda.synchronize()
        comm.check_device_errors()
    except CallMismatchError as exc:
        return str(exc)
    raise AssertionError("a zero-copy broadcast met staged ones and nothing failed")


def selection_follows_the_zero_copy_rows(comm, state, count: int) -> None:
    """A call that runs zero-copy (registered buffers) is served by what the table's zero-copy rows name (here
    all_reduce: ``rsag``, reduce_scatter: ``read`` at every size), exactly; the same shape on buffers that are not
    registered keeps the staged choice (the table's packet kernels at this size), and so does a registered one whose
    size falls in a row naming a staged kernel."""
    from pymscclpp.algos.collection import ZERO_COPY
    from pymscclpp.runtime.memory import alloc, view_as
    n, r, part = comm.size, comm.rank, count // comm.size
    comm.algorithms.table["all_reduce" + ZERO_COPY] = [(float("inf"), "rsag")]
    comm.algorithms.table["reduce_scatter" + ZERO_COPY] = [(float("inf"), "read")]
    send, recv = view_as(alloc(4 * count), np.float32), view_as(alloc(4 * count), np.float32)
    shard = recv[r * part:(r + 1) * part]
    for it, registered in enumerate((True, False, True)):
        if registered:
            comm.register_buffer(send)
            comm.register_buffer(recv)
        send.copy_to_device(rank_data(r, count, "float32", it))
        comm.all_reduce(send, recv)
        comm.reduce_scatter(send, shard)
        cuda.synchronize()
        comm.check_device_errors()
        assert_same(recv.copy_to_host(), expected_allreduce(n, count, "float32", it, "sum"))
        served = {c: comm.last_algorithm(c) for c in ("all_reduce", "reduce_scatter")}
        names = {c: (a.name, a.last_kernel) for c, a in served.items()}
        if registered:
            assert names == {"all_reduce": ("rsag", "all_reduce_zero_copy_simple"),
                             "reduce_scatter": ("read", "reduce_scatter_zero_copy_simple")}, names
            comm.deregister_buffer(send)
            comm.deregister_buffer(recv)
        else:
            assert {c: name for c, (name, _) in names.items()} == {"all_reduce": "packet",
                                                                    "reduce_scatter": "packet"}, names
    count *= 2  # a new call shape: its choice is made under the new rows
    comm.algorithms.table["all_reduce" + ZERO_COPY] = [(4 * count, "packet_wide"), (float("inf"), "rsag")]
    comm.algorithms.table["reduce_scatter" + ZERO_COPY] = [(4 * count, "simple"), (float("inf"), "read")]
    send, recv = view_as(alloc(4 * count), np.float32), view_as(alloc(4 * count), np.float32)
    comm.register_buffer(send)
    comm.register_buffer(recv)
    send.copy_to_device(rank_data(r, count, "float32", 3))
    comm.all_reduce(send, recv)
    comm.reduce_scatter(send, recv[r * 2 * part:(r + 1) * 2 * part])
    cuda.synchronize()
    comm.check_device_errors()
    assert_same(recv.copy_to_host()[r * 2 * part:(r + 1) * 2 * part],
                                  expected_allreduce(n, count, "float32", 3, "sum")[r * 2 * part:(r + 1) * 2 * part])
    names = {c: comm.last_algorithm(c).name for c in ("all_reduce", "reduce_scatter")}
    assert names == {"all_reduce": "packet", "reduce_scatter": "packet"}, names  # a staged row: the staged choice


def default_rows_at_eight_ranks(comm, state, collective: str, count: int) -> dict:
    """The default table's all-reduce (or broadcast from rank 3) of ``count`` float32 on unregistered buffers, then
    on registered ones, each exact; returns (algorithm, kernel) of each (the two-step packets staged, the zero-copy
    kernels above the one-shot packets at 8 ranks)."""
    from pymscclpp.runtime.memory import alloc, view_as
    send, recv = view_as(alloc(4 * count), np.float32), view_as(alloc(4 * count), np.float32)
    served = {}
    for it, registered in enumerate((False, True)):
        if registered:
            comm.register_buffer(send)
            comm.register_buffer(recv)
        send.copy_to_device(rank_data(comm.rank, count, "float32", it))
        if collective == "all_reduce":
            comm.all_reduce(send, recv)
            want = expected_allreduce(comm.size, count, "float32", it, "sum")
        else:
            comm.broadcast(send, recv, root=3)
            want = rank_data(3, count, "float32", it)
        cuda.synchronize()
        comm.check_device_errors()
        assert_same(recv.copy_to_host(), want)
        algo = comm.last_algorithm(collective)
        served["registered" if registered else "staged"] = (algo.name, algo.last_kernel)
    comm.deregister_buffer(send)
    comm.deregister_buffer(recv)
    return served


def kept_calls_switch_to_zero_copy_when_captured(comm, state, count: int) -> None:
    """A call repeated eagerly (kept, ``algos.repeats``) on buffers that are not registered stays with the staged
    choice; the same call made while its stream is captured (the capture check forced true) runs what the
    zero-copy rows name, and eager again the staged one; every result exact."""
    from pymscclpp.algos import zero_copy
    from pymscclpp.algos.collection import ZERO_COPY
    from pymscclpp.runtime.memory import alloc, view_as
    comm.algorithms.table["all_reduce" + ZERO_COPY] = [(float("inf"), "rsag")]
    send, recv = view_as(alloc(4 * count), np.float32), view_as(alloc(4 * count), np.float32)
    real = zero_copy.capturing
    for it, captured in enumerate((False, False, False, True, True, False)):
        send.copy_to_device(rank_data(comm.rank, count, "float32", it))
        zero_copy.capturing = (lambda stream: True) if captured else real
        try:
            comm.all_reduce(send, recv)
            cuda.synchronize()
            comm.check_device_errors()
        finally:
            zero_copy.capturing = real
        assert_same(recv.copy_to_host(), expected_allreduce(comm.size, count, "float32", it, "sum"))
        served = comm.last_algorithm("all_reduce")
        want = ("rsag", "all_reduce_zero_copy_simple") if captured else ("packet", "reduce_ll")
        assert (served.name, served.last_kernel) == want, (it, served.name, served.last_kernel)


def reductions_pushed(comm, state, collective: str, count: int, dtype: str, op: str, captured: bool,
                      repeat: int = 2) -> None:
    """all_reduce or reduce_scatter with ``push`` on two ranks, out of place, on registered buffers (or unregistered
    ones while their stream is captured, the capture check forced true) runs the kernel that writes into the peer's
    output and equals the rank-order NumPy reduction on every rank, call after call, the send buffer untouched."""
    from pymscclpp.algos import zero_copy
    from pymscclpp.runtime.memory import alloc, view_as
    n, r, np_dtype = comm.size, comm.rank, np.dtype(dtype)
    slots = n if collective == "reduce_scatter" else 1
    send = view_as(alloc(slots * count * np_dtype.itemsize), np_dtype)
    recv = view_as(alloc(count * np_dtype.itemsize), np_dtype)
    if not captured:
        comm.register_buffer(recv)
    real = zero_copy.capturing
    zero_copy.capturing = lambda stream: captured
    try:
        for it in range(repeat):
            data = rank_data(r, slots * count, dtype, count + it)
            send.copy_to_device(data)
            recv.copy_to_device(np.full(count, 99, np_dtype))
            getattr(comm, collective)(send, recv, op=op, algo="push")
            cuda.synchronize()
            comm.check_device_errors()
            if op == "avg":  # the sum divided once (small integers: exact in float32)
                want = (expected_allreduce(n, slots * count, dtype, count + it, "sum") / n).astype(np_dtype)
            else:
                want = expected_allreduce(n, slots * count, dtype, count + it, op)
            if collective == "reduce_scatter":
                want = want[r * count:(r + 1) * count]
            assert_same(recv.copy_to_host(), want)
            assert_same(send.copy_to_host(), data)
    finally:
        zero_copy.capturing = real
    served = comm.last_algorithm(collective)
    assert (served.name, served.last_kernel) == ("push", f"{collective}_push_zero_copy_simple"), served.last_kernel
    if not captured:
        comm.deregister_buffer(recv)


def in_place_calls_take_the_next_zero_copy_row(comm, state, count: int) -> None:
    """With zero-copy rows naming ``push`` (out of place only) and then ``rsag`` for every size, a registered
    out-of-place all_reduce runs the push kernel and a registered in-place one the ``rsag`` zero-copy kernel, both
    exact."""
    from pymscclpp.algos.collection import ZERO_COPY
    from pymscclpp.runtime.memory import alloc, view_as
    comm.algorithms.table["all_reduce" + ZERO_COPY] = [(float("inf"), "push"), (float("inf"), "rsag")]
    send, recv = view_as(alloc(4 * count), np.float32), view_as(alloc(4 * count), np.float32)
    comm.register_buffer(send)
    comm.register_buffer(recv)
    for it, inplace in enumerate((False, True)):
        send.copy_to_device(rank_data(comm.rank, count, "float32", it))
        comm.all_reduce(send, None if inplace else recv)
        cuda.synchronize()
        comm.check_device_errors()
        got = (send if inplace else recv).copy_to_host()
        assert_same(got, expected_allreduce(comm.size, count, "float32", it, "sum"))
        served = comm.last_algorithm("all_reduce")
        want = ("rsag", "all_reduce_zero_copy_simple") if inplace else ("push", "all_reduce_push_zero_copy_simple")
        assert (served.name, served.last_kernel) == want, (served.name, served.last_kernel)
    comm.deregister_buffer(send)
    comm.deregister_buffer(recv)


def pushing_and_pulling_ranks(comm, state, count: int) -> str:
    """Rank 0 registers its receive buffer and all_gathers with ``push``; rank 1 registers its send buffer and
    all_gathers with ``simple``, whose zero-copy kernel pulls: both run zero-copy, but each would leave the other's
    slot unmoved, so every rank raises CallMismatchError; the error's text."""
    from pymscclpp.errors import CallMismatchError
    from pymscclpp.runtime.memory import alloc, view_as
    send, recv = view_as(alloc(4 * count), np.float32), view_as(alloc(8 * count), np.float32)
    for algo in ("push", "simple"):  # both set up alike (staged), so only the kernels below differ
        comm.all_gather(send, recv, algo=algo)
    comm.register_buffer(recv if comm.rank == 0 else send)
    try:
        comm.all_gather(send, recv, algo="push" if comm.rank == 0 else "simple")
        cuda.synchronize()
        comm.check_device_errors()
    except CallMismatchError as exc:
        return str(exc)
    raise AssertionError("a pushing all_gather met a pulling one and nothing failed")


def small_all_reduces_on_one_block_and_on_many(comm, state, counts: tuple) -> list:
    """Default-selected float32 all-reduces of ``counts`` in turn (at 2 ranks the smallest on one block, the others on
    16 or 64, each grid with its own scratch and flags), each equal to the NumPy reduction: the algorithm names
    that served them."""
    served = []
    for it, count in enumerate(counts):
        send = cuda.to_device(rank_data(comm.rank, count, "float32", it))
        recv = cuda.to_device(np.full(count, 99, np.float32))
        comm.all_reduce(send, recv)
        cuda.synchronize()
        comm.check_device_errors()
        assert_same(recv.copy_to_host(), expected_allreduce(comm.size, count, "float32", it, "sum"))
        served.append(comm.last_algorithm("all_reduce").name)
    return served


def zero_copy_calls_on_two_grids(comm, state, count: int, dtype: str) -> None:
    """A zero-copy all_reduce on a 4-block kernel runs calls below ``grid.SMALL_CALL_BYTES`` on 2 blocks and the
    others on 4, alternating on the same registered buffers, each equal to the NumPy reduction: the blocks a small
    call leaves idle still meet their peers right in the next large call."""
    from pymscclpp.algos import grid
    from pymscclpp.algos.twoshot import AllReduceTwoShot
    from pymscclpp.runtime.memory import alloc, view_as
    size = np.dtype(dtype).itemsize
    algo = comm.register_algorithm(AllReduceTwoShot("rsag4", "simple", 4, 32), prefer=False)
    send, recv = (view_as(alloc(count * size), np.dtype(dtype)) for _ in range(2))
    comm.register_buffer(send)
    comm.register_buffer(recv)
    real = grid.SMALL_CALL_BYTES
    grid.SMALL_CALL_BYTES = count * size  # the whole buffer: 4 blocks; a part of it: 2
    try:
        for it, m in enumerate((count, count // 2 + 1, count, count // 3, count)):
            send[:m].copy_to_device(rank_data(comm.rank, m, dtype, it))
            comm.all_reduce(send[:m], recv[:m], algo="rsag4")
            cuda.synchronize()
            comm.check_device_errors()
            assert_same(recv[:m].copy_to_host(), expected_allreduce(comm.size, m, dtype, it, "sum"))
    finally:
        grid.SMALL_CALL_BYTES = real
    zero_copy_kernel = algo.zero_copy_kernel.py_func.__name__
    grids = sorted(launch.griddim for launch in algo.kernel_launches() if launch.name == zero_copy_kernel)
    assert grids == [2, 4], grids
    comm.deregister_buffer(send)
    comm.deregister_buffer(recv)


def zero_copy_copies_on_two_grids(comm, state, count: int, dtype: str) -> None:
    """A zero-copy all_gather (a kernel that only moves bytes) on 4 blocks runs calls below
    ``grid.SMALL_COPY_BYTES`` on 2 blocks and the others on 4, whatever ``grid.SMALL_CALL_BYTES`` (the reductions'
    size) says, each exact."""
    from pymscclpp.algos import grid
    from pymscclpp.algos.twoshot import AllGatherRead
    from pymscclpp.runtime.memory import alloc, view_as
    n, size = comm.size, np.dtype(dtype).itemsize
    algo = comm.register_algorithm(AllGatherRead("read4", "simple", 4, 32), prefer=False)
    send, recv = view_as(alloc(count * size), np.dtype(dtype)), view_as(alloc(n * count * size), np.dtype(dtype))
    comm.register_buffer(send)
    real = grid.SMALL_CALL_BYTES, grid.SMALL_COPY_BYTES
    grid.SMALL_CALL_BYTES, grid.SMALL_COPY_BYTES = 0, n * count * size  # the whole buffer: 4 blocks; less: 2
    try:
        for it, m in enumerate((count, count // 2 + 1, count)):
            send[:m].copy_to_device(rank_data(comm.rank, m, dtype, it))
            comm.all_gather(send[:m], recv[:n * m], algo="read4")
            cuda.synchronize()
            comm.check_device_errors()
            want = np.concatenate([rank_data(r, m, dtype, it) for r in range(n)])
            assert_same(recv[:n * m].copy_to_host(), want)
    finally:
        grid.SMALL_CALL_BYTES, grid.SMALL_COPY_BYTES = real
    zero_copy_kernel = algo.zero_copy_kernel.py_func.__name__
    grids = sorted(launch.griddim for launch in algo.kernel_launches() if launch.name == zero_copy_kernel)
    assert grids == [2, 4], grids
    comm.deregister_buffer(send)


def zero_copy_calls_of_two_sizes_on_two_grids(comm, state, count: int) -> str:
    """Rank 0's zero-copy all_reduce is below ``grid.SMALL_CALL_BYTES`` (2 blocks of a 4-block kernel), rank 1's of
    ``count`` float32 is not (4 blocks): the call check, read by every block whatever the grid, fails the call on
    both ranks, and no block waits for a peer's block that was never launched; the error's text."""
    from pymscclpp.algos import grid
    from pymscclpp.algos.twoshot import AllReduceTwoShot
    from pymscclpp.errors import CallMismatchError
    from pymscclpp.runtime.memory import alloc, view_as
    comm.register_algorithm(AllReduceTwoShot("rsag4", "simple", 4, 32), prefer=False)
    buf = view_as(alloc(4 * count), np.float32)
    comm.register_buffer(buf)
    real = grid.SMALL_CALL_BYTES
    grid.SMALL_CALL_BYTES = 4 * count
    try:
        comm.all_reduce(buf[:count // 2] if comm.rank == 0 else buf, algo="rsag4")
        cuda.synchronize()
        comm.check_device_errors()
    except CallMismatchError as exc:
        return str(exc)
    finally:
        grid.SMALL_CALL_BYTES = real
    raise AssertionError("calls of two sizes on two grids and nothing failed")


def zero_copy_calls_on_buffers_of_other_registrations(comm, state, collective: str, count: int) -> tuple:
    """Every rank registers buffers A and B, then makes a zero-copy ``collective`` on them that agrees in every
    field of its fingerprint, but rank 0 passes (A, B) where rank 1 passes (B, A) (broadcast: rank 1, the root,
    in place on B): each rank would reach the peer's buffer of its own buffer's registration, so the call check
    fails the call on every rank before any output is written; (the error's text, whether both buffers are as
    they were)."""
    from pymscclpp.errors import CallMismatchError
    from pymscclpp.runtime.memory import alloc, view_as
    a, b = (view_as(alloc(4 * count), np.float32) for _ in range(2))
    comm.register_buffer(a)
    comm.register_buffer(b)
    a.copy_to_device(np.full(count, 1 + comm.rank, np.float32))
    b.copy_to_device(np.full(count, -7, np.float32))
    try:
        if collective == "broadcast":
            comm.broadcast(*((a, b) if comm.rank == 0 else (b,)), root=1, algo="simple")
        else:
            send, recv = (a, b) if comm.rank == 0 else (b, a)
            comm.all_reduce(send, recv, algo="rsag")
        cuda.synchronize()
        comm.check_device_errors()
    except CallMismatchError as exc:
        kept = bool(np.all(a.copy_to_host() == 1 + comm.rank) and np.all(b.copy_to_host() == -7))
        return str(exc), kept
    raise AssertionError("zero-copy calls on buffers of other registrations and nothing failed")


def captured_in_place_on_rank_zero(comm, state, collective: str, count: int, algo: str):
    """``collective`` made while its stream is captured (the capture check forced true, as the simulator has no
    graphs), in place on rank 0 and out of place on the others (broadcast: from root 0): the two-shot all-reduce
    and the broadcast map every rank's input and output alike and are exact on every rank (None); an all-gather,
    whose peers find an in-place rank's bytes in its output, fails the call check on every rank before writing
    anything (the error's text)."""
    from pymscclpp.algos import zero_copy
    from pymscclpp.errors import CallMismatchError
    from pymscclpp.runtime.memory import alloc, view_as
    n, r = comm.size, comm.rank
    slots = n if collective == "all_gather" else 1
    recv = view_as(alloc(4 * slots * count), np.float32)
    recv.copy_to_device(np.full(slots * count, -7, np.float32))
    own = rank_data(r, count, "float32", 5)
    if r == 0:
        send = recv[:count] if collective == "all_gather" else recv
        send.copy_to_device(own)
    else:
        send = view_as(alloc(4 * count), np.float32)
        send.copy_to_device(own)
    into = None if r == 0 and collective != "all_gather" else recv
    kw = {"root": 0} if collective == "broadcast" else {}
    real = zero_copy.capturing
    zero_copy.capturing = lambda stream: True
    try:
        getattr(comm, collective)(send, into, algo=algo, **kw)
        cuda.synchronize()
        comm.check_device_errors()
    except CallMismatchError as exc:
        assert collective == "all_gather", exc
        kept = np.full(slots * count, -7, np.float32)
        if r == 0:
            kept[:count] = own
        assert_same(recv.copy_to_host(), kept)
        return str(exc)
    finally:
        zero_copy.capturing = real
    assert comm.last_algorithm(collective).last_kernel.endswith("zero_copy_simple")
    want = expected_allreduce(n, count, "float32", 5, "sum") if collective == "all_reduce" else rank_data(0, count,
                                                                                                        "float32", 5)
    assert_same(recv.copy_to_host(), want)
    return None

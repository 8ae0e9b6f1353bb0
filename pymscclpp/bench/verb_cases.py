"""Benchmark cases of the verbs (``send_recv``, ``all_to_allv``, ``reduce``, ``gather``, ``scatter``) on GPUs
(torch tensors, NCCL through torch.distributed) and the simulator (numba arrays, NumPy), sized as nccl-tests
sizes them: send_recv the message each rank sends its next rank (a ring), all_to_allv the per-rank input,
reduce the buffer, gather the gathered output, scatter the root's input. The root is rank 0. all_to_allv moves
the even all-to-all's total bytes in uneven parts (``uneven_counts``), so the two compare directly. Floors: a
local copy of the same bytes (send_recv, all_to_allv, gather, scatter) and the all-reduce floor's add (reduce).
"""

from __future__ import annotations

VERBS = ("send_recv", "all_to_allv", "reduce", "gather", "scatter")
ROOT = 0


def uneven_counts(n: int, part: int) -> list[list[int]]:
    """``counts[i][j]``: elements rank i sends rank j, a circulant of weights 1..n (rank i sends rank i + k
    ``2(k + 1) / (n + 1)`` times the even part), so every rank sends and receives ``n * part`` in all, as the
    even all-to-all does."""
    weights = [2 * (k + 1) * part // (n + 1) for k in range(n)]
    weights[0] += n * part - sum(weights)
    return [[weights[(j - i) % n] for j in range(n)] for i in range(n)]


def counts_of(n: int, part: int, rank: int) -> tuple[list[int], list[int]]:
    """(send counts, receive counts) of ``rank`` in ``uneven_counts``."""
    table = uneven_counts(n, part)
    return table[rank], [table[j][rank] for j in range(n)]


def run_verb(comm, op: str, send, recv, part: int, redop: str = "sum", root: int = ROOT, uneven: bool = True,
             **kw) -> None:
    """One call of verb ``op`` on ``send``/``recv`` (both backends), as the cases and the traffic counts make it
    (``uneven``: all_to_allv with ``uneven_counts``, else ``part`` to every rank)."""
    n, rank = comm.size, comm.rank
    if op == "send_recv":
        with comm.group():
            comm.send(send, (rank + 1) % n)
            comm.recv(recv, (rank - 1) % n)
    elif op == "all_to_allv":
        sc, rc = counts_of(n, part, rank) if uneven else ([part] * n, [part] * n)
        comm.all_to_all(send, recv, send_counts=sc, recv_counts=rc, **kw)
    elif op == "reduce":
        comm.reduce(send, recv, root=root, op=redop, **kw)
    elif op == "gather":
        comm.gather(send, recv, root=root, **kw)
    elif op == "scatter":
        comm.scatter(send, recv, root=root, **kw)
    else:
        raise ValueError(f"unknown verb {op!r}: choose from {VERBS}")


def elements(op: str, count: int, n: int) -> tuple[int, int]:
    """(send, receive) elements of ``op`` for a size of ``count`` elements (the cases' sizes)."""
    part = max(1, count // n)
    return {"send_recv": (count, count), "all_to_allv": (part * n, part * n), "reduce": (count, count),
            "gather": (part, part * n), "scatter": (part * n, part)}[op]


def expected_of(op: str, inputs: list, rank: int, part: int, out_init, fold, concat):
    """What ``rank``'s receive buffer holds after ``op`` on every rank's ``inputs`` (NumPy or torch arrays, with
    ``fold`` the reduction of two and ``concat`` the concatenation; ``out_init``: the receive buffer before,
    which non-roots keep)."""
    n = len(inputs)
    if op == "send_recv":
        return inputs[(rank - 1) % n]
    if op == "all_to_allv":
        table = uneven_counts(n, part)
        return concat([inputs[j][sum(table[j][:rank]):sum(table[j][:rank + 1])] for j in range(n)])
    if rank != ROOT and op in ("reduce", "gather"):
        return out_init
    if op == "gather":
        return concat(inputs)
    if op == "scatter":
        return inputs[ROOT][rank * part:(rank + 1) * part]
    acc = inputs[0]
    for x in inputs[1:]:
        acc = fold(acc, x)
    return acc


def make_verb_case(op: str, comm, dist, torch, dtype, nbytes: int, redop: str, algo: str | None):
    """The ``bench.cases.Case`` of verb ``op`` at ``nbytes`` on GPUs (``dist`` None: no NCCL reference)."""
    from .cases import Case, copy_floor, data
    n, rank = comm.size, comm.rank
    itemsize = torch.tensor([], dtype=dtype).element_size()
    count = max(1, nbytes // itemsize)
    part = max(1, count // n)
    s_n, r_n = elements(op, count, n)
    salt = 10 + VERBS.index(op)
    inputs = [data(torch, dtype, s_n, p, salt) for p in range(n)]
    x, out, ref = inputs[rank], torch.zeros(r_n, dtype=dtype, device="cuda"), torch.zeros(r_n, dtype=dtype, device="cuda")
    kw = {} if algo is None or op == "send_recv" else {"algo": algo}
    ours = lambda: run_verb(comm, op, x, out, part, redop, **kw)  # noqa: E731
    size = {"send_recv": count, "reduce": count}.get(op, part * n)
    if op == "reduce":
        y, z = torch.empty_like(x), torch.zeros_like(x)
        floor = lambda: torch.add(x, z, out=y)  # noqa: E731
    else:
        floor = copy_floor(torch, dtype, size)
    fold = {"sum": torch.add, "min": torch.minimum, "max": torch.maximum}[redop]
    init = out.clone()
    expected = lambda: expected_of(op, [t.float() for t in inputs], rank, part, init.float(), fold,  # noqa: E731
                                   torch.cat).to(dtype)
    nccl = None if dist is None else _nccl_call(op, dist, torch, x, ref, part, redop)
    bus = {"send_recv": 1.0, "reduce": 1.0}.get(op, (n - 1) / n)
    mapped = (x,) if op in ("send_recv", "all_to_allv", "reduce", "gather") else ()  # read zero-copy when registered
    return Case(size, ours, nccl, (out, ref), bus, floor, expected, mapped)


def _nccl_call(op: str, dist, torch, x, ref, part: int, redop: str):
    """NCCL's call of verb ``op`` through torch.distributed, into ``ref``."""
    n, rank = dist.get_world_size(), dist.get_rank()
    if op == "send_recv":
        def call():
            for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, (rank + 1) % n),
                                             dist.P2POp(dist.irecv, ref, (rank - 1) % n)]):
                w.wait()
        return call
    if op == "all_to_allv":
        sc, rc = counts_of(n, part, rank)
        return lambda: dist.all_to_all_single(ref, x, output_split_sizes=rc, input_split_sizes=sc)
    if op == "reduce":
        reduce_op = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[redop]
        return lambda: (ref.copy_(x), dist.reduce(ref, ROOT, op=reduce_op))
    if op == "gather":
        return lambda: dist.gather(x, list(ref.chunk(n)) if rank == ROOT else None, dst=ROOT)
    return lambda: dist.scatter(ref, list(x.chunk(n)) if rank == ROOT else None, src=ROOT)


def make_sim_verb_case(op: str, comm, dtype, nbytes: int, redop: str, algo: str | None):
    """(count, call, output array, expected NumPy result, bus factor) of verb ``op`` at ``nbytes`` (simulator)."""
    import numpy as np
    from numba import cuda

    from .sim_sweep import data
    n, rank = comm.size, comm.rank
    count = max(n, nbytes // dtype.itemsize) // n * n
    part = count // n
    s_n, r_n = elements(op, count, n)
    inputs = [data(dtype, s_n, p, 10 + VERBS.index(op)) for p in range(n)]
    x, out = cuda.to_device(inputs[rank]), cuda.to_device(np.zeros(r_n, dtype))
    kw = {} if algo is None or op == "send_recv" else {"algo": algo}
    wide = [a.astype(np.float64) for a in inputs]
    fold = {"sum": np.add, "min": np.minimum, "max": np.maximum}[redop]
    want = expected_of(op, wide, rank, part, np.zeros(r_n), fold, np.concatenate).astype(dtype)
    bus = {"send_recv": 1.0, "reduce": 1.0}.get(op, (n - 1) / n)
    return count, lambda: run_verb(comm, op, x, out, part, redop, **kw), out, want, bus

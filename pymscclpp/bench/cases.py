"""One benchmark case per collective: buffers for a size, the pymscclpp call, the NCCL call, bus factor.

Sizes follow nccl-tests: all_gather counts the gathered output, reduce_scatter and all_to_all the
per-rank input, broadcast and all_reduce the buffer. Inputs are small integers so every dtype and
summation order is exact, and pymscclpp's output can be compared with NCCL's element by element, or with
the expected result every rank computes from every rank's (seeded) input. The floor is the same bytes moved by
one local torch op on each rank: ``torch.add(a, b, out=c)`` of the element count for all_reduce and reduce (a
perfect two-rank all-reduce's traffic), ``dst.copy_(src)`` of the collective's bytes for the others. The verbs'
calls, sizes and results: ``verb_cases``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .verb_cases import ROOT, VERBS, counts_of, elements, expected_of, run_verb


@dataclass
class Case:
    """Buffers and calls of one collective at one size."""
    count: int                      # elements counted for the size column
    ours: Callable[[], None]
    nccl: Callable[[], None] | None  # None: no process group (a floor run)
    outputs: tuple                  # (ours, nccl) output tensors to compare
    bus_factor: float
    floor: Callable[[], None]       # the local torch op moving the same bytes
    expected: Callable[[], object]  # our output's exact value, from every rank's input
    buffers: tuple = ()             # what ``--register`` and the tuner's zero-copy calls register


def data(torch, dtype, count: int, rank: int, salt: int):
    """Rank ``rank``'s input of ``count`` elements on the GPU, seeded by ``salt``: small integers, so every dtype
    and summation order is exact."""
    gen = torch.Generator(device="cuda").manual_seed(1000 * salt + rank)
    low, high = (-8, 9) if dtype.is_floating_point else (0, 4)
    return torch.randint(low, high, (count,), device="cuda", generator=gen).to(dtype)


def _reduced(torch, dtype, count: int, n: int, salt: int, redop: str):
    """Every rank's input of ``count`` elements reduced in rank order (exact: small integers)."""
    fold = {"sum": torch.add, "min": torch.minimum, "max": torch.maximum}[redop]
    acc = data(torch, dtype, count, 0, salt).float()
    for r in range(1, n):
        acc = fold(acc, data(torch, dtype, count, r, salt).float())
    return acc.to(dtype)


def copy_floor(torch, dtype, count: int) -> Callable[[], None]:
    """The copy floor of ``count`` elements: a local ``dst.copy_(src)`` to time against a collective's bytes."""
    src, dst = torch.zeros(count, dtype=dtype, device="cuda"), torch.empty(count, dtype=dtype, device="cuda")
    return lambda: dst.copy_(src)


def make_case(op: str, comm, dist, torch, dtype, nbytes: int, redop: str, algo: str | None) -> Case:
    """The Case of collective ``op`` moving ``nbytes`` (rounded to whole elements and ranks); ``dist`` None: no
    NCCL reference (the case's ``nccl`` is None)."""
    n, rank = comm.size, comm.rank
    itemsize = torch.tensor([], dtype=dtype).element_size()
    count = max(1, nbytes // itemsize)
    reduce_op = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[redop] if dist else None
    kw = {} if algo is None else {"algo": algo}
    empty = lambda k: torch.empty(k, dtype=dtype, device="cuda")  # noqa: E731
    if op == "all_reduce":
        x = data(torch, dtype, count, rank, 1)
        out, ref, y, z = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x), torch.zeros_like(x)
        return Case(count, lambda: comm.all_reduce(x, out, op=redop, **kw),
                    dist and (lambda: (ref.copy_(x), dist.all_reduce(ref, op=reduce_op))), (out, ref), 2 * (n - 1) / n,
                    lambda: torch.add(x, z, out=y), lambda: _reduced(torch, dtype, count, n, 1, redop), (x, out))
    part = max(1, count // n)
    if op == "all_gather":
        x = data(torch, dtype, part, rank, 2)
        out, ref = empty(part * n), empty(part * n)
        return Case(part * n, lambda: comm.all_gather(x, out, **kw),
                    dist and (lambda: dist.all_gather_into_tensor(ref, x)),
                    (out, ref), (n - 1) / n, copy_floor(torch, dtype, part * n),
                    lambda: torch.cat([data(torch, dtype, part, p, 2) for p in range(n)]), (x, out))
    if op == "reduce_scatter":
        x = data(torch, dtype, part * n, rank, 3)
        out, ref = empty(part), empty(part)
        return Case(part * n, lambda: comm.reduce_scatter(x, out, op=redop, **kw),
                    dist and (lambda: dist.reduce_scatter_tensor(ref, x, op=reduce_op)), (out, ref), (n - 1) / n,
                    copy_floor(torch, dtype, part * n),
                    lambda: _reduced(torch, dtype, part * n, n, 3, redop)[rank * part:(rank + 1) * part], (x, out))
    if op == "all_to_all":
        x = data(torch, dtype, part * n, rank, 4)
        out, ref = torch.empty_like(x), torch.empty_like(x)
        return Case(part * n, lambda: comm.all_to_all(x, out, **kw), dist and (lambda: dist.all_to_all_single(ref, x)),
                    (out, ref), (n - 1) / n, copy_floor(torch, dtype, part * n),
                    lambda: torch.cat([data(torch, dtype, part * n, p, 4)[rank * part:(rank + 1) * part]
                                       for p in range(n)]), (x, out))
    if op == "broadcast":
        src = data(torch, dtype, count, rank, 5)
        buf, ref = src.clone(), src.clone()
        return Case(count, lambda: comm.broadcast(buf, 0, **kw), dist and (lambda: dist.broadcast(ref, 0)), (buf, ref),
                    1.0, copy_floor(torch, dtype, count), lambda: data(torch, dtype, count, 0, 5), (buf,))
    if op in VERBS:
        return make_verb_case(op, comm, dist, torch, dtype, nbytes, redop, algo)
    raise ValueError(f"unknown collective {op!r}")


def make_verb_case(op: str, comm, dist, torch, dtype, nbytes: int, redop: str, algo: str | None):
    """The Case of verb ``op`` at ``nbytes`` (``dist`` None: no NCCL reference)."""
    n, rank = comm.size, comm.rank
    itemsize = torch.tensor([], dtype=dtype).element_size()
    count = max(1, nbytes // itemsize)
    part = max(1, count // n)
    s_n, r_n = elements(op, count, n)
    salt = 10 + VERBS.index(op)
    inputs = [data(torch, dtype, s_n, p, salt) for p in range(n)]
    x = inputs[rank]
    out, ref = torch.zeros(r_n, dtype=dtype, device="cuda"), torch.zeros(r_n, dtype=dtype, device="cuda")
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

"""One benchmark case per collective: buffers for a size, the pymscclpp call, the NCCL call, bus factor.

Sizes follow nccl-tests: all_gather counts the gathered output, reduce_scatter and all_to_all the
per-rank input, broadcast and all_reduce the buffer. Inputs are small integers so every dtype and
summation order is exact, and pymscclpp's output can be compared with NCCL's element by element.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass
class Case:
    """Buffers and calls of one collective at one size."""
    count: int                      # elements counted for the size column
    ours: Callable[[], None]
    nccl: Callable[[], None]
    outputs: tuple                  # (ours, nccl) output tensors to compare
    bus_factor: float


def _data(torch, dtype, count: int, rank: int, salt: int):
    gen = torch.Generator(device="cuda").manual_seed(1000 * salt + rank)
    low, high = (-8, 9) if dtype.is_floating_point else (0, 4)
    return torch.randint(low, high, (count,), device="cuda", generator=gen).to(dtype)


def make_case(op: str, comm, dist, torch, dtype, nbytes: int, redop: str, algo: str | None) -> Case:
    """The Case of collective ``op`` moving ``nbytes`` (rounded to whole elements and ranks)."""
    n, rank = comm.size, comm.rank
    itemsize = torch.tensor([], dtype=dtype).element_size()
    count = max(1, nbytes // itemsize)
    reduce_op = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[redop]
    kw = {} if algo is None else {"algo": algo}
    if op == "all_reduce":
        x = _data(torch, dtype, count, rank, 1)
        out, ref = torch.empty_like(x), torch.empty_like(x)
        return Case(count, lambda: comm.all_reduce(x, out, op=redop, **kw),
                    lambda: (ref.copy_(x), dist.all_reduce(ref, op=reduce_op)), (out, ref), 2 * (n - 1) / n)
    if op == "all_gather":
        part = max(1, count // n)
        x = _data(torch, dtype, part, rank, 2)
        out, ref = torch.empty(part * n, dtype=dtype, device="cuda"), torch.empty(part * n, dtype=dtype, device="cuda")
        return Case(part * n, lambda: comm.all_gather(x, out, **kw), lambda: dist.all_gather_into_tensor(ref, x),
                    (out, ref), (n - 1) / n)
    if op == "reduce_scatter":
        part = max(1, count // n)
        x = _data(torch, dtype, part * n, rank, 3)
        out, ref = torch.empty(part, dtype=dtype, device="cuda"), torch.empty(part, dtype=dtype, device="cuda")
        return Case(part * n, lambda: comm.reduce_scatter(x, out, op=redop, **kw),
                    lambda: dist.reduce_scatter_tensor(ref, x, op=reduce_op), (out, ref), (n - 1) / n)
    if op == "all_to_all":
        part = max(1, count // n)
        x = _data(torch, dtype, part * n, rank, 4)
        out, ref = torch.empty_like(x), torch.empty_like(x)
        return Case(part * n, lambda: comm.all_to_all(x, out, **kw), lambda: dist.all_to_all_single(ref, x),
                    (out, ref), (n - 1) / n)
    if op == "broadcast":
        src = _data(torch, dtype, count, rank, 5)
        buf, ref = src.clone(), src.clone()
        return Case(count, lambda: comm.broadcast(buf, 0, **kw), lambda: dist.broadcast(ref, 0), (buf, ref), 1.0)
    raise ValueError(f"unknown collective {op!r}")

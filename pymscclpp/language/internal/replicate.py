"""Instance replication: run ``instances`` copies of a program side by side on disjoint chunks and thread blocks."""

from __future__ import annotations

import copy

from .ir import IrOp
from .types import ReplicationPolicy


def _shift(op: IrOp, inst: int, n: int, policy: ReplicationPolicy) -> IrOp:
    new = copy.copy(op)
    new.tb = op.tb * n + inst
    new.channels = [c * n + inst for c in op.channels]
    new.semaphores = [s * n + inst for s in op.semaphores]
    if op.barrier is not None:
        new.barrier = (op.barrier[0] * n + inst, op.barrier[1])
    refs = []
    for side in (op.src, op.dst):
        moved = [copy.copy(r) for r in side]
        if policy == ReplicationPolicy.interleaved:
            for r in moved:
                r.index = r.index * n + inst * r.size
        refs.append(moved)
    new.src, new.dst = refs
    new.ops = [_shift(o, inst, n, policy) for o in op.ops]
    return new


def replicate_ops(tbs: dict[int, list[IrOp]], n: int, policy: ReplicationPolicy) -> dict[int, list[IrOp]]:
    """Thread block t of instance i becomes t*n+i; chunk [a, a+s) of instance i becomes [a*n + i*s, ...+s)
    (interleaved policy) or stays [a, a+s) (policy ``none``, as in MSCCL++)."""
    if n == 1:
        return tbs
    return {tb * n + inst: [_shift(op, inst, n, policy) for op in ops] for tb, ops in tbs.items() for inst in range(n)}


def replicate_list(items: list, n: int) -> list:
    """Each gpu-level channel or semaphore repeated ``n`` times in a row, so id k of instance i is k*n+i."""
    return [item for item in items for _ in range(n)]

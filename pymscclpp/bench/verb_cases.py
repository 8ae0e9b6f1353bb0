"""The verbs' benchmark cases (``send_recv``, ``all_to_allv``, ``reduce``, ``gather``, ``scatter``) for both
backends (GPU cases in ``cases``, the simulator's in ``sim_sweep``) and the traffic counts: the call, the sizes as
nccl-tests counts them (send_recv the message each rank sends its next rank, a ring; all_to_allv the per-rank input;
reduce the buffer; gather the gathered output; scatter the root's input) and the result. The root is rank 0.
all_to_allv moves the even all-to-all's total bytes in uneven parts (``uneven_counts``), so the two compare directly.
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

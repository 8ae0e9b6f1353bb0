"""``python -m pymscclpp.bench --op traffic --ranks 2,4,8``: the bytes each rank moves through its channels per
call, counted under the simulator (``runtime.traffic``), beside what the serving algorithm states and the
collective's lower bound. Needs no GPU: it checks the algorithms' traffic, not their speed."""

from __future__ import annotations

import argparse

import numpy as np

from ..runtime.collectives import COLLECTIVES as _SYMMETRIC
from .verb_cases import VERBS, elements as verb_elements, run_verb

COLLECTIVES = (*_SYMMETRIC, *VERBS)


def lower_bound(collective: str, size: int, nranks: int) -> float:
    """The fewest bytes a rank must send in a call of ``size`` bytes (nccl-tests sizes): all-reduce 2N(n-1)/n,
    broadcast, reduce (a non-root) and send_recv N, the others N(n-1)/n."""
    return {"all_reduce": 2 * size * (nranks - 1) / nranks, "broadcast": size, "reduce": size,
            "send_recv": size}.get(collective, size * (nranks - 1) / nranks)


def elements(collective: str, count: int, nranks: int) -> tuple[int, int]:
    """(send, receive) element counts of a call of ``count`` elements (nccl-tests sizes) on ``nranks`` ranks."""
    if collective in VERBS:
        return verb_elements(collective, count, nranks)
    part = count // nranks
    return {"all_gather": (part, part * nranks), "reduce_scatter": (part * nranks, part),
            "all_to_all": (part * nranks, part * nranks)}.get(collective, (count, count))


def measured_call(comm, collective: str, algo: str | None, count: int, root: int = 0,
                  zero_copy: bool = False) -> dict:
    """A rank function (PYMSCCLPP_TRAFFIC=1, simulator): this rank's channel counts for one call of ``collective``
    on ``count`` float32 elements by ``algo`` (None: the selection's choice), after a first call sets it up; the
    algorithm's name, the kernel that ran and the traffic it states. ``zero_copy``: on buffers registered with
    the communicator, so the zero-copy families read and write peers' buffers (the traffic they state then)."""
    from numba import cuda

    from ..runtime import traffic
    from ..runtime.memory import alloc, view_as
    send_n, recv_n = elements(collective, count, comm.size)
    if zero_copy:
        send, recv = (view_as(alloc(4 * n), np.float32) for n in (send_n, recv_n))
        send.copy_to_device(np.ones(send_n, np.float32))
        comm.register_buffer(send)
        comm.register_buffer(recv)
    else:
        send = cuda.to_device(np.ones(send_n, np.float32))
        recv = cuda.to_device(np.zeros(recv_n, np.float32))
    args = (send, recv, root) if collective == "broadcast" else (send, recv)
    kw = {} if algo is None or collective == "send_recv" else {"algo": algo}
    for _ in range(2):
        traffic.reset()
        if collective in VERBS:  # all-to-all with even counts here: the stated traffic is the even one
            run_verb(comm, collective, send, recv, count // comm.size, root=root, uneven=False, **kw)
        else:
            getattr(comm, collective)(*args, algo=algo)
        cuda.synchronize()
        comm.check_device_errors()
    served = comm.last_algorithm(collective)
    size = 4 * max(send_n, recv_n)
    kernel = served.zero_copy_kernel
    ran_zero_copy = kernel is not None and served.last_kernel == kernel.py_func.__name__
    stated = (served.zero_copy_traffic if ran_zero_copy else served.traffic)(size, comm.size, comm.rank, root)
    if zero_copy:
        comm.deregister_buffer(send)
        comm.deregister_buffer(recv)
    return {"counts": traffic.counts(), "algorithm": served.name, "kernel": served.last_kernel, "stated": stated}


def measure(nranks: int, collectives, size: int, algo: str | None = None, zero_copy: bool = False) -> list[dict]:
    """One row per collective: the serving algorithm, measured and stated (sent, received) of the busiest rank,
    and the lower bound, on ``nranks`` simulator ranks (``zero_copy``: on registered buffers)."""
    from ..runtime import traffic
    from ..testing import ranks
    rows = []
    with ranks(nranks, timeout=300, env={"PYMSCCLPP_TRAFFIC": "1", "PYMSCCLPP_BACKEND": "sim"}) as pool:
        for collective in collectives:
            outs = pool.run(measured_call, collective, algo, size // 4, 0, zero_copy and collective not in VERBS)
            measured = traffic.per_rank([o["counts"] for o in outs])
            stated = [tuple(o["stated"]) for o in outs]
            real = 4 * max(elements(collective, size // 4, nranks))
            rows.append({"ranks": nranks, "collective": collective, "algorithm": outs[0]["algorithm"],
                         "kernel": outs[0]["kernel"], "bytes": real,
                         "sent": max(s for s, _ in measured), "received": max(r for _, r in measured),
                         "stated_sent": max(s for s, _ in stated), "stated_received": max(r for _, r in stated),
                         "exact": measured == stated, "bound": lower_bound(collective, real, nranks)})
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m pymscclpp.bench --op traffic", description=__doc__)
    ap.add_argument("--ranks", default="2,4,8", help="rank counts, comma-separated")
    ap.add_argument("--size", default="256K", help="bytes per call (nccl-tests sizes; K/M suffixes)")
    ap.add_argument("--collective", action="append", choices=COLLECTIVES, help="(repeatable) default: all")
    ap.add_argument("--algo", help="force one algorithm (default: the selection's choice at that size)")
    ap.add_argument("--zero-copy", action="store_true",
                    help="register the collectives' buffers first: the zero-copy kernels' traffic")
    args = ap.parse_args(argv)
    from . import __main__ as cli
    size = cli.parse_size(args.size)
    print(f"{'ranks':>5} {'collective':<15} {'algorithm':<15} {'bytes':>9} | {'sent':>9} {'received':>9} | "
          f"{'stated':>9} {'stated':>9} | {'bound':>9} {'sent/bound':>10}")
    for n in (int(r) for r in args.ranks.split(",")):
        for row in measure(n, args.collective or COLLECTIVES, size, args.algo, args.zero_copy):
            print(f"{n:>5} {row['collective']:<15} {row['algorithm']:<15} {row['bytes']:>9} | {row['sent']:>9} "
                  f"{row['received']:>9} | {row['stated_sent']:>9} {row['stated_received']:>9} | "
                  f"{row['bound']:>9.0f} {row['sent'] / row['bound']:>9.3f}x  {row['kernel']}"
                  f"{'' if row['exact'] else '  MISMATCH'}",
                  flush=True)

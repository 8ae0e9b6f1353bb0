"""Soak every collective and verb under mpirun on GPUs (or the simulator): calls of many sizes, dtypes and ops, in
and out of place, on registered buffers (zero-copy) and plain ones (staged), the selection choosing; every result
checked.

    mpirun -np 8 python tests/fault/soak_collectives.py --iters 100000

Every rank draws the same calls from ``--seed``. A call's inputs are a hash of (call, rank, element) that kernels
write and check where the data lies (no host copy of a large buffer), so a stale, misplaced, unreduced or
half-written element fails the call; outputs are poisoned before each call and send buffers checked after it.
Prints a line per ``--report`` calls and what served how many calls; exits 1 on the first wrong element or error,
naming the call, the algorithm and kernel that served it and the element.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import pymscclpp  # noqa: E402  (chooses the backend before numba.cuda loads)
from numba import cuda  # noqa: E402

from pymscclpp.runtime.backend import IS_SIM  # noqa: E402
from pymscclpp.runtime.memory import alloc, view_as  # noqa: E402
from pymscclpp.testing.calls import np_dtype  # noqa: E402

SPAN = 8  # every input element is in [-SPAN, SPAN]
LIMIT = 128  # every result is in [-LIMIT, LIMIT] (sums of up to 16 ranks): exact in every dtype below
DTYPES = ("float32", "int32", "bfloat16", "float16")
OPS = ("sum", "max", "min")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
VERBS = ("reduce", "gather", "scatter", "all_to_allv", "send_recv")
IN_PLACE = frozenset(COLLECTIVES + ("reduce", "gather", "scatter"))  # what may be drawn in place
PER_SLOT = frozenset(("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter", "all_to_allv"))
POISON = 0x7FFF  # in every element of an output before the call (no result's bit pattern)
GPU_SIZES = (4, 1 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 3 << 20, 5 << 20, 16 << 20)  # bytes, nccl-tests
SIM_SIZES = (4, 512, 1 << 10, 1536, 3 << 10)
REPEAT_SEEDS = 1 << 24  # a repeat's inputs: its call's seed plus this times the repeat (no other call's seed)


def typed(raw, dtype: np.dtype, byte_offset: int, count: int):
    """``count`` elements of ``dtype`` at ``byte_offset`` of the uint8 ``raw``, as a buffer the communicator takes:
    on GPUs a torch tensor for bfloat16 (a numba array's interface has no bfloat16)."""
    if dtype == np_dtype("bfloat16") and not IS_SIM:
        import torch
        bits = view_as(raw, np.int16, byte_offset, count)  # int16 tensors view as bfloat16 in any torch
        return torch.as_tensor(bits, device="cuda").view(torch.bfloat16)
    return view_as(raw, dtype, byte_offset, count)


@cuda.jit(device=True)
def value(seed, rank, i):
    """Rank ``rank``'s input element ``i`` of call ``seed``: a hash in [-SPAN, SPAN]."""
    x = (i * 0x9E3779B1 + seed * 0x85EBCA77 + rank * 0xC2B2AE3D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x2C1B3C6D) & 0xFFFFFFFF
    x ^= x >> 12
    return x % (2 * SPAN + 1) - SPAN


@cuda.jit(device=True)
def expected(seed, layout, i):
    """Element ``i`` of a buffer laid out as ``layout`` says (``copies``, ``reduced``)."""
    nseg, op = layout[0], layout[1]
    if op >= 0:
        j = layout[3 + 2 * nseg] + i
        acc = value(seed, 0, j)
        for r in range(1, layout[2]):
            v = value(seed, r, j)
            if op == 0:
                acc += v
            elif op == 1:
                acc = max(acc, v)
            else:
                acc = min(acc, v)
        return acc
    k = 0
    while k + 1 < nseg and layout[4 + k] <= i:
        k += 1
    return value(seed, layout[3 + nseg + k], layout[3 + 2 * nseg + k] + i - layout[3 + k])


def copies(*segments: tuple[int, int, int]) -> np.ndarray:
    """The layout of a buffer whose elements from ``start`` on hold rank ``rank``'s inputs from its element ``first``
    on, for each ``(start, rank, first)`` in ascending ``start`` (the first at 0)."""
    seg = np.array(segments, np.int64).reshape(-1, 3)
    return np.concatenate([[len(seg), -1, 0], seg[:, 0], seg[:, 1], seg[:, 2]]).astype(np.int64)


def reduced(op: str, nranks: int, first: int) -> np.ndarray:
    """The layout of a buffer holding every rank's inputs from element ``first`` on, reduced with ``op``."""
    return np.array([1, OPS.index(op), nranks, 0, 0, first], np.int64)


@cuda.jit
def fill(words, bits, seed, rank):
    """``words`` = rank ``rank``'s inputs of call ``seed``, as the bit patterns of ``bits`` (value + LIMIT)."""
    for i in range(cuda.grid(1), words.size, cuda.gridsize(1)):
        words[i] = bits[value(seed, rank, i) + LIMIT]


@cuda.jit
def poison(words):
    for i in range(cuda.grid(1), words.size, cuda.gridsize(1)):
        words[i] = POISON


@cuda.jit
def check(words, bits, seed, layout, found):
    """Count the elements of ``words`` that differ from ``expected`` (``found[0]``), the first in ``found[1]``."""
    for i in range(cuda.grid(1), words.size, cuda.gridsize(1)):
        if words[i] != bits[expected(seed, layout, i) + LIMIT]:
            cuda.atomic.add(found, 0, 1)
            cuda.atomic.min(found, 1, i)


@cuda.jit
def expected_at(out, bits, seed, layout, i):
    out[0] = bits[expected(seed, layout, i) + LIMIT]


def _grid(n: int) -> tuple[int, int]:
    return (1, 16) if IS_SIM else (max(1, min(512, (n + 255) // 256)), 256)


@dataclass(frozen=True)
class Drawn:
    """One call of the soak: collective or verb, bytes (nccl-tests sizes), dtype, op, in place, on registered
    buffers, root, its seed (the call's number: every call's inputs differ) and how many times it is made."""

    collective: str
    nbytes: int
    dtype: str
    op: str
    in_place: bool
    registered: bool
    root: int
    seed: int
    repeats: int = 1

    def __str__(self) -> str:
        where = "registered" if self.registered else "plain"
        op = f" {self.op}" if self.collective in ("all_reduce", "reduce_scatter", "reduce") else ""
        root = f" with root {self.root}" if self.collective in ("broadcast", "reduce", "gather", "scatter") else ""
        return (f"call {self.seed}: {self.collective} of {self.nbytes} bytes of {self.dtype}{op}{root}, "
                f"{'in place' if self.in_place else 'out of place'}, {where} buffers")


def draw(seed: int, sizes: tuple[int, ...], registered_share: float, nranks: int,
         ops: tuple[str, ...] = COLLECTIVES + VERBS, repeats: int = 1) -> Drawn:
    """Call ``seed`` of the soak (the same on every rank): the ``ops`` in turn, each through the sizes in turn; of
    every ``1 / (1 - registered_share)`` such rounds the first on plain buffers, the others on registered ones (so
    every op meets every size both ways); dtype, op, root, in place and whether it is made once or ``repeats``
    times drawn."""
    rng = random.Random(seed)
    n = len(ops)
    rounds = round(1 / (1 - registered_share)) if registered_share < 1 else 0
    registered = not rounds or seed // (n * len(sizes)) % rounds != 0
    collective = ops[seed % n]
    in_place = rng.random() < 0.3 and collective in IN_PLACE
    return Drawn(collective, sizes[seed // n % len(sizes)], rng.choice(DTYPES), rng.choice(OPS), in_place,
                 registered, rng.randrange(nranks), seed, rng.choice((1, repeats)))


@dataclass
class Plan:
    """A drawn call on this rank: outputs to poison, then inputs to fill with our inputs, the call, then each
    (buffer, layout, what) to check."""

    poisons: list
    fills: list
    call: Callable[[], None]
    checks: list


class Soak:
    """The soak's buffers on one rank: two registered (send, receive) and two plain, each of ``max_bytes``."""

    def __init__(self, comm, max_bytes: int):
        self.comm = comm
        self.registered = (alloc(max_bytes), alloc(max_bytes))
        self.plain = (alloc(max_bytes), alloc(max_bytes))
        for buf in self.registered:
            comm.register_buffer(buf)
        self.found = cuda.device_array(2, np.int64)
        self.served: Counter = Counter()  # (collective, algorithm, kernel) -> calls served
        self._bits: dict[str, object] = {}

    def close(self) -> None:
        for buf in self.registered:
            self.comm.deregister_buffer(buf)

    def bits(self, dtype: str):
        """The bit patterns of -LIMIT..LIMIT in ``dtype``, as unsigned words on the device."""
        if dtype not in self._bits:
            d = np_dtype(dtype)
            words = np.arange(-LIMIT, LIMIT + 1).astype(d).view(f"uint{8 * d.itemsize}")
            self._bits[dtype] = cuda.to_device(np.ascontiguousarray(words))
        return self._bits[dtype]

    def plan(self, c: Drawn) -> tuple[Plan, int]:
        """What call ``c`` does on this rank, and its count (elements a slot, or of the buffer)."""
        comm, n, r, root, name = self.comm, self.comm.size, self.comm.rank, c.root, c.collective
        d = np_dtype(c.dtype)
        word = np.dtype(f"uint{8 * d.itemsize}")
        count = max(1, c.nbytes // (d.itemsize * (n if name in PER_SLOT else 1)) - c.seed % 4)  # odd counts too
        s_raw, r_raw = self.registered if c.registered else self.plain

        def buf(raw, first, k):  # (typed view, word view) of k elements from element ``first`` of ``raw``
            return typed(raw, d, first * d.itemsize, k), view_as(raw, word, first * d.itemsize, k)

        ip = c.in_place
        mine = copies((0, r, 0))  # a send buffer after the call: our inputs
        if name in ("all_reduce", "all_to_all", "broadcast"):
            total = n * count if name == "all_to_all" else count
            send = buf(r_raw if ip else s_raw, 0, total)
            out = send if ip else buf(r_raw, 0, total)
            into = None if ip else out[0]
            layout = {"all_reduce": lambda: reduced(c.op, n, 0), "broadcast": lambda: copies((0, root, 0)),
                      "all_to_all": lambda: copies(*[(p * count, p, r * count) for p in range(n)])}[name]()
            call = {"all_reduce": lambda: comm.all_reduce(send[0], into, op=c.op),
                    "all_to_all": lambda: comm.all_to_all(send[0], into),
                    "broadcast": lambda: comm.broadcast(send[0], into, root=root)}[name]
            sent = name != "broadcast" or not ip or r == root
            return Plan([out[1]], [send[1]] if sent else [], call,
                        [(out[1], layout, "output")] + ([] if ip else [(send[1], mine, "send buffer")])), count
        if name == "all_gather":
            out = buf(r_raw, 0, n * count)
            send = buf(r_raw, r * count, count) if ip else buf(s_raw, 0, count)
            return Plan([out[1]], [send[1]], lambda: comm.all_gather(send[0], out[0]),
                        [(out[1], copies(*[(p * count, p, 0) for p in range(n)]), "output")]
                        + ([] if ip else [(send[1], mine, "send buffer")])), count
        if name == "reduce_scatter":
            send = buf(r_raw if ip else s_raw, 0, n * count)
            out = buf(r_raw, r * count if ip else 0, count)
            return Plan([out[1]], [send[1]], lambda: comm.reduce_scatter(send[0], out[0], op=c.op),
                        [(out[1], reduced(c.op, n, r * count), "output")]
                        + ([] if ip else [(send[1], mine, "send buffer")])), count
        if name == "reduce":
            send = buf(r_raw if ip else s_raw, 0, count)
            out = send if ip else buf(r_raw, 0, count)
            at_root = r == root
            checks = [(out[1], reduced(c.op, n, 0), "output")] if at_root else []
            if not (ip and at_root):
                checks.append((send[1], mine, "send buffer"))
            return Plan([out[1]] if at_root else [], [send[1]],
                        lambda: comm.reduce(send[0], None if ip or not at_root else out[0], root=root, op=c.op),
                        checks), count
        if name == "gather":
            at_root = r == root
            out = buf(r_raw, 0, n * count)
            send = buf(r_raw, r * count, count) if ip and at_root else buf(s_raw, 0, count)
            checks = [(out[1], copies(*[(p * count, p, 0) for p in range(n)]), "output")] if at_root else []
            if not (ip and at_root):
                checks.append((send[1], mine, "send buffer"))
            return Plan([out[1]] if at_root else [], [send[1]],
                        lambda: comm.gather(send[0], out[0] if at_root else None, root=root), checks), count
        if name == "scatter":
            at_root = r == root
            send = buf(r_raw if ip else s_raw, 0, n * count)
            out = buf(r_raw, r * count if ip and at_root else 0, count)
            checks = [(out[1], copies((0, root, r * count)), "output")]
            if at_root and not ip:
                checks.append((send[1], mine, "send buffer"))
            return Plan([out[1]], [send[1]] if at_root else [],
                        lambda: comm.scatter(send[0] if at_root else None, out[0], root=root), checks), count
        if name == "all_to_allv":
            unit = max(1, count // 3)  # rank p sends rank q counts[p][q] elements (at most 3 units): some none
            counts = [[unit * ((p * 7 + q * 3 + c.seed) % 4 if p != q else 1 + (p + c.seed) % 3) for q in range(n)]
                      for p in range(n)]
            sent, got = counts[r], [counts[p][r] for p in range(n)]
            send, out = buf(s_raw, 0, sum(sent)), buf(r_raw, 0, sum(got))
            layout = copies(*[(sum(got[:p]), p, sum(counts[p][:r])) for p in range(n)])
            return Plan([out[1]], [send[1]],
                        lambda: comm.all_to_all(send[0], out[0], send_counts=sent, recv_counts=got),
                        [(out[1], layout, "output"), (send[1], mine, "send buffer")]), count
        shift = 1 + c.seed % (n - 1)  # send_recv: a ring shift
        send, out = buf(s_raw, 0, count), buf(r_raw, 0, count)

        def send_recv():
            with comm.group():
                comm.send(send[0], (r + shift) % n)
                comm.recv(out[0], (r - shift) % n)
        return Plan([out[1]], [send[1]], send_recv,
                    [(out[1], copies((0, (r - shift) % n, 0)), "output"), (send[1], mine, "send buffer")]), count

    def run(self, c: Drawn) -> str | None:
        """Make call ``c`` (``c.repeats`` times on the same buffers, new inputs each time: a kept call from the
        third) and check it: None, or what was wrong."""
        comm, bits = self.comm, self.bits(c.dtype)
        plan, count = self.plan(c)
        for k in range(c.repeats):
            seed = c.seed + k * REPEAT_SEEDS
            for words in plan.poisons:
                poison[_grid(words.size)](words)
            for words in plan.fills:
                fill[_grid(words.size)](words, bits, seed, comm.rank)
            plan.call()
            served = comm.last_algorithm(c.collective)
            name, kernel = (served.name, served.last_kernel) if served is not None else ("none", "none")
            self.served[c.collective, name, kernel] += 1
            for words, layout, what in plan.checks:
                lay = cuda.to_device(layout)
                self.found.copy_to_device(np.array([0, words.size], np.int64))
                check[_grid(words.size)](words, bits, seed, lay, self.found)
                bad, first = (int(x) for x in self.found.copy_to_host())
                comm.check_device_errors()
                if bad:
                    want = cuda.device_array(1, words.dtype)
                    expected_at[1, 1](want, bits, seed, lay, first)
                    got = int(words[first:first + 1].copy_to_host()[0])
                    return (f"rank {comm.rank}: {c}, time {k + 1} ({count} elements; served by {name!r}, kernel "
                            f"{kernel}): {bad} elements of its {what} wrong, the first element {first} is {got:#x}, "
                            f"expected {int(want.copy_to_host()[0]):#x}")
        comm.check_device_errors()
        return None


def soak(comm, iters: int = 0, seconds: float = 0.0, seed: int = 0, sizes: tuple[int, ...] = GPU_SIZES,
         registered_share: float = 0.75, report: int = 0, ops: tuple[str, ...] = COLLECTIVES + VERBS,
         repeats: int = 1) -> Counter:
    """Drawn calls (half of them made ``repeats`` times), each checked, for ``iters`` drawn calls or ``seconds``
    (rank 0 decides when); the calls each (collective, algorithm, kernel) served. Raises AssertionError naming the
    first wrong element."""
    s = Soak(comm, max(sizes))
    start, done = time.monotonic(), 0
    try:
        while True:
            wrong = s.run(draw(seed + done, sizes, registered_share, comm.size, ops, repeats))
            if wrong:
                raise AssertionError(wrong)
            done += 1
            if report and comm.rank == 0 and done % report == 0:
                print(f"{done} calls ok ({time.monotonic() - start:.1f} s)", flush=True)
            if iters and done >= iters:
                return s.served
            if seconds and done % 8 == 0:
                if comm.bootstrap.all_gather(b"1" if time.monotonic() - start > seconds else b"0")[0] == b"1":
                    return s.served
    finally:
        s.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--report", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-bytes", type=int, default=max(SIM_SIZES if IS_SIM else GPU_SIZES),
                    help="the largest call (nccl-tests bytes); the sizes are those of the default list up to it")
    ap.add_argument("--registered", type=float, default=0.75,
                    help="the share of calls on registered buffers (1 - 1/k for a whole k)")
    ap.add_argument("--ops", default=",".join(COLLECTIVES + VERBS), help="comma-separated collectives and verbs")
    ap.add_argument("--repeats", type=int, default=3,
                    help="half the drawn calls are made this many times on the same buffers (eager repeats go out "
                         "as one-node CUDA graphs from the third)")
    args = ap.parse_args()
    sizes = tuple(s for s in (SIM_SIZES if IS_SIM else GPU_SIZES) if s <= args.max_bytes) or (args.max_bytes,)
    ops = tuple(args.ops.split(","))
    comm = pymscclpp.Communicator.from_mpi()
    start = time.monotonic()
    try:
        served = soak(comm, iters=args.iters, seed=args.seed, sizes=sizes, registered_share=args.registered,
                      report=args.report, ops=ops, repeats=args.repeats)
        comm.barrier()
        if comm.rank == 0:
            for (collective, name, kernel), calls in sorted(served.items()):
                print(f"  {collective:15s} {name:15s} {kernel:40s} {calls:7d} calls", flush=True)
            print(f"soak: {sum(served.values())} calls of {len(ops)} collectives and verbs on {comm.size} ranks, "
                  f"every result exact, {time.monotonic() - start:.1f} s", flush=True)
        return 0
    except (AssertionError, pymscclpp.PymscclppError) as exc:
        print(f"rank {comm.rank}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        comm.close()


if __name__ == "__main__":
    sys.exit(main())

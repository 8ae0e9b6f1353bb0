"""Soak every collective under mpirun on GPUs (or the simulator): calls of many sizes, dtypes and ops, in and out
of place, on registered buffers (zero-copy) and plain ones (staged), the selection choosing; every result checked.

    mpirun -np 8 python tests/fault/soak_collectives.py --iters 100000

Every rank draws the same calls from ``--seed``. A call's inputs are a hash of (call, rank, element) that kernels
write and check where the data lies (no host copy of a large buffer), so a stale, misplaced, unreduced or
half-written element fails the call; outputs are poisoned before each out-of-place call and send buffers checked
after it. Prints a line per ``--report`` calls and a summary; exits 1 on the first wrong element or error, naming
the call, the algorithm and kernel that served it and the element.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass

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
AR, AG, RS, BC, A2A, SENT = range(6)  # what an element holds: a collective's result, or the rank's own input
KIND = {"all_reduce": AR, "all_gather": AG, "reduce_scatter": RS, "broadcast": BC, "all_to_all": A2A}
POISON = 0x7FFF  # in every element of an out-of-place call's output before the call (no result's bit pattern)
GPU_SIZES = (4, 1 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 3 << 20, 5 << 20, 16 << 20)  # bytes, nccl-tests
SIM_SIZES = (4, 64, 512, 1 << 10, 1536, 3 << 10)


@cuda.jit(device=True)
def value(seed, rank, i):
    """Rank ``rank``'s input element ``i`` of call ``seed``: a hash in [-SPAN, SPAN]."""
    x = (i * 0x9E3779B1 + seed * 0x85EBCA77 + rank * 0xC2B2AE3D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x2C1B3C6D) & 0xFFFFFFFF
    x ^= x >> 12
    return x % (2 * SPAN + 1) - SPAN


@cuda.jit(device=True)
def expected(kind, op, seed, rank, nranks, count, root, i):
    """Element ``i`` of what ``kind`` leaves in rank ``rank``'s buffer (``count`` elements a slot)."""
    if kind == AR or kind == RS:
        j = i + rank * count if kind == RS else i
        acc = value(seed, 0, j)
        for r in range(1, nranks):
            v = value(seed, r, j)
            if op == 0:
                acc += v
            elif op == 1:
                acc = max(acc, v)
            else:
                acc = min(acc, v)
        return acc
    if kind == AG:
        return value(seed, i // count, i % count)
    if kind == A2A:
        return value(seed, i // count, rank * count + i % count)
    if kind == BC:
        return value(seed, root, i)
    return value(seed, rank, i)


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
def check(words, bits, kind, op, seed, rank, nranks, count, root, found):
    """Count the elements of ``words`` that differ from ``expected`` (``found[0]``), the first in ``found[1]``."""
    for i in range(cuda.grid(1), words.size, cuda.gridsize(1)):
        if words[i] != bits[expected(kind, op, seed, rank, nranks, count, root, i) + LIMIT]:
            cuda.atomic.add(found, 0, 1)
            cuda.atomic.min(found, 1, i)


@cuda.jit
def expected_at(out, bits, kind, op, seed, rank, nranks, count, root, i):
    out[0] = bits[expected(kind, op, seed, rank, nranks, count, root, i) + LIMIT]


def _grid(n: int) -> tuple[int, int]:
    return (1, 16) if IS_SIM else (max(1, min(512, (n + 255) // 256)), 256)


@dataclass(frozen=True)
class Drawn:
    """One call of the soak: collective, bytes (nccl-tests sizes), dtype, op, in place, on registered buffers, root,
    and its seed (the call's number: every call's inputs differ)."""

    collective: str
    nbytes: int
    dtype: str
    op: str
    in_place: bool
    registered: bool
    root: int
    seed: int

    def __str__(self) -> str:
        where = "registered" if self.registered else "plain"
        return (f"call {self.seed}: {self.collective} of {self.nbytes} bytes of {self.dtype}"
                f"{' ' + self.op if self.collective in ('all_reduce', 'reduce_scatter') else ''}"
                f"{f' from root {self.root}' if self.collective == 'broadcast' else ''}, "
                f"{'in place' if self.in_place else 'out of place'}, {where} buffers")


def draw(seed: int, sizes: tuple[int, ...], registered_share: float, nranks: int) -> Drawn:
    """Call ``seed`` of the soak (the same on every rank): the collectives in turn, each through the sizes in turn;
    of every ``1 / (1 - registered_share)`` such rounds the first on plain buffers, the others on registered ones
    (so every collective meets every size both ways); dtype, op, root and in place drawn."""
    rng = random.Random(seed)
    n = len(COLLECTIVES)
    rounds = round(1 / (1 - registered_share)) if registered_share < 1 else 0
    registered = not rounds or seed // (n * len(sizes)) % rounds != 0
    return Drawn(COLLECTIVES[seed % n], sizes[seed // n % len(sizes)], rng.choice(DTYPES), rng.choice(OPS),
                 rng.random() < 0.3, registered, rng.randrange(nranks), seed)


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

    def run(self, c: Drawn) -> str | None:
        """Make call ``c`` and check it: None, or what was wrong."""
        comm, n, r = self.comm, self.comm.size, self.comm.rank
        d = np_dtype(c.dtype)
        word = np.dtype(f"uint{8 * d.itemsize}")
        jitter = c.seed % 4  # counts that are not multiples of 16 bytes too
        per_rank = c.collective in ("all_gather", "reduce_scatter", "all_to_all")
        count = max(1, c.nbytes // (d.itemsize * (n if per_rank else 1)) - jitter)
        send_raw, recv_raw = self.registered if c.registered else self.plain
        total = n * count if per_rank else count  # elements of the send buffer (all_gather: of the receive one)

        def typed(raw, first, k):
            return view_as(raw, d, first * d.itemsize, k), view_as(raw, word, first * d.itemsize, k)

        kind, op = KIND[c.collective], OPS.index(c.op)
        root, bits = c.root, self.bits(c.dtype)
        if c.collective == "all_gather":
            (recv, recv_w) = typed(recv_raw, 0, total)
            send, send_w = typed(recv_raw, r * count, count) if c.in_place else typed(send_raw, 0, count)
            out, out_w = recv, recv_w
        elif c.collective == "reduce_scatter":
            send, send_w = typed(recv_raw if c.in_place else send_raw, 0, total)
            out, out_w = typed(recv_raw, r * count if c.in_place else 0, count)
        else:
            send, send_w = typed(recv_raw if c.in_place else send_raw, 0, total)
            out, out_w = (send, send_w) if c.in_place else typed(recv_raw, 0, total)
        if not c.in_place or c.collective in ("all_gather", "broadcast"):
            poison[_grid(out_w.size)](out_w)
        if c.collective != "broadcast" or not c.in_place or r == root:
            fill[_grid(send_w.size)](send_w, bits, c.seed, r)
        into = None if c.in_place and c.collective != "all_gather" and c.collective != "reduce_scatter" else out
        if c.collective == "broadcast":
            comm.broadcast(send, into, root=root)
        elif c.collective in ("all_reduce", "reduce_scatter"):
            getattr(comm, c.collective)(send, into, op=c.op)
        else:
            getattr(comm, c.collective)(send, into)
        served = comm.last_algorithm(c.collective)
        self.served[c.collective, served.name, served.last_kernel] += 1
        checks = [(out_w, kind)]
        if not c.in_place:
            checks.append((send_w, SENT))
        for words, k in checks:
            self.found.copy_to_device(np.array([0, words.size], np.int64))
            check[_grid(words.size)](words, bits, k, op, c.seed, r, n, count, root, self.found)
            bad, first = (int(x) for x in self.found.copy_to_host())
            comm.check_device_errors()
            if bad:
                want = cuda.device_array(1, word)
                expected_at[1, 1](want, bits, k, op, c.seed, r, n, count, root, first)
                got = int(words[first:first + 1].copy_to_host()[0])
                what = "its send buffer" if k == SENT else "its output"
                return (f"rank {r}: {c} ({count} elements a slot; served by {served.name!r}, kernel "
                        f"{served.last_kernel}): {bad} elements of {what} wrong, the first element {first} is "
                        f"{got:#x}, expected {int(want.copy_to_host()[0]):#x}")
        return None


def soak(comm, iters: int = 0, seconds: float = 0.0, seed: int = 0, sizes: tuple[int, ...] = GPU_SIZES,
         registered_share: float = 0.75, report: int = 0) -> Counter:
    """Drawn calls, each checked, for ``iters`` calls or ``seconds`` (rank 0 decides when); the calls each
    (collective, algorithm, kernel) served. Raises AssertionError naming the first wrong element."""
    s = Soak(comm, max(sizes))
    start, done = time.monotonic(), 0
    try:
        while True:
            wrong = s.run(draw(seed + done, sizes, registered_share, comm.size))
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
    args = ap.parse_args()
    sizes = tuple(s for s in (SIM_SIZES if IS_SIM else GPU_SIZES) if s <= args.max_bytes) or (args.max_bytes,)
    comm = pymscclpp.Communicator.from_mpi()
    start = time.monotonic()
    try:
        served = soak(comm, iters=args.iters, seed=args.seed, sizes=sizes, registered_share=args.registered,
                      report=args.report)
        comm.barrier()
        if comm.rank == 0:
            for (collective, name, kernel), calls in sorted(served.items()):
                print(f"  {collective:15s} {name:15s} {kernel:40s} {calls:7d} calls", flush=True)
            print(f"soak: {sum(served.values())} calls of {len(COLLECTIVES)} collectives on {comm.size} ranks, every "
                  f"result exact, {time.monotonic() - start:.1f} s", flush=True)
        return 0
    except (AssertionError, pymscclpp.PymscclppError) as exc:
        print(f"rank {comm.rank}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        comm.close()


if __name__ == "__main__":
    sys.exit(main())

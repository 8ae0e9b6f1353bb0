"""pymscclpp.nccl on real GPUs against cupy.cuda.nccl: ``mpirun -np 2 python tests/gpu/run_nccl_api.py``.

Same calls, same cupy arrays, raw pointers and streams, through both; the results must match. float64 and
avg go through the NCCL fallback (nvidia-nccl-cu13); send/recv are pymscclpp's. ``--no-nccl`` (ranks sharing a GPU, where
NCCL refuses to run): the reference is the same calls computed on the host over MPI, and only the cases
pymscclpp serves itself run.
"""

from __future__ import annotations

import argparse
import sys
import traceback

import numpy as np
from mpi4py import MPI

import pymscclpp  # noqa: F401 (before numba.cuda)
from pymscclpp import nccl as ours
from pymscclpp.errors import InvalidUsageError
from pymscclpp.fallback import nccl as fb

import cupy as cp  # noqa: E402
from cupy.cuda import nccl as theirs  # noqa: E402

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size
DTYPES = {ours.NCCL_FLOAT32: np.float32, ours.NCCL_FLOAT16: np.float16, ours.NCCL_INT32: np.int32,
          ours.NCCL_UINT8: np.uint8, ours.NCCL_FLOAT64: np.float64, ours.NCCL_INT64: np.int64}


def data(count: int, datatype: int, seed: int, rank: int = RANK) -> cp.ndarray:
    """Rank ``rank``'s small integers: exact in every dtype and summation order."""
    rng = np.random.default_rng([seed, rank])
    return cp.asarray(rng.integers(0, 4, count).astype(DTYPES[datatype]))


def all_reduce(mine, ref, stream, count, datatype, op, inplace):
    x = data(count, datatype, count + op)
    a, b = (x.copy(), x.copy()) if inplace else (cp.zeros_like(x), cp.zeros_like(x))
    src_a, src_b = (a, b) if inplace else (x, x)
    mine.allReduce(src_a.data.ptr, a.data.ptr, count, datatype, op, stream.ptr)
    ref.allReduce(src_b.data.ptr, b.data.ptr, count, datatype, op, stream.ptr)
    stream.synchronize()
    assert cp.array_equal(a, b) if op != ours.NCCL_AVG else cp.allclose(a, b), f"{a[:8]} != {b[:8]}"


def others(mine, ref, stream, count, datatype):
    x = data(count, datatype, 7)
    g = [cp.zeros(count * SIZE, x.dtype) for _ in range(2)]
    mine.allGather(x.data.ptr, g[0].data.ptr, count, datatype, stream.ptr)
    ref.allGather(x.data.ptr, g[1].data.ptr, count, datatype, stream.ptr)
    r = [cp.zeros(count, x.dtype) for _ in range(2)]
    mine.reduceScatter(g[0].data.ptr, r[0].data.ptr, count, datatype, ours.NCCL_SUM, stream.ptr)
    ref.reduceScatter(g[1].data.ptr, r[1].data.ptr, count, datatype, ours.NCCL_SUM, stream.ptr)
    b = [data(count, datatype, 8) for _ in range(2)]
    mine.bcast(b[0].data.ptr, count, datatype, SIZE - 1, stream.ptr)
    ref.bcast(b[1].data.ptr, count, datatype, SIZE - 1, stream.ptr)
    c = [cp.zeros(count, x.dtype) for _ in range(2)]
    mine.broadcast(x.data.ptr, c[0].data.ptr, count, datatype, 0, stream.ptr)
    ref.broadcast(x.data.ptr, c[1].data.ptr, count, datatype, 0, stream.ptr)
    stream.synchronize()
    for name, (o, t) in {"allGather": g, "reduceScatter": r, "bcast": b, "broadcast": c}.items():
        assert cp.array_equal(o, t), f"{name}: {o[:8]} != {t[:8]}"


def mixed_group_and_send_recv(mine, ref, stream, count):
    """One group: a pymscclpp allReduce, an NCCL one (float64) and a ring send/recv (pymscclpp)."""
    f32, f64 = data(count, ours.NCCL_FLOAT32, 1), data(count, ours.NCCL_FLOAT64, 2)
    ring, got = data(count, ours.NCCL_FLOAT64, 3), cp.zeros(count, cp.float64)
    ours.groupStart()
    mine.allReduce(f32.data.ptr, f32.data.ptr, count, ours.NCCL_FLOAT32, ours.NCCL_SUM, stream.ptr)
    mine.allReduce(f64.data.ptr, f64.data.ptr, count, ours.NCCL_FLOAT64, ours.NCCL_SUM, stream.ptr)
    mine.send(ring.data.ptr, count, ours.NCCL_FLOAT64, (RANK + 1) % SIZE, stream.ptr)
    mine.recv(got.data.ptr, count, ours.NCCL_FLOAT64, (RANK - 1) % SIZE, stream.ptr)
    ours.groupEnd()
    stream.synchronize()
    assert cp.array_equal(f32, sum(data(count, ours.NCCL_FLOAT32, 1, r) for r in range(SIZE)))
    assert cp.array_equal(f64, sum(data(count, ours.NCCL_FLOAT64, 2, r) for r in range(SIZE)))
    assert cp.array_equal(got, data(count, ours.NCCL_FLOAT64, 3, (RANK - 1) % SIZE))
    assert mine.communicator.extension(fb.EXTENSION)._handle is not None, "float64 did not go through NCCL"


def send_recv(mine, ref, stream, count):
    """pymscclpp's send/recv: a ring both ways in one group (float64 and int32), then a pair without one."""
    right, left = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    wide, small = data(count, ours.NCCL_FLOAT64, 4), data(7, ours.NCCL_INT32, 5)
    from_left, from_right = cp.zeros(count, cp.float64), cp.zeros(7, cp.int32)
    ours.groupStart()
    mine.recv(from_left.data.ptr, count, ours.NCCL_FLOAT64, left, stream.ptr)
    mine.recv(from_right.data.ptr, 7, ours.NCCL_INT32, right, stream.ptr)
    mine.send(wide.data.ptr, count, ours.NCCL_FLOAT64, right, stream.ptr)
    mine.send(small.data.ptr, 7, ours.NCCL_INT32, left, stream.ptr)
    ours.groupEnd()
    stream.synchronize()
    assert cp.array_equal(from_left, data(count, ours.NCCL_FLOAT64, 4, left)), "ring to the right"
    assert cp.array_equal(from_right, data(7, ours.NCCL_INT32, 5, right)), "ring to the left"
    got = cp.zeros(count, cp.float64)
    if RANK == 0:
        mine.send(wide.data.ptr, count, ours.NCCL_FLOAT64, SIZE - 1, stream.ptr)
    elif RANK == SIZE - 1:
        mine.recv(got.data.ptr, count, ours.NCCL_FLOAT64, 0, stream.ptr)
        stream.synchronize()
        assert cp.array_equal(got, data(count, ours.NCCL_FLOAT64, 4, 0)), "send without a group"


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns of small integers (exact: the top half of their float32 bits)."""
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _refuse_bfloat16(*args) -> None:
    raise AssertionError("bfloat16 went through NCCL")


def bfloat16_all_reduce(mine, ref, stream, count):
    """A bf16 allReduce on raw pointers (vLLM's pynccl passes these) is served by pymscclpp: NCCL is never made."""
    values = [np.random.default_rng([count, r]).integers(0, 4, count) for r in range(SIZE)]
    x = cp.asarray(bf16_bits(values[RANK]))
    nccl = mine.communicator.extension(fb.EXTENSION)  # made by earlier cases when NCCL runs: it must not be used
    if nccl is not None:
        nccl.all_reduce = _refuse_bfloat16
    try:
        for _ in range(3):  # the repeats go out as a graph launch
            x[:] = cp.asarray(bf16_bits(values[RANK]))
            mine.allReduce(x.data.ptr, x.data.ptr, count, ours.NCCL_BFLOAT16, ours.NCCL_SUM, stream.ptr)
            stream.synchronize()
            assert cp.array_equal(x, cp.asarray(bf16_bits(sum(values)))), f"{x[:8]}"
    finally:
        if nccl is not None:
            del nccl.all_reduce  # the class's own again


def bad_pointer_count(mine, ref, stream):
    a = cp.zeros(16, cp.float32)
    try:
        mine.allReduce(a.data.ptr, a.data.ptr, 1 << 32, ours.NCCL_FLOAT32, ours.NCCL_SUM, stream.ptr)
    except InvalidUsageError as exc:
        assert "remain in the allocation" in str(exc), str(exc)
    else:
        raise AssertionError("no error for a count past the allocation")


class HostReference:
    """The NCCL calls the cases make, computed on the host: every rank's buffer gathered over MPI and reduced
    in rank order (what pymscclpp's one-shot algorithms do), for runs where NCCL cannot run."""

    REDUCE = {ours.NCCL_SUM: np.add, ours.NCCL_PROD: np.multiply, ours.NCCL_MAX: np.maximum,
              ours.NCCL_MIN: np.minimum}

    def rank_id(self) -> int:
        return RANK

    def size(self) -> int:
        return SIZE

    def device_id(self) -> int:
        return cp.cuda.Device().id

    @staticmethod
    def _array(ptr: int, count: int, datatype: int) -> cp.ndarray:
        dtype = np.dtype(DTYPES[datatype])
        mem = cp.cuda.UnownedMemory(ptr, count * dtype.itemsize, None)
        return cp.ndarray(count, dtype, cp.cuda.MemoryPointer(mem, 0))

    def _gathered(self, ptr: int, count: int, datatype: int, stream: int) -> list:
        cp.cuda.runtime.streamSynchronize(stream)
        return WORLD.allgather(cp.asnumpy(self._array(ptr, count, datatype)))

    def _reduced(self, parts: list, op: int):
        out = parts[0].copy()
        for p in parts[1:]:
            self.REDUCE[op](out, p, out=out)
        return out

    def allReduce(self, send, recv, count, datatype, op, stream):  # noqa: N802 (NCCL's names)
        self._array(recv, count, datatype)[:] = cp.asarray(self._reduced(self._gathered(send, count, datatype,
                                                                                         stream), op))

    def allGather(self, send, recv, count, datatype, stream):  # noqa: N802
        self._array(recv, count * SIZE, datatype)[:] = cp.asarray(np.concatenate(self._gathered(send, count,
                                                                                                datatype, stream)))

    def reduceScatter(self, send, recv, count, datatype, op, stream):  # noqa: N802
        full = self._reduced(self._gathered(send, count * SIZE, datatype, stream), op)
        self._array(recv, count, datatype)[:] = cp.asarray(full[RANK * count:(RANK + 1) * count])

    def broadcast(self, send, recv, count, datatype, root, stream):  # noqa: N802
        self._array(recv, count, datatype)[:] = cp.asarray(self._gathered(send, count, datatype, stream)[root])

    def bcast(self, buf, count, datatype, root, stream):
        self.broadcast(buf, buf, count, datatype, root, stream)

    def destroy(self) -> None:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-nccl", action="store_true", help="reference on the host over MPI; only served cases")
    args = ap.parse_args()
    cp.cuda.Device(RANK % cp.cuda.runtime.getDeviceCount()).use()
    uid = WORLD.bcast(ours.get_unique_id() if RANK == 0 else None)
    mine = ours.NcclCommunicator(SIZE, uid, RANK)
    if args.no_nccl:
        ref = HostReference()
    else:
        ref = theirs.NcclCommunicator(SIZE, WORLD.bcast(theirs.get_unique_id() if RANK == 0 else None), RANK)
        assert fb.available(), "NCCL fallback unavailable: pip install nvidia-nccl-cu13"
    assert (mine.rank_id(), mine.size(), mine.device_id()) == (ref.rank_id(), ref.size(), ref.device_id())
    stream = cp.cuda.Stream()  # blocking: ordered after the buffers each case fills on the null stream
    plan = []
    nccl_only = (ours.NCCL_FLOAT64, ours.NCCL_INT64)  # dtypes pymscclpp hands to the NCCL fallback
    for datatype, op in [(ours.NCCL_FLOAT32, ours.NCCL_SUM), (ours.NCCL_FLOAT16, ours.NCCL_MAX),
                         (ours.NCCL_INT32, ours.NCCL_MIN), (ours.NCCL_UINT8, ours.NCCL_SUM),
                         (ours.NCCL_FLOAT64, ours.NCCL_SUM), (ours.NCCL_INT64, ours.NCCL_PROD),
                         (ours.NCCL_FLOAT32, ours.NCCL_AVG)]:
        if args.no_nccl and (datatype in nccl_only or op == ours.NCCL_AVG):
            continue
        for count, inplace in [(1000, False), (3 << 20, True)]:
            plan.append((all_reduce, dict(count=count, datatype=datatype, op=op, inplace=inplace)))
    for datatype in [ours.NCCL_FLOAT32, ours.NCCL_UINT8, ours.NCCL_FLOAT64]:
        if args.no_nccl and datatype in nccl_only:
            continue
        for count in [257, 1 << 20]:
            plan.append((others, dict(count=count, datatype=datatype)))
    plan += [(bfloat16_all_reduce, dict(count=count)) for count in (1000, 3 << 20)]
    plan += [(send_recv, dict(count=count)) for count in (4099, 1 << 20)]
    if not args.no_nccl:
        plan.append((mixed_group_and_send_recv, dict(count=4099)))
    plan.append((bad_pointer_count, {}))
    failures = 0
    for fn, params in plan:
        try:
            fn(mine, ref, stream, **params)
            ok = True
        except Exception:
            ok = False
            traceback.print_exc()
        all_ok = WORLD.allreduce(int(ok), op=MPI.MIN)
        failures += 0 if all_ok else 1
        if RANK == 0:
            print(f"{'PASS' if all_ok else 'FAIL'} {fn.__name__} {params}", flush=True)
    if RANK == 0:
        print(f"gpu nccl api: {len(plan)} cases, {failures} failed", flush=True)
    mine.destroy()
    ref.destroy()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

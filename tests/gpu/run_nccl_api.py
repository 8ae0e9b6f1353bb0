"""pymscclpp.nccl on real GPUs against cupy.cuda.nccl: ``mpirun -np 2 python tests/gpu/run_nccl_api.py``.

Same calls, same cupy arrays, raw pointers and streams, through both; the results must match. float64 and
avg go through the NCCL fallback (nvidia-nccl-cu13), send/recv too.
"""

from __future__ import annotations

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
    """One group: a pymscclpp allReduce, an NCCL one (float64) and a ring send/recv (NCCL)."""
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


def bad_pointer_count(mine, ref, stream):
    a = cp.zeros(16, cp.float32)
    try:
        mine.allReduce(a.data.ptr, a.data.ptr, 1 << 32, ours.NCCL_FLOAT32, ours.NCCL_SUM, stream.ptr)
    except InvalidUsageError as exc:
        assert "remain in the allocation" in str(exc), str(exc)
    else:
        raise AssertionError("no error for a count past the allocation")


def main() -> int:
    cp.cuda.Device(RANK % cp.cuda.runtime.getDeviceCount()).use()
    uid = WORLD.bcast(ours.get_unique_id() if RANK == 0 else None)
    mine = ours.NcclCommunicator(SIZE, uid, RANK)
    ref = theirs.NcclCommunicator(SIZE, WORLD.bcast(theirs.get_unique_id() if RANK == 0 else None), RANK)
    assert (mine.rank_id(), mine.size(), mine.device_id()) == (ref.rank_id(), ref.size(), ref.device_id())
    assert fb.available(), "NCCL fallback unavailable: pip install nvidia-nccl-cu13"
    stream = cp.cuda.Stream(non_blocking=True)
    plan = []
    for datatype, op in [(ours.NCCL_FLOAT32, ours.NCCL_SUM), (ours.NCCL_FLOAT16, ours.NCCL_MAX),
                         (ours.NCCL_INT32, ours.NCCL_MIN), (ours.NCCL_UINT8, ours.NCCL_SUM),
                         (ours.NCCL_FLOAT64, ours.NCCL_SUM), (ours.NCCL_INT64, ours.NCCL_PROD),
                         (ours.NCCL_FLOAT32, ours.NCCL_AVG)]:
        for count, inplace in [(1000, False), (3 << 20, True)]:
            plan.append((all_reduce, dict(count=count, datatype=datatype, op=op, inplace=inplace)))
    for datatype in [ours.NCCL_FLOAT32, ours.NCCL_UINT8, ours.NCCL_FLOAT64]:
        for count in [257, 1 << 20]:
            plan.append((others, dict(count=count, datatype=datatype)))
    plan += [(mixed_group_and_send_recv, dict(count=4099)), (bad_pointer_count, {})]
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

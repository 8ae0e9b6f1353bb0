"""close() gives back everything a communicator took, at once: after many communicators are made, used and closed,
this process has the descriptors, shared-memory segments and threads it had before, with the garbage collector
off (nothing waits for it to break reference cycles)."""

from __future__ import annotations

import gc

from fault.harness import held, shared_unique_id
from pymscclpp.testing import run_ranks


def _make_use_and_close(comm, cycles: int) -> tuple:
    """Make ``cycles`` communicators one after another (over ``comm``'s bootstrap for the unique id), each runs an
    all-reduce and is closed; what this rank held before and after, with the collector off throughout."""
    import numpy as np
    from numba import cuda

    import pymscclpp
    gc.collect()
    gc.disable()
    try:
        before = held()
        for _ in range(cycles):
            uid = shared_unique_id(comm)
            with pymscclpp.Communicator.from_unique_id(uid, comm.rank, comm.size) as c:
                x = cuda.to_device(np.ones(64, np.float32))
                c.all_reduce(x)
                cuda.synchronize()
                c.check_device_errors()
            del c, x
        return before, held()
    finally:
        gc.enable()


def test_closed_communicators_leave_no_descriptor_segment_or_thread_behind_without_the_collector():
    for before, after in run_ranks(2, _make_use_and_close, 25, timeout=300):
        assert after == before, f"(descriptors, segments, threads) before {before}, after 25 closed: {after}"


def _make_use_and_release_drop_ins(comm, cycles: int) -> tuple:
    """``_make_use_and_close`` for the NCCL drop-in: each NcclCommunicator runs an allReduce on a raw pointer and a
    group of two, then is destroyed (even cycles) or aborted (odd ones)."""
    import numpy as np
    from numba import cuda

    from pymscclpp import nccl
    from pymscclpp.nccl import ids
    gc.collect()
    gc.disable()
    try:
        before = held()
        for i in range(cycles):
            uid = shared_unique_id(comm)
            drop_in = nccl.NcclCommunicator(comm.size, ids.encode(uid), comm.rank)
            x = cuda.to_device(np.ones(64, np.float32))
            drop_in.allReduce(x, x, 64, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, 0)
            nccl.groupStart()
            drop_in.allReduce(x, x, 64, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, 0)
            drop_in.bcast(x, 64, nccl.NCCL_FLOAT32, 0, 0)
            nccl.groupEnd()
            cuda.synchronize()
            drop_in.check_async_error()
            assert x.copy_to_host()[0] == comm.size ** 2
            drop_in.destroy() if i % 2 == 0 else drop_in.abort()
            del drop_in, x
        return before, held()
    finally:
        gc.enable()


def test_destroyed_and_aborted_drop_in_communicators_leave_nothing_behind_without_the_collector():
    for before, after in run_ranks(2, _make_use_and_release_drop_ins, 25, timeout=300):
        assert after == before, f"(descriptors, segments, threads) before {before}, after 25 released: {after}"

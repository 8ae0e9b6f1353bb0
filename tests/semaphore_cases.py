"""Host-to-host and host-to-device semaphore cases, run by every rank of a RankPool."""

from __future__ import annotations

import pymscclpp  # noqa: F401
import pymscclpp.channels.semaphore as dsem
from numba import cuda
from pymscclpp.errors import CommTimeoutError
from pymscclpp.runtime.semaphore import Host2DeviceSemaphore, Host2HostSemaphore


def _pair(comm):
    return comm.rank ^ 1 if (comm.rank ^ 1) < comm.size else None


def host_pingpong(comm, state, iters: int):
    """Host threads of a pair signal and wait in turn; each wait sees exactly one signal."""
    peer = _pair(comm)
    if peer is None:
        return
    sem = Host2HostSemaphore(comm, peer)
    for _ in range(iters):
        if comm.rank < peer:
            sem.signal()
            sem.wait()
        else:
            sem.wait()
            sem.signal()
    assert not sem.poll()


def host_wait_times_out(comm, state):
    """A host wait nobody signals raises CommTimeoutError naming rank and peer."""
    peer = _pair(comm)
    if peer is None:
        return
    sem = Host2HostSemaphore(comm, peer)
    try:
        sem.wait(timeout=0.2)
    except CommTimeoutError as exc:
        assert f"rank {comm.rank}" in str(exc) and f"peer {peer}" in str(exc), str(exc)
    else:
        raise AssertionError("no timeout")


@cuda.jit
def _device_waits(sem, count, out):
    if cuda.threadIdx.x == 0:
        for i in range(count):
            out[i] = dsem.wait(sem)


def host_signals_device(comm, state, count: int):
    """Signals from the peer's host release this rank's kernel exactly ``count`` times."""
    peer = _pair(comm)
    sem = None if peer is None else Host2DeviceSemaphore(comm, peer)
    comm.barrier()
    if sem is not None:
        for _ in range(count):
            sem.signal()
        out = cuda.to_device([False] * count)
        _device_waits[1, 1](sem.device_handle(), count, out)
        cuda.synchronize()
        comm.check_device_errors()
        assert all(out.copy_to_host())
    comm.barrier()

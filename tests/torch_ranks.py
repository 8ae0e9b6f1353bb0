"""Run a function in torch rank processes on the simulator: CPU tensors stand in for CUDA ones, the ranks share a
TCPStore."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import traceback

from pymscclpp.testing.pool import IMPORTED_ONCE

# on the simulator ranks fork from the server that imported pymscclpp once (``pymscclpp.testing``'s pools), saving
# each rank the import of numba-cuda; torch itself each rank imports
_CTX = mp.get_context("forkserver")
_CTX.set_forkserver_preload(list(IMPORTED_ONCE))


def _rank_main(fn, rank: int, size: int, ports, env: dict, results) -> None:
    os.environ.update(env)
    try:
        import torch.distributed as dist
        import pymscclpp.torch  # noqa: F401 (registers the backend)
        if rank == 0:  # the store picks a free port itself (no race with other listeners) and tells the others
            store = dist.TCPStore("127.0.0.1", 0, size, is_master=True, wait_for_workers=False)
            for _ in range(size - 1):
                ports.put(store.port)
        else:
            store = dist.TCPStore("127.0.0.1", ports.get(timeout=120), size, is_master=False)
        results.put((rank, True, fn(dist, store, rank, size)))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))


def run_ranks(fn, size: int = 2, env: dict | None = None, timeout: float = 240.0, lost: tuple = ()) -> list:
    """Run ``fn(dist, store, rank, size)`` in ``size`` spawned rank processes; their results, or the failures.
    ``lost``: ranks that kill themselves (no answer expected; their result stays None)."""
    # this process's environment as it is now: forked ranks inherit the server's, from when it started
    env = {**os.environ, "PYMSCCLPP_BACKEND": "sim", "PYMSCCLPP_SOCKET_ADDR": "127.0.0.1", **(env or {})}
    results, port = _CTX.Queue(), _CTX.Queue()
    procs = [_CTX.Process(target=_rank_main, args=(fn, r, size, port, env, results), daemon=True)
             for r in range(size)]
    for p in procs:
        p.start()
    out, errors = [None] * size, []
    try:
        for _ in range(size - len(lost)):
            rank, ok, value = results.get(timeout=timeout)
            if ok:
                out[rank] = value
            else:
                errors.append(f"--- rank {rank} ---\n{value}")
    except queue.Empty:
        errors.append(f"ranks did not answer within {timeout} s")
    finally:
        for p in procs:
            p.join(timeout=20)
            if p.is_alive():
                p.kill()
    assert not errors, "\n".join(errors)
    return out

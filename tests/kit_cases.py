"""What the kit's tests run on every rank: they live in a module of their own so the rank processes import them."""

from __future__ import annotations

import logging
import time

import numpy as np


def identity(comm, value):
    return (comm.rank, comm.size, value)


def raise_on_rank_one(comm):
    if comm.rank == 1:
        raise ValueError(f"bad value on rank {comm.rank}")
    return comm.rank


def sleep_on_rank_zero(comm, seconds: float):
    if comm.rank == 0:
        time.sleep(seconds)
    return comm.rank


def collective(comm, call, inputs):
    """The library's output of ``call`` on this rank, and the name of the algorithm that served it."""
    out = call.run(comm, inputs[comm.rank])
    return out, comm.last_algorithm(call.collective).name


def logged_algorithm(comm, call, inputs):
    """The DEBUG lines the call logs on this rank."""
    lines: list[str] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: lines.append(record.getMessage())
    log = logging.getLogger("pymscclpp.algos")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        call.run(comm, inputs[comm.rank])
    finally:
        log.removeHandler(handler)
    return lines


def viewed_call(comm, x):
    """The send and receive views a KernelAlgorithm's launch sees: dtypes, sizes and the send values."""
    from pymscclpp.kernels import KernelAlgorithm, recv_view, send_view
    seen = {}

    def launch(state, call):
        seen["send"], seen["recv"] = send_view(call).copy_to_host(), recv_view(call)
        recv_view(call).copy_to_device(np.tile(seen["send"], comm.size))  # a (wrong) gather: ours in every slot
    comm.register_algorithm(KernelAlgorithm("views", "all_gather", lambda c: None, launch, call_check=False))
    from numba import cuda
    out = cuda.device_array(x.size * comm.size, x.dtype)
    comm.all_gather(cuda.to_device(x), out)
    return seen["send"], str(seen["recv"].dtype), seen["recv"].size, out.copy_to_host()


def start_facts(comm, name="NUMBA_PYMSCCLPP_PROBE"):
    """(parent process id, environment variable ``name``) of a rank."""
    import os
    return os.getppid(), os.environ.get(name)


def exit_on_rank_one(comm, code: int):
    """Rank 1's process ends at once with exit code ``code`` (a crash); the others answer."""
    import os
    if comm.rank == 1:
        os._exit(code)
    return comm.rank

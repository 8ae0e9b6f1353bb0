"""``python -m pymscclpp.precompile`` builds the very kernels a Communicator's one-shot algorithms launch, and
says on the simulator that there is nothing to build."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rankpool import RankPool


def _requested(comm, state) -> set:
    """(kernel, argument types) of every launch of every one-shot, two-step and exchange algorithm this
    communicator can set up, the zero-copy kernels' on registered buffers too (every collective that has one)."""
    import numpy as np
    from numba import cuda
    from pymscclpp.runtime.collectives import CALLS
    from pymscclpp.algos.counts_oneshot import AllToAllvOneShot
    from pymscclpp.algos.counts_read import AllToAllvRead
    from pymscclpp.algos.exchange import Exchange
    from pymscclpp.algos.oneshot import OneShot
    from pymscclpp.runtime.memory import alloc, view_as
    buf = view_as(alloc(64), np.float32)
    comm.register_buffer(buf)
    comm.all_reduce(buf, algo="rsag")
    comm.reduce_scatter(buf, buf[comm.rank * 8:(comm.rank + 1) * 8], algo="read")
    out_buf = view_as(alloc(2 * 64), np.float32)
    comm.all_gather(buf, out_buf, algo="simple")
    comm.all_to_all(buf, out_buf[:16], algo="simple")
    comm.broadcast(buf, root=0, algo="simple")
    comm.all_to_all(buf, out_buf[:16], send_counts=[8, 8], recv_counts=[8, 8])  # as packets
    comm.all_to_all(buf, out_buf[:16], send_counts=[8, 8], recv_counts=[8, 8], algo="exchange")
    comm.all_to_all(buf, out_buf[:16], send_counts=[8, 8], recv_counts=[8, 8], algo="read")  # registered: zero-copy
    comm.reduce(buf, root=1, algo="rsag")
    comm.reduce(buf, root=1, algo="exchange")  # the exchange's reducing kernel is built by its first reduce
    comm.register_buffer(out_buf)  # the pushing kernels write into peers' receive buffers
    comm.all_gather(buf, out_buf, algo="push")
    comm.all_to_all(buf, out_buf[:16], algo="push")
    comm.all_reduce(buf, out_buf[:16], algo="push")
    comm.reduce_scatter(buf, out_buf[:8], algo="push")
    comm.broadcast(buf, root=0, algo="push")
    cuda.synchronize()
    out = set()
    for collective in CALLS:
        for name in comm.algorithms.names(collective):
            algo = comm.algorithms.get(collective, name)
            if isinstance(algo, (OneShot, Exchange, AllToAllvOneShot, AllToAllvRead)):
                out |= {(launch.kernel.py_func.__name__, repr(launch.argtypes)) for launch in algo.kernel_launches()}
    comm.deregister_buffer(buf)
    comm.deregister_buffer(out_buf)
    return out


def test_a_communicators_one_shot_launches_are_exactly_the_precompiled_kernels():
    from pymscclpp.algos.entries import entry_kernels
    pool = RankPool(2, preload=("pymscclpp.communicator",))  # the ranks fork from a process that imported it
    try:
        requested = pool.run(_requested)
    finally:
        pool.close()
    listed = {(name, repr(argtypes)) for name, (_, argtypes) in entry_kernels(2).items()}
    assert requested[0] == requested[1] == listed


def test_a_launch_refuses_values_of_other_types_than_declared():
    from numba import cuda, types
    from pymscclpp.errors import BackendError
    from pymscclpp.runtime.launch import Launch

    @cuda.jit
    def kernel(n):
        pass

    with pytest.raises(BackendError, match="argument n is int64, declared int32"):
        Launch(kernel, 1, 1, {"n": 0}, argtypes=(types.int32,))


def test_help_reads_python_m_pymscclpp_precompile(capsys):
    from pymscclpp import precompile
    with pytest.raises(SystemExit) as done:
        precompile.main(["--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage: python -m pymscclpp.precompile")


def test_on_the_simulator_there_is_nothing_to_compile():
    env = {**os.environ, "PYMSCCLPP_BACKEND": "sim"}
    done = subprocess.run([sys.executable, "-m", "pymscclpp.precompile", "--ranks", "2,4"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["pymscclpp.precompile: the sim backend runs no compiled kernels (no GPU): "
                                        "nothing to compile"]

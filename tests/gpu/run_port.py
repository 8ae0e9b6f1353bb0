"""PortChannel cases on real GPUs: ``mpirun -np 2 python tests/gpu/run_port.py``.

Runs tests/port_cases.py twice: with both ranks on this host (CudaIpc through the copy engine),
then with each rank posing as its own host (PYMSCCLPP_HOST_ID; Ethernet over loopback, one GPU
per "host"). Random sizes and offsets, then the fault cases. One JSON line per case; exit 1 on failure.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import pymscclpp  # noqa: E402,F401
import port_cases as cases  # noqa: E402
from pymscclpp.runtime.communicator import Communicator  # noqa: E402


def plan(rng) -> list:
    steps = [(cases.transports, {})]
    for i in range(24):
        steps.append((cases.ring_put, dict(nbytes=int(rng.integers(0, cases.ARENA // 2)),
                                           src_off=int(rng.integers(0, 64)), dst_off=int(rng.integers(0, 64)),
                                           seed=i, mode=cases.MODES[i % 3], rounds=int(rng.integers(1, 4)))))
    steps += [(cases.big_put, dict(nbytes=(9 << 20) + 4321, src_off=13, dst_off=4099, seed=5)),
              (cases.big_put, dict(nbytes=(4 << 20), src_off=0, dst_off=0, seed=6, mode="put_signal_flush")),
              (cases.many_pushers, dict(nthreads=256, chunk=64, seed=3)), (cases.poll_sees_signal, {}),
              (cases.teardown, {}), (cases.ring_put, dict(nbytes=4096, src_off=0, dst_off=0, seed=99,
                                                          mode="put_with_signal")), (cases.teardown, {}),
              # last: a fault breaks the communicator for good (errors are sticky)
              (cases.bad_trigger_rejected, {}), (cases.peer_disconnects, {}), (cases.proxy_thread_dies, {})]
    return steps


def run_phase(name: str, comm, world) -> int:
    state: dict = {}
    failures = 0
    for fn, params in plan(np.random.default_rng(1234)):
        if fn is cases.proxy_thread_dies and name == "cuda_ipc":
            continue  # CudaIpc triggers never reach the Python path that this case breaks
        started = time.monotonic()
        try:
            detail = fn(comm, state, **params)
            ok = True
        except Exception:
            ok, detail = False, traceback.format_exc()
        all_ok = world.allreduce(int(ok), op=MPI.MIN)
        failures += 0 if all_ok else 1
        if comm.rank == 0:
            print(json.dumps({"phase": name, "case": fn.__name__, "params": params, "ok": bool(all_ok),
                              "seconds": round(time.monotonic() - started, 3),
                              "detail": detail if isinstance(detail, (str, dict)) else None}), flush=True)
        if not ok:
            print(f"rank {comm.rank}: {detail}", file=sys.stderr, flush=True)
        if not all_ok:
            break
    return failures


def main() -> int:
    world = MPI.COMM_WORLD
    os.environ.setdefault("PYMSCCLPP_SOCKET_ADDR", "127.0.0.1")
    failures = 0
    for name, host in (("cuda_ipc", None), ("ethernet", f"fake-host-{world.rank}")):
        if host is not None:
            os.environ["PYMSCCLPP_HOST_ID"] = host
        comm = Communicator.from_mpi(world, device=world.rank % max(1, _gpus()))
        failures += run_phase(name, comm, world)
        comm.close()
    if world.rank == 0:
        print(json.dumps({"summary": "gpu port channel", "failed_cases": failures}), flush=True)
    return 1 if failures else 0


def _gpus() -> int:
    from numba import cuda
    return len(cuda.gpus)


if __name__ == "__main__":
    sys.exit(main())

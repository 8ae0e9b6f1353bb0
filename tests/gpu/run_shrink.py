"""Survive a lost rank on the GPU: ``python3 tests/gpu/run_shrink.py --np 4 [--iters 10000]`` (no MPI: mpirun
would end the job when a rank dies; this script spawns the ranks itself, from one unique id).

Every rank runs checked all-reduces; after ``--before`` of them the victim (the last rank) launches one more and
kills itself (SIGKILL) while it is in flight. The survivors get PeerDisconnectedError, shrink, and run ``--iters``
checked all-reduces on the shrunk communicator. Prints, per survivor and at most over them, the time from the
death to the first correct call on the shrunk communicator (target 2 s), then PASS/FAIL; exit 1 on failure.
Ranks go on the GPUs in turn (one GPU under MPS: CUDA_VISIBLE_DEVICES=0).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import sys
import time
import traceback

import numpy as np

import pymscclpp  # chooses the backend before numba.cuda loads
from numba import cuda
from pymscclpp.errors import PymscclppError
from pymscclpp.runtime.bootstrap import UniqueId, get_unique_id

TARGET_S = 2.0
_CTX = mp.get_context("spawn")


@cuda.jit
def _fill(out, value):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = value


def _checked(comm, send, recv, i: int) -> None:
    """All-reduce of ``(rank + 1) * (i % 7 + 1)`` everywhere, checked on the host."""
    _fill[(send.size + 63) // 64, 64](send, np.float32((comm.rank + 1) * (i % 7 + 1)))
    comm.all_reduce(send, recv)
    cuda.synchronize()
    comm.check_device_errors()
    got = recv.copy_to_host()
    want = comm.size * (comm.size + 1) / 2 * (i % 7 + 1)
    if not (got == want).all():
        raise AssertionError(f"rank {comm.rank} of {comm.size}: call {i}: expected {want}, got {got[got != want][:4]}")


def _rank(rank: int, size: int, uid: bytes, args: dict, out) -> None:
    try:
        comm = pymscclpp.Communicator.from_unique_id(UniqueId.from_bytes(uid), rank, size)
        send = cuda.to_device(np.zeros(args["count"], np.float32))
        recv = cuda.to_device(np.zeros(args["count"], np.float32))
        for i in range(args["before"]):
            _checked(comm, send, recv, i)
        comm.barrier()  # every rank's calls before the death have returned (a death during one may fail it)
        if rank == size - 1:
            _fill[(send.size + 63) // 64, 64](send, np.float32((rank + 1) * (args["before"] % 7 + 1)))
            comm.all_reduce(send, recv)  # in flight on the GPU when this process dies
            out.send(("died", time.monotonic()))
            os.kill(os.getpid(), signal.SIGKILL)
        failed = None
        for i in range(args["before"], args["before"] + 100):  # the victim's last call may have completed (sim)
            try:
                _checked(comm, send, recv, i)
            except PymscclppError as exc:
                failed, failed_at = f"{type(exc).__name__}: {exc}", time.monotonic()
                break
        if failed is None:
            raise AssertionError(f"rank {rank}: 100 all-reduces completed although rank {size - 1} died")
        t0 = time.monotonic()
        shrunk = comm.shrink()
        shrunk_at = time.monotonic()
        _checked(shrunk, send, recv, 0)
        first_ok = time.monotonic()
        for i in range(1, args["iters"]):
            _checked(shrunk, send, recv, i)
        done = time.monotonic()
        out.send(("ok", dict(rank=rank, new_rank=shrunk.rank, new_size=shrunk.size, error=failed,
                             failed_at=failed_at, shrink_s=shrunk_at - t0, first_call_s=first_ok - shrunk_at,
                             first_ok=first_ok, loop_s=done - first_ok)))
        shrunk.close()
    except BaseException:
        out.send(("error", f"rank {rank}:\n{traceback.format_exc()}"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--np", type=int, default=int(os.environ.get("NP", 4)))
    ap.add_argument("--iters", type=int, default=int(os.environ.get("SHRINK_ITERS", 10000)))
    ap.add_argument("--before", type=int, default=100, help="checked all-reduces before the death")
    ap.add_argument("--count", type=int, default=16384, help="float32 elements per all-reduce")
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.np < 3:
        raise SystemExit("run with --np 3 or more (two survivors at least)")
    uid = get_unique_id(addr="127.0.0.1").to_bytes()
    pipes = [_CTX.Pipe(duplex=False) for _ in range(args.np)]
    procs = [_CTX.Process(target=_rank, args=(r, args.np, uid, vars(args), pipes[r][1]), daemon=True)
             for r in range(args.np)]
    for p in procs:
        p.start()
    results, errors, died = {}, [], None
    deadline = time.monotonic() + args.timeout
    for r, (reader, _) in enumerate(pipes):
        left = deadline - time.monotonic()
        if not reader.poll(max(0.0, left)):
            errors.append(f"rank {r}: no answer within {args.timeout} s")
            continue
        kind, value = reader.recv()
        if kind == "died":
            died = value
        elif kind == "ok":
            results[r] = value
        else:
            errors.append(value)
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
    report = {"np": args.np, "iters": args.iters, "count": args.count, "target_s": TARGET_S, "errors": errors}
    if died is not None and results:
        for r, res in sorted(results.items()):
            res["death_to_first_ok_s"] = res["first_ok"] - died
            print(f"rank {r} -> {res['new_rank']}/{res['new_size']}: {res['error'][:100]}; "
                  f"death to error {res['failed_at'] - died:.3f} s; shrink {res['shrink_s']:.3f} s; first call "
                  f"{res['first_call_s']:.3f} s; death to first correct call {res['death_to_first_ok_s']:.3f} s; "
                  f"{args.iters} checked all-reduces in {res['loop_s']:.2f} s", flush=True)
        report["death_to_first_ok_s"] = max(res["death_to_first_ok_s"] for res in results.values())
        report["ranks"] = results
        print(f"shrink_after_death: death -> first correct call on the shrunk communicator "
              f"{report['death_to_first_ok_s']:.3f} s (target {TARGET_S} s)", flush=True)
    for e in errors:
        print(e, file=sys.stderr, flush=True)
    ok = not errors and died is not None and len(results) == args.np - 1 and \
        all(res["new_size"] == args.np - 1 for res in results.values())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    print("PASS shrink_after_death" if ok else "FAIL shrink_after_death", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
